//! The rudp side of `socklab transfer`: the socket drivers of the sans-IO transport
//! ([`socklab_rudp`]) carrying the file-transfer application ([`FileSender`], [`FileReceiver`]).
//!
//! Client: stream 0 carries the manifest, stream `i + 1` the bytes of file `i`; the server's
//! control records come back on its stream 0. The client finishes when `Done` arrives with every
//! verdict ok, then closes the connection. The server closes a session once the client has
//! acknowledged every control record (so it has seen `Done`).
//!
//! Both drivers are one thread over one non-blocking UDP socket: receive everything queued,
//! run the timers, move data between the transport and the files, transmit what the transport
//! allows (it paces), then sleep in `ppoll` until the next datagram or the transport's next
//! deadline. Buffers are allocated once per connection, not per datagram.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socklab_rudp::{
    wire, CloseReason, Config, Connection, Event, Server, ServerAction, CLOSE_NO_PROGRESS,
    CLOSE_OK, CLOSE_SERVER_FULL,
};
use socklab_sys::io::{poll_flags, poll_one};
use socklab_sys::netns::wait_readable;
use socklab_sys::udp::recv_gro;

use super::sessions::{admit, Admission, SessionLimits, SessionLog, Slot, KEEP_RECENT};
use super::{FileOutcome, FileReceiver, FileSender, ReceiveLimits, ServerSession};
use crate::TransferError;

/// Bytes the client hands the transport per write.
const CHUNK: usize = 64 * 1024;
/// Room left in a datagram for its packet header, an ACK frame, the STREAM frame's header and
/// the CRC when a write is sized to fill one datagram (see [`chunk_len`]).
const DATAGRAM_SLACK: usize = 256;

/// Bytes handed to the transport per write. The transport puts one STREAM frame, from one
/// write, in a packet, so a write larger than a datagram leaves as full packets and a short
/// last one. With 1472-byte datagrams that is one short packet in about 45; with the loopback's
/// 65,507-byte datagrams a 64 KiB write would be one full packet and one of about 100 bytes,
/// twice the sends. There a write is one datagram's worth instead.
fn chunk_len(max_datagram: usize) -> usize {
    if max_datagram > CHUNK / 4 {
        max_datagram.saturating_sub(DATAGRAM_SLACK).max(1)
    } else {
        CHUNK
    }
}
/// Socket buffer asked for on both sides (bytes).
const SOCKET_BUFFER: i32 = 8 << 20;
/// Most bytes handed to the transport and not sent yet.
const LOOKAHEAD: u64 = 512 * 1024;
/// Largest datagram we accept (the UDP maximum).
const RECV_BUF: usize = 65_536;
/// Longest sleep, so the stop flag, Ctrl-C and the deadline are seen.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// Most datagrams taken from the socket in one round before the transport gets to send.
const RECV_BATCH: usize = 256;
/// Port-unreachable replies to Initials after which the client gives up (nothing listens).
const REFUSED_INITIALS: u32 = 3;
/// Close code a server uses after it aborted the transfer.
const CLOSE_ABORTED: u64 = 0x100;

/// What one rudp transfer measured on the client.
#[derive(Debug, Clone)]
pub struct RudpReport {
    /// Nanoseconds from the first Initial until `Done` arrived.
    pub total_ns: u64,
    /// File bytes in the manifest.
    pub bytes: u64,
    /// File bytes actually sent (the rest the server had from an earlier transfer).
    pub sent_bytes: u64,
    /// Per-file outcomes (all ok when this report is returned).
    pub files: Vec<FileOutcome>,
    /// Packets that carried retransmitted data of each file, in manifest order.
    pub per_file_retransmits: Vec<u64>,
    /// The client connection's counters and estimates at the end.
    pub stats: socklab_rudp::Stats,
}

/// Asks for [`SOCKET_BUFFER`] bytes of send and receive buffer: past the system maximum where
/// we may (root), else up to it. Bursts at the pacing rate then fit in the kernel's queue.
pub(crate) fn enlarge_buffers(sock: &UdpSocket) {
    use socklab_sys::sockopt::{set, IntOpt};
    for (force, plain) in [
        (IntOpt::SoRcvBufForce, IntOpt::SoRcvBuf),
        (IntOpt::SoSndBufForce, IntOpt::SoSndBuf),
    ] {
        if set(sock.as_fd(), force, SOCKET_BUFFER).is_err() {
            let _ = set(sock.as_fd(), plain, SOCKET_BUFFER);
        }
    }
}

