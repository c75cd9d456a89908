//! One stream of a bulk test, on its own thread: pin the thread, connect, hand-shake, wait at
//! the gate with every other stream, move the bytes (send up, or read down), report.

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use socklab_sys::io as sysio;
use socklab_sys::tcp::{tcp_info, TcpInfo};
use socklab_sys::usage::{getrusage, Usage, Who};
use socklab_sys::zerocopy::Completions;

use super::bounds::{read_line, Bounds, Halt};
use super::{BulkConfig, Limit, READY_WAIT, RESULT_WAIT, TICK};
use crate::aligned::AlignedBuf;
use crate::partial::write_all_waiting;
use crate::payload::Payload;
use crate::protocol::multi::{Join, JoinReady};
use crate::protocol::{Hello, Ready, SinkResult};
use crate::send::{read_back, SendApplied, SendOpts, Sender};
use crate::series::{Direction, Ender};
use crate::sockopt::Side;
use crate::tlsio::TlsStream;
use crate::NetError;

/// Which protocol the streams speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    /// `BULK/1`: one up stream, its RESULT on its own connection.
    V1,
    /// `BULK/2`: stream of test `test`, its RESULT on the control connection.
    V2 { test: u64 },
    /// iperf3's (`bulk --to iperf3://`): the main thread connected the stream and sent the
    /// cookie ([`Shared::preconnected`]); an up stream ends when the server's kernel has
    /// acknowledged its last byte (iperf3 reports at `TEST_END`, no end of stream).
    Iperf3,
}

/// The streams of an iperf3 test, connected in order by the main thread (iperf3 numbers
/// them by the order they connect): each thread takes its own.
pub(crate) type Preconnected = Mutex<Vec<Option<Connected>>>;

/// Where every stream waits after its handshake, until the test starts (or is given up).
#[derive(Debug, Default)]
pub(crate) struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
enum GateState {
    #[default]
    Closed,
    Open(Instant, Option<Ender>),
    Abandoned,
}

impl Gate {
    /// Starts every stream: the test's clock started at `t0`; the last stream to finish ends
    /// the time series with `ender`.
    pub fn open(&self, t0: Instant, ender: Option<Ender>) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = GateState::Open(t0, ender);
        self.cv.notify_all();
    }

    /// The test will not start: every waiting stream returns.
    pub fn abandon(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(*st, GateState::Closed) {
            *st = GateState::Abandoned;
        }
        self.cv.notify_all();
    }

    /// Waits for the start (waking every tick to look at `halt`); `None` when abandoned.
    fn wait(&self, halt: &AtomicBool) -> Option<(Instant, Option<Ender>)> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match &*st {
                GateState::Open(t0, e) => return Some((*t0, e.clone())),
                GateState::Abandoned => return None,
                GateState::Closed if halt.load(Ordering::Relaxed) => return None,
                GateState::Closed => {
                    st = self
                        .cv
                        .wait_timeout(st, TICK)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }
}

/// What every stream thread of a test shares.
pub(crate) struct Shared<'a> {
    pub cfg: &'a BulkConfig,
    /// The round every sending end sends (and every receiving end verifies against).
    pub payload: &'a Payload,
    /// The file sendfile sends the round from (one per test; `None` for other strategies).
    pub source: Option<&'a Arc<std::fs::File>>,
    pub gate: &'a Gate,
    /// Raised when a stream failed: the others give up.
    pub abort: &'a AtomicBool,
    /// Raised on Ctrl-C (the main thread watches `stop()`).
    pub halt: &'a AtomicBool,
    /// Streams not finished yet: the last one ends the time series.
    pub remaining: &'a AtomicU32,
    pub proto: Proto,
    /// Whether the time series is sampled (then each stream publishes its byte count).
    pub sampling: bool,
    /// [`Proto::Iperf3`]: the connected streams, by index.
    pub preconnected: Option<&'a Preconnected>,
    /// TLS on every stream (`tls`): the client configuration.
    pub tls: Option<&'a Arc<rustls::ClientConfig>>,
}

/// A stream is ready to start: what the sampler needs of it.
#[derive(Debug)]
pub(crate) struct Setup {
    /// A duplicate of its socket and its byte counter (when sampling).
    pub probe: Option<(OwnedFd, Arc<AtomicU64>)>,
}

