//! The tokio design: a multi-thread runtime with `--workers` worker threads, one accept task
//! on the listener, one task per connection driving the shared [`Session`] with one 16 KiB
//! buffer per connection (no allocation per request).
//!
//! Per-worker counts: each runtime thread takes an index when it starts (`on_thread_start`).
//! Requests are counted for the thread that answered them (added up before each read); a
//! connection for the thread that answered its first request (or dropped it, when it had
//! none). Tasks migrate between workers (work stealing), so these say where the work was
//! done, not which thread accepted (one accept task does that).
//!
//! Stop: the calling thread polls the stop flag every 50 ms, then shuts the runtime down
//! (dropping every task closes its connection) with a bounded wait.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socklab_sys::usage::{getrusage, Who};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Ctx, Design, Replies, ServeReport, WorkerCount};
use crate::NetError;

/// Per-connection read buffer.
const BUF: usize = 16 << 10;
/// How often the calling thread looks at the stop flag.
const POLL_STOP: Duration = Duration::from_millis(50);
/// Longest wait for the runtime's tasks to end after stop.
const SHUTDOWN: Duration = Duration::from_millis(300);

thread_local! {
    /// This runtime thread's worker index.
    static WORKER: Cell<usize> = const { Cell::new(0) };
}

/// Counts shared by the tasks.
#[derive(Debug)]
struct Counts {
    connections: Vec<AtomicU64>,
    requests: Vec<AtomicU64>,
    accept_errors: AtomicU64,
}

/// Runs the design of `ctx` until `ctx.stop`.
pub(crate) fn serve(
    ctx: &Ctx<'_>,
    on_listening: &mut dyn FnMut(SocketAddr),
) -> Result<ServeReport, NetError> {
    let cfg = ctx.cfg;
    let start = Instant::now();
    let workers = cfg.workers;
    let counts = Arc::new(Counts {
        connections: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        requests: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        accept_errors: AtomicU64::new(0),
    });
    let next = Arc::new(AtomicUsize::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("sl-tokio")
        .enable_io()
        .enable_time()
        .on_thread_start(move || {
            let i = next.fetch_add(1, Ordering::Relaxed) % workers;
            WORKER.with(|w| w.set(i));
        })
        .build()
        .map_err(|e| NetError::io("starting the tokio runtime", e))?;
    let sock = super::listener(cfg, false)?;
    sock.set_nonblocking(true)
        .map_err(|e| NetError::io("setting the listener non-blocking", e))?;
    let addr = super::event::local_addr(&sock)?;
    let listener = {
        let _guard = rt.enter();
        TcpListener::from_std(sock.into())
            .map_err(|e| NetError::io("registering the listener with tokio", e))?
    };
    on_listening(addr);
    let accept = {
        let counts = counts.clone();
        let replies = ctx.replies.clone();
        let idle = cfg.idle_timeout;
        let opts = cfg.opts.clone();
        rt.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let _ = opts.apply_accepted(&socket2::SockRef::from(&stream));
                        let replies = replies.clone();
                        // Made here: a task dropped before it ever ran still counts.
                        let mut tally = Tally {
                            counts: counts.clone(),
                            reported: 0,
                            counted: false,
                        };
                        tokio::spawn(async move {
                            connection(stream, &replies, idle, &mut tally).await;
                        });
                    }
                    Err(e) if crate::error::is_transient_accept_error(&e) => {
                        if super::event::is_resource_error(&e) {
                            counts.accept_errors.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(super::event::ACCEPT_BACKOFF).await;
                        }
                    }
                    Err(_) => {
                        counts.accept_errors.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(super::event::ACCEPT_BACKOFF).await;
                    }
                }
            }
        })
    };
    while !ctx.stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL_STOP);
    }
    accept.abort();
    rt.shutdown_timeout(SHUTDOWN);
    let per_worker = (0..workers)
        .map(|i| WorkerCount {
            connections: counts.connections[i].load(Ordering::Relaxed),
            requests: counts.requests[i].load(Ordering::Relaxed),
        })
        .collect();
    Ok(ServeReport::new(
        Design::Tokio,
        cfg.handler,
        &getrusage(Who::Process),
        per_worker,
        counts.accept_errors.load(Ordering::Relaxed),
        start.elapsed(),
    ))
}

/// One connection's share of the counts.
#[derive(Debug)]
struct Tally {
    counts: Arc<Counts>,
    /// Requests already added to the counts.
    reported: u64,
    /// The connection has been counted.
    counted: bool,
}

impl Tally {
    /// Adds the requests answered since the last call to this thread's worker.
    fn flush(&mut self, answered: u64) {
        if answered == self.reported {
            return;
        }
        let w = WORKER.with(Cell::get);
        self.counts.requests[w].fetch_add(answered - self.reported, Ordering::Relaxed);
        self.reported = answered;
        if !self.counted {
            self.counted = true;
            self.counts.connections[w].fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if !self.counted {
            let w = WORKER.with(Cell::get);
            self.counts.connections[w].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Serves one connection until the client leaves, the session says close, an error, or the
/// idle timeout; its requests go to `tally` before every read (so a task dropped at shutdown
/// has reported what it did).
async fn connection(stream: TcpStream, r: &Replies, idle: Option<Duration>, tally: &mut Tally) {
    let mut s = r.session();
    drive(stream, r, idle, &mut s, tally).await;
    tally.flush(s.requests());
}

async fn drive(
    mut stream: TcpStream,
    r: &Replies,
    idle: Option<Duration>,
    s: &mut super::Session,
    tally: &mut Tally,
) {
    let mut buf = vec![0u8; BUF];
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        // Answer everything buffered.
        loop {
            let c = s.receive(&buf[start..end]);
            start += c;
            while s.has_pending() {
                let p = s.pending(r);
                let n = p.len();
                let write = stream.write_all(p);
                let written = match idle {
                    None => write.await.is_ok(),
                    // A client that reads nothing for the idle timeout is dropped too.
                    Some(t) => matches!(tokio::time::timeout(t, write).await, Ok(Ok(()))),
                };
                if !written {
                    return;
                }
                s.sent(n, r);
            }
            if s.should_close() {
                return;
            }
            if start == end || c == 0 {
                break;
            }
        }
        if start == end {
            start = 0;
            end = 0;
        } else if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        tally.flush(s.requests());
        let read = stream.read(&mut buf[end..]);
        let got = match idle {
            None => read.await,
            Some(t) => match tokio::time::timeout(t, read).await {
                Ok(r) => r,
                Err(_) => return,
            },
        };
        match got {
            Ok(0) | Err(_) => return,
            Ok(n) => end += n,
        }
    }
}
