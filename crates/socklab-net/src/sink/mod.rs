//! The sink: a TCP server that reads and counts (`socklab sink`).
//!
//! It serves clients concurrently, forever: each connection on a thread of its own (at most
//! [`SinkConfig::max_conns`] at once; one more is refused with a line that says so), so an idle
//! client (`nc` left open) delays nobody, and each connection's figures (time, CPU from
//! `RUSAGE_THREAD`) are its own. A socklab client gets its counts back over the same connection
//! (see [`crate::protocol`]); a raw client (`nc`, `dd | nc`) is simply counted. A client that
//! dies mid-stream, stalls past the idle timeout or breaks the protocol costs only its own
//! connection; the sink goes on serving. Every blocking call wakes at least every [`TICK`], so
//! `stop()` ends the sink, open connections included, within about two ticks.
//!
//! A connection is sniffed into a [`Request`], then served by the code of its kind: a raw
//! stream, a `BULK/1` test, or a `BULK/2` test's control connection and its streams (up: the
//! sink reads; down: the sink sends with the client's write strategy), see [`multi`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use socklab_sys::errno;
use socklab_sys::usage::{getrusage, Usage, Who};

use crate::aligned::AlignedBuf;
use crate::error::{is_timeout, is_transient_accept_error};
use crate::iperf3::proto::{may_be_cookie, Cookie, COOKIE_LEN};
use crate::protocol::multi::{Join, TestHello};
use crate::protocol::{Hello, Ready, SinkResult, MAGIC, MAX_LINE};
use crate::NetError;

mod hostile;
mod iperf3;
mod iperf3_opts;
mod multi;
mod tls;
pub use tls::TLS_FINGERPRINT_KEY;

/// How often every blocking call of the sink wakes to look at the stop flag and the idle
/// clock (a socket timeout or a `poll` timeout; an active stream never waits for it).
pub const TICK: Duration = Duration::from_millis(100);

/// Connections served at once by default; one more is refused.
pub const DEFAULT_MAX_CONNS: usize = 256;

/// Read-buffer memory of all connections together, by default: a client may ask for reads of
/// up to 64 MiB, but not make the sink hold 256 of them. The `BULK/2` tests' rounds and their
/// sendfile source files count against it too.
pub const DEFAULT_BUFFER_BUDGET: usize = 512 << 20;

/// How the sink listens and reads.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Where to listen. `[::]:port` listens dual-stack.
    pub bind: SocketAddr,
    /// Bytes per `read()` for raw clients (socklab clients choose their own).
    pub read_size: usize,
    /// A connection silent for this long is dropped.
    pub idle_timeout: Duration,
    /// Connections served at once; a client beyond them is refused (`ERROR sink busy …`).
    pub max_conns: usize,
    /// Bytes of all connections together (read buffers, the tests' rounds and their sendfile
    /// source files); a request beyond them is refused.
    pub buffer_budget: usize,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            bind: SocketAddr::from(([0u16; 8], 5001)),
            read_size: 128 * 1024,
            idle_timeout: Duration::from_secs(30),
            max_conns: DEFAULT_MAX_CONNS,
            buffer_budget: DEFAULT_BUFFER_BUDGET,
        }
    }
}

