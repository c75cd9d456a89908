//! The bulk sender (`socklab bulk`): connects to a sink, sends rounds of buffers with one write
//! strategy, and collects both sides' counts.
//!
//! Timing: the clock starts when the sink has answered READY and stops when its RESULT line
//! arrives, i.e. when the sink has read every byte (end-to-end, like iperf3's receiver figure).
//! The time until the last write returned is kept too (`send_seconds`).
//!
//! Bounds: no call blocks for long. The socket has send and receive timeouts of [`TICK`];
//! after each tick without progress the loops look at `stop()` (Ctrl-C: [`NetError::Interrupted`]
//! within about 100 ms), at the test's deadline ([`BulkConfig::deadline`]: `--duration` plus a
//! grace, or `--timeout`) and at how long the sink has accepted nothing ([`STALL`]); either
//! bound ends the test with [`NetError::Timeout`], which the lab stores as a failed repetition.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use socklab_sys::io as sysio;
use socklab_sys::tcp::{tcp_info, TcpInfo};
use socklab_sys::usage::{getrusage, Usage, Who};
use socklab_sys::zerocopy::{self, Completions};

use crate::partial::{send_range_waiting, write_all_vectored_waiting, write_all_waiting};
use crate::payload::Payload;
use crate::protocol::{Hello, Ready, SinkResult, MAX_LINE};
use crate::series::{LiveTcp, Sampling, SeriesOutput, StreamSeries};
use crate::{NetError, Strategy};

/// When a test ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// After this many rounds of `nbufs` buffers.
    Iterations(u64),
    /// After this much time (checked after every round).
    Duration(Duration),
    /// After this many bytes (rounded up to whole rounds).
    Bytes(u64),
}

/// Largest round (`nbufs × bufsize`) a test may use.
pub const MAX_ROUND_BYTES: usize = 1 << 30;

/// How often a blocked send or receive wakes to look at `stop()` and the deadlines (the
/// socket's `SO_SNDTIMEO`/`SO_RCVTIMEO`; a flowing stream never waits for it).
pub const TICK: Duration = Duration::from_millis(100);

/// The time a `--duration` test may run past its duration before it fails, by default (the
/// sink has to read what the socket buffers still hold): [`BulkConfig::deadline`].
pub const GRACE: Duration = Duration::from_secs(10);

/// A test fails when the sink accepts no byte for this long (it stopped reading, or the link
/// stopped delivering), whatever its limit.
pub const STALL: Duration = Duration::from_secs(30);

/// How long the sink may take to answer READY.
pub const READY_WAIT: Duration = Duration::from_secs(10);

/// How long the sink may take to answer RESULT after the last write, for a test without a
/// deadline (count-limited, no `timeout`).
pub const RESULT_WAIT: Duration = Duration::from_secs(60);

/// Everything that defines one bulk test.
#[derive(Debug, Clone)]
pub struct BulkConfig {
    /// The sink.
    pub to: SocketAddr,
    /// How buffers are written.
    pub strategy: Strategy,
    /// Buffers per round.
    pub nbufs: usize,
    /// Bytes per buffer.
    pub bufsize: usize,
    /// When to stop.
    pub limit: Limit,
    /// Congestion control to set on the sending socket (always set; recorded as read back).
    pub cc: String,
    /// `TCP_NODELAY` on the sender.
    pub nodelay: bool,
    /// `SO_SNDBUF` on the sender (`None`: kernel autotuning).
    pub sndbuf: Option<usize>,
    /// Bytes per `read()` at the sink.
    pub read_size: usize,
    /// Hash the stream on both sides and compare.
    pub verify: bool,
    /// Seed of the payload pattern.
    pub seed: u64,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
    /// The longest the test may take from READY to RESULT, when given (`--timeout`).
    pub timeout: Option<Duration>,
    /// Without `timeout`, how long a `--duration` test may run past its duration
    /// ([`GRACE`], plus the round trips of an emulated link).
    pub grace: Duration,
    /// Interval time series (`--interval`, `--omit`); off by default.
    pub sampling: Sampling,
}

impl BulkConfig {
    /// The longest the test may take from READY to RESULT before it fails: `timeout` when
    /// given, else `--duration` + `grace` for a duration-limited test; `None` for a
    /// count-limited test without `timeout` (only [`STALL`] and [`RESULT_WAIT`] bound it).
    pub fn deadline(&self) -> Option<Duration> {
        match (self.timeout, self.limit) {
            (Some(t), _) => Some(t),
            (None, Limit::Duration(d)) => Some(d + self.grace),
            (None, _) => None,
        }
    }

