//! The load generator over loopback against small servers written here (std threads speaking
//! stevens, echo and HTTP keep-alive, and servers that misbehave). Every run is bounded by a
//! request count or a short duration; no assertion depends on how fast anything ran.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use socklab_net::load::{self, LoadConfig, LoadProtocol, LoadReport};
use socklab_net::server::handler::Handler;

mod load_common;
use load_common::serve_session;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Behaviour {
    Stevens,
    Echo,
    Http,
    /// Reads the request, sends part of the reply, closes.
    CloseEarly,
    /// HTTP 500 to every request.
    BadStatus,
    /// Reads the request, never answers.
    Stall,
    /// HTTP: a 200 head announcing a petabyte, then body bytes until the client goes.
    Endless,
    /// Stevens: ten bytes more than asked for.
    TooMuch,
    /// Stevens, but half the reply, a pause of 300 ms, the rest; then it checks that the
    /// client's close was clean (end of file, not a reset) and counts it in `clean`.
    SlowStevens,
    /// Stevens, each reply whole 202 ms after its request: just past a 200 ms timeout, before
    /// the next 10 ms scan of the requests in flight would see it.
    Late,
    /// socklab's own server protocol ([`socklab_net::server::handler::Session`]).
    Socklab(Handler),
}

struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    peers: Arc<Mutex<HashSet<IpAddr>>>,
    /// SlowStevens: clean closes and resets seen.
    clean: Arc<Mutex<(u32, u32)>>,
    handle: Option<JoinHandle<()>>,
}