/// How a connection was spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The socklab protocol (`BULK/1`): counts were sent back.
    Socklab,
    /// A raw byte stream: counted only.
    Raw,
    /// The control connection of a `BULK/2` test.
    Control {
        /// The test.
        test: u64,
        /// Its streams.
        streams: u32,
    },
    /// A stream of a `BULK/2` test.
    Stream {
        /// The test.
        test: u64,
        /// The stream.
        index: u32,
        /// The sink sent on it (its `reads` are then the sink's send calls).
        down: bool,
    },
    /// The control connection of an iperf3 test.
    Iperf3Control {
        /// Its streams.
        streams: u32,
    },
    /// Datagrams on the iperf3 UDP port counted apart from every test (reported when the
    /// sink stops, if any came while the port was bound for UDP tests).
    Iperf3UdpApart {
        /// From no stream of any test.
        strangers: u64,
        /// From a test's stream outside its counting (early, late, too short).
        late: u64,
    },
    /// A stream of an iperf3 test.
    Iperf3Stream {
        /// iperf3's id of the stream (1, 3, 4 …).
        id: i64,
        /// The sink sent on it (`-R`).
        reverse: bool,
    },
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Clean end of stream.
    Complete,
    /// The client reset the connection or vanished mid-stream.
    Aborted(String),
    /// Silent for longer than the idle timeout.
    IdleTimeout,
    /// The client broke the protocol, or the sink was busy; the reason was sent to it.
    Refused(String),
    /// The sink was stopped while the connection was open.
    Stopped,
}

/// What the sink saw on one connection.
#[derive(Debug, Clone)]
pub struct ConnReport {
    /// The client.
    pub peer: SocketAddr,
    /// Protocol spoken.
    pub mode: Mode,
    /// Counts (bytes, reads, CPU, elapsed, hash).
    pub result: SinkResult,
    /// How it ended.
    pub outcome: Outcome,
    /// A finished iperf3 test (on its control connection's report).
    pub iperf3: Option<Box<crate::iperf3::record::TestRecord>>,
}

impl ConnReport {
    /// One human line for the sink's log.
    pub fn line(&self) -> String {
        let secs = self.result.elapsed_ns as f64 / 1e9;
        let gbps = if secs > 0.0 {
            self.result.bytes as f64 * 8.0 / secs / 1e9
        } else {
            0.0
        };
        let how = match &self.outcome {
            Outcome::Complete => "complete".to_string(),
            // A reason may quote the peer: escaped, whatever built it.
            Outcome::Aborted(e) => format!("aborted ({})", socklab_units::text::line(e)),
            Outcome::IdleTimeout => "idle timeout".to_string(),
            Outcome::Refused(e) => format!("refused ({})", socklab_units::text::line(e)),
            Outcome::Stopped => "stopped with the sink".to_string(),
        };
        let what = match self.mode {
            Mode::Socklab => "socklab".to_string(),
            Mode::Raw => "raw".to_string(),
            Mode::Control { test, streams } => {
                return format!(
                    "{} control of test {test:016x} ({streams} streams): {how}",
                    self.peer
                )
            }
            Mode::Iperf3Control { streams } => match self.iperf3.as_deref() {
                Some(r) if !r.applied.is_empty() => format!(
                    "iperf3 control ({streams} streams; in effect: {})",
                    r.applied.join(", ")
                ),
                _ => format!("iperf3 control ({streams} streams)"),
            },
            Mode::Iperf3UdpApart { strangers, late } => {
                format!("iperf3 UDP outside any test ({strangers} from strangers, {late} late)")
            }
            Mode::Iperf3Stream { id, reverse } => {
                format!("iperf3 stream {id} {}", if reverse { "down" } else { "up" })
            }
            Mode::Stream { test, index, down } => format!(
                "test {test:016x} stream {index} {}",
                if down { "down" } else { "up" }
            ),
        };
        let calls = match self.mode {
            Mode::Stream { down: true, .. } | Mode::Iperf3Stream { reverse: true, .. } => "writes",
            _ => "reads",
        };
        format!(
            "{} {what}: {} bytes in {} {calls}, {:.3} s, {:.3} Gbit/s, {}",
            self.peer, self.result.bytes, self.result.reads, secs, gbps, how
        )
    }
}

/// A bound sink.
#[derive(Debug)]
pub struct Sink {
    listener: TcpListener,
    shared: Arc<Shared>,
    /// The iperf3 UDP reader, started with the sink (so its threads are all there once it
    /// listens) and joined when [`Sink::serve`] returns or the sink drops.
    udp: Option<JoinHandle<Option<ConnReport>>>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Some(h) = self.udp.take() {
            self.shared.stop.store(true, Ordering::SeqCst);
            let _ = h.join();
        }
    }
}

