//! Hostile iperf3 peers against the real sink process (issue 27 part 4), many at once while a
//! real iperf3 client (Debian's 3.12) runs its test: each gets iperf3's own refusal
//! (`SERVER_ERROR` with an error number the client prints, or `ACCESS_DENIED`) and a close,
//! the sink's log says why in one line, and the sink's threads and descriptors come back to
//! where they were once the peers are gone. Loopback only; every wait is bounded (the bounds
//! are hang guards, far from the sink's own deadlines of 10 s).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::iperf3::{have_iperf3, SinkProc, IPERF3};
use common::procfs::{fds, status, Peaks};
use common::wait_until;

/// A hang guard for one hostile peer: the sink's longest deadline here is 10 s.
const PEER_BOUND: Duration = Duration::from_secs(40);

fn sink(extra: &[&str]) -> SinkProc {
    SinkProc::start(extra)
}

/// Runs `iperf3 -c ADDR -J ARGS` to its end (a hang guard of 60 s): exit status and output.
fn iperf3(addr: SocketAddr, args: &[&str]) -> (bool, String) {
    let mut child = Command::new(IPERF3)
        .args(["-c", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let st = common::wait_bounded(&mut child, Duration::from_secs(60), "iperf3 client");
    let mut text = reader.join().unwrap();
    let _ = child.stderr.take().unwrap().read_to_string(&mut text);
    (st.success(), text)
}

/// A cookie of our own (36 printable characters and a NUL), `k` telling tests apart.
fn cookie(k: usize) -> Vec<u8> {
    let mut c = format!("hostile{k:029}").into_bytes();
    c.push(0);
    c
}

fn framed(json: &str) -> Vec<u8> {
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json.as_bytes());
    v
}

fn params(streams: u32) -> String {
    format!(r#"{{"tcp":true,"time":1,"parallel":{streams},"len":131072,"client_version":"3.12"}}"#)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PEER_BOUND)).unwrap();
    s
}

/// Reads one byte (a state); panics on a close or the hang guard.
fn state(s: &mut TcpStream, what: &str) -> u8 {
    let mut b = [0u8; 1];
    s.read_exact(&mut b)
        .unwrap_or_else(|e| panic!("{what}: no state byte: {e}"));
    b[0]
}

/// Everything until the sink closes (a hang guard of [`PEER_BOUND`]; a reset ends it too).
fn rest(s: &mut TcpStream, what: &str) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let t0 = Instant::now();
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("{what}: not closed after {:?}: {e}", t0.elapsed()),
        }
    }
}

/// `SERVER_ERROR`, then iperf3's error number and errno, big-endian.
fn server_error(code: i32, errno: i32) -> Vec<u8> {
    let mut v = vec![0xfe];
    v.extend_from_slice(&code.to_be_bytes());
    v.extend_from_slice(&errno.to_be_bytes());
    v
}

/// Opens a test up to `CREATE_STREAMS`.
fn open_test(addr: SocketAddr, cookie: &[u8], streams: u32, what: &str) -> TcpStream {
    let mut c = connect(addr);
    c.write_all(cookie).unwrap();
    assert_eq!(state(&mut c, what), 9, "{what}: PARAM_EXCHANGE");
    c.write_all(&framed(&params(streams))).unwrap();
    assert_eq!(state(&mut c, what), 10, "{what}: CREATE_STREAMS");
    c
}

