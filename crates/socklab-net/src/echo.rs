//! The echo server (`socklab echo`): sends back exactly the bytes it receives.
//!
//! TCP: one thread per connection; each thread reads up to `max_message` bytes and writes them
//! back, until the peer closes, resets, stays silent past the idle timeout, or `stop()` turns
//! true. (The classic C echo server echoed `strlen()+1` bytes, one more than it received; this
//! one echoes exactly what `read()` returned.) A connection that fails costs only its own thread.
//!
//! UDP: one loop that sends every datagram back to its sender.
//!
//! Socket options come from an [`OptSet`]: [`OptSet::apply_listener`] before `bind()`,
//! [`OptSet::apply_accepted`] on every accepted socket. `SO_REUSEADDR` is not forced: the option
//! set decides.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use socklab_sys::errno;
use socklab_sys::io::{poll_flags, poll_one};

use crate::aligned::AlignedBuf;
use crate::error::{is_timeout, is_transient_accept_error};
use crate::sockopt::{self, OptSet, Side};
use crate::sockperf::serve::End;
use crate::sockperf::wire;
use crate::NetError;

/// How often `stop()` is polled (accept loop, idle connections, blocked writes, UDP receive).
const POLL: Duration = Duration::from_millis(200);

/// Largest read buffer (`max_message`) the server accepts.
pub const MAX_MESSAGE: usize = 64 << 20;

/// How the echo server listens.
#[derive(Debug, Clone)]
pub struct EchoConfig {
    /// Where to listen. `[::]:port` listens dual-stack.
    pub bind: SocketAddr,
    /// UDP instead of TCP.
    pub udp: bool,
    /// Socket options of the server side.
    pub opts: OptSet,
    /// A TCP connection silent for this long is dropped.
    pub idle_timeout: Duration,
    /// Read buffer size: bytes per `read()` (TCP) and largest datagram echoed (UDP).
    pub max_message: usize,
}

impl Default for EchoConfig {
    fn default() -> Self {
        EchoConfig {
            bind: SocketAddr::from(([0u16; 8], 7000)),
            udp: false,
            opts: OptSet::default(),
            idle_timeout: Duration::from_secs(30),
            max_message: 64 * 1024,
        }
    }
}

/// How a TCP connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnEnd {
    /// The client closed the connection.
    Complete,
    /// The client reset the connection or an I/O error ended it.
    Aborted(String),
    /// Silent for longer than the idle timeout.
    IdleTimeout,
    /// `stop()` turned true (or the server is shutting down).
    Stopped,
}

/// What the server reports to its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EchoEvent {
    /// A TCP connection was accepted.
    Accepted {
        /// The client.
        peer: SocketAddr,
    },
    /// A TCP connection ended.
    Closed {
        /// The client.
        peer: SocketAddr,
        /// Bytes received (and echoed, unless the connection ended mid-write).
        bytes: u64,
        /// `read()` calls that returned data.
        messages: u64,
        /// How it ended.
        end: ConnEnd,
        /// The server-side options as the kernel reported them on this connection, read back
        /// with `getsockopt` right after they were applied.
        effective: Vec<(String, String)>,
    },
    /// Something went wrong that did not stop the server (a refused socket option on one
    /// connection, a failed accept, an oversized datagram, a failed `send_to`).
    Error {
        /// The client, when known.
        peer: Option<SocketAddr>,
        /// What happened.
        what: String,
    },
}

impl EchoEvent {
    /// One human line for the server's log.
    pub fn line(&self) -> String {
        match self {
            EchoEvent::Accepted { peer } => format!("{peer} connected"),
            EchoEvent::Closed {
                peer,
                bytes,
                messages,
                end,
                ..
            } => {
                let how = match end {
                    ConnEnd::Complete => "closed".to_string(),
                    ConnEnd::Aborted(e) => format!("aborted ({})", socklab_units::text::line(e)),
                    ConnEnd::IdleTimeout => "idle timeout".to_string(),
                    ConnEnd::Stopped => "stopped".to_string(),
                };
                format!("{peer}: echoed {bytes} bytes in {messages} reads, {how}")
            }
            EchoEvent::Error {
                peer: Some(peer),
                what,
            } => format!("{peer}: {}", socklab_units::text::line(what)),
            EchoEvent::Error { peer: None, what } => socklab_units::text::line(what),
        }
    }
}

