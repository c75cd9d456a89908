//! `socklab sink --db PATH` stores each iperf3 test it finishes (issue 27 part 1: "the test is
//! stored like any sink-side measurement when the sink has a `--db`"): a real iperf3 client
//! (Debian's 3.12) against the sink, then `socklab results` reads the sink's figures and the
//! client's; a sink killed with SIGKILL keeps the tests it finished. Loopback only; every
//! wait is bounded.

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::iperf3::{have_iperf3, run_client, SinkProc};
use common::{run, wait_until};

fn sink(db: &Path) -> SinkProc {
    SinkProc::start(&["--quiet", "--db", db.to_str().unwrap()])
}

/// `iperf3 -c ADDR -J ARGS`, which must exit 0, to its end: its JSON.
fn iperf3(addr: SocketAddr, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["-J"];
    all.extend_from_slice(args);
    let (st, text) = run_client(addr, &all);
    assert!(st.success(), "iperf3 {args:?}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// `socklab results list --db DB` lists `n` experiments (a hang guard: the sink stores a
/// test as its control connection ends, just after the client exits).
fn until_listed(db: &Path, n: usize) -> String {
    let db = db.to_str().unwrap();
    let mut out = String::new();
    let listed = wait_until(Duration::from_secs(20), || {
        let (code, o, _) = run(&["results", "list", "--db", db]);
        out = o;
        code == 0 && out.matches("iperf3 from 127.0.0.1").count() == n
    });
    assert!(listed, "{n} tests not listed:\n{out}");
    out
}

/// The metrics of experiment `id` (`results show --json`): name to its median.
fn shown(db: &Path, id: &str) -> serde_json::Value {
    let (code, out, err) = run(&[
        "results",
        "show",
        id,
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The median of `metric` in a `results show --json` document.
fn median(v: &serde_json::Value, metric: &str) -> f64 {
    let text = v.to_string();
    let cell = &v["cells"][0];
    let m = &cell["metrics"][metric];
    m["median"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {metric} median in {text}"))
}

#[test]
fn an_iperf3_test_against_sink_db_is_stored_with_both_sides_figures() {
    if !have_iperf3("an_iperf3_test_against_sink_db_is_stored_with_both_sides_figures") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sink.db");
    let s = sink(&db);
    let up = iperf3(s.addr, &["-n", "20M", "-P", "2"]);
    until_listed(&db, 1);
    let down = iperf3(s.addr, &["-t", "1", "-R"]);
    until_listed(&db, 2);

    let v = shown(&db, "1");
    // The sink read every byte of a -n test: its figure is the client's byte count.
    assert_eq!(median(&v, "bytes"), (20u64 << 20) as f64, "{v}");
    assert_eq!(median(&v, "streams"), 2.0);
    let received = up["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert_eq!(
        median(&v, "bytes"),
        received as f64,
        "the client printed the sink's figure"
    );
    assert_eq!(
        median(&v, "client_bytes"),
        (20u64 << 20) as f64,
        "the client's own"
    );
    assert!(
        median(&v, "gbps") > 0.0 && median(&v, "seconds") > 0.0,
        "{v}"
    );
    assert!(median(&v, "rcv_cpu_pct") >= 0.0, "{v}");
    assert!(median(&v, "retrans") >= 0.0, "the client sent: its count");

    let v = shown(&db, "2");
    let sent = down["end"]["sum_sent"]["bytes"].as_u64().unwrap();
    assert_eq!(
        median(&v, "bytes"),
        sent as f64,
        "-R: the sink sent what it says"
    );
    assert!(median(&v, "snd_cpu_pct") >= 0.0, "{v}");
    assert!(
        median(&v, "retrans") >= 0.0,
        "-R: the sink's TCP_INFO count"
    );
    let text = v.to_string();
    assert!(text.contains("\"direction\":\"down\""), "{text}");
}

#[test]
fn a_killed_sink_keeps_the_tests_it_finished() {
    if !have_iperf3("a_killed_sink_keeps_the_tests_it_finished") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sink.db");
    let mut s = sink(&db);
    iperf3(s.addr, &["-n", "5M"]);
    until_listed(&db, 1);
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let out = until_listed(&db, 1);
    assert!(out.contains("done"), "{out}");
    let v = shown(&db, "1");
    assert_eq!(median(&v, "bytes"), (5u64 << 20) as f64, "{v}");
}

#[test]
fn a_sink_db_that_is_no_file_is_refused_in_one_line() {
    common::assert_usage_error(
        &["sink", "--port", "0", "--db", "/"],
        &["'/'", "is not a regular file"],
    );
}

/// A test that never sent its results (its client gone after `EXCHANGE_RESULTS`) is not
/// stored: the sink has no client figures for it; the next, whole test is.
#[test]
fn a_test_that_did_not_end_well_is_not_stored() {
    use std::io::Write;
    use std::net::TcpStream;
    if !have_iperf3("a_test_that_did_not_end_well_is_not_stored") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sink.db");
    let s = sink(&db);
    let cookie = b"storetestaaaaaaaaaaaaaaaaaaaaaaaaaaa\0";
    let json = br#"{"tcp":true,"time":1,"parallel":1,"len":1000}"#;
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let state = |c: &mut TcpStream| {
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        b[0]
    };
    c.write_all(cookie).unwrap();
    assert_eq!(state(&mut c), 9);
    c.write_all(&(json.len() as u32).to_be_bytes()).unwrap();
    c.write_all(json).unwrap();
    assert_eq!(state(&mut c), 10);
    let mut stream = TcpStream::connect(s.addr).unwrap();
    stream.write_all(cookie).unwrap();
    assert_eq!((state(&mut c), state(&mut c)), (1, 2));
    stream.write_all(&[0u8; 10_000]).unwrap();
    drop(stream);
    c.write_all(&[4]).unwrap();
    assert_eq!(state(&mut c), 13, "EXCHANGE_RESULTS");
    drop(c);
    iperf3(s.addr, &["-n", "1M"]);
    let out = until_listed(&db, 1);
    let v = shown(&db, "1");
    assert_eq!(median(&v, "bytes"), (1u64 << 20) as f64, "{out}");
}
