//! `socklab bulk --streams`, `--reverse`, `--bidir`, `--cc` lists, `--pacing-rate`,
//! `--affinity` (issue 17 items 1, 2, 4) and `--opts` (issue 25 item 6): the real binary over
//! loopback, bounded.

mod common;

use common::{assert_usage_error, run, spawn_announced};
use serde_json::Value;

/// The stored repetitions of the newest experiment in `db`.
fn export(db: &str) -> Vec<Value> {
    let (c, out, err) = run(&["results", "export", "--db", db, "--format", "json"]);
    assert_eq!(c, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn metric(rep: &Value, name: &str) -> f64 {
    rep["metrics"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("no metric {name} in {}", rep["metrics"]))
}

/// The sink's log lines of a test's streams: (index, down, bytes).
fn sink_streams(log: &str) -> Vec<(u32, bool, u64)> {
    let mut v: Vec<(u32, bool, u64)> = log
        .lines()
        .filter_map(|l| {
            // "127.0.0.1:5 test 0123… stream 2 down: 1234 bytes in 7 writes, …, complete"
            let rest = l.split(" stream ").nth(1)?;
            let (index, rest) = rest.split_once(' ')?;
            let (dir, rest) = rest.split_once(": ")?;
            let bytes = rest.split_whitespace().next()?;
            assert!(l.ends_with("complete"), "{l}");
            Some((index.parse().ok()?, dir == "down", bytes.parse().ok()?))
        })
        .collect();
    v.sort();
    v
}

/// Runs `bulk` with `args` against a sink of its own (`socklab sink`, logging each
/// connection), stops the sink, and returns the stored repetitions and the sink's log.
fn bulk_against_sink(args: &[&str]) -> (Vec<Value>, String) {
    let (sink, addr) =
        spawn_announced(&["sink", "--bind", "127.0.0.1", "--port", "0", "--announce"]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let mut all = vec![
        "bulk", "--to", &addr, "--reps", "1", "--warmup", "0", "--db", db,
    ];
    all.extend_from_slice(args);
    let (c, out, err) = run(&all);
    assert_eq!(c, 0, "{all:?}: {out}{err}");
    (export(db), common::interrupt_and_log(sink))
}

#[test]
fn four_streams_sum_to_the_total_and_to_the_sinks_counts() {
    let (reps, log) = bulk_against_sink(&["--streams", "4", "--duration", "1s", "--verify"]);
    assert_eq!(reps.len(), 1);
    let r = &reps[0];
    let per: Vec<f64> = (0..4).map(|i| metric(r, &format!("bytes.s{i}"))).collect();
    assert_eq!(per.iter().sum::<f64>(), metric(r, "bytes"));
    assert!(per.iter().all(|b| *b > 0.0));
    let f = metric(r, "fairness");
    assert!(f > 0.25 && f <= 1.0, "{f}");
    assert_eq!(r["extra"]["verified"], true);
    let sink: Vec<(u32, bool, u64)> = sink_streams(&log);
    assert_eq!(
        sink,
        (0..4)
            .map(|i| (i as u32, false, per[i] as u64))
            .collect::<Vec<_>>(),
        "{log}"
    );
    // The total is every stream's bytes over the span to the last end.
    let gbps = metric(r, "gbps");
    let want = metric(r, "bytes") * 8.0 / metric(r, "seconds") / 1e9;
    assert!((gbps - want).abs() < 1e-9 * want.max(1.0));
    assert!(log.contains("control of test"), "{log}");
}

#[test]
fn reverse_and_bidir_count_both_ways_and_verify_the_hashes() {
    let (reps, log) = bulk_against_sink(&["--reverse", "--iterations", "500", "--verify"]);
    let r = &reps[0];
    assert_eq!(r["config"]["direction"], "down");
    assert_eq!(metric(r, "bytes"), 500.0 * 131072.0);
    assert_eq!(r["extra"]["verified"], true);
    assert_eq!(r["extra"]["streams"][0]["direction"], "down");
    assert!(metric(r, "reads") > 0.0 && metric(r, "writes") >= 500.0);
    assert_eq!(sink_streams(&log), vec![(0, true, 500 * 131072)], "{log}");

    let (reps, log) = bulk_against_sink(&["--bidir", "-P", "2", "--iterations", "300", "--verify"]);
    let r = &reps[0];
    assert_eq!(r["extra"]["verified"], true);
    let each = 300.0 * 131072.0;
    for i in 0..4 {
        assert_eq!(metric(r, &format!("bytes.s{i}")), each);
    }
    assert!(metric(r, "gbps_up") > 0.0 && metric(r, "gbps_down") > 0.0);
    assert_eq!(
        sink_streams(&log),
        vec![
            (0, false, each as u64),
            (1, false, each as u64),
            (2, true, each as u64),
            (3, true, each as u64)
        ],
        "{log}"
    );
}

#[test]
fn a_cc_list_makes_a_cell_per_value_each_reading_back_its_cc() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "bulk",
        "--cc",
        "cubic,reno",
        "--iterations",
        "50",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{out}{err}");
    assert!(out.contains("cc=cubic") && out.contains("cc=reno"), "{out}");
    let reps = export(db);
    assert_eq!(reps.len(), 2);
    for r in &reps {
        assert_eq!(r["extra"]["cc"], r["config"]["cc"], "{r}");
    }
}

#[test]
fn pacing_and_affinity_are_read_back_and_recorded() {
    let cpus = socklab_sys::sched::thread_affinity().unwrap();
    let (first, last) = (cpus[0].to_string(), cpus[cpus.len() - 1].to_string());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "bulk",
        "--bidir",
        "--pacing-rate",
        "200M",
        "--affinity",
        &last,
        "--server-affinity",
        &first,
        "--iterations",
        "20",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{out}{err}");
    let r = &export(db)[0];
    assert_eq!(r["config"]["pacing_rate"], "200M");
    let streams = r["extra"]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2);
    for s in streams {
        assert_eq!(s["pacing_rate_bps"], 200_000_000u64, "{s}");
        assert_eq!(s["cpu"].to_string(), last, "{s}");
        assert_eq!(s["server_cpu"].to_string(), first, "{s}");
    }
}

/// Through the server role of `--server-host local` (the same `socklab sink` role another host
/// runs over SSH): several streams in both directions.
#[test]
fn streams_and_reverse_work_through_a_server_role() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "bulk",
        "--server-host",
        "local",
        "--bidir",
        "-P",
        "2",
        "--iterations",
        "100",
        "--verify",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{out}{err}");
    let r = &export(db)[0];
    assert_eq!(r["extra"]["verified"], true);
    assert_eq!(metric(r, "bytes"), 4.0 * 100.0 * 131072.0);
}

