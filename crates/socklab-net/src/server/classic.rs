//! The process and thread designs of UNP chapter 30: iterative, fork, the four preforked
//! designs, thread, and the three prethreaded ones.
//!
//! Every design speaks through the shared [`Session`](super::Session) (read → `receive` →
//! write `pending` → `sent`; close on `should_close` or EOF) in [`serve_conn`].
//!
//! **Stopping.** The listener gets `SO_RCVTIMEO`/`SO_SNDTIMEO` of [`TICK`] (or the idle timeout
//! if shorter); accepted sockets inherit both. A worker blocked in `accept`, `read` or `write`
//! thus wakes at least every tick and looks at the stop flags: `ctx.stop` (SIGINT/SIGTERM) and
//! a stop word in shared memory that the parent (or main thread) sets. The lock designs check
//! the flag again once they hold the lock, so a queue of waiters drains at once. The parent of
//! the process designs then waits [`STOP_GRACE`] for its children to `_exit`, `SIGKILL`s the
//! stragglers, and reaps them all.
//!
//! **Accounting.** Workers add their connections and requests to counters in shared memory
//! (`mmap(MAP_SHARED|MAP_ANONYMOUS)`, the same for threads); CPU time is `RUSAGE_SELF` plus
//! `RUSAGE_CHILDREN` after every child is reaped — "itself plus reaped children", as the
//! classic servers print it (for the thread designs the children part is zero).

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use socket2::Socket;
use socklab_sys::procs::{self, FileLock, Forked, SharedCounters, SharedMutex};
use socklab_sys::usage::{getrusage, Usage, Who};

use super::{Ctx, Design, Handler, ServeReport, WorkerCount};
use crate::error::is_timeout;
use crate::NetError;

/// The longest a blocked worker goes without looking at the stop flags.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// The pause after an `accept` that failed for lack of descriptors or memory.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);
/// How often an otherwise idle parent (or main thread) looks at the stop flag and reaps: rare
/// enough to add little to the server's context switches.
const WATCH: Duration = Duration::from_millis(50);
/// How long the parent waits for its children to leave on their own before `SIGKILL`.
const STOP_GRACE: Duration = Duration::from_millis(300);
/// A worker's read buffer.
const READ_BUF: usize = 16 << 10;
/// Stack of a per-connection or pool thread (it holds no large frame: the buffer is on the heap).
const THREAD_STACK: usize = 128 << 10;

/// Runs the design of `ctx` until `ctx.stop`.
pub(crate) fn serve(
    ctx: &Ctx<'_>,
    on_listening: &mut dyn FnMut(SocketAddr),
) -> Result<ServeReport, NetError> {
    let started = Instant::now();
    let cfg = ctx.cfg;
    let listener = super::listener(cfg, false)?;
    let tick = cfg
        .idle_timeout
        .map_or(TICK, |d| d.min(TICK))
        .max(Duration::from_millis(1));
    let io_err = |context: &str| {
        let context = context.to_string();
        move |source| NetError::Io { context, source }
    };
    // Inherited by every accepted socket: the wake-ups that let workers see the stop flags.
    listener
        .set_read_timeout(Some(tick))
        .map_err(io_err("SO_RCVTIMEO on the listener"))?;
    listener
        .set_write_timeout(Some(tick))
        .map_err(io_err("SO_SNDTIMEO on the listener"))?;
    let addr = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .unwrap_or(cfg.bind);
    let pool = if cfg.design.has_workers() {
        cfg.workers
    } else {
        1
    };
    let tally = Tally::new(pool).map_err(io_err("shared counters"))?;
    let w = Worker { ctx, tally: &tally };
    let l = &listener;
    // The locks exist before the children that share them are forked.
    let lock = match cfg.design {
        Design::PreforkFlock => {
            AcceptLock::File(FileLock::new().map_err(io_err("the accept lock file"))?)
        }
        Design::PreforkMutex => {
            AcceptLock::Shared(SharedMutex::new().map_err(io_err("the shared accept mutex"))?)
        }
        Design::PrethreadMutex => AcceptLock::Thread(Mutex::new(())),
        _ => AcceptLock::None,
    };
    on_listening(addr);
    match cfg.design {
        Design::Iterative => w.work_locked(l, 0, &lock),
        Design::Fork => fork_per_connection(&w, listener)?,
        Design::PreforkNolock | Design::PreforkFlock | Design::PreforkMutex => {
            prefork(&w, l, &lock)?
        }
        Design::PreforkFdpass => prefork_fdpass(&w, l)?,
        Design::Thread => thread_per_connection(&w, l),
        Design::PrethreadMutex | Design::PrethreadAccept => prethread(&w, l, &lock),
        Design::PrethreadHandoff => prethread_handoff(&w, l),
        other => {
            return Err(NetError::Invalid(format!(
                "the '{other}' design is not a classic one"
            )))
        }
    }
    Ok(ServeReport::new(
        cfg.design,
        cfg.handler,
        &self_and_children(),
        tally.workers(),
        tally.accept_errors(),
        started.elapsed(),
    ))
}