    /// Checks the parameters, naming the bad value and the fix.
    pub fn validate(&self) -> Result<(), NetError> {
        let bad = |m: String| Err(NetError::Invalid(m));
        if self.nbufs == 0 {
            return bad("--nbufs 0: send at least one buffer per round (e.g. --nbufs 1)".into());
        }
        if self.bufsize == 0 {
            return bad(
                "--bufsize 0: a buffer needs at least one byte (e.g. --bufsize 1500)".into(),
            );
        }
        let iov_max = sysio::iov_max();
        if self.strategy.uses_iovecs() && self.nbufs > iov_max {
            return bad(format!(
                "--nbufs {} exceeds IOV_MAX ({iov_max}) for strategy {}: use --nbufs {iov_max} or less, or --strategy write/single",
                self.nbufs, self.strategy
            ));
        }
        match self.nbufs.checked_mul(self.bufsize) {
            Some(n) if n <= MAX_ROUND_BYTES => {}
            _ => {
                return bad(format!(
                    "--nbufs {} x --bufsize {} is more than 1 GiB per round: use smaller buffers",
                    self.nbufs, self.bufsize
                ))
            }
        }
        match self.limit {
            Limit::Iterations(0) => return bad("--iterations 0: run at least one round".into()),
            Limit::Bytes(0) => return bad("--bytes 0: send at least one byte".into()),
            Limit::Duration(d) if d.is_zero() => {
                return bad("--duration 0s: run for some time, e.g. --duration 1s".into())
            }
            _ => {}
        }
        match (self.timeout, self.limit) {
            (Some(t), _) if t.is_zero() => {
                return bad("--timeout 0s: give the test some time, e.g. --timeout 30s".into())
            }
            (Some(t), Limit::Duration(d)) if t <= d => {
                return bad(format!(
                    "--timeout {} is not longer than --duration {}: the test could never finish; give more, e.g. --timeout {}",
                    crate::units::format_duration(t),
                    crate::units::format_duration(d),
                    crate::units::format_duration(d + GRACE)
                ))
            }
            _ => {}
        }
        if let Err(m) = self.sampling.check(match self.limit {
            Limit::Duration(d) => Some(d),
            _ => None,
        }) {
            return bad(m);
        }
        if self.read_size == 0 || self.read_size > crate::protocol::MAX_READ_SIZE {
            return bad(format!(
                "--read-size {} is out of range: use 1 to 64M",
                self.read_size
            ));
        }
        if self.cc.is_empty()
            || self.cc.len() > 15
            || !self
                .cc
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return bad(format!("--cc '{}' is not a congestion-control name: see /proc/sys/net/ipv4/tcp_available_congestion_control", self.cc));
        }
        Ok(())
    }
}

/// What one bulk test measured.
#[derive(Debug, Clone)]
pub struct BulkResult {
    /// Bytes the sender wrote.
    pub bytes: u64,
    /// Rounds sent.
    pub rounds: u64,
    /// Send system calls issued (`write`, `writev`, `sendmsg`, `sendfile`, `vmsplice`, `splice`).
    pub syscalls: u64,
    /// Seconds from READY to RESULT (end to end).
    pub seconds: f64,
    /// Seconds from READY until the last send call returned.
    pub send_seconds: f64,
    /// The sink's counts.
    pub sink: SinkResult,
    /// Sender CPU over the test.
    pub sender_cpu: Usage,
    /// `TCP_INFO` of the sending socket at the end.
    pub tcp: TcpInfo,
    /// Congestion control the sending socket actually ran (read back).
    pub cc: String,
    /// `SO_SNDBUF` as read back.
    pub sndbuf: usize,
    /// The sink's `SO_RCVBUF`.
    pub rcvbuf: usize,
    /// `MSG_ZEROCOPY` completions, for the zerocopy strategy.
    pub zerocopy: Option<Completions>,
    /// `Some(true)` when verification was asked and both hashes match.
    pub verified: Option<bool>,
    /// The interval time series and its cost (empty unless sampling was on).
    pub series: SeriesOutput,
}

impl BulkResult {
    /// Throughput in Gbit/s (end to end).
    pub fn gbps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds / 1e9
        } else {
            0.0
        }
    }
}

