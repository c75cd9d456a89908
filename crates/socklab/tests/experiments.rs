//! Experiment files, resume and reports through the real binary, over loopback.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use assert_cmd::prelude::*;
use predicates::prelude::*;

fn socklab() -> Command {
    Command::cargo_bin("socklab").unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

const SMALL: &str = r#"
name = "small"
workload = "bulk"
reps = 2
warmup = 1
[fixed]
iterations = 50
nbufs = 4
bufsize = "1K"
verify = true
[matrix]
strategy = ["write", "writev"]
"#;

#[test]
fn run_executes_a_file_and_report_writes_html_markdown_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "small.toml", SMALL);
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    socklab()
        .args(["run", &f, "--db", dbs])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("strategy=write")
                .and(predicate::str::contains("strategy=writev")),
        );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2 * 3);

    let out = dir.path().join("rep");
    socklab()
        .args(["report", "--db", dbs, "--out", out.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("index.html"));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("small (experiment 1)"));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| strategy=writev |"));
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6);

    // Unknown experiment id: a clear error.
    socklab()
        .args([
            "report",
            "--db",
            dbs,
            "--experiment",
            "9",
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no experiment 9"));
}

/// Item 10 of issue 15: a `--quick` run stores the description of what it ran (placeholders
/// filled from the quick plan), and the report renders its Markdown.
#[test]
fn a_quick_run_stores_the_description_of_what_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "copy.toml",
        "name = \"copy\"\ndescription = \"`memcpy` of {size} blocks, {bytes} per repetition\"\nworkload = \"memcpy\"\nreps = 2\nwarmup = 0\n[fixed]\nsize = \"4K\"\nbytes = \"8M\"\n[quick]\nreps = 1\nfixed = { bytes = \"1M\" }\n",
    );
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    socklab()
        .args(["run", &f, "--quick", "--db", dbs])
        .assert()
        .success();
    let o = socklab()
        .args(["results", "show", "--json", "--db", dbs])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["experiment"]["description"],
        "`memcpy` of 4K blocks, 1M per repetition"
    );
    let out = dir.path().join("rep");
    socklab()
        .args(["report", "--db", dbs, "--out", out.to_str().unwrap()])
        .assert()
        .success();
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains("<code>memcpy</code> of 4K blocks, 1M per repetition"),
        "{html}"
    );
}

#[test]
fn file_mistakes_are_one_line_with_the_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "bad.toml",
        "name = \"x\"\nworkload = \"bulk\"\n[matrix]\nstrategy = [\"write\", \"writeev\"]\n",
    );
    let o = socklab()
        .args(["run", &f, "--db", dir.path().join("r.db").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.toml:4: strategy = 'writeev': unknown strategy 'writeev': choose one of write, writev"), "{err}");
    socklab()
        .args(["run", "/nonexistent/x.toml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "cannot read experiment file '/nonexistent/x.toml'",
        ));
}

#[test]
fn resume_after_sigkill_continues_exactly_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "long.toml",
        "name = \"long\"\nworkload = \"bulk\"\nreps = 6\nwarmup = 1\n[fixed]\nduration = \"60ms\"\nbufsize = \"4K\"\n[matrix]\nstrategy = [\"single\", \"writev\", \"sendfile\"]\n",
    );
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    let mut child = Command::cargo_bin("socklab")
        .unwrap()
        .args(["run", &f, "--db", dbs])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reported = 0;
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let t0 = Instant::now();
    while reported < 8 && t0.elapsed() < Duration::from_secs(60) {
        match lines.next() {
            Some(Ok(l)) if l.starts_with('[') => reported += 1,
            Some(Ok(_)) => {}
            _ => break,
        }
    }
    assert!(reported >= 8);
    child.kill().unwrap();
    child.wait().unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let before: i64 = conn
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert!((8..21).contains(&before), "{before} stored before resume");

    let o = socklab()
        .args(["run", &f, "--resume", "--db", dbs])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "resumed experiment 1: {before} runs already stored, {} run now",
            21 - before
        )),
        "{err}"
    );
    // Every (cell, rep, warm-up) exactly once: 3 cells x (6 + 1).
    let total: i64 = conn
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert_eq!(total, 21);
    let distinct: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM (SELECT DISTINCT cell_id, rep, warmup FROM samples)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(distinct, 21);
    let experiments: i64 = conn
        .query_row("SELECT COUNT(*) FROM experiments", [], |r| r.get(0))
        .unwrap();
    assert_eq!(experiments, 1, "resumed into the same experiment");
    let status: String = conn
        .query_row("SELECT status FROM experiments", [], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "done");
}