/// Random bytes from the kernel, for connection ids and the cookie secret.
fn random_bytes<const N: usize>() -> Result<[u8; N], TransferError> {
    use std::io::Read;
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| TransferError::io("reading /dev/urandom", e))?;
    Ok(b)
}

/// Nanoseconds since `base`: the clock the transport is driven by.
fn ns_since(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// Sleeps until `sock` is readable, the transport's `deadline` (ns since `base`) passes, or
/// [`MAX_WAIT`].
fn wait(sock: &UdpSocket, base: Instant, deadline: Option<u64>) -> Result<(), TransferError> {
    let now = ns_since(base);
    let d = match deadline {
        Some(t) if t <= now => return Ok(()),
        Some(t) => Duration::from_nanos(t - now).min(MAX_WAIT),
        None => MAX_WAIT,
    };
    wait_readable(sock.as_fd(), Some(d))
        .map_err(|e| TransferError::io("ppoll on the UDP socket", e))?;
    Ok(())
}

/// Sends one datagram, waiting (bounded) while the socket buffer is full. An ICMP error
/// reported on the socket (`ECONNREFUSED` while no server listens) is not fatal: the transport
/// retries and times out on its own.
fn send_datagram(
    sock: &UdpSocket,
    buf: &[u8],
    to: Option<SocketAddr>,
) -> Result<(), TransferError> {
    for _ in 0..100 {
        let r = match to {
            Some(a) => sock.send_to(buf, a),
            None => sock.send(buf),
        };
        match r {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                poll_one(sock.as_fd(), poll_flags::OUT, 10)
                    .map_err(|e| TransferError::io("poll on the UDP socket", e))?;
            }
            Err(e) if is_icmp_error(&e) => return Ok(()),
            Err(e) => return Err(TransferError::io("sending a datagram", e)),
        }
    }
    // The kernel kept the buffer full for a second: treat the datagram as lost.
    Ok(())
}

/// The client's send path: full-size datagrams leave in batches of up to [`GSO_SEGMENTS`] with
/// one `send` (UDP GSO: the kernel cuts them apart), one datagram per `send` where the kernel
/// refuses GSO.
struct Batch {
    buf: Vec<u8>,
    size: usize,
    gso: bool,
}

/// Most datagrams per GSO send (the kernel allows 64 and 64 KiB in all).
const GSO_SEGMENTS: usize = 44;

impl Batch {
    fn new(sock: &UdpSocket, size: usize) -> Batch {
        use socklab_sys::sockopt::{set, IntOpt};
        let segments = GSO_SEGMENTS.min(65_000 / size).max(1);
        let gso = segments > 1 && set(sock.as_fd(), IntOpt::UdpSegment, size as i32).is_ok();
        Batch {
            buf: vec![0u8; if gso { segments * size } else { size }],
            size,
            gso,
        }
    }

    /// Sends everything the connection has to send now.
    fn transmit(
        &mut self,
        conn: &mut Connection,
        now: u64,
        sock: &UdpSocket,
    ) -> Result<(), TransferError> {
        loop {
            let mut len = 0;
            let mut full = true;
            while len + self.size <= self.buf.len() {
                match conn.poll_transmit(now, &mut self.buf[len..len + self.size]) {
                    Some(n) => {
                        len += n;
                        if n < self.size {
                            break; // only the last datagram of a batch may be shorter
                        }
                    }
                    None => {
                        full = false;
                        break;
                    }
                }
            }
            if len == 0 {
                return Ok(());
            }
            if let Err(e) = send_datagram(sock, &self.buf[..len], None) {
                if !self.gso || len <= self.size {
                    return Err(e);
                }
                // The route refused GSO (EIO): turn it off and send the datagrams one by one.
                use socklab_sys::sockopt::{set, IntOpt};
                let _ = set(sock.as_fd(), IntOpt::UdpSegment, 0);
                self.gso = false;
                for d in self.buf[..len].chunks(self.size) {
                    send_datagram(sock, d, None)?;
                }
                self.buf.truncate(self.size);
            }
            if !full {
                return Ok(()); // the connection has nothing more to send now
            }
        }
    }
}

