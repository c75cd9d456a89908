//! Debian's real iperf3 client (3.12) against `socklab sink`: every option the client sends
//! is in effect on the sink's side, read back from the kernel and shown in the sink's output
//! (`--get-server-output`), or the test is refused with iperf3's "not implemented" and the
//! sink's log names the key (issue 27 part 1). Loopback only; every wait is bounded; skipped
//! (and said so) where /usr/bin/iperf3 is missing.

mod common;

use std::net::SocketAddr;

use common::iperf3::{client_json, have_iperf3, SinkProc};
use common::strace::Strace;
use serde_json::Value;

fn sink() -> SinkProc {
    SinkProc::start(&[])
}

/// `iperf3 … -J ARGS` to its end: its JSON (3.12 with `-J` puts an error in `"error"`).
fn json(addr: SocketAddr, args: &[&str]) -> Value {
    client_json(addr, args)
}

/// A test that must run: its JSON, no error.
fn ran(addr: SocketAddr, args: &[&str]) -> Value {
    let v = json(addr, args);
    assert!(v.get("error").is_none(), "{args:?}: {}", v["error"]);
    v
}

/// The sink's own text (`server_output_text`).
fn server_text(v: &Value) -> &str {
    v["server_output_text"]
        .as_str()
        .unwrap_or_else(|| panic!("no server_output_text in {}", v["end"]))
}

#[test]
fn nodelay_tos_and_dont_fragment_are_read_back_on_the_sinks_stream() {
    if !have_iperf3("nodelay_tos_and_dont_fragment_are_read_back_on_the_sinks_stream") {
        return;
    }
    let s = sink();
    let args = [
        "-t",
        "1",
        "-N",
        "-S",
        "0x10",
        "--dont-fragment",
        "--get-server-output",
    ];
    let v = ran(s.addr, &args);
    let text = server_text(&v);
    for line in [
        "stream sockets: TCP_NODELAY 1 (nodelay 1 asked)",
        "stream sockets: IP_TOS 16 (TOS 16 asked)",
        "stream sockets: IP_MTU_DISCOVER 2 (dont_fragment 1 asked)",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    // The sink's log says the same of the test.
    s.logged(&[
        "iperf3 control (1 streams; in effect: TCP_NODELAY 1 (nodelay 1 asked), IP_TOS 16",
        "IP_MTU_DISCOVER 2",
    ]);
}

/// What the client received per second over the test (`sum_received`), bits/s.
fn received_bps(v: &Value) -> f64 {
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no sum_received in {}", v["end"]))
}

#[test]
fn fq_rate_and_bandwidth_pace_the_sinks_sending_streams() {
    if !have_iperf3("fq_rate_and_bandwidth_pace_the_sinks_sending_streams") {
        return;
    }
    let s = sink();
    // 80 Mbit/s asked, 10 MB/s: unpaced, loopback carries gigabits. The bound is physics
    // (a paced stream cannot deliver twice its rate over 2 s), not a timing.
    for (flag, asked) in [("--fq-rate", "80M"), ("-b", "80M")] {
        let v = ran(
            s.addr,
            &["-t", "2", "-R", flag, asked, "--get-server-output"],
        );
        let text = server_text(&v);
        assert!(
            text.contains("SO_MAX_PACING_RATE 10000000 bytes/s on each sending stream"),
            "{flag}: {text}"
        );
        assert!(text.contains("pacing_timer 1000 µs"), "{flag}: {text}");
        s.logged(&[
            "in effect: SO_MAX_PACING_RATE 10000000 bytes/s",
            &format!(
                "{} 80000000",
                if flag == "-b" { "bandwidth" } else { "fqrate" }
            ),
        ]);
        let bps = received_bps(&v);
        assert!(
            bps > 0.0 && bps < 160e6,
            "{flag} {asked}: the client received {bps} bit/s"
        );
    }
}

#[test]
fn options_the_sink_cannot_apply_are_refused_with_a_reason_the_client_prints() {
    if !have_iperf3("options_the_sink_cannot_apply_are_refused_with_a_reason_the_client_prints") {
        return;
    }
    let s = sink();
    let cases: [(&[&str], &str); 9] = [
        (&["-M", "1000"], "`MSS`"),
        (&["-A", "0,0"], "`server_affinity`"),
        (&["-L", "5"], "`flowlabel`"),
        (&["-R", "-b", "10M/4"], "`burst`"),
        (&["-u", "-b", "1M", "-O", "1"], "`omit`"),
        (&["-u", "-b", "1M", "-w", "100K"], "`window`"),
        (&["-u", "-R", "-b", "1M", "-S", "16"], "`TOS`"),
        (
            &["-u", "-R", "-b", "1M", "--dont-fragment"],
            "`dont_fragment`",
        ),
        (&["-u", "-R", "-b", "1M", "--fq-rate", "1M"], "`fqrate`"),
    ];
    for (args, key) in cases {
        let mut all = vec!["-t", "1"];
        all.extend_from_slice(args);
        let v = json(s.addr, &all);
        let err = v["error"].as_str().unwrap_or_default();
        assert!(err.contains("not implemented"), "{args:?}: {v}");
        s.logged(&["refused", key, "not served"]);
    }
}

#[test]
fn repeating_payload_is_what_the_sink_sends() {
    if !have_iperf3("repeating_payload_is_what_the_sink_sends") {
        return;
    }
    if !std::path::Path::new("/usr/bin/strace").exists() {
        socklab_sys::skip::skip(
            "repeating_payload_is_what_the_sink_sends",
            "no strace to see the sink's sends",
            "/usr/bin/strace",
        );
        return;
    }
    let s = sink();
    let dir = tempfile::tempdir().unwrap();
    let Some(trace) = Strace::attach(
        s.child.id(),
        dir.path().join("trace"),
        &["-e", "trace=write,sendto", "-s", "20"],
    ) else {
        socklab_sys::skip::skip(
            "repeating_payload_is_what_the_sink_sends",
            "strace cannot attach",
            "/usr/bin/strace",
        );
        return;
    };
    let v = ran(
        s.addr,
        &[
            "-t",
            "1",
            "-R",
            "-l",
            "4096",
            "--repeating-payload",
            "--get-server-output",
        ],
    );
    assert!(server_text(&v).contains("repeating_payload: the sink sends iperf3's pattern"));
    // UDP: the datagram's first 12 or 16 bytes are iperf3's header, the pattern follows it
    // (strace shows 20 bytes: the pattern's bytes 12 to 19, `23456789`, end them).
    ran(
        s.addr,
        &[
            "-t",
            "1",
            "-u",
            "-R",
            "-b",
            "1M",
            "-l",
            "100",
            "--repeating-payload",
        ],
    );
    let calls = trace.finish();
    let tcp = calls
        .lines()
        .filter(|l| l.contains("\"01234567890123456789\"..., 4096"))
        .count();
    assert!(
        tcp > 0,
        "no TCP write of iperf3's pattern by the sink:\n{}",
        &calls[..calls.len().min(3000)]
    );
    let udp = calls
        .lines()
        .filter(|l| l.contains("sendto(") && l.contains("23456789\"..., 100,"))
        .count();
    assert!(
        udp > 0,
        "no UDP datagram of iperf3's pattern:\n{}",
        &calls[..calls.len().min(3000)]
    );
}