/// `RUSAGE_SELF` + `RUSAGE_CHILDREN`.
fn self_and_children() -> Usage {
    let a = getrusage(Who::Process);
    let b = getrusage(Who::Children);
    Usage {
        user: a.user + b.user,
        sys: a.sys + b.sys,
        nvcsw: a.nvcsw + b.nvcsw,
        nivcsw: a.nivcsw + b.nivcsw,
        maxrss_kib: a.maxrss_kib.max(b.maxrss_kib),
    }
}

// ------------------------------------------------------------------------------- counters

/// The counters every worker writes, in shared memory: `[stop, accept_errors, (connections,
/// requests) per worker]`.
struct Tally {
    c: SharedCounters,
    workers: usize,
}

impl Tally {
    fn new(workers: usize) -> io::Result<Tally> {
        Ok(Tally {
            c: SharedCounters::new(2 + 2 * workers)?,
            workers,
        })
    }
    fn set_stop(&self) {
        self.c.get(0).store(1, Ordering::SeqCst);
    }
    fn stop_set(&self) -> bool {
        self.c.get(0).load(Ordering::Relaxed) != 0
    }
    fn accept_error(&self) {
        self.c.get(1).fetch_add(1, Ordering::Relaxed);
    }
    fn accept_errors(&self) -> u64 {
        self.c.get(1).load(Ordering::Relaxed)
    }
    fn connections(&self, w: usize) -> &AtomicU64 {
        self.c.get(2 + 2 * w)
    }
    fn requests(&self, w: usize) -> &AtomicU64 {
        self.c.get(3 + 2 * w)
    }
    fn workers(&self) -> Vec<WorkerCount> {
        (0..self.workers)
            .map(|w| WorkerCount {
                connections: self.connections(w).load(Ordering::Relaxed),
                requests: self.requests(w).load(Ordering::Relaxed),
            })
            .collect()
    }
}

// ------------------------------------------------------------------------------- a worker

/// What one worker (process or thread) needs.
#[derive(Clone, Copy)]
struct Worker<'a> {
    ctx: &'a Ctx<'a>,
    tally: &'a Tally,
}

/// What one `accept` gave.
enum Accepted {
    Conn(Socket),
    /// Timeout, signal, or a client that left: try again.
    Nothing,
    /// Out of descriptors or memory (counted): pause [`ACCEPT_BACKOFF`] outside any lock.
    Backoff,
}

