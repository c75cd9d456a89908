//! socklab against Debian's real `sockperf` on loopback, both ways (issue 27 part 3):
//! `sockperf pp`/`ul` (TCP and UDP) against `socklab echo`, and `socklab pingpong --to
//! sockperf://` against `sockperf sr`. Skipped (and counted) where sockperf is not installed.

mod common;

use std::io::Read;
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{run, spawn_announced};

const SOCKPERF: &str = "/usr/bin/sockperf";
/// Far beyond a 1-second sockperf run, even with the CPUs loaded.
const BOUND: Duration = Duration::from_secs(30);

fn sockperf_or_skip(test: &str) -> bool {
    if Path::new(SOCKPERF).exists() {
        return true;
    }
    socklab_sys::skip::skip(test, "no /usr/bin/sockperf", "apt install sockperf");
    false
}

/// Waits for `child` at most [`BOUND`] (killing it past that); returns its exit code and stdout.
fn finish(mut child: Child) -> (i32, String) {
    let t = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code().unwrap_or(-1);
        }
        if t.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sockperf still running after {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (code, out)
}

/// `sockperf MODE [--tcp] -i 127.0.0.1 -p PORT -t 1 -m 64`, its exit code and output.
fn client(mode: &str, tcp: bool, port: &str) -> (i32, String) {
    let mut c = Command::new(SOCKPERF);
    c.arg(mode);
    if tcp {
        c.arg("--tcp");
    }
    let child = c
        .args(["-i", "127.0.0.1", "-p", port, "-t", "1", "-m", "64"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    finish(child)
}

/// The number after `key=` in sockperf's `[Total Run]` line.
fn total(out: &str, key: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.contains("[Total Run]"))
        .unwrap_or_else(|| panic!("no [Total Run] in:\n{out}"));
    let v = line.split(&format!("{key}=")).nth(1).unwrap();
    v.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn against_echo(mode: &str, tcp: bool) -> (u64, u64) {
    let mut args = vec![
        "echo",
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--announce",
        "-q",
    ];
    if !tcp {
        args.push("--udp");
    }
    let (mut echo, addr) = spawn_announced(&args);
    let port = addr.rsplit(':').next().unwrap().to_string();
    let (code, out) = client(mode, tcp, &port);
    let _ = echo.kill();
    let _ = echo.wait();
    assert_eq!(code, 0, "sockperf {mode} tcp={tcp}:\n{out}");
    assert!(
        out.contains("Summary: Latency is"),
        "sockperf {mode} tcp={tcp} reports no latency:\n{out}"
    );
    (total(&out, "SentMessages"), total(&out, "ReceivedMessages"))
}

#[test]
fn sockperf_ping_pong_is_answered_by_socklab_echo_over_tcp_and_udp() {
    if !sockperf_or_skip("sockperf_ping_pong_is_answered_by_socklab_echo_over_tcp_and_udp") {
        return;
    }
    for tcp in [true, false] {
        let (sent, got) = against_echo("pp", tcp);
        // Ping-pong: every message but the one in flight at the end is answered.
        assert!(
            got > 0 && sent - got <= 1,
            "tcp={tcp}: sent {sent}, received {got}"
        );
    }
}

#[test]
fn sockperf_under_load_gets_answers_only_to_its_pong_requests() {
    if !sockperf_or_skip("sockperf_under_load_gets_answers_only_to_its_pong_requests") {
        return;
    }
    for tcp in [true, false] {
        let (sent, got) = against_echo("ul", tcp);
        // sockperf ul asks for a reply on a few messages (about 1 in 100 by default).
        assert!(
            got > 0 && got * 10 < sent,
            "tcp={tcp}: sent {sent}, received {got}"
        );
    }
}

/// A free loopback port for a server (TCP or UDP) that socklab does not start.
fn free_port(tcp: bool) -> u16 {
    if tcp {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    } else {
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}

/// A server process, killed and reaped when dropped (also when a test fails).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sockperf sr` and waits until it answers (a connect over TCP; a sockperf pong
/// request over UDP), at most [`BOUND`].
fn sockperf_sr(tcp: bool) -> (Server, u16) {
    let port = free_port(tcp);
    let mut c = Command::new(SOCKPERF);
    c.arg("sr");
    if tcp {
        c.arg("--tcp");
    }
    let child = Server(
        c.args(["-i", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    probe
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    // seq 1, flags client|pong, length 14: the smallest message sockperf answers.
    let ping = [0, 0, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 14];
    loop {
        let up = if tcp {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        } else {
            probe.send_to(&ping, ("127.0.0.1", port)).is_ok() && probe.recv(&mut [0; 64]).is_ok()
        };
        if up {
            return (child, port);
        }
        assert!(
            t.elapsed() < BOUND,
            "sockperf sr never answered on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pingpong_measures_an_unmodified_sockperf_server() {
    if !sockperf_or_skip("pingpong_measures_an_unmodified_sockperf_server") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    for tcp in [true, false] {
        let (sr, port) = sockperf_sr(tcp);
        let to = format!("sockperf://127.0.0.1:{port}");
        let mut args = vec![
            "pingpong", "--to", &to, "--reps", "2", "--count", "100", "--db", db,
        ];
        if !tcp {
            args.push("--udp");
        }
        let (code, _, err) = run(&args);
        drop(sr);
        assert_eq!(code, 0, "{args:?}: {err}");
        // `results show` shows the latest experiment: this one.
        let (code, json, err) = run(&["results", "show", "--json", "--db", db]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 1, "{json}");
        let cell = &cells[0];
        assert_eq!(cell["config"]["to"].as_str(), Some(to.as_str()), "{cell}");
        assert_eq!(
            cell["config"]["udp"].as_str(),
            Some(if tcp { "false" } else { "true" })
        );
        assert_eq!(cell["invalid"], 0, "{cell}");
        let p50 = &cell["metrics"]["rtt_p50_us"];
        assert_eq!(p50["n"], 2, "{cell}");
        assert!(p50["min"].as_f64().unwrap() > 0.0, "{cell}");
    }
}

/// `sockperf MODE [--tcp] -i 127.0.0.1 -p PORT EXTRA…` against `socklab echo`: exit code and
/// output.
fn against_echo_with(mode: &str, tcp: bool, extra: &[&str]) -> (i32, String) {
    let mut args = vec![
        "echo",
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--announce",
        "-q",
    ];
    if !tcp {
        args.push("--udp");
    }
    let (echo, addr) = spawn_announced(&args);
    let _echo = Server(echo);
    let port = addr.rsplit(':').next().unwrap();
    let mut c = Command::new(SOCKPERF);
    c.arg(mode);
    if tcp {
        c.arg("--tcp");
    }
    let child = c
        .args(["-i", "127.0.0.1", "-p", port])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    finish(child)
}

/// sockperf's own check of the answers it got: none duplicated, none out of order (and over
/// TCP none dropped).
fn answers_in_order(out: &str, tcp: bool) -> bool {
    let dropped_ok = !tcp || out.contains("# dropped messages = 0;");
    dropped_ok && out.contains("# duplicated messages = 0; # out-of-order messages = 0")
}

/// Ping-pong at the message size limits (14 bytes; 65507 over UDP, 1 MiB - 1 over TCP), a
/// size range (`-r`), a paced rate (`--mps`), a longer run (`-t 2`) and sockperf's data
/// integrity check: every message but the one in flight at the end is answered, in order.
#[test]
fn sockperf_ping_pong_at_the_size_limits_rates_and_ranges_is_answered_by_socklab_echo() {
    let test = "sockperf_ping_pong_at_the_size_limits_rates_and_ranges_is_answered_by_socklab_echo";
    if !sockperf_or_skip(test) {
        return;
    }
    let cases: &[(bool, &[&str])] = &[
        (true, &["-t", "1", "-m", "14"]),
        (true, &["-t", "1", "-m", "1048575"]),
        (
            true,
            &["-t", "1", "-m", "200", "-r", "150", "--data-integrity"],
        ),
        (true, &["-t", "2", "-m", "64", "--mps", "500"]),
        (false, &["-t", "1", "-m", "14"]),
        (false, &["-t", "1", "-m", "65507"]),
        (
            false,
            &["-t", "1", "-m", "200", "-r", "150", "--data-integrity"],
        ),
        (false, &["-t", "2", "-m", "64", "--mps", "500"]),
    ];
    for &(tcp, extra) in cases {
        let (code, out) = against_echo_with("pp", tcp, extra);
        assert_eq!(code, 0, "tcp={tcp} {extra:?}:\n{out}");
        let (sent, got) = (total(&out, "SentMessages"), total(&out, "ReceivedMessages"));
        assert!(
            got > 0 && sent - got <= 1,
            "tcp={tcp} {extra:?}: sent {sent}, received {got}:\n{out}"
        );
        assert!(answers_in_order(&out, tcp), "tcp={tcp} {extra:?}:\n{out}");
    }
}

/// Under-load at a rate (`--mps`), with a reply asked every 10th message, and at the largest
/// message: only the pong requests are answered, in order.
#[test]
fn sockperf_under_load_at_rates_and_the_size_limits_is_answered_by_socklab_echo() {
    let test = "sockperf_under_load_at_rates_and_the_size_limits_is_answered_by_socklab_echo";
    if !sockperf_or_skip(test) {
        return;
    }
    let cases: &[(bool, &[&str], u64)] = &[
        (
            true,
            &[
                "-t",
                "1",
                "-m",
                "64",
                "--mps",
                "5000",
                "--reply-every",
                "10",
            ],
            10,
        ),
        (
            true,
            &[
                "-t",
                "1",
                "-m",
                "1048575",
                "--mps",
                "200",
                "--reply-every",
                "10",
            ],
            10,
        ),
        (
            false,
            &[
                "-t",
                "1",
                "-m",
                "64",
                "--mps",
                "5000",
                "--reply-every",
                "10",
            ],
            10,
        ),
        (
            false,
            &[
                "-t",
                "1",
                "-m",
                "65507",
                "--mps",
                "100",
                "--reply-every",
                "2",
            ],
            2,
        ),
    ];
    for &(tcp, extra, every) in cases {
        let (code, out) = against_echo_with("ul", tcp, extra);
        assert_eq!(code, 0, "tcp={tcp} {extra:?}:\n{out}");
        let (sent, got) = (total(&out, "SentMessages"), total(&out, "ReceivedMessages"));
        // At most one answer per pong request (every `every`-th message), and some.
        assert!(
            got > 0 && got <= sent / every + 1,
            "tcp={tcp} {extra:?}: sent {sent}, received {got}:\n{out}"
        );
        assert!(answers_in_order(&out, tcp), "tcp={tcp} {extra:?}:\n{out}");
    }
}

/// `sockperf sr`, TCP or UDP, with extra arguments; waits until it answers, as [`sockperf_sr`].
fn sockperf_sr_with(tcp: bool, extra: &[&str]) -> (Server, u16) {
    let port = free_port(tcp);
    let mut c = Command::new(SOCKPERF);
    c.arg("sr");
    if tcp {
        c.arg("--tcp");
    }
    let child = Server(
        c.args(["-i", "127.0.0.1", "-p", &port.to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let to = format!("sockperf://127.0.0.1:{port}");
    let up = common::wait_until(BOUND, || {
        let mut args = vec!["pingpong", "--to", &to, "--count", "1", "--reps", "1"];
        args.extend(["--warmup", "0", "--db", ":memory:"]);
        if !tcp {
            args.push("--udp");
        }
        run(&args).0 == 0
    });
    assert!(up, "sockperf sr never answered on port {port}");
    (child, port)
}

/// `pingpong --to sockperf://` at the size limits (14 and 65507 over UDP; 14 and 1 MiB - 1
/// over TCP, against `sockperf sr -m 1048575`), several sizes and repetitions in one
/// experiment: stored per size, and in the report.
#[test]
fn pingpong_to_sockperf_sr_at_the_size_limits_is_stored_and_reported() {
    if !sockperf_or_skip("pingpong_to_sockperf_sr_at_the_size_limits_is_stored_and_reported") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    for (tcp, sizes, extra) in [
        (true, "14,1048575", &["-m", "1048575"][..]),
        (false, "14,65507", &[][..]),
    ] {
        let (sr, port) = sockperf_sr_with(tcp, extra);
        let to = format!("sockperf://127.0.0.1:{port}");
        let mut args = vec![
            "pingpong", "--to", &to, "--size", sizes, "--reps", "2", "--count", "20", "--db", db,
        ];
        if !tcp {
            args.push("--udp");
        }
        let (code, _, err) = run(&args);
        drop(sr);
        assert_eq!(code, 0, "{args:?}: {err}");
        let (code, json, err) = run(&["results", "show", "--json", "--db", db]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let cells = v["cells"].as_array().unwrap();
        let mut got: Vec<&str> = cells
            .iter()
            .map(|c| c["config"]["size"].as_str().unwrap())
            .collect();
        got.sort_by_key(|s| s.len());
        assert_eq!(got, sizes.split(',').collect::<Vec<_>>(), "{json}");
        for cell in cells {
            assert_eq!(cell["config"]["to"].as_str(), Some(to.as_str()), "{cell}");
            assert_eq!(cell["metrics"]["rtt_p50_us"]["n"], 2, "{cell}");
            assert_eq!(cell["metrics"]["rtt_p90_us"]["n"], 2, "{cell}");
        }
    }
    let out = dir.path().join("report");
    let (code, _, err) = run(&["report", "--db", db, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("sockperf://127.0.0.1:")
            && md.contains("size=1048575")
            && md.contains("size=65507"),
        "{md}"
    );
}

/// A closed port behind `sockperf://` is one line that says to start `sockperf sr`, not
/// `socklab echo`, and nothing is stored.
#[test]
fn pingpong_to_a_closed_sockperf_port_says_to_start_sockperf_sr() {
    let port = free_port(true).to_string();
    let to = format!("sockperf://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let (code, _, err) = run(&[
        "pingpong",
        "--to",
        &to,
        "--reps",
        "1",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("`sockperf sr` there, in TCP mode") && !err.contains("socklab echo"),
        "{err}"
    );
}
