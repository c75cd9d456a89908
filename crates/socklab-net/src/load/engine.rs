//! The per-thread event loops of the load generator.
//!
//! Each thread owns a share of the connections (connection `c` goes to thread `c % threads`),
//! one edge-triggered epoll set, one read buffer, a min-heap of wake-up times (open-loop send
//! times and back-offs), and its own histograms. A connection is a small state machine:
//! `Idle → (Connecting →) Writing → Reading → Idle`, restarted at once in closed loop or at its
//! next intended send time in open loop. Nothing is allocated per request: request bytes are
//! formatted once, the heap and buffers are sized up front, replies are parsed as they stream.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use socklab_sys::epoll::{self, Epoll, Event, Events};
use socklab_sys::errno;
use socklab_sys::sockopt::{self as rawopt, IntOpt};
use socklab_sys::usage::{getrusage, Who};

use super::http::{self, ReplyParser};
use super::merge::LoadHistograms;
use super::metrics::record;
use super::schedule::Schedule;
use super::series::{LiveLoad, Merger, ThreadSeries};
use super::thread_out::{assemble, end_of_run, ThreadOut};
use super::{LoadConfig, LoadProtocol, LoadReport};
use crate::NetError;

/// Largest echo request.
pub const ECHO_MAX: usize = 1 << 20;

/// Bytes read per `read()` call.
const READ_BUF: usize = 64 << 10;
/// How often in-flight requests are checked against their timeout.
const TIMEOUT_SCAN_NS: u64 = 10_000_000;
/// Closed loop: a connection whose connect failed waits this long before its next attempt, so
/// a refusing server does not turn the generator into a busy loop.
const CONNECT_BACKOFF_NS: u64 = 10_000_000;
/// Longest single wait in the event loop (the stop flag is polled at least this often).
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Longest wait, after the end of a run, for the replies in flight.
const DRAIN_MAX: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// No request in flight; the next one starts when its time comes.
    Idle,
    /// Waiting on the heap (open-loop send time or back-off).
    Sleeping,
    Connecting,
    Writing,
    Reading,
    /// Quota used up.
    Done,
}

#[derive(Debug, Clone, Copy)]
enum Fail {
    Connect,
    Read,
    Write,
    Timeout,
    BadReply,
}

struct Conn {
    sock: Option<Socket>,
    /// Bumped on every new socket; the high half of the epoll token.
    generation: u32,
    sched: Schedule,
    /// Requests started so far on this slot.
    k: u64,
    st: St,
    written: usize,
    got: usize,
    parser: ReplyParser,
    /// Open loop: when the current request was meant to leave (ns since start).
    intended: u64,
    /// When the current request started (its connect, or its first write).
    start: u64,
    connect_start: u64,
    write_start: u64,
    first_byte: bool,
    /// Sleeping until its open-loop send time (not a back-off).
    on_timer: bool,
}

/// What every thread shares.
struct Shared<'a> {
    cfg: &'a LoadConfig,
    stop: &'a AtomicBool,
    /// Set by a thread that must end the run (ports exhausted): the others stop too.
    abort: AtomicBool,
    abort_reason: Mutex<Option<String>>,
    request: Vec<u8>,
    sources: Vec<Ipv4Addr>,
    start: Instant,
    end_ns: u64,
    /// When the first thread saw the end of the run (ns since start; `u64::MAX`: not yet).
    ended_ns: AtomicU64,
    /// Where the threads' intervals meet (`--interval`).
    series: Option<Merger>,
}

impl Shared<'_> {
    fn abort(&self, reason: String) {
        let mut r = self.abort_reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason);
        }
        self.abort.store(true, Ordering::Relaxed);
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The request bytes of a run.
pub(super) fn request_bytes(cfg: &LoadConfig) -> Vec<u8> {
    match cfg.protocol {
        LoadProtocol::Stevens => format!("{}\n", cfg.bytes).into_bytes(),
        LoadProtocol::Echo => (0..cfg.bytes).map(|i| b'a' + (i % 26) as u8).collect(),
        LoadProtocol::Http | LoadProtocol::Https => {
            let host = cfg.host.clone().unwrap_or_else(|| cfg.to.to_string());
            http::request(&cfg.path, &host, cfg.new_connection_per_request)
        }
    }
}

