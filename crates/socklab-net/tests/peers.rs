//! What hostile or dead peers can do to the sink and to the bulk sender (issue 16, items 7 and
//! 9): a real sink on 127.0.0.1 in a thread, real sockets, every wait bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use socklab_net::bulk::{self, BulkConfig, Limit};
use socklab_net::sink::{Mode, Outcome, SinkConfig};
use socklab_net::{NetError, Strategy};

mod sink_common;
use sink_common::TestSink;

/// A sink whose idle timeout (an hour) never fires during a test: a client that waits behind
/// an idle one would wait past every hang bound below, so the tests need no timing threshold.
fn patient() -> SinkConfig {
    SinkConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        idle_timeout: Duration::from_secs(3600),
        ..SinkConfig::default()
    }
}

fn bulk_cfg(to: SocketAddr, limit: Limit) -> BulkConfig {
    BulkConfig {
        to,
        strategy: Strategy::Single,
        nbufs: 1,
        bufsize: 64 * 1024,
        limit,
        cc: "cubic".into(),
        nodelay: false,
        sndbuf: None,
        read_size: 64 * 1024,
        verify: true,
        seed: 7,
        connect_timeout: Duration::from_secs(5),
        timeout: None,
        grace: bulk::GRACE,
        sampling: Default::default(),
        ..BulkConfig::new(to)
    }
}

/// A bound on a hang only (generous on a loaded machine): what the tests assert never depends
/// on how fast the machine is.
const HANG: Duration = Duration::from_secs(60);

/// Runs `f` on a thread and waits at most `limit` for it: a hang fails the test instead of
/// hanging it.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not return within {limit:?}"))
}

/// Item 7: one idle client (an `nc` left open) blocked every socklab client for the idle
/// timeout. Now a test runs at once beside it, and its figures are its own: with an idle
/// timeout of an hour, a sink that served one connection at a time would never answer.
#[test]
fn an_idle_client_delays_no_other_client() {
    let sink = TestSink::start(patient());
    let idle = TcpStream::connect(sink.addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let to = sink.addr;
    let t0 = Instant::now();
    let r = within(HANG, move || {
        bulk::run(&bulk_cfg(to, Limit::Iterations(100)), &|| false)
    })
    .unwrap();
    let span = t0.elapsed();
    assert_eq!(r.verified, Some(true));
    let rep = sink.report_within(HANG);
    assert_eq!(
        (rep.mode, &rep.outcome),
        (Mode::Socklab, &Outcome::Complete)
    );
    // The sink's clock for that test ran only while it was served: inside the client's own
    // span (one monotonic clock, so this holds whatever the load), not from the idle
    // client's arrival 200 ms before it.
    assert!(
        Duration::from_nanos(rep.result.elapsed_ns) <= span,
        "sink {} ns outside the client's {span:?}",
        rep.result.elapsed_ns
    );
    // The idle client is still connected and unserved: nothing waited for it to go.
    let mut idle = idle;
    idle.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    assert!(
        matches!(idle.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the idle connection ended"
    );
}

/// Item 7: per-connection figures exclude time queued. A raw client that connects behind an
/// idle one is served (the idle timeout is an hour) and timed from its own arrival.
#[test]
fn a_raw_client_behind_an_idle_one_is_served_and_timed_at_once() {
    let sink = TestSink::start(patient());
    let _idle = TcpStream::connect(sink.addr).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    {
        let mut s = TcpStream::connect(sink.addr).unwrap();
        s.write_all(&vec![9u8; 100_000]).unwrap();
    }
    let rep = sink.report_within(HANG);
    let span = t0.elapsed();
    assert_eq!(rep.mode, Mode::Raw);
    assert_eq!(rep.result.bytes, 100_000);
    assert_eq!(rep.outcome, Outcome::Complete);
    // Nested in the client's span on one monotonic clock: the 300 ms the idle client sat
    // before it are not in it.
    assert!(
        Duration::from_nanos(rep.result.elapsed_ns) <= span,
        "sink {} ns outside the client's {span:?}",
        rep.result.elapsed_ns
    );
}

/// Item 7: stopping the sink does not wait for open connections to end by themselves (their
/// idle timeout is an hour: a stop that waited for them would pass the hang bound).
#[test]
fn the_sink_stops_with_idle_clients_open() {
    let sink = TestSink::start(patient());
    let idle: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(sink.addr).unwrap())
        .collect();
    // One mid-stream socklab client too.
    let mut mid = TcpStream::connect(sink.addr).unwrap();
    mid.write_all(b"SOCKLAB BULK/1 read_size=1000 verify=0\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(&mid).read_line(&mut line).unwrap();
    assert!(line.starts_with("READY"), "{line}");
    mid.write_all(&[1u8; 10_000]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    within(HANG, move || drop(sink));
    drop(idle);
}

/// Item 7: the sink serves a bounded number of clients at once; one more is told so in one
/// line, and the sink serves again once a place is free.
#[test]
fn beyond_max_conns_a_client_is_refused_in_one_line() {
    let sink = TestSink::start(SinkConfig {
        max_conns: 2,
        ..patient()
    });
    let a = TcpStream::connect(sink.addr).unwrap();
    let b = TcpStream::connect(sink.addr).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let to = sink.addr;
    let e = within(HANG, move || {
        bulk::run(&bulk_cfg(to, Limit::Iterations(10)), &|| false)
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("sink busy") && e.contains("`max_conns`"), "{e}");
    let rep = sink.report_within(HANG);
    assert!(
        matches!(&rep.outcome, Outcome::Refused(w) if w.contains("sink busy")),
        "{rep:?}"
    );
    drop((a, b));
    // The two idle connections end (EOF): places are free again.
    for _ in 0..2 {
        sink.report_within(HANG);
    }
    let r = within(HANG, move || {
        bulk::run(&bulk_cfg(to, Limit::Iterations(10)), &|| false)
    })
    .unwrap();
    assert_eq!(r.verified, Some(true));
}

/// Item 7: read buffers are bounded in all: a request for more than the budget is refused.
#[test]
fn read_buffers_are_bounded_in_all() {
    let sink = TestSink::start(SinkConfig {
        buffer_budget: 1 << 20,
        ..patient()
    });
    let mut c = bulk_cfg(sink.addr, Limit::Iterations(10));
    c.read_size = 2 << 20;
    let e = bulk::run(&c, &|| false).unwrap_err().to_string();
    assert!(e.contains("sink busy") && e.contains("read buffers"), "{e}");
    c.read_size = 512 << 10;
    assert_eq!(bulk::run(&c, &|| false).unwrap().verified, Some(true));
}

/// A "sink" that answers READY and then never reads: the socket buffers fill and every write
/// blocks. Returns its address; it holds its connections until the test process ends.
fn sink_that_never_reads() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut line = [0u8; 512];
            let _ = s.read(&mut line);
            let _ = s.write_all(b"READY read_size=65536 rcvbuf=0\n");
            held.push(s);
        }
    });
    addr
}