/// Errors a UDP socket reports for an earlier datagram's ICMP reply; they say nothing about
/// the current call, and the transport handles the loss.
fn is_icmp_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    )
}

fn closed_error(reason: &CloseReason, to: SocketAddr) -> TransferError {
    match reason {
        CloseReason::HandshakeTimeout => TransferError::Connect {
            addr: to,
            source: io::Error::new(io::ErrorKind::TimedOut, "no rudp server answered"),
        },
        CloseReason::IdleTimeout => TransferError::Timeout(format!(
            "the rudp connection to {to} went idle: nothing arrived for the idle timeout"
        )),
        CloseReason::Peer {
            code: CLOSE_SERVER_FULL,
            reason,
        } => TransferError::Limit(format!(
            "the rudp server at {to} turned the session down: {reason}"
        )),
        CloseReason::Peer {
            code: CLOSE_NO_PROGRESS,
            reason,
        } => TransferError::Timeout(format!(
            "the rudp server at {to} closed the session: {reason}"
        )),
        other => TransferError::Protocol(format!("the rudp connection to {to} ended: {other}")),
    }
}

/// Sends `paths` to the rudp transfer server at `to`. Fails when a file's verdict is not ok,
/// the server aborts, the connection closes, or `timeout` passes (counted from the first
/// Initial; hashing the files before that is not counted).
pub fn send_rudp(
    to: SocketAddr,
    paths: &[PathBuf],
    config: &Config,
    timeout: Duration,
) -> Result<RudpReport, TransferError> {
    config
        .validate()
        .map_err(|e| TransferError::Invalid(format!("rudp settings: {e}")))?;
    let mut sender = FileSender::new(paths)?;
    let local: IpAddr = if to.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let sock =
        UdpSocket::bind((local, 0)).map_err(|e| TransferError::io("binding a UDP socket", e))?;
    sock.connect(to)
        .map_err(|source| TransferError::Connect { addr: to, source })?;
    sock.set_nonblocking(true)
        .map_err(|e| TransferError::io("setting the UDP socket non-blocking", e))?;
    enlarge_buffers(&sock);
    let _ = socklab_sys::netns::set_timer_slack(1_000); // precise pacing sleeps

    let base = Instant::now();
    let deadline = base + timeout;
    let cid = u64::from_le_bytes(random_bytes()?);
    let mut conn = Connection::client(config.clone(), cid, 0);
    let mut gso = Batch::new(&sock, config.max_datagram);
    let mut inbuf = vec![0u8; RECV_BUF];
    let chunk_size = chunk_len(config.max_datagram);
    let mut chunk = vec![0u8; chunk_size];
    let mut done_at = None;
    let mut refused = 0u32;
    loop {
        if socklab_sys::process::interrupted() {
            return Err(TransferError::Interrupted);
        }
        if Instant::now() >= deadline {
            return Err(TransferError::Timeout(format!(
                "the rudp transfer to {to} did not finish within {timeout:?} ({} of {} bytes handed to the transport): raise `timeout`",
                sender.sent_bytes(),
                sender.manifest().total_bytes()
            )));
        }
        for _ in 0..RECV_BATCH {
            match sock.recv(&mut inbuf) {
                // Each datagram is stamped when it is read: a clock read before the batch would
                // shorten the RTT of an ACK that came in while the batch ran (a thread preempted
                // between the clock and the read measured 4.8 ms on a path of 5 ms each way).
                Ok(n) => conn.handle_datagram(ns_since(base), &inbuf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e)
                    if e.kind() == io::ErrorKind::ConnectionRefused && !conn.is_established() =>
                {
                    // Port unreachable for our Initials: nothing listens there.
                    refused += 1;
                    if refused >= REFUSED_INITIALS {
                        return Err(TransferError::Connect {
                            addr: to,
                            source: e,
                        });
                    }
                }
                Err(e) if is_icmp_error(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TransferError::io("receiving a datagram", e)),
            }
        }
        let now = ns_since(base);
        if conn.poll_timeout().is_some_and(|t| now >= t) {
            conn.handle_timeout(now);
        }
        while let Some(c) = conn.read(&mut inbuf) {
            if c.stream != 0 {
                return Err(TransferError::Protocol(format!(
                    "the server sent data on stream {} (only stream 0 carries its messages)",
                    c.stream
                )));
            }
            sender.on_control(c.offset, &inbuf[..c.len])?;
        }
        while let Some(ev) = conn.poll_event() {
            if let Event::Closed(reason) = ev {
                if done_at.is_none() {
                    if let Some(why) = sender.aborted() {
                        return Err(TransferError::Aborted(why.to_string()));
                    }
                    return Err(closed_error(&reason, to));
                }
            }
        }
        if done_at.is_none() && sender.is_done() {
            done_at = Some(now);
            conn.close(now, CLOSE_OK, "done");
        }
        if let Some(why) = sender.aborted() {
            return Err(TransferError::Aborted(why.to_string()));
        }
        if let Some(why) = sender.failed() {
            return Err(TransferError::Verdict(why));
        }
        // Hand the transport only a little more than it has sent, so a Resume from the server
        // still saves what it already has (and the transport's buffer holds no file copy).
        let unsent = sender
            .handed_out_bytes()
            .saturating_sub(conn.stats().stream_bytes_sent);
        let mut room = LOOKAHEAD.saturating_sub(unsent);
        while room > 0 && !sender.sent_all() && conn.send_space() >= chunk_size {
            let Some((stream, offset, len)) = sender.next_chunk(&mut chunk)? else {
                break;
            };
            conn.write(stream, offset, &chunk[..len])
                .map_err(|e| TransferError::Protocol(format!("rudp write refused: {e}")))?;
            room = room.saturating_sub(len as u64);
        }
        gso.transmit(&mut conn, now, &sock)?;
        if let Some(t) = done_at {
            let files = sender.outcomes();
            return Ok(RudpReport {
                total_ns: t,
                bytes: sender.manifest().total_bytes(),
                sent_bytes: sender.sent_bytes(),
                per_file_retransmits: (0..files.len())
                    .map(|i| conn.stream_retransmits(i as u32 + 1))
                    .collect(),
                files,
                stats: conn.stats(),
            });
        }
        wait(&sock, base, conn.poll_timeout())?;
    }
}