/// Connects a TCP socket with the sender's options; every option is read back.
fn connect(
    cfg: &BulkConfig,
    stop: &dyn Fn() -> bool,
) -> Result<(TcpStream, String, usize), NetError> {
    let sock = Socket::new(
        Domain::for_address(cfg.to),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| NetError::io("socket", e))?;
    sock.set_tcp_congestion(cfg.cc.as_bytes())
        .map_err(|source| NetError::SockOpt {
            option: "cc",
            value: cfg.cc.clone(),
            hint: format!(
                " (available here: {}; load a module with `modprobe tcp_{}` or choose another --cc)",
                std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                    .unwrap_or_default()
                    .trim(),
                cfg.cc
            ),
            source,
        })?;
    if cfg.nodelay {
        sock.set_nodelay(true).map_err(|source| NetError::SockOpt {
            option: "nodelay",
            value: "1".into(),
            source,
            hint: String::new(),
        })?;
    }
    if let Some(n) = cfg.sndbuf {
        sock.set_send_buffer_size(n)
            .map_err(|source| NetError::SockOpt {
                option: "sndbuf",
                value: n.to_string(),
                source,
                hint: String::new(),
            })?;
    }
    connect_until(&sock, cfg, stop)?;
    let cc = sock
        .tcp_congestion()
        .map(|v| {
            String::from_utf8_lossy(&v)
                .trim_end_matches('\0')
                .to_string()
        })
        .map_err(|e| NetError::io("getsockopt TCP_CONGESTION", e))?;
    let sndbuf = sock.send_buffer_size().unwrap_or(0);
    Ok((sock.into(), cc, sndbuf))
}

/// Connects `sock` to `cfg.to` within `cfg.connect_timeout`, looking at `stop()` every
/// [`TICK`] (a connect over a slow link can take seconds).
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

/// Why a test was given up while a call waited ([`Bounds::wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Halt {
    Interrupted,
    Deadline,
    Stalled,
    Phase,
}

/// The bounds of one test, asked after every call that made no progress.
struct Bounds<'a> {
    stop: &'a dyn Fn() -> bool,
    /// READY received, and the test's deadline from then (`None`: before READY, or none).
    t0: Option<Instant>,
    deadline: Option<Duration>,
    /// The current phase's own limit (READY, RESULT), and what it waits for.
    phase: Option<(Instant, &'static str)>,
    /// Bytes written so far (for the messages).
    sent: u64,
    halted: Option<Halt>,
}

impl Bounds<'_> {
    /// Whether to wait on after `e`: `Ok` to try again, `Err` to give up (the reason is kept
    /// in `halted`; [`Bounds::error`] turns it into the test's error).
    fn wait(&mut self, e: io::Error, since: Instant) -> io::Result<()> {
        if !crate::partial::is_no_progress(&e) {
            return Err(e);
        }
        let now = Instant::now();
        let halt = if (self.stop)() {
            Halt::Interrupted
        } else if self
            .t0
            .zip(self.deadline)
            .is_some_and(|(t0, d)| now >= t0 + d)
        {
            Halt::Deadline
        } else if now.duration_since(since) >= STALL {
            Halt::Stalled
        } else if self.phase.is_some_and(|(until, _)| now >= until) {
            Halt::Phase
        } else {
            return Ok(());
        };
        self.halted = Some(halt);
        Err(io::Error::other("given up"))
    }

    /// The test's error after a failed call: the bound that gave up, else the I/O error.
    fn error(&self, cfg: &BulkConfig, doing: &str, e: io::Error) -> NetError {
        let fmt = crate::units::format_duration;
        let peer = cfg.to.to_string();
        let sent = self.sent;
        match self.halted {
            None => NetError::io(format!("{doing} {peer}"), e),
            Some(Halt::Interrupted) => NetError::Interrupted,
            Some(Halt::Deadline) => {
                let d = self.deadline.unwrap_or_default();
                let why = match (cfg.timeout, cfg.limit) {
                    (None, Limit::Duration(dur)) => {
                        format!("--duration {} + {} grace", fmt(dur), fmt(cfg.grace))
                    }
                    _ => format!("--timeout {}", fmt(d)),
                };
                NetError::Timeout(format!(
                    "the test did not end within {} ({why}) while {doing} {peer}, {sent} bytes sent: the sink stopped reading or the link stopped delivering; a slow link needs a longer --timeout",
                    fmt(d)
                ))
            }
            Some(Halt::Stalled) => NetError::Timeout(format!(
                "the sink at {peer} accepted no data for {} while {doing} it, {sent} bytes sent: it stopped reading, or the link stopped delivering",
                fmt(STALL)
            )),
            Some(Halt::Phase) => match self.phase.map_or("", |(_, what)| what) {
                "RESULT" => NetError::Timeout(format!(
                    "no RESULT from the sink at {peer} within {} of the last write, {sent} bytes sent: it stopped reading, or the link stopped delivering; a slow link needs --timeout",
                    fmt(RESULT_WAIT)
                )),
                what => NetError::Protocol {
                    peer,
                    detail: format!("no {what} line in time: is it a `socklab sink`?"),
                },
            },
        }
    }
}

