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
