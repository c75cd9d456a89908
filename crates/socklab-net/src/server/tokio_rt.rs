//! The tokio design: a multi-thread runtime with `--workers` worker threads, one accept task
//! on the listener, one task per connection driving the shared [`Session`]. A connection
//! has no read buffer: it reads into its runtime thread's 16 KiB buffer and serves what it
//! read before it waits again, as the epoll loops do (no allocation per request; an idle
//! connection costs its task, its registration and its session, about 1 KiB, not 17).
//!
//! Idle timeout: one timer per connection, moved on only by progress (a request answered, a
//! reply byte taken; echo and discard: any byte), as in the other designs. (It used to be a
//! fresh timeout around each read, so a client sending a byte now and then was never closed.)
//!
//! Per-worker counts: each runtime thread takes an index when it starts (`on_thread_start`).
//! Requests are counted for the thread that answered them (added up before each wait); a
//! connection for the thread that answered its first request (or dropped it, when it had
//! none). Tasks migrate between workers (work stealing), so these say where the work was
//! done, not which thread accepted (one accept task does that).
//!
//! Stop: the calling thread polls the stop flag every 50 ms, then shuts the runtime down
//! (dropping every task closes its connection) with a bounded wait.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use socklab_sys::usage::{getrusage, Who};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use super::{Ctx, Design, Handler, Replies, ServeReport, Session, WorkerCount};
use crate::NetError;

/// Each runtime thread's read buffer.
const BUF: usize = 16 << 10;
/// How often the calling thread looks at the stop flag.
const POLL_STOP: Duration = Duration::from_millis(50);
/// Longest wait for the runtime's tasks to end after stop.
const SHUTDOWN: Duration = Duration::from_millis(300);

thread_local! {
    /// This runtime thread's worker index.
    static WORKER: Cell<usize> = const { Cell::new(0) };
    /// This runtime thread's read buffer: a connection reads into it and serves what it read
    /// in the same poll, so no connection holds it across a wait.
    static READ_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0u8; BUF].into_boxed_slice());
}

/// Counts shared by the tasks.
#[derive(Debug)]
struct Counts {
    connections: Vec<AtomicU64>,
    requests: Vec<AtomicU64>,
    accept_errors: AtomicU64,
    /// Connections open now.
    open: AtomicUsize,
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
        open: AtomicUsize::new(0),
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
        let bytes_are_progress = matches!(cfg.handler, Handler::Echo | Handler::Discard);
        let opts = cfg.opts.clone();
        let tls = ctx.tls.clone();
        rt.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let _ = opts.apply_accepted(&socket2::SockRef::from(&stream));
                        let replies = replies.clone();
                        // Made here: a task dropped before it ever ran still counts.
                        let mut tally = Tally::new(&counts);
                        let tls = tls.clone();
                        tokio::spawn(async move {
                            match tls {
                                Some(t) => {
                                    let mut f = |n| tally.flush(n);
                                    let f: &mut (dyn FnMut(u64) + Send) = &mut f;
                                    // Boxed: the TLS state is large, and a plain
                                    // connection's task must not grow to its size.
                                    Box::pin(super::tokio_tls::connection(
                                        stream,
                                        t,
                                        &replies,
                                        idle,
                                        bytes_are_progress,
                                        f,
                                    ))
                                    .await
                                }
                                None => {
                                    connection(
                                        stream,
                                        &replies,
                                        idle,
                                        bytes_are_progress,
                                        &mut tally,
                                    )
                                    .await
                                }
                            }
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
    // Work stealing spreads a connection's allocations over the runtime threads' arenas:
    // give a drained flood's memory back (see memtrim).
    let mut trim = crate::memtrim::FloodTrim::default();
    while !ctx.stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL_STOP);
        trim.check(counts.open.load(Ordering::Relaxed));
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
    fn new(counts: &Arc<Counts>) -> Tally {
        counts.open.fetch_add(1, Ordering::Relaxed);
        Tally {
            counts: counts.clone(),
            reported: 0,
            counted: false,
        }
    }

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
        self.counts.open.fetch_sub(1, Ordering::Relaxed);
        if !self.counted {
            let w = WORKER.with(Cell::get);
            self.counts.connections[w].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Serves one connection until the client leaves, the session says close, an error, or the
/// idle timeout; its requests go to `tally` before every wait (so a task dropped at shutdown
/// has reported what it did).
async fn connection(
    stream: TcpStream,
    r: &Replies,
    idle: Option<Duration>,
    bytes_are_progress: bool,
    tally: &mut Tally,
) {
    let mut c = Conn {
        stream,
        session: r.session(),
        inbuf: Vec::new(),
    };
    drive(&mut c, r, idle, bytes_are_progress, tally).await;
    tally.flush(c.session.requests());
}

/// What a connection waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// More input.
    Read,
    /// The socket to become writable (a reply is blocked).
    Write,
    /// To be closed.
    Close,
}

/// Waits for input (or, while a reply is blocked, for room to write) and serves, until the
/// connection ends. One timer per connection, moved on only by progress (as in the other
/// designs, docs/serve.md): a request answered, a reply byte the client took, or (echo,
/// discard) any byte received. A client that trickles bytes of a request it never completes
/// is closed when the timer fires.
async fn drive(
    c: &mut Conn,
    r: &Replies,
    idle: Option<Duration>,
    bytes_are_progress: bool,
    tally: &mut Tally,
) {
    let mut timer = std::pin::pin!(tokio::time::sleep(idle.unwrap_or_default()));
    let mut want = Status::Read;
    while want != Status::Close {
        tally.flush(c.session.requests());
        let before = c.session.requests();
        let (next, moved) = std::future::poll_fn(|cx| {
            let step = match want {
                Status::Write => c.poll_write_and_serve(cx, r),
                _ => c.poll_read_and_serve(cx, r, bytes_are_progress),
            };
            if step.is_pending() && idle.is_some() && timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready((Status::Close, false)); // no progress for the idle timeout
            }
            step
        })
        .await;
        if let Some(t) = idle {
            let now = tokio::time::Instant::now();
            if moved || c.session.requests() != before {
                timer.as_mut().reset(now + t);
            } else if now >= timer.deadline() {
                return; // input without progress kept the socket ready past the deadline
            }
        }
        want = next;
    }
}

/// One connection's state between wake-ups. It has no read buffer of its own (it reads into
/// its runtime thread's [`READ_BUF`] and serves what it read before it waits again), so an
/// idle connection costs its task, its socket's registration and its session.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    session: Session,
    /// Input the session has not consumed yet (only while a reply is blocked).
    inbuf: Vec<u8>,
}