/// What the connection threads share with the accept loop.
#[derive(Debug)]
struct Shared {
    cfg: SinkConfig,
    /// Raised when the sink stops: every connection ends within a [`TICK`].
    stop: AtomicBool,
    buffers: BufferPool,
    /// The `BULK/2` tests whose control connection is open.
    tests: multi::Registry,
    /// The iperf3 tests whose control connection is open.
    iperf3: iperf3::Registry,
    /// The certificate of this run, for the tests that ask for TLS (`None`: it could not be made).
    tls: Option<tls::TlsServer>,
}

/// Read buffers: checked out per connection within a byte budget, a few kept for reuse (a
/// fresh buffer page-faults on its first reads, which a measured connection should not pay).
#[derive(Debug)]
struct BufferPool {
    budget: usize,
    state: Arc<Mutex<PoolState>>,
}

/// Bytes counted against the budget until this is dropped ([`BufferPool::charge`]).
#[derive(Debug)]
struct Charge {
    state: Arc<Mutex<PoolState>>,
    len: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.out = st.out.saturating_sub(self.len);
    }
}

#[derive(Debug, Default)]
struct PoolState {
    /// Bytes of the buffers connections hold now.
    out: usize,
    /// Buffers kept for reuse.
    idle: Vec<AlignedBuf>,
}

/// Bytes of idle buffers kept for reuse at most.
const POOL_KEEP: usize = 64 << 20;

impl BufferPool {
    /// A buffer of `len` bytes, or `Err(bytes in use)` when that would exceed the budget.
    fn take(&self, len: usize) -> Result<AlignedBuf, usize> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.out + len > self.budget {
            return Err(st.out);
        }
        st.out += len;
        let reuse = st.idle.iter().position(|b| b.len() == len);
        Ok(match reuse {
            Some(i) => st.idle.swap_remove(i),
            None => {
                drop(st);
                AlignedBuf::zeroed(len)
            }
        })
    }

    /// Counts `len` bytes held otherwise (a test's round, its sendfile file) against the
    /// budget until the [`Charge`] is dropped, or `Err(bytes in use)`.
    fn charge(&self, len: usize) -> Result<Charge, usize> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.out + len > self.budget {
            return Err(st.out);
        }
        st.out += len;
        Ok(Charge {
            state: self.state.clone(),
            len,
        })
    }

    /// Returns a buffer taken with [`BufferPool::take`].
    fn give(&self, buf: AlignedBuf) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.out = st.out.saturating_sub(buf.len());
        let kept: usize = st.idle.iter().map(AlignedBuf::len).sum();
        if kept + buf.len() <= POOL_KEEP {
            st.idle.push(buf);
        }
    }
}

/// Creates a listening TCP socket: `SO_REUSEADDR`, dual-stack for `[::]`, backlog 1024.
pub fn listen(addr: SocketAddr) -> Result<TcpListener, NetError> {
    let err = |source: io::Error| NetError::bind(addr, source);
    let sock =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        sock.set_only_v6(false).map_err(err)?;
    }
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(1024).map_err(err)?;
    Ok(sock.into())
}

