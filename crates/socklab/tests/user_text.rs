//! Text that reaches a user: a peer's, a file's or the command line's bytes are escaped and
//! cut before they reach a terminal (the servers' logs, the errors); user-facing text names
//! the product, not its issue tracker; a unit written apart from its value, and the ambiguous
//! `KB`, are refused saying what to write. Real processes over loopback, every wait bounded.

mod common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::Child;
use std::time::{Duration, Instant};

use common::{run, spawn_announced};

/// The longest line a server's log may have here (its quotes are cut at 80 characters).
const MAX_LOG_LINE: usize = 1200;

/// SIGINT to a server child; waits (at most 10 s) for it and returns its stderr.
fn stop(mut child: Child) -> String {
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not end within 10 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = Vec::new();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    String::from_utf8(err).expect("stderr is UTF-8")
}

/// No control character but line ends in `text`, and no line longer than `max` bytes.
fn assert_terminal_safe(text: &str, max: usize) {
    for l in text.lines() {
        assert!(
            !l.chars().any(char::is_control),
            "a raw control character reaches the terminal: {l:?}"
        );
        assert!(
            l.len() <= max,
            "a line of {} bytes: {:?}…",
            l.len(),
            &l[..200]
        );
    }
}

/// Sends `line` on a new connection to `addr`, then reads what comes back until the server
/// closes (at most 5 s): each connection's log line is written by then.
fn send_line(addr: &str, line: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(line);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

const HOSTILE: &[u8] = b"\x1b]0;owned\x07\x1b[2J\r\x9b";

#[test]
fn the_sinks_log_carries_no_control_byte_of_a_client_and_no_endless_line() {
    let (sink, addr) =
        spawn_announced(&["sink", "--port", "0", "--bind", "127.0.0.1", "--announce"]);
    let esc = String::from_utf8_lossy(HOSTILE);
    for line in [
        format!("SOCKLAB BULK/2 test={esc} up=1\n"),
        format!("SOCKLAB BULK/1 read_size={esc}\n"),
        format!("SOCKLAB {esc}BULK/9\n"),
        format!("SOCKLAB JOIN/2 test={esc} index=1\n"),
    ] {
        let said = send_line(&addr, line.as_bytes());
        assert!(said.starts_with("ERROR "), "{line:?}: {said:?}");
        assert!(!said.contains('\x1b'), "the reply echoes ESC: {said:?}");
    }
    // A control line of 1 MiB, and one that is not UTF-8.
    let mut long = b"SOCKLAB BULK/2 test=".to_vec();
    long.extend(std::iter::repeat_n(b'\x1b', 1 << 20));
    long.push(b'\n');
    send_line(&addr, &long);
    send_line(&addr, b"SOCKLAB BULK/1 read_size=\xff\xfe\x1b\n");
    let err = stop(sink);
    assert!(
        err.contains("refused (bad test id '\\x1b]0;owned\\x07"),
        "{err}"
    );
    assert_terminal_safe(&err, MAX_LOG_LINE);
}

#[test]
fn echo_and_udp_sink_logs_carry_no_control_byte_of_a_client() {
    let (echo, addr) =
        spawn_announced(&["echo", "--port", "0", "--bind", "127.0.0.1", "--announce"]);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(HOSTILE).unwrap();
    let mut back = vec![0u8; HOSTILE.len()];
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.read_exact(&mut back).unwrap();
    drop(s);
    send_line(&addr, &vec![0x1b; 1 << 20]);
    assert_terminal_safe(&stop(echo), MAX_LOG_LINE);

    let (sink, addr) = spawn_announced(&[
        "sink",
        "--udp",
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--announce",
    ]);
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..20 {
        u.send_to(HOSTILE, &addr).unwrap();
        u.send_to(&[0x1b; 1400], &addr).unwrap();
    }
    assert_terminal_safe(&stop(sink), MAX_LOG_LINE);
}

/// A client names its files: a refused name reaches the server's log escaped and cut.
#[test]
fn the_transfer_servers_log_escapes_a_clients_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = spawn_announced(&[
        "transfer",
        "serve",
        "--proto",
        "tcp",
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--announce",
        "--dir",
        dir.path().to_str().unwrap(),
        "--max-file-size",
        "1K",
    ]);
    let name = format!("{}{}", String::from_utf8_lossy(HOSTILE), "n".repeat(200));
    let manifest = socklab_transfer::Manifest {
        files: vec![socklab_transfer::Entry {
            name,
            size: 1 << 20,
            hash: [0; 32],
        }],
    }
    .encode();
    let mut frame = Vec::new();
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.extend_from_slice(&0u64.to_le_bytes());
    frame.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
    frame.extend_from_slice(&manifest);
    let said = send_line(&addr, &frame);
    assert!(!said.contains('\x1b'), "the reply echoes ESC: {said:?}");
    let err = stop(server);
    assert!(err.contains("\\x1b]0;owned\\x07"), "{err}");
    assert_terminal_safe(&err, MAX_LOG_LINE);
}

