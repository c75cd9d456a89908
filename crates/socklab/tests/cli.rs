//! CLI tests: real processes over loopback, bounded in count and time.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use assert_cmd::prelude::*;
use common::{run, socklab, spawn_announced};
use predicates::prelude::*;

/// Asserts a one-line error with `code` that contains every needle.
fn assert_error(args: &[&str], code: i32, needles: &[&str]) {
    let (c, _, err) = run(args);
    assert_eq!(c, code, "exit code of {args:?}; stderr: {err}");
    // Progress lines may precede a runtime error; the error itself is one line, and the last.
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(
        errors.len(),
        1,
        "one error line expected for {args:?}, got: {err}"
    );
    assert!(errors[0].starts_with("socklab: error: "), "{err}");
    assert_eq!(err.lines().last(), Some(errors[0]), "{err}");
    for n in needles {
        assert!(errors[0].contains(n), "{args:?}: '{n}' missing in: {err}");
    }
}

#[test]
fn every_subcommand_has_help_with_examples() {
    for sub in [
        vec![],
        vec!["sink"],
        vec!["bulk"],
        vec!["lab"],
        vec!["results", "list"],
        vec!["results", "show"],
        vec!["results", "export"],
    ] {
        let mut args = sub.clone();
        args.push("--help");
        socklab()
            .args(&args)
            .assert()
            .success()
            .stdout(predicate::str::contains("Example"));
    }
    socklab()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Exit codes"));
}

#[test]
fn bad_input_is_one_line_naming_the_value_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    assert_error(
        &["bulk", "--bufsize", "0", "--db", db],
        2,
        &["bufsize = '0'", "at least 1"],
    );
    assert_error(
        &[
            "bulk",
            "--strategy",
            "writev",
            "--nbufs",
            "2000",
            "--bufsize",
            "10",
            "--db",
            db,
        ],
        2,
        &["--nbufs 2000", "IOV_MAX"],
    );
    assert_error(
        &["bulk", "--strategy", "writeev", "--db", db],
        2,
        &["writeev", "choose one of"],
    );
    assert_error(&["bulk", "--reps", "0", "--db", db], 2, &["--reps 0"]);
    assert_error(
        &["bulk", "--sweep", "bufsize=9K..1K", "--db", db],
        2,
        &["--sweep 'bufsize=9K..1K'"],
    );
    assert_error(
        &["bulk", "--nbufs", "1,2", "--bufsize", "1,2,3", "--db", db],
        2,
        &["nbufs has 2, bufsize has 3", "--cross"],
    );
    assert_error(
        &["bulk", "--duration", "5", "--db", db],
        2,
        &["duration = '5'", "no unit"],
    );
    assert_error(
        &["bulk", "--order", "backwards", "--db", db],
        2,
        &["--order 'backwards'"],
    );
    assert_error(
        &["bulk", "--to", "localhost", "--db", db],
        2,
        &["missing port"],
    );
    assert_error(
        &[
            "bulk",
            "--cc",
            "nosuchcc",
            "--iterations",
            "1",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--db",
            db,
        ],
        1,
        &["cc=nosuchcc", "available"],
    );
    assert_error(
        &["bulk", "--db", "/nonexistent-dir/x.db", "--iterations", "1"],
        1,
        &["/nonexistent-dir/x.db", "--db PATH"],
    );
    assert_error(
        &["results", "list", "--db", "/nonexistent-dir/x.db"],
        1,
        &["does not exist"],
    );
    assert_error(
        &["lab", "--suite", "nope", "--db", db],
        2,
        &["unknown suite 'nope'"],
    );
    assert_error(&["sink", "--bind", "not-an-ip"], 2, &["--bind 'not-an-ip'"]);
    assert_error(
        &["sink", "--read-size", "0", "--port", "0"],
        2,
        &["--read-size 0"],
    );

    // A closed port: unreachable --to.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let to = format!("127.0.0.1:{port}");
    assert_error(
        &[
            "bulk",
            "--to",
            &to,
            "--iterations",
            "1",
            "--reps",
            "1",
            "--db",
            db,
        ],
        1,
        &[&format!("cannot connect to {to}"), "omit --to"],
    );

    // A port in use.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = held.local_addr().unwrap().port().to_string();
    assert_error(
        &["sink", "--bind", "127.0.0.1", "--port", &p],
        1,
        &["Address already in use", "choose another --port"],
    );

    // An unknown flag is clap's error (exit 2).
    let (c, _, _) = run(&["bulk", "--no-such-flag"]);
    assert_eq!(c, 2);
}

