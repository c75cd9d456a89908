//! Debian's real iperf3 client (3.12) against `socklab sink` (issue 27 part 1): forward with
//! one and two streams, reverse, a byte count, and two clients at once against one sink. The
//! client must exit 0 with JSON whose receiver figures (socklab's own) add up. Loopback only;
//! every wait is bounded; skipped (and said so) where /usr/bin/iperf3 is missing.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::iperf3::{have_iperf3, SinkProc, IPERF3};

fn sink() -> SinkProc {
    SinkProc::start(&["--quiet"])
}

/// Starts `iperf3 -c ADDR -p PORT -J ARGS`.
fn client(addr: SocketAddr, args: &[&str]) -> Child {
    Command::new(IPERF3)
        .args([
            "-c",
            &addr.ip().to_string(),
            "-p",
            &addr.port().to_string(),
            "-J",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a client at most 30 s (a test of 1 s; the bound is far from normal behaviour),
/// asserts exit 0 and returns its JSON.
fn finish(mut child: Child, what: &str) -> serde_json::Value {
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: iperf3 still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = reader.join().unwrap();
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(
        status.success(),
        "{what}: iperf3 exited {status}: {text} {err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: JSON {e}: {text}"));
    assert!(v.get("error").is_none(), "{what}: {}", v["error"]);
    v
}

/// The receiver's total is positive and equals the sum of the streams' receiver figures;
/// returns (streams, received bytes).
fn check_sums(v: &serde_json::Value, what: &str) -> (usize, u64) {
    let end = &v["end"];
    let total = end["sum_received"]["bytes"].as_u64().unwrap();
    assert!(total > 0, "{what}: sum_received.bytes {total}");
    let streams = end["streams"].as_array().unwrap();
    let sum: u64 = streams
        .iter()
        .map(|s| s["receiver"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, total, "{what}: streams vs sum_received");
    (streams.len(), total)
}

#[test]
fn iperf3_forward_one_and_two_streams() {
    if !have_iperf3("iperf3_forward_one_and_two_streams") {
        return;
    }
    let s = sink();
    let v = finish(client(s.addr, &["-t", "1"]), "-t 1");
    assert_eq!(check_sums(&v, "-t 1").0, 1);
    let v = finish(client(s.addr, &["-t", "1", "-P", "2", "-l", "64K"]), "-P 2");
    assert_eq!(check_sums(&v, "-P 2").0, 2);
}

#[test]
fn iperf3_reverse_the_sink_sends() {
    if !have_iperf3("iperf3_reverse_the_sink_sends") {
        return;
    }
    let s = sink();
    let v = finish(client(s.addr, &["-t", "1", "-R", "-P", "2"]), "-R");
    assert_eq!(check_sums(&v, "-R").0, 2);
    // The sink was the sender: its bytes and its retransmit count (TCP_INFO) are what the
    // client reports as sent.
    let sent = &v["end"]["sum_sent"];
    assert!(sent["bytes"].as_u64().unwrap() > 0, "{sent}");
    assert!(sent["retransmits"].as_i64().is_some(), "{sent}");
}

#[test]
fn iperf3_byte_count_is_all_received() {
    if !have_iperf3("iperf3_byte_count_is_all_received") {
        return;
    }
    let s = sink();
    let v = finish(client(s.addr, &["-n", "10M"]), "-n 10M");
    let (_, total) = check_sums(&v, "-n 10M");
    assert_eq!(
        total,
        10 << 20,
        "every byte the client sent was read by the sink"
    );
}

#[test]
fn two_iperf3_clients_at_once_against_one_sink() {
    if !have_iperf3("two_iperf3_clients_at_once_against_one_sink") {
        return;
    }
    let s = sink();
    let a = client(s.addr, &["-t", "2", "-P", "2"]);
    let b = client(s.addr, &["-t", "2", "-R"]);
    let va = finish(a, "client a");
    let vb = finish(b, "client b");
    assert_eq!(check_sums(&va, "client a").0, 2);
    assert_eq!(check_sums(&vb, "client b").0, 1);
}

#[test]
fn a_bad_cookie_and_a_huge_parameter_message_cost_only_their_connection() {
    if !have_iperf3("a_bad_cookie_and_a_huge_parameter_message_cost_only_their_connection") {
        return;
    }
    let s = sink();
    let bound = Some(Duration::from_secs(10));
    // A cookie, then a 1 MB length prefix: SERVER_ERROR (-2) with iperf3's "unable to receive
    // parameters" (114) and EMSGSIZE (90), and a close (issue 27 part 4).
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(bound).unwrap();
    c.write_all(b"abcdefghijklmnopqrstuvwxyz234567abcd\0")
        .unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 9, "PARAM_EXCHANGE");
    c.write_all(&(1u32 << 20).to_be_bytes()).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert_eq!(
        rest,
        [0xfe, 0, 0, 0, 114, 0, 0, 0, 90],
        "SERVER_ERROR, then the close"
    );
    // A stream with a cookie of no test, after a partial one: counted as raw, closed.
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(bound).unwrap();
    c.write_all(b"abcdefghijklmnopqrstuvwxyz234567abcdX")
        .unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    // The sink still serves a real client.
    let v = finish(client(s.addr, &["-t", "1"]), "after the hostile ones");
    check_sums(&v, "after the hostile ones");
}