pub(super) fn run(
    cfg: &LoadConfig,
    stop: &AtomicBool,
    live: Option<LiveLoad>,
) -> Result<(LoadReport, LoadHistograms), NetError> {
    let threads = cfg.threads.min(cfg.connections).max(1);
    let shared = Shared {
        cfg,
        stop,
        abort: AtomicBool::new(false),
        abort_reason: Mutex::new(None),
        request: request_bytes(cfg),
        sources: cfg.source_ips(),
        start: Instant::now(),
        end_ns: cfg.duration.map_or(u64::MAX, |d| {
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
        }),
        ended_ns: AtomicU64::new(u64::MAX),
        series: cfg.interval.map(|i| Merger::new(i, threads, live)),
    };
    // Every epoll set is made before any thread starts, so a setup failure is an error, not a
    // half-run.
    let mut polls = Vec::with_capacity(threads);
    for _ in 0..threads {
        polls.push(Epoll::new().map_err(|e| NetError::io("epoll_create1", e))?);
    }
    let barrier = Barrier::new(threads);
    let outs: Vec<ThreadOut> = std::thread::scope(|s| {
        let handles: Vec<_> = polls
            .into_iter()
            .enumerate()
            .map(|(t, ep)| {
                let shared = &shared;
                let barrier = &barrier;
                std::thread::Builder::new()
                    .name(format!("load-{t}"))
                    .spawn_scoped(s, move || {
                        barrier.wait();
                        worker(shared, t, threads, ep)
                    })
            })
            .collect();
        let mut outs = Vec::new();
        for h in handles {
            match h {
                Ok(h) => match h.join() {
                    Ok(o) => outs.push(o),
                    Err(p) => std::panic::resume_unwind(p),
                },
                Err(e) => shared.abort(format!("cannot start a load thread: {e}")),
            }
        }
        outs
    });
    // The run's wall time ends where the first thread saw its end (the drain is not part of
    // it), or when the last thread finished its quota.
    let elapsed = match shared.ended_ns.load(Ordering::Relaxed) {
        u64::MAX => shared.start.elapsed(),
        ns => Duration::from_nanos(ns),
    };
    let (wall, aborted) = end_of_run(cfg.duration, elapsed, &shared.abort_reason, stop);
    let (mut report, h) = assemble(cfg, outs, wall, aborted);
    if let Some(m) = &shared.series {
        report.intervals = m.finish(wall);
    }
    Ok((report, h))
}

/// The first send on a non-blocking connect in progress: `Some(bytes sent)`, or `None` while
/// the handshake is still under way (`EAGAIN`: the writable event comes when it is done). An
/// error is the connect's (a refusal arrives here as `ECONNREFUSED`).
fn send_early(sock: &Socket, req: &[u8]) -> io::Result<Option<usize>> {
    match sock.send_with_flags(req, socklab_sys::msg::MSG_NOSIGNAL) {
        Ok(n) => Ok(Some(n)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// True for the `connect()`/`bind()` errors of an exhausted 4-tuple space.
fn is_port_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(errno::EADDRNOTAVAIL | errno::EADDRINUSE)
    )
}

fn exhaustion_message(cfg: &LoadConfig, e: &io::Error) -> String {
    format!(
        "connect to {} failed: {e}: the client ran out of ephemeral ports (connections in TIME_WAIT hold them); use more source addresses (`source_addrs` {}, loopback targets), a lower `rate` or fewer `connections`, keep-alive instead of `new_connection`, or sysctl net.ipv4.tcp_tw_reuse=1 / a wider net.ipv4.ip_local_port_range",
        cfg.to,
        (cfg.source_addrs.max(1) * 4).min(256)
    )
}

struct Worker<'a> {
    sh: &'a Shared<'a>,
    ep: Epoll,
    conns: Vec<Conn>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    out: ThreadOut,
    series: ThreadSeries,
    next_source: usize,
    active: usize,
    draining: bool,
    drain_until: u64,
}