/// The events of a test's threads, for the main thread.
#[derive(Debug)]
pub(crate) enum Event {
    /// Stream `i` is connected and waits at the gate.
    Ready(u32, Setup),
    /// Stream `i` ended (or failed).
    Done(u32, Box<Result<Done, NetError>>),
    /// The control connection's reader (`BULK/2`): a result line, or its failure.
    Control(Result<crate::protocol::multi::StreamLine, NetError>),
}

/// What the client's end of one stream measured.
#[derive(Debug)]
pub(crate) struct Done {
    /// Bytes sent (up) or received (down) here.
    pub bytes: u64,
    /// Rounds sent (up).
    pub rounds: u64,
    /// Send calls (up).
    pub writes: u64,
    /// Reads that returned data (down).
    pub reads: u64,
    /// When its receiver had read every byte.
    pub end: Instant,
    /// When the last send call returned (up).
    pub send_end: Option<Instant>,
    /// This thread's CPU from the start to the end.
    pub cpu: Usage,
    /// `TCP_INFO` of the client's socket at the end.
    pub tcp: TcpInfo,
    /// What the client's sending socket runs with (up).
    pub applied: SendApplied,
    /// `SO_RCVBUF` of the client's socket.
    pub rcvbuf: usize,
    /// The CPU the thread was pinned to, read back.
    pub cpu_pinned: Option<usize>,
    /// The sink's RESULT (`BULK/1`) and its READY's `rcvbuf`.
    pub v1: Option<(SinkResult, usize)>,
    /// The sink's READY of this data connection (`BULK/2`).
    pub joined: Option<JoinReady>,
    /// Zerocopy completions (up, zerocopy).
    pub zerocopy: Option<Completions>,
    /// BLAKE3 of what was received (down, with verify).
    pub hash: Option<blake3::Hash>,
    /// The client's socket options, read back after connect (`opts`).
    pub client_opts: Vec<(String, String)>,
    /// Its TLS handshake (`tls`).
    pub tls: Option<super::tls::TlsDone>,
}

impl Default for Done {
    fn default() -> Done {
        Done {
            bytes: 0,
            rounds: 0,
            writes: 0,
            reads: 0,
            end: Instant::now(),
            send_end: None,
            cpu: Usage::default(),
            tcp: TcpInfo::default(),
            applied: SendApplied::default(),
            rcvbuf: 0,
            cpu_pinned: None,
            v1: None,
            joined: None,
            zerocopy: None,
            hash: None,
            client_opts: Vec::new(),
            tls: None,
        }
    }
}

/// Runs stream `index` and reports its end on `events` (its start too, as [`Event::Ready`]).
pub(crate) fn spawned(sh: &Shared<'_>, index: u32, events: &mpsc::Sender<Event>) {
    let r = run(sh, index, events);
    let failed = r.is_err();
    // Reported before the others are told to give up, so the main thread sees this stream's
    // error before any "another stream failed".
    let _ = events.send(Event::Done(index, Box::new(r)));
    if failed {
        sh.abort.store(true, Ordering::SeqCst);
    }
}

/// Pins the calling thread to the stream's CPU, read back.
fn pin(cfg: &BulkConfig, index: u32) -> Result<Option<usize>, NetError> {
    let Some(list) = &cfg.affinity else {
        return Ok(None);
    };
    let Some(cpu) = list.pick(index as usize) else {
        return Ok(None);
    };
    let allowed = socklab_sys::sched::thread_affinity().unwrap_or_default();
    socklab_sys::sched::set_thread_affinity(&[cpu]).map_err(|e| {
        NetError::Invalid(format!(
            "`affinity` {list}: cannot run stream {index} on CPU {cpu} ({e}); this process may use CPUs {}",
            crate::cpus::CpuList::from_vec(allowed)
        ))
    })?;
    Ok(socklab_sys::sched::thread_affinity()
        .ok()
        .filter(|v| v.len() == 1)
        .map(|v| v[0]))
}