/// Reads one `\n`-terminated control line (without over-reading: the peer sends nothing after it
/// until we act), within the phase's limit in `b`.
fn read_line(
    stream: &mut TcpStream,
    what: &str,
    b: &mut Bounds<'_>,
    cfg: &BulkConfig,
) -> Result<String, NetError> {
    let peer = cfg.to.to_string();
    let mut line = Vec::with_capacity(128);
    let mut buf = [0u8; MAX_LINE];
    loop {
        let n = match stream.read(&mut buf[..MAX_LINE - line.len()]) {
            Ok(n) => n,
            // Silence while waiting for a line is no stall (the sink is reading): only the
            // phase's limit, the deadline and Ctrl-C apply.
            Err(e) => match b.wait(e, Instant::now()) {
                Ok(()) => continue,
                Err(e) => return Err(b.error(cfg, &format!("waiting for {what} from"), e)),
            },
        };
        if n == 0 {
            return Err(NetError::Protocol {
                peer,
                detail: format!(
                    "closed the connection before sending {what}: is it a `socklab sink`?"
                ),
            });
        }
        line.extend_from_slice(&buf[..n]);
        if let Some(nl) = line.iter().position(|&b| b == b'\n') {
            line.truncate(nl);
            return Ok(String::from_utf8_lossy(&line).into_owned());
        }
        if line.len() >= MAX_LINE {
            return Err(NetError::Protocol {
                peer,
                detail: format!("{what} line longer than {MAX_LINE} bytes"),
            });
        }
    }
}

/// Per-strategy state kept across rounds (no allocation on the hot path).
enum Sender<'a> {
    Write,
    Single,
    Vectored {
        template: Vec<IoSlice<'a>>,
        scratch: Vec<IoSlice<'a>>,
        zerocopy: Option<(Completions, u64)>,
        use_sendmsg: bool,
    },
    Sendfile(File),
    Splice {
        r: OwnedFd,
        w: OwnedFd,
        cap: usize,
    },
}

