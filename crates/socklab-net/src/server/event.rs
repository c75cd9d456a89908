//! The epoll designs: epoll, epoll-shared, epoll-exclusive, reuseport.
//!
//! Every worker is one thread with one `epoll` instance, level-triggered, non-blocking
//! sockets, its connections in a [`Slab`] and one read buffer. A readable connection gets one
//! `recv` (again only while the buffer came back full), its bytes go through the [`Session`],
//! and the reply is sent at once (optimistic write); only when `send` would block is the
//! connection switched to `EPOLLOUT` (and back once the reply is out), keeping the input the
//! session has not consumed yet. So a keep-alive request costs one `recv` and one `send`.
//!
//! - `epoll`: one worker on the listener;
//! - `epoll-shared`: `--workers` loops all watching the one listener (each wakes for every
//!   connection; the losers' `accept4` says `EAGAIN`);
//! - `epoll-exclusive`: the same with the listener registered `EPOLLEXCLUSIVE`;
//! - `reuseport`: one `SO_REUSEPORT` listener per worker (the first bound from `--bind`, the
//!   others to its port).
//!
//! `accept4` runs until `EAGAIN` (at most [`ACCEPT_BATCH`] per wake-up). On any accept error but
//! `ECONNABORTED`/`EINTR` (out of descriptors or memory, above all) the loop counts it and stops
//! watching the listener for [`ACCEPT_BACKOFF`] instead of spinning on a level-triggered
//! listener that stays readable.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use socket2::Socket;
use socklab_sys::epoll::{self, Epoll, Event, Events};
use socklab_sys::usage::{getrusage, Who};

use super::slab::{IdleSweep, Slab};
use super::tls::{Next, TlsConn, TlsCtx};
use super::{Ctx, Design, Handler, Replies, ServeConfig, ServeReport, Session, WorkerCount};
use crate::NetError;

/// The listener's token (connection tokens fit in 55 bits).
const LISTENER: u64 = u64::MAX;
/// Longest `epoll_wait`: how late a worker may notice the stop flag.
pub(super) const TICK: Duration = Duration::from_millis(100);
/// How long a worker ignores its listener after `EMFILE`/`ENFILE`/`ENOBUFS`/`ENOMEM`.
pub(super) const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);
/// Most connections accepted per listener wake-up (then the other ready sockets get a turn).
const ACCEPT_BATCH: usize = 64;
/// The per-worker read buffer.
const READ_BUF: usize = 64 << 10;
/// Events per `epoll_wait`.
const EVENTS: usize = 256;

/// Runs the design of `ctx` until `ctx.stop`.
pub(crate) fn serve(
    ctx: &Ctx<'_>,
    on_listening: &mut dyn FnMut(SocketAddr),
) -> Result<ServeReport, NetError> {
    let cfg = ctx.cfg;
    let design = cfg.design;
    let start = Instant::now();
    let workers = if design == Design::Epoll {
        1
    } else {
        cfg.workers
    };
    let listeners = if design == Design::Reuseport {
        reuseport_listeners(cfg, workers)?
    } else {
        vec![super::listener(cfg, false)?]
    };
    for l in &listeners {
        l.set_nonblocking(true)
            .map_err(|e| NetError::io("setting the listener non-blocking", e))?;
    }
    let addr = local_addr(&listeners[0])?;
    let interest = if design == Design::EpollExclusive {
        epoll::IN | epoll::EXCLUSIVE
    } else {
        epoll::IN
    };
    let results = run_workers(
        workers,
        "sl-epoll",
        |i| {
            let l = &listeners[if design == Design::Reuseport { i } else { 0 }];
            Worker::new(ctx, l.as_fd(), interest)
        },
        |w, abort| w.run(ctx.stop, abort),
        &mut || on_listening(addr),
    )?;
    Ok(report(design, cfg, results, start))
}

/// The report of a design whose workers each returned their counts and accept errors.
pub(super) fn report(
    design: Design,
    cfg: &ServeConfig,
    results: Vec<(WorkerCount, u64)>,
    start: Instant,
) -> ServeReport {
    let accept_errors = results.iter().map(|r| r.1).sum();
    ServeReport::new(
        design,
        cfg.handler,
        &getrusage(Who::Process),
        results.into_iter().map(|r| r.0).collect(),
        accept_errors,
        start.elapsed(),
    )
}