impl Conn {
    /// One read into the thread's buffer, served at once. Ready with what the connection
    /// needs next and whether it made byte progress (a reply byte sent; with
    /// `bytes_are_progress`, a byte received).
    fn poll_read_and_serve(
        &mut self,
        cx: &mut Context<'_>,
        r: &Replies,
        bytes_are_progress: bool,
    ) -> Poll<(Status, bool)> {
        READ_BUF.with_borrow_mut(|buf| {
            let mut rb = ReadBuf::new(buf);
            match Pin::new(&mut self.stream).poll_read(cx, &mut rb) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Err(_)) => Poll::Ready((Status::Close, false)),
                Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                    Poll::Ready((Status::Close, false))
                }
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    let (st, sent) = self.pump(r, &buf[..n]);
                    Poll::Ready((st, sent || bytes_are_progress))
                }
            }
        })
    }

    /// Once the socket is writable again: the blocked reply, then the input kept meanwhile.
    fn poll_write_and_serve(&mut self, cx: &mut Context<'_>, r: &Replies) -> Poll<(Status, bool)> {
        match self.stream.poll_write_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => Poll::Ready((Status::Close, false)),
            Poll::Ready(Ok(())) => Poll::Ready(self.pump(r, &[])),
        }
    }

    /// Runs `fresh` (just read) through the session, after any input kept from before;
    /// returns what the connection needs next and whether a reply byte was sent.
    fn pump(&mut self, r: &Replies, fresh: &[u8]) -> (Status, bool) {
        if self.inbuf.is_empty() {
            let (used, st, sent) = serve_input(&mut self.session, r, &self.stream, fresh);
            if used < fresh.len() && st != Status::Close {
                self.inbuf.extend_from_slice(&fresh[used..]);
            }
            (st, sent)
        } else {
            self.inbuf.extend_from_slice(fresh);
            let (used, st, sent) = serve_input(&mut self.session, r, &self.stream, &self.inbuf);
            self.inbuf.drain(..used);
            if self.inbuf.is_empty() {
                self.inbuf = Vec::new(); // a blocked reply was rare: give its memory back
            }
            (st, sent)
        }
    }
}

/// Feeds `input` to the session, writing replies as they come (`try_write`, never waiting);
/// returns how much input it consumed, what the connection needs next and whether a reply
/// byte was sent.
fn serve_input(
    s: &mut Session,
    r: &Replies,
    stream: &TcpStream,
    input: &[u8],
) -> (usize, Status, bool) {
    let (mut off, mut sent) = (0, false);
    loop {
        while s.has_pending() {
            match stream.try_write(s.pending(r)) {
                Ok(0) => return (off, Status::Close, sent),
                Ok(n) => {
                    s.sent(n, r);
                    sent = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return (off, Status::Write, sent)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return (off, Status::Close, sent),
            }
        }
        if s.should_close() {
            return (off, Status::Close, sent);
        }
        if off == input.len() {
            return (off, Status::Read, sent);
        }
        let c = s.receive(&input[off..]);
        off += c;
        if c == 0 && !s.has_pending() {
            return (off, Status::Read, sent);
        }
    }
}