impl<'a> Sender<'a> {
    fn new(
        strategy: Strategy,
        payload: &'a Payload,
        sock: BorrowedFd<'_>,
    ) -> Result<Sender<'a>, NetError> {
        let vectored = |zc: bool, use_sendmsg: bool| {
            let template: Vec<IoSlice<'a>> = (0..payload.nbufs())
                .map(|i| IoSlice::new(payload.buf(i)))
                .collect();
            Sender::Vectored {
                scratch: template.clone(),
                template,
                zerocopy: zc.then_some((Completions::default(), 0)),
                use_sendmsg,
            }
        };
        Ok(match strategy {
            Strategy::Write => Sender::Write,
            Strategy::Single => Sender::Single,
            Strategy::Writev => vectored(false, false),
            Strategy::Sendmsg => vectored(false, true),
            Strategy::Zerocopy => {
                zerocopy::enable(sock).map_err(|source| NetError::SockOpt {
                    option: "zerocopy",
                    value: "1".into(),
                    source,
                    hint: " (SO_ZEROCOPY needs Linux 4.14 or later)".into(),
                })?;
                vectored(true, true)
            }
            Strategy::Sendfile => {
                let mut f = tempfile::tempfile()
                    .map_err(|e| NetError::io("creating the sendfile source file", e))?;
                f.write_all(payload.round())
                    .map_err(|e| NetError::io("writing the sendfile source file", e))?;
                Sender::Sendfile(f)
            }
            Strategy::Splice => {
                let (r, w) = sysio::pipe().map_err(|e| NetError::io("pipe", e))?;
                let want = payload.round_len().clamp(4096, sysio::pipe_max_size());
                let cap = sysio::set_pipe_size(w.as_fd(), want).unwrap_or(65536);
                Sender::Splice { r, w, cap }
            }
        })
    }

    /// Sends one round; returns the send calls made. A call without progress (the send
    /// timeout's tick, `EINTR`) asks `wait` whether to go on.
    fn round(
        &mut self,
        sock: BorrowedFd<'_>,
        payload: &Payload,
        wait: &mut dyn FnMut(io::Error, Instant) -> io::Result<()>,
    ) -> io::Result<u64> {
        match self {
            Sender::Write => {
                let mut calls = 0;
                for i in 0..payload.nbufs() {
                    calls +=
                        write_all_waiting(payload.buf(i), |b| sysio::write(sock, b), &mut *wait)?;
                }
                Ok(calls)
            }
            Sender::Single => write_all_waiting(payload.round(), |b| sysio::write(sock, b), wait),
            Sender::Vectored {
                template,
                scratch,
                zerocopy,
                use_sendmsg,
            } => {
                scratch.copy_from_slice(template);
                match zerocopy {
                    None if *use_sendmsg => {
                        write_all_vectored_waiting(scratch, |b| sysio::sendmsg(sock, b, 0), wait)
                    }
                    None => write_all_vectored_waiting(scratch, |b| sysio::writev(sock, b), wait),
                    Some((done, issued)) => {
                        let calls = write_all_vectored_waiting(
                            scratch,
                            |b| match sysio::sendmsg(sock, b, zerocopy::MSG_ZEROCOPY) {
                                Ok(n) => {
                                    *issued += 1;
                                    Ok(n)
                                }
                                // Too many unacknowledged zerocopy sends: wait (a tick at most)
                                // for completions, then count it as a call without progress.
                                Err(e) if e.raw_os_error() == Some(socklab_sys::errno::ENOBUFS) => {
                                    sysio::poll_one(sock, sysio::poll_flags::ERR, 100)?;
                                    zerocopy::reap(sock, done)?;
                                    Err(io::ErrorKind::WouldBlock.into())
                                }
                                Err(e) => Err(e),
                            },
                            wait,
                        )?;
                        zerocopy::reap(sock, done)?;
                        Ok(calls)
                    }
                }
            }
            Sender::Sendfile(file) => {
                let ffd = file.as_fd();
                send_range_waiting(
                    payload.round_len(),
                    |off, left| {
                        let mut o = off as i64;
                        sysio::sendfile(sock, ffd, &mut o, left)
                    },
                    wait,
                )
            }
            Sender::Splice { r, w, cap } => {
                let round = payload.round();
                let (r, w, cap) = (r.as_fd(), w.as_fd(), *cap);
                let mut calls = 0;
                let mut off = 0;
                while off < round.len() {
                    let end = (off + cap).min(round.len());
                    // The pipe is empty here (each chunk is spliced out whole before the next),
                    // so this never blocks.
                    let n = loop {
                        match sysio::vmsplice(w, &[IoSlice::new(&round[off..end])]) {
                            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                            Ok(n) => break n,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    };
                    calls += 1;
                    calls += send_range_waiting(
                        n,
                        |_, left| sysio::splice(r, sock, left, true),
                        &mut *wait,
                    )?;
                    off += n;
                }
                Ok(calls)
            }
        }
    }

    /// Waits for outstanding zerocopy completions (at most `timeout`, and not past `stop()`).
    fn drain(
        &mut self,
        sock: BorrowedFd<'_>,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> io::Result<Option<Completions>> {
        let Sender::Vectored {
            zerocopy: Some((done, issued)),
            ..
        } = self
        else {
            return Ok(None);
        };
        let deadline = Instant::now() + timeout;
        while done.completed < *issued && Instant::now() < deadline && !stop() {
            sysio::poll_one(sock, sysio::poll_flags::ERR, 50)?;
            zerocopy::reap(sock, done)?;
        }
        Ok(Some(*done))
    }
}

/// Runs one bulk test against the sink at `cfg.to`. `stop()` is polled after every round and
/// whenever a call waits (every [`TICK`] at most): when it turns true the test is abandoned
/// with [`NetError::Interrupted`]. A test past its deadline, or whose sink accepts nothing for
/// [`STALL`], ends with [`NetError::Timeout`].
pub fn run(cfg: &BulkConfig, stop: &dyn Fn() -> bool) -> Result<BulkResult, NetError> {
    run_live(cfg, stop, None)
}

