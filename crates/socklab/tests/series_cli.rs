//! Issue 17 item 5, through the real binary over loopback: `--interval` prints a line per
//! interval as the run goes (JSON lines with `--json`), stores the time series, and
//! `socklab results series` exports it tidy; the stored intervals cover the run without gaps
//! or overlaps and sum to the stored totals; `--omit` leaves the start out of the summary;
//! `load --interval` against `socklab serve`; bad values are one-line errors (exit 2).
//! Bounded: runs of about a second; no timing assertions.

mod common;

use std::collections::BTreeMap;

use common::{assert_usage_error, run, spawn_announced};

/// A CSV (no quoted commas in these tests) as rows of header → value.
fn csv(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut lines = text.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| {
            head.iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect();
    (head, rows)
}

fn f(row: &BTreeMap<String, String>, k: &str) -> f64 {
    row[k]
        .parse()
        .unwrap_or_else(|_| panic!("{k} = {:?}", row[k]))
}

/// The measured repetitions' metrics of the newest experiment in `db`.
fn exported(db: &str) -> Vec<BTreeMap<String, String>> {
    let (c, out, err) = run(&["results", "export", "--csv", "--db", db]);
    assert_eq!(c, 0, "{err}");
    csv(&out).1
}

#[test]
fn bulk_intervals_print_live_are_stored_contiguous_and_sum_to_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "bulk",
        "--interval",
        "100ms",
        "--duration",
        "1s",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{err}");
    let live: Vec<&str> = out.lines().filter(|l| l.contains("] up ")).collect();
    assert!(
        live.len() >= 20,
        "a line per interval, two repetitions:\n{out}"
    );
    assert!(live[0].starts_with("bulk rep 1: [0] up"), "{}", live[0]);
    // The first interval starts at the run's start; it ends at the real time of the first
    // reading (0.10 s, or a little later on a loaded machine).
    assert!(
        live[0].contains(" 0.00-0.1") && live[0].contains("Gbit/s"),
        "{}",
        live[0]
    );
    assert!(live.iter().any(|l| l.starts_with("bulk rep 2:")));
    // Printed before the summary table.
    let table = out.find("config").unwrap();
    assert!(out.find(live[live.len() - 1]).unwrap() < table);

    let (c, series, err) = run(&["results", "series", "--csv", "--db", db]);
    assert_eq!(c, 0, "{err}");
    let (head, rows) = csv(&series);
    assert_eq!(
        head[..11],
        [
            "experiment",
            "cell",
            "label",
            "workload",
            "rep",
            "warmup",
            "stream",
            "direction",
            "start_s",
            "end_s",
            "omitted"
        ]
    );
    assert!(head.contains(&"cfg_interval".to_string()));
    for m in ["gbps", "bytes", "cwnd", "srtt_us", "retrans", "rttvar_us"] {
        assert!(head.contains(&m.to_string()), "{m} column in {head:?}");
    }
    let samples = exported(db);
    assert_eq!(samples.len(), 2);
    for (rep, sample) in samples.iter().enumerate() {
        let ivs: Vec<&BTreeMap<String, String>> = rows
            .iter()
            .filter(|r| r["rep"] == rep.to_string())
            .collect();
        assert!(ivs.len() >= 10, "rep {rep}: {} intervals", ivs.len());
        assert!(ivs
            .iter()
            .all(|r| r["stream"] == "0" && r["direction"] == "up"));
        assert_eq!(f(ivs[0], "start_s"), 0.0);
        for w in ivs.windows(2) {
            assert_eq!(w[0]["end_s"], w[1]["start_s"], "no gap, no overlap");
            assert!(f(w[0], "start_s") < f(w[0], "end_s"));
        }
        // The last interval ends at the run's end-to-end time.
        let end = f(ivs[ivs.len() - 1], "end_s");
        assert!(
            (end - f(sample, "seconds")).abs() < 1e-6,
            "{end} vs {}",
            sample["seconds"]
        );
        // Delivered bytes sum to the bytes sent (exactly: the final reading is taken when the
        // sink has read everything).
        let sum: f64 = ivs.iter().map(|r| f(r, "bytes")).sum();
        assert_eq!(sum, f(sample, "bytes"), "rep {rep}");
        let written: f64 = ivs.iter().map(|r| f(r, "bytes_written")).sum();
        assert_eq!(written, f(sample, "bytes"));
        // No omit: the summary stays the end-to-end figure.
        assert!(!sample.contains_key("gbps_all") || sample["gbps_all"].is_empty());
        assert!(ivs.iter().all(|r| r["omitted"] == "0"));
    }
    // JSON: the same rows.
    let (c, json, _) = run(&["results", "series", "1", "--json", "--db", db]);
    assert_eq!(c, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v.as_array().unwrap().len(), rows.len());
    assert_eq!(v[0]["direction"], "up");
    assert!(v[0]["metrics"]["gbps"].as_f64().is_some());
}

