//! The bulk sender (`socklab bulk`): connects to a sink, sends rounds of buffers with one write
//! strategy, and collects both sides' counts.
//!
//! Timing: the clock starts when the sink has answered READY and stops when its RESULT line
//! arrives, i.e. when the sink has read every byte (end-to-end, like iperf3's receiver figure).
//! The time until the last write returned is kept too (`send_seconds`).

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

use crate::error::is_timeout;
use crate::partial::{send_range_with, write_all_vectored_with, write_all_with};
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
    /// Interval time series (`--interval`, `--omit`); off by default.
    pub sampling: Sampling,
}

impl BulkConfig {
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
fn connect(cfg: &BulkConfig) -> Result<(TcpStream, String, usize), NetError> {
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
    sock.connect_timeout(&cfg.to.into(), cfg.connect_timeout)
        .map_err(|source| NetError::Connect {
            addr: cfg.to,
            source,
        })?;
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

/// Reads one `\n`-terminated control line (without over-reading: the peer sends nothing after it
/// until we act).
fn read_line(stream: &mut TcpStream, what: &str) -> Result<String, NetError> {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "peer".into());
    let mut line = Vec::with_capacity(128);
    let mut buf = [0u8; MAX_LINE];
    loop {
        let n = match stream.read(&mut buf[..MAX_LINE - line.len()]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => {
                return Err(NetError::Protocol {
                    peer,
                    detail: format!("no {what} line in time: is it a `socklab sink`?"),
                })
            }
            Err(e) => return Err(NetError::io(format!("reading {what} from {peer}"), e)),
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

    /// Sends one round; returns the send calls made.
    fn round(&mut self, sock: BorrowedFd<'_>, payload: &Payload) -> io::Result<u64> {
        match self {
            Sender::Write => {
                let mut calls = 0;
                for i in 0..payload.nbufs() {
                    calls += write_all_with(payload.buf(i), |b| sysio::write(sock, b))?;
                }
                Ok(calls)
            }
            Sender::Single => write_all_with(payload.round(), |b| sysio::write(sock, b)),
            Sender::Vectored {
                template,
                scratch,
                zerocopy,
                use_sendmsg,
            } => {
                scratch.copy_from_slice(template);
                match zerocopy {
                    None if *use_sendmsg => {
                        write_all_vectored_with(scratch, |b| sysio::sendmsg(sock, b, 0))
                    }
                    None => write_all_vectored_with(scratch, |b| sysio::writev(sock, b)),
                    Some((done, issued)) => {
                        let calls = write_all_vectored_with(scratch, |b| loop {
                            match sysio::sendmsg(sock, b, zerocopy::MSG_ZEROCOPY) {
                                Ok(n) => {
                                    *issued += 1;
                                    return Ok(n);
                                }
                                // Too many unacknowledged zerocopy sends: wait for completions.
                                Err(e) if e.raw_os_error() == Some(socklab_sys::errno::ENOBUFS) => {
                                    sysio::poll_one(sock, sysio::poll_flags::ERR, 100)?;
                                    zerocopy::reap(sock, done)?;
                                }
                                Err(e) => return Err(e),
                            }
                        })?;
                        zerocopy::reap(sock, done)?;
                        Ok(calls)
                    }
                }
            }
            Sender::Sendfile(file) => {
                let ffd = file.as_fd();
                send_range_with(payload.round_len(), |off, left| {
                    let mut o = off as i64;
                    sysio::sendfile(sock, ffd, &mut o, left)
                })
            }
            Sender::Splice { r, w, cap } => {
                let round = payload.round();
                let (r, w, cap) = (r.as_fd(), w.as_fd(), *cap);
                let mut calls = 0;
                let mut off = 0;
                while off < round.len() {
                    let end = (off + cap).min(round.len());
                    let n = loop {
                        match sysio::vmsplice(w, &[IoSlice::new(&round[off..end])]) {
                            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                            Ok(n) => break n,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    };
                    calls += 1;
                    calls += send_range_with(n, |_, left| sysio::splice(r, sock, left, true))?;
                    off += n;
                }
                Ok(calls)
            }
        }
    }

    /// Waits for outstanding zerocopy completions (at most `timeout`).
    fn drain(
        &mut self,
        sock: BorrowedFd<'_>,
        timeout: Duration,
    ) -> io::Result<Option<Completions>> {
        let Sender::Vectored {
            zerocopy: Some((done, issued)),
            ..
        } = self
        else {
            return Ok(None);
        };
        let deadline = Instant::now() + timeout;
        while done.completed < *issued && Instant::now() < deadline {
            sysio::poll_one(sock, sysio::poll_flags::ERR, 50)?;
            zerocopy::reap(sock, done)?;
        }
        Ok(Some(*done))
    }
}

/// Runs one bulk test against the sink at `cfg.to`. `stop()` is polled after every round: when
/// it turns true the test is abandoned with [`NetError::Interrupted`].
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
    let (mut stream, cc, sndbuf) = connect(cfg)?;
    let peer = cfg.to.to_string();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let hello = Hello {
        read_size: cfg.read_size,
        verify: cfg.verify,
    };
    stream
        .write_all(hello.emit().as_bytes())
        .map_err(|e| NetError::io(format!("sending the request to {peer}"), e))?;
    let ready =
        Ready::parse(&read_line(&mut stream, "READY")?).map_err(|detail| NetError::Protocol {
            peer: peer.clone(),
            detail,
        })?;

    let sock = stream.as_fd();
    let mut sender = Sender::new(cfg.strategy, &payload, sock)?;
    let round_len = payload.round_len() as u64;
    let max_rounds = match cfg.limit {
        Limit::Iterations(n) => n,
        Limit::Bytes(b) => b.div_ceil(round_len),
        Limit::Duration(_) => u64::MAX,
    };
    let deadline = match cfg.limit {
        Limit::Duration(d) => Some(d),
        _ => None,
    };

    let cpu0 = getrusage(Who::Thread);
    let t0 = Instant::now();
    let series = StreamSeries::start(sock, cfg.sampling, t0, live)?;
    let mut rounds = 0u64;
    let mut syscalls = 0u64;
    while rounds < max_rounds {
        syscalls += sender
            .round(sock, &payload)
            .map_err(|e| NetError::io(format!("sending to {peer} with {}", cfg.strategy), e))?;
        rounds += 1;
        series.wrote(rounds * round_len);
        if let Some(d) = deadline {
            if t0.elapsed() >= d {
                break;
            }
        }
        if stop() {
            return Err(NetError::Interrupted);
        }
    }
    let send_seconds = t0.elapsed().as_secs_f64();
    let zc = sender
        .drain(sock, Duration::from_secs(10))
        .map_err(|e| NetError::io("reaping zerocopy completions", e))?;
    sysio::shutdown_write(sock).map_err(|e| NetError::io("shutdown", e))?;
    // The sink answers once it has read everything: allow time proportional to the data.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let line = read_line(&mut stream, "RESULT")?;
    let elapsed = series.end(t0);
    let seconds = elapsed.as_secs_f64();
    let sender_cpu = getrusage(Who::Thread).since(&cpu0);
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
