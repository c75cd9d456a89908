//! The request/response client (`socklab pingpong`): sends a message, waits for its echo, and
//! times every round trip (seed 001: 500 round trips of 29 bytes over one TCP connection).
//!
//! - TCP: one connection, `count` round trips of `size` bytes; or, with
//!   `new_connection_per_message`, connect + one round trip + close per message (where TCP Fast
//!   Open matters: the round trip then includes the connect).
//! - UDP: a connected socket, one datagram per message, resent after a per-try timeout up to
//!   `retries` times, then counted lost.
//!
//! Every message is `size` bytes of printable ASCII (no NUL, so a C server using string
//! functions sees all of it): the sequence number in decimal, zero-padded to 8 digits (its low
//! digits when `size` < 8), then the seed's message repeated. What counts as the reply is
//! [`Reply`]: the exact echo (the default, every byte compared with what was sent), the first
//! read of at least one byte (`any`), or a fixed number of bytes. Buffers are allocated before
//! the timed loop; a round trip allocates nothing.
//! Round trips are timed with [`Instant`] (monotonic) and recorded in nanoseconds.
//!
//! Large TCP messages do not deadlock against an echo server: the message is sent with
//! `MSG_DONTWAIT`, and while the socket buffer is full the client reads the echo that is already
//! coming back. A message that fits in the socket buffer costs one `send()` and the `read()`s of
//! its reply, as in the seed.

use std::fmt;
use std::io::{self, Read};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::str::FromStr;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use socket2::{Domain, Protocol, Socket, Type};
use socklab_sys::io::{poll_flags, poll_one};

use crate::aligned::AlignedBuf;
use crate::error::is_timeout;
use crate::sockopt::{self, OptSet, Side};
use crate::{NetError, ParseNameError};
use socklab_units::{format_duration, format_size, parse_size};

/// Largest UDP message: one IPv4 datagram (65535 - 20 IP - 8 UDP header bytes).
pub const MAX_UDP_SIZE: usize = 65507;

/// Largest TCP message.
pub const MAX_TCP_SIZE: usize = 16 << 20;

/// The seed-001 client's message; payloads repeat it after their sequence number.
pub const SEED_MESSAGE: &[u8] = b"asdadqwDSDQWD13123ewadSADASDA";

/// `MSG_DONTWAIT`: one non-blocking `send()` on a blocking socket.
use socklab_sys::msg::MSG_DONTWAIT;

/// `EINPROGRESS`: a non-blocking Fast Open `send()` whose SYN left without data (no cookie
/// yet); the data follows once the connection is up.
use socklab_sys::errno::EINPROGRESS;

/// Stop is polled before every 64th round trip.
const STOP_EVERY: u64 = 64;

/// The reply buffer of `--reply any` (at least; the message size if larger), as the classic
/// client's `recv(buf, 2000)` but for any datagram.
const ANY_REPLY_BUF: usize = 64 << 10;

/// At most this many bytes of an unexpected reply are quoted in an error.
const QUOTE_MAX: usize = 40;

/// What counts as the reply to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reply {
    /// The exact echo of the message (`echo`, the default): every byte is compared.
    #[default]
    Echo,
    /// The first read of at least one byte (`any`), whatever it holds, as the classic client
    /// loop `send(); recv(buf, 2000)`. Over UDP: the first datagram.
    Any,
    /// Exactly this many bytes, whatever they hold (`BYTES`, e.g. `5`). Over UDP: a datagram
    /// of this size.
    Bytes(usize),
}

impl FromStr for Reply {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Reply, ParseNameError> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "echo" => Ok(Reply::Echo),
            "any" => Ok(Reply::Any),
            _ => match parse_size(t).ok().and_then(|n| usize::try_from(n).ok()) {
                Some(n) if n > 0 => Ok(Reply::Bytes(n)),
                _ => Err(ParseNameError::unknown(
                    "reply",
                    s,
                    "use echo (the exact echo), any (the first read) or a byte count such as 5",
                )),
            },
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Echo => f.write_str("echo"),
            Reply::Any => f.write_str("any"),
            Reply::Bytes(n) => f.write_str(&format_size(*n as u64)),
        }
    }
}