/// One client of a server.
struct Session {
    conn: Box<Connection>,
    rx: FileReceiver,
    peer: SocketAddr,
    started: u64,
    /// Next offset on our control stream.
    ctl_off: u64,
    /// Control bytes the transport refused for now (its send buffer was full).
    ctl_pending: Vec<u8>,
    finished_at: Option<u64>,
    error: Option<String>,
}

impl Session {
    fn new(conn: Box<Connection>, rx: FileReceiver, peer: SocketAddr, now: u64) -> Session {
        Session {
            conn,
            rx,
            peer,
            started: now,
            ctl_off: 0,
            ctl_pending: Vec::new(),
            finished_at: None,
            error: None,
        }
    }

    /// Moves received chunks into the files and control records into the transport.
    fn pump(&mut self, now: u64, buf: &mut [u8]) {
        while let Some(c) = self.conn.read(buf) {
            if self.rx.failed() {
                continue; // the Abort is queued; later chunks are dropped
            }
            if let Err(e) = self.rx.on_chunk(c.stream, c.offset, &buf[..c.len]) {
                self.error.get_or_insert_with(|| e.to_string());
            }
        }
        if let Some(bytes) = self.rx.poll_control() {
            self.ctl_pending.extend_from_slice(&bytes);
        }
        if !self.ctl_pending.is_empty() && self.conn.send_space() >= self.ctl_pending.len() {
            if self.conn.write(0, self.ctl_off, &self.ctl_pending).is_ok() {
                self.ctl_off += self.ctl_pending.len() as u64;
            }
            self.ctl_pending.clear();
        }
        while let Some(ev) = self.conn.poll_event() {
            if let Event::Closed(reason) = ev {
                if self.finished_at.is_none() {
                    self.finished_at = Some(now);
                    // The client closes as soon as it has Done, maybe before our last ACK.
                    if !self.rx.is_done() {
                        self.error
                            .get_or_insert_with(|| format!("connection ended early: {reason}"));
                    }
                }
            }
        }
        let over = self.rx.is_done() || self.rx.failed();
        if over
            && self.ctl_pending.is_empty()
            && self.conn.all_acked()
            && self.finished_at.is_none()
        {
            self.finished_at = Some(now);
            let code = if self.rx.failed() {
                CLOSE_ABORTED
            } else {
                CLOSE_OK
            };
            self.conn.close(now, code, "done");
        }
    }