/// Connects a socket to the sink within `connect_timeout`, looking at `stop()` every tick
/// (a connect over a slow link can take seconds).
fn connect_until(sock: &Socket, cfg: &BulkConfig, stop: &dyn Fn() -> bool) -> Result<(), NetError> {
    let err = |source: io::Error| NetError::Connect {
        addr: cfg.to,
        source,
    };
    sock.set_nonblocking(true).map_err(err)?;
    match sock.connect(&cfg.to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(socklab_sys::errno::EINPROGRESS) => {
            let t0 = Instant::now();
            loop {
                let ready =
                    sysio::poll_one(sock.as_fd(), sysio::poll_flags::OUT, 100).map_err(err)?;
                if ready != 0 {
                    break;
                }
                if stop() {
                    return Err(NetError::Interrupted);
                }
                if t0.elapsed() >= cfg.connect_timeout {
                    return Err(err(io::ErrorKind::TimedOut.into()));
                }
            }
            if let Some(e) = sock.take_error().map_err(err)? {
                return Err(err(e));
            }
        }
        Err(e) => return Err(err(e)),
    }
    sock.set_nonblocking(false).map_err(err)
}

/// A socket connected to the sink.
pub(crate) struct Connected {
    pub stream: TcpStream,
    /// What a sending socket runs with.
    pub applied: SendApplied,
    /// The client side's `opts` on a stream's connection, read back.
    pub opts: Vec<(String, String)>,
}