#[test]
fn omit_summarises_the_rest_and_json_prints_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "bulk",
        "--interval",
        "100ms",
        "--omit",
        "300ms",
        "--duration",
        "1s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--json",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{err}");
    // Every line is a JSON object: the intervals, then the statistics.
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let (last, intervals) = lines.split_last().unwrap();
    assert!(intervals.len() >= 10);
    assert!(intervals.iter().all(|v| v["type"] == "interval"));
    assert_eq!(intervals[0]["start_s"], 0.0);
    assert_eq!(intervals[0]["omitted"], true);
    assert_eq!(intervals[intervals.len() - 1]["omitted"], false);
    assert!(last["schema"]
        .as_str()
        .unwrap()
        .starts_with("socklab.experiment/"));
    // The summary: gbps over what follows the omitted start, from the stored intervals.
    let (_, rows) = csv(&run(&["results", "series", "--csv", "--db", db]).1);
    let kept: Vec<&BTreeMap<String, String>> =
        rows.iter().filter(|r| r["omitted"] == "0").collect();
    let omitted = rows.len() - kept.len();
    assert!(omitted >= 3, "300 ms of 100 ms intervals: {omitted}");
    let from = f(kept[0], "start_s");
    assert!((0.3..0.4).contains(&from), "the omit reading at {from}");
    let to = f(kept[kept.len() - 1], "end_s");
    let bytes: f64 = kept.iter().map(|r| f(r, "bytes")).sum();
    let sample = &exported(db)[0];
    let want = bytes * 8.0 / (to - from) / 1e9;
    assert!(
        (f(sample, "gbps") - want).abs() < 1e-9 * want.max(1.0),
        "{} vs {want}",
        sample["gbps"]
    );
    assert!((f(sample, "omitted_s") - from).abs() < 1e-9);
    let all = f(sample, "bytes") * 8.0 / f(sample, "seconds") / 1e9;
    assert!(
        (f(sample, "gbps_all") - all).abs() < 1e-6 * all,
        "end to end kept as gbps_all"
    );
}

#[test]
fn load_interval_against_socklab_serve_sums_to_the_requests() {
    let (mut server, addr) = spawn_announced(&[
        "serve",
        "--design",
        "epoll",
        "--handler",
        "http",
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--workers",
        "1",
        "--announce",
        "--quiet",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let db = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--connections",
        "4",
        "--threads",
        "2",
        "--duration",
        "1500ms",
        "--interval",
        "500ms",
        "--json",
        "--db",
        db,
    ]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(c, 0, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let (report, intervals) = lines.split_last().unwrap();
    assert_eq!(intervals.len(), 3, "{out}");
    let requests: f64 = intervals
        .iter()
        .map(|v| v["requests"].as_f64().unwrap())
        .sum();
    assert_eq!(requests, report["completed"].as_f64().unwrap());
    assert!(requests > 0.0);
    assert!(intervals.iter().all(|v| v["req_per_s"].as_f64().is_some()));
    assert!(intervals[0]["lat_p99_us"].as_f64().is_some());
    // Stored: the same intervals.
    let (c, series, err) = run(&["results", "series", "--csv", "--db", db]);
    assert_eq!(c, 0, "{err}");
    let (_, rows) = csv(&series);
    assert_eq!(rows.len(), 3);
    let stored: f64 = rows.iter().map(|r| f(r, "requests")).sum();
    assert_eq!(stored, requests);
    assert_eq!(rows[2]["end_s"], "1.5");
}

#[test]
fn bad_interval_and_omit_are_one_line_errors() {
    assert_usage_error(
        &["bulk", "--interval", "0"],
        &["interval = '0'", "more than 0"],
    );
    assert_usage_error(&["bulk", "--interval", "10us"], &["1ms or more"]);
    assert_usage_error(
        &["bulk", "--omit", "2s", "--duration", "2s"],
        &["--omit 2s is not shorter than --duration 2s"],
    );
    assert_usage_error(
        &["bulk", "--omit", "3s"],
        &["--omit 3s is not shorter than --duration 2s"],
    );
    assert_usage_error(
        &["bulk", "--omit", "1s", "--iterations", "10"],
        &["needs a run bounded by --duration"],
    );
    assert_usage_error(
        &["bulk", "--interval", "1ms", "--duration", "10m"],
        &["600000 intervals"],
    );
    assert_usage_error(
        &["load", "--to", "127.0.0.1:1", "--interval", "0"],
        &["--interval 0", "more than 0"],
    );
}

#[test]
fn an_experiment_without_intervals_has_no_series_to_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("n.db");
    let db = db.to_str().unwrap();
    let (c, _, err) = run(&[
        "bulk",
        "--iterations",
        "10",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{err}");
    let (c, out, err) = run(&["results", "series", "--db", db]);
    assert_eq!(c, 1, "{err}");
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("experiment 1 holds no intervals: run with --interval"),
        "{err}"
    );
}

/// The lines are live: the first interval's line is out while the run still goes (a 2 s run
/// sampled every 100 ms; lines are written at most every 100 ms, not held to the end).
#[test]
fn interval_lines_arrive_while_the_run_goes() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let mut child = common::socklab()
        .args([
            "bulk",
            "--interval",
            "100ms",
            "--duration",
            "2s",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--db",
            db.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let running = child.try_wait().unwrap().is_none();
    let rest: Vec<String> = out.lines().map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(first.starts_with("bulk rep 1: [0] up"), "{first}");
    assert!(running, "the first line came only when the run had ended");
    assert!(rest.iter().filter(|l| l.contains("] up ")).count() >= 19);
}