impl Worker<'_> {
    fn stopped(&self) -> bool {
        self.tally.stop_set() || self.ctx.stop.load(Ordering::Relaxed)
    }

    /// One `accept` on the shared listener.
    fn accept(&self, listener: &Socket) -> Accepted {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = self.ctx.cfg.opts.apply_accepted(&s);
                Accepted::Conn(s)
            }
            Err(e)
                if is_timeout(&e)
                    || e.kind() == io::ErrorKind::Interrupted
                    || e.raw_os_error() == Some(socklab_sys::errno::ECONNABORTED) =>
            {
                Accepted::Nothing
            }
            Err(_) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM (crate::error::is_transient_accept_error) or
                // anything unexpected: count it, pause, go on.
                self.tally.accept_error();
                Accepted::Backoff
            }
        }
    }

    /// Serves `conn` as worker `w`: counts it, then speaks the protocol.
    fn serve(&self, w: usize, conn: &Socket, buf: &mut [u8]) {
        self.tally.connections(w).fetch_add(1, Ordering::Relaxed);
        serve_conn(conn, self, self.tally.requests(w), buf);
    }

    /// The worker loop of the accepting designs: `[lock] accept [unlock] → serve → close` until
    /// stopped. `lock` is taken around `accept` (and the stop flag checked again under it).
    fn work_locked(&self, listener: &Socket, w: usize, lock: &AcceptLock) {
        let mut buf = vec![0u8; READ_BUF];
        while !self.stopped() {
            let got = {
                let _guard = match lock.lock() {
                    Ok(g) => g,
                    Err(_) => {
                        std::thread::sleep(ACCEPT_BACKOFF);
                        continue;
                    }
                };
                if self.stopped() {
                    break;
                }
                self.accept(listener)
            };
            match got {
                Accepted::Conn(c) => self.serve(w, &c, &mut buf),
                Accepted::Nothing => {}
                Accepted::Backoff => std::thread::sleep(ACCEPT_BACKOFF),
            }
        }
    }
}

/// What serialises `accept` in the pool designs.
enum AcceptLock {
    /// Nothing: every worker blocks in `accept` (prefork-nolock, prethread-accept).
    None,
    /// `fcntl(F_SETLKW)` on a file (prefork-flock).
    File(FileLock),
    /// A `PTHREAD_PROCESS_SHARED` mutex in shared memory (prefork-mutex).
    Shared(SharedMutex),
    /// A mutex between threads (prethread-mutex).
    Thread(Mutex<()>),
}

/// A held [`AcceptLock`].
/// (The guards are held for their `Drop`, which unlocks.)
enum Held<'a> {
    None,
    File {
        _guard: procs::FileLockGuard<'a>,
    },
    Shared {
        _guard: procs::SharedMutexGuard<'a>,
    },
    Thread {
        _guard: std::sync::MutexGuard<'a, ()>,
    },
}

impl AcceptLock {
    fn lock(&self) -> io::Result<Held<'_>> {
        Ok(match self {
            AcceptLock::None => Held::None,
            AcceptLock::File(l) => Held::File { _guard: l.lock()? },
            AcceptLock::Shared(m) => Held::Shared { _guard: m.lock()? },
            AcceptLock::Thread(m) => Held::Thread {
                _guard: m.lock().unwrap_or_else(|p| p.into_inner()),
            },
        })
    }
}

// ------------------------------------------------------------------------ one connection