/// Everything that defines one ping-pong test (one repetition).
#[derive(Debug, Clone)]
pub struct PingConfig {
    /// The echo server.
    pub to: SocketAddr,
    /// UDP instead of TCP.
    pub udp: bool,
    /// Bytes per message: 1 to 65507 for UDP, 1 to 16M for TCP.
    pub size: usize,
    /// Round trips per repetition.
    pub count: u64,
    /// Socket options of the client side.
    pub opts: OptSet,
    /// The longest wait for one reply. TCP: the whole reply, from the send of the message to
    /// the last byte of its reply (however it trickles in); a slower reply fails the
    /// repetition, one within it is a sample (e.g. a message held by TCP_CORK's ~200 ms timer).
    /// With a connection per message the time starts after the connect. UDP: how long one try
    /// waits for its datagram before the message is sent again.
    pub timeout: Duration,
    /// UDP: resends of an unanswered message before it counts as lost.
    pub retries: u32,
    /// What counts as the reply.
    pub reply: Reply,
    /// TCP: connect, one round trip, close, for every message.
    pub new_connection_per_message: bool,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
}

impl Default for PingConfig {
    fn default() -> Self {
        PingConfig {
            to: SocketAddr::from(([127, 0, 0, 1], 7000)),
            udp: false,
            size: SEED_MESSAGE.len(),
            count: 500,
            opts: OptSet::default(),
            timeout: Duration::from_secs(5),
            retries: 3,
            reply: Reply::Echo,
            new_connection_per_message: false,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl PingConfig {
    /// Checks the parameters, naming the bad value and the fix.
    pub fn validate(&self) -> Result<(), NetError> {
        let bad = |m: String| Err(NetError::Invalid(m));
        if self.size == 0 {
            return bad(
                "`size` 0: a message needs at least one byte (e.g. `size` 29, the seed's message)"
                    .into(),
            );
        }
        if self.udp && self.size > MAX_UDP_SIZE {
            return bad(format!(
                "`size` {} does not fit in one UDP datagram: use 1 to {MAX_UDP_SIZE}, or drop `udp`",
                self.size
            ));
        }
        if !self.udp && self.size > MAX_TCP_SIZE {
            return bad(format!(
                "`size` {} is more than 16M: use 1 to 16M",
                self.size
            ));
        }
        if self.count == 0 {
            return bad(
                "`count` 0: make at least one round trip (e.g. `count` 500, the seed's figure)"
                    .into(),
            );
        }
        if self.timeout.is_zero() {
            return bad("`timeout` 0s: wait some time for a reply, e.g. `timeout` 1s".into());
        }
        if self.connect_timeout.is_zero() {
            return bad(
                "`connect_timeout` 0s: allow some time to connect, e.g. `connect_timeout` 5s"
                    .into(),
            );
        }
        if let Reply::Bytes(n) = self.reply {
            let max = if self.udp { MAX_UDP_SIZE } else { MAX_TCP_SIZE };
            if n > max {
                return bad(format!(
                    "`reply` {n}: a reply of more than {} bytes cannot be read: use 1 to {max}, any or echo",
                    format_size(max as u64)
                ));
            }
        }
        if self.udp && self.new_connection_per_message {
            return bad(
                "`new_connection` is for TCP: UDP has no connections; drop one of the two".into(),
            );
        }
        self.opts.validate(self.udp)
    }
}

/// What one repetition measured.
#[derive(Debug, Clone)]
pub struct PingResult {
    /// One value per completed round trip, in nanoseconds (3 significant figures). For a UDP
    /// message that needed resends, the round trip counts from its first send.
    pub rtt_ns: Histogram<u64>,
    /// Wall time of the whole repetition (the seed's figure: the time for 500 round trips).
    /// With one connection, from after the connect to the last reply; with a connection per
    /// message, from before the first connect.
    pub total_ns: u64,
    /// Round trips whose reply came back.
    pub completed: u64,
    /// UDP: messages given up after `retries` resends.
    pub lost: u64,
    /// UDP: replies that arrived after their try had timed out (discarded).
    pub late: u64,
    /// UDP: resends.
    pub retries_sent: u64,
    /// TCP connections made.
    pub connects: u64,
    /// TCP connect times, nanoseconds, one per connection. With Fast Open and a cookie,
    /// `connect()` returns at once (the SYN leaves with the first send), so this is near zero and
    /// the handshake is part of the round trip.
    pub connect_ns: Histogram<u64>,
    /// The client socket's options as read back after connecting (first connection).
    pub effective: Vec<(String, String)>,
}

/// A histogram of nanoseconds, sized up front for one minute so that recording does not
/// allocate (it grows, allocating, for longer values).
fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3)
        .expect("1 ns .. 60 s at 3 significant figures is a valid histogram");
    h.auto(true);
    h
}

pub(crate) fn record(h: &mut Histogram<u64>, d: Duration) {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

impl PingResult {
    pub(crate) fn new() -> PingResult {
        PingResult {
            rtt_ns: histogram(),
            total_ns: 0,
            completed: 0,
            lost: 0,
            late: 0,
            retries_sent: 0,
            connects: 0,
            connect_ns: histogram(),
            effective: Vec::new(),
        }
    }
}

/// Runs one repetition against the echo server at `cfg.to`. `stop()` is polled before every
/// 64th round trip: when it turns true the test is abandoned with [`NetError::Interrupted`].
pub fn run(cfg: &PingConfig, stop: &dyn Fn() -> bool) -> Result<PingResult, NetError> {
    cfg.validate()?;
    let mut msg = AlignedBuf::zeroed(cfg.size);
    for (b, p) in msg
        .as_mut_slice()
        .iter_mut()
        .zip(SEED_MESSAGE.iter().cycle())
    {
        *b = *p;
    }
    if cfg.udp {
        run_udp(cfg, stop, msg.as_mut_slice())
    } else {
        run_tcp(cfg, stop, msg.as_mut_slice())
    }
}

/// Writes the sequence number in decimal into the first 8 bytes, zero-padded (its low digits
/// for shorter messages, and modulo 10^8).
fn stamp(msg: &mut [u8], seq: u64) {
    let k = msg.len().min(8);
    let mut v = seq;
    for b in msg[..k].iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// The first bytes of `bytes`, quoted and escaped, with `…` when there are more.
fn quote(bytes: &[u8]) -> String {
    let k = bytes.len().min(QUOTE_MAX);
    let more = if bytes.len() > k { "…" } else { "" };
    format!("\"{}\"{more}", bytes[..k].escape_ascii())
}

/// What `cfg` expects as a reply, for errors: `expected 64 bytes echoed`.
fn expected(cfg: &PingConfig) -> String {
    match cfg.reply {
        Reply::Echo => format!("expected {} bytes echoed", cfg.size),
        Reply::Any => "expected a reply of at least one byte".into(),
        Reply::Bytes(n) => format!("expected a {n}-byte reply"),
    }
}

/// The hint of an error about a reply that is not the expected one.
fn reply_hint(cfg: &PingConfig) -> &'static str {
    match cfg.reply {
        Reply::Echo => {
            " (not an echo server? measure it with `reply` any, or `reply` BYTES for a fixed-size answer)"
        }
        _ => " (`reply` any takes whatever the first read returns)",
    }
}

/// Where the reply first differs from the message, if it does.
fn first_difference(msg: &[u8], reply: &[u8]) -> Option<usize> {
    if msg == reply {
        return None;
    }
    Some(
        msg.iter()
            .zip(reply)
            .position(|(a, b)| a != b)
            .unwrap_or(msg.len().min(reply.len())),
    )
}

fn connect_error(cfg: &PingConfig, done: u64, source: io::Error) -> NetError {
    let after = if done > 0 {
        format!(" after {done} of {} round trips", cfg.count)
    } else {
        String::new()
    };
    NetError::io(
        format!(
            "cannot connect to {}{after} (is `socklab echo` with `port` {} running there?)",
            cfg.to,
            cfg.to.port()
        ),
        source,
    )
}

/// A peer that went away or an I/O error during round trip `done + 1`.
fn peer_error(cfg: &PingConfig, done: u64, source: io::Error) -> NetError {
    let gone = matches!(
        source.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected
    );
    let context = if gone {
        format!(
            "{} went away after {done} of {} round trips (is the {}echo server still running?)",
            cfg.to,
            cfg.count,
            if cfg.udp { "UDP " } else { "" }
        )
    } else {
        format!("round trip {} of {} with {}", done + 1, cfg.count, cfg.to)
    };
    NetError::io(context, source)
}

/// How a TCP round trip failed; `got` is how many bytes of the reply had arrived.
enum TripError {
    /// End of stream.
    Closed { got: usize },
    /// The reply was not complete within the timeout.
    Timeout { got: usize },
    /// The whole reply came, but after the timeout (`took` after the send began).
    Late { took: Duration },
    /// The server sent more than the reply's size.
    TooMuch { got: usize },
    /// `--reply echo`: the reply differs from the message at byte `at`.
    Mismatch { at: usize, got: usize },
    /// Any other error.
    Io(io::Error),
}

impl TripError {
    /// The error of round trip `done + 1`; `reply` is the reply buffer.
    fn into_net(self, cfg: &PingConfig, done: u64, reply: &[u8]) -> NetError {
        let peer = cfg.to.to_string();
        let arrived = |got: usize| format!("got {got} bytes: {}", quote(&reply[..got]));
        let detail = match self {
            TripError::Closed { got } => {
                let mid = if got > 0 {
                    format!(" in the middle of a reply ({}, {})", expected(cfg), arrived(got))
                } else {
                    String::new()
                };
                format!(
                    "closed the connection{mid} after {done} of {} round trips (is the server still running?)",
                    cfg.count
                )
            }
            TripError::Timeout { got: 0 } => format!(
                "no reply within the timeout of {} after {done} of {} round trips (a slower server needs a longer one: `timeout` {}, or timeout = \"{}\" in an experiment file)",
                format_duration(cfg.timeout),
                cfg.count,
                format_duration(cfg.timeout * 10),
                format_duration(cfg.timeout * 10),
            ),
            TripError::Timeout { got } => format!(
                "the reply to round trip {} was not complete within the timeout of {} (it bounds the whole reply): {}, {}; a slower server needs a longer `timeout`{}",
                done + 1,
                format_duration(cfg.timeout),
                expected(cfg),
                arrived(got),
                reply_hint(cfg)
            ),
            TripError::Late { took } => format!(
                "the reply to round trip {} was complete only after {}, past the timeout of {} after {done} of {} round trips (a slower server needs a longer one: `timeout` {})",
                done + 1,
                format_duration(took),
                format_duration(cfg.timeout),
                cfg.count,
                format_duration(cfg.timeout * 10),
            ),
            TripError::TooMuch { got } => format!(
                "replied to round trip {} with more bytes than expected: {}, {} and more{}",
                done + 1,
                expected(cfg),
                arrived(got),
                reply_hint(cfg)
            ),
            TripError::Mismatch { at, got } => format!(
                "the reply to round trip {} differs from the message at byte {at} of {}: {}, {}{}",
                done + 1,
                cfg.size,
                expected(cfg),
                arrived(got),
                reply_hint(cfg)
            ),
            TripError::Io(e) => return peer_error(cfg, done, e),
        };
        NetError::Protocol { peer, detail }
    }
}

/// One TCP round trip on a blocking socket: sends `msg`, then reads its reply into `reply`
/// (as [`Reply`] says what that is; `reply` holds at least that many bytes). Returns the size
/// of the reply. With `--reply echo` every byte is compared with the message as it arrives.
///
/// The whole reply is due by `deadline`. The fast path reads no clock: the first read after a
/// send that did not wait blocks at most the socket's `SO_RCVTIMEO` (the timeout, set once),
/// and the caller checks the round trip's time against the timeout. Every other wait (the send
/// finding the buffer full, the read after a short read) is a `poll()` for what is left until
/// `deadline`, so a reply that trickles in cannot stretch the wait read by read.
fn round_trip(
    sock: &Socket,
    msg: &[u8],
    reply: &mut [u8],
    want: Reply,
    rearm: bool,
    deadline: Instant,
) -> Result<usize, TripError> {
    // At least `need` bytes make the reply; a read fills at most `cap`.
    let (need, cap) = match want {
        Reply::Echo => (msg.len(), msg.len()),
        Reply::Bytes(n) => (n, n),
        Reply::Any => (1, reply.len()),
    };
    let (mut sent, mut got) = (0, 0);
    // Whether a wait has happened in this round trip: from then on every wait is bounded by
    // what is left until `deadline`.
    let mut waited = false;
    let mut read_some = |got: &mut usize| -> Result<(), TripError> {
        if *got == cap {
            return Err(TripError::TooMuch { got: *got });
        }
        let from = *got;
        match (&*sock).read(&mut reply[from..cap]) {
            Ok(0) => return Err(TripError::Closed { got: from }),
            Ok(n) => *got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) if is_timeout(&e) => return Err(TripError::Timeout { got: from }),
            Err(e) => return Err(TripError::Io(e)),
        }
        if want == Reply::Echo {
            if let Some(d) = first_difference(&msg[from..*got], &reply[from..*got]) {
                return Err(TripError::Mismatch {
                    at: from + d,
                    got: *got,
                });
            }
        }
        if rearm {
            // Best effort: TCP_QUICKACK is a hint, and a failure here changes no byte.
            let _ = sockopt::rearm_quickack(sock);
        }
        Ok(())
    };
    while sent < msg.len() {
        match sock.send_with_flags(&msg[sent..], MSG_DONTWAIT) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.raw_os_error() == Some(EINPROGRESS) =>
            {
                // The send buffer is full (or the connection is not up yet): the server may be
                // blocked writing the echo back to us, so read what has come back meanwhile.
                waited = true;
                let ms = ms_left(deadline).ok_or(TripError::Timeout { got })?;
                let ready = poll_one(sock.as_fd(), poll_flags::IN | poll_flags::OUT, ms)
                    .map_err(TripError::Io)?;
                if ready == 0 {
                    return Err(TripError::Timeout { got });
                }
                if ready & (poll_flags::IN | poll_flags::ERR | poll_flags::HUP) != 0 {
                    read_some(&mut got)?;
                }
            }
            Err(e) => return Err(TripError::Io(e)),
        }
    }
    while got < need {
        if waited {
            // Only what is left of the deadline: the reply is bounded as a whole.
            let ms = ms_left(deadline).ok_or(TripError::Timeout { got })?;
            if poll_one(sock.as_fd(), poll_flags::IN, ms).map_err(TripError::Io)? == 0 {
                return Err(TripError::Timeout { got });
            }
        }
        read_some(&mut got)?;
        waited = true;
    }
    Ok(got)
}