impl Sink {
    /// Binds the listening socket. For the default dual-stack address it falls back to IPv4
    /// where the host has no IPv6.
    pub fn bind(cfg: SinkConfig) -> Result<Sink, NetError> {
        if cfg.read_size == 0 || cfg.read_size > crate::protocol::MAX_READ_SIZE {
            return Err(NetError::Invalid(format!(
                "`read_size` {} is out of range: use 1 to 64M",
                cfg.read_size
            )));
        }
        if cfg.max_conns == 0 {
            return Err(NetError::Invalid(
                "`max_conns` 0: serve at least one connection at a time".into(),
            ));
        }
        let listener = match listen(cfg.bind) {
            Err(NetError::Bind { source, .. })
                if cfg.bind.is_ipv6()
                    && cfg.bind.ip().is_unspecified()
                    && source.raw_os_error() == Some(errno::EAFNOSUPPORT) =>
            {
                listen(SocketAddr::from(([0, 0, 0, 0], cfg.bind.port())))?
            }
            other => other?,
        };
        let udp_addr = listener
            .local_addr()
            .map_err(|e| NetError::bind(cfg.bind, e))?;
        let buffers = BufferPool {
            budget: cfg.buffer_budget.max(cfg.read_size),
            state: Arc::default(),
        };
        let shared = Arc::new(Shared {
            cfg,
            stop: AtomicBool::new(false),
            buffers,
            tests: multi::Registry::default(),
            iperf3: iperf3::Registry::new(udp_addr),
            tls: tls::TlsServer::new().ok(),
        });
        let udp = iperf3::udp::spawn(&shared);
        Ok(Sink {
            listener,
            shared,
            udp,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves connections concurrently until `stop()` returns true (checked every [`TICK`]),
    /// calling `log` (on this thread) as each connection ends. When stopped, it ends the open
    /// connections (each within a tick), logs them and returns: within about 200 ms.
    pub fn serve(
        &mut self,
        stop: &dyn Fn() -> bool,
        log: &mut dyn FnMut(&ConnReport),
    ) -> Result<(), NetError> {
        use socklab_sys::io::{poll_flags, poll_one};
        let (tx, rx) = mpsc::channel::<ConnReport>();
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        let mut accepted = 0u64;
        let tick_ms = TICK.as_millis() as i32;
        let udp = self.udp.take().or_else(|| iperf3::udp::spawn(&self.shared));
        let result = loop {
            while let Ok(r) = rx.try_recv() {
                log(&r);
            }
            conns.retain(|h| !h.is_finished());
            if stop() {
                break Ok(());
            }
            let ready = match poll_one(self.listener.as_fd(), poll_flags::IN, tick_ms) {
                Ok(n) => n,
                Err(e) => break Err(NetError::io("poll on the listening socket", e)),
            };
            if ready == 0 {
                continue;
            }
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    // Connections that ended since the last turn free their slots now.
                    conns.retain(|h| !h.is_finished());
                    accepted += 1;
                    if conns.len() >= self.shared.cfg.max_conns {
                        let why = format!(
                            "sink busy: {} connections in progress, the most it serves at once (the sink's `max_conns`); try again later",
                            conns.len()
                        );
                        log(&refuse(stream, peer, why));
                        continue;
                    }
                    let shared = self.shared.clone();
                    let tx = tx.clone();
                    let seq = accepted;
                    let spawned =
                        std::thread::Builder::new()
                            .name("sink-conn".into())
                            .spawn(move || {
                                let _ = tx.send(serve_conn(stream, peer, &shared, seq));
                            });
                    match spawned {
                        Ok(h) => conns.push(h),
                        // The stream went with the closure and is closed.
                        Err(e) => log(&report(
                            peer,
                            Mode::Raw,
                            Outcome::Refused(format!("cannot start a thread for it: {e}")),
                        )),
                    }
                }
                // Out of descriptors or a client that vanished before accept: keep serving.
                Err(e) if is_transient_accept_error(&e) => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => break Err(NetError::io("accept", e)),
            }
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        for h in conns {
            let _ = h.join();
        }
        drop(tx);
        while let Ok(r) = rx.try_recv() {
            log(&r);
        }
        if let Some(r) = udp.and_then(|h| h.join().ok()).flatten() {
            log(&r);
        }
        self.shared.stop.store(false, Ordering::SeqCst);
        result
    }
}

/// A report without counts.
fn report(peer: SocketAddr, mode: Mode, outcome: Outcome) -> ConnReport {
    ConnReport {
        peer,
        mode,
        result: SinkResult::default(),
        outcome,
        iperf3: None,
    }
}

/// Turns a client away without a thread: an `ERROR` line (a socklab client reads it as the
/// answer to its request; `nc` shows it), then close. What the client already sent is read
/// first (without waiting), so the close is a FIN and the line is not lost to a reset.
fn refuse(stream: TcpStream, peer: SocketAddr, why: String) -> ConnReport {
    let mut s = &stream;
    let _ = stream.set_nonblocking(true);
    let mut junk = [0u8; MAX_LINE];
    // An iperf3 client gets iperf3's ACCESS_DENIED, and prints that the server is busy; its
    // cookie follows the connect at once (a silent client costs this loop 20 ms at most).
    let _ = socklab_sys::io::poll_one(stream.as_fd(), socklab_sys::io::poll_flags::IN, 20);
    match s.read(&mut junk) {
        Ok(n @ 1..) if may_be_cookie(&junk[..n.min(COOKIE_LEN)]) => {
            let _ = s.write(&crate::iperf3::refusal::access_denied());
        }
        _ => drop(s.write(format!("ERROR {why}\n").as_bytes())),
    }
    let _ = stream.shutdown(Shutdown::Write);
    report(peer, Mode::Raw, Outcome::Refused(why))
}

/// What a connection asks for, once sniffed.
enum Request {
    /// A raw stream; its first bytes (already read) count.
    Raw(Vec<u8>),
    /// A socklab bulk test (`SOCKLAB BULK/1`).
    Bulk(Hello),
    /// The control connection of a test of several streams (`SOCKLAB BULK/2`).
    Test(Box<TestHello>),
    /// A stream joining a test (`SOCKLAB JOIN/2`).
    Join(Join),
    /// An iperf3 control connection or stream: its cookie.
    Iperf3(Cookie),
}

/// One connection, on its own thread: blocking reads and writes that wake every [`TICK`] to
/// look at the stop flag and the idle clock.
struct Conn<'a> {
    stream: TcpStream,
    sh: &'a Shared,
    /// Since when no byte moved (set at the first tick without progress).
    idle_since: Option<Instant>,
    /// The test this connection belongs to, given up when its control connection ended.
    test_abort: Option<Arc<AtomicBool>>,
    /// Its place in the order the listener accepted connections (iperf3's streams).
    accepted: u64,
    /// TLS, once a stream of a test with `tls` has done its handshake: reads go through it.
    tls: Option<Box<crate::tlsio::TlsStream>>,
}

impl Conn<'_> {
    /// What to do after a call returned without progress: go on, or end the connection.
    fn waited(&mut self, e: io::Error) -> Result<(), Outcome> {
        if !(is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted) {
            return Err(conn_error(&e));
        }
        self.halted()?;
        let since = *self.idle_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.sh.cfg.idle_timeout {
            return Err(Outcome::IdleTimeout);
        }
        Ok(())
    }

