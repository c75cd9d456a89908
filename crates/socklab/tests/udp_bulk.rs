//! `socklab bulk --udp` through the real binary: bad input, the receiver's counts against the
//! emulator's own over the udp-proxy link (no root) and the tun link (root; skipped with a
//! message otherwise), and `--rate max`. Counts only; no timing assertions.

mod common;

use common::{assert_usage_error, root_or_skip, run};

#[test]
fn bad_udp_input_is_a_one_line_error() {
    assert_usage_error(
        &["bulk", "--udp", "--rate", "0"],
        &["rate = '0'", "1K to 1T"],
    );
    assert_usage_error(
        &["bulk", "--udp", "--size", "70000"],
        &["size = '70000'", "48 to 65507"],
    );
    assert_usage_error(&["bulk", "--udp", "--size", "20"], &["48 to 65507"]);
    assert_usage_error(
        &["bulk", "--reverse", "--udp"],
        &["--udp does not take --reverse"],
    );
    assert_usage_error(
        &["bulk", "--udp", "--omit", "1s"],
        &["--udp does not take --omit"],
    );
    assert_usage_error(
        &["bulk", "--udp", "--interval", "5ms"],
        &["interval = '5ms'", "10ms or more"],
    );
    assert_usage_error(
        &["bulk", "--udp", "--strategy", "writev"],
        &["--udp does not take --strategy"],
    );
    assert_usage_error(
        &["bulk", "--udp", "--verify"],
        &["--udp does not take --verify"],
    );
    assert_usage_error(&["bulk", "--udp", "--to", "127.0.0.1:9"], &["omit --to"]);
    assert_usage_error(
        &["bulk", "--rate", "1G"],
        &["--rate is for UDP bulk: add --udp"],
    );
    assert_usage_error(&["bulk", "--udp", "--gso", "maybe"], &["auto, on or off"]);
    assert_usage_error(
        &["bulk", "--udp", "--rate", "max", "--max-loss", "100%"],
        &["max_loss", "below 100%"],
    );
    assert_usage_error(&["sink", "--udp", "--rcvbuf", "0"], &["--rcvbuf 0"]);
    // TCP bulk over udp-proxy is still refused; UDP bulk takes it.
    assert_usage_error(
        &["bulk", "--link", "loss 1%", "--driver", "udp-proxy"],
        &["UDP only"],
    );
    let (code, out, err) = run(&[
        "--dry-run",
        "bulk",
        "--udp",
        "--link",
        "loss 1%",
        "--driver",
        "udp-proxy",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cell 1: udp"), "{out}");
}

/// Runs `socklab bulk --udp` with `args` into a fresh database and returns every repetition
/// (`results export --format json`).
fn udp_samples(args: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("u.db");
    let db = db.to_str().unwrap();
    let mut all = vec!["bulk", "--udp", "--db", db, "--warmup", "0"];
    all.extend_from_slice(args);
    let (code, out, err) = run(&all);
    assert_eq!(code, 0, "{all:?}\nstdout: {out}\nstderr: {err}");
    let (code, json, err) = run(&["results", "export", "--db", db, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    match serde_json::from_str(&json).unwrap() {
        serde_json::Value::Array(v) => v,
        other => panic!("not an array: {other}"),
    }
}

fn metric(s: &serde_json::Value, name: &str) -> f64 {
    s["metrics"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {}", s["metrics"]))
}

/// The receiver's loss, duplicate and reorder counts are exactly the emulator's (forward
/// direction: only the test's datagrams cross it), cell by cell.
fn counts_match_the_emulator(samples: &[serde_json::Value]) {
    // One per cell, and any re-run of a repetition marked invalid (a busy machine).
    assert_eq!(
        samples
            .iter()
            .filter(|s| s["extra"]["retry"] != true)
            .count(),
        3
    );
    for s in samples {
        let link = s["config"]["link"].as_str().unwrap().to_string();
        let m = |n: &str| metric(s, n);
        assert_eq!(
            m("link_fwd_in"),
            m("dgrams_sent"),
            "{link}: every datagram met the model"
        );
        assert_eq!(m("link_fwd_kernel_drops"), 0.0, "{link}");
        assert_eq!(m("link_fwd_queue_dropped"), 0.0, "{link}");
        assert_eq!(m("dgrams_lost"), m("link_fwd_dropped"), "{link}: lost");
        assert_eq!(
            m("dgrams_dup"),
            m("link_fwd_duplicated"),
            "{link}: duplicates"
        );
        // `link_fwd_reordered` counts the datagrams the model sent at once (netem's
        // requeues); one overtakes only what is still in the delay, so a sender the machine
        // held up for the delay's length sends one that overtakes nothing. Every early arrival
        // is one of them, never more.
        assert!(
            m("dgrams_early") <= m("link_fwd_reordered"),
            "{link}: {} early, {} sent at once",
            m("dgrams_early"),
            m("link_fwd_reordered")
        );
        let (counted, what) = if link.contains("loss") {
            (m("dgrams_lost"), "lost")
        } else if link.contains("duplicate") {
            (m("dgrams_dup"), "duplicated")
        } else {
            // RFC 4737 counts the overtaken: at least one per datagram sent early.
            assert!(m("dgrams_reordered") >= m("dgrams_early"), "{link}");
            (m("dgrams_early"), "reordered")
        };
        assert!(counted > 0.0, "{link}: the emulator {what} nothing");
        assert_eq!(s["extra"]["receiver_end"], "drain", "{link}");
    }
}

/// 4 Mbit/s of 1000-byte datagrams: one every 2 ms; a 20 ms delay, so each datagram the
/// emulator sends early (`reorder`) overtakes the ones still in the delay.
const CELLS: &str = "loss 10%,duplicate 10%,delay 20ms reorder 10% gap 3";

#[test]
fn over_the_udp_proxy_the_receivers_counts_are_the_emulators() {
    let s = udp_samples(&[
        "--rate",
        "4M",
        "--size",
        "1000",
        "--duration",
        "1s",
        "--reps",
        "1",
        "--link",
        CELLS,
        "--driver",
        "udp-proxy",
    ]);
    counts_match_the_emulator(&s);
}

#[test]
fn over_the_tun_link_the_receivers_counts_are_the_emulators() {
    if !root_or_skip("over_the_tun_link_the_receivers_counts_are_the_emulators") {
        return;
    }
    let s = udp_samples(&[
        "--rate",
        "4M",
        "--size",
        "1000",
        "--duration",
        "1s",
        "--reps",
        "1",
        "--link",
        CELLS,
        "--driver",
        "tun",
    ]);
    counts_match_the_emulator(&s);
    // Through namespaces on one host the clock is shared: the one-way delay is the link's.
    let owd = metric(&s[2], "owd_min_us");
    assert!(
        owd < 20_000.0,
        "early datagrams skip the 20 ms delay: {owd}"
    );
    assert!(metric(&s[2], "owd_p50_us") >= 20_000.0);
}

#[test]
fn rate_max_searches_and_states_its_trials() {
    let s = udp_samples(&[
        "--rate",
        "max",
        "--trial",
        "100ms",
        "--trials",
        "4",
        "--duration",
        "200ms",
        "--reps",
        "1",
    ]);
    let s = &s[0];
    let trials = s["extra"]["trials"].as_array().unwrap();
    assert_eq!(metric(s, "trials"), trials.len() as f64);
    assert!((1..=4).contains(&trials.len()), "{trials:?}");
    let best = s["extra"]["rate_bps"].as_u64().unwrap();
    assert_eq!(metric(s, "max_gbps"), best as f64 / 1e9);
    // The rate found is the highest trial that passed, and passing means no loss.
    let passed: Vec<u64> = trials
        .iter()
        .filter(|t| t["passed"] == true)
        .map(|t| t["rate_bps"].as_u64().unwrap())
        .collect();
    assert_eq!(passed.iter().max(), Some(&best), "{trials:?}");
    for t in trials.iter().filter(|t| t["passed"] == true) {
        assert_eq!(t["lost"], 0, "{t}");
    }
}

/// `--interval` (issue 17 item 5): the receiver's intervals are stored as the time series,
/// back to back from the first arrival, and add up to the test's counts; their losses add up
/// to the emulator's drops but for a trailing run (datagrams after the last that arrived).
#[test]
fn udp_intervals_cover_the_test_and_add_up_to_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("u.db");
    let db = db.to_str().unwrap();
    let (code, out, err) = run(&[
        "bulk",
        "--udp",
        "--rate",
        "4M",
        "--size",
        "1000",
        "--duration",
        "1s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--interval",
        "100ms",
        "--link",
        "loss 10%,duplicate 10%",
        "--driver",
        "udp-proxy",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("loss") && out.contains("jitter"),
        "live lines: {out}"
    );
    let (code, json, err) = run(&["results", "export", "--db", db, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let samples: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let (code, json, err) = run(&["results", "series", "1", "--json", "--db", db]);
    assert_eq!(code, 0, "{err}");
    let all: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    // One per cell, and any re-run of a repetition marked invalid (a busy machine).
    assert_eq!(
        samples
            .iter()
            .filter(|s| s["extra"]["retry"] != true)
            .count(),
        2
    );
    for s in &samples {
        let link = s["config"]["link"].as_str().unwrap();
        let rows: Vec<&serde_json::Value> = all
            .iter()
            .filter(|r| r["cell"] == s["cell"] && r["rep"] == s["rep"])
            .collect();
        assert!(
            rows.len() >= 10,
            "{link}: 1 s in 100 ms intervals: {}",
            rows.len()
        );
        let x = |r: &serde_json::Value, k: &str| r["metrics"][k].as_f64().unwrap();
        let t = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
        assert_eq!(t(rows[0], "start_s"), 0.0);
        for w in rows.windows(2) {
            assert!(
                (t(w[1], "start_s") - t(w[0], "end_s")).abs() < 1e-9,
                "{link}: gap between {} and {}",
                w[0],
                w[1]
            );
        }
        let sum = |k: &str| rows.iter().map(|r| x(r, k)).sum::<f64>();
        assert_eq!(sum("datagrams"), metric(s, "dgrams_received"), "{link}");
        assert_eq!(sum("duplicates"), metric(s, "dgrams_dup"), "{link}");
        assert_eq!(metric(s, "dgrams_dup"), metric(s, "link_fwd_duplicated"));
        let lost = metric(s, "dgrams_lost");
        assert_eq!(lost, metric(s, "link_fwd_dropped"), "{link}");
        let trailing = lost - sum("lost");
        assert!(
            (0.0..10.0).contains(&trailing),
            "{link}: intervals lost {} of {lost}",
            sum("lost")
        );
        if link.contains("loss") {
            assert!(lost >= 5.0, "the emulator dropped only {lost}");
        } else {
            assert!(sum("duplicates") >= 5.0, "{link}");
        }
    }
}

/// UDP interval lines are live: the receiver prints each interval as it closes (`INTERVAL`
/// lines), so the first is out long before a 3 s test ends (on the old code every line came
/// after the receiver's report, a few ms before the exit); every interval is printed once, in
/// order, as many as are stored.
#[test]
fn udp_interval_lines_arrive_while_the_test_runs() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let db = db.to_str().unwrap();
    let mut child = common::socklab()
        .args([
            "bulk",
            "--udp",
            "--rate",
            "50M",
            "--interval",
            "200ms",
            "--duration",
            "3s",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--db",
            db,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    // The first line is here and the test is still running (a line printed at the end would
    // come after its last datagram and the result): an ordering, not a figure.
    let running_at_first = child.try_wait().unwrap().is_none();
    let rest: Vec<String> = out.lines().map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(
        first.starts_with("udp rep 1: [0] up       0.00-0.20 s"),
        "{first}"
    );
    assert!(
        running_at_first,
        "the first line came after the end of a 3 s test"
    );
    let lines: Vec<&str> = std::iter::once(first.as_str())
        .chain(rest.iter().map(String::as_str))
        .filter(|l| l.contains("] up "))
        .collect();
    let (code, json, err) = run(&["results", "series", "1", "--json", "--db", db]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    assert_eq!(lines.len(), rows.len(), "{lines:#?}");
    for (l, r) in lines.iter().zip(&rows) {
        let span = format!(
            "{:.2}-{:.2} s",
            r["start_s"].as_f64().unwrap(),
            r["end_s"].as_f64().unwrap()
        );
        assert!(l.contains(&span), "{l} is not the stored {span}");
    }
}
