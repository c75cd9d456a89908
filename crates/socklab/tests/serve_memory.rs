//! The resident size of `socklab serve` under rounds of idle connections: the designs that
//! hold every connection in one process (epoll*, reuseport, uring, tokio) give the memory of
//! a flood back once it has drained, and ten floods leave the server no bigger than two did.
//!
//! tokio used to grow here (RSS 11 → 186 MB over ten rounds of 5000 with 8 workers): each idle
//! connection held a 16 KiB read buffer, freed when it closed, but glibc kept what every
//! runtime thread's arena freed, so the resident size crept towards the largest flood times
//! the number of arenas (the allocator's count of live bytes was back to zero each time; see
//! `socklab-net/tests/server_memory.rs`). Real processes over loopback; RSS from
//! /proc/PID/status; bounds in megabytes, not timings; every wait bounded.

mod serve_support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serve_support::{for_designs, raise_nofile, stevens_retry, Server};

const N: usize = 2000;
const ROUNDS: usize = 10;
/// What a drained flood may leave resident (the event loops' slabs keep their largest size,
/// about 0.5 MB for 2000 connections), and the most ten floods may add to two.
const MARGIN_KIB: u64 = 8 << 10;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// RSS once two readings 200 ms apart are within 256 KiB (at most 5 s).
fn settled_rss(pid: u32) -> u64 {
    let t0 = Instant::now();
    let mut last = rss_kib(pid);
    while t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(200));
        let now = rss_kib(pid);
        if now.abs_diff(last) < 256 {
            return now;
        }
        last = now;
    }
    last
}

/// The server's descriptor count once three readings 100 ms apart agree (at most 5 s).
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

fn floods(design: &str) -> Result<(), String> {
    let server = Server::start(
        design,
        &[
            "--workers",
            "8",
            "--idle-timeout",
            "60s",
            "--nofile",
            "8192",
        ],
    );
    let addr = server.addr;
    stevens_retry(addr, &[100])?;
    let fds = settled_fds(&server);
    let start = settled_rss(server.pid());
    let mut after = Vec::new();
    for round in 1..=ROUNDS {
        let held: Vec<TcpStream> = (0..N)
            .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(10)))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("round {round}: connect {N}: {e}"))?;
        let n = server.fds_settle_to(fds + N);
        if n != fds + N {
            return Err(format!(
                "round {round}: the server holds {n} descriptors, want {}",
                fds + N
            ));
        }
        drop(held);
        let n = server.fds_settle_to(fds);
        if n != fds {
            return Err(format!(
                "round {round}: {n} descriptors after the close, want {fds}"
            ));
        }
        after.push(settled_rss(server.pid()));
    }
    let line =
        format!("{design}: RSS {start} KiB at start, after each round of {N}: {after:?} KiB");
    eprintln!("{line}");
    if let Some(r) = after.iter().position(|&a| a > start + MARGIN_KIB) {
        return Err(format!(
            "{line}: round {} left {} KiB more than at start (at most {MARGIN_KIB})",
            r + 1,
            after[r] - start
        ));
    }
    if after[ROUNDS - 1] > after[1] + MARGIN_KIB {
        return Err(format!(
            "{line}: grew by more than {MARGIN_KIB} KiB from round 2 to {ROUNDS}"
        ));
    }
    let st = server.stop();
    if st.code != Some(0) {
        return Err(format!("exit {:?}", st.code));
    }
    Ok(())
}

#[test]
fn floods_of_idle_connections_leave_the_event_designs_no_bigger() {
    raise_nofile();
    for_designs(
        &[
            "epoll",
            "epoll-shared",
            "epoll-exclusive",
            "reuseport",
            "uring",
            "tokio",
        ],
        2,
        floods,
    );
}