    /// One `read()` that returned bytes, or end of stream (0). The stop flag and the test's
    /// end are looked at after every read that returned bytes too (two atomic loads): a client
    /// that sends a byte every 50 ms never lets a read wait a tick, and held the sink past
    /// SIGTERM (issue 26 item 2).
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Outcome> {
        loop {
            let r = match self.tls.as_deref_mut() {
                Some(t) => t.read(&self.stream, buf),
                None => self.stream.read(buf),
            };
            match r {
                Ok(n) => {
                    self.idle_since = None;
                    if n > 0 {
                        self.halted()?;
                    }
                    return Ok(n);
                }
                Err(e) => self.waited(e)?,
            }
        }
    }

    /// `Err` when the sink stopped or this connection's test was given up.
    fn halted(&self) -> Result<(), Outcome> {
        if self.sh.stop.load(Ordering::Relaxed) {
            return Err(Outcome::Stopped);
        }
        if self
            .test_abort
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Relaxed))
        {
            return Err(Outcome::Aborted("its test was given up".into()));
        }
        Ok(())
    }

    /// Writes all of `bytes` (a control line).
    fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), Outcome> {
        while !bytes.is_empty() {
            match self.stream.write(bytes) {
                Ok(0) => return Err(Outcome::Aborted("the connection accepts no data".into())),
                Ok(n) => {
                    self.idle_since = None;
                    bytes = &bytes[n..];
                }
                Err(e) => self.waited(e)?,
            }
        }
        Ok(())
    }

    /// Reads the first bytes: a socklab request line, or the start of a raw stream. `Err`
    /// carries the outcome, and whether the client spoke socklab (to answer it `ERROR`).
    fn sniff(&mut self, result: &mut SinkResult) -> Result<Request, (Outcome, bool)> {
        let mut head = Vec::with_capacity(64);
        let mut byte_buf = [0u8; MAX_LINE];
        loop {
            // While it may be an iperf3 cookie, read no further than its end.
            let want = if head.is_empty() || may_be_cookie(&head) {
                COOKIE_LEN - head.len()
            } else {
                MAX_LINE - head.len()
            };
            let n = self.read(&mut byte_buf[..want]).map_err(|o| (o, false))?;
            if n == 0 {
                return Ok(Request::Raw(head));
            }
            result.reads += 1;
            head.extend_from_slice(&byte_buf[..n]);
            if may_be_cookie(&head) {
                match Cookie::parse(&head) {
                    Ok(c) => return Ok(Request::Iperf3(c)),
                    Err(_) => continue,
                }
            }
            let k = head.len().min(MAGIC.len());
            if head[..k] != MAGIC.as_bytes()[..k] {
                return Ok(Request::Raw(head));
            }
            if let Some(nl) = head.iter().position(|&b| b == b'\n') {
                if nl + 1 != head.len() {
                    return Err((Outcome::Refused("data before READY".into()), true));
                }
                let line = String::from_utf8_lossy(&head[..nl]).into_owned();
                let kind = line[MAGIC.len()..].split_whitespace().next().unwrap_or("");
                let request = match kind {
                    "BULK/2" => TestHello::parse(&line).map(|h| Request::Test(Box::new(h))),
                    "JOIN/2" => Join::parse(&line).map(Request::Join),
                    _ => Hello::parse(&line).map(Request::Bulk),
                };
                return request.map_err(|e| (Outcome::Refused(e), true));
            }
            if head.len() >= MAX_LINE {
                return Err((
                    Outcome::Refused(format!("control line longer than {MAX_LINE} bytes")),
                    true,
                ));
            }
        }
    }

    /// Reads to end of stream into `buf`, counting (and hashing).
    fn receive(
        &mut self,
        buf: &mut AlignedBuf,
        result: &mut SinkResult,
        hasher: &mut Option<blake3::Hasher>,
    ) -> Outcome {
        if self.tls.is_some() {
            return tls::receive(self, result, hasher);
        }
        loop {
            match self.read(buf.as_mut_slice()) {
                Ok(0) => return Outcome::Complete,
                Ok(n) => {
                    result.reads += 1;
                    result.bytes += n as u64;
                    if let Some(h) = hasher.as_mut() {
                        h.update(&buf.as_slice()[..n]);
                    }
                }
                Err(o) => return o,
            }
        }
    }
}

