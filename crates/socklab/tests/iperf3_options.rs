//! Debian's real iperf3 client (3.12) against `socklab sink` with the options that change
//! what the sink's streams do (issue 27 part 1): `--bidir`, `-O`, `-w`, `-C`, `-Z`,
//! `--cport` and `--get-server-output`, each with `-J` parsed and asserted. Loopback only;
//! every wait is bounded; skipped (and said so) where /usr/bin/iperf3 is missing.

mod common;

use std::net::{SocketAddr, TcpListener};

use common::iperf3::{have_iperf3, run_client, SinkProc};
use common::strace::Strace;
use serde_json::Value;

fn sink() -> SinkProc {
    SinkProc::start(&[])
}

/// `iperf3 … -J ARGS`, which must exit 0 without an error: its JSON.
fn json(addr: SocketAddr, args: &[&str]) -> Value {
    let mut all = vec!["-J"];
    all.extend_from_slice(args);
    let (status, text) = run_client(addr, &all);
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: JSON {e}: {text}"));
    assert!(status.success(), "{args:?}: iperf3 exited {status}: {text}");
    assert!(v.get("error").is_none(), "{args:?}: {}", v["error"]);
    v
}

fn bytes(v: &Value, what: &str) -> u64 {
    v[what]["bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no {what}.bytes in {v}"))
}

/// The sink's own text (`server_output_text`).
fn server_text(v: &Value) -> &str {
    v["server_output_text"]
        .as_str()
        .unwrap_or_else(|| panic!("no server_output_text in {}", v["end"]))
}