impl Server {
    fn start(b: Behaviour) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let peers = Arc::new(Mutex::new(HashSet::new()));
        let clean = Arc::new(Mutex::new((0, 0)));
        let (st, pe, cl) = (stop.clone(), peers.clone(), clean.clone());
        let handle = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, peer)) => {
                        pe.lock().unwrap().insert(peer.ip());
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                        let (st, cl) = (st.clone(), cl.clone());
                        conns.push(std::thread::spawn(move || serve(s, b, &st, &cl)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Server {
            addr,
            stop,
            peers,
            clean,
            handle: Some(handle),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Reads a line, retrying read timeouts until `stop`; `None` at EOF or stop.
fn line(r: &mut BufReader<TcpStream>, stop: &AtomicBool) -> Option<String> {
    let mut s = String::new();
    loop {
        match r.read_line(&mut s) {
            Ok(0) => return None,
            Ok(_) if s.ends_with('\n') => return Some(s),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
}

/// Reads an HTTP request head; returns whether it asked for `Connection: close`.
fn http_request(r: &mut BufReader<TcpStream>, stop: &AtomicBool) -> Option<bool> {
    let mut close = false;
    line(r, stop)?;
    loop {
        let l = line(r, stop)?;
        if l.trim().is_empty() {
            return Some(close);
        }
        if l.to_ascii_lowercase().starts_with("connection: close") {
            close = true;
        }
    }
}

fn serve(s: TcpStream, b: Behaviour, stop: &AtomicBool, clean: &Mutex<(u32, u32)>) {
    if let Behaviour::Socklab(h) = b {
        return serve_session(s, h, stop);
    }
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    match b {
        Behaviour::Stevens => {
            while let Some(l) = line(&mut r, stop) {
                let n: usize = l.trim().parse().unwrap();
                if w.write_all(&vec![b'x'; n]).is_err() {
                    return;
                }
            }
        }
        Behaviour::Echo => {
            let mut buf = [0u8; 4096];
            loop {
                match r.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        if w.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                    Err(_) if !stop.load(Ordering::Relaxed) => {}
                    Err(_) => return,
                }
            }
        }
        Behaviour::Http => {
            let body = [b'b'; 100];
            while let Some(close) = http_request(&mut r, stop) {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nServer: test\r\nContent-Length: {}\r\n{}\r\n",
                    body.len(),
                    if close { "Connection: close\r\n" } else { "" }
                );
                if w.write_all(head.as_bytes()).is_err() || w.write_all(&body).is_err() || close {
                    return;
                }
            }
        }
        Behaviour::CloseEarly => {
            if line(&mut r, stop).is_some() {
                let _ = w.write_all(b"xyz");
            }
        }
        Behaviour::BadStatus => {
            while http_request(&mut r, stop).is_some() {
                let reply = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";
                if w.write_all(reply).is_err() {
                    return;
                }
            }
        }
        Behaviour::Endless => {
            if http_request(&mut r, stop).is_some() {
                let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n";
                let chunk = [b'e'; 16 << 10];
                let mut ok = w.write_all(head).is_ok();
                while ok && !stop.load(Ordering::Relaxed) {
                    ok = w.write_all(&chunk).is_ok();
                }
            }
        }
        Behaviour::TooMuch => {
            while let Some(l) = line(&mut r, stop) {
                let n: usize = l.trim().parse().unwrap();
                if w.write_all(&vec![b'x'; n + 10]).is_err() {
                    return;
                }
            }
        }
        Behaviour::Late => {
            while let Some(l) = line(&mut r, stop) {
                let n: usize = l.trim().parse().unwrap();
                std::thread::sleep(Duration::from_millis(202));
                if w.write_all(&vec![b'x'; n]).is_err() {
                    return;
                }
            }
        }
        Behaviour::Stall => {
            let _ = line(&mut r, stop);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Behaviour::SlowStevens => {
            if let Some(l) = line(&mut r, stop) {
                let n: usize = l.trim().parse().unwrap();
                let _ = w.write_all(&vec![b'x'; n / 2]);
                std::thread::sleep(Duration::from_millis(300));
                if w.write_all(&vec![b'x'; n - n / 2]).is_err() {
                    clean.lock().unwrap().1 += 1;
                    return;
                }
                // A client that closed before reading it all answers the rest with a reset,
                // which leaves an error on this socket.
                std::thread::sleep(Duration::from_millis(50));
                match w.take_error() {
                    Ok(None) => clean.lock().unwrap().0 += 1,
                    _ => clean.lock().unwrap().1 += 1,
                }
            }
        }
        Behaviour::Socklab(_) => unreachable!("served above"),
    }
}

fn cfg(addr: SocketAddr, p: LoadProtocol) -> LoadConfig {
    let mut c = LoadConfig::new(addr, p);
    c.duration = Some(Duration::from_secs(20));
    c.timeout = Duration::from_secs(5);
    c.connections = 4;
    c.threads = 2;
    c
}

fn run(c: &LoadConfig) -> LoadReport {
    let stop = AtomicBool::new(false);
    let r = load::run(c, &stop).unwrap();
    // What a report holds survives JSON.
    let json = serde_json::to_string(&r).unwrap();
    let back: LoadReport = serde_json::from_str(&json).unwrap();
    assert_eq!((back.completed, back.failed), (r.completed, r.failed));
    r
}

#[test]
fn stevens_connection_per_request_like_client_c() {
    let s = Server::start(Behaviour::Stevens);
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.new_connection_per_request = true;
    c.loops = Some(25);
    c.bytes = 1000;
    let r = run(&c);
    assert_eq!(r.completed, 100, "{r:?}");
    assert_eq!(r.failed.total(), 0, "{r:?}");
    assert_eq!(r.connections_opened, 100);
    assert_eq!(r.bytes_read, 100 * 1000);
    assert_eq!(r.bytes_written, 100 * 5);
    assert_eq!(r.response.count, 100);
    assert_eq!(r.connect.count, 100);
    assert!(r.response.min_us <= r.response.median_us && r.response.median_us <= r.response.max_us);
    assert!(r.response_corrected.is_none() && r.generator.send_lag.is_none());
    assert!(r.aborted.is_none());
}

#[test]
fn echo_keep_alive_counts_exactly() {
    let s = Server::start(Behaviour::Echo);
    let mut c = cfg(s.addr, LoadProtocol::Echo);
    c.new_connection_per_request = false;
    c.requests = Some(201);
    c.connections = 3;
    c.bytes = 3000;
    let r = run(&c);
    assert_eq!(r.completed, 201, "{r:?}");
    assert_eq!(r.failed.total(), 0);
    assert_eq!(r.connections_opened, 3);
    assert_eq!(r.bytes_read, 201 * 3000);
    assert_eq!(r.generator.thread_utilisation.len(), 2);
}

#[test]
fn http_keep_alive_and_connection_per_request() {
    let s = Server::start(Behaviour::Http);
    let mut c = cfg(s.addr, LoadProtocol::Http);
    c.new_connection_per_request = false;
    c.requests = Some(300);
    c.path = "/index.html".into();
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (300, 0), "{r:?}");
    assert_eq!(r.connections_opened, 4);
    assert!(r.first_byte.count == 300 && r.response.percentiles.p99_us > 0.0);

    c.new_connection_per_request = true;
    c.requests = Some(40);
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (40, 0), "{r:?}");
    assert_eq!(r.connections_opened, 40);
}

#[test]
fn open_loop_reports_corrected_latency_and_lag() {
    let s = Server::start(Behaviour::Http);
    let mut c = cfg(s.addr, LoadProtocol::Http);
    c.new_connection_per_request = false;
    c.rate = Some(1000.0);
    c.duration = Some(Duration::from_millis(300));
    let r = run(&c);
    // The schedule puts at most rate x duration requests in the run, whatever the timing.
    assert!(r.completed + r.failed.total() <= 300, "{r:?}");
    assert!(r.completed > 0, "{r:?}");
    let corrected = r
        .response_corrected
        .expect("open loop has corrected latency");
    assert_eq!(corrected.count, r.completed);
    assert!(r.generator.send_lag.is_some() && r.generator.timer_lag.is_some());
    // Kept alive between scheduled sends: no reconnects (stale readiness events are ignored).
    assert_eq!(r.connections_opened, 4, "{r:?}");

    // A total request bound in open loop is met exactly.
    c.duration = Some(Duration::from_secs(20));
    c.requests = Some(50);
    c.rate = Some(2000.0);
    let r = run(&c);
    assert_eq!(r.completed + r.failed.total(), 50, "{r:?}");
}

#[test]
fn a_server_closing_early_counts_read_failures() {
    let s = Server::start(Behaviour::CloseEarly);
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.requests = Some(10);
    c.bytes = 100;
    let r = run(&c);
    assert_eq!(r.completed, 0, "{r:?}");
    assert_eq!(r.failed.read, 10, "{r:?}");
    assert_eq!(r.failed.total(), 10);
}

#[test]
fn a_bad_status_counts_bad_replies() {
    let s = Server::start(Behaviour::BadStatus);
    let mut c = cfg(s.addr, LoadProtocol::Http);
    c.new_connection_per_request = false;
    c.requests = Some(12);
    let r = run(&c);
    assert_eq!(r.completed, 0, "{r:?}");
    assert_eq!(r.failed.bad_reply, 12, "{r:?}");
}

#[test]
fn a_stalled_server_times_out_and_the_run_ends() {
    let s = Server::start(Behaviour::Stall);
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.requests = Some(4);
    c.connections = 2;
    c.timeout = Duration::from_millis(200);
    let r = run(&c);
    assert_eq!(r.completed, 0, "{r:?}");
    assert_eq!(r.failed.timeout, 4, "{r:?}");
}

/// A reply that lands after the timeout is a timeout, whenever the in-flight requests are next
/// scanned: before, one that arrived between two scans (every 10 ms) counted as completed, with
/// a latency over the timeout.
#[test]
fn a_reply_after_the_timeout_is_a_timeout_not_a_completion() {
    let s = Server::start(Behaviour::Late);
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.requests = Some(40);
    c.connections = 8;
    c.timeout = Duration::from_millis(200);
    let r = run(&c);
    assert_eq!(r.completed, 0, "{r:?}");
    assert_eq!(r.failed.timeout, 40, "{r:?}");
}

/// A hostile server: a body that never ends fails each request at `--timeout` (the body is
/// counted, not kept: the run ends on time whatever the server sends), and a Stevens reply
/// longer than asked for is a bad reply.
#[test]
fn an_endless_body_times_out_and_a_longer_reply_is_a_bad_reply() {
    let s = Server::start(Behaviour::Endless);
    let mut c = cfg(s.addr, LoadProtocol::Http);
    c.requests = Some(3);
    c.connections = 1;
    c.threads = 1;
    c.timeout = Duration::from_millis(300);
    let r = run(&c);
    assert_eq!(r.completed, 0, "{r:?}");
    assert_eq!(r.failed.timeout, 3, "{r:?}");
    assert!(r.bytes_read > 0, "{r:?}");

    let s = Server::start(Behaviour::TooMuch);
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.requests = Some(5);
    c.bytes = 100;
    let r = run(&c);
    assert_eq!(r.completed, 0, "{r:?}");
    assert_eq!(r.failed.bad_reply, 5, "{r:?}");
}

#[test]
fn a_refused_connect_counts_connect_failures_and_ends() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut c = cfg(addr, LoadProtocol::Http);
    c.duration = Some(Duration::from_millis(200));
    let r = run(&c);
    assert_eq!(r.completed, 0);
    assert!(r.failed.connect > 0, "{r:?}");
    assert_eq!(r.failed.total(), r.failed.connect);
}

#[test]
fn a_stop_flag_ends_the_run_as_interrupted() {
    let s = Server::start(Behaviour::Http);
    let c = cfg(s.addr, LoadProtocol::Http);
    let stop = AtomicBool::new(true);
    let r = load::run(&c, &stop).unwrap();
    assert_eq!(r.aborted.as_deref(), Some("interrupted"));
}

#[test]
fn source_addresses_spread_over_loopback() {
    let s = Server::start(Behaviour::Stevens);
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.new_connection_per_request = true;
    c.requests = Some(24);
    c.bytes = 10;
    c.source_addrs = 4;
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (24, 0), "{r:?}");
    let peers = s.peers.lock().unwrap().clone();
    let want: HashSet<IpAddr> = (1..=4).map(|i| IpAddr::from([127, 0, 0, i])).collect();
    assert_eq!(peers, want);
}

#[test]
fn invalid_configurations_name_the_value() {
    let stop = AtomicBool::new(false);
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut c = LoadConfig::new(to, LoadProtocol::Stevens);
    c.bytes = 0;
    let e = load::run(&c, &stop).unwrap_err().to_string();
    assert!(e.contains("`bytes` 0"), "{e}");
    let mut c = LoadConfig::new("[::1]:9".parse().unwrap(), LoadProtocol::Http);
    c.source_addrs = 4;
    let e = load::run(&c, &stop).unwrap_err().to_string();
    assert!(e.contains("`source_addrs` 4"), "{e}");
    let mut c = LoadConfig::new(to, LoadProtocol::Http);
    c.duration = None;
    let e = load::run(&c, &stop).unwrap_err().to_string();
    assert!(e.contains("`duration`"), "{e}");
}

#[test]
fn drives_socklabs_own_server_protocols() {
    // stevens, a connection per request, the largest count the classic servers accept.
    let s = Server::start(Behaviour::Socklab(Handler::Stevens));
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.new_connection_per_request = true;
    c.loops = Some(10);
    c.bytes = 16384;
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (40, 0), "{r:?}");
    assert_eq!(r.bytes_read, 40 * 16384);
    // stevens kept alive: several requests per connection are allowed.
    c.new_connection_per_request = false;
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (40, 0), "{r:?}");
    assert_eq!(r.connections_opened, 4);

    let s = Server::start(Behaviour::Socklab(Handler::Echo));
    let mut c = cfg(s.addr, LoadProtocol::Echo);
    c.new_connection_per_request = false;
    c.requests = Some(100);
    c.bytes = 20_000;
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (100, 0), "{r:?}");

    let s = Server::start(Behaviour::Socklab(Handler::Http));
    let mut c = cfg(s.addr, LoadProtocol::Http);
    c.new_connection_per_request = false;
    c.requests = Some(200);
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (200, 0), "{r:?}");
    assert_eq!(r.connections_opened, 4);
    // Connection: close per request: the server closes after its reply.
    c.new_connection_per_request = true;
    c.requests = Some(30);
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (30, 0), "{r:?}");
    assert_eq!(r.connections_opened, 30);
}

#[test]
fn the_end_of_a_run_reads_replies_in_flight_before_closing() {
    // The run ends (100 ms) while every reply is half sent: the generator reads each to its
    // end before it closes, so the server sees end of file, never a reset (the classic
    // servers die of resets). What arrives after the end is not counted.
    let s = Server::start(Behaviour::SlowStevens);
    let mut c = cfg(s.addr, LoadProtocol::Stevens);
    c.connections = 2;
    c.bytes = 4000;
    c.duration = Some(Duration::from_millis(100));
    let r = run(&c);
    assert_eq!((r.completed, r.failed.total()), (0, 0), "{r:?}");
    drop(r);
    let clean = s.clean.clone();
    drop(s); // joins the server threads
    let (ok, resets) = *clean.lock().unwrap();
    assert_eq!((ok, resets), (2, 0));
}
