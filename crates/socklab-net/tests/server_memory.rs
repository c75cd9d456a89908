//! Memory of the servers that keep every connection in one process (epoll, epoll-shared,
//! epoll-exclusive, reuseport, uring, tokio) under rounds of idle connections, counted by the
//! process's allocator (`socklab_sys::alloc_count`): what an idle connection costs while it
//! is open, and what is left once it is closed. Its own test binary with one test, because
//! the counts are process-wide.
//!
//! tokio keeps a connection's state in its task: everything comes back but the runtime
//! threads' read buffers. The epoll and io_uring loops keep a slab per worker whose slot
//! vector keeps its largest size (no allocation in the steady state): what they keep is
//! bounded by the largest round, never growing with the number of rounds.
//!
//! Not a timing test: the server runs in-process on a thread; every wait is bounded and only
//! waits for the descriptor count or the allocator's count to settle.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use socklab_net::server::{serve, Design, Handler, ServeConfig};
use socklab_net::sockopt::OptSet;
use socklab_sys::alloc_count::{live_bytes, CountingAlloc};

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// Idle connections per round.
const N: usize = 2000;
const ROUNDS: usize = 10;
/// Workers of every design.
const WORKERS: usize = 2;
/// Most heap an open idle connection may hold (an epoll connection holds about 200 bytes, a
/// tokio one about 1 KiB; tokio used to hold a 16 KiB read buffer per connection).
const PER_CONNECTION: i64 = 4096;
/// What tokio may keep after a round: its runtime threads' read buffers (16 KiB each, made
/// at a thread's first read) and change.
const TOKIO_KEEPS: i64 = WORKERS as i64 * (16 << 10) + (16 << 10);

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Waits (at most 20 s) until `f` returns the same value three times 50 ms apart.
fn settled<T: PartialEq + Copy>(f: impl Fn() -> T) -> T {
    let t0 = Instant::now();
    let (mut last, mut same) = (f(), 0);
    while same < 3 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
        let v = f();
        if v == last {
            same += 1;
        } else {
            (last, same) = (v, 0);
        }
    }
    last
}

/// Waits (at most 20 s) until the process holds `want` descriptors.
fn fds_reach(want: usize) -> usize {
    let t0 = Instant::now();
    loop {
        let n = open_fds();
        if n == want || t0.elapsed() > Duration::from_secs(20) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn rounds(design: Design) -> Result<String, String> {
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let cfg = ServeConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        design,
        workers: WORKERS,
        handler: Handler::Http,
        body: 100,
        backlog: 4096,
        opts: OptSet::default(),
        idle_timeout: None,
        tls: None,
    };
    let (atx, arx) = mpsc::channel();
    let (dtx, drx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = serve(&cfg, stop, &mut |a| {
            let _ = atx.send(a);
        });
        let _ = dtx.send(r.map(|_| ()));
    });
    let addr: SocketAddr = arx
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| format!("{design}: did not start: {:?}", drx.try_recv()))?;
    let base_fds = settled(open_fds);
    let base = settled(live_bytes);
    let mut after = Vec::new();
    let mut per_conn = 0;
    for round in 1..=ROUNDS {
        let held: Vec<TcpStream> = (0..N)
            .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(10)))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{design}: connect {N}: {e}"))?;
        let n = fds_reach(base_fds + 2 * N);
        if n != base_fds + 2 * N {
            return Err(format!(
                "{design}: round {round}: {n} descriptors, want {}",
                base_fds + 2 * N
            ));
        }
        let open = settled(live_bytes);
        per_conn = per_conn.max((open - base) / N as i64);
        drop(held);
        let n = fds_reach(base_fds);
        if n != base_fds {
            return Err(format!(
                "{design}: round {round}: {n} descriptors after close, want {base_fds}"
            ));
        }
        after.push(settled(live_bytes) - base);
    }
    stop.store(true, Ordering::Relaxed);
    drx.recv_timeout(Duration::from_secs(20))
        .map_err(|_| format!("{design}: did not stop"))?
        .map_err(|e| format!("{design}: {e}"))?;
    let line = format!(
        "{design}: {per_conn} heap bytes per idle connection; left after each round: {after:?}"
    );
    eprintln!("{line}");
    if per_conn > PER_CONNECTION {
        return Err(format!(
            "{line}: an idle connection holds {per_conn} bytes, more than {PER_CONNECTION}"
        ));
    }
    // Slabs keep at most every worker's slots for a whole round (each worker could have
    // taken all of one): a round's connections leaked would pass that within a few rounds.
    let keeps = if design == Design::Tokio {
        TOKIO_KEEPS
    } else {
        WORKERS as i64 * N as i64 * per_conn
    };
    if let Some(b) = after.iter().find(|&&b| b > keeps) {
        return Err(format!(
            "{line}: {b} bytes left after the connections closed, more than {keeps}"
        ));
    }
    Ok(line)
}

#[test]
fn idle_connections_cost_little_and_everything_comes_back() {
    if let Ok((soft, hard)) = socklab_sys::procs::nofile_limit() {
        let want = hard.min(32768);
        if soft < want {
            let _ = socklab_sys::procs::set_nofile_limit(want);
        }
    }
    let mut failures = Vec::new();
    for design in [
        Design::Epoll,
        Design::EpollShared,
        Design::EpollExclusive,
        Design::Reuseport,
        Design::Uring,
        Design::Tokio,
    ] {
        if let Err(e) = rounds(design) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
