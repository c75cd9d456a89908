//! `bulk --udp --to iperf3://HOST:PORT`: socklab's UDP bulk against an unmodified `iperf3 -s`
//! (issue 27 part 2). The control exchange is [`crate::iperf3::client`] (sans I/O), the UDP
//! stream's connect datagram, header and receiver accounting [`crate::iperf3::udp_client`];
//! this file is their I/O: the control connection, one UDP stream, the paced sender
//! ([`Pacer`], `sendmmsg` batches of iperf3-headed datagrams) or, with `reverse`, the receiver
//! that counts the server's datagrams as iperf3 does. The server's own figures (its
//! datagrams, lost, jitter, CPU) come back from the results exchange ([`UdpRun::server`]).
//!
//! Every wait is bounded: each step of the exchange by [`STEP_WAIT`], the data by the test's
//! duration, each blocking send or receive by 100 ms; `stop()` is polled at least that often.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socklab_sys::mmsg::{send_batch, MAX_BATCH};
use socklab_sys::sockopt::{set, IntOpt};
use socklab_sys::usage::{getrusage, Usage, Who};

use super::pacer::Pacer;
use crate::bulk::iperf3::{between_tests, BUSY_WAIT};
use crate::iperf3::client::{
    make_cookie, stream_id, Action, Client, ClientError, ClientParams, Phase, STEP_WAIT,
};
use crate::iperf3::proto::{Results, StreamResult};
use crate::iperf3::udp_client::{is_connect_reply, Header, RecvCounts, CONNECT_MSG};
use crate::NetError;

/// How often the control connection is read, and each data socket's send or receive bound.
const TICK: Duration = Duration::from_millis(20);
/// A data socket's blocking bound.
const DATA_TICK: Duration = Duration::from_millis(100);
/// The largest datagram iperf3 takes (`len` over UDP).
pub const MAX_LEN: usize = 65507;

/// One test against an iperf3 server over UDP.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// The server's control address (its UDP port is the same).
    pub to: SocketAddr,
    /// Offered rate, bits of UDP payload per second (iperf3's `bandwidth`).
    pub rate_bps: u64,
    /// Bytes of UDP payload per datagram, iperf3's header included (its `len`).
    pub size: usize,
    /// How long to send.
    pub duration: Duration,
    /// The server sends, socklab receives (iperf3 -R).
    pub reverse: bool,
    /// The sending socket's `SO_SNDBUF`.
    pub sndbuf: Option<usize>,
    /// The receiving socket's `SO_RCVBUF`.
    pub rcvbuf: Option<usize>,
}

/// What socklab's side of the stream measured.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Datagrams sent (up).
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Send system calls, and those the kernel refused for the moment.
    pub calls: u64,
    /// Refused sends.
    pub errors: u64,
    /// What arrived (down), counted as iperf3 counts.
    pub recv: RecvCounts,
    /// Seconds from `TEST_RUNNING` to the last datagram sent or received.
    pub seconds: f64,
    /// The data thread's CPU.
    pub cpu: Usage,
}

/// What one test measured.
#[derive(Debug, Clone)]
pub struct UdpRun {
    /// socklab's side.
    pub side: Side,
    /// Seconds from `TEST_RUNNING` to `TEST_END`.
    pub span: f64,
    /// This process's CPU over the test.
    pub cpu: Usage,
    /// The server's results message.
    pub server: Results,
}

impl UdpRun {
    /// The server's stream figures, summed: (bytes, packets, lost).
    pub fn server_totals(&self) -> (u64, u64, u64) {
        self.server.streams.iter().fold((0, 0, 0), |(b, p, l), s| {
            let n = |v: i64| u64::try_from(v).unwrap_or(0);
            (b + s.bytes, p + n(s.packets), l + n(s.errors))
        })
    }

    /// The server's jitter in seconds (its first stream's).
    pub fn server_jitter(&self) -> f64 {
        self.server.streams.first().map_or(0.0, |s| s.jitter)
    }
}

/// The parameters sent for `cfg`.
pub fn params(cfg: &UdpConfig) -> ClientParams {
    ClientParams {
        udp: true,
        time: cfg.duration.as_secs_f64().ceil().max(1.0) as u64,
        parallel: 1,
        reverse: cfg.reverse,
        len: cfg.size as u64,
        bandwidth: Some(cfg.rate_bps),
        pacing_timer: 1000,
        ..ClientParams::default()
    }
}