/// Runs `n` workers, each on its own named thread: `make(i)` builds worker `i` on its thread
/// (an io_uring must be created where it is used), `on_ready` runs once every worker is built,
/// then each runs `run` until it returns. A worker that fails to build or run sets the abort
/// flag `run` receives, so the others stop too; all threads are joined, and the first error
/// is returned.
pub(super) fn run_workers<W, R: Send>(
    n: usize,
    name: &str,
    make: impl Fn(usize) -> Result<W, NetError> + Sync,
    run: impl Fn(W, &AtomicBool) -> Result<R, NetError> + Sync,
    on_ready: &mut dyn FnMut(),
) -> Result<Vec<R>, NetError> {
    let abort = AtomicBool::new(false);
    let (make, run, abort) = (&make, &run, &abort);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), NetError>>();
    let results: Vec<Result<R, NetError>> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let ready = ready_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn_scoped(s, move || {
                    let w = match make(i) {
                        Ok(w) => w,
                        Err(e) => {
                            abort.store(true, Ordering::Relaxed);
                            let _ = ready.send(Err(e));
                            return Err(NetError::Interrupted);
                        }
                    };
                    let _ = ready.send(Ok(()));
                    drop(ready);
                    let r = run(w, abort);
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    abort.store(true, Ordering::Relaxed);
                    let _ = ready_tx.send(Err(NetError::io("starting a server worker thread", e)));
                }
            }
        }
        drop(ready_tx);
        let mut first_err = None;
        for msg in ready_rx.iter().take(n) {
            if let Err(e) = msg {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            abort.store(true, Ordering::Relaxed);
            handles.into_iter().for_each(|h| drop(h.join()));
            return vec![Err(e)];
        }
        on_ready();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(NetError::Invalid("a server worker thread panicked".into()))
                })
            })
            .collect()
    });
    results.into_iter().collect()
}

/// `workers` `SO_REUSEPORT` listeners on one port: the first bound as configured (port 0
/// picks one), the others to its port.
pub(super) fn reuseport_listeners(
    cfg: &ServeConfig,
    workers: usize,
) -> Result<Vec<Socket>, NetError> {
    let first = super::listener(cfg, true)?;
    let port = local_addr(&first)?.port();
    let mut same = cfg.clone();
    same.bind.set_port(port);
    let mut all = vec![first];
    for _ in 1..workers {
        all.push(super::listener(&same, true)?);
    }
    Ok(all)
}

/// The bound address of a listener.
pub(super) fn local_addr(s: &Socket) -> Result<SocketAddr, NetError> {
    s.local_addr()
        .map_err(|e| NetError::io("reading the listener's address", e))?
        .as_socket()
        .ok_or_else(|| NetError::Invalid("the listener has no IP address".into()))
}

/// True for the accept errors that mean "out of descriptors or memory": back off.
pub(super) fn is_resource_error(e: &io::Error) -> bool {
    use socklab_sys::errno;
    matches!(
        e.raw_os_error(),
        Some(errno::EMFILE | errno::ENFILE | errno::ENOBUFS | errno::ENOMEM)
    )
}

/// One connection.
#[derive(Debug)]
struct Conn {
    sock: Socket,
    session: Session,
    /// Input the session has not consumed yet (only while a reply is blocked).
    inbuf: Vec<u8>,
    /// Registered for `EPOLLOUT` (a reply is blocked) instead of `EPOLLIN`.
    out_blocked: bool,
    /// Last progress (accepted, a request answered, bytes echoed or discarded, a blocked reply
    /// moved on), for the idle timeout.
    last: Instant,
    /// `session.requests()` when `last` was set.
    seen: u64,
    /// The TLS connection, when serving TLS.
    tls: Option<Box<TlsConn>>,
}

/// What a connection needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// More input.
    Read,
    /// The socket to become writable.
    Write,
    /// To be closed.
    Close,
}