/// [`run`], handing each interval of the time series to `live` as it closes.
pub fn run_live(
    cfg: &BulkConfig,
    stop: &dyn Fn() -> bool,
    live: Option<LiveTcp>,
) -> Result<BulkResult, NetError> {
    cfg.validate()?;
    let payload = Payload::new(cfg.nbufs, cfg.bufsize, cfg.seed);
    let (mut stream, cc, sndbuf) = connect(cfg, stop)?;
    for (what, r) in [
        ("SO_RCVTIMEO", stream.set_read_timeout(Some(TICK))),
        ("SO_SNDTIMEO", stream.set_write_timeout(Some(TICK))),
    ] {
        r.map_err(|e| NetError::io(what, e))?;
    }
    let mut b = Bounds {
        stop,
        t0: None,
        deadline: cfg.deadline(),
        phase: Some((Instant::now() + READY_WAIT, "READY")),
        sent: 0,
        halted: None,
    };
    let hello = Hello {
        read_size: cfg.read_size,
        verify: cfg.verify,
    };
    let sock = stream.as_fd();
    write_all_waiting(
        hello.emit().as_bytes(),
        |x| sysio::write(sock, x),
        |e, since| b.wait(e, since),
    )
    .map_err(|e| b.error(cfg, "sending the request to", e))?;
    let ready = Ready::parse(&read_line(&mut stream, "READY", &mut b, cfg)?).map_err(|detail| {
        NetError::Protocol {
            peer: cfg.to.to_string(),
            detail,
        }
    })?;

    let sock = stream.as_fd();
    let mut sender = Sender::new(cfg.strategy, &payload, sock)?;
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
    let t0 = Instant::now();
    b.t0 = Some(t0);
    b.phase = None;
    let series = StreamSeries::start(sock, cfg.sampling, t0, live)?;
    let mut rounds = 0u64;
    let mut syscalls = 0u64;
    let doing = format!("sending with {} to", cfg.strategy);
    while rounds < max_rounds {
        let mut wait = |e, since| b.wait(e, since);
        match sender.round(sock, &payload, &mut wait) {
            Ok(n) => syscalls += n,
            Err(e) => return Err(b.error(cfg, &doing, e)),
        }
        rounds += 1;
        b.sent = rounds * round_len;
        series.wrote(rounds * round_len);
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
    }
    let send_seconds = t0.elapsed().as_secs_f64();
    // Zerocopy completions: 10 s at most, and not past the deadline.
    let drain_for = b.deadline.map_or(Duration::from_secs(10), |d| {
        d.saturating_sub(t0.elapsed()).min(Duration::from_secs(10))
    });
    let zc = sender
        .drain(sock, drain_for, stop)
        .map_err(|e| NetError::io("reaping zerocopy completions", e))?;
    if stop() {
        return Err(NetError::Interrupted);
    }
    sysio::shutdown_write(sock).map_err(|e| NetError::io("shutdown", e))?;
    // The sink answers once it has read everything: within the deadline, or (without one)
    // within RESULT_WAIT of the last write.
    if b.deadline.is_none() {
        b.phase = Some((Instant::now() + RESULT_WAIT, "RESULT"));
    }
    let line = read_line(&mut stream, "RESULT", &mut b, cfg)?;
    let elapsed = series.end(t0);
    let seconds = elapsed.as_secs_f64();
    let sender_cpu = getrusage(Who::Thread).since(&cpu0);
    let peer = cfg.to.to_string();
    let sink = SinkResult::parse(&line).map_err(|detail| NetError::Protocol {
        peer: peer.clone(),
        detail,
    })?;
    let tcp = tcp_info(stream.as_fd()).unwrap_or_default();
    let bytes = rounds * round_len;
    let series = series.finish(elapsed, bytes, tcp);
    if sink.bytes != bytes {
        return Err(NetError::Protocol {
            peer,
            detail: format!("sink received {} bytes, sender wrote {bytes}", sink.bytes),
        });
    }
    let verified = if cfg.verify {
        let want = payload.stream_hash(rounds).to_hex().to_string();
        Some(sink.hash.as_deref() == Some(want.as_str()))
    } else {
        None
    };
    Ok(BulkResult {
        bytes,
        rounds,
        syscalls,
        seconds,
        send_seconds,
        sink,
        sender_cpu,
        tcp,
        cc,
        sndbuf,
        rcvbuf: ready.rcvbuf,
        zerocopy: zc,
        verified,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(limit: Limit, timeout: Option<Duration>) -> BulkConfig {
        BulkConfig {
            to: SocketAddr::from(([127, 0, 0, 1], 5001)),
            strategy: Strategy::Single,
            nbufs: 1,
            bufsize: 1000,
            limit,
            cc: "cubic".into(),
            nodelay: false,
            sndbuf: None,
            read_size: 1000,
            verify: false,
            seed: 1,
            connect_timeout: Duration::from_secs(5),
            timeout,
            grace: GRACE,
            sampling: Sampling::default(),
        }
    }

    fn ago(secs: u64) -> Instant {
        Instant::now()
            .checked_sub(Duration::from_secs(secs))
            .expect("the clock runs long enough")
    }

    fn tick() -> io::Error {
        io::ErrorKind::WouldBlock.into()
    }

    /// Each bound of [`Bounds::wait`] gives up with its own reason, in order: Ctrl-C, the
    /// deadline, the stall, the phase's limit; real errors pass through.
    #[test]
    fn bounds_give_up_for_each_reason_with_a_message_that_names_it() {
        let c = cfg(Limit::Duration(Duration::from_secs(1)), None);
        let stop = || false;
        let fresh = |stop| Bounds {
            stop,
            t0: Some(Instant::now()),
            deadline: c.deadline(),
            phase: None,
            sent: 4096,
            halted: None,
        };
        let mut b = fresh(&stop);
        assert!(b.wait(tick(), Instant::now()).is_ok());
        assert!(b.wait(io::ErrorKind::Interrupted.into(), ago(1)).is_ok());
        let e = b.wait(io::ErrorKind::ConnectionReset.into(), Instant::now());
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(b.halted, None);

        let yes = || true;
        let mut b = fresh(&yes);
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        assert!(matches!(
            b.error(&c, "sending to", e),
            NetError::Interrupted
        ));

        let mut b = fresh(&stop);
        b.t0 = Some(ago(12));
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        let m = b.error(&c, "sending with single to", e).to_string();
        assert_eq!(
            m,
            "the test did not end within 11s (--duration 1s + 10s grace) while sending with single to 127.0.0.1:5001, 4096 bytes sent: the sink stopped reading or the link stopped delivering; a slow link needs a longer --timeout"
        );

        let counted = cfg(Limit::Iterations(10), None);
        assert_eq!(counted.deadline(), None);
        let mut b = fresh(&stop);
        b.deadline = counted.deadline();
        assert!(b.wait(tick(), ago(29)).is_ok());
        let e = b.wait(tick(), ago(31)).unwrap_err();
        let m = b.error(&counted, "sending with single to", e).to_string();
        assert!(m.contains("accepted no data for 30s"), "{m}");

        let mut b = fresh(&stop);
        b.deadline = None;
        b.phase = Some((ago(1), "READY"));
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        let m = b.error(&counted, "waiting for READY from", e).to_string();
        assert!(m.contains("no READY line in time"), "{m}");
        b.phase = Some((ago(1), "RESULT"));
        let m = b
            .error(&counted, "waiting for RESULT from", tick())
            .to_string();
        assert!(
            m.contains("no RESULT from the sink at 127.0.0.1:5001 within 60s of the last write"),
            "{m}"
        );

        let timed = cfg(Limit::Iterations(10), Some(Duration::from_secs(3)));
        assert_eq!(timed.deadline(), Some(Duration::from_secs(3)));
        let mut b = fresh(&stop);
        b.deadline = timed.deadline();
        b.t0 = Some(ago(4));
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        let m = b.error(&timed, "sending with single to", e).to_string();
        assert!(m.contains("did not end within 3s (--timeout 3s)"), "{m}");
    }

    #[test]
    fn a_timeout_shorter_than_the_duration_is_refused() {
        let e = cfg(
            Limit::Duration(Duration::from_secs(5)),
            Some(Duration::from_secs(5)),
        )
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--timeout 5s is not longer than --duration 5s"),
            "{e}"
        );
        let e = cfg(Limit::Iterations(1), Some(Duration::ZERO))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--timeout 0s"), "{e}");
    }
}