/// Two server designs under a small Stevens load: a fresh `socklab serve` per repetition, the
/// server's CPU from wait4, per-worker counts from its STATS line, the design table with the
/// iterative baseline subtracted.
const DESIGNS: &str = r#"
name = "designs-small"
workload = "load"
reps = 2
warmup = 0
[fixed]
handler = "stevens"
clients = 3
loops = 20
bytes = 4000
workers = 3
[matrix]
design = ["iterative", "prefork-flock", "epoll"]
"#;

#[test]
fn a_designs_experiment_measures_server_cpu_and_worker_counts() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "designs.toml", DESIGNS);
    let db = dir.path().join("d.db");
    let dbs = db.to_str().unwrap();
    socklab()
        .args(["run", &f, "--db", dbs])
        .assert()
        .success()
        .stdout(
            predicate::str::contains(
                "server designs (CPU per connection, minus the iterative baseline)",
            )
            .and(predicate::str::contains("design=prefork-flock workers=3"))
            .and(predicate::str::contains("design=epoll ")),
        );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let metric = |design: &str, name: &str| -> Vec<f64> {
        let mut st = conn
            .prepare(
                "SELECT m.value FROM sample_metrics m JOIN samples s ON m.sample_id = s.id
                 JOIN cells c ON s.cell_id = c.id
                 WHERE c.label LIKE ?1 AND m.name = ?2 ORDER BY s.id",
            )
            .unwrap();
        st.query_map(rusqlite::params![format!("design={design}%"), name], |r| {
            r.get(0)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    for d in ["iterative", "prefork-flock", "epoll"] {
        let cpu = metric(d, "srv_cpu_s");
        assert_eq!(cpu.len(), 2, "{d}: one server CPU figure per repetition");
        assert!(cpu.iter().all(|c| *c > 0.0), "{d}: server CPU {cpu:?}");
        assert_eq!(metric(d, "errors"), vec![0.0, 0.0], "{d}");
        // 3 clients x 20 connections, each one request: the generator's rate is positive and
        // the server's own count backs the per-connection CPU.
        assert!(metric(d, "req_per_s").iter().all(|r| *r > 0.0), "{d}");
        assert_eq!(metric(d, "cpu_us_per_conn").len(), 2, "{d}");
    }
    // Three workers share the connections: Jain's index exists and is in (1/3, 1].
    let j = metric("prefork-flock", "fairness");
    assert_eq!(j.len(), 2);
    assert!(
        j.iter().all(|x| *x > 1.0 / 3.0 - 1e-9 && *x <= 1.0 + 1e-9),
        "{j:?}"
    );
    // The per-worker counts the server printed add up to the connections made.
    let extra: String = conn
        .query_row(
            "SELECT s.extra_json FROM samples s JOIN cells c ON s.cell_id = c.id
             WHERE c.label LIKE 'design=prefork-flock%' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&extra).unwrap();
    let workers: Vec<u64> = v["server"]["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .collect();
    assert_eq!(workers.len(), 3, "{v}");
    assert_eq!(workers.iter().sum::<u64>(), 60, "{v}");
}

#[test]
fn lab_lists_suites_and_says_which_cannot_run_here() {
    socklab().args(["lab", "--list"]).assert().success().stdout(
        predicate::str::contains("writev")
            .and(predicate::str::contains("bufsize"))
            .and(predicate::str::is_match("designs +available").unwrap()),
    );
    // lossy needs root (an emulated link): listed as available as root, else with the reason.
    let lossy = if is_root() {
        "lossy +available"
    } else {
        "lossy +unavailable: needs root"
    };
    socklab()
        .args(["lab", "--list"])
        .assert()
        .success()
        .stdout(predicate::str::is_match(lossy).unwrap());
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

#[test]
fn every_shipped_experiment_file_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut n = 0;
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let text = std::fs::read_to_string(&p).unwrap();
            socklab_lab_parse(&text, &p);
            n += 1;
        }
    }
    assert!(n >= 3);
}

fn socklab_lab_parse(text: &str, p: &Path) {
    // The binary's own parser: `run --reps 0` fails after parsing, so a parse error shows first.
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "f.toml", text);
    let o = socklab()
        .args([
            "run",
            &f,
            "--reps",
            "0",
            "--db",
            dir.path().join("r.db").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--reps 0"), "{}: {err}", p.display());
}

#[test]
fn pingpong_compares_option_sets_reads_them_back_and_stores_histograms() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    let o = socklab()
        .args([
            "pingpong",
            "--opts",
            "baseline,nodelay+quickack,server:sndbuf=64K",
            "--size",
            "29",
            "--count",
            "50",
            "--reps",
            "3",
            "--json",
            "--db",
            dbs,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert_eq!(cells[1]["config"]["opts"], "nodelay+quickack");
    assert_eq!(cells[0]["metrics"]["total_us"]["n"], 3);
    assert!(cells[0]["metrics"]["rtt_p99_us"]["mean"].as_f64().unwrap() > 0.0);
    // One echo server per option set, each stopped and accounted by wait4.
    let facts = v["facts"].as_object().unwrap();
    assert_eq!(
        facts.keys().filter(|k| k.ends_with("_exit")).count(),
        3,
        "{facts:?}"
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    // The client's options were read back from the kernel and stored with each repetition.
    let extra: String = conn
        .query_row("SELECT s.extra_json FROM samples s JOIN cells c ON s.cell_id=c.id WHERE c.label='opts=nodelay+quickack' LIMIT 1", [], |r| r.get(0))
        .unwrap();
    let extra: serde_json::Value = serde_json::from_str(&extra).unwrap();
    assert_eq!(extra["client_opts"]["nodelay"], "1", "{extra}");
    // Every repetition stored its round-trip histogram: 50 round trips each.
    let buckets: String = conn
        .query_row(
            "SELECT buckets_json FROM sample_histograms WHERE name='rtt_ns' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let b: Vec<(u64, u64)> = serde_json::from_str(&buckets).unwrap();
    assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 50);
    // The report draws the percentile plot from them.
    let out = dir.path().join("rep");
    socklab()
        .args(["report", "--db", dbs, "--out", out.to_str().unwrap()])
        .assert()
        .success();
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("Round-trip time percentiles"));
    assert!(html.contains("vs baseline"));
}

#[test]
fn pingpong_udp_and_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    socklab()
        .args([
            "pingpong",
            "--udp",
            "--size",
            "1K",
            "--count",
            "20",
            "--reps",
            "2",
            "--timeout",
            "100ms",
            "--db",
            dbs,
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("lost"));
    let err = |args: &[&str], needle: &str| {
        let o = socklab().args(args).args(["--db", dbs]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    };
    err(
        &["pingpong", "--opts", "nodelayy"],
        "unknown option 'nodelayy'",
    );
    err(&["pingpong", "--opts", "sndbuf=0"], "out of range");
    err(&["pingpong", "--udp", "--opts", "nodelay"], "TCP only");
    err(&["pingpong", "--size", "0"], "size");
    err(
        &[
            "pingpong",
            "--to",
            "127.0.0.1:9",
            "--opts",
            "server:nodelay",
        ],
        "self-started echo server",
    );
    // An option the kernel refuses: the option and the errno, exit 1.
    let o = socklab()
        .args([
            "pingpong",
            "--opts",
            "cc=nosuchcc",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--db",
            dbs,
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cc=nosuchcc refused"));
}