#[test]
fn bad_stream_flags_are_one_line_errors_with_exit_2() {
    let d = ["--duration", "1s", "--db", "/nonexistent/x.db"];
    for (args, needle) in [
        (
            &["--streams", "0"][..],
            "--streams 0: run at least one stream",
        ),
        (
            &["--streams", "100000"][..],
            "--streams 100000 is more than 128",
        ),
        (
            &["-P", "65", "--bidir"][..],
            "more than 64 each way with --bidir",
        ),
        (&["--reverse", "--udp"][..], "--udp does not take --reverse"),
        (&["--bidir", "--udp"][..], "--udp does not take --bidir"),
        (&["--bidir", "--reverse"][..], "cannot be used with"),
        (&["--affinity", "1-0"][..], "range 1-0 runs backwards"),
        (&["--affinity", "4096"][..], "CPU 4096"),
        (&["--server-affinity", "a"][..], "'a' is not a CPU number"),
        (&["--pacing-rate", "0"][..], "pacing_rate = '0'"),
    ] {
        let mut all = vec!["bulk"];
        all.extend_from_slice(args);
        all.extend_from_slice(&d);
        assert_usage_error(&all, &[needle]);
    }
    // The checks come before anything runs: --dry-run says so too.
    let (c, _, err) = run(&["--dry-run", "bulk", "--streams", "0"]);
    assert_eq!(c, 2, "{err}");
}

/// `--opts` (issue 25 item 6): a list of option sets is a cell each; both ends' read-back is
/// stored with every repetition.
#[test]
fn opts_sets_make_a_cell_each_and_store_both_ends_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "bulk",
        "--opts",
        "baseline,nodelay+server:cc=reno+client:sndbuf=256K",
        "--iterations",
        "50",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{out}{err}");
    assert!(
        out.contains("opts=baseline")
            && out.contains("opts=nodelay+server:cc=reno+client:sndbuf=256K"),
        "{out}"
    );
    let reps = export(db);
    assert_eq!(reps.len(), 2);
    let base = reps
        .iter()
        .find(|r| r["config"]["opts"] == "baseline")
        .unwrap();
    assert_eq!(base["extra"]["client_opts"], serde_json::json!({}));
    assert_eq!(base["extra"]["server_opts"], serde_json::json!({}));
    assert_eq!(metric(base, "opts_off"), 0.0);
    let set = reps
        .iter()
        .find(|r| r["config"]["opts"] != "baseline")
        .unwrap();
    let (client, server) = (&set["extra"]["client_opts"], &set["extra"]["server_opts"]);
    assert_eq!(client["nodelay"], "1", "{set}");
    assert_eq!(client["sndbuf"], (2 * 256 * 1024).to_string(), "{set}");
    assert_eq!(server["nodelay"], "1", "{set}");
    assert_eq!(server["cc"], "reno", "{set}");
    assert_eq!(set["extra"]["opts_off"], serde_json::json!([]));
    assert_eq!(metric(set, "opts_off"), 0.0);
    // The older keys print as before beside it.
    assert_eq!(set["config"]["cc"], "cubic");
}

#[test]
fn bad_opts_are_one_line_errors_with_exit_2() {
    let d = ["--duration", "1s", "--db", "/nonexistent/x.db"];
    for (args, needles) in [
        (
            &["--cc", "bbr", "--opts", "cc=cubic"][..],
            &["cc = 'bbr' and opts = 'cc=cubic' both set cc"][..],
        ),
        (
            &["--nodelay", "--opts", "nodelay"][..],
            &["nodelay = 'true' and opts = 'nodelay' both set nodelay"][..],
        ),
        (
            &["--opts", "nodelayy"][..],
            &["unknown option 'nodelayy'"][..],
        ),
        (
            &["--opts", "fastopen"][..],
            &["opts 'fastopen'", "prefix it client:"][..],
        ),
        (
            &["--udp", "--opts", "nodelay"][..],
            &["--udp does not take --opts"][..],
        ),
    ] {
        let mut all = vec!["bulk"];
        all.extend_from_slice(args);
        all.extend_from_slice(&d);
        assert_usage_error(&all, needles);
    }
}