#[test]
fn bulk_with_its_own_sink_stores_results_that_read_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    let (c, out, err) = run(&[
        "bulk",
        "--strategy",
        "write,writev,single,sendmsg,sendfile,splice,zerocopy",
        "--nbufs",
        "10",
        "--bufsize",
        "1000",
        "--iterations",
        "200",
        "--reps",
        "2",
        "--warmup",
        "1",
        "--verify",
        "--json",
        "--db",
        dbs,
    ]);
    assert_eq!(c, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 7);
    for cell in cells {
        assert_eq!(cell["n"], 2);
        assert_eq!(
            cell["metrics"]["bytes"]["mean"], 2_000_000.0,
            "{}",
            cell["label"]
        );
        assert_eq!(cell["config"]["cc"], "cubic");
        assert_eq!(cell["metrics"]["gbps"]["unit"], "Gbit/s");
    }
    assert_eq!(
        v["host"]["cc_default"].as_str().map(|s| !s.is_empty()),
        Some(true)
    );
    // The sink child's CPU was read from wait4 at the end.
    assert!(v["facts"]["sink_wait4_sys_s"].is_string(), "{}", v["facts"]);
    assert!(
        v["facts"]["sink_exit"]
            .as_str()
            .unwrap()
            .contains("Code(0)"),
        "{}",
        v["facts"]
    );

    // `results show --json` reads the same statistics back from the store alone.
    let (c, shown, _) = run(&["results", "show", "--json", "--db", dbs]);
    assert_eq!(c, 0);
    let w: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(w["cells"], v["cells"]);

    // Export: one row per repetition (7 cells x (2 + 1 warm-up)), tidy columns.
    let (c, csv, _) = run(&["results", "export", "--csv", "--db", dbs]);
    assert_eq!(c, 0);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "experiment",
        "cell",
        "rep",
        "warmup",
        "cfg_strategy",
        "gbps",
        "reads",
        "writes",
    ] {
        assert!(header.contains(&col), "{col} missing from {header:?}");
    }
    assert_eq!(lines.count(), 21);
    let (c, list, _) = run(&["results", "list", "--db", dbs]);
    assert_eq!(c, 0);
    assert!(
        list.contains("done") && list.contains(" 7 ") && list.contains("14"),
        "{list}"
    );

    // Each repetition's reported writes match the strategy: `write` issues one call per buffer.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let writes: f64 = conn
        .query_row(
            "SELECT m.value FROM sample_metrics m JOIN samples s ON m.sample_id=s.id JOIN cells c ON s.cell_id=c.id
             WHERE c.label LIKE 'strategy=write' AND m.name='writes' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        writes >= 2000.0,
        "write strategy issued {writes} calls for 200 rounds of 10 buffers"
    );
}

fn spawn_sink(extra: &[&str]) -> (Child, SocketAddr) {
    let mut args = vec!["sink", "--bind", "127.0.0.1", "--port", "0", "--announce"];
    args.extend_from_slice(extra);
    let (child, addr) = spawn_announced(&args);
    (child, addr.parse().unwrap())
}