/// Runs one test; `stop()` ends it early ([`NetError::Interrupted`], the server told
/// `CLIENT_TERMINATE`). A busy server is asked again for [`BUSY_WAIT`].
pub fn run(cfg: &UdpConfig, stop: &dyn Fn() -> bool) -> Result<UdpRun, NetError> {
    if cfg.size < Header::len(false) || cfg.size > MAX_LEN {
        return Err(NetError::Invalid(format!(
            "`size` {} with iperf3://: iperf3's UDP datagrams are {} to {MAX_LEN} bytes",
            cfg.size,
            Header::len(false)
        )));
    }
    let first = Instant::now();
    loop {
        match attempt(cfg, stop) {
            Err(None) if first.elapsed() < BUSY_WAIT => {
                let until = Instant::now() + Duration::from_millis(250);
                while Instant::now() < until {
                    if stop() {
                        return Err(NetError::Interrupted);
                    }
                    std::thread::sleep(Duration::from_millis(25));
                }
            }
            Err(None) => {
                return Err(NetError::Timeout(format!(
                    "{} (asked again for {}s)",
                    ClientError::Busy.message(&cfg.to.to_string()),
                    BUSY_WAIT.as_secs()
                )))
            }
            Err(Some(e)) => return Err(e),
            Ok(r) => return Ok(r),
        }
    }
}

/// `Err(None)`: the server is busy.
type Attempt<T> = Result<T, Option<NetError>>;

fn reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

fn attempt(cfg: &UdpConfig, stop: &dyn Fn() -> bool) -> Attempt<UdpRun> {
    let peer = cfg.to.to_string();
    let mut ctl = TcpStream::connect_timeout(&cfg.to, STEP_WAIT).map_err(|source| {
        // Between two tests (the previous repetition's): asked again, as a busy server is.
        (!between_tests(&source)).then(|| NetError::Io {
            context: format!(
                "cannot connect to the iperf3 server at {peer} (is `iperf3 -s` running there?)"
            ),
            source,
        })
    })?;
    let _ = ctl.set_nodelay(true);
    ctl.set_read_timeout(Some(TICK))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    let mut client = Client::new(Instant::now(), make_cookie(seed), &params(cfg));
    let halt = AtomicBool::new(false);
    std::thread::scope(|s| {
        let r = drive(cfg, stop, s, &halt, &mut ctl, &mut client);
        if r.is_err() {
            halt.store(true, Ordering::SeqCst);
            if let Some(bytes) = client.abort() {
                let _ = ctl.write_all(&bytes);
            }
            let _ = ctl.shutdown(Shutdown::Both);
        }
        r
    })
}