    /// What the admission policy needs to know of this session.
    fn slot(&self, cid: u64) -> Slot {
        Slot {
            cid,
            ip: self.peer.ip(),
            last_progress: self.conn.last_progress(),
            manifest: self.rx.manifest().is_some(),
            finished: self.finished_at.is_some(),
        }
    }

    /// Gives up on the session (it made no progress): closes with [`CLOSE_NO_PROGRESS`] and
    /// `why`, which its client is told and its report keeps.
    fn give_up(&mut self, now: u64, why: String) {
        self.conn.close(now, CLOSE_NO_PROGRESS, &why);
        self.error.get_or_insert(why);
        self.finished_at.get_or_insert(now);
    }

    fn report(&self, now: u64) -> ServerSession {
        let mut error = self.error.clone();
        if error.is_none() && !self.rx.is_done() {
            error = Some("the transfer did not finish".into());
        }
        ServerSession {
            peer: self.peer,
            cc: "rudp".into(),
            files: self.rx.report(),
            bytes: self.rx.bytes_written(),
            total_ns: self.finished_at.unwrap_or(now).saturating_sub(self.started),
            error,
        }
    }
}

/// Serves rudp transfers on `socket` into `dir` until `stop` is set (checked at least every
/// 100 ms) or, with `once`, after the first session ends. Several clients may transfer at once,
/// within `limits`: a full table evicts a session that makes no progress, else the newcomer is
/// refused ("server full", which its client reports). A session that makes no progress for the
/// idle timeout of `config` is closed even if its peer keeps it alive with PINGs.
///
/// Ended sessions are forgotten: the returned [`SessionLog`] has the totals and the last
/// [`KEEP_RECENT`] sessions (a failed one with its [`ServerSession::error`]), so memory stays
/// flat however many clients come. Only socket errors are returned.
pub fn serve_rudp(
    socket: UdpSocket,
    dir: &Path,
    config: &Config,
    limits: &SessionLimits,
    stop: &AtomicBool,
    once: bool,
) -> Result<SessionLog, TransferError> {
    serve_rudp_with(
        socket,
        dir,
        config,
        &ReceiveLimits::default(),
        limits,
        stop,
        once,
    )
}