/// What the server did between `serve()` and its return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EchoStats {
    /// TCP connections accepted (0 for UDP, which has no connections).
    pub connections: u64,
    /// Bytes received.
    pub bytes: u64,
    /// `read()` calls that returned data (TCP) or datagrams received (UDP).
    pub messages: u64,
}

#[derive(Debug)]
enum Listener {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

/// A bound echo server.
#[derive(Debug)]
pub struct EchoServer {
    sock: Listener,
    cfg: EchoConfig,
}

/// The error of a failed socket/bind/listen, with the same hints as [`crate::sink::listen`].
fn bind_error(addr: SocketAddr, source: io::Error) -> NetError {
    NetError::bind(addr, source)
}

fn open(addr: SocketAddr, cfg: &EchoConfig) -> Result<Listener, NetError> {
    let (ty, proto) = if cfg.udp {
        (Type::DGRAM, Protocol::UDP)
    } else {
        (Type::STREAM, Protocol::TCP)
    };
    let sock =
        Socket::new(Domain::for_address(addr), ty, Some(proto)).map_err(|e| bind_error(addr, e))?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        sock.set_only_v6(false).map_err(|e| bind_error(addr, e))?;
    }
    cfg.opts.apply_listener(&sock)?;
    sock.bind(&addr.into()).map_err(|e| bind_error(addr, e))?;
    if cfg.udp {
        // A UDP socket is the "accepted" socket too: per-socket options (busy-poll, ...) go here.
        cfg.opts.apply_accepted(&sock)?;
        let udp: UdpSocket = sock.into();
        udp.set_read_timeout(Some(POLL))
            .map_err(|e| NetError::io("SO_RCVTIMEO on the UDP socket", e))?;
        Ok(Listener::Udp(udp))
    } else {
        sock.listen(1024).map_err(|e| bind_error(addr, e))?;
        // Non-blocking, so a client that vanishes between poll() and accept() cannot block the
        // accept loop (accepted sockets are blocking again: accept4 does not inherit O_NONBLOCK).
        sock.set_nonblocking(true)
            .map_err(|e| NetError::io("O_NONBLOCK on the listening socket", e))?;
        Ok(Listener::Tcp(sock.into()))
    }
}

impl EchoServer {
    /// Checks the configuration and binds. For the default dual-stack address it falls back to
    /// IPv4 where the host has no IPv6.
    pub fn bind(cfg: EchoConfig) -> Result<EchoServer, NetError> {
        if cfg.max_message == 0 || cfg.max_message > MAX_MESSAGE {
            return Err(NetError::Invalid(format!(
                "`max_message` {} is out of range: use 1 to 64M (64K holds any UDP datagram)",
                cfg.max_message
            )));
        }
        if cfg.idle_timeout.is_zero() {
            return Err(NetError::Invalid(
                "`idle_timeout` 0s: give idle connections some time, e.g. `idle_timeout` 30s"
                    .into(),
            ));
        }
        cfg.opts.validate(cfg.udp)?;
        let sock = match open(cfg.bind, &cfg) {
            Err(NetError::Bind { source, .. })
                if cfg.bind.is_ipv6()
                    && cfg.bind.ip().is_unspecified()
                    && source.raw_os_error() == Some(errno::EAFNOSUPPORT) =>
            {
                open(SocketAddr::from(([0, 0, 0, 0], cfg.bind.port())), &cfg)?
            }
            other => other?,
        };
        Ok(EchoServer { sock, cfg })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.sock {
            Listener::Tcp(l) => l.local_addr(),
            Listener::Udp(u) => u.local_addr(),
        }
    }

    /// Serves until `stop()` returns true (polled at least every 200 ms by the accept loop and by
    /// every connection), then waits for every connection thread and returns the counts.
    /// `log` is called on the calling thread, for each [`EchoEvent`].
    pub fn serve(
        &self,
        stop: &(dyn Fn() -> bool + Sync),
        log: &mut dyn FnMut(&EchoEvent),
    ) -> Result<EchoStats, NetError> {
        match &self.sock {
            Listener::Tcp(l) => self.serve_tcp(l, stop, log),
            Listener::Udp(u) => self.serve_udp(u, stop, log),
        }
    }