/// Feeds `input` to the session, sending replies as they come; returns how much input it
/// consumed and what it needs next.
fn drive(s: &mut Session, r: &Replies, fd: BorrowedFd<'_>, input: &[u8]) -> (usize, Status) {
    let mut off = 0;
    loop {
        while s.has_pending() {
            match epoll::send(fd, s.pending(r)) {
                Ok(n) => s.sent(n, r),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (off, Status::Write),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return (off, Status::Close),
            }
        }
        if s.should_close() {
            return (off, Status::Close);
        }
        if off == input.len() {
            return (off, Status::Read);
        }
        let c = s.receive(&input[off..]);
        off += c;
        if c == 0 && !s.has_pending() {
            return (off, Status::Read);
        }
    }
}

/// Runs `fresh` (just read) through the connection, after any input kept from before.
fn pump(c: &mut Conn, r: &Replies, fresh: &[u8]) -> Status {
    if c.inbuf.is_empty() {
        let (used, st) = drive(&mut c.session, r, c.sock.as_fd(), fresh);
        if used < fresh.len() && st != Status::Close {
            c.inbuf.extend_from_slice(&fresh[used..]);
        }
        st
    } else {
        c.inbuf.extend_from_slice(fresh);
        let (used, st) = drive(&mut c.session, r, c.sock.as_fd(), &c.inbuf);
        c.inbuf.drain(..used);
        st
    }
}

/// One event loop.
struct Worker<'a> {
    cfg: &'a ServeConfig,
    replies: &'a Replies,
    tls: Option<&'a TlsCtx>,
    ep: Epoll,
    listener: BorrowedFd<'a>,
    interest: u32,
    /// Resume watching the listener at this time (after an accept error).
    resume_at: Option<Instant>,
    conns: Slab<Conn>,
    buf: Vec<u8>,
    events: Events,
    count: WorkerCount,
    accept_errors: u64,
    /// Whether progress is tracked per byte (echo, discard) rather than per request.
    bytes_are_progress: bool,
}

impl<'a> Worker<'a> {
    fn new(ctx: &'a Ctx<'a>, listener: BorrowedFd<'a>, interest: u32) -> Result<Self, NetError> {
        let ep = Epoll::new().map_err(|e| NetError::io("epoll_create1", e))?;
        ep.add(listener, interest, LISTENER)
            .map_err(|e| NetError::io("adding the listener to epoll", e))?;
        Ok(Worker {
            cfg: ctx.cfg,
            replies: &ctx.replies,
            tls: ctx.tls.as_deref(),
            ep,
            listener,
            interest,
            resume_at: None,
            conns: Slab::new(),
            buf: vec![0; READ_BUF],
            events: Events::with_capacity(EVENTS),
            count: WorkerCount::default(),
            accept_errors: 0,
            bytes_are_progress: matches!(ctx.cfg.handler, Handler::Echo | Handler::Discard),
        })
    }

    fn run(
        mut self,
        stop: &AtomicBool,
        abort: &AtomicBool,
    ) -> Result<(WorkerCount, u64), NetError> {
        let mut sweep = IdleSweep::new(self.cfg.idle_timeout, Instant::now());
        while !stop.load(Ordering::Relaxed) && !abort.load(Ordering::Relaxed) {
            let timeout = sweep.wait_timeout(Instant::now(), TICK, self.resume_at);
            let n = self
                .ep
                .wait(&mut self.events, Some(timeout))
                .map_err(|e| NetError::io("epoll_wait", e))?;
            let now = Instant::now();
            for i in 0..n {
                let Some(ev) = self.events.get(i) else { break };
                if ev.token == LISTENER {
                    self.accept(now);
                } else {
                    self.conn_event(ev, now);
                }
            }
            if self.resume_at.is_some_and(|t| now >= t) {
                match self.ep.add(self.listener, self.interest, LISTENER) {
                    Ok(()) => self.resume_at = None,
                    Err(_) => self.resume_at = Some(now + ACCEPT_BACKOFF),
                }
            }
            let expired = sweep.expired(now, &self.conns, |c| c.last);
            for &t in &expired {
                if let (Some(ctx), Some(c)) = (self.tls, self.conns.get_mut(t)) {
                    if c.tls.as_ref().is_some_and(|x| x.handshaking) {
                        ctx.refuse("the handshake stalled past the idle timeout");
                    }
                }
                self.close(t);
            }
            sweep.done(expired);
        }
        // Connections still open: their requests count (closed ones were counted at close).
        self.count.requests += self
            .conns
            .take_all()
            .map(|c| c.session.requests())
            .sum::<u64>();
        Ok((self.count, self.accept_errors))
    }

