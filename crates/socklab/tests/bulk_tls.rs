//! `socklab bulk --tls` (issue 30 part 1): the real binary over loopback (and over the emulated
//! link as root), each TLS cell beside its plain twin, pinned to the certificate of the sink
//! socklab started; composed with --streams, --reverse, --bidir and --interval; the refusals
//! in one line.

mod common;

use common::{assert_usage_error, root_or_skip, run, spawn_announced};
use serde_json::Value;

/// Runs `bulk` with `args` (one repetition per cell, no warm-up) and returns the exit code,
/// stdout, stderr and the stored repetitions.
fn bulk(args: &[&str]) -> (i32, String, String, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let mut all = vec!["bulk", "--reps", "1", "--warmup", "0", "--db", db];
    all.extend_from_slice(args);
    let (c, out, err) = run(&all);
    let (_, json, _) = run(&["results", "export", "--db", db, "--format", "json"]);
    let reps = serde_json::from_str(&json).unwrap_or_default();
    (c, out, err, reps)
}

fn metric(rep: &Value, name: &str) -> Option<f64> {
    rep["metrics"][name].as_f64()
}

fn cell<'a>(reps: &'a [Value], label: &str) -> &'a Value {
    reps.iter()
        .find(|r| r["label"].as_str().unwrap_or("").contains(label))
        .unwrap_or_else(|| panic!("no repetition labelled {label} in {reps:?}"))
}

#[test]
fn tls_runs_beside_its_plain_twin_pinned_to_the_sinks_certificate() {
    let (c, out, err, reps) = bulk(&["--tls", "--duration", "300ms", "--verify"]);
    assert_eq!(c, 0, "{out}{err}");
    assert_eq!(reps.len(), 2, "{reps:?}");
    let on = cell(&reps, "tls=on");
    let off = cell(&reps, "tls=off");
    for r in [on, off] {
        assert!(metric(r, "gbps").is_some(), "{r}");
        assert!(metric(r, "snd_cpu_ns_per_byte").is_some(), "{r}");
        assert!(metric(r, "rcv_cpu_ns_per_byte").is_some(), "{r}");
        assert_eq!(r["extra"]["verified"], true);
    }
    assert!(metric(on, "tls_handshake_ms").is_some(), "{on}");
    assert_eq!(metric(off, "tls_handshake_ms"), None);
    assert_eq!(on["extra"]["tls"]["version"], "1.3");
    let cipher = on["extra"]["tls"]["cipher"].as_str().unwrap();
    assert!(cipher.starts_with("TLS13_"), "{cipher}");
    assert!(off["extra"].get("tls").is_none_or(Value::is_null));
    // The plain twin is the baseline the TLS cell is compared with.
    let line = out.lines().find(|l| l.starts_with("tls=off")).unwrap();
    assert!(line.contains("baseline"), "{out}");
}

#[test]
fn tls_composes_with_streams_reverse_bidir_and_interval() {
    for dir in ["--reverse", "--bidir"] {
        let (c, out, err, reps) = bulk(&[
            "--tls",
            "--streams",
            "2",
            dir,
            "--interval",
            "100ms",
            "--duration",
            "500ms",
            "--verify",
            "--strategy",
            "write",
            "--nbufs",
            "4",
            "--bufsize",
            "16K",
        ]);
        assert_eq!(c, 0, "{dir}: {out}{err}");
        let on = cell(&reps, "tls=on");
        assert_eq!(on["extra"]["verified"], true, "{dir}");
        let per = (0..2).filter(|i| metric(on, &format!("bytes.s{i}")).is_some());
        assert_eq!(per.count(), 2, "{dir}: {on}");
        assert!(metric(on, "tls_handshake_ms").is_some(), "{on}");
        let handshakes = on["extra"]["tls"]["handshake_ms"].as_array().unwrap().len();
        assert_eq!(handshakes, if dir == "--bidir" { 4 } else { 2 });
        if dir == "--bidir" {
            assert!(metric(on, "gbps_up").is_some() && metric(on, "gbps_down").is_some());
        }
        assert!(out.contains("tls=on"), "{out}");
    }
}

#[test]
fn a_sink_started_by_hand_is_trusted_by_fingerprint_and_a_wrong_one_fails_in_one_line() {
    let (sink, addr) =
        spawn_announced(&["sink", "--bind", "127.0.0.1", "--port", "0", "--announce"]);
    let wrong = "ab".repeat(32);
    let (_, out, err, reps) = bulk(&[
        "--to",
        &addr,
        "--tls",
        "--tls-trust",
        &wrong,
        "--duration",
        "200ms",
    ]);
    let all = format!("{out}{err}");
    assert!(all.contains("TLS handshake of stream 0 failed"), "{all}");
    assert!(all.to_lowercase().contains(&wrong[..16]), "{all}");
    // The plain twin ran; the TLS cell is stored failed.
    assert!(metric(cell(&reps, "tls=off"), "gbps").is_some());
    let (c, out, err, _) = bulk(&[
        "--to",
        &addr,
        "--tls",
        "--tls-trust",
        "unverified",
        "--duration",
        "200ms",
    ]);
    assert_eq!(c, 0, "{out}{err}");
    let log = common::interrupt_and_log(sink);
    assert!(
        log.contains("TLS streams: a self-signed certificate of this run, SHA-256"),
        "{log}"
    );
    assert!(
        log.contains("its TLS handshake failed") || log.contains("aborted"),
        "{log}"
    );
}

#[test]
fn ktls_page_strategies_iperf3_and_stray_keys_are_refused_in_one_line() {
    assert_usage_error(&["bulk", "--ktls"], &["ktls", "tls"]);
    assert_usage_error(
        &["bulk", "--tls", "--strategy", "sendfile"],
        &["--strategy sendfile cannot carry --tls"],
    );
    assert_usage_error(
        &["bulk", "--tls", "--to", "iperf3://127.0.0.1"],
        &["iperf3 has no TLS"],
    );
    assert_usage_error(
        &["bulk", "--tls-version", "1.2"],
        &["--tls-version applies with --tls only"],
    );
    assert_usage_error(&["bulk", "--tls", "--tls-version", "1.1"], &["1.1"]);
    assert_usage_error(
        &["bulk", "--tls", "--tls-trust", "/no/such.pem"],
        &["/no/such.pem"],
    );
}

#[test]
fn tls_crosses_an_emulated_link_byte_for_byte() {
    if !root_or_skip("tls_crosses_an_emulated_link_byte_for_byte") {
        return;
    }
    let (c, out, err, reps) = bulk(&[
        "--tls",
        "--link",
        "rate 200mbit delay 5ms",
        "--duration",
        "1s",
        "--verify",
    ]);
    assert_eq!(c, 0, "{out}{err}");
    let on = cell(&reps, "tls=on");
    assert_eq!(on["extra"]["verified"], true);
    // The TLS cell ran over the link (its description stored with it) and timed its
    // handshakes there.
    assert!(
        on["extra"]["link"]
            .as_str()
            .is_some_and(|l| l.contains("5ms")),
        "{on}"
    );
    assert!(metric(on, "tls_handshake_ms").is_some(), "{on}");
}