/// Item 9: a test against a sink that stops reading ended only when somebody killed it
/// (blocked in `write()`). Now it fails at its deadline, `--duration` + grace, saying why.
#[test]
fn a_sink_that_never_reads_fails_the_test_at_its_deadline() {
    let to = sink_that_never_reads();
    let mut c = bulk_cfg(to, Limit::Duration(Duration::from_millis(500)));
    c.timeout = Some(Duration::from_secs(2));
    let t0 = Instant::now();
    let e = within(HANG, move || bulk::run(&c, &|| false)).unwrap_err();
    // Never before the deadline (a monotonic clock cannot make this fail; load only makes
    // the test later, and the hang bound catches a deadline that never fires).
    let took = t0.elapsed();
    assert!(took >= Duration::from_secs(2), "{took:?}");
    let NetError::Timeout(m) = &e else {
        panic!("{e}")
    };
    assert!(
        m.contains("did not end within 2s (`timeout` 2s)") && m.contains("stopped reading"),
        "{m}"
    );
}

/// A "sink" that answers READY and then reads 16 KiB every 20 ms through a small receive
/// buffer (about 800 KB/s): every write of the sender moves a few bytes, none stalls.
fn sink_that_reads_slowly() -> SocketAddr {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    sock.listen(8).unwrap();
    let l: TcpListener = sock.into();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut line = [0u8; 512];
                let _ = s.read(&mut line);
                let _ = s.write_all(b"READY read_size=65536 rcvbuf=0\n");
                let mut buf = vec![0u8; 16 << 10];
                let t0 = Instant::now();
                // Bounded: 90 s at most.
                while t0.elapsed() < Duration::from_secs(90) {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            });
        }
    });
    addr
}

