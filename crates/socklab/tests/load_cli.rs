//! `socklab load` through the real binary against a tiny HTTP keep-alive server in this test
//! process (loopback): JSON and CSV output, the human summary, and bad arguments. Bounded by
//! request counts; no timing assertions.

mod common;

use std::net::{SocketAddr, TcpListener};

use common::http::http_server;
use common::{assert_usage_error, run};

#[test]
fn json_report_of_a_counted_http_run() {
    let addr = http_server().to_string();
    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--connections",
        "4",
        "--threads",
        "2",
        "--requests",
        "200",
        "--json",
    ]);
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["completed"], 200);
    assert_eq!(v["failed"]["bad_reply"], 0);
    assert_eq!(v["config"]["protocol"], "http");
    assert_eq!(v["connections_opened"], 4);
    assert_eq!(v["bytes_read"].as_u64().unwrap(), 200 * (100 + 40));
    for k in ["p50_us", "p99_us", "p99_9_us", "p99_99_us"] {
        assert!(v["response"]["percentiles"][k].is_number(), "{k}");
    }
    assert!(v["generator"]["cpu_user_s"].is_number());
    assert!(v["response_corrected"].is_null());
}

/// Issue 28 part 4: the JSON carries each generator's own figures, which the text prints
/// (`--generators local`: one generator, the controller, without SSH).
#[test]
fn json_carries_each_generators_figures_as_the_text_does() {
    let addr = http_server().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let args = [
        "load",
        "--to",
        &addr,
        "--generators",
        "local",
        "--connections",
        "2",
        "--requests",
        "100",
        "--db",
        db,
    ];
    let (c, text, err) = run(&args);
    assert_eq!(c, 0, "{err}");
    let row = text
        .lines()
        .skip_while(|l| !l.starts_with("Each generator"))
        .find(|l| l.starts_with("local "))
        .unwrap_or_else(|| panic!("no generator row in:\n{text}"));
    let shown: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&shown[1..4], ["2", "100", "0"], "{row}");
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (c, out, err) = run(&json_args);
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let gens = v["generators"]
        .as_array()
        .unwrap_or_else(|| panic!("no generators in the JSON: {out}"));
    assert_eq!(gens.len(), 1, "{out}");
    let g = &gens[0];
    assert_eq!(g["host"], "local");
    assert_eq!(g["connections"], 2);
    assert_eq!(g["completed"], 100);
    assert_eq!(g["failed"], 0);
    for k in ["req_per_s", "lat_p50_us", "lat_p99_us"] {
        assert!(g[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {g}");
    }
    assert_eq!(v["completed"], 100, "{out}");
    // Without --generators, no generators key (the merged report is the controller's).
    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--requests",
        "20",
        "--json",
        "--db",
        db,
    ]);
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("generators").is_none(), "{out}");
}

#[test]
fn csv_and_summary_outputs() {
    let addr = http_server().to_string();
    let (c, out, err) = run(&["load", "--to", &addr, "--requests", "50", "--csv"]);
    assert_eq!(c, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let head: Vec<&str> = lines[0].split(',').collect();
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(head.len(), row.len());
    let completed = head.iter().position(|h| *h == "completed").unwrap();
    assert_eq!(row[completed], "50");

    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--requests",
        "50",
        "--rate",
        "5000",
        "--connections",
        "2",
    ]);
    assert_eq!(c, 0, "{err}");
    for needle in [
        "Complete requests:  50",
        "Failed requests:    0",
        "Requests/s:",
        "Latency percentiles",
        "corrected",
        "uncorrected",
        "Send lag",
        "Generator: cpu user",
    ] {
        assert!(out.contains(needle), "'{needle}' not in:\n{out}");
    }
}

#[test]
fn bad_arguments_are_one_line_errors() {
    assert_usage_error(
        &["load", "--to", "127.0.0.1:9", "--protocol", "gopher"],
        &["--protocol", "gopher", "stevens, echo, http"],
    );
    assert_usage_error(
        &["load", "--to", "nowhere"],
        &["--to 'nowhere'", "HOST:PORT"],
    );
    assert_usage_error(
        &[
            "load",
            "--to",
            "127.0.0.1:9",
            "--clients",
            "3",
            "--bytes",
            "20000",
        ],
        &["--bytes 20000", "1..=16384"],
    );
    assert_usage_error(
        &["load", "--to", "127.0.0.1:9", "--rate", "fast"],
        &["--rate 'fast'"],
    );
    assert_usage_error(
        &["load", "--to", "127.0.0.1:9", "--connections", "0"],
        &["--connections 0"],
    );
    assert_usage_error(
        &[
            "load",
            "--to",
            "127.0.0.1:9",
            "--clients",
            "2",
            "--connections",
            "3",
        ],
        &["--clients", "--connections"],
    );
}

