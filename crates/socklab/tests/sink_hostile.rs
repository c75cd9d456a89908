//! Hostile `BULK/2` clients against the real sink process (issue 26 items 1 and 2): sendfile
//! down streams share one temporary file per test, counted in the sink's budget and freed with
//! the test; a slow reader holds no down stream past its duration, nor the sink past SIGTERM,
//! and neither does a client that trickles bytes.
//! Loopback only; every wait is bounded.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

use common::{announced, socklab, wait_bounded, wait_until};

/// A sink child, killed when the test ends, passed or not.
struct SinkProc {
    child: Child,
    addr: SocketAddr,
}

impl Drop for SinkProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `socklab sink` on a free loopback port with `TMPDIR=tmp` and `extra` flags.
fn sink(tmp: &Path, extra: &[&str]) -> SinkProc {
    let mut cmd = socklab();
    cmd.args([
        "sink",
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--announce",
        "--quiet",
    ])
    .args(extra)
    .env("TMPDIR", tmp)
    .stderr(Stdio::null());
    let (child, addr) = announced(cmd);
    SinkProc {
        child,
        addr: addr.parse().unwrap(),
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// One line, read a byte at a time (nothing after it is consumed).
fn line(mut s: &TcpStream) -> String {
    let mut got = Vec::new();
    let mut one = [0u8; 1];
    while !got.ends_with(b"\n") {
        match s.read(&mut one) {
            Ok(1) => got.push(one[0]),
            Ok(_) => break,
            Err(e) => panic!(
                "reading a line (so far {:?}): {e}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Opens a test: its control connection, after READY.
fn open_test(addr: SocketAddr, req: &str) -> TcpStream {
    let ctl = connect(addr);
    (&ctl).write_all(req.as_bytes()).unwrap();
    let l = line(&ctl);
    assert!(l.starts_with("READY test="), "{req}: {l}");
    ctl
}

/// The sink's open files under `dir` (unlinked ones included: `/proc/PID/fd`), with sizes.
fn files_under(pid: u32, dir: &Path) -> Vec<u64> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if target.starts_with(dir) {
            out.push(std::fs::metadata(e.path()).map_or(0, |m| m.len()));
        }
    }
    out
}

/// Waits (a hang guard of 10 s) until the sink holds no file under `dir`.
fn until_no_files(pid: u32, dir: &Path, what: &str) {
    assert!(
        wait_until(Duration::from_secs(10), || files_under(pid, dir).is_empty()),
        "{what}: the sink still holds {:?} under {dir:?}",
        files_under(pid, dir)
    );
}

/// Item 1: 8 down streams of a sendfile test that never says GO made 8 copies of the round in
/// `$TMPDIR` (2 GiB for a 256 MiB round), outside the budget. Now one file per test, counted
/// with the round; a test that cannot fit is refused in one line; the file goes with the test.
#[test]
fn sendfile_streams_share_one_counted_file_freed_with_their_test() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let s = sink(&dir, &["--idle-timeout", "2s"]);
    let pid = s.child.id();
    let round = 16 << 20;
    let req = |test: &str, down: u32, bufsize: usize| {
        format!("SOCKLAB BULK/2 test={test} down={down} strategy=sendfile nbufs=1 bufsize={bufsize} cc=cubic rounds=1\n")
    };
    let ctl = open_test(s.addr, &req("c1", 8, round));
    let streams: Vec<TcpStream> = (0..8)
        .map(|i| {
            let d = connect(s.addr);
            (&d).write_all(format!("SOCKLAB JOIN/2 test=c1 index={i}\n").as_bytes())
                .unwrap();
            let l = line(&d);
            assert!(l.starts_with(&format!("READY index={i} dir=down")), "{l}");
            d
        })
        .collect();
    let files = files_under(pid, &dir);
    assert_eq!(
        files.len(),
        1,
        "one sendfile file for the test's 8 streams: {files:?}"
    );
    assert!(files[0] <= round as u64, "{files:?}");

    // 300 MiB in memory and as much in the file: more than the whole budget (512 MiB).
    let over = connect(s.addr);
    (&over)
        .write_all(req("c2", 1, 300 << 20).as_bytes())
        .unwrap();
    let l = line(&over);
    assert!(
        l.starts_with("ERROR a round of 300 MiB")
            && l.contains("temporary file")
            && l.contains("512 MiB"),
        "{l}"
    );
    // Fits alone, not beside c1 (32 MiB held): busy, with the budget named.
    let busy = connect(s.addr);
    (&busy)
        .write_all(req("c3", 1, 250 << 20).as_bytes())
        .unwrap();
    let l = line(&busy);
    assert!(
        l.starts_with("ERROR sink busy") && l.contains("512 MiB allowed"),
        "{l}"
    );

    // The control connection closes without GO: the file goes with the test.
    drop(ctl);
    until_no_files(pid, &dir, "after the control connection closed");
    drop(streams);

    // JOINs without GO, the control connection left open: the idle timeout (2 s) ends the
    // test, and its file with it.
    let ctl = open_test(s.addr, &req("c4", 2, round));
    let streams: Vec<TcpStream> = (0..2)
        .map(|i| {
            let d = connect(s.addr);
            (&d).write_all(format!("SOCKLAB JOIN/2 test=c4 index={i}\n").as_bytes())
                .unwrap();
            assert!(line(&d).starts_with("READY"));
            d
        })
        .collect();
    assert_eq!(files_under(pid, &dir).len(), 1);
    until_no_files(pid, &dir, "after the idle timeout without GO");
    drop((ctl, streams));
}

/// A client that reads a down stream slowly: a small receive buffer, 16 KiB every 20 ms.
struct SlowReader {
    got: Arc<AtomicU64>,
    quit: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SlowReader {
    fn join(addr: SocketAddr, test: &str) -> SlowReader {
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect_timeout(&addr.into(), Duration::from_secs(5))
            .unwrap();
        let s: TcpStream = sock.into();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (&s).write_all(format!("SOCKLAB JOIN/2 test={test} index=0\n").as_bytes())
            .unwrap();
        let l = line(&s);
        assert!(l.starts_with("READY index=0 dir=down"), "{l}");
        let got = Arc::new(AtomicU64::new(0));
        let quit = Arc::new(AtomicBool::new(false));
        let (g, q) = (got.clone(), quit.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 16 << 10];
            let t0 = Instant::now();
            // Bounded: 90 s at most, whatever the sink does.
            while !q.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(90) {
                match (&s).read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        g.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        SlowReader {
            got,
            quit,
            thread: Some(thread),
        }
    }

    /// Waits (10 s at most) for the first bytes: the stream is sending.
    fn until_flowing(&self) {
        assert!(
            wait_until(Duration::from_secs(10), || self.got.load(Ordering::Relaxed)
                > 0),
            "no byte in 10 s"
        );
    }
}

impl Drop for SlowReader {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A round of 32 MiB from a sink sending with the smallest `SO_SNDBUF`: at 800 KB/s it would
/// take 40 s or more.
fn slow_test(test: &str, duration_us: u64) -> String {
    format!("SOCKLAB BULK/2 test={test} down=1 strategy=single nbufs=1 bufsize=33554432 cc=cubic sndbuf=1 duration_us={duration_us}\n")
}

/// Item 2: a slow reader kept a 1 s stream sending for 26 s (the duration was looked at only
/// between rounds). Now a round still going 1 s past the duration is cut, and the stream is
/// reported FAILED with the reason, near its duration.
#[test]
fn a_slow_reader_holds_no_down_stream_past_its_duration() {
    let tmp = tempfile::tempdir().unwrap();
    let s = sink(tmp.path(), &[]);
    let mut ctl = open_test(s.addr, &slow_test("d1", 1_000_000));
    ctl.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let reader = SlowReader::join(s.addr, "d1");
    ctl.write_all(b"GO\n").unwrap();
    let l = line(&ctl);
    assert!(
        l.starts_with("FAILED index=0") && l.contains("past the test's duration"),
        "{l}"
    );
    drop(reader);
}

/// Item 2: the sink was alive 20 s after SIGTERM while a slow reader held a down stream. Now
/// it exits within a generous 5 s (about 200 ms here).
#[test]
fn the_sink_exits_on_sigterm_while_a_slow_reader_holds_a_down_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = sink(tmp.path(), &[]);
    let ctl = open_test(s.addr, &slow_test("d2", 3_600_000_000));
    let reader = SlowReader::join(s.addr, "d2");
    (&ctl).write_all(b"GO\n").unwrap();
    reader.until_flowing();
    let st = Command::new("kill")
        .args(["-TERM", "--", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let st = wait_bounded(&mut s.child, Duration::from_secs(10), "sink after SIGTERM");
    assert!(st.success(), "{st:?}");
    drop(reader);
    drop(ctl);
}

/// Item 2, the reading side: a raw client that sends a byte every 50 ms never let a read wait
/// a tick, so the sink never looked at its stop flag and outlived SIGTERM. Now every read that
/// returns bytes looks: it exits within a generous 5 s (about 100 ms here).
#[test]
fn the_sink_exits_on_sigterm_while_a_client_trickles_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = sink(tmp.path(), &[]);
    let c = connect(s.addr);
    let quit = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let (q, n) = (quit.clone(), sent.clone());
    let trickler = std::thread::spawn(move || {
        let t0 = Instant::now();
        // Bounded: 60 s at most, whatever the sink does.
        while !q.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
            if (&c).write_all(b"x").is_err() {
                break;
            }
            n.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    assert!(
        wait_until(Duration::from_secs(10), || sent.load(Ordering::Relaxed)
            >= 5),
        "the trickle did not start"
    );
    let st = Command::new("kill")
        .args(["-TERM", "--", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let st = wait_bounded(&mut s.child, Duration::from_secs(10), "sink after SIGTERM");
    assert!(st.success(), "{st:?}");
    quit.store(true, Ordering::Relaxed);
    trickler.join().unwrap();
}
