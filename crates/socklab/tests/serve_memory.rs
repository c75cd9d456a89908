//! The resident size of `socklab serve` under rounds of idle connections: the designs that
//! hold every connection in one process (thread, epoll*, reuseport, uring, tokio) give the
//! memory of a flood back once it has drained, and ten floods leave the server no bigger than
//! two did. The same for `socklab echo` (a thread per connection).
//!
//! tokio used to grow here (RSS 11 → 186 MB over ten rounds of 5000 with 8 workers): each idle
//! connection held a 16 KiB read buffer, freed when it closed, but glibc kept what every
//! runtime thread's arena freed, so the resident size crept towards the largest flood times
//! the number of arenas (the allocator's count of live bytes was back to zero each time; see
//! `socklab-net/tests/server_memory.rs`). `thread` and the echo server kept what their
//! connection threads' arenas freed the same way (the echo server 5 → 141 MB over three
//! floods of 2000). Real processes over loopback; RSS from /proc/PID/status; bounds in
//! megabytes, not timings; every wait bounded.

mod serve_support;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serve_support::{for_designs, raise_nofile, stevens_retry, Server};
use socklab_sys::process::{kill, Signal};

const N: usize = 2000;
const ROUNDS: usize = 10;
/// What a drained flood may leave resident, and the most ten floods may add to two: the event
/// loops' slabs keep their largest size (about 0.5 MB for 2000 connections); the echo server
/// keeps about 3 MB.
const MARGIN_KIB: u64 = 8 << 10;
/// The same for `thread`: glibc keeps the stacks of up to 40 MiB of exited threads for new
/// ones (about 9 MB resident here).
const THREAD_MARGIN_KIB: u64 = 16 << 10;

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

fn fds_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
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

/// The descriptor count of `pid` once three readings 100 ms apart agree (at most 5 s).
fn settled_fds(pid: u32) -> usize {
    let t0 = Instant::now();
    let (mut last, mut same) = (fds_of(pid), 0);
    while same < 3 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        let n = fds_of(pid);
        if n == last {
            same += 1;
        } else {
            (last, same) = (n, 0);
        }
    }
    last
}

/// Waits (at most 10 s) until `pid` holds `want` descriptors; returns the last count.
fn fds_reach(pid: u32, want: usize) -> usize {
    let t0 = Instant::now();
    loop {
        let n = fds_of(pid);
        if n == want || t0.elapsed() > Duration::from_secs(10) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ten rounds of `N` idle connections to the server at `addr` (process `pid`), each closed by
/// the client; checks the resident size after each.
fn rounds(what: &str, addr: SocketAddr, pid: u32) -> Result<(), String> {
    let fds = settled_fds(pid);
    let start = settled_rss(pid);
    let mut after = Vec::new();
    for round in 1..=ROUNDS {
        let held: Vec<TcpStream> = (0..N)
            .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(10)))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("round {round}: connect {N}: {e}"))?;
        let n = fds_reach(pid, fds + N);
        if n != fds + N {
            return Err(format!(
                "round {round}: the server holds {n} descriptors, want {}",
                fds + N
            ));
        }
        drop(held);
        let n = fds_reach(pid, fds);
        if n != fds {
            return Err(format!(
                "round {round}: {n} descriptors after the close, want {fds}"
            ));
        }
        after.push(settled_rss(pid));
    }
    let line = format!("{what}: RSS {start} KiB at start, after each round of {N}: {after:?} KiB");
    eprintln!("{line}");
    let margin = if what == "thread" {
        THREAD_MARGIN_KIB
    } else {
        MARGIN_KIB
    };
    if let Some(r) = after.iter().position(|&a| a > start + margin) {
        return Err(format!(
            "{line}: round {} left {} KiB more than at start (at most {margin})",
            r + 1,
            after[r] - start
        ));
    }
    if after[ROUNDS - 1] > after[1] + margin {
        return Err(format!(
            "{line}: grew by more than {margin} KiB from round 2 to {ROUNDS}"
        ));
    }
    Ok(())
}

fn serve_floods(design: &str) -> Result<(), String> {
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
    stevens_retry(server.addr, &[100])?;
    rounds(design, server.addr, server.pid())?;
    let st = server.stop();
    if st.code != Some(0) {
        return Err(format!("exit {:?}", st.code));
    }
    Ok(())
}

/// `socklab echo` (a thread per connection), through the same rounds.
fn echo_floods() -> Result<(), String> {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("socklab"))
        .args([
            "echo",
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--announce",
            "--quiet",
        ])
        .args(["--idle-timeout", "60s"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let port: Option<u16> = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
    let r = match port {
        Some(port) => rounds("echo", SocketAddr::from(([127, 0, 0, 1], port)), child.id()),
        None => Err(format!("echo announced {line:?}")),
    };
    let _ = kill(child.id(), Signal::Int);
    let t0 = Instant::now();
    while child.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    r
}

#[test]
fn floods_of_idle_connections_leave_the_servers_no_bigger() {
    raise_nofile();
    for_designs(
        &[
            "thread",
            "epoll",
            "epoll-shared",
            "epoll-exclusive",
            "reuseport",
            "uring",
            "tokio",
            "echo",
        ],
        2,
        |d| {
            if d == "echo" {
                echo_floods()
            } else {
                serve_floods(d)
            }
        },
    );
}