#[test]
fn external_sink_serves_bulk_and_raw_clients_and_reports_cpu_on_sigint() {
    let (mut sink, addr) = spawn_sink(&["--read-size", "1500"]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let to = addr.to_string();
    for _ in 0..2 {
        socklab()
            .args([
                "bulk",
                "--to",
                &to,
                "--strategy",
                "writev",
                "--nbufs",
                "100",
                "--bufsize",
                "15",
                "--iterations",
                "2000",
                "--reps",
                "2",
                "--read-size",
                "1500",
                "--verify",
                "--db",
                db.to_str().unwrap(),
            ])
            .assert()
            .success()
            .stdout(
                predicate::str::contains("strategy")
                    .not()
                    .or(predicate::str::contains("Gbit/s"))
                    .or(predicate::str::contains("Mbit/s")),
            );
    }
    // A raw client (like `dd | nc`).
    {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&vec![0u8; 100_000]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    socklab_sys::process::kill(sink.id(), socklab_sys::process::Signal::Int).unwrap();
    let status = sink.wait().unwrap();
    assert!(status.success(), "sink exits cleanly on SIGINT");
    let mut err = String::new();
    sink.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("raw: 100000 bytes"), "{err}");
    assert!(
        err.contains("user time = ") && err.contains("sys time = "),
        "{err}"
    );
    // 2 runs x (1 warm-up + 2 reps) socklab connections, 1 raw, and each run's connect
    // before it stores anything (issue 26 item 10).
    assert!(err.contains("connections served = 9"), "{err}");
}

#[test]
fn sigkill_mid_run_loses_no_finished_repetition_and_leaves_no_sink() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut child = Command::cargo_bin("socklab")
        .unwrap()
        .args([
            "bulk",
            "--strategy",
            "single,writev",
            "--nbufs",
            "4",
            "--bufsize",
            "1K",
            "--duration",
            "50ms",
            "--reps",
            "500",
            "--warmup",
            "0",
            "--db",
            db.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reported = 0usize;
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let t0 = Instant::now();
    while reported < 6 && t0.elapsed() < Duration::from_secs(60) {
        match lines.next() {
            Some(Ok(l)) if l.starts_with('[') => reported += 1,
            Some(Ok(_)) => {}
            _ => break,
        }
    }
    assert!(reported >= 6, "the run reported {reported} repetitions");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: i64 = conn
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert!(
        stored as usize >= reported,
        "{reported} repetitions reported finished, {stored} stored"
    );
    // Every stored repetition is whole: all of its metrics are there.
    let partial: i64 = conn
        .query_row("SELECT COUNT(*) FROM samples s WHERE (SELECT COUNT(*) FROM sample_metrics m WHERE m.sample_id=s.id) < 16", [], |r| r.get(0))
        .unwrap();
    assert_eq!(partial, 0);
    let status: String = conn
        .query_row("SELECT status FROM experiments", [], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "running", "a killed run cannot mark itself");
    // The self-started sink died with its parent (PR_SET_PDEATHSIG): its port stops answering.
    let extra: String = conn
        .query_row("SELECT extra_json FROM samples LIMIT 1", [], |r| r.get(0))
        .unwrap();
    let to: SocketAddr = serde_json::from_str::<serde_json::Value>(&extra).unwrap()["to"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let t0 = Instant::now();
    while TcpStream::connect_timeout(&to, Duration::from_millis(200)).is_ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the sink child outlived its parent"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // And the results stay readable.
    socklab()
        .args(["results", "show", "--db", db.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("running"));
}

#[test]
fn sweep_and_reference_build_the_seed000_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let (c, out, err) = run(&[
        "bulk",
        "--sweep",
        "bufsize=1K..8K",
        "--bytes",
        "2M",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--reference",
        "--csv",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(c, 0, "{err}");
    let gbps_rows: Vec<&str> = out.lines().filter(|l| l.contains(",gbps,")).collect();
    // 4 TCP sizes, 4 pipe sizes, 4 memcpy sizes.
    assert_eq!(gbps_rows.len(), 12, "{out}");
    for label in [
        "bulk bufsize=1K",
        "bulk bufsize=8K",
        "pipe size=4K",
        "memcpy size=2K",
    ] {
        assert!(
            gbps_rows.iter().any(|l| l.contains(label)),
            "{label} missing: {out}"
        );
    }
}

/// `--keep-invalid` keeps a repetition marked invalid (`emu_valid = 0`) in the statistics and
/// says so; without it the repetition is left out and counted. A real experiment over loopback
/// with one repetition marked invalid in the store, read back by `results show` (JSON and the
/// table) and `report`; the measuring commands take the same flag into the same code path.
#[test]
fn every_command_that_prints_statistics_takes_keep_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db");
    let dbs = db.to_str().unwrap();
    let (code, _, err) = run(&[
        "pingpong", "--count", "50", "--reps", "3", "--warmup", "0", "--db", dbs,
    ]);
    assert_eq!(code, 0, "{err}");
    // Mark repetition 2 invalid, as the emulator's validity check would.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let sample: i64 = conn
        .query_row(
            "SELECT id FROM samples WHERE rep = 2 AND warmup = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "INSERT OR REPLACE INTO sample_metrics(sample_id, name, value) VALUES (?1, 'emu_valid', 0)",
        [sample],
    )
    .unwrap();
    let total = |sql: &str| -> f64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let all = total("SELECT AVG(value) FROM sample_metrics WHERE name = 'total_us'");
    let valid = total(
        "SELECT AVG(m.value) FROM sample_metrics m JOIN samples s ON s.id = m.sample_id \
         WHERE m.name = 'total_us' AND s.rep != 2",
    );
    drop(conn);
    let show = |keep: bool| -> serde_json::Value {
        let mut args = vec!["results", "show", "--json", "--db", dbs, "1"];
        if keep {
            args.push("--keep-invalid");
        }
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["cells"][0].clone()
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let left_out = show(false);
    assert_eq!(
        (left_out["n"].as_u64(), left_out["invalid"].as_u64()),
        (Some(2), Some(1))
    );
    let m = left_out["metrics"]["total_us"]["mean"].as_f64().unwrap();
    assert!(close(m, valid), "mean {m} of the valid ones {valid}");
    let kept = show(true);
    assert_eq!(
        (kept["n"].as_u64(), kept["invalid"].as_u64()),
        (Some(3), Some(1))
    );
    let m = kept["metrics"]["total_us"]["mean"].as_f64().unwrap();
    assert!(close(m, all), "mean {m} of all {all}");
    // The table and the report say which.
    let (_, out, _) = run(&["results", "show", "--db", dbs, "1"]);
    assert!(out.contains("2 (+1 invalid)"), "{out}");
    let (_, out, _) = run(&["results", "show", "--keep-invalid", "--db", dbs, "1"]);
    assert!(out.contains("3 (incl. 1 invalid)"), "{out}");
    for (keep, want) in [(false, "2 (+1 invalid)"), (true, "3 (incl. 1 invalid)")] {
        let rep = dir.path().join(format!("report-{keep}"));
        let mut args = vec!["report", "--db", dbs, "--out", rep.to_str().unwrap()];
        if keep {
            args.push("--keep-invalid");
        }
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        let md = std::fs::read_to_string(rep.join("report.md")).unwrap();
        assert!(md.contains(want), "--keep-invalid {keep}: {md}");
    }
    // The commands that measure and print take the flag too (the same SummaryFormat).
    for sub in [
        vec!["run"],
        vec!["lab"],
        vec!["bulk"],
        vec!["pingpong"],
        vec!["transfer"],
        vec!["load"],
        vec!["rrul"],
    ] {
        let mut args = sub.clone();
        args.push("--help");
        socklab()
            .args(&args)
            .assert()
            .success()
            .stdout(predicate::str::contains("--keep-invalid"));
    }
}

/// A TCP server on 127.0.0.1 for `conns` connections (besides socklab's probe): it answers
/// every read after `delay`, with the bytes it read (`answer` None: an echo) or with `answer`.
/// Each connection ends at end of stream, an error, or 5 s of silence.
fn scripted_tcp_server(
    conns: usize,
    delay: Duration,
    answer: Option<&'static [u8]>,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        // One more: socklab connects once, and closes, before it stores anything (issue 26
        // item 10).
        for _ in 0..=conns {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 4096];
            for _ in 0..10_000 {
                let n = match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                std::thread::sleep(delay);
                if s.write_all(answer.unwrap_or(&buf[..n])).is_err() {
                    break;
                }
            }
        }
    });
    (addr, handle)
}

/// `completed` of every stored repetition of the experiment in `db`.
fn stored_completed(db: &std::path::Path) -> Vec<u64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn.prepare("SELECT extra_json FROM samples").unwrap();
    let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| {
        let v: serde_json::Value = serde_json::from_str(&r.unwrap()).unwrap();
        v["completed"].as_u64().unwrap()
    })
    .collect()
}

