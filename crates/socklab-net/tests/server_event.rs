//! Loopback tests of the modern server designs (epoll, epoll-shared, epoll-exclusive,
//! reuseport, uring, tokio), each run in-process by the library's `serve` on a thread.
//!
//! The tests of this file run one at a time (a lock), so the descriptor count of the process
//! before a server starts and after `serve` returns can be compared: no descriptor leaked.
//! Every wait is bounded (socket timeouts, `recv_timeout`); nothing asserts on timing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use socklab_net::server::{serve, Design, Handler, ServeConfig, ServeReport};
use socklab_net::sockopt::OptSet;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const WAIT: Duration = Duration::from_secs(20);

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// A server running on a thread, and the connections the test made to it.
struct Running {
    addr: SocketAddr,
    stop: &'static AtomicBool,
    done: mpsc::Receiver<Result<ServeReport, socklab_net::NetError>>,
    fds_before: usize,
    made: u64,
    design: Design,
    workers: usize,
}

fn start(design: Design, handler: Handler, idle_timeout: Option<Duration>) -> Running {
    let fds_before = open_fds();
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let workers = 2;
    let cfg = ServeConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        design,
        workers,
        handler,
        body: 100,
        backlog: 1024,
        opts: OptSet::default(),
        idle_timeout,
        tls: None,
    };
    let (atx, arx) = mpsc::channel();
    let (dtx, drx) = mpsc::channel();
    thread::spawn(move || {
        let r = serve(&cfg, stop, &mut |a| {
            let _ = atx.send(a);
        });
        let _ = dtx.send(r);
    });
    let addr = match arx.recv_timeout(WAIT) {
        Ok(a) => a,
        Err(_) => match drx.recv_timeout(WAIT) {
            Ok(Err(e)) => panic!("the {design} server did not start: {e}"),
            other => panic!("the {design} server did not start: {other:?}"),
        },
    };
    Running {
        addr,
        stop,
        done: drx,
        fds_before,
        made: 0,
        design,
        workers,
    }
}

impl Running {
    fn connect(&mut self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.set_write_timeout(Some(WAIT)).unwrap();
        self.made += 1;
        s
    }

    /// Stops the server, checks it returned (bounded wait), its per-worker counts and that no
    /// descriptor leaked.
    fn finish(self) -> ServeReport {
        self.stop.store(true, Ordering::Relaxed);
        let asked = std::time::Instant::now();
        let report = self
            .done
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("the {} server did not stop", self.design))
            .unwrap();
        eprintln!(
            "{} stopped {:?} after being asked",
            self.design,
            asked.elapsed()
        );
        let expect_workers = if self.design == Design::Epoll {
            1
        } else {
            self.workers
        };
        assert_eq!(report.workers.len(), expect_workers, "{report:?}");
        assert_eq!(report.connections(), self.made, "{report:?}");
        assert_eq!(report.design, self.design.name());
        // The server thread has returned; give the kernel no excuse (io_uring and tokio
        // release their files on drop, synchronously for the descriptor table).
        assert_eq!(
            open_fds(),
            self.fds_before,
            "descriptors leaked by {}",
            self.design
        );
        report
    }
}

fn stevens_request(s: &mut TcpStream, n: usize) {
    s.write_all(format!("{n}\n").as_bytes()).unwrap();
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf[..n.min(3)], &b"abc"[..n.min(3)]);
    assert_eq!(buf[n - 1], b'a' + ((n - 1) % 26) as u8);
}

fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    let mut v = Vec::new();
    s.read_to_end(&mut v).unwrap();
    v
}

fn stevens(design: Design) {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut srv = start(design, Handler::Stevens, None);
    let mut requests = 0;

    // Several requests per connection, exact byte counts, nothing more after them.
    for _ in 0..3 {
        let mut c = srv.connect();
        for n in [1, 100, 4000, 16384, 7] {
            stevens_request(&mut c, n);
            requests += 1;
        }
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(read_to_end(&mut c).is_empty());
    }

    // Bad requests: one ERROR line, then the server closes; it keeps serving.
    for bad in [&b"0\n"[..], b"16385\n", b"garbage\n", &[b'1'; 40]] {
        let mut c = srv.connect();
        c.write_all(bad).unwrap();
        let out = read_to_end(&mut c);
        assert!(out.starts_with(b"ERROR "), "{bad:?}: {out:?}");
        assert!(out.ends_with(b"\n"));
        let mut ok = srv.connect();
        stevens_request(&mut ok, 10);
        requests += 1;
    }

    // A client that resets in the middle of a long pipelined reply only loses its connection.
    {
        let c = srv.connect();
        let mut w = &c;
        w.write_all(&b"16384\n".repeat(64)).unwrap();
        let mut some = [0u8; 1000];
        (&c).read_exact(&mut some).unwrap();
        socket2::SockRef::from(&c)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(c);
        let mut ok = srv.connect();
        stevens_request(&mut ok, 5000);
        requests += 1;
    }

    // 200 connections at once, each with a request in flight.
    {
        let mut cs: Vec<TcpStream> = (0..200).map(|_| srv.connect()).collect();
        for c in &mut cs {
            c.write_all(b"300\n").unwrap();
        }
        for c in &mut cs {
            let mut buf = [0u8; 300];
            c.read_exact(&mut buf).unwrap();
        }
        requests += 200;
    }

    // 1000 idle connections while another client is served; then each idle one is served.
    {
        let mut idle: Vec<TcpStream> = (0..1000).map(|_| srv.connect()).collect();
        let mut c = srv.connect();
        for _ in 0..20 {
            stevens_request(&mut c, 1000);
            requests += 1;
        }
        for c in &mut idle {
            stevens_request(c, 2);
            requests += 1;
        }
    }

    let report = srv.finish();
    // Every success reply counted (the reset client's replies may or may not be complete).
    assert!(
        report.requests() >= requests && report.requests() <= requests + 64,
        "{} requests counted, {requests} made",
        report.requests()
    );
}

