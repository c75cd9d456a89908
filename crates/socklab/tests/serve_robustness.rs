//! `socklab serve` under abuse, per design: garbage and overlong request lines, counts 0 and
//! 16385, clients that reset mid-reply, more connections than `--nofile` allows (EMFILE), 1000
//! idle connections held open while a normal client is served — and no descriptor leaked by the
//! server or its children afterwards. Real processes over loopback; every wait bounded.
//!
//! Idle clients: `fork` and `thread` give every connection its own process or thread, and the
//! event designs (epoll*, reuseport, uring, tokio) keep every connection in their loops, so
//! 1000 idle connections cost them nothing but memory (run with `--idle-timeout 2s`, longer
//! than the test holds them). `iterative` and the pool designs (prefork-*, prethread-*) have only
//! their workers: the idle timeout is their only defence, and a queue of 1000 idle connections
//! drains at `1000 × timeout / workers` — so they run with `--idle-timeout 10ms`.

mod serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serve_support::{connect, for_designs, raise_nofile, stevens, stevens_retry, Server, CLASSIC};

/// The designs that keep every connection in one event loop (or task) per worker: idle
/// connections cost them a slab entry, not a worker.
const EVENT: &[&str] = &[
    "epoll",
    "epoll-shared",
    "epoll-exclusive",
    "reuseport",
    "uring",
    "tokio",
];

/// Every design: the classic ones, then the event designs.
fn designs() -> Vec<&'static str> {
    CLASSIC.iter().chain(EVENT).copied().collect()
}

/// Designs run at once (each holds up to 1000 client sockets in this process).
const PARALLEL: usize = 5;
const IDLE_CLIENTS: usize = 1000;

/// Sends `req`, reads until the server closes (a reset after the reply counts as a close: the
/// server may close with the rest of an overlong line unread).
fn until_close(addr: std::net::SocketAddr, req: &[u8]) -> Result<Vec<u8>, String> {
    let mut s = connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.write_all(req).map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
            Err(e) => {
                return Err(format!(
                    "waiting for the server to close: {e} (after {:?})",
                    String::from_utf8_lossy(&got)
                ))
            }
        }
    }
}

/// The server's descriptor count once it is stable (three equal readings 100 ms apart, at
/// most 5 s).
fn settled_fds(server: &Server) -> usize {
    let t0 = Instant::now();
    let (mut last, mut same) = (server.fds(), 0);
    while same < 3 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        let n = server.fds();
        if n == last {
            same += 1;
        } else {
            (last, same) = (n, 0);
        }
    }
    last
}

fn check_fds(server: &Server, before: usize, what: &str) -> Result<(), String> {
    let after = server.fds_settle_to(before);
    if after != before {
        return Err(format!(
            "{what}: the server (and children) hold {after} descriptors, {before} before"
        ));
    }
    Ok(())
}

/// Bad requests, resets mid-reply and EMFILE, on a server limited to 64 descriptors.
fn bad_clients(design: &str) -> Result<(), String> {
    let server = Server::start(design, &["--workers", "4", "--nofile", "64"]);
    let addr = server.addr;
    stevens(addr, &[100])?;
    let before = settled_fds(&server);

    let overlong = format!("{}\n", "1".repeat(40));
    for (req, want) in [
        ("hello\n", "ERROR not a count"),
        (overlong.as_str(), "ERROR request line too long"),
        ("0\n", "ERROR count out of range"),
        ("16385\n", "ERROR count out of range"),
        ("-5\n", "ERROR not a count"),
    ] {
        let got = until_close(addr, req.as_bytes()).map_err(|e| format!("{req:?}: {e}"))?;
        let text = String::from_utf8_lossy(&got);
        if !text.starts_with(want) || !text.ends_with('\n') || text.lines().count() != 1 {
            return Err(format!("{req:?}: reply {text:?}, want one line {want:?}"));
        }
        stevens(addr, &[4000]).map_err(|e| format!("after {req:?}: {e}"))?;
    }

    // Resets mid-reply: 64 pipelined 16384-byte requests, 1000 bytes read, then RST.
    for _ in 0..3 {
        let mut s = connect(addr).map_err(|e| e.to_string())?;
        s.write_all("16384\n".repeat(64).as_bytes())
            .map_err(|e| e.to_string())?;
        let mut part = [0u8; 1000];
        s.read_exact(&mut part).map_err(|e| e.to_string())?;
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .map_err(|e| e.to_string())?;
        drop(s);
    }
    stevens(addr, &[4000, 16384]).map_err(|e| format!("after resets: {e}"))?;

    // EMFILE: more connections than the server has descriptors.
    let held: Vec<TcpStream> = (0..100)
        .map(|_| connect(addr))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("connect 100: {e}"))?;
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    stevens_retry(addr, &[4000]).map_err(|e| format!("after EMFILE: {e}"))?;

    check_fds(&server, before, "after the bad clients")?;
    let st = server.stop();
    if st.code != Some(0) {
        return Err(format!("exit {:?}", st.code));
    }
    // These accept every connection in one process: they must have hit the limit.
    if (matches!(design, "thread" | "prethread-handoff") || EVENT.contains(&design))
        && st.accept_errors() == 0
    {
        return Err("no accept error counted with --nofile 64 and 100 connections".into());
    }
    Ok(())
}

/// 1000 idle connections held open while a normal client is served.
fn idle_clients(design: &str) -> Result<(), String> {
    let timeout = if matches!(design, "fork" | "thread") || EVENT.contains(&design) {
        "2s"
    } else {
        "10ms"
    };
    let server = Server::start(design, &["--workers", "4", "--idle-timeout", timeout]);
    let addr = server.addr;
    stevens_retry(addr, &[100])?;
    let before = settled_fds(&server);
    let idle: Vec<TcpStream> = (0..IDLE_CLIENTS)
        .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(10)))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("connect {IDLE_CLIENTS} idle: {e}"))?;
    stevens_retry(addr, &[4000])
        .map_err(|e| format!("with {IDLE_CLIENTS} idle connections open: {e}"))?;
    drop(idle);
    check_fds(&server, before, "after the idle clients")?;
    let st = server.stop();
    if st.code != Some(0) {
        return Err(format!("exit {:?}", st.code));
    }
    Ok(())
}

#[test]
fn every_design_survives_bad_clients_and_leaks_no_descriptor() {
    for_designs(&designs(), PARALLEL, bad_clients);
}

#[test]
fn every_design_serves_a_client_while_1000_idle_connections_are_open() {
    raise_nofile();
    for_designs(&designs(), PARALLEL, idle_clients);
}