/// Serves one connection (on its own thread) and reports it. Its clock and CPU count from
/// here, when it is served, never while it waited for another connection.
fn serve_conn(stream: TcpStream, peer: SocketAddr, sh: &Shared, accepted: u64) -> ConnReport {
    let cpu0 = getrusage(Who::Thread);
    let t0 = Instant::now();
    let mut result = SinkResult::default();
    let _ = stream.set_read_timeout(Some(TICK));
    let _ = stream.set_write_timeout(Some(TICK));
    let mut c = Conn {
        stream,
        sh,
        idle_since: None,
        test_abort: None,
        accepted,
        tls: None,
    };
    let done =
        |result: SinkResult, mode, outcome| finish(peer, mode, result, cpu0, t0, outcome, None);
    let request = match c.sniff(&mut result) {
        Ok(r) => r,
        Err((outcome, socklab)) => {
            let mode = if socklab { Mode::Socklab } else { Mode::Raw };
            if let Outcome::Refused(why) = &outcome {
                let _ = c.write_all(format!("ERROR {why}\n").as_bytes());
            }
            return done(result, mode, outcome);
        }
    };
    match request {
        Request::Test(h) => multi::control(c, &h, peer, cpu0),
        Request::Join(j) => multi::join(c, j, peer),
        Request::Iperf3(cookie) => iperf3::serve(c, cookie, peer, cpu0),
        Request::Raw(head) => {
            result.bytes = head.len() as u64;
            if head.is_empty() {
                // Connected and closed without a byte.
                return done(result, Mode::Raw, Outcome::Complete);
            }
            let mut buf = match sh.buffers.take(sh.cfg.read_size) {
                Ok(b) => b,
                Err(used) => return done(result, Mode::Raw, busy(sh, used)),
            };
            let outcome = c.receive(&mut buf, &mut result, &mut None);
            sh.buffers.give(buf);
            done(result, Mode::Raw, outcome)
        }
        Request::Bulk(h) => {
            result.reads = 0;
            let mut buf = match sh.buffers.take(h.read_size) {
                Ok(b) => b,
                Err(used) => {
                    let outcome = busy(sh, used);
                    if let Outcome::Refused(why) = &outcome {
                        let _ = c.write_all(format!("ERROR {why}\n").as_bytes());
                    }
                    return done(result, Mode::Socklab, outcome);
                }
            };
            let rcvbuf = SockRef::from(&c.stream).recv_buffer_size().unwrap_or(0);
            let ready = Ready {
                read_size: h.read_size,
                rcvbuf,
            };
            if let Err(outcome) = c.write_all(ready.emit().as_bytes()) {
                sh.buffers.give(buf);
                return done(result, Mode::Socklab, outcome);
            }
            // The test's clock starts when READY is sent.
            let t0 = Instant::now();
            let mut hasher = h.verify.then(blake3::Hasher::new);
            let outcome = c.receive(&mut buf, &mut result, &mut hasher);
            sh.buffers.give(buf);
            let r = finish(peer, Mode::Socklab, result, cpu0, t0, outcome, hasher);
            if r.outcome == Outcome::Complete {
                // Best effort: a client that already left gets EPIPE, which we ignore.
                let _ = c.write_all(r.result.emit().as_bytes());
            }
            r
        }
    }
}