#[test]
fn errors_quoting_the_command_line_or_a_file_are_escaped_and_short() {
    let long = format!(
        "{}{}",
        String::from_utf8_lossy(HOSTILE),
        "z".repeat(100_000)
    );
    for args in [
        vec![
            "bulk",
            "--dry-run",
            "--to",
            "127.0.0.1:9",
            "--duration",
            &long,
        ],
        vec![
            "bulk",
            "--dry-run",
            "--to",
            "127.0.0.1:9",
            "--bufsize",
            &long,
        ],
        vec!["bulk", "--dry-run", "--to", "127.0.0.1:9", "--link", &long],
        vec!["lab", "--suite", &long],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{err}");
        assert_terminal_safe(&err, 1000);
    }
    // /proc/self/environ as a trace: not text, and not quoted.
    let (code, _, err) = run(&[
        "bulk",
        "--dry-run",
        "--to",
        "127.0.0.1:9",
        "--link",
        "trace /proc/self/environ",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a text file"), "{err}");
    assert!(!err.contains("PATH="), "{err}");
    assert_terminal_safe(&err, 300);
}

/// An experiment file that is not text is refused as such, nothing of it quoted; one that never
/// ends (`/dev/zero`) is refused at 16 MiB, within 20 s.
#[test]
fn an_experiment_file_that_is_not_text_is_refused_unquoted() {
    let (code, _, err) = run(&["run", "--dry-run", "/proc/self/environ"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a text file"), "{err}");
    assert!(!err.contains("PATH="), "{err}");
    let mut child = common::socklab()
        .args(["run", "--dry-run", "/dev/zero"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("run /dev/zero still reading after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("larger than 16 MiB"), "{err}");
}

#[test]
fn lab_list_and_every_help_speak_of_the_product_not_its_issue_tracker() {
    let (code, out, _) = run(&["lab", "--list"]);
    assert_eq!(code, 0);
    assert!(out.contains("rrul"), "{out}");
    let mut texts = vec![("lab --list".to_string(), out)];
    let commands = [
        "sink", "bulk", "echo", "pingpong", "transfer", "run", "report", "results", "lab", "netem",
        "serve", "rrul", "load", "hosts",
    ];
    texts.push(("--help".into(), run(&["--help"]).1));
    for c in commands {
        texts.push((format!("{c} --help"), run(&[c, "--help"]).1));
    }
    let tracker = regex_lite(&["issue ", "issues ", "item "]);
    for (what, text) in texts {
        for l in text.lines() {
            assert!(!tracker(l), "{what}: {l}");
        }
    }
}

/// Whether a line names the issue tracker: one of `words` followed by a digit.
fn regex_lite(words: &'static [&'static str]) -> impl Fn(&str) -> bool {
    move |l: &str| {
        let l = l.to_ascii_lowercase();
        words.iter().any(|w| {
            l.match_indices(w)
                .any(|(i, _)| l[i + w.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
    }
}

#[test]
fn a_unit_apart_from_its_value_and_kb_are_refused_saying_what_to_write() {
    let (code, _, err) = run(&[
        "bulk",
        "--dry-run",
        "--to",
        "127.0.0.1:9",
        "--link",
        "delay 50 ms",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`delay 50 ms`: write the value and its unit together: `50ms`"),
        "{err}"
    );
    let (code, _, err) = run(&[
        "bulk",
        "--dry-run",
        "--to",
        "127.0.0.1:9",
        "--bufsize",
        "128KB",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("write 128K (KiB, 1024-based) or 128000"),
        "{err}"
    );
    let (code, _, err) = run(&[
        "bulk",
        "--dry-run",
        "--to",
        "127.0.0.1:9",
        "--bufsize",
        "128KiB",
    ]);
    assert_eq!(code, 0, "{err}");
}