    fn serve_tcp(
        &self,
        listener: &TcpListener,
        stop: &(dyn Fn() -> bool + Sync),
        log: &mut dyn FnMut(&EchoEvent),
    ) -> Result<EchoStats, NetError> {
        let counts = Counts::default();
        // Set when the accept loop fails, so that the connection threads end too.
        let halt = AtomicBool::new(false);
        let (tx, rx) = mpsc::channel::<EchoEvent>();
        let conn_stop = || stop() || halt.load(Ordering::Relaxed);
        // Each connection thread's buffer comes from its own glibc arena: give a drained
        // flood's memory back (see memtrim).
        let mut trim = crate::memtrim::FloodTrim::default();
        let result = std::thread::scope(|scope| {
            let (counts, cfg, conn_stop) = (&counts, &self.cfg, &conn_stop);
            let result = loop {
                for ev in rx.try_iter() {
                    log(&ev);
                }
                if stop() {
                    break Ok(());
                }
                trim.check(counts.open.load(Ordering::Relaxed));
                match poll_one(listener.as_fd(), poll_flags::IN, POLL.as_millis() as i32) {
                    Ok(0) => continue,
                    Ok(_) => {}
                    Err(e) => break Err(NetError::io("poll on the listening socket", e)),
                }
                match listener.accept() {
                    Ok((stream, peer)) => {
                        counts.connections.fetch_add(1, Ordering::Relaxed);
                        log(&EchoEvent::Accepted { peer });
                        let tx = tx.clone();
                        counts.open.fetch_add(1, Ordering::Relaxed);
                        let open = OpenGuard(&counts.open);
                        let spawned = std::thread::Builder::new()
                            .name("socklab-echo".into())
                            .spawn_scoped(scope, move || {
                                let _open = open;
                                let ev = serve_conn(stream, peer, cfg, conn_stop, counts);
                                let _ = tx.send(ev);
                            });
                        if let Err(e) = spawned {
                            // The stream was moved into the closure and dropped with it.
                            log(&EchoEvent::Error {
                                peer: Some(peer),
                                what: format!("no thread for this connection, closed it: {e}"),
                            });
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // Out of descriptors or a client that vanished before accept: keep serving.
                    Err(e) if is_transient_accept_error(&e) => {
                        log(&EchoEvent::Error {
                            peer: None,
                            what: format!("accept: {e} (still serving)"),
                        });
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => break Err(NetError::io("accept", e)),
                }
            };
            if result.is_err() {
                halt.store(true, Ordering::Relaxed);
            }
            result
        });
        // Every connection thread has ended (the scope joined them): report what they said.
        drop(tx);
        for ev in rx.try_iter() {
            log(&ev);
        }
        result.map(|()| counts.stats())
    }

    fn serve_udp(
        &self,
        sock: &UdpSocket,
        stop: &(dyn Fn() -> bool + Sync),
        log: &mut dyn FnMut(&EchoEvent),
    ) -> Result<EchoStats, NetError> {
        let max = self.cfg.max_message;
        // One byte more than the largest datagram we echo, so a longer one is detected.
        let mut buf = AlignedBuf::zeroed(max + 1);
        let buf = buf.as_mut_slice();
        let mut stats = EchoStats::default();
        loop {
            if stop() {
                return Ok(stats);
            }
            let (n, peer) = match sock.recv_from(buf) {
                Ok(r) => r,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                            // An ICMP error left over from an earlier send_to.
                            | io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(NetError::io("recv_from on the UDP socket", e)),
            };
            stats.messages += 1;
            stats.bytes += n as u64;
            if n <= max && wire::is_client_start(&buf[..n], wire::MAX_UDP_MESSAGE) {
                // A sockperf client's datagram: answered only when it asks, as `sockperf sr`.
                match wire::answer_datagram(&mut buf[..n]) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        log(&EchoEvent::Error {
                            peer: Some(peer),
                            what: format!("{e}: not answered"),
                        });
                        continue;
                    }
                }
            }
            if n > max {
                log(&EchoEvent::Error {
                    peer: Some(peer),
                    what: format!(
                        "datagram longer than `max_message` {max} bytes: dropped, not echoed"
                    ),
                });
                continue;
            }
            loop {
                match sock.send_to(&buf[..n], peer) {
                    Ok(_) => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        log(&EchoEvent::Error {
                            peer: Some(peer),
                            what: format!("send_to: {e} (datagram not echoed)"),
                        });
                        break;
                    }
                }
            }
        }
    }
}