/// The bytes of a `… total: N bytes` line of the sink's text.
fn text_total(text: &str, dir: &str) -> u64 {
    let head = format!("{dir} total: ");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(head.as_str()))
        .unwrap_or_else(|| panic!("no {head:?} line in:\n{text}"));
    line.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn bidir_reports_both_directions_with_the_sinks_own_figures() {
    if !have_iperf3("bidir_reports_both_directions_with_the_sinks_own_figures") {
        return;
    }
    let s = sink();
    let v = json(
        s.addr,
        &["-t", "1", "--bidir", "-P", "2", "--get-server-output"],
    );
    let end = &v["end"];
    for k in [
        "sum_sent",
        "sum_received",
        "sum_sent_bidir_reverse",
        "sum_received_bidir_reverse",
    ] {
        assert!(bytes(end, k) > 0, "{k}: {}", end[k]);
    }
    let streams = end["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4, "two each way: {end}");
    let client_sends = |s: &&Value| s["sender"]["sender"].as_bool() == Some(true);
    assert_eq!(streams.iter().filter(client_sends).count(), 2);
    // Client → sink: what the sink read, stream by stream, adds up to sum_received.
    let up: u64 = streams
        .iter()
        .filter(client_sends)
        .map(|s| s["receiver"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(up, bytes(end, "sum_received"));
    // Both directions' sink-side figures are the sink's own (its text says the same).
    let text = server_text(&v);
    assert!(text.contains("4 streams (2 receive, 2 send)"), "{text}");
    assert_eq!(text_total(text, "receive"), bytes(end, "sum_received"));
    assert_eq!(
        text_total(text, "send"),
        bytes(end, "sum_sent_bidir_reverse")
    );
    // The sink sent on the reverse streams: it knows their retransmits.
    assert!(end["sum_sent_bidir_reverse"]["retransmits"]
        .as_i64()
        .is_some());
}

/// The bytes the client counted in its omitted intervals (`"omitted": true`).
fn omitted_bytes(v: &Value) -> u64 {
    let iv = v["intervals"].as_array().unwrap();
    let omitted: Vec<&Value> = iv
        .iter()
        .filter(|i| i["sum"]["omitted"].as_bool() == Some(true))
        .collect();
    assert!(!omitted.is_empty(), "the client omitted no interval");
    omitted
        .iter()
        .map(|i| i["sum"]["bytes"].as_u64().unwrap())
        .sum()
}

/// The bytes of the sink's log line for a stream (every byte it moved, omitted or not).
fn logged_bytes(s: &SinkProc, stream: &str) -> u64 {
    let line = s.logged(&[stream, "complete"]);
    let after = line.split(stream).nth(1).unwrap();
    after.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn omit_keeps_the_first_seconds_out_of_the_sinks_figures() {
    if !have_iperf3("omit_keeps_the_first_seconds_out_of_the_sinks_figures") {
        return;
    }
    let s = sink();
    // Two seconds omitted, one counted. The sink's log counts every byte it read; its
    // results leave out what came in its first two seconds (a sink that counted from the
    // start would report all of them). Where each side's two seconds end depends on when
    // each saw TEST_START, so the two sides' figures are not compared byte for byte.
    let v = json(s.addr, &["-t", "1", "-O", "2", "--get-server-output"]);
    assert!(omitted_bytes(&v) > 0);
    let got = bytes(&v["end"], "sum_received");
    let all = logged_bytes(&s, "iperf3 stream 1 up: ");
    assert!(got > 0 && got < all, "results {got} bytes, all read {all}");
    assert!(server_text(&v).contains("the first 2 s omitted"));
    // Reversed: the sink sends, and leaves its own omitted seconds out of what it reports.
    let v = json(s.addr, &["-t", "1", "-O", "2", "-R"]);
    assert!(omitted_bytes(&v) > 0);
    let sent = bytes(&v["end"], "sum_sent");
    let all = logged_bytes(&s, "iperf3 stream 1 down: ");
    assert!(
        sent > 0 && sent < all,
        "results {sent} bytes, all sent {all}"
    );
    assert!(bytes(&v["end"], "sum_received") > 0);
}

fn proc_number(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn window_is_set_on_the_sinks_streams_and_one_too_big_is_refused() {
    if !have_iperf3("window_is_set_on_the_sinks_streams_and_one_too_big_is_refused") {
        return;
    }
    let s = sink();
    let v = json(
        s.addr,
        &["-t", "1", "-w", "128K", "--bidir", "--get-server-output"],
    );
    // The kernel doubles what is set (for its bookkeeping): 128 KiB reads back as 256 KiB.
    let text = server_text(&v);
    assert!(
        text.contains("SO_SNDBUF 262144, SO_RCVBUF 262144 (window 131072 asked"),
        "{text}"
    );
    // A window past net.core.[rw]mem_max (the kernel gives twice the cap at most): refused
    // with iperf3's reason, as iperf3's own server refuses it.
    let cap =
        proc_number("/proc/sys/net/core/rmem_max").max(proc_number("/proc/sys/net/core/wmem_max"));
    let big = 4 * cap + 4096;
    if big <= 256 << 20 {
        // (iperf3 3.12 with -J exits 0 after an error; the error is in its JSON.)
        let (_, text) = run_client(s.addr, &["-J", "-t", "1", "-w", &big.to_string()]);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"], "socket buffer size not set correctly", "{text}");
        s.logged(&["refused", &format!("`window` {big}")]);
    }
}

fn available_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
}

#[test]
fn congestion_is_set_and_reported_and_an_unknown_one_is_refused_with_a_reason() {
    if !have_iperf3("congestion_is_set_and_reported_and_an_unknown_one_is_refused_with_a_reason") {
        return;
    }
    let s = sink();
    // Forward: the sink receives, and reports the algorithm its stream used.
    let v = json(s.addr, &["-t", "1", "-C", "reno", "--get-server-output"]);
    assert_eq!(v["end"]["receiver_tcp_congestion"], "reno", "{}", v["end"]);
    assert!(server_text(&v).contains("congestion reno"));
    if available_cc().split_whitespace().any(|c| c == "cubic") {
        // Reversed: the sink sends with it.
        let v = json(s.addr, &["-t", "1", "-C", "cubic", "-R"]);
        assert_eq!(v["end"]["sender_tcp_congestion"], "cubic", "{}", v["end"]);
    }
    // An algorithm this kernel lacks: iperf3's SERVER_ERROR, whose text the client prints;
    // the sink's log names the algorithm.
    let (_, text) = run_client(s.addr, &["-J", "-t", "1", "-C", "nosuch"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["error"],
        "unable to set TCP_CONGESTION: Supplied congestion control algorithm not supported on this host"
    );
    let (status, _) = run_client(s.addr, &["-t", "1", "-C", "nosuch"]);
    assert!(!status.success(), "without -J, the client exits non-zero");
    let line = s.logged(&["refused", "`congestion` \"nosuch\""]);
    assert!(line.contains("available here"), "{line}");
    // The sink keeps serving.
    json(s.addr, &["-t", "1"]);
}

#[test]
fn zerocopy_makes_the_sink_send_with_sendfile() {
    if !have_iperf3("zerocopy_makes_the_sink_send_with_sendfile") {
        return;
    }
    let s = sink();
    let dir = tempfile::tempdir().unwrap();
    let have_strace = std::path::Path::new("/usr/bin/strace").exists();
    let trace = if have_strace {
        Strace::attach(
            s.child.id(),
            dir.path().join("trace"),
            &["-e", "trace=sendfile"],
        )
    } else {
        None
    };
    let v = json(s.addr, &["-t", "1", "-R", "-Z", "--get-server-output"]);
    let text = server_text(&v);
    assert!(text.contains("(sendfile)"), "{text}");
    assert_eq!(text_total(text, "send"), bytes(&v["end"], "sum_sent"));
    match trace {
        Some(t) => {
            let calls = t.finish();
            let n = calls.lines().filter(|l| l.contains("sendfile(")).count();
            assert!(n > 0, "strace saw no sendfile call of the sink:\n{calls}");
        }
        None => socklab_sys::skip::skip(
            "zerocopy_makes_the_sink_send_with_sendfile (strace part)",
            "strace missing or cannot attach",
            "/usr/bin/strace",
        ),
    }
    // Receiving, zerocopy changes nothing (iperf3's server reads either way); the sink says so.
    let v = json(s.addr, &["-t", "1", "-Z", "--get-server-output"]);
    let text = server_text(&v);
    assert!(text.contains("(read)") && text.contains("zerocopy: applies to sending"));
}

/// A port free now, and the three after it (a best guess: nothing holds them).
fn free_ports() -> u16 {
    for _ in 0..20 {
        let p = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if p < 65530 && (1..4).all(|k| TcpListener::bind(("127.0.0.1", p + k)).is_ok()) {
            return p;
        }
    }
    panic!("no four free ports in a row on 127.0.0.1");
}

#[test]
fn cport_streams_come_from_the_clients_ports() {
    if !have_iperf3("cport_streams_come_from_the_clients_ports") {
        return;
    }
    let s = sink();
    let p = free_ports();
    let v = json(s.addr, &["-t", "1", "--bidir", "--cport", &p.to_string()]);
    assert!(bytes(&v["end"], "sum_received") > 0);
    assert!(bytes(&v["end"], "sum_sent_bidir_reverse") > 0);
    // The client's stream ports, in order: the first receives (the client sends on it).
    s.logged(&[&format!("127.0.0.1:{p} iperf3 stream 1 up"), "complete"]);
    s.logged(&[
        &format!("127.0.0.1:{} iperf3 stream 3 down", p + 1),
        "complete",
    ]);
}

#[test]
fn a_plain_client_prints_the_sinks_output() {
    if !have_iperf3("a_plain_client_prints_the_sinks_output") {
        return;
    }
    let s = sink();
    let (status, text) = run_client(s.addr, &["-t", "1", "-P", "2", "--get-server-output"]);
    assert!(status.success(), "{text}");
    let out = text
        .split("Server output:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no server output in:\n{text}"));
    assert!(
        out.contains("socklab sink: iperf3 test from 127.0.0.1:"),
        "{out}"
    );
    assert!(out.contains("2 streams (2 receive, 0 send)"), "{out}");
    assert!(out.contains("receive total: "), "{out}");
}
