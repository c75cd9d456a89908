//! `socklab bulk --to iperf3://` against Debian's real `iperf3 -s` (3.12) on loopback (issue 27
//! part 2): several streams, reverse, bidir, repeated and stored like any bulk cell, with the
//! server's own bytes and CPU stored beside socklab's; a busy server and a bad address are one
//! line each. Every wait is bounded; skipped (and counted) where /usr/bin/iperf3 is missing.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

use common::iperf3::{have_iperf3, IPERF3};
use common::run;

/// A child process killed when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads `child`'s stdout until a line containing `needle` (the child prints it, or exits and
/// the read ends: then the test fails).
fn await_line(child: &mut Child, needle: &str) {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(needle) => break,
            Some(Ok(_)) => {}
            other => panic!("no line with '{needle}' before {other:?}"),
        }
    }
    // The rest of its output is read and dropped, so the child never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
}

/// A plain `iperf3 -s` (it serves test after test) on a free loopback port.
fn iperf3_server() -> (Killed, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(IPERF3)
        .args(["-s", "--bind", "127.0.0.1", "--forceflush", "-p"])
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_line(&mut child, "Server listening");
    (Killed(child), port)
}

/// Every repetition of the newest experiment in `db` (`results export --json`).
fn reps(db: &str) -> Vec<serde_json::Value> {
    let (code, json, err) = run(&["results", "export", "--json", "--db", db]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<serde_json::Value>(&json)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The most bytes one stream may have in flight at `TEST_END` (written and acknowledged by
/// the server's kernel, not yet read by iperf3): the largest receive buffer
/// (`tcp_rmem`'s maximum).
fn in_flight_per_stream() -> f64 {
    let t = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
    t.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn metric(rep: &serde_json::Value, name: &str) -> f64 {
    rep["metrics"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {rep}"))
}

/// `bulk --to iperf3://… --streams 2 --reps 2 --duration 1s` up, reverse and bidir: every
/// repetition stored with socklab's bytes and the server's; the two agree within what one
/// stream can hold in flight (up: iperf3 stops reading at TEST_END), exactly where the
/// server sends (it closes its streams at TEST_END and socklab reads them to the end).
#[test]
fn bulk_against_iperf3_stores_socklabs_and_the_servers_figures_that_agree() {
    if !have_iperf3("bulk_against_iperf3_stores_socklabs_and_the_servers_figures_that_agree") {
        return;
    }
    let (_server, port) = iperf3_server();
    let to = format!("iperf3://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let slack = 2.0 * in_flight_per_stream();
    for (i, flag) in [None, Some("--reverse"), Some("--bidir")]
        .iter()
        .enumerate()
    {
        let db = dir.path().join(format!("{i}.db"));
        let db = db.to_str().unwrap();
        let mut args = vec![
            "bulk",
            "--to",
            &to,
            "--streams",
            "2",
            "--reps",
            "2",
            "--duration",
            "1s",
            "--db",
            db,
            "--json",
        ];
        args.extend(*flag);
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let reps = reps(db);
        assert_eq!(reps.len(), 3, "two repetitions and a warm-up: {reps:?}");
        for r in &reps {
            assert_eq!(r["config"]["to"].as_str(), Some(to.as_str()), "{r}");
            let ours = metric(r, "bytes");
            let theirs = metric(r, "server_bytes");
            assert!(ours > 0.0 && theirs > 0.0, "{flag:?}: {r}");
            match flag {
                Some("--reverse") => assert_eq!(ours, theirs, "{r}"),
                _ => assert!(
                    theirs <= ours && ours - theirs <= slack,
                    "{flag:?}: socklab {ours} bytes, the server {theirs}: {r}"
                ),
            }
            assert!(metric(r, "server_cpu_pct") > 0.0, "{r}");
            assert!(metric(r, "gbps.s1") > 0.0, "{r}");
            let server = &r["extra"]["iperf3_server"];
            assert_eq!(
                server["streams"].as_array().unwrap().len(),
                if *flag == Some("--bidir") { 4 } else { 2 },
                "{r}"
            );
        }
        if *flag == Some("--bidir") {
            assert!(metric(&reps[1], "gbps_up") > 0.0 && metric(&reps[1], "gbps_down") > 0.0);
        }
    }
    // `results show` and the report read it like any bulk cell.
    let db = dir.path().join("0.db");
    let (code, json, err) = run(&["results", "show", "--json", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cell = &v["cells"][0];
    assert_eq!(cell["metrics"]["gbps"]["n"], 2, "{cell}");
    assert_eq!(cell["metrics"]["server_bytes"]["n"], 2, "{cell}");
}

/// A server running another client's test answers ACCESS_DENIED: socklab asks again for a
/// while, then fails the repetition with one line that says so. An address where nothing
/// listens, and a name that does not resolve, are one line each and store nothing.
#[test]
fn a_busy_server_and_a_bad_address_are_one_line_each() {
    if !have_iperf3("a_busy_server_and_a_bad_address_are_one_line_each") {
        return;
    }
    let (_server, port) = iperf3_server();
    let mut other = Command::new(IPERF3)
        .args(["-c", "127.0.0.1", "-t", "60", "--forceflush", "-p"])
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Its first interval line: its test runs.
    await_line(&mut other, "sec");
    let other = Killed(other);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let to = format!("iperf3://127.0.0.1:{port}");
    let (code, _, err) = run(&[
        "bulk",
        "--to",
        &to,
        "--reps",
        "1",
        "--warmup",
        "0",
        "--duration",
        "1s",
        "--db",
        db.to_str().unwrap(),
    ]);
    drop(other);
    assert_eq!(code, 1, "{err}");
    // Beside the progress lines, one error line.
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("socklab: error"))
        .collect();
    assert_eq!(errors.len(), 1, "one line: {err}");
    assert!(
        errors[0].contains(&format!(
            "iperf3 server at 127.0.0.1:{port} is busy with another test"
        )),
        "{err}"
    );

    // Nothing listens on the server's port once it is gone.
    drop(_server);
    let (code, _, err) = run(&[
        "bulk",
        "--to",
        &to,
        "--reps",
        "1",
        "--duration",
        "1s",
        "--db",
        dir.path().join("c.db").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("start `iperf3 -s` there"), "{err}");
    let (code, _, err) = run(&[
        "bulk",
        "--to",
        "iperf3://no-such-host.invalid",
        "--reps",
        "1",
        "--db",
        dir.path().join("d.db").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("iperf3://no-such-host.invalid"), "{err}");
}

/// What the iperf3 protocol cannot carry is refused before anything runs, naming the flag.
#[test]
fn what_iperf3_cannot_carry_is_refused_naming_the_flag() {
    for (extra, needle) in [
        (&["--verify"][..], "--verify with iperf3://"),
        (
            &["--reverse", "--strategy", "splice"][..],
            "--strategy splice",
        ),
        (&["--bidir", "--bytes", "1M"][..], "use --duration"),
    ] {
        let mut args = vec!["bulk", "--to", "iperf3://127.0.0.1:9", "--dry-run"];
        args.extend(extra);
        common::assert_usage_error(&args, &[needle]);
    }
}

/// `bulk --udp --to iperf3://… --rate 20M --duration 1s --reps 2` (issue 27 part 2, UDP),
/// up and `--reverse`, against the real server: every repetition stored like a UDP bulk
/// cell (`loss_pct`, `jitter_us`, `gbps`) with the server's own figures beside. Up, the
/// server numbered every datagram socklab sent (its `packets` is socklab's `dgrams_sent`,
/// less any still unread at TEST_END) and lost few on loopback; reverse, socklab counted the
/// server's datagrams itself. Counts only.
#[test]
fn udp_bulk_against_iperf3_stores_the_loss_and_the_servers_counts_beside() {
    if !have_iperf3("udp_bulk_against_iperf3_stores_the_loss_and_the_servers_counts_beside") {
        return;
    }
    let (_server, port) = iperf3_server();
    let to = format!("iperf3://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    for (i, reverse) in [false, true].into_iter().enumerate() {
        let db = dir.path().join(format!("u{i}.db"));
        let db = db.to_str().unwrap();
        let mut args = vec![
            "bulk",
            "--udp",
            "--to",
            &to,
            "--rate",
            "20M",
            "--size",
            "1000",
            "--reps",
            "2",
            "--duration",
            "1s",
            "--db",
            db,
            "--json",
        ];
        if reverse {
            args.push("--reverse");
        }
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let reps = reps(db);
        assert_eq!(reps.len(), 3, "two repetitions and a warm-up: {reps:?}");
        for r in &reps {
            assert_eq!(r["config"]["to"].as_str(), Some(to.as_str()), "{r}");
            assert_eq!(r["extra"]["iperf3"], true, "{r}");
            let server = &r["extra"]["iperf3_server"]["streams"][0];
            let server_packets = metric(r, "server_packets");
            assert_eq!(server["packets"].as_f64(), Some(server_packets), "{r}");
            assert!(server_packets > 0.0, "{r}");
            let received = metric(r, "dgrams_received");
            assert!(received > 0.0, "{r}");
            // Loopback at 20 Mbit/s: nothing or next to nothing lost.
            assert!(metric(r, "loss_pct") <= 2.0, "{r}");
            assert!(metric(r, "jitter_us") >= 0.0, "{r}");
            assert!(metric(r, "gbps") > 0.0, "{r}");
            assert!(metric(r, "server_cpu_pct") >= 0.0, "{r}");
            if reverse {
                assert_eq!(r["config"]["direction"].as_str(), Some("down"), "{r}");
                // socklab stops counting at TEST_END; the server may send a few after.
                assert!(received <= server_packets, "{r}");
                assert!(
                    server_packets - received <= 0.01 * server_packets + 64.0,
                    "{r}"
                );
                assert!(metric(r, "rcv_cpu_pct") >= 0.0, "{r}");
            } else {
                let sent = metric(r, "dgrams_sent");
                // Every datagram the server numbered, socklab sent; what it had not read
                // at TEST_END is the tail, stored apart.
                assert!(server_packets <= sent, "{r}");
                assert_eq!(sent - server_packets, metric(r, "dgrams_tail"), "{r}");
                assert!(sent - server_packets <= 0.01 * sent + 64.0, "{r}");
                assert_eq!(
                    metric(r, "server_bytes"),
                    (server_packets - metric(r, "server_lost")) * 1000.0,
                    "{r}"
                );
            }
        }
    }
}

/// What an iperf3 server cannot carry over UDP is refused before anything runs, one line
/// naming the flag; a UDP `--to` that is not iperf3:// too.
#[test]
fn udp_options_iperf3_cannot_carry_are_refused_naming_the_flag() {
    for (extra, needle) in [
        (&["--rate", "max"][..], "--rate max with iperf3://"),
        (&["--gso", "on"][..], "--gso on with iperf3://"),
        (&["--interval", "100ms"][..], "--interval with iperf3://"),
        (&["--bidir"][..], "--udp does not take --bidir"),
        (&["--link", "loss 1%"][..], "link needs to = self"),
    ] {
        let mut args = vec!["bulk", "--udp", "--to", "iperf3://127.0.0.1:9", "--dry-run"];
        args.extend(extra);
        common::assert_usage_error(&args, &[needle]);
    }
    common::assert_usage_error(
        &["bulk", "--udp", "--to", "127.0.0.1:9", "--dry-run"],
        &["omit --to, or give iperf3://HOST[:PORT]"],
    );
    common::assert_usage_error(
        &["bulk", "--udp", "--reverse", "--dry-run"],
        &["--udp does not take --reverse", "--to iperf3://HOST"],
    );
}