/// The refusal of a request whose read buffer would exceed the budget.
fn busy(sh: &Shared, used: usize) -> Outcome {
    Outcome::Refused(format!(
        "sink busy: its connections hold {} MiB of read buffers and rounds of {} MiB allowed; try again later or with a smaller read_size",
        used >> 20,
        sh.buffers.budget >> 20
    ))
}

/// The connection's report: elapsed since `t0`, the thread's CPU since `cpu0`, the hash.
fn finish(
    peer: SocketAddr,
    mode: Mode,
    mut result: SinkResult,
    cpu0: Usage,
    t0: Instant,
    outcome: Outcome,
    hasher: Option<blake3::Hasher>,
) -> ConnReport {
    result.elapsed_ns = t0.elapsed().as_nanos() as u64;
    let cpu = getrusage(Who::Thread).since(&cpu0);
    result.user_us = cpu.user.as_micros() as u64;
    result.sys_us = cpu.sys.as_micros() as u64;
    result.hash = hasher.map(|h| h.finalize().to_hex().to_string());
    ConnReport {
        peer,
        mode,
        result,
        outcome,
        iperf3: None,
    }
}

fn conn_error(e: &io::Error) -> Outcome {
    if is_timeout(e) {
        Outcome::IdleTimeout
    } else {
        Outcome::Aborted(e.to_string())
    }
}