/// Reads one HTTP response; returns its head and body.
fn http_response(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    (head, body)
}

fn http(design: Design) {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut srv = start(design, Handler::Http, None);
    // Keep-alive: several requests one after the other.
    let mut c = srv.connect();
    for _ in 0..10 {
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let (head, body) = http_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(body.len(), 100);
    }
    // Pipelined: 50 requests in one write, 50 responses in order.
    c.write_all(&b"GET /p HTTP/1.1\r\nHost: x\r\n\r\n".repeat(50))
        .unwrap();
    for _ in 0..50 {
        let (head, body) = http_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(body.len(), 100);
    }
    // Connection: close ends the connection after the reply.
    c.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (head, _) = http_response(&mut c);
    assert!(head.contains("Connection: close"));
    assert!(read_to_end(&mut c).is_empty());
    // A bad request: 400 and close.
    let mut bad = srv.connect();
    bad.write_all(b"BLAH\r\n\r\n").unwrap();
    let out = read_to_end(&mut bad);
    assert!(out.starts_with(b"HTTP/1.1 400 "));
    drop((c, bad));
    let report = srv.finish();
    assert_eq!(report.requests(), 61);
}

fn echo(design: Design) {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut srv = start(design, Handler::Echo, None);
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + i / 256) as u8).collect();
    for _ in 0..2 {
        let c = srv.connect();
        let w = c.try_clone().unwrap();
        let d = data.clone();
        let writer = thread::spawn(move || {
            let mut w = w;
            w.write_all(&d).unwrap();
            w.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut back = Vec::with_capacity(data.len());
        (&c).read_to_end(&mut back).unwrap();
        writer.join().unwrap();
        assert_eq!(back.len(), data.len());
        assert!(back == data, "echoed bytes differ");
    }
    srv.finish();
}

fn idle_timeout(design: Design) {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut srv = start(design, Handler::Stevens, Some(Duration::from_millis(200)));
    let mut quiet = srv.connect();
    let mut busy = srv.connect();
    // The quiet connection is closed by the server; a served one keeps working meanwhile.
    stevens_request(&mut busy, 10);
    assert!(read_to_end(&mut quiet).is_empty());
    let mut again = srv.connect();
    stevens_request(&mut again, 10);
    // A client that asks for 16 MB and reads nothing: the server gives up on it too.
    let mut slow = srv.connect();
    slow.write_all(&b"16384\n".repeat(1024)).unwrap();
    thread::sleep(Duration::from_millis(1500));
    let mut got = Vec::new();
    match slow.read_to_end(&mut got) {
        Ok(n) => assert!(n < 16384 * 1024, "the server sent all {n} bytes"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    drop((quiet, busy, again, slow));
    srv.finish();
}

/// Out of descriptors: the server counts accept errors, backs off, and serves the waiting
/// client once descriptors are free again.
fn out_of_descriptors(design: Design) {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut srv = start(design, Handler::Stevens, None);
    let mut warm = srv.connect();
    stevens_request(&mut warm, 10);
    // A socket made now, connected once the descriptor table is full.
    let client = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let null = std::fs::File::open("/dev/null").unwrap();
    let mut filler = Vec::new();
    loop {
        match null.try_clone() {
            Ok(f) => filler.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(socklab_sys::errno::EMFILE), "{e}");
                break;
            }
        }
    }
    client.connect(&srv.addr.into()).unwrap();
    srv.made += 1;
    // Give the server time to meet EMFILE (it wakes at once; this only bounds the test).
    thread::sleep(Duration::from_millis(300));
    drop(filler);
    let mut c: TcpStream = client.into();
    c.set_read_timeout(Some(WAIT)).unwrap();
    stevens_request(&mut c, 100);
    drop((warm, c, null));
    let report = srv.finish();
    assert!(report.accept_errors >= 1, "{report:?}");
}

macro_rules! design_tests {
    ($($m:ident => $d:expr),* $(,)?) => {$(
        mod $m {
            use super::*;
            #[test]
            fn stevens_errors_resets_many_and_idle_connections() {
                stevens($d);
            }
            #[test]
            fn http_keepalive_and_pipelined() {
                http($d);
            }
            #[test]
            fn echo_one_megabyte() {
                echo($d);
            }
            #[test]
            fn idle_connections_time_out() {
                idle_timeout($d);
            }
            #[test]
            fn out_of_descriptors_backs_off_and_recovers() {
                out_of_descriptors($d);
            }
        }
    )*};
}

design_tests! {
    epoll => Design::Epoll,
    epoll_shared => Design::EpollShared,
    epoll_exclusive => Design::EpollExclusive,
    reuseport => Design::Reuseport,
    uring => Design::Uring,
    tokio => Design::Tokio,
}