/// Issue 26 item 2: against a sink that reads slowly, a round of 64 MiB (80 s at its pace)
/// ran to its end before the deadline was looked at: every write moved a few bytes, and only a
/// write without progress asked the bounds. Now the bounds are asked between the calls too,
/// and the test fails at its deadline (2 s), mid-round, far within the 20 s bound here.
#[test]
fn a_sink_that_reads_slowly_fails_the_test_at_its_deadline_mid_round() {
    let to = sink_that_reads_slowly();
    let mut c = bulk_cfg(to, Limit::Duration(Duration::from_millis(500)));
    c.bufsize = 64 << 20;
    c.sndbuf = Some(4096);
    c.verify = false;
    c.timeout = Some(Duration::from_secs(2));
    let e = within(Duration::from_secs(20), move || bulk::run(&c, &|| false)).unwrap_err();
    let NetError::Timeout(m) = &e else {
        panic!("{e}")
    };
    assert!(m.contains("did not end within 2s (`timeout` 2s)"), "{m}");
}

/// Item 9: a count-limited test has no deadline, but a sink that accepts nothing for
/// [`bulk::STALL`] fails it; Ctrl-C ends it before that, as an interruption.
#[test]
fn stop_ends_a_test_blocked_in_write() {
    let to = sink_that_never_reads();
    let flag = Arc::new(AtomicBool::new(false));
    let f2 = flag.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let c = bulk_cfg(to, Limit::Iterations(1_000_000));
        let _ = tx.send(bulk::run(&c, &|| f2.load(Ordering::SeqCst)));
    });
    // Long enough for the socket buffers to fill and the write to block.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(rx.try_recv().is_err(), "the test ended by itself");
    flag.store(true, Ordering::SeqCst);
    let r = rx.recv_timeout(HANG).expect("stop ignored");
    // Interrupted, not the stall's error: the stop ended it, not the STALL bound.
    assert!(matches!(r, Err(NetError::Interrupted)), "{r:?}");
}

/// Item 9: a listener that accepts and says nothing: no READY within its wait is a clear
/// error, and Ctrl-C ends that wait too.
#[test]
fn a_silent_listener_is_a_clear_error_and_stop_ends_the_wait() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = l.local_addr().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let f2 = flag.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let c = bulk_cfg(to, Limit::Iterations(1));
        let _ = tx.send(bulk::run(&c, &|| f2.load(Ordering::SeqCst)));
    });
    std::thread::sleep(Duration::from_millis(500));
    flag.store(true, Ordering::SeqCst);
    let r = rx.recv_timeout(HANG).expect("stop ignored");
    assert!(matches!(r, Err(NetError::Interrupted)), "{r:?}");
    drop(l);
}

/// A "sink" that reads the client's first line and then trickles a control line that never
/// ends: one byte every 50 ms, no newline (512 bytes, the line limit, take 25.6 s). Each read
/// returns well within the socket's wake-up tick. Bounded: 600 bytes, then it holds the
/// connection until the client goes away.
fn sink_that_trickles_its_line() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut line = [0u8; 512];
                let _ = s.read(&mut line);
                for _ in 0..600 {
                    std::thread::sleep(Duration::from_millis(50));
                    if s.write_all(b"R").is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Issue 26 item 7: a control line that trickles in was read byte by byte with the bounds
/// looked at only when a read timed out, so Ctrl-C and the READY wait (10 s) were ignored
/// until the line limit (25.6 s here). Now every partial line looks at them too.
#[test]
fn a_trickled_control_line_does_not_hold_off_stop_or_the_ready_wait() {
    // Ctrl-C ends the wait at once (old: only at the 512-byte line limit, 25.6 s).
    let to = sink_that_trickles_its_line();
    let flag = Arc::new(AtomicBool::new(false));
    let f2 = flag.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let c = bulk_cfg(to, Limit::Iterations(1));
        let _ = tx.send(bulk::run(&c, &|| f2.load(Ordering::SeqCst)));
    });
    std::thread::sleep(Duration::from_millis(500));
    flag.store(true, Ordering::SeqCst);
    let r = rx
        .recv_timeout(Duration::from_secs(15))
        .expect("stop ignored while the line trickled in");
    assert!(matches!(r, Err(NetError::Interrupted)), "{r:?}");

    // The READY wait (10 s) bounds the whole line, not each read of it.
    let e = within(HANG, move || {
        bulk::run(&bulk_cfg(to, Limit::Iterations(1)), &|| false)
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("no READY line in time"), "{e}");
}