/// A connected socket with the tick timeouts; a sending one has the sender's options, and a
/// stream's (`data`) the client side's `opts` after them (both set before connect, so the
/// window scale and the congestion control hold from the SYN).
pub(crate) fn connect(
    cfg: &BulkConfig,
    sends: bool,
    data: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Connected, NetError> {
    let sock = Socket::new(
        Domain::for_address(cfg.to),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| NetError::io("socket", e))?;
    if sends {
        SendOpts {
            cc: cfg.cc.clone(),
            nodelay: cfg.nodelay,
            sndbuf: cfg.sndbuf,
            pacing: cfg.pacing_bytes(),
        }
        .apply(SockRef::from(&sock))?;
    }
    let opts = cfg.opts.as_ref().filter(|_| data);
    if let Some(o) = opts {
        o.apply_client(&sock)?;
    }
    connect_until(&sock, cfg, stop)?;
    let applied = if sends {
        read_back(SockRef::from(&sock))?
    } else {
        SendApplied::default()
    };
    let opts = opts.map_or_else(Vec::new, |o| o.read_back(&sock, Side::Client));
    let stream: TcpStream = sock.into();
    for (what, r) in [
        ("SO_RCVTIMEO", stream.set_read_timeout(Some(TICK))),
        ("SO_SNDTIMEO", stream.set_write_timeout(Some(TICK))),
    ] {
        r.map_err(|e| NetError::io(what, e))?;
    }
    Ok(Connected {
        stream,
        applied,
        opts,
    })
}

/// Writes a control line within the bounds.
pub(crate) fn send_line(
    stream: &TcpStream,
    line: &str,
    b: &mut Bounds<'_>,
    cfg: &BulkConfig,
) -> Result<(), NetError> {
    let fd = stream.as_fd();
    write_all_waiting(line.as_bytes(), |x| sysio::write(fd, x), b)
        .map(drop)
        .map_err(|e| b.error(cfg, "sending the request to", e))
}

fn run(sh: &Shared<'_>, index: u32, events: &mpsc::Sender<Event>) -> Result<Done, NetError> {
    let cfg = sh.cfg;
    let up = cfg.direction_of(index) == Direction::Up;
    let halt = || sh.halt.load(Ordering::Relaxed);
    // Pinned first, so the socket and its buffers are made on the stream's CPU.
    let cpu_pinned = pin(cfg, index)?;
    let taken = sh
        .preconnected
        .and_then(|p| p.lock().unwrap_or_else(|e| e.into_inner())[index as usize].take());
    let Connected {
        mut stream,
        applied,
        opts: client_opts,
    } = match taken {
        Some(c) => c,
        None => connect(cfg, up, true, &halt)?,
    };
    let mut b = Bounds::new(cfg, &halt, sh.abort, (READY_WAIT, "READY"));
    b.receiving = !up;
    let proto_err = |detail: String| NetError::Protocol {
        peer: cfg.to.to_string(),
        detail,
    };
    let (mut v1_rcvbuf, mut joined) = (None, None);
    match sh.proto {
        Proto::V1 => {
            let hello = Hello {
                read_size: cfg.read_size,
                verify: cfg.verify,
            };
            send_line(&stream, &hello.emit(), &mut b, cfg)?;
            let r =
                Ready::parse(&read_line(&mut stream, "READY", &mut b, cfg)?).map_err(proto_err)?;
            v1_rcvbuf = Some(r.rcvbuf);
        }
        Proto::V2 { test } => {
            send_line(&stream, &Join { test, index }.emit(), &mut b, cfg)?;
            let r = JoinReady::parse(&read_line(&mut stream, "READY", &mut b, cfg)?)
                .map_err(proto_err)?;
            if r.index != index || r.down == up {
                return Err(proto_err(format!(
                    "READY for stream {} ({}), asked for stream {index} ({})",
                    r.index,
                    if r.down { "down" } else { "up" },
                    if up { "up" } else { "down" }
                )));
            }
            joined = Some(r);
        }
        Proto::Iperf3 => {}
    }
    let mut tls = match (sh.tls, sh.proto) {
        (Some(c), Proto::V2 { .. }) => Some(super::tls::handshake(cfg, c, &stream, &mut b, index)?),
        _ => None,
    };
    let counter = sh.sampling.then(|| Arc::new(AtomicU64::new(0)));
    let probe = match &counter {
        Some(c) => Some((
            stream
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| NetError::io("dup of the socket for the sampler", e))?,
            c.clone(),
        )),
        None => None,
    };
    let rcvbuf = SockRef::from(&stream).recv_buffer_size().unwrap_or(0);
    let mut done = if up {
        let sender = Sender::new(cfg.strategy, sh.payload, stream.as_fd(), sh.source)?;
        let _ = events.send(Event::Ready(index, Setup { probe }));
        let Some((t0, ender)) = sh.gate.wait(sh.halt) else {
            return Err(gave_up(sh));
        };
        send(
            sh,
            &mut stream,
            (sender, tls.as_mut().map(|t| &mut t.0)),
            counter.as_deref(),
            &mut b,
            t0,
            ender,
        )?
    } else {
        let buf = AlignedBuf::zeroed(cfg.read_size);
        let _ = events.send(Event::Ready(index, Setup { probe }));
        let Some((t0, ender)) = sh.gate.wait(sh.halt) else {
            return Err(gave_up(sh));
        };
        let tls = tls.as_mut().map(|t| &mut t.0);
        receive(
            sh,
            &mut stream,
            (buf, tls),
            counter.as_deref(),
            &mut b,
            t0,
            ender,
        )?
    };
    done.tls = tls.map(|t| t.1);
    done.tcp = tcp_info(stream.as_fd()).unwrap_or_default();
    done.applied = applied;
    done.rcvbuf = rcvbuf;
    done.cpu_pinned = cpu_pinned;
    done.joined = joined;
    done.client_opts = client_opts;
    if let (Some(rcvbuf), Some(v1)) = (v1_rcvbuf, done.v1.as_mut()) {
        v1.1 = rcvbuf;
    }
    Ok(done)
}

/// Why a stream that waited at the gate did not start.
fn gave_up(sh: &Shared<'_>) -> NetError {
    if sh.halt.load(Ordering::Relaxed) {
        NetError::Interrupted
    } else {
        NetError::Invalid("the test was given up before it started".into())
    }
}

/// This stream has ended now: the last one of the test ends the time series, under its lock.
fn ended(sh: &Shared<'_>, t0: Instant, ender: Option<&Ender>) -> Instant {
    let last = sh.remaining.fetch_sub(1, Ordering::SeqCst) == 1;
    match ender {
        Some(e) if last => t0 + e.end(),
        _ => Instant::now(),
    }
}

