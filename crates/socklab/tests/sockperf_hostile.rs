//! Hostile sockperf peers against the real `socklab echo` process (issue 27 part 4), many at
//! once while Debian's real `sockperf pp` runs: a header with a bad length or a huge size, a
//! message trickled a byte at a time, a message that never ends, a client that says nothing.
//! sockperf's protocol has no error message: each is closed, and echo's log says why in one
//! line; echo's threads and descriptors come back to where they were once the peers are gone.
//! Loopback only; every wait is bounded (hang guards, far from the 2 s idle timeout used).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::procfs::{fds, status, Peaks};
use common::{announced, socklab, wait_until};

const SOCKPERF: &str = "/usr/bin/sockperf";
/// A hang guard for one peer: echo's idle timeout here is 2 s.
const PEER_BOUND: Duration = Duration::from_secs(30);

struct EchoProc {
    child: Child,
    addr: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Drop for EchoProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn echo() -> EchoProc {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = socklab();
    cmd.args(["echo", "--bind", "127.0.0.1", "--port", "0", "--announce"])
        .args(["--idle-timeout", "2s"])
        .stderr(log.reopen().unwrap());
    let (child, addr) = announced(cmd);
    EchoProc {
        child,
        addr: addr.parse().unwrap(),
        log,
    }
}

/// A sockperf client header: sequence 1, flags client and pong request, `len` bytes.
fn header(len: u32) -> Vec<u8> {
    let mut h = 1u64.to_be_bytes().to_vec();
    h.extend_from_slice(&3u16.to_be_bytes());
    h.extend_from_slice(&len.to_be_bytes());
    h
}

/// A whole message of `len` bytes asking for an answer.
fn message(len: u32) -> Vec<u8> {
    let mut m = header(len);
    m.resize(len as usize, b'x');
    m
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PEER_BOUND)).unwrap();
    s
}

/// Everything until echo closes (a reset ends it too); panics past the hang guard.
fn rest(s: &mut TcpStream, what: &str) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("{what}: not closed: {e}"),
        }
    }
}

/// The answer echo sends to [`message`]: the message with the client bit cleared.
fn answer(len: u32) -> Vec<u8> {
    let mut m = message(len);
    m[9] &= !1;
    m
}

/// One hostile peer: its name, what it does, and what echo sends before the close.
type Peer = (&'static str, fn(SocketAddr) -> Vec<u8>, Vec<u8>);

fn peers() -> Vec<Peer> {
    vec![
        (
            "bad length",
            |a| {
                let mut c = connect(a);
                c.write_all(&message(64)).unwrap();
                let mut got = vec![0u8; 64];
                c.read_exact(&mut got).unwrap();
                // A header that says 5 bytes, shorter than itself.
                c.write_all(&header(5)).unwrap();
                got.extend(rest(&mut c, "bad length"));
                got
            },
            answer(64),
        ),
        (
            "huge size",
            |a| {
                let mut c = connect(a);
                c.write_all(&message(64)).unwrap();
                let mut got = vec![0u8; 64];
                c.read_exact(&mut got).unwrap();
                // 16 MiB: beyond sockperf's own largest TCP message (1 MiB - 1).
                c.write_all(&header(16 << 20)).unwrap();
                got.extend(rest(&mut c, "huge size"));
                got
            },
            answer(64),
        ),
        (
            "1 MiB message that never ends",
            |a| {
                let mut c = connect(a);
                c.write_all(&header((1 << 20) - 1)).unwrap();
                c.write_all(&[b'x'; 1000]).unwrap();
                rest(&mut c, "never ends")
            },
            vec![],
        ),
        (
            "trickled message",
            |a| {
                let mut c = connect(a);
                c.write_all(&header(1000)).unwrap();
                c.set_nonblocking(true).unwrap();
                let t0 = Instant::now();
                let mut buf = [0u8; 64];
                loop {
                    match c.read(&mut buf) {
                        Ok(0) => return vec![],
                        Ok(n) => panic!("trickle: {n} bytes answered to half a message"),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(_) => return vec![],
                    }
                    assert!(
                        t0.elapsed() < PEER_BOUND,
                        "a trickle was read for {:?} without a close",
                        t0.elapsed()
                    );
                    if c.write_all(b"x").is_err() {
                        return vec![];
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            },
            vec![],
        ),
        ("silent", |a| rest(&mut connect(a), "silent"), vec![]),
    ]
}

/// Every hostile peer at once (four of each) while a real `sockperf pp` runs: each is closed
/// with its reason in echo's log, sockperf completes, and echo's threads and descriptors come
/// back to where they were.
#[test]
fn hostile_sockperf_peers_at_once_cost_only_themselves() {
    if !Path::new(SOCKPERF).exists() {
        socklab_sys::skip::skip(
            "hostile_sockperf_peers_at_once_cost_only_themselves",
            "no /usr/bin/sockperf",
            "apt install sockperf",
        );
        return;
    }
    let e = echo();
    let pid = e.child.id();
    let (threads0, fds0) = (status(pid, "Threads"), fds(pid));
    let mut running = Vec::new();
    for round in 0..4 {
        for (name, f, want) in peers() {
            let addr = e.addr;
            running.push((
                format!("{name} #{round}"),
                want,
                std::thread::spawn(move || f(addr)),
            ));
        }
    }
    let peaks = Peaks::start(pid);
    let port = e.addr.port().to_string();
    let mut client = Command::new(SOCKPERF)
        .args([
            "pp",
            "--tcp",
            "-i",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "2",
            "-m",
            "64",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = client.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let st = common::wait_bounded(&mut client, Duration::from_secs(60), "sockperf pp");
    let text = reader.join().unwrap();
    assert!(st.success(), "sockperf beside the hostile peers: {text}");
    assert!(text.contains("Summary: Latency is"), "{text}");
    for (name, want, h) in running {
        let got = h
            .join()
            .unwrap_or_else(|_| panic!("{name}: the peer failed"));
        assert_eq!(got, want, "{name}: what echo sent before its close");
    }
    let (peak_threads, peak_rss) = peaks.stop();
    // Far from normal: a thread per connection (the peers' 20 and sockperf's 1) at most, and
    // no memory beyond the one 1 MiB message each peer may hold half of.
    assert!(
        peak_threads <= threads0 + 30,
        "threads {peak_threads} from {threads0}"
    );
    assert!(peak_rss < 256 * 1024, "VmRSS {peak_rss} kB");
    assert!(
        wait_until(Duration::from_secs(20), || status(pid, "Threads")
            == threads0
            && fds(pid) == fds0),
        "echo holds {} threads (from {threads0}) and {} fds (from {fds0}) after the peers left",
        status(pid, "Threads"),
        fds(pid)
    );
    // A connection's line is logged by the accept loop, a turn after its thread ended.
    let read_log = || std::fs::read_to_string(e.log.path()).unwrap();
    wait_until(Duration::from_secs(10), || {
        read_log().matches("idle timeout").count() >= 12
    });
    let log = read_log();
    for needle in [
        "aborted (sockperf header says 5 bytes",
        "aborted (sockperf header says 16777216 bytes",
        "idle timeout",
    ] {
        assert!(log.contains(needle), "no '{needle}' in echo's log:\n{log}");
    }
    assert!(
        log.matches("idle timeout").count() >= 12,
        "the never-ending, trickled and silent peers end at the idle timeout:\n{log}"
    );
}