fn drive<'s, 'e>(
    cfg: &'e UdpConfig,
    stop: &dyn Fn() -> bool,
    scope: &'s std::thread::Scope<'s, 'e>,
    halt: &'e AtomicBool,
    ctl: &mut TcpStream,
    client: &mut Client,
) -> Attempt<UdpRun> {
    let peer = cfg.to.to_string();
    let mut sock = None;
    let mut data: Option<std::thread::ScopedJoinHandle<'s, Result<Side, NetError>>> = None;
    let mut side: Option<Side> = None;
    let (mut t0, mut t_end) = (None::<Instant>, None::<Instant>);
    let mut cpu0 = getrusage(Who::Process);
    let mut buf = [0u8; 4096];
    loop {
        while let Some(a) = client.poll_action() {
            match a {
                Action::Send(bytes) => {
                    if let Err(e) = ctl.write_all(&bytes) {
                        if client.phase() == Phase::Params && reset(&e) {
                            return Err(None);
                        }
                        return Err(Some(NetError::io(
                            format!("writing the control connection of {peer}"),
                            e,
                        )));
                    }
                }
                Action::ConnectStreams { .. } => {
                    sock = Some(connect_stream(cfg, stop)?);
                    client.streams_connected(Instant::now());
                }
                Action::StartStreams => {
                    let s = sock.take().ok_or_else(|| {
                        Some(NetError::Invalid("TEST_RUNNING before the stream".into()))
                    })?;
                    let start = Instant::now();
                    t0 = Some(start);
                    cpu0 = getrusage(Who::Process);
                    data = Some(scope.spawn(move || {
                        if cfg.reverse {
                            receive(&s, start, halt)
                        } else {
                            send(cfg, &s, start, halt)
                        }
                    }));
                }
                Action::WantResults => {
                    halt.store(true, Ordering::SeqCst);
                    let got = match data.take() {
                        Some(h) => h.join().unwrap_or_else(|_| {
                            Err(NetError::Invalid("the UDP stream's thread panicked".into()))
                        })?,
                        None => Side::default(),
                    };
                    let span = t_end.zip(t0).map_or(0.0, |(e, s)| (e - s).as_secs_f64());
                    let cpu = getrusage(Who::Process).since(&cpu0);
                    client.results(Instant::now(), &ours(cfg, &got, span, &cpu));
                    side = Some(got);
                }
                Action::Done(server) => {
                    return Ok(UdpRun {
                        side: side.take().unwrap_or_default(),
                        span: t_end.zip(t0).map_or(0.0, |(e, s)| (e - s).as_secs_f64()),
                        cpu: getrusage(Who::Process).since(&cpu0),
                        server: *server,
                    })
                }
                Action::Fail(ClientError::Busy) => return Err(None),
                Action::Fail(e) => {
                    return Err(Some(NetError::Protocol {
                        peer: peer.clone(),
                        detail: e.message(&peer),
                    }))
                }
            }
        }
        if stop() {
            return Err(Some(NetError::Interrupted));
        }
        if client.phase() == Phase::Flowing {
            let sender_done = data.as_ref().is_some_and(|h| h.is_finished()) && !cfg.reverse;
            let timed = t0.is_some_and(|t| t.elapsed() >= cfg.duration);
            if sender_done || (cfg.reverse && timed) {
                // The receiver stops counting at TEST_END, as iperf3's does.
                halt.store(true, Ordering::SeqCst);
                t_end = Some(Instant::now());
                client.end_test(Instant::now());
                continue;
            }
        }
        let early = client.phase() == Phase::Params;
        match ctl.read(&mut buf) {
            Ok(0) if early => return Err(None),
            Err(e) if early && reset(&e) => return Err(None),
            Ok(0) => client.control_closed(),
            Ok(k) => client.control_bytes(Instant::now(), &buf[..k]),
            Err(e) if crate::partial::is_no_progress(&e) => client.tick(Instant::now()),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => client.control_closed(),
            Err(e) => {
                return Err(Some(NetError::io(
                    format!("reading the control connection of {peer}"),
                    e,
                )))
            }
        }
    }
}

/// The UDP stream: a socket connected to the server's port that has sent [`CONNECT_MSG`] and
/// had its answer, within [`STEP_WAIT`].
fn connect_stream(cfg: &UdpConfig, stop: &dyn Fn() -> bool) -> Result<UdpSocket, NetError> {
    let any: SocketAddr = if cfg.to.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = UdpSocket::bind(any).map_err(|source| NetError::Bind {
        addr: any,
        source,
        hint: "",
    })?;
    s.connect(cfg.to).map_err(|source| NetError::Connect {
        addr: cfg.to,
        source,
    })?;
    s.set_read_timeout(Some(DATA_TICK))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    s.set_write_timeout(Some(DATA_TICK))
        .map_err(|e| NetError::io("SO_SNDTIMEO", e))?;
    let force = |opt, v: Option<usize>| {
        if let Some(b) = v {
            let _ = set(s.as_fd(), opt, i32::try_from(b).unwrap_or(i32::MAX));
        }
    };
    force(IntOpt::SoSndBufForce, cfg.sndbuf);
    force(IntOpt::SoRcvBufForce, cfg.rcvbuf);
    let peer = cfg.to;
    s.send(&CONNECT_MSG).map_err(|e| {
        NetError::io(
            format!("sending iperf3's UDP connect datagram to {peer}"),
            e,
        )
    })?;
    let until = Instant::now() + STEP_WAIT;
    let mut b = [0u8; 64];
    loop {
        if stop() {
            return Err(NetError::Interrupted);
        }
        match s.recv(&mut b) {
            Ok(4) if is_connect_reply(&b[..4]) => return Ok(s),
            // Anything else (a stray datagram) is not the answer: wait on.
            Ok(_) => {}
            Err(e) if crate::partial::is_no_progress(&e) => {}
            Err(e) => {
                return Err(NetError::io(
                    format!("waiting for the iperf3 server at {peer} to answer the UDP stream (is its UDP port reachable?)"),
                    e,
                ))
            }
        }
        if Instant::now() >= until {
            return Err(NetError::Timeout(format!(
                "the iperf3 server at {peer} did not answer the UDP stream's connect datagram within {}s",
                STEP_WAIT.as_secs()
            )));
        }
    }
}