/// An up stream from the start: rounds until its limit, then FIN and the sink's end.
fn send(
    sh: &Shared<'_>,
    stream: &mut TcpStream,
    (mut sender, mut tls): (Sender<'_>, Option<&mut TlsStream>),
    counter: Option<&AtomicU64>,
    b: &mut Bounds<'_>,
    t0: Instant,
    ender: Option<Ender>,
) -> Result<Done, NetError> {
    let cfg = sh.cfg;
    let payload = sh.payload;
    let stop = || sh.halt.load(Ordering::Relaxed);
    let sock = stream.as_fd();
    let round_len = payload.round_len() as u64;
    let max_rounds = match cfg.limit {
        Limit::Iterations(n) => n,
        Limit::Bytes(bytes) => bytes.div_ceil(round_len),
        Limit::Duration(_) => u64::MAX,
    };
    let duration = match cfg.limit {
        Limit::Duration(d) => Some(d),
        _ => None,
    };
    // Checked after each round: the test's own length, or its deadline.
    let check_every_round = duration.or(b.deadline);
    let cpu0 = getrusage(Who::Thread);
    b.t0 = Some(t0);
    b.phase = None;
    let mut rounds = 0u64;
    let mut syscalls = 0u64;
    let doing = format!("sending with {} to", cfg.strategy);
    while rounds < max_rounds {
        // Between calls, the bounds look at Ctrl-C, the others and the deadline (by time).
        let r = match tls.as_deref_mut() {
            Some(t) => t.round(stream, payload, cfg.strategy, b),
            None => sender.round(sock, payload, b),
        };
        match r {
            Ok(n) => syscalls += n,
            Err(e) => return Err(b.error(cfg, &doing, e)),
        }
        rounds += 1;
        b.moved = rounds * round_len;
        if let Some(c) = counter {
            c.store(b.moved, Ordering::Relaxed);
        }
        if check_every_round.is_some() {
            let elapsed = t0.elapsed();
            if duration.is_some_and(|d| elapsed >= d) {
                break;
            }
            if b.deadline.is_some_and(|d| elapsed >= d) {
                b.halted = Some(Halt::Deadline);
                return Err(b.error(cfg, &doing, io::Error::other("deadline")));
            }
        }
        if stop() {
            return Err(NetError::Interrupted);
        }
        if sh.abort.load(Ordering::Relaxed) {
            b.halted = Some(Halt::Aborted);
            return Err(b.error(cfg, &doing, io::Error::other("aborted")));
        }
    }
    let send_end = Instant::now();
    // Zerocopy completions: 10 s at most, and not past the deadline.
    let drain_for = b.deadline.map_or(Duration::from_secs(10), |d| {
        d.saturating_sub(t0.elapsed()).min(Duration::from_secs(10))
    });
    let zerocopy = sender
        .drain(sock, drain_for, &stop)
        .map_err(|e| NetError::io("reaping zerocopy completions", e))?;
    if stop() {
        return Err(NetError::Interrupted);
    }
    if sh.proto == Proto::Iperf3 {
        super::bounds::await_acked(stream, b, cfg)?;
        return Ok(Done {
            bytes: rounds * round_len,
            rounds,
            writes: syscalls,
            end: ended(sh, t0, ender.as_ref()),
            send_end: Some(send_end),
            cpu: getrusage(Who::Thread).since(&cpu0),
            zerocopy,
            ..Done::default()
        });
    }
    if let Some(t) = tls.as_deref_mut() {
        t.close(stream, b)
            .map_err(|e| b.error(cfg, "ending TLS with", e))?;
    }
    sysio::shutdown_write(sock).map_err(|e| NetError::io("shutdown", e))?;
    // The sink answers once it has read everything: within the deadline, or (without one)
    // within RESULT_WAIT of the last write.
    if b.deadline.is_none() {
        b.phase = Some((Instant::now() + RESULT_WAIT, "RESULT"));
    }
    let v1 = match sh.proto {
        Proto::V1 => {
            let line = read_line(stream, "RESULT", b, cfg)?;
            let end = ended(sh, t0, ender.as_ref());
            let sink = SinkResult::parse(&line).map_err(|detail| NetError::Protocol {
                peer: cfg.to.to_string(),
                detail,
            })?;
            Some((sink, end))
        }
        Proto::V2 { .. } | Proto::Iperf3 => {
            await_close(stream, tls, b, cfg)?;
            None
        }
    };
    let end = match v1 {
        Some((_, end)) => end,
        None => ended(sh, t0, ender.as_ref()),
    };
    Ok(Done {
        bytes: rounds * round_len,
        rounds,
        writes: syscalls,
        end,
        send_end: Some(send_end),
        cpu: getrusage(Who::Thread).since(&cpu0),
        v1: v1.map(|(s, _)| (s, 0)),
        zerocopy,
        ..Done::default()
    })
}

/// Waits (within the bounds) for the sink to close an up stream it has read to its end.
fn await_close(
    stream: &mut TcpStream,
    mut tls: Option<&mut TlsStream>,
    b: &mut Bounds<'_>,
    cfg: &BulkConfig,
) -> Result<(), NetError> {
    let mut byte = [0u8; 64];
    loop {
        let r = match tls.as_deref_mut() {
            Some(t) => t.read(stream, &mut byte),
            None => stream.read(&mut byte),
        };
        match r {
            Ok(0) => return Ok(()),
            Ok(_) => {
                return Err(NetError::Protocol {
                    peer: cfg.to.to_string(),
                    detail: "sent data on an up stream's connection".into(),
                })
            }
            Err(e) => b
                .wait(e, Instant::now())
                .map_err(|e| b.error(cfg, "waiting for the end of the stream at", e))?,
        }
    }
}

/// A down stream from the start: reads to the sink's end of stream, counting (and hashing).
fn receive(
    sh: &Shared<'_>,
    stream: &mut TcpStream,
    (mut buf, mut tls): (AlignedBuf, Option<&mut TlsStream>),
    counter: Option<&AtomicU64>,
    b: &mut Bounds<'_>,
    t0: Instant,
    ender: Option<Ender>,
) -> Result<Done, NetError> {
    let cfg = sh.cfg;
    let cpu0 = getrusage(Who::Thread);
    b.t0 = Some(t0);
    b.phase = None;
    let mut hasher = cfg.verify.then(blake3::Hasher::new);
    let (mut bytes, mut reads) = (0u64, 0u64);
    let mut stalled: Option<Instant> = None;
    loop {
        let mut hash = |d: &[u8]| {
            if let Some(h) = hasher.as_mut() {
                h.update(d);
            }
        };
        let r = match tls.as_deref_mut() {
            // Counted and hashed where rustls holds the plaintext: no copy.
            Some(t) => t.read_in_place(stream, &mut hash),
            None => stream
                .read(buf.as_mut_slice())
                .inspect(|&n| hash(&buf.as_slice()[..n])),
        };
        match r {
            Ok(0) => break,
            Ok(n) => {
                stalled = None;
                reads += 1;
                bytes += n as u64;
                if let Some(c) = counter {
                    c.store(bytes, Ordering::Relaxed);
                }
                // A flowing stream looks at Ctrl-C, the others and the deadline now and then
                // (a read that waits looks at them every tick).
                if reads % 64 == 0 {
                    if sh.halt.load(Ordering::Relaxed) {
                        return Err(NetError::Interrupted);
                    }
                    let over = b.t0.zip(b.deadline).is_some_and(|(t, d)| t.elapsed() >= d);
                    if over || sh.abort.load(Ordering::Relaxed) {
                        b.halted = Some(if over { Halt::Deadline } else { Halt::Aborted });
                        b.moved = bytes;
                        return Err(b.error(cfg, "receiving from", io::Error::other("bound")));
                    }
                }
            }
            Err(e) => {
                b.moved = bytes;
                b.wait(e, *stalled.get_or_insert_with(Instant::now))
                    .map_err(|e| b.error(cfg, "receiving from", e))?;
            }
        }
    }
    let end = ended(sh, t0, ender.as_ref());
    if let Some(t) = tls {
        // The system calls, not the records handed out; then the clean end the sink waits for.
        reads = t.socket_reads;
        t.close(stream, b)
            .map_err(|e| b.error(cfg, "ending TLS with", e))?;
    }
    Ok(Done {
        bytes,
        reads,
        end,
        cpu: getrusage(Who::Thread).since(&cpu0),
        hash: hasher.map(|h| h.finalize()),
        ..Done::default()
    })
}