/// A server that accepts every connection and closes it at once (at most 100000, for the
/// life of the test process): nothing is ever answered.
fn closing_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().take(100_000) {
            drop(s);
        }
    });
    addr
}

/// Nothing answered: exit 1 with a hint, and (issue 26 item 10) no latency: the old code
/// printed a row of 0.0us percentiles and stored 0 us latencies, the fastest of all.
#[test]
fn a_run_where_nothing_completes_exits_1_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let db = db.to_str().unwrap();
    let addr = closing_server().to_string();
    let (c, out, err) = run(&["load", "--to", &addr, "--duration", "200ms", "--db", db]);
    assert_eq!(c, 1, "{out}{err}");
    assert!(out.contains("Complete requests:  0"), "{out}");
    assert!(
        out.contains("Latency percentiles: none (no response completed"),
        "{out}"
    );
    assert!(!out.contains("  response "), "{out}");
    assert!(
        err.contains("no request completed") && err.contains(&addr),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (c, json, e) = run(&["results", "export", "--db", db, "--format", "json"]);
    assert_eq!(c, 0, "{e}");
    let reps: serde_json::Value = serde_json::from_str(&json).unwrap();
    let metrics = &reps[0]["metrics"];
    assert!(metrics["req_per_s"].is_number(), "{metrics}");
    assert!(metrics.get("lat_p50_us").is_none(), "{metrics}");
}