    fn accept(&mut self, now: Instant) {
        for _ in 0..ACCEPT_BATCH {
            match epoll::accept4(self.listener) {
                Ok(fd) => self.add_conn(fd, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(socklab_sys::errno::ECONNABORTED | socklab_sys::errno::EINTR)
                    ) => {}
                Err(_) => {
                    // Out of descriptors or memory (or worse): stop watching the listener for
                    // a moment rather than spin on it.
                    self.accept_errors += 1;
                    if self.ep.delete(self.listener).is_ok() {
                        self.resume_at = Some(now + ACCEPT_BACKOFF);
                    }
                    return;
                }
            }
        }
    }

    fn add_conn(&mut self, fd: OwnedFd, now: Instant) {
        let sock = Socket::from(fd);
        // Server-side options were checked on the listener; one refused on a connection is
        // not worth dropping it for.
        let _ = self.cfg.opts.apply_accepted(&sock);
        let tls = match self.tls {
            Some(t) => match TlsConn::accept(t) {
                Some(c) => Some(Box::new(c)),
                None => return, // refused (counted): over the cap of handshakes
            },
            None => None,
        };
        self.count.connections += 1;
        let token = self.conns.insert(Conn {
            sock,
            session: self.replies.session(),
            inbuf: Vec::new(),
            out_blocked: false,
            last: now,
            seen: 0,
            tls,
        });
        let Some(c) = self.conns.get_mut(token) else {
            return;
        };
        if self
            .ep
            .add(c.sock.as_fd(), epoll::IN | epoll::RDHUP, token)
            .is_err()
        {
            self.close(token);
        }
    }

    fn close(&mut self, token: u64) {
        if let Some(mut c) = self.conns.remove(token) {
            self.count.requests += c.session.requests();
            if let (Some(t), Some(ctx)) = (c.tls.as_mut(), self.tls) {
                t.release(ctx);
            }
        }
    }

    fn conn_event(&mut self, ev: Event, now: Instant) {
        let r = self.replies;
        let Some(c) = self.conns.get_mut(ev.token) else {
            return; // stale: closed earlier in this batch
        };
        let status = if let (Some(t), Some(ctx)) = (c.tls.as_mut(), self.tls) {
            let readable = !c.out_blocked && ev.readable();
            if !(readable || c.out_blocked && ev.writable()) {
                if ev.hangup() || ev.error() {
                    self.close(ev.token);
                }
                return;
            }
            let before = c.session.requests();
            let st = t.ready(
                ctx,
                &mut c.session,
                r,
                c.sock.as_fd(),
                readable,
                &mut self.buf,
            );
            if c.out_blocked || self.bytes_are_progress || c.session.requests() != before {
                c.last = now;
            }
            match st {
                Next::Read => Status::Read,
                Next::Write => Status::Write,
                Next::Close => Status::Close,
            }
        } else if c.out_blocked {
            if !ev.writable() {
                return;
            }
            c.last = now;
            pump(c, r, &[])
        } else {
            if !ev.readable() {
                return;
            }
            loop {
                match epoll::recv(c.sock.as_fd(), &mut self.buf) {
                    Ok(0) => break Status::Close,
                    Ok(n) => {
                        let st = pump(c, r, &self.buf[..n]);
                        if self.bytes_are_progress || c.session.requests() != c.seen {
                            c.seen = c.session.requests();
                            c.last = now;
                        }
                        if st != Status::Read || n < self.buf.len() {
                            break st;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Status::Read,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break Status::Close,
                }
            }
        };
        let want_out = match status {
            Status::Close => {
                self.close(ev.token);
                return;
            }
            Status::Write => true,
            Status::Read => false,
        };
        if want_out != c.out_blocked {
            c.out_blocked = want_out;
            let interest = if want_out {
                epoll::OUT
            } else {
                epoll::IN | epoll::RDHUP
            };
            if self.ep.modify(c.sock.as_fd(), interest, ev.token).is_err() {
                self.close(ev.token);
            }
        }
    }
}