#[test]
fn tcp_pingpong_waits_for_a_reply_as_long_as_timeout_says() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    // A server that answers every message after 300 ms: a sample, not an error, within 2s.
    let (addr, server) = scripted_tcp_server(1, Duration::from_millis(300), None);
    let to = addr.to_string();
    let args = [
        "pingpong", "--to", &to, "--count", "2", "--reps", "1", "--warmup", "0", "--db", dbs,
    ];
    let (c, _, err) = run(&[&args[..], &["--timeout", "2s"]].concat());
    assert_eq!(c, 0, "{err}");
    server.join().unwrap();
    assert_eq!(stored_completed(&db), vec![2]);

    // Shorter than the server's delay: one line naming the timeout and how to raise it.
    let (addr, server) = scripted_tcp_server(1, Duration::from_millis(300), None);
    let to = addr.to_string();
    let args = [
        "pingpong",
        "--to",
        &to,
        "--count",
        "2",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        dbs,
        "--timeout",
        "100ms",
    ];
    assert_error(&args, 1, &["100ms", "--timeout"]);
    server.join().unwrap();
}

/// A TCP server on 127.0.0.1 for one measured connection that echoes each 32-byte message one byte
/// every 300 ms (so a reply takes 9.3 s), until the client goes away (a write fails) or two
/// messages were answered.
fn trickling_tcp_server() -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        // The first connection is socklab's check that the target answers (it closes at
        // once, sending nothing); the second is the repetition's.
        for _ in 0..2 {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut msg = [0u8; 32];
            if s.read_exact(&mut msg).is_err() {
                continue;
            }
            trickle(&mut s, msg);
            return;
        }
    });
    (addr, handle)
}