/// [`serve_rudp`] with the receiving limits every session shares (`receive`: one memory
/// budget, file sizes, free space).
pub fn serve_rudp_with(
    socket: UdpSocket,
    dir: &Path,
    config: &Config,
    receive: &ReceiveLimits,
    limits: &SessionLimits,
    stop: &AtomicBool,
    once: bool,
) -> Result<SessionLog, TransferError> {
    config
        .validate()
        .map_err(|e| TransferError::Invalid(format!("rudp settings: {e}")))?;
    drop(FileReceiver::with_limits(dir, receive)?); // the directory must be usable first
    socket
        .set_nonblocking(true)
        .map_err(|e| TransferError::io("setting the UDP socket non-blocking", e))?;
    enlarge_buffers(&socket);
    // Several datagrams per receive call where the kernel can (recv_gro works either way).
    let _ = socklab_sys::sockopt::set(socket.as_fd(), socklab_sys::sockopt::IntOpt::UdpGro, 1);
    let _ = socklab_sys::netns::set_timer_slack(1_000);
    let mut server = Server::new(config.clone(), random_bytes()?);
    let mut sessions: HashMap<u64, Session> = HashMap::new();
    let mut log = SessionLog::new(KEEP_RECENT);
    let stall_s = limits.stall.as_secs_f64();
    let idle_s = config.idle_timeout_ns as f64 / 1e9;
    let base = Instant::now();
    let mut inbuf = vec![0u8; RECV_BUF];
    let mut out = vec![0u8; config.max_datagram];
    loop {
        let now = ns_since(base);
        if stop.load(Ordering::Relaxed) || socklab_sys::process::interrupted() {
            for s in sessions.values() {
                log.open_at_stop += 1;
                log.record(s.report(now));
            }
            return Ok(log);
        }
        for _ in 0..RECV_BATCH {
            let r = match recv_gro(socket.as_fd(), &mut inbuf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => continue, // cut or non-IP
                Err(e) if is_icmp_error(&e) => continue,
                Err(e) => return Err(TransferError::io("receiving a datagram", e)),
            };
            // Stamped when read, not when the batch began (see `send_rudp`).
            let now = ns_since(base);
            // With GRO several datagrams of one sender arrive glued, each `segment` bytes.
            for datagram in inbuf[..r.len].chunks(r.segment.unwrap_or(r.len).max(1)) {
                let peer = r.from;
                let cid = wire::peek_cid(datagram);
                if let Some(s) = cid.and_then(|c| sessions.get_mut(&c)) {
                    if s.peer == peer {
                        s.conn.handle_datagram(now, datagram);
                    }
                    continue; // a known id from another address is not routed
                }
                match server.handle_datagram(now, peer, datagram, &mut out) {
                    ServerAction::Drop => {}
                    ServerAction::Reply(len) => send_datagram(&socket, &out[..len], Some(peer))?,
                    ServerAction::Accept(conn) => {
                        let slots = sessions.iter().map(|(cid, s)| s.slot(*cid));
                        match admit(limits, peer.ip(), now, slots) {
                            Admission::Admit => {}
                            Admission::Evict(cid) => {
                                if let Some(mut s) = sessions.remove(&cid) {
                                    if s.finished_at.is_none() {
                                        log.evicted += 1;
                                        s.give_up(now, format!(
                                            "evicted: no progress for {stall_s} s or more while the server was full"
                                        ));
                                    }
                                    // One CLOSE to its client, then it is forgotten.
                                    if let Some(len) = s.conn.poll_transmit(now, &mut out) {
                                        send_datagram(&socket, &out[..len], Some(s.peer))?;
                                    }
                                    log.record(s.report(now));
                                }
                            }
                            Admission::Refuse(why) => {
                                log.refused += 1;
                                if let Some(len) = server.refuse(now, conn, &why, &mut out) {
                                    send_datagram(&socket, &out[..len], Some(peer))?;
                                }
                                continue;
                            }
                        }
                        sessions.insert(
                            conn.cid(),
                            Session::new(conn, FileReceiver::with_limits(dir, receive)?, peer, now),
                        );
                    }
                }
            }
        }
        let now = ns_since(base);
        let mut next: Option<u64> = None;
        let mut ended = Vec::new();
        for (cid, s) in sessions.iter_mut() {
            if s.conn.poll_timeout().is_some_and(|t| now >= t) {
                s.conn.handle_timeout(now);
            }
            s.pump(now, &mut inbuf);
            if s.finished_at.is_none()
                && now.saturating_sub(s.conn.last_progress()) >= config.idle_timeout_ns
            {
                // Alive (PINGs, repeats) but going nowhere: the idle timeout counts progress.
                log.idle_closed += 1;
                s.give_up(now, format!("no progress for {idle_s} s"));
            }
            while let Some(len) = s.conn.poll_transmit(now, &mut out) {
                send_datagram(&socket, &out[..len], Some(s.peer))?;
            }
            if s.conn.is_closed() {
                ended.push(*cid);
            } else if let Some(t) = s.conn.poll_timeout() {
                let t = if s.finished_at.is_none() {
                    t.min(s.conn.last_progress() + config.idle_timeout_ns)
                } else {
                    t
                };
                next = Some(next.map_or(t, |n: u64| n.min(t)));
            }
        }
        for cid in ended {
            if let Some(s) = sessions.remove(&cid) {
                log.record(s.report(now));
                if once {
                    return Ok(log);
                }
            }
        }
        wait(&socket, base, next)?;
    }
}
