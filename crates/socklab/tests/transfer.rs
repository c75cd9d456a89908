//! `socklab transfer` through the real binary: serve + send over loopback, bad inputs, the
//! Runner path (store and report), and (as root) through an emulated link. Bounded in count and
//! time; traffic only to loopback or to namespaces the test created.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::{assert_usage_error, root_or_skip, run, spawn_announced};

/// Pseudo-random bytes (xorshift), so files differ and compress badly.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A server child with `--once --announce`, and the address it announced.
fn serve(proto: &str, dir: &Path) -> (Child, String) {
    let dir = dir.to_str().unwrap();
    spawn_announced(&[
        "transfer",
        "serve",
        "--proto",
        proto,
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--once",
        "--announce",
        "--dir",
        dir,
    ])
}

/// `socklab transfer ARGS --reps 2 --warmup 0 --db DB` (exit code, stdout, stderr).
#[test]
fn runner_runs_quic_with_each_controller_pinning_the_servers_certificate() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db");
    let (code, out, err) = run_transfer(
        &db,
        &[
            "--proto",
            "quic",
            "--tcp-cc",
            "cubic,bbr",
            "--file-sizes",
            "300K,10K",
            "--timeout",
            "30s",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // tcp_cc crosses with quic: two cells, quinn's controllers.
    assert!(out.contains("proto=quic"), "{out}");
    assert!(
        out.contains("tcp_cc=cubic") && out.contains("tcp_cc=bbr"),
        "{out}"
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    for m in [
        "total_s",
        "goodput_mbps",
        "retx",
        "srtt_us",
        "pkts_sent",
        "handshake_us",
    ] {
        assert_eq!(
            query_f64(
                &conn,
                &format!("SELECT COUNT(*) * 1.0 FROM sample_metrics WHERE name = '{m}'")
            ),
            4.0,
            "metric {m} in every repetition"
        );
    }
    // Every repetition succeeded: the client pinned the certificate the server child named.
    assert_eq!(
        query_f64(
            &conn,
            "SELECT MAX(value) FROM sample_metrics WHERE name = 'failed'"
        ),
        0.0
    );
}

fn run_transfer(db: &Path, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["transfer"];
    all.extend_from_slice(args);
    all.extend(["--reps", "2", "--warmup", "0", "--db", db.to_str().unwrap()]);
    run(&all)
}

/// Waits (at most 10 s) for a `--once` server to end; returns its exit code and stderr.
fn wait_server(mut child: Child) -> (i32, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return (st.code().unwrap_or(-1), err);
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the --once server did not end within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `transfer serve --once` + `transfer send` of three files: every file arrives byte-identical,
/// the client prints the per-file table and the summary, the server its session line.
fn serve_and_send(proto: &str) {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = [
        ("big.bin", bytes(3_000_000, 1)),
        ("small.bin", bytes(10_500, 2)),
        ("one", vec![7u8]),
    ];
    for (n, b) in &files {
        std::fs::write(src.path().join(n), b).unwrap();
    }
    let incoming = dst.path().join("incoming"); // created by the server
    let (server, addr) = serve(proto, &incoming);
    let mut args = vec![
        "transfer".to_string(),
        "send".into(),
        "--proto".into(),
        proto.into(),
        "--to".into(),
        addr,
        "--timeout".into(),
        "30s".into(),
    ];
    args.extend(
        files
            .iter()
            .map(|(n, _)| src.path().join(n).display().to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "send failed: {err}");
    for (n, b) in &files {
        assert!(out.contains(n), "{n} in the table: {out}");
        assert_eq!(&std::fs::read(incoming.join(n)).unwrap(), b, "{n} differs");
    }
    assert!(out.contains("goodput"), "{out}");
    assert!(out.contains("3 files, "), "{out}");
    match proto {
        "tcp" => assert!(out.contains("cc cubic") && out.contains("tcpi_total_retrans")),
        _ => assert!(out.contains("spurious losses") && out.contains("packets sent")),
    }
    let (code, err) = wait_server(server);
    assert_eq!(code, 0, "server: {err}");
    assert!(err.contains("3/3 files ok"), "server session line: {err}");

    // Again with --json, into a fresh directory: the same facts, machine-readable.
    let again = dst.path().join("again");
    let (server, addr) = serve(proto, &again);
    let mut json_args: Vec<&str> = args.clone();
    json_args[5] = &addr;
    json_args.push("--json");
    let (code, out, err) = run(&json_args);
    assert_eq!(code, 0, "send --json failed: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["proto"], proto);
    assert_eq!(v["bytes"], 3_000_000 + 10_500 + 1);
    assert!(v["total_s"].as_f64().unwrap() > 0.0);
    let names: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["ok"], true);
            f["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(names, ["big.bin", "small.bin", "one"]);
    let key = if proto == "tcp" {
        "total_retrans"
    } else {
        "spurious_losses"
    };
    assert!(v[key].is_u64(), "{key} in {out}");
    assert_eq!(wait_server(server).0, 0);
    assert_eq!(std::fs::read(again.join("one")).unwrap(), [7u8]);
}

#[test]
fn tcp_serve_and_send_deliver_byte_identical_files() {
    serve_and_send("tcp");
}

#[test]
fn rudp_serve_and_send_deliver_byte_identical_files() {
    serve_and_send("rudp");
}

/// The Runner path over rudp: tcp_cc recorded as n/a, rudp's own metrics stored.
/// Issue 16 item 1: a hard link planted at the temporary name (`ln outside/victim
/// in/.hl.sl-part`) must not make the server write the sent bytes into the victim, over TCP and
/// over rudp; the file still arrives whole under its own name.
#[test]
fn a_hard_link_planted_at_the_temporary_name_never_receives_the_sent_bytes() {
    for proto in ["tcp", "rudp"] {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::fs::hard_link(&victim, dst.path().join(".hl.sl-part")).unwrap();
        let sent = bytes(200_000, 9);
        std::fs::write(src.path().join("hl"), &sent).unwrap();
        let (server, addr) = serve(proto, dst.path());
        let file = src.path().join("hl").display().to_string();
        let (code, _out, err) = run(&[
            "transfer",
            "send",
            "--proto",
            proto,
            "--to",
            &addr,
            "--timeout",
            "30s",
            &file,
        ]);
        assert_eq!(code, 0, "{proto}: send failed: {err}");
        assert_eq!(wait_server(server).0, 0, "{proto}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{proto}");
        assert_eq!(
            std::fs::read(dst.path().join("hl")).unwrap(),
            sent,
            "{proto}"
        );
    }
}

#[test]
fn runner_stores_rudp_repetitions_with_their_metrics() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db");
    let (code, out, err) = run_transfer(
        &db,
        &[
            "--proto",
            "rudp",
            "--file-sizes",
            "300K,10K",
            "--timeout",
            "30s",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tcp_cc=n/a"), "{out}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    for m in [
        "total_s",
        "goodput_mbps",
        "retx",
        "spurious",
        "srtt_us",
        "min_rtt_us",
        "pkts_sent",
        "pkts_received",
        "retx.file-0",
        "retx.file-1",
    ] {
        assert_eq!(
            query_f64(
                &conn,
                &format!("SELECT COUNT(*) * 1.0 FROM sample_metrics WHERE name = '{m}'")
            ),
            2.0,
            "metric {m} in every repetition"
        );
    }
    assert_eq!(
        query_f64(
            &conn,
            "SELECT MAX(value) FROM sample_metrics WHERE name = 'failed'"
        ),
        0.0
    );
    assert!(
        query_f64(
            &conn,
            "SELECT MIN(value) FROM sample_metrics WHERE name = 'pkts_sent'"
        ) > (310 * 1024 / 65_507) as f64,
        "at least one packet per largest UDP datagram of data (on loopback rudp's datagrams are as large as the loopback MTU carries)"
    );
}

#[test]
fn bad_inputs_are_one_line_errors_naming_the_value_with_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let missing = d.path().join("nope");
    let missing = missing.to_str().unwrap();
    assert_usage_error(
        &[
            "transfer",
            "send",
            "--proto",
            "sctp",
            "--to",
            "127.0.0.1:9",
            f,
        ],
        &["--proto 'sctp'", "choose tcp, rudp or quic"],
    );
    assert_usage_error(
        &["transfer", "serve", "--proto", "sctp", "--dir", "x"],
        &["--proto 'sctp'", "choose tcp, rudp or quic"],
    );
    assert_usage_error(
        &["transfer", "send", "--to", "127.0.0.1:9", missing],
        &[missing, "does not exist"],
    );
    assert_usage_error(
        &["transfer", "serve", "--port", "0", "--dir", f],
        &[f, "is a file, not a directory"],
    );
    assert_usage_error(
        &[
            "transfer",
            "send",
            "--tcp-cc",
            "cubc",
            "--to",
            "127.0.0.1:9",
            f,
        ],
        &["--tcp-cc 'cubc'", "choose cubic, bbr or reno"],
    );
    assert_usage_error(
        &["transfer", "send", "--proto", "rudp", "--tcp-cc", "bbr"]
            .iter()
            .copied()
            .chain(["--to", "127.0.0.1:9", f])
            .collect::<Vec<_>>(),
        &["--tcp-cc 'bbr' applies to --proto tcp"],
    );
    assert_usage_error(
        &["transfer", "send", "--to", "localhost", f],
        &["--to 'localhost'", "missing port"],
    );
    assert_usage_error(
        &["transfer", "--proto", "tcp,sctp", "--reps", "1"],
        &["proto = 'sctp'", "choose tcp, rudp or quic"],
    );
    assert_usage_error(
        &["transfer", "--tcp-cc", "vegass", "--reps", "1"],
        &["tcp_cc = 'vegass'", "choose cubic, bbr or reno"],
    );
    assert_usage_error(
        &["transfer", "--workload", "custom", "--reps", "1"],
        &["workload = custom needs files"],
    );
}

fn query_f64(conn: &rusqlite::Connection, sql: &str) -> f64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// `socklab transfer` through the Runner: 2 repetitions stored with their metrics (and the
/// per-file retransmissions), then `socklab report` renders the transfer rows.
#[test]
fn runner_stores_transfer_repetitions_and_the_report_shows_them() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db");
    let db_s = db.to_str().unwrap();
    let (code, out, err) = run_transfer(
        &db,
        &[
            "--proto",
            "tcp",
            "--tcp-cc",
            "cubic,reno",
            "--workload",
            "custom",
            "--file-sizes",
            "300K,10K,1",
            "--timeout",
            "30s",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("tcp_cc=cubic") && out.contains("tcp_cc=reno"),
        "{out}"
    );
    assert!(out.contains("retransmissions per file"), "{out}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n = |sql: &str| query_f64(&conn, sql);
    assert_eq!(
        // Re-runs of repetitions marked invalid (a busy machine) are extra attempts.
        n("SELECT COUNT(*) * 1.0 FROM samples WHERE warmup = 0 AND extra_json NOT LIKE '%\"retry\":true%'"),
        4.0
    );
    for m in [
        "total_s",
        "goodput_mbps",
        "bytes",
        "retx",
        "srtt_us",
        "min_rtt_us",
        "pkts_sent",
        "failed",
        "retx.file-0",
        "retx.file-2",
    ] {
        assert_eq!(
            n(&format!(
                "SELECT COUNT(*) * 1.0 FROM sample_metrics WHERE name = '{m}'"
            )),
            4.0,
            "metric {m} in every repetition"
        );
    }
    assert_eq!(
        n("SELECT MAX(value) FROM sample_metrics WHERE name = 'failed'"),
        0.0
    );
    assert_eq!(
        n("SELECT MIN(value) FROM sample_metrics WHERE name = 'bytes'"),
        (300 * 1024 + 10 * 1024 + 1) as f64
    );
    assert!(n("SELECT MIN(value) FROM sample_metrics WHERE name = 'total_s'") > 0.0);
    let cfg: String = conn
        .query_row("SELECT config_json FROM cells LIMIT 1", [], |r| r.get(0))
        .unwrap_or_default();
    assert!(cfg.contains("\"proto\":\"tcp\""), "{cfg}");

    let rep = d.path().join("report");
    let (code, _, err) = run(&["report", "--db", db_s, "--out", rep.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(rep.join("report.md")).unwrap();
    assert!(md.contains("## transfer (experiment 1)"), "{md}");
    assert!(md.contains("| proto=tcp tcp_cc=cubic |") || md.contains("| tcp_cc=cubic |"));
    assert!(md.contains("Retransmissions per file"), "{md}");
    assert!(md.contains("| file-0 | file-1 | file-2 |"), "{md}");
    let html = std::fs::read_to_string(rep.join("index.html")).unwrap();
    assert!(html.contains("Retransmissions per file"));
    assert!(html.contains("class=\"per-file\""));
    assert!(html.contains("Mean transfer time per cell"));
    let csv = std::fs::read_to_string(rep.join("results.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",retx.file-0,"));
    assert_eq!(csv.lines().filter(|l| l.contains(",transfer,")).count(), 4);
}

/// A transfer that cannot finish in time is a failed repetition: stored with failed = 1 and
/// its reason, the command exits 1 after printing the table, nothing hangs.
#[test]
fn a_timed_out_transfer_is_stored_as_a_failed_repetition() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db");
    // Nothing hangs: a bound on a hang only, far beyond what the command takes.
    let (tx, rx) = std::sync::mpsc::channel();
    let db2 = db.clone();
    std::thread::spawn(move || {
        let _ = tx.send(run_transfer(
            &db2,
            &["--file-sizes", "8M", "--timeout", "1ms"],
        ));
    });
    let (code, out, err) = rx
        .recv_timeout(Duration::from_secs(180))
        .expect("the transfer with --timeout 1ms hung");
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("2 of 2 repetitions failed"), "{err}");
    assert!(err.contains("recorded with failed = 1"), "{err}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    assert_eq!(
        query_f64(
            &conn,
            "SELECT SUM(value) FROM sample_metrics WHERE name = 'failed'"
        ),
        2.0
    );
    let extra: String = conn
        .query_row("SELECT extra_json FROM samples LIMIT 1", [], |r| r.get(0))
        .unwrap();
    assert!(extra.contains("\"error\""), "{extra}");
}

/// As root: tcp and rudp through an emulated lossy link, every file byte-identical (the executor checks
/// it; a difference would store failed = 1 and exit 1), namespaces removed afterwards.
#[test]
fn transfer_through_an_emulated_lossy_link() {
    if !root_or_skip("transfer_through_an_emulated_lossy_link") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db");
    let (code, out, err) = run_transfer(
        &db,
        &[
            "--proto",
            "tcp,rudp",
            "--link",
            "delay 5ms loss 5%",
            "--file-sizes",
            "300K,10K",
            "--timeout",
            "60s",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    assert_eq!(
        query_f64(
            &conn,
            "SELECT SUM(value) FROM sample_metrics WHERE name = 'failed'"
        ),
        0.0
    );
    // 5 % loss on 300K: TCP retransmitted something in at least one repetition.
    assert!(
        query_f64(
            &conn,
            "SELECT SUM(value) FROM sample_metrics WHERE name = 'retx'"
        ) > 0.0
    );
    assert!(out.contains("link=delay 5ms loss 5%") || out.contains("delay 5ms loss 5%"));
}

/// As root: Ctrl-C in the middle of a long transfer (10 MB through a 2 Mbit/s link) ends the
/// command promptly with exit 130, not after the transfer's timeout.
#[test]
fn ctrl_c_during_a_transfer_ends_it_promptly() {
    if !root_or_skip("ctrl_c_during_a_transfer_ends_it_promptly") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("t.db");
    let mut child = common::socklab()
        .args([
            "transfer",
            "--link",
            "rate 2mbit",
            "--reps",
            "1",
            "--warmup",
            "0",
        ])
        .args(["--timeout", "120s", "--db", db.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(child.try_wait().unwrap().is_none(), "still transferring");
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("socklab transfer did not stop within 10 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
}

/// `transfer send --proto quic --tls-trust`: the SHA-256 the server printed is pinned by hand;
/// another one fails in one line naming both, and the server serves the right client after it.
#[test]
fn quic_send_by_hand_pins_the_certificate_the_server_printed() {
    use std::io::BufRead;
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let file = src.path().join("f.bin");
    std::fs::write(&file, bytes(200_000, 3)).unwrap();
    let (mut server, addr) = serve("quic", &dst.path().join("in"));
    let mut err = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut fp = String::new();
    for _ in 0..20 {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.split("SHA-256 ").nth(1) {
            fp = rest.split_whitespace().next().unwrap().to_string();
            break;
        }
    }
    assert_eq!(fp.len(), 64, "the server printed its certificate's SHA-256");
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        rest
    });
    let file = file.to_str().unwrap();
    let wrong = "cd".repeat(32);
    let send = |trust: &str| {
        run(&[
            "transfer",
            "send",
            "--proto",
            "quic",
            "--to",
            &addr,
            "--tls-trust",
            trust,
            "--timeout",
            "20s",
            file,
        ])
    };
    let (code, _, e) = send(&wrong);
    assert_ne!(code, 0, "a wrong pin must fail");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.to_lowercase().contains(&wrong[..16]), "{e}");
    let (code, out, e) = send(&fp);
    assert_eq!(code, 0, "{out}{e}");
    assert_eq!(
        std::fs::read(dst.path().join("in/f.bin")).unwrap(),
        bytes(200_000, 3)
    );
    let status = common::wait_bounded(&mut server, Duration::from_secs(10), "quic --once server");
    assert!(status.success(), "{}", drain.join().unwrap());
    assert_usage_error(
        &[
            "transfer",
            "send",
            "--proto",
            "tcp",
            "--to",
            "127.0.0.1:9",
            "--tls-trust",
            &wrong,
            file,
        ],
        &["--tls-trust applies to --proto quic"],
    );
}