/// Answers `msg` and one more 32-byte message of `s`, each one byte every 300 ms.
fn trickle(s: &mut std::net::TcpStream, first: [u8; 32]) {
    let mut msg = first;
    for i in 0..2 {
        if i > 0 && s.read_exact(&mut msg).is_err() {
            return;
        }
        for b in msg {
            std::thread::sleep(Duration::from_millis(300));
            if s.write_all(&[b]).is_err() {
                return;
            }
        }
    }
}

/// Issue 26 item 7: `--timeout` bounds the whole reply, not each read of it. A reply trickled
/// in one byte every 300 ms was stored as a 9.3 s round trip under `--timeout 1s`; now the
/// repetition fails at the timeout and is stored failed, with its reason and no round trip.
#[test]
fn a_trickled_reply_fails_the_pingpong_repetition_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    let (addr, server) = trickling_tcp_server();
    let to = addr.to_string();
    let args = [
        "pingpong",
        "--to",
        &to,
        "--size",
        "32",
        "--count",
        "2",
        "--timeout",
        "1s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        dbs,
    ];
    assert_error(
        &args,
        1,
        &[
            "round trip 1 was not complete within the timeout of 1s",
            "--timeout",
        ],
    );
    // The server saw the connection go (its write failed): it was not kept.
    server.join().unwrap();
    let (c, json, err) = run(&["results", "export", "--json", "--db", dbs]);
    assert_eq!(c, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r["metrics"]["failed"], 1.0, "{r}");
    assert!(
        r["metrics"]["rtt_max_us"].is_null(),
        "no round trip stored: {r}"
    );
    assert!(
        r["extra"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("was not complete within the timeout of 1s")),
        "{r}"
    );
}

#[test]
fn a_corked_pingpong_is_measured_at_the_cork_timer_not_failed() {
    // TCP_CORK holds each small message until its ~200 ms timer: a slow round trip, which the
    // TCP default timeout waits for.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let (c, _, err) = run(&[
        "pingpong",
        "--opts",
        "cork",
        "--count",
        "3",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(stored_completed(&db), vec![3]);
}
#[test]
fn pingpong_measures_a_server_that_is_not_an_echo_with_reply() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    for reply in ["any", "5"] {
        let (addr, server) = scripted_tcp_server(1, Duration::ZERO, Some(b"pong\n"));
        let to = addr.to_string();
        let (c, _, err) = run(&[
            "pingpong", "--to", &to, "--count", "3", "--reps", "1", "--warmup", "0", "--reply",
            reply, "--db", dbs,
        ]);
        assert_eq!(c, 0, "--reply {reply}: {err}");
        server.join().unwrap();
    }
    assert_eq!(stored_completed(&db), vec![3, 3]);
    let (addr, server) = scripted_tcp_server(1, Duration::ZERO, Some(b"pong\n"));
    let to = addr.to_string();
    assert_error(
        &[
            "pingpong", "--to", &to, "--count", "3", "--reps", "1", "--warmup", "0", "--db", dbs,
        ],
        1,
        &["got 5 bytes", "pong\\n", "--reply"],
    );
    server.join().unwrap();
}

/// `--mtu` and `--link-seed` reach the link as the numbers clap parsed (no text round trip);
/// an MTU out of range is still a one-line usage error naming the value and the range.
#[test]
fn a_link_mtu_out_of_range_is_one_line_naming_the_value_and_the_range() {
    let (code, _, err) = run(&[
        "--dry-run",
        "netem",
        "--link",
        "delay 1ms",
        "--mtu",
        "100",
        "--",
        "true",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.trim(),
        "socklab: error: --mtu 100: use 576 to 65535 (1500 is Ethernet's)"
    );
    let (code, out, err) = run(&[
        "--dry-run",
        "netem",
        "--link",
        "delay 1ms",
        "--mtu",
        "9000",
        "--link-seed",
        "7",
        "--",
        "true",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("would build a link (delay 1ms)"), "{out}");
}