fn worker(sh: &Shared<'_>, t: usize, threads: usize, ep: Epoll) -> ThreadOut {
    let cfg = sh.cfg;
    let usage0 = getrusage(Who::Thread);
    let wall0 = Instant::now();
    let n = cfg.connections as u64;
    let conns: Vec<Conn> = (t..cfg.connections)
        .step_by(threads)
        .map(|c| Conn {
            sock: None,
            generation: 0,
            sched: Schedule::new(c as u64, n, cfg.loops, cfg.requests, cfg.rate),
            k: 0,
            st: St::Idle,
            written: 0,
            got: 0,
            parser: ReplyParser::new(),
            intended: 0,
            start: 0,
            connect_start: 0,
            write_start: 0,
            first_byte: false,
            on_timer: false,
        })
        .collect();
    let mut w = Worker {
        sh,
        ep,
        heap: BinaryHeap::with_capacity(conns.len() + 1),
        active: conns.len(),
        conns,
        out: ThreadOut::new(),
        series: ThreadSeries::new(sh.series.as_ref(), t, sh.end_ns),
        next_source: t,
        draining: false,
        drain_until: 0,
    };
    w.run();
    w.series.finish(sh.series.as_ref());
    let used = getrusage(Who::Thread).since(&usage0);
    w.out.cpu_user = used.user;
    w.out.cpu_sys = used.sys;
    w.out.wall = wall0.elapsed();
    // Sockets close here, after the clock stopped.
    w.out
}