/// Totals shared by the connection threads.
#[derive(Debug, Default)]
struct Counts {
    connections: AtomicU64,
    bytes: AtomicU64,
    messages: AtomicU64,
    /// Connections open now.
    open: AtomicUsize,
}

/// Counts one open connection (in [`Counts::open`]) until dropped.
struct OpenGuard<'a>(&'a AtomicUsize);

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Counts {
    fn stats(&self) -> EchoStats {
        EchoStats {
            connections: self.connections.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            messages: self.messages.load(Ordering::Relaxed),
        }
    }
}

/// Serves one TCP connection until it ends; returns the `Closed` event (or an `Error` event
/// when the accepted socket refused an option).
fn serve_conn(
    mut stream: TcpStream,
    peer: SocketAddr,
    cfg: &EchoConfig,
    stop: &(dyn Fn() -> bool + Sync),
    counts: &Counts,
) -> EchoEvent {
    let setup = || -> Result<(), NetError> {
        stream
            .set_nonblocking(false)
            .map_err(|e| NetError::io("O_NONBLOCK off", e))?;
        cfg.opts.apply_accepted(&SockRef::from(&stream))?;
        // Short timeouts so stop() and the idle timeout are checked while blocked.
        let slice = POLL.min(cfg.idle_timeout);
        stream
            .set_read_timeout(Some(slice))
            .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
        stream
            .set_write_timeout(Some(slice))
            .map_err(|e| NetError::io("SO_SNDTIMEO", e))
    };
    if let Err(e) = setup() {
        return EchoEvent::Error {
            peer: Some(peer),
            what: format!("{e}: connection closed"),
        };
    }
    let effective = cfg.opts.read_back(&SockRef::from(&stream), Side::Server);
    let rearm = cfg.opts.rearm_quickack(Side::Server);
    let mut buf = AlignedBuf::zeroed(cfg.max_message);
    let buf = buf.as_mut_slice();
    let (mut bytes, mut messages) = (0u64, 0u64);
    let mut last = Instant::now();
    // Called when a read or write timed out: is it time to give up?
    let gave_up = |last: Instant| {
        if stop() {
            Some(ConnEnd::Stopped)
        } else if last.elapsed() >= cfg.idle_timeout {
            Some(ConnEnd::IdleTimeout)
        } else {
            None
        }
    };
    let end = 'conn: loop {
        let n = match stream.read(buf) {
            Ok(0) => break ConnEnd::Complete,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => match gave_up(last) {
                Some(end) => break end,
                None => continue,
            },
            Err(e) => break ConnEnd::Aborted(e.to_string()),
        };
        last = Instant::now();
        if messages == 0 && crate::sockperf::serve::is_sockperf_tcp(&buf[..n]) {
            // A sockperf client (its first bytes are a sockperf header, never socklab's
            // ASCII): answered as `sockperf sr` does for the rest of the connection.
            let s =
                crate::sockperf::serve::tcp(&mut stream, buf, n, wire::MAX_TCP_MESSAGE, &gave_up);
            (bytes, messages) = (s.bytes, s.messages);
            break match s.end {
                End::Complete => ConnEnd::Complete,
                End::Aborted(e) => ConnEnd::Aborted(e),
                End::GaveUp(end) => end,
            };
        }
        bytes += n as u64;
        messages += 1;
        // Echo exactly the n bytes received, finishing partial writes.
        let mut off = 0;
        while off < n {
            match stream.write(&buf[off..n]) {
                Ok(0) => break 'conn ConnEnd::Aborted("write accepted 0 bytes".into()),
                Ok(k) => {
                    off += k;
                    last = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The client does not read its echoes: wait, within the idle timeout.
                Err(e) if is_timeout(&e) => {
                    if let Some(end) = gave_up(last) {
                        break 'conn end;
                    }
                }
                Err(e) => break 'conn ConnEnd::Aborted(e.to_string()),
            }
        }
        if rearm {
            // Best effort: TCP_QUICKACK is a hint, and a failure here changes no byte.
            let _ = sockopt::rearm_quickack(&SockRef::from(&stream));
        }
    };
    counts.bytes.fetch_add(bytes, Ordering::Relaxed);
    counts.messages.fetch_add(messages, Ordering::Relaxed);
    EchoEvent::Closed {
        peer,
        bytes,
        messages,
        end,
        effective,
    }
}