/// The milliseconds left until `deadline`, rounded up (a `poll()` never ends early), or `None`
/// once it has passed.
fn ms_left(deadline: Instant) -> Option<i32> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return None;
    }
    let ms = left.as_nanos().div_ceil(1_000_000);
    Some(i32::try_from(ms).unwrap_or(i32::MAX))
}

fn tcp_socket(cfg: &PingConfig) -> Result<Socket, NetError> {
    let sock = Socket::new(
        Domain::for_address(cfg.to),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| NetError::io("socket", e))?;
    cfg.opts.apply_client(&sock)?;
    Ok(sock)
}

/// The size of the reply buffer for `cfg`.
fn reply_buf_len(cfg: &PingConfig) -> usize {
    match cfg.reply {
        Reply::Echo => cfg.size,
        Reply::Bytes(n) => n,
        Reply::Any => cfg.size.max(ANY_REPLY_BUF),
    }
}

/// A round trip's outcome, failed as [`TripError::Late`] when its reply took longer than the
/// timeout (`took`: from the send to the last byte): no sample is ever longer than the timeout.
fn within(cfg: &PingConfig, r: Result<usize, TripError>, took: Duration) -> Result<(), TripError> {
    match r {
        Ok(_) if took > cfg.timeout => Err(TripError::Late { took }),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

fn run_tcp(
    cfg: &PingConfig,
    stop: &dyn Fn() -> bool,
    msg: &mut [u8],
) -> Result<PingResult, NetError> {
    let mut res = PingResult::new();
    let mut reply = AlignedBuf::zeroed(reply_buf_len(cfg));
    let reply = reply.as_mut_slice();
    let rearm = cfg.opts.rearm_quickack(Side::Client);
    let prepare = |sock: &Socket| {
        sock.set_read_timeout(Some(cfg.timeout))
            .map_err(|e| NetError::io("SO_RCVTIMEO", e))
    };

    if !cfg.new_connection_per_message {
        let sock = tcp_socket(cfg)?;
        let t = Instant::now();
        sock.connect_timeout(&cfg.to.into(), cfg.connect_timeout)
            .map_err(|e| connect_error(cfg, 0, e))?;
        record(&mut res.connect_ns, t.elapsed());
        res.connects = 1;
        res.effective = cfg.opts.read_back(&sock, Side::Client);
        prepare(&sock)?;
        let t0 = Instant::now();
        for i in 0..cfg.count {
            if i % STOP_EVERY == 0 && stop() {
                return Err(NetError::Interrupted);
            }
            stamp(msg, i);
            let t = Instant::now();
            let r = round_trip(&sock, msg, reply, cfg.reply, rearm, t + cfg.timeout);
            let rtt = t.elapsed();
            within(cfg, r, rtt).map_err(|e| e.into_net(cfg, i, reply))?;
            record(&mut res.rtt_ns, rtt);
            res.completed += 1;
        }
        res.total_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        return Ok(res);
    }

    // A connection per message: the round trip includes the connect (and, with Fast Open, the
    // message rides on the SYN: apply_client set TCP_FASTOPEN_CONNECT, so connect() returns at
    // once and the first send() carries the data).
    let t0 = Instant::now();
    for i in 0..cfg.count {
        if i % STOP_EVERY == 0 && stop() {
            return Err(NetError::Interrupted);
        }
        stamp(msg, i);
        let sock = tcp_socket(cfg)?;
        let t = Instant::now();
        sock.connect_timeout(&cfg.to.into(), cfg.connect_timeout)
            .map_err(|e| connect_error(cfg, i, e))?;
        let connected = t.elapsed();
        prepare(&sock)?;
        // The reply's time starts after the connect (`connect_timeout` bounds that).
        let r = round_trip(
            &sock,
            msg,
            reply,
            cfg.reply,
            rearm,
            t + connected + cfg.timeout,
        );
        let rtt = t.elapsed();
        within(cfg, r, rtt.saturating_sub(connected)).map_err(|e| e.into_net(cfg, i, reply))?;
        record(&mut res.rtt_ns, rtt);
        record(&mut res.connect_ns, connected);
        res.connects += 1;
        if i == 0 {
            res.effective = cfg.opts.read_back(&sock, Side::Client);
        }
        res.completed += 1;
        drop(sock);
    }
    res.total_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    Ok(res)
}

fn run_udp(
    cfg: &PingConfig,
    stop: &dyn Fn() -> bool,
    msg: &mut [u8],
) -> Result<PingResult, NetError> {
    let mut res = PingResult::new();
    let sock = Socket::new(
        Domain::for_address(cfg.to),
        Type::DGRAM,
        Some(Protocol::UDP),
    )
    .map_err(|e| NetError::io("socket", e))?;
    cfg.opts.apply_client(&sock)?;
    sock.connect(&cfg.to.into())
        .map_err(|e| connect_error(cfg, 0, e))?;
    res.effective = cfg.opts.read_back(&sock, Side::Client);
    let sock: UdpSocket = sock.into();
    let set_timeout = |d: Duration| {
        sock.set_read_timeout(Some(d))
            .map_err(|e| NetError::io("SO_RCVTIMEO", e))
    };
    set_timeout(cfg.timeout)?;
    // One byte more than any datagram the check accepts, so that a longer one is seen as such.
    let mut reply = AlignedBuf::zeroed(reply_buf_len(cfg) + 1);
    let reply = reply.as_mut_slice();
    let size = cfg.size;
    let k = size.min(8);

    let t0 = Instant::now();
    for i in 0..cfg.count {
        if i % STOP_EVERY == 0 && stop() {
            return Err(NetError::Interrupted);
        }
        stamp(msg, i);
        let t = Instant::now();
        let mut tries = 0u32;
        let answered = loop {
            loop {
                match sock.send(msg) {
                    Ok(_) => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(peer_error(cfg, res.completed, e)),
                }
            }
            let deadline = Instant::now() + cfg.timeout;
            let mut shortened = false;
            let answered = loop {
                let n = match sock.recv(reply) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if is_timeout(&e) => break None,
                    Err(e) => return Err(peer_error(cfg, res.completed, e)),
                };
                let now = Instant::now();
                let discard = match cfg.reply {
                    Reply::Echo if n == size && reply[..n] == *msg => break Some(now),
                    // The echo of an earlier message whose try timed out: discard it and wait
                    // for the rest of this try's time.
                    Reply::Echo if n == size && reply[k..n] == msg[k..] => {
                        res.late += 1;
                        true
                    }
                    Reply::Any if n > 0 => break Some(now),
                    // An empty datagram is no reply: wait for one.
                    Reply::Any => true,
                    Reply::Bytes(b) if n == b => break Some(now),
                    _ => false,
                };
                if discard {
                    let left = deadline.saturating_duration_since(now);
                    if left.is_zero() {
                        break None;
                    }
                    set_timeout(left)?;
                    shortened = true;
                    continue;
                }
                let at = match cfg.reply {
                    Reply::Echo => format!(
                        " differs from the message at byte {}",
                        first_difference(msg, &reply[..n]).unwrap_or(0)
                    ),
                    _ => " is not one".into(),
                };
                return Err(NetError::Protocol {
                    peer: cfg.to.to_string(),
                    detail: format!(
                        "the reply to round trip {}{at}: {}, got {n} bytes: {}{}",
                        i + 1,
                        expected(cfg),
                        quote(&reply[..n]),
                        reply_hint(cfg)
                    ),
                });
            };
            if shortened {
                set_timeout(cfg.timeout)?;
            }
            if answered.is_some() || tries >= cfg.retries {
                break answered;
            }
            tries += 1;
            res.retries_sent += 1;
        };
        match answered {
            Some(at) => {
                record(&mut res.rtt_ns, at.duration_since(t));
                res.completed += 1;
            }
            None => res.lost += 1,
        }
    }
    res.total_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_fill_the_first_bytes() {
        // Decimal, zero-padded to 8 digits: the payload is printable (no NUL).
        let mut m = [b'x'; 12];
        stamp(&mut m, 12_345_678);
        assert_eq!(&m, b"12345678xxxx");
        stamp(&mut m, 42);
        assert_eq!(&m[..8], b"00000042");
        let mut short = [0u8; 3];
        stamp(&mut short, 12_345_678);
        assert_eq!(&short, b"678");
        assert_eq!(first_difference(b"abc", b"abc"), None);
        assert_eq!(first_difference(b"abc", b"abd"), Some(2));
        assert_eq!(first_difference(b"abc", b"ab"), Some(2));
    }

    #[test]
    fn replies_parse_print_and_quote() {
        for (text, r) in [
            ("echo", Reply::Echo),
            ("any", Reply::Any),
            ("5", Reply::Bytes(5)),
            ("1K", Reply::Bytes(1024)),
        ] {
            assert_eq!(text.parse::<Reply>().unwrap(), r);
            assert_eq!(r.to_string(), text);
        }
        assert!("0".parse::<Reply>().is_err());
        assert_eq!(quote(b"pong\n\0"), "\"pong\\n\\x00\"");
        let long = [b'a'; 100];
        assert_eq!(quote(&long), format!("\"{}\"…", "a".repeat(QUOTE_MAX)));
    }

    #[test]
    fn a_whole_reply_after_the_timeout_is_no_sample() {
        // The reply's last byte can come after the timeout only by a timer's slack (the waits
        // are bounded by the deadline): it fails the round trip all the same.
        let cfg = PingConfig {
            timeout: Duration::from_secs(1),
            ..PingConfig::default()
        };
        let ms = Duration::from_millis;
        assert!(within(&cfg, Ok(29), ms(1000)).is_ok());
        let Err(e) = within(&cfg, Ok(29), ms(1001)) else {
            panic!("a late reply passed")
        };
        let text = e.into_net(&cfg, 3, &[]).to_string();
        assert!(
            text.contains("round trip 4 was complete only after 1001ms, past the timeout of 1s"),
            "{text}"
        );
        assert!(matches!(
            within(&cfg, Err(TripError::Timeout { got: 0 }), ms(5)),
            Err(TripError::Timeout { got: 0 })
        ));
        // The deadline's milliseconds round up, so a poll never ends before it.
        assert_eq!(ms_left(Instant::now() - ms(1)), None);
        let left = ms_left(Instant::now() + Duration::from_micros(1500)).unwrap();
        assert!((1..=2).contains(&left), "{left}");
    }
}