/// Ephemeral-port exhaustion, in a private network namespace (`unshare -n`, as root) whose
/// port range is narrowed to 100 ports with TIME_WAIT reuse off: a connection per request
/// stops with the one-line explanation (exit 1) instead of hanging, and 8 source addresses
/// make room for about 8 times more connections. The host's own settings are untouched.
#[test]
fn port_exhaustion_stops_with_a_clear_error() {
    if !common::root_or_skip("port_exhaustion_stops_with_a_clear_error") {
        return;
    }
    if std::process::Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .map_or(true, |s| !s.success())
    {
        socklab_sys::skip::skip(
            "port_exhaustion_stops_with_a_clear_error",
            "no unshare -n",
            "unshare -n is not available (util-linux, root)",
        );
        return;
    }
    let exe = assert_cmd::cargo::cargo_bin("socklab");
    let exe = exe.to_str().unwrap();
    let script = format!(
        r#"set -e
ip link set lo up
sysctl -qw net.ipv4.ip_local_port_range="40000 40099" net.ipv4.tcp_tw_reuse=0
{exe} echo --port 27001 --bind 127.0.0.1 >/dev/null 2>&1 &
E=$!
trap 'kill $E' EXIT
sleep 0.5
set +e
{exe} load --to 127.0.0.1:27001 --protocol echo --bytes 8 --clients 4 --threads 1 --duration 20s --source-addrs 8 --json > bound.json 2> bound.err
echo "bound $?"
{exe} load --to 127.0.0.1:27001 --protocol echo --bytes 8 --clients 4 --threads 1 --duration 20s --json > one.json 2> one.err
echo "one $?"
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new("timeout")
        .args(["60", "unshare", "-n", "sh", "-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("bound 1") && out.contains("one 1"), "{out}");
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    for f in ["bound.err", "one.err"] {
        let err = read(f);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("ephemeral ports") && err.contains("--source-addrs"),
            "{err}"
        );
    }
    let completed = |f: &str| {
        let v: serde_json::Value = serde_json::from_str(&read(f)).unwrap();
        v["completed"].as_u64().unwrap()
    };
    // 8 addresses x 100 ports, less what is in use; one address: fewer than 100.
    assert!(completed("bound.json") > 400, "{}", read("bound.json"));
    assert!(completed("one.json") < 100, "{}", read("one.json"));
}

#[test]
fn reps_run_through_the_runner_into_the_store() {
    let addr = http_server().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let dbs = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--connections",
        "2",
        "--threads",
        "1",
        "--duration",
        "200ms",
        "--reps",
        "2",
        "--warmup",
        "1",
        "--db",
        dbs,
        "--json",
    ]);
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cell = &v["cells"][0];
    assert_eq!(cell["n"], 2, "{v}");
    assert!(
        cell["metrics"]["req_per_s"]["mean"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert_eq!(cell["metrics"]["errors"]["mean"].as_f64(), Some(0.0), "{v}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 3, "2 measured + 1 warm-up");
    // What the load workload cannot express is refused, naming the flag.
    let (c, _, err) = run(&[
        "load",
        "--to",
        &addr,
        "--requests",
        "10",
        "--reps",
        "2",
        "--db",
        dbs,
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(
        err.contains("--requests is not available with --reps"),
        "{err}"
    );
}

/// A one-off run (no --reps) is an experiment of one cell through the Runner: one repetition,
/// no warm-up, stored in --db with the whole report, and printed from the store as before.
#[test]
fn a_one_off_run_is_stored_as_one_experiment_with_one_sample() {
    let addr = http_server().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("once.db");
    let dbs = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--connections",
        "2",
        "--threads",
        "1",
        "--requests",
        "30",
        "--path",
        "/a",
        "--db",
        dbs,
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(out.contains("Complete requests:  30"), "{out}");
    assert!(
        out.contains(&format!("stored as experiment 1 in {dbs}")),
        "{out}"
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (experiments, status, reps, warmup): (i64, String, i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), MAX(status), MAX(reps), MAX(warmup) FROM experiments",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        (experiments, status.as_str(), reps, warmup),
        (1, "done", 1, 0)
    );
    let (samples, extra): (i64, String) = conn
        .query_row(
            "SELECT COUNT(*), MAX(extra_json) FROM samples WHERE warmup = 0",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(samples, 1);
    let extra: serde_json::Value = serde_json::from_str(&extra).unwrap();
    assert_eq!(extra["report"]["completed"], 30, "{extra}");
    assert_eq!(extra["report"]["config"]["path"], "/a", "{extra}");
    assert_eq!(extra["report"]["config"]["source_addrs"], 1, "{extra}");

    // The JSON of a second one-off is the stored report, and a second experiment.
    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--requests",
        "10",
        "--json",
        "--db",
        dbs,
    ]);
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["completed"], 10);
    let (c, out, err) = run(&["results", "list", "--db", dbs]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(
        out.lines().filter(|l| l.contains(" load ")).count(),
        2,
        "{out}"
    );
}

/// Stevens' client bounded by time instead of loops (`--clients 2 --duration`), against a
/// `socklab serve --handler stevens` child: the load workload's `loops = unlimited`.
#[test]
fn a_stevens_run_bounded_by_time_is_expressed_by_the_workload() {
    let (mut child, addr) = common::spawn_announced(&[
        "serve",
        "--design",
        "iterative",
        "--handler",
        "stevens",
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--announce",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (c, out, err) = run(&[
        "load",
        "--to",
        &addr,
        "--clients",
        "2",
        "--bytes",
        "10",
        "--duration",
        "300ms",
        "--threads",
        "1",
        "--json",
        "--db",
        db.to_str().unwrap(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["completed"].as_u64().unwrap() > 0, "{v}");
    assert!(v["config"]["loops"].is_null(), "{v}");
    assert_eq!(v["config"]["new_connection_per_request"], true, "{v}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let config: String = conn
        .query_row("SELECT config_json FROM cells", [], |r| r.get(0))
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["loops"], "unlimited", "{config}");
    assert_eq!(config["duration"], "300ms", "{config}");
}

/// What the load workload cannot run (stevens over kept-alive connections) and what it
/// refuses for the target are one-line usage errors naming the flag and the fix.
#[test]
fn combinations_outside_the_workload_name_the_flag_and_the_fix() {
    assert_usage_error(
        &["load", "--to", "127.0.0.1:9", "--protocol", "stevens"],
        &["--protocol stevens", "--clients C"],
    );
    assert_usage_error(
        &["load", "--to", "[::1]:9", "--source-addrs", "4"],
        &["--source-addrs 4", "IPv4 loopback"],
    );
    assert_usage_error(
        &["load", "--to", "127.0.0.1:9", "--path", "index.html"],
        &["--path 'index.html'", "/index.html"],
    );
    assert_usage_error(
        &["load", "--to", "127.0.0.1:9", "--duration", "1ms"],
        &["--duration 1ms", "10ms"],
    );
}