/// One hostile peer: its name, and what it expects the sink to send before the close.
type Peer = (&'static str, Box<dyn FnOnce(SocketAddr) -> Vec<u8> + Send>);

/// The peers of round `r` (each round's cookies its own).
fn peers(r: usize) -> Vec<(Peer, Vec<u8>)> {
    let cookie = move |k: usize| cookie(r * 16 + k);
    let mut v: Vec<(Peer, Vec<u8>)> = Vec::new();
    // Connects and says nothing: closed at the sink's idle timeout (2 s here), nothing said
    // (it never said what it speaks).
    v.push((
        ("silent", Box::new(|a| rest(&mut connect(a), "silent"))),
        vec![],
    ));
    // A cookie, then a 1 MB parameter message: refused at its length prefix.
    v.push((
        (
            "1 MB parameters",
            Box::new(move |a| {
                let mut c = connect(a);
                c.write_all(&cookie(1)).unwrap();
                assert_eq!(state(&mut c, "1 MB"), 9);
                let mut msg = (1u32 << 20).to_be_bytes().to_vec();
                msg.extend(std::iter::repeat_n(b' ', 1 << 20));
                // The sink reads a little of it before its close: a reset may end the write.
                let _ = c.write_all(&msg);
                rest(&mut c, "1 MB parameters")
            }),
        ),
        server_error(114, 90),
    ));
    // A length prefix of 1 MB, then silence.
    v.push((
        (
            "1 MB prefix, silence",
            Box::new(move |a| {
                let mut c = connect(a);
                c.write_all(&cookie(2)).unwrap();
                assert_eq!(state(&mut c, "prefix"), 9);
                c.write_all(&(1u32 << 20).to_be_bytes()).unwrap();
                rest(&mut c, "1 MB prefix")
            }),
        ),
        server_error(114, 90),
    ));
    // A cookie, then nothing: the handshake deadline (10 s).
    v.push((
        (
            "cookie, silence",
            Box::new(move |a| {
                let mut c = connect(a);
                c.write_all(&cookie(3)).unwrap();
                assert_eq!(state(&mut c, "cookie only"), 9);
                rest(&mut c, "cookie, silence")
            }),
        ),
        server_error(114, 110),
    ));
    // A parameter message trickled a byte every 10 ms (well inside the sink's 100 ms read tick): the
    // same deadline (before: never).
    v.push((
        (
            "trickled parameters",
            Box::new(move |a| {
                let mut c = connect(a);
                c.write_all(&cookie(4)).unwrap();
                assert_eq!(state(&mut c, "trickle"), 9);
                c.write_all(&60_000u32.to_be_bytes()).unwrap();
                c.set_nonblocking(true).unwrap();
                let mut got = Vec::new();
                let t0 = Instant::now();
                let mut buf = [0u8; 64];
                loop {
                    match c.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => break,
                    }
                    assert!(
                        t0.elapsed() < PEER_BOUND,
                        "the trickle was read for {:?} without a close",
                        t0.elapsed()
                    );
                    if c.write_all(b" ").is_err() {
                        c.set_nonblocking(false).unwrap();
                        got.extend(rest(&mut c, "trickle"));
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                got
            }),
        ),
        server_error(114, 110),
    ));
    // An unknown state byte.
    v.push((
        (
            "unknown state",
            Box::new(move |a| {
                let mut c = open_test(a, &cookie(5), 1, "unknown state");
                c.write_all(&[99]).unwrap();
                rest(&mut c, "unknown state")
            }),
        ),
        server_error(110, 71),
    ));
    // Streams that never connect: the streams deadline (10 s).
    v.push((
        (
            "no streams",
            Box::new(move |a| {
                let mut c = open_test(a, &cookie(6), 2, "no streams");
                rest(&mut c, "no streams")
            }),
        ),
        server_error(204, 110),
    ));
    // A results exchange that never comes: the results deadline (10 s).
    v.push((
        (
            "no results",
            Box::new(move |a| {
                let mut c = open_test(a, &cookie(7), 1, "no results");
                let mut s = connect(a);
                s.write_all(&cookie(7)).unwrap();
                assert_eq!(state(&mut c, "no results"), 1, "TEST_START");
                assert_eq!(state(&mut c, "no results"), 2, "TEST_RUNNING");
                s.write_all(&[7u8; 100_000]).unwrap();
                drop(s);
                c.write_all(&[4]).unwrap(); // TEST_END
                assert_eq!(state(&mut c, "no results"), 13, "EXCHANGE_RESULTS");
                rest(&mut c, "no results")
            }),
        ),
        server_error(117, 110),
    ));
    // A stream with the valid cookie of another test whose streams are all there: iperf3's
    // ACCESS_DENIED on that stream; the other test goes on until its control closes.
    v.push((
        (
            "stream of another test",
            Box::new(move |a| {
                let other = cookie(15);
                let mut c = open_test(a, &other, 1, "other test");
                let mut s = connect(a);
                s.write_all(&other).unwrap();
                let mut extra = connect(a);
                // Wait until the first stream is the test's (TEST_START on its control).
                assert_eq!(state(&mut c, "other test"), 1);
                extra.write_all(&other).unwrap();
                let got = rest(&mut extra, "stream of another test");
                drop(c);
                rest(&mut s, "the other test's stream, after its control closed");
                got
            }),
        ),
        vec![0xff],
    ));
    v
}

/// Every hostile peer at once (three of each), while a real iperf3 client runs: each peer
/// gets its refusal and a close, the client completes, and the sink's threads and
/// descriptors come back to where they were.
#[test]
fn hostile_iperf3_peers_at_once_cost_only_themselves() {
    if !have_iperf3("hostile_iperf3_peers_at_once_cost_only_themselves") {
        return;
    }
    let s = sink(&["--idle-timeout", "2s"]);
    let pid = s.pid();
    let (threads0, fds0) = (status(pid, "Threads"), fds(pid));
    let mut running: Vec<(String, Vec<u8>, JoinHandle<Vec<u8>>)> = Vec::new();
    for round in 0..3 {
        for ((name, f), want) in peers(round) {
            let addr = s.addr;
            running.push((
                format!("{name} #{round}"),
                want,
                std::thread::spawn(move || f(addr)),
            ));
        }
    }
    // The sink's threads and memory, sampled while the real client runs beside the peers.
    let peaks = Peaks::start(pid);
    let (ok, out) = iperf3(s.addr, &["-t", "2", "-P", "2", "-J"]);
    assert!(ok, "the real client failed beside the hostile peers: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0,
        "{out}"
    );
    for (name, want, h) in running {
        let got = h
            .join()
            .unwrap_or_else(|_| panic!("{name}: the peer failed"));
        assert_eq!(got, want, "{name}: what the sink sent before its close");
    }
    let (peak_threads, peak_rss) = peaks.stop();
    // Far from normal: a thread per connection (the peers' 36 and the client's 3) at most,
    // and no memory a peer asked for (1 MB messages, 16 MiB blocks) beyond a few MiB each.
    assert!(
        peak_threads <= threads0 + 60,
        "threads {peak_threads} from {threads0}"
    );
    assert!(
        peak_rss < 256 * 1024,
        "VmRSS {peak_rss} kB beside the hostile peers"
    );
    assert!(
        wait_until(Duration::from_secs(20), || status(pid, "Threads")
            == threads0
            && fds(pid) == fds0),
        "the sink holds {} threads (from {threads0}) and {} fds (from {fds0}) after the peers left",
        status(pid, "Threads"),
        fds(pid)
    );
    // A connection's line is logged by the accept loop, a turn after its thread ended.
    let needles = [
        "refused (iperf3 JSON message of 1048576 bytes",
        "refused (iperf3 client timed out: waited too long for the cookie and parameters)",
        "refused (iperf3 client timed out: waited too long for the streams to connect)",
        "refused (iperf3 client timed out: waited too long for the results exchange)",
        "refused (unknown iperf3 state byte 99)",
        "refused (iperf3 stream arrived after its test's streams were complete)",
        "idle timeout",
    ];
    wait_until(Duration::from_secs(10), || {
        let log = s.log();
        needles.iter().all(|n| log.contains(n))
    });
    let log = s.log();
    for needle in needles {
        assert!(
            log.contains(needle),
            "no '{needle}' in the sink's log:\n{log}"
        );
    }
    // The sink still serves.
    let (ok, out) = iperf3(s.addr, &["-t", "1", "-J"]);
    assert!(ok, "after the hostile peers: {out}");
}

/// A real iperf3 client whose test the sink refuses prints iperf3's reason (before: "the
/// server has terminated", which says nothing): SCTP is not served.
#[test]
fn a_real_iperf3_client_prints_why_the_sink_refused_its_test() {
    if !have_iperf3("a_real_iperf3_client_prints_why_the_sink_refused_its_test") {
        return;
    }
    let s = sink(&[]);
    let (ok, out) = iperf3(s.addr, &["--sctp", "-t", "1"]);
    assert!(!ok, "an SCTP test was served? {out}");
    assert!(
        out.contains("error - an option you are trying to set is not implemented yet"),
        "the client's words: {out}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || s
            .log()
            .contains("`sctp` is not served")),
        "the sink's log says why: {}",
        s.log()
    );
}

/// A sink at its `--max-conns` answers an iperf3 client with iperf3's ACCESS_DENIED, which
/// the client prints as "the server is busy" (before: an `ERROR` line, read as an unknown
/// state).
#[test]
fn a_busy_sink_tells_an_iperf3_client_it_is_busy() {
    if !have_iperf3("a_busy_sink_tells_an_iperf3_client_it_is_busy") {
        return;
    }
    // Two connections at once: an iperf3 test of one stream needs both.
    let s = sink(&["--max-conns", "2"]);
    let fds0 = fds(s.pid());
    // The connections it serves: silent, held open.
    let holder = [connect(s.addr), connect(s.addr)];
    assert!(
        wait_until(Duration::from_secs(10), || fds(s.pid()) == fds0 + 2),
        "the holder was not accepted"
    );
    let (ok, out) = iperf3(s.addr, &["-t", "1"]);
    assert!(!ok, "served beyond --max-conns? {out}");
    assert!(
        out.contains("the server is busy running a test. try again later"),
        "the client's words: {out}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || s.log().contains("sink busy")),
        "{}",
        s.log()
    );
    drop(holder);
    assert!(
        wait_until(Duration::from_secs(10), || fds(s.pid()) == fds0),
        "the holder's connection is still open"
    );
    let (ok, out) = iperf3(s.addr, &["-t", "1"]);
    assert!(ok, "once the holder left: {out}");
}

/// Many control connections at once: the sink's threads and descriptors stay within its
/// `--max-conns` (the rest are refused at once), come back when the peers leave, and a real
/// client is served after.
#[test]
fn many_control_connections_stay_within_max_conns() {
    if !have_iperf3("many_control_connections_stay_within_max_conns") {
        return;
    }
    let s = sink(&["--max-conns", "16"]);
    let pid = s.pid();
    let (threads0, fds0) = (status(pid, "Threads"), fds(pid));
    let mut held = Vec::new();
    for k in 0..64 {
        let mut c = connect(s.addr);
        // Half send a cookie (a test each, waiting for its parameters), half say nothing.
        if k % 2 == 0 {
            c.write_all(&cookie(1000 + k)).unwrap();
        }
        held.push(c);
    }
    assert!(
        wait_until(Duration::from_secs(10), || s
            .log()
            .matches("sink busy")
            .count()
            >= 48),
        "48 of 64 refused: {}",
        s.log()
    );
    let (threads, n) = (status(pid, "Threads"), fds(pid));
    assert!(
        threads <= threads0 + 16,
        "threads {threads} from {threads0}"
    );
    assert!(n <= fds0 + 16, "fds {n} from {fds0}");
    drop(held);
    assert!(
        wait_until(Duration::from_secs(20), || status(pid, "Threads")
            == threads0
            && fds(pid) == fds0),
        "threads {} (from {threads0}), fds {} (from {fds0}) after the peers left",
        status(pid, "Threads"),
        fds(pid)
    );
    let (ok, out) = iperf3(s.addr, &["-t", "1", "-P", "4"]);
    assert!(ok, "after the flood: {out}");
}