/// Serves one connection through a [`Session`](super::Session) until the client closes, the
/// session asks to close, the connection breaks (a reset or `EPIPE` ends only this
/// connection), the idle timeout passes without a complete request (or, for echo and discard,
/// without any byte) or without reply progress, or the server stops. Adds each answered
/// request to `requests`.
fn serve_conn(sock: &Socket, w: &Worker<'_>, requests: &AtomicU64, buf: &mut [u8]) {
    let replies = &*w.ctx.replies;
    let idle = w.ctx.cfg.idle_timeout;
    let any_byte_counts = matches!(replies.handler(), Handler::Echo | Handler::Discard);
    let mut s = replies.session();
    let mut deadline = idle.map(|d| Instant::now() + d);
    let expired = |deadline: Option<Instant>| deadline.is_some_and(|t| Instant::now() >= t);
    let (mut start, mut end) = (0usize, 0usize);
    let mut counted = 0u64;
    loop {
        if start < end && !s.has_pending() && !s.should_close() {
            let n = s.receive(&buf[start..end]);
            start += n;
            if start == end {
                (start, end) = (0, 0);
            }
            if s.requests() > counted {
                requests.fetch_add(s.requests() - counted, Ordering::Relaxed);
                counted = s.requests();
                deadline = idle.map(|d| Instant::now() + d);
            }
            if n == 0 && !s.has_pending() && !s.should_close() {
                return; // cannot happen (see Session::receive); never spin
            }
        }
        if s.has_pending() {
            match sock.send_with_flags(s.pending(replies), socklab_sys::msg::MSG_NOSIGNAL) {
                Ok(n) => {
                    s.sent(n, replies);
                    deadline = idle.map(|d| Instant::now() + d);
                }
                Err(e) if is_timeout(&e) => {
                    if w.stopped() || expired(deadline) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return, // EPIPE, ECONNRESET: drop this connection only
            }
            continue;
        }
        if s.should_close() || w.stopped() {
            return;
        }
        if start < end {
            continue;
        }
        match (&*sock).read(buf) {
            Ok(0) => return,
            Ok(n) => {
                (start, end) = (0, n);
                if any_byte_counts {
                    deadline = idle.map(|d| Instant::now() + d);
                }
            }
            Err(e) if is_timeout(&e) => {
                if expired(deadline) {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

// ------------------------------------------------------------------------------ processes

/// Runs `f` in a forked child and leaves with `_exit` (0, or 101 after a panic): the child
/// never returns into its parent's frames nor runs their destructors.
fn run_child(parent: u32, f: impl FnOnce()) -> ! {
    let _ = procs::die_with_parent(parent);
    let ok = catch_unwind(AssertUnwindSafe(f)).is_ok();
    let _ = io::stderr().flush();
    procs::exit_now(if ok { 0 } else { 101 })
}

/// Waits for `ctx.stop`, reaping children that end early (the pool goes on with the others,
/// as the book's); then sets the shared stop word, gives the children [`STOP_GRACE`] to leave,
/// `SIGKILL`s the rest and reaps every one. An error when every worker ended before the stop.
fn supervise(w: &Worker<'_>, mut pids: HashSet<u32>) -> Result<(), NetError> {
    let mut last = None;
    while !w.ctx.stop.load(Ordering::Relaxed) && !pids.is_empty() {
        std::thread::sleep(WATCH);
        while let Ok(Some(r)) = procs::reap_any() {
            pids.remove(&r.pid);
            last = Some(r);
        }
    }
    let all_gone = pids.is_empty() && !w.ctx.stop.load(Ordering::Relaxed);
    stop_children(w.tally, pids);
    match last {
        Some(r) if all_gone => Err(pool_gone(r.code)),
        _ => Ok(()),
    }
}

/// The error of a pool whose every worker process ended unasked.
fn pool_gone(code: i32) -> NetError {
    NetError::Io {
        context: format!(
            "every worker process ended before the stop signal (the last with status {code})"
        ),
        source: io::Error::other("no worker left to serve"),
    }
}

/// Sets the stop word, reaps children for up to [`STOP_GRACE`], then kills and reaps the rest.
fn stop_children(tally: &Tally, mut pids: HashSet<u32>) {
    tally.set_stop();
    let t0 = Instant::now();
    while !pids.is_empty() && t0.elapsed() < STOP_GRACE {
        match procs::reap_any() {
            Ok(Some(r)) => {
                pids.remove(&r.pid);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break,
        }
    }
    for &pid in &pids {
        let _ = socklab_sys::process::kill(pid, socklab_sys::process::Signal::Kill);
    }
    for pid in pids {
        let _ = procs::reap(pid);
    }
}

/// Forks `n` children running `child(i)` (which must not return: see [`run_child`]); on a
/// failed fork stops the ones started.
fn fork_workers(
    w: &Worker<'_>,
    n: usize,
    mut child: impl FnMut(usize),
) -> Result<HashSet<u32>, NetError> {
    let mut pids = HashSet::new();
    for i in 0..n {
        match procs::fork() {
            Ok(Forked::Child) => {
                child(i);
                procs::exit_now(0)
            }
            Ok(Forked::Parent(pid)) => {
                pids.insert(pid);
            }
            Err(source) => {
                stop_children(w.tally, pids);
                return Err(NetError::Io {
                    context: format!("fork of worker {i}"),
                    source,
                });
            }
        }
    }
    Ok(pids)
}

/// prefork-nolock, prefork-flock, prefork-mutex: `--workers` children fork after `listen`,
/// each `[lock] accept [unlock] → serve → close`.
fn prefork(w: &Worker<'_>, listener: &Socket, lock: &AcceptLock) -> Result<(), NetError> {
    let parent = procs::pid();
    let pids = fork_workers(w, w.tally.workers, |i| {
        run_child(parent, || w.work_locked(listener, i, lock))
    })?;
    supervise(w, pids)
}

/// fork: `accept → fork`; the child closes the listener, serves, `_exit`s; the parent closes
/// its copy and reaps with `waitpid(WNOHANG)` when `SIGCHLD` interrupts its `accept`.
fn fork_per_connection(w: &Worker<'_>, listener: Socket) -> Result<(), NetError> {
    let parent = procs::pid();
    procs::install_sigchld_flag().map_err(|source| NetError::Io {
        context: "SIGCHLD handler".into(),
        source,
    })?;
    let mut pids: HashSet<u32> = HashSet::new();
    while !w.stopped() {
        if procs::take_sigchld() {
            while let Ok(Some(r)) = procs::reap_any() {
                pids.remove(&r.pid);
            }
        }
        match w.accept(&listener) {
            Accepted::Conn(conn) => {
                w.tally.connections(0).fetch_add(1, Ordering::Relaxed);
                match procs::fork() {
                    Ok(Forked::Child) => {
                        drop(listener);
                        run_child(parent, || {
                            let mut buf = vec![0u8; READ_BUF];
                            serve_conn(&conn, w, w.tally.requests(0), &mut buf);
                        })
                    }
                    Ok(Forked::Parent(pid)) => {
                        pids.insert(pid);
                    }
                    Err(_) => {
                        // No process for it (EAGAIN, ENOMEM): drop this connection, go on.
                        w.tally.accept_error();
                        std::thread::sleep(ACCEPT_BACKOFF);
                    }
                }
                // conn (the parent's copy) closes here.
            }
            Accepted::Nothing => {}
            Accepted::Backoff => std::thread::sleep(ACCEPT_BACKOFF),
        }
    }
    stop_children(w.tally, pids);
    let _ = procs::reset_sigchld();
    Ok(())
}

/// prefork-fdpass: the parent `accept`s only while a child is idle, passes the descriptor to
/// an idle child (`sendmsg(SCM_RIGHTS)`) and closes its copy; the child `recvmsg`s, serves and
/// writes one byte back to say it is idle again.
fn prefork_fdpass(w: &Worker<'_>, listener: &Socket) -> Result<(), NetError> {
    let n = w.tally.workers;
    let mut pairs = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = procs::socketpair().map_err(|source| NetError::Io {
            context: "socketpair".into(),
            source,
        })?;
        pairs.push((Some(UnixStream::from(a)), Some(UnixStream::from(b))));
    }
    let parent = procs::pid();
    let mut pids = fork_workers(w, n, |i| {
        // Keep only this child's end: close the parents' ends and the other children's.
        let mine = pairs[i].1.take();
        for p in pairs.iter_mut() {
            p.0.take();
            p.1.take();
        }
        run_child(parent, || {
            if let Some(s) = mine {
                fdpass_child(w, i, &s)
            }
        })
    })?;
    let chans: Vec<UnixStream> = pairs
        .into_iter()
        .filter_map(|(p, c)| {
            drop(c);
            p
        })
        .collect();
    let mut idle = vec![true; n];
    let mut alive = vec![true; n];
    let mut ready = vec![false; n + 1];
    let tick_ms = TICK.as_millis() as i32;
    while !w.stopped() && alive.iter().any(|&a| a) {
        let any_idle = (0..n).any(|i| idle[i] && alive[i]);
        let mut fds: Vec<_> = Vec::with_capacity(n + 1);
        fds.push(listener.as_fd());
        fds.extend(chans.iter().map(|c| c.as_fd()));
        ready[0] = false;
        // Watch the listener only while some child can take a connection.
        let (watch, out) = if any_idle {
            (&fds[..], &mut ready[..])
        } else {
            (&fds[1..], &mut ready[1..])
        };
        let got = procs::poll_readable(watch, out, tick_ms).unwrap_or(0);
        if got == 0 {
            continue;
        }
        for i in 0..n {
            if ready[i + 1] && alive[i] {
                let mut b = [0u8; 1];
                match (&chans[i]).read(&mut b) {
                    Ok(1) => idle[i] = true,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted || is_timeout(&e) => {}
                    _ => {
                        // The child is gone: reap it now rather than at the stop.
                        alive[i] = false;
                        while let Ok(Some(r)) = procs::reap_any() {
                            pids.remove(&r.pid);
                        }
                    }
                }
            }
        }
        if any_idle && ready[0] {
            if let Some(i) = (0..n).find(|&i| idle[i] && alive[i]) {
                match w.accept(listener) {
                    Accepted::Conn(conn) => {
                        match procs::send_fd(chans[i].as_fd(), conn.as_fd(), 0) {
                            Ok(()) => {
                                idle[i] = false;
                                w.tally.connections(i).fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => alive[i] = false,
                        }
                        // conn (the parent's copy) closes here.
                    }
                    Accepted::Nothing => {}
                    Accepted::Backoff => std::thread::sleep(ACCEPT_BACKOFF),
                }
            }
        }
    }
    let all_gone = !w.stopped();
    drop(chans); // EOF for every child still waiting in recvmsg
    let mut last = None;
    while let Ok(Some(r)) = procs::reap_any() {
        pids.remove(&r.pid);
        last = Some(r.code);
    }
    stop_children(w.tally, pids);
    if all_gone {
        return Err(pool_gone(last.unwrap_or(-1)));
    }
    Ok(())
}

/// A prefork-fdpass child: `recvmsg` a descriptor, serve it, write one byte back; until EOF
/// on its channel or stop.
fn fdpass_child(w: &Worker<'_>, i: usize, chan: &UnixStream) {
    let _ = chan.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; READ_BUF];
    while !w.stopped() {
        match procs::recv_fd(chan.as_fd()) {
            Ok(Some(fd)) => {
                let conn = Socket::from(fd);
                serve_conn(&conn, w, w.tally.requests(i), &mut buf);
                drop(conn);
                if (&*chan).write_all(&[1]).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

// -------------------------------------------------------------------------------- threads

/// thread: `accept → spawn` (the handle is dropped: detached within the scope); the thread
/// serves and closes. The scope waits for the last ones at stop.
fn thread_per_connection(w: &Worker<'_>, listener: &Socket) {
    // Connections open now; each thread's buffer comes from its own glibc arena: give a
    // drained flood's memory back (see memtrim).
    let open = AtomicUsize::new(0);
    let mut trim = crate::memtrim::FloodTrim::default();
    std::thread::scope(|scope| {
        while !w.stopped() {
            trim.check(open.load(Ordering::Relaxed));
            match w.accept(listener) {
                Accepted::Conn(conn) => {
                    w.tally.connections(0).fetch_add(1, Ordering::Relaxed);
                    let open = OpenGuard::new(&open);
                    let spawned = std::thread::Builder::new()
                        .stack_size(THREAD_STACK)
                        .spawn_scoped(scope, move || {
                            let _open = open;
                            let mut buf = [0u8; READ_BUF];
                            serve_conn(&conn, w, w.tally.requests(0), &mut buf);
                        });
                    if spawned.is_err() {
                        // No thread for it: the connection is dropped; pause.
                        w.tally.accept_error();
                        std::thread::sleep(ACCEPT_BACKOFF);
                    }
                }
                Accepted::Nothing => {}
                Accepted::Backoff => std::thread::sleep(ACCEPT_BACKOFF),
            }
        }
        w.tally.set_stop();
    });
}

/// Counts one open connection until dropped.
struct OpenGuard<'a>(&'a AtomicUsize);

impl<'a> OpenGuard<'a> {
    fn new(open: &'a AtomicUsize) -> OpenGuard<'a> {
        open.fetch_add(1, Ordering::Relaxed);
        OpenGuard(open)
    }
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// prethread-mutex and prethread-accept: `--workers` threads, each `[lock] accept [unlock] →
/// serve → close`. The main thread waits for the stop signal and raises the stop word.
fn prethread(w: &Worker<'_>, listener: &Socket, lock: &AcceptLock) {
    std::thread::scope(|scope| {
        for i in 0..w.tally.workers {
            let spawned = std::thread::Builder::new()
                .stack_size(THREAD_STACK)
                .spawn_scoped(scope, move || w.work_locked(listener, i, lock));
            if spawned.is_err() {
                break;
            }
        }
        while !w.stopped() {
            std::thread::sleep(WATCH);
        }
        w.tally.set_stop();
    });
}

/// prethread-handoff: the main thread `accept`s and puts the connection in a queue under a
/// mutex, signalling a condition variable; `--workers` threads wait on it, take one, serve.
fn prethread_handoff(w: &Worker<'_>, listener: &Socket) {
    let queue: Mutex<VecDeque<Socket>> = Mutex::new(VecDeque::new());
    let ready = Condvar::new();
    std::thread::scope(|scope| {
        for i in 0..w.tally.workers {
            let (queue, ready) = (&queue, &ready);
            let spawned = std::thread::Builder::new()
                .stack_size(THREAD_STACK)
                .spawn_scoped(scope, move || {
                    let mut buf = vec![0u8; READ_BUF];
                    while !w.stopped() {
                        let conn = {
                            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                            loop {
                                if let Some(c) = q.pop_front() {
                                    break Some(c);
                                }
                                if w.stopped() {
                                    break None;
                                }
                                q = ready
                                    .wait_timeout(q, TICK)
                                    .unwrap_or_else(|p| p.into_inner())
                                    .0;
                            }
                        };
                        if let Some(c) = conn {
                            w.serve(i, &c, &mut buf);
                        }
                    }
                });
            if spawned.is_err() {
                break;
            }
        }
        while !w.stopped() {
            match w.accept(listener) {
                Accepted::Conn(c) => {
                    queue.lock().unwrap_or_else(|p| p.into_inner()).push_back(c);
                    ready.notify_one();
                }
                Accepted::Nothing => {}
                Accepted::Backoff => std::thread::sleep(ACCEPT_BACKOFF),
            }
        }
        w.tally.set_stop();
        ready.notify_all();
    });
    // Connections accepted but never taken close with the queue.
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[test]
    fn accepted_sockets_inherit_the_listeners_timeouts() {
        let l = Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        l.listen(8).unwrap();
        l.set_read_timeout(Some(Duration::from_millis(70))).unwrap();
        l.set_write_timeout(Some(Duration::from_millis(90)))
            .unwrap();
        let addr = l.local_addr().unwrap().as_socket().unwrap();
        let _c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        let r = s.read_timeout().unwrap().unwrap();
        let w = s.write_timeout().unwrap().unwrap();
        assert!(
            r >= Duration::from_millis(60) && r <= Duration::from_millis(80),
            "{r:?}"
        );
        assert!(
            w >= Duration::from_millis(80) && w <= Duration::from_millis(100),
            "{w:?}"
        );
    }

    #[test]
    fn tally_layout_keeps_workers_apart() {
        let t = Tally::new(3).unwrap();
        t.connections(2).fetch_add(5, Ordering::Relaxed);
        t.requests(0).fetch_add(7, Ordering::Relaxed);
        t.accept_error();
        assert!(!t.stop_set());
        t.set_stop();
        assert!(t.stop_set());
        assert_eq!(t.accept_errors(), 1);
        let w = t.workers();
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].requests, 7);
        assert_eq!(w[2].connections, 5);
        assert_eq!(w[1], WorkerCount::default());
    }

    /// A thread design served in-process: a stevens client gets its bytes, stop ends it.
    #[test]
    fn prethread_accept_serves_and_stops() {
        use std::sync::atomic::AtomicBool;
        static STOP: AtomicBool = AtomicBool::new(false);
        let cfg = super::super::ServeConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            design: Design::PrethreadAccept,
            workers: 2,
            handler: Handler::Stevens,
            body: 100,
            backlog: 16,
            opts: "baseline".parse().unwrap(),
            idle_timeout: Some(Duration::from_secs(5)),
            tls: None,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            super::super::serve(&cfg, &STOP, &mut |a| tx.send(a).unwrap())
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for _ in 0..3 {
            c.write_all(b"4000\n").unwrap();
            let mut got = vec![0u8; 4000];
            c.read_exact(&mut got).unwrap();
            assert!(got.iter().all(u8::is_ascii_lowercase));
        }
        // Pipelined requests in one segment: answered in order.
        c.write_all(b"10\n20\n30\n").unwrap();
        let mut got = vec![0u8; 60];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got[..10], b"abcdefghij");
        assert_eq!(&got[10..30], b"abcdefghijklmnopqrst");
        drop(c);
        STOP.store(true, Ordering::SeqCst);
        let r = t.join().unwrap().unwrap();
        assert_eq!(r.connections(), 1);
        assert_eq!(r.requests(), 6);
        assert_eq!(r.workers.len(), 2);
    }
}