fn transient(e: &io::Error) -> bool {
    crate::error::is_timeout(e)
        || matches!(
            e.raw_os_error(),
            Some(
                socklab_sys::errno::ENOBUFS
                    | socklab_sys::errno::ECONNREFUSED
                    | socklab_sys::errno::EINTR
            )
        )
}

/// The paced sender: `size`-byte datagrams with iperf3's header at `rate_bps` for
/// `duration` (or until `halt`).
fn send(cfg: &UdpConfig, s: &UdpSocket, t0: Instant, halt: &AtomicBool) -> Result<Side, NetError> {
    let cpu0 = getrusage(Who::Thread);
    let size = cfg.size;
    let mut buf = vec![0u8; MAX_BATCH * size];
    let mut pacer = Pacer::new(cfg.rate_bps, size);
    let end_ns = u64::try_from(cfg.duration.as_nanos()).unwrap_or(u64::MAX);
    let mut side = Side::default();
    let mut last = t0;
    loop {
        let elapsed = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if elapsed >= end_ns || halt.load(Ordering::Relaxed) {
            break;
        }
        let due = pacer.due(elapsed).min(MAX_BATCH as u64) as usize;
        if due == 0 {
            let wait = pacer.next_due_ns().min(end_ns).saturating_sub(elapsed);
            std::thread::sleep(Duration::from_nanos(wait.min(10_000_000)));
            continue;
        }
        let stamp = t0.elapsed();
        for (i, d) in buf.chunks_mut(size).take(due).enumerate() {
            Header::at(stamp, side.sent + 1 + i as u64).write(d, false);
        }
        side.calls += 1;
        match send_batch(s.as_fd(), &buf[..due * size], size) {
            Ok(n) => {
                side.sent += n as u64;
                pacer.sent(n as u64);
                last = Instant::now();
            }
            Err(e) if transient(&e) => side.errors += 1,
            Err(e) => return Err(NetError::io(format!("send to {}", cfg.to), e)),
        }
    }
    side.sent_bytes = side.sent * size as u64;
    side.seconds = last.duration_since(t0).as_secs_f64();
    side.cpu = getrusage(Who::Thread).since(&cpu0);
    Ok(side)
}

/// The receiver: counts the server's datagrams until `halt`.
fn receive(s: &UdpSocket, t0: Instant, halt: &AtomicBool) -> Result<Side, NetError> {
    let cpu0 = getrusage(Who::Thread);
    let mut side = Side::default();
    let mut b = vec![0u8; MAX_LEN];
    let mut last = t0;
    while !halt.load(Ordering::Relaxed) {
        match s.recv(&mut b) {
            Ok(n) => {
                last = Instant::now();
                side.recv
                    .datagram(false, &b[..n], last.duration_since(t0).as_secs_f64());
            }
            Err(e) if crate::partial::is_no_progress(&e) || transient(&e) => {}
            Err(e) => return Err(NetError::io("receiving the iperf3 server's datagrams", e)),
        }
    }
    side.seconds = last.duration_since(t0).as_secs_f64();
    side.cpu = getrusage(Who::Thread).since(&cpu0);
    Ok(side)
}

/// The client's results message.
fn ours(cfg: &UdpConfig, side: &Side, span: f64, cpu: &Usage) -> Results {
    let pct = |x: Duration| {
        if span > 0.0 {
            100.0 * x.as_secs_f64() / span
        } else {
            0.0
        }
    };
    let (bytes, jitter, errors, packets) = if cfg.reverse {
        let r = &side.recv;
        (r.bytes, r.jitter, r.lost, r.packets)
    } else {
        (side.sent_bytes, 0.0, 0, side.sent)
    };
    Results {
        cpu_util_total: pct(cpu.user + cpu.sys),
        cpu_util_user: pct(cpu.user),
        cpu_util_system: pct(cpu.sys),
        sender_has_retransmits: if cfg.reverse { -1 } else { 0 },
        congestion_used: None,
        server_output_text: None,
        streams: vec![StreamResult {
            id: stream_id(0),
            bytes,
            retransmits: -1,
            jitter,
            errors: i64::try_from(errors).unwrap_or(i64::MAX),
            packets: i64::try_from(packets).unwrap_or(i64::MAX),
            start_time: 0.0,
            end_time: span,
        }],
    }
}