impl Worker<'_> {
    fn run(&mut self) {
        let mut events = Events::with_capacity(self.conns.len().clamp(16, 1024));
        let mut buf = vec![0u8; READ_BUF];
        let now = self.sh.now();
        for i in 0..self.conns.len() {
            self.next_request(i, now);
        }
        let mut next_scan = now + TIMEOUT_SCAN_NS;
        loop {
            let now = self.sh.now();
            if self.active == 0 {
                break;
            }
            if !self.draining
                && (now >= self.sh.end_ns
                    || self.sh.stop.load(Ordering::Relaxed)
                    || self.sh.abort.load(Ordering::Relaxed))
            {
                self.start_drain(now);
            }
            if self.draining && (self.in_flight() == 0 || now >= self.drain_until) {
                break;
            }
            if !self.draining {
                self.series.roll(now, self.sh.series.as_ref());
            }
            // Wake-ups that are due.
            while let Some(&Reverse((at, i))) = self.heap.peek() {
                if at > now {
                    break;
                }
                self.heap.pop();
                let c = &mut self.conns[i];
                if c.st == St::Sleeping {
                    c.st = St::Idle;
                    let now = self.sh.now();
                    if c.on_timer {
                        // Woken for its own send time: how late the generator was.
                        c.on_timer = false;
                        record(&mut self.out.timer_lag, now.saturating_sub(at));
                    }
                    self.next_request(i, now);
                }
            }
            if now >= next_scan {
                self.scan_timeouts(now);
                next_scan = now + TIMEOUT_SCAN_NS;
            }
            let end = if self.draining {
                self.drain_until
            } else {
                self.sh.end_ns
            };
            let mut wake = next_scan.min(end).min(self.series.next_ns());
            if let Some(&Reverse((at, _))) = self.heap.peek() {
                wake = wake.min(at);
            }
            let now = self.sh.now();
            let timeout = Duration::from_nanos(wake.saturating_sub(now)).min(MAX_WAIT);
            let n = match self.ep.wait(&mut events, Some(timeout)) {
                Ok(n) => n,
                Err(e) => {
                    self.sh.abort(format!("epoll_wait failed: {e}"));
                    break;
                }
            };
            if n == 0 {
                continue;
            }
            let busy_start = self.sh.now();
            for ev in events.iter() {
                let i = (ev.token & 0xffff_ffff) as usize;
                let generation = (ev.token >> 32) as u32;
                if i >= self.conns.len() || self.conns[i].generation != generation {
                    continue;
                }
                self.on_event(i, ev, &mut buf);
            }
            record(&mut self.out.loop_busy, self.sh.now() - busy_start);
        }
    }

    /// The slot's next request: now, later (open loop), or none (quota used up).
    fn next_request(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        if self.draining {
            c.st = St::Done;
            c.sock = None;
            return;
        }
        if c.k >= c.sched.quota {
            c.st = St::Done;
            c.sock = None;
            self.active -= 1;
            return;
        }
        if let Some(at) = c.sched.intended_ns(c.k) {
            c.intended = at;
            if at > now {
                c.st = St::Sleeping;
                c.on_timer = true;
                self.heap.push(Reverse((at, i)));
                return;
            }
        }
        self.begin(i, now);
    }

    /// Starts the slot's current request now.
    fn begin(&mut self, i: usize, now: u64) {
        let open = self.sh.cfg.rate.is_some();
        {
            let c = &mut self.conns[i];
            if open {
                record(&mut self.out.send_lag, now.saturating_sub(c.intended));
            }
            c.k += 1;
            c.start = now;
            c.written = 0;
            c.got = 0;
            c.first_byte = false;
            c.parser.reset();
        }
        if self.conns[i].sock.is_some() {
            self.conns[i].write_start = now;
            self.write(i);
        } else {
            self.connect(i, now);
        }
    }

    fn connect(&mut self, i: usize, now: u64) {
        let sh = self.sh;
        let to = sh.cfg.to;
        let domain = Domain::for_address(to);
        let sock = match Socket::new(domain, Type::STREAM.nonblocking(), Some(Protocol::TCP)) {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors and the like: a connect failure, and a pause.
                let _ = e;
                self.fail(i, Fail::Connect, now);
                return;
            }
        };
        if !sh.sources.is_empty() {
            let src = sh.sources[self.next_source % sh.sources.len()];
            self.next_source = self.next_source.wrapping_add(1);
            let bound = rawopt::set(sock.as_fd(), IntOpt::IpBindAddressNoPort, 1)
                .and_then(|()| sock.bind(&SockAddr::from(SocketAddrV4::new(src, 0))));
            if let Err(e) = bound {
                if is_port_exhaustion(&e) {
                    sh.abort(exhaustion_message(sh.cfg, &e));
                } else {
                    sh.abort(format!("cannot bind a client socket to {src}: {e}"));
                }
                return;
            }
        }
        let c = &mut self.conns[i];
        c.generation = c.generation.wrapping_add(1);
        c.connect_start = now;
        match sock.connect(&SockAddr::from(to)) {
            Err(e) if e.raw_os_error() != Some(errno::EINPROGRESS) => {
                if is_port_exhaustion(&e) {
                    sh.abort(exhaustion_message(sh.cfg, &e));
                } else {
                    self.fail(i, Fail::Connect, now);
                }
                return;
            }
            _ => {
                c.sock = Some(sock);
                c.st = St::Connecting;
                self.early_write(i);
            }
        }
        // Watched once the request is out: a new connection per request whose request went
        // out whole waits only for its reply (no writable wake-up for the handshake).
        let c = &mut self.conns[i];
        let Some(sock) = c.sock.as_ref() else { return };
        let token = (u64::from(c.generation) << 32) | i as u64;
        let out = if c.st == St::Reading && sh.cfg.new_connection_per_request {
            0
        } else {
            epoll::OUT
        };
        if let Err(e) = self.ep.add(
            sock.as_fd(),
            epoll::IN | out | epoll::RDHUP | epoll::ET,
            token,
        ) {
            sh.abort(format!("epoll_ctl failed: {e}"));
            c.sock = None;
        }
    }

    fn connected(&mut self, i: usize) {
        let now = self.sh.now();
        let c = &mut self.conns[i];
        if self.draining {
            // Nothing sent yet: closing now is a clean end of file for the server.
            c.st = St::Done;
            c.sock = None;
            return;
        }
        record(&mut self.out.connect, now - c.connect_start);
        self.out.connections_opened += 1;
        c.write_start = now;
        self.write(i);
    }

    /// Sends the request on a connect still in progress: on loopback (and a near peer) the
    /// handshake is done inside `connect()`, so this saves a `getsockopt(SO_ERROR)` and an epoll
    /// round per connection (the wake-up that made stevens mode slower than `client.c`'s blocking
    /// connect). Not connected yet (`EAGAIN`): the writable event takes over, as before.
    fn early_write(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(sock) = c.sock.as_ref() else { return };
        match send_early(sock, &self.sh.request) {
            Ok(Some(n)) => {
                let now = self.sh.now();
                record(&mut self.out.connect, now - c.connect_start);
                self.out.connections_opened += 1;
                c.write_start = now;
                c.written = n;
                self.out.bytes_written += n as u64;
                self.write(i);
            }
            Ok(None) => {}
            Err(e) if is_port_exhaustion(&e) => self.sh.abort(exhaustion_message(self.sh.cfg, &e)),
            Err(_) => {
                let now = self.sh.now();
                self.fail(i, Fail::Connect, now);
            }
        }
    }

    fn write(&mut self, i: usize) {
        let req = &self.sh.request;
        let c = &mut self.conns[i];
        c.st = St::Writing;
        let Some(sock) = c.sock.as_ref() else { return };
        while c.written < req.len() {
            match sock.send_with_flags(&req[c.written..], socklab_sys::msg::MSG_NOSIGNAL) {
                Ok(n) => {
                    c.written += n;
                    self.out.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    let now = self.sh.now();
                    self.fail(i, Fail::Write, now);
                    return;
                }
            }
        }
        c.st = St::Reading;
    }

    fn on_event(&mut self, i: usize, ev: Event, buf: &mut [u8]) {
        let readable = ev.readable() || ev.error();
        let writable = ev.writable() || ev.error();
        match self.conns[i].st {
            St::Connecting if writable => {
                let err = self.conns[i].sock.as_ref().map(|s| s.take_error());
                match err {
                    Some(Ok(None)) => self.connected(i),
                    Some(Ok(Some(e)) | Err(e)) if is_port_exhaustion(&e) => {
                        self.sh.abort(exhaustion_message(self.sh.cfg, &e))
                    }
                    _ => {
                        let now = self.sh.now();
                        self.fail(i, Fail::Connect, now);
                    }
                }
            }
            St::Writing if writable => self.write(i),
            St::Reading if readable => self.read(i, buf, ev.hangup() || ev.error()),
            St::Idle | St::Sleeping if readable => {
                // A kept-alive connection between requests. The event may be stale (bytes of
                // the last reply that were read with an earlier event): nothing to read then.
                // Otherwise the server closed it (idle timeout) or sent something unasked: drop
                // it; the next request reconnects.
                let c = &mut self.conns[i];
                let stale = c.sock.as_ref().is_some_and(
                    |s| matches!((&*s).read(buf), Err(e) if e.kind() == io::ErrorKind::WouldBlock),
                );
                if !stale {
                    c.sock = None;
                }
            }
            _ => {}
        }
    }

    /// Reads what is there. With edge triggering a short read means the queue is empty and the
    /// next arrival brings a new event — unless the peer already closed (`drain`): then read
    /// on to the end of file.
    fn read(&mut self, i: usize, buf: &mut [u8], drain: bool) {
        let proto = self.sh.cfg.protocol;
        let want = self.sh.cfg.bytes;
        loop {
            let c = &mut self.conns[i];
            let Some(sock) = c.sock.as_ref() else { return };
            let n = match (&*sock).read(buf) {
                Ok(0) => {
                    let now = self.sh.now();
                    self.fail(i, Fail::Read, now);
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    let now = self.sh.now();
                    self.fail(i, Fail::Read, now);
                    return;
                }
            };
            self.out.bytes_read += n as u64;
            if !c.first_byte {
                c.first_byte = true;
                let now = self.sh.now();
                record(&mut self.out.first_byte, now - c.write_start);
            }
            // Ok(true): complete; Ok(false): more to come; Err: bad reply.
            let verdict = match proto {
                LoadProtocol::Stevens | LoadProtocol::Echo => {
                    c.got += n;
                    if c.got > want {
                        Err(())
                    } else {
                        Ok(c.got == want)
                    }
                }
                LoadProtocol::Http | LoadProtocol::Https => match c.parser.feed(&buf[..n]) {
                    Ok(Some(used)) if used == n => Ok(true),
                    Ok(Some(_)) | Err(_) => Err(()),
                    Ok(None) => Ok(false),
                },
            };
            match verdict {
                Ok(true) => {
                    self.complete(i);
                    return;
                }
                Ok(false) => {}
                Err(()) => {
                    let now = self.sh.now();
                    self.fail(i, Fail::BadReply, now);
                    return;
                }
            }
            if n < buf.len() && !drain {
                // A short read emptied the receive queue: the next arrival is a new edge.
                return;
            }
        }
    }

    fn complete(&mut self, i: usize) {
        let now = self.sh.now();
        if self.draining {
            // After the end: the reply is read in full (so the close is clean), not counted.
            let c = &mut self.conns[i];
            c.st = St::Done;
            c.sock = None;
            return;
        }
        // A reply completed past the timeout (between two scans) timed out, as the scan would
        // have said: the timeout bounds the whole request, not when it is looked at.
        let limit = u64::try_from(self.sh.cfg.timeout.as_nanos()).unwrap_or(u64::MAX);
        if now.saturating_sub(self.conns[i].start) >= limit {
            self.fail(i, Fail::Timeout, now);
            return;
        }
        let open = self.sh.cfg.rate.is_some();
        let per_request = self.sh.cfg.new_connection_per_request;
        let c = &mut self.conns[i];
        record(&mut self.out.response, now - c.start);
        if open {
            record(&mut self.out.corrected, now.saturating_sub(c.intended));
        }
        let latency = if open {
            now.saturating_sub(c.intended)
        } else {
            now - c.start
        };
        self.series.completed(now, latency, self.sh.series.as_ref());
        self.out.completed += 1;
        let keep =
            !per_request && (self.sh.cfg.protocol != LoadProtocol::Http || c.parser.keep_alive());
        if !keep {
            // The client closes first (stevens): the whole reply is in, so this is a FIN,
            // never a reset.
            c.sock = None;
        }
        c.st = St::Idle;
        self.next_request(i, now);
    }

    fn fail(&mut self, i: usize, kind: Fail, now: u64) {
        if self.draining {
            let c = &mut self.conns[i];
            c.st = St::Done;
            c.sock = None;
            return;
        }
        self.series.failed(now, self.sh.series.as_ref());
        let f = &mut self.out.failed;
        match kind {
            Fail::Connect => f.connect += 1,
            Fail::Read => f.read += 1,
            Fail::Write => f.write += 1,
            Fail::Timeout => f.timeout += 1,
            Fail::BadReply => f.bad_reply += 1,
        }
        let c = &mut self.conns[i];
        c.sock = None;
        // The next request starts from the event loop, not from here: failures that happen
        // at once (a refused connect) cannot recurse. In closed loop a failed connect also
        // pauses the slot, so a refusing server does not make the generator spin.
        let back_off = matches!(kind, Fail::Connect) && self.sh.cfg.rate.is_none();
        c.st = St::Sleeping;
        c.on_timer = false;
        self.heap.push(Reverse((
            now + if back_off { CONNECT_BACKOFF_NS } else { 0 },
            i,
        )));
    }

    /// The run is over (duration, Ctrl-C, abort): start no more requests, but let those in
    /// flight finish — reading a reply to its end before closing, so a classic server never
    /// sees a reset — for at most [`DRAIN_MAX`] (or the request timeout, if shorter). What
    /// happens after the end is not counted.
    fn start_drain(&mut self, now: u64) {
        self.draining = true;
        self.sh.ended_ns.fetch_min(now, Ordering::Relaxed);
        let limit = u64::try_from(self.sh.cfg.timeout.min(DRAIN_MAX).as_nanos()).unwrap_or(0);
        self.drain_until = now.saturating_add(limit);
        for c in &mut self.conns {
            if !matches!(c.st, St::Connecting | St::Writing | St::Reading) {
                c.st = St::Done;
                c.sock = None;
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.conns
            .iter()
            .filter(|c| matches!(c.st, St::Connecting | St::Writing | St::Reading))
            .count()
    }

    fn scan_timeouts(&mut self, now: u64) {
        let limit = u64::try_from(self.sh.cfg.timeout.as_nanos()).unwrap_or(u64::MAX);
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if matches!(c.st, St::Connecting | St::Writing | St::Reading)
                && now.saturating_sub(c.start) >= limit
            {
                self.fail(i, Fail::Timeout, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    #[test]
    fn request_bytes_per_protocol() {
        let to: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let mut cfg = LoadConfig::new(to, LoadProtocol::Stevens);
        cfg.bytes = 4000;
        assert_eq!(request_bytes(&cfg), b"4000\n");
        cfg.protocol = LoadProtocol::Echo;
        cfg.bytes = 30;
        let r = request_bytes(&cfg);
        assert_eq!(r.len(), 30);
        assert_eq!(&r[..3], b"abc");
        cfg.protocol = LoadProtocol::Http;
        cfg.new_connection_per_request = false;
        cfg.path = "/index.html".into();
        assert_eq!(
            request_bytes(&cfg),
            b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
        cfg.host = Some("example".into());
        cfg.new_connection_per_request = true;
        assert_eq!(
            request_bytes(&cfg),
            b"GET /index.html HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n"
        );
    }

    /// Issue 29 part 4: the request leaves inside the connect's turn on loopback, with no
    /// epoll round between `connect()` and `send()` (before, stevens mode waited for the
    /// writable event and asked `SO_ERROR` first: two syscalls and a wake-up per request).
    #[test]
    fn the_request_goes_out_on_a_loopback_connect_in_progress() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let sock = Socket::new(Domain::IPV4, Type::STREAM.nonblocking(), None).unwrap();
        match sock.connect(&SockAddr::from(to)) {
            Ok(()) => {}
            Err(e) => assert_eq!(e.raw_os_error(), Some(errno::EINPROGRESS), "{e}"),
        }
        assert_eq!(send_early(&sock, b"4000\n").unwrap(), Some(5));
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = [0u8; 5];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"4000\n");
    }

    /// A refused connect seen by the early send is a connect failure, not a write failure.
    #[test]
    fn a_refused_connect_counts_as_a_connect_failure() {
        let to = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let mut cfg = LoadConfig::new(to, LoadProtocol::Stevens);
        cfg.connections = 2;
        cfg.threads = 1;
        cfg.bytes = 100;
        cfg.duration = Some(Duration::from_millis(300));
        let r = super::super::run(&cfg, &AtomicBool::new(false)).unwrap();
        assert!(r.failed.connect > 0, "{:?}", r.failed);
        assert_eq!((r.failed.write, r.failed.read, r.completed), (0, 0, 0));
    }

    #[test]
    fn exhaustion_is_recognised_and_explained() {
        let e = io::Error::from_raw_os_error(errno::EADDRNOTAVAIL);
        assert!(is_port_exhaustion(&e));
        assert!(!is_port_exhaustion(&io::Error::from_raw_os_error(
            errno::ECONNREFUSED
        )));
        let cfg = LoadConfig::new("127.0.0.1:1".parse().unwrap(), LoadProtocol::Stevens);
        let m = exhaustion_message(&cfg, &e);
        assert!(
            m.contains("`source_addrs`") && m.contains("tcp_tw_reuse"),
            "{m}"
        );
        assert!(!m.contains('\n'));
    }
}
