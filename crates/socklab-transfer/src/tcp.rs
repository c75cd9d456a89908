//! The TCP baseline of `socklab transfer`: one persistent connection carries the chunks framed
//! ([`framing`](super::framing)) client → server, and the control messages framed on stream 0
//! server → client.
//!
//! The client streams every chunk without waiting for a reply; a reader thread (on a clone of
//! the socket) feeds the server's messages back to the [`FileSender`], so a `Resume` that
//! arrives late still makes it skip ranges it has not sent yet. The client finishes when `Done`
//! arrives with every verdict ok.
//!
//! The server runs each session on its own thread, at most [`TcpServeOptions::max_sessions`]
//! at once; a connection beyond that is told `server full` (an `Abort` record) and closed. A
//! session must make progress — [`PROGRESS_BYTES`] of whole frames, or the end of the transfer
//! — in every idle period, so a client that trickles bytes cannot hold a session forever.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use socklab_sys::tcp::{tcp_info, TcpInfo};

use super::framing::{put_header, FrameDecoder, HEADER_LEN};
use super::{Control, FileOutcome, FileReceiver, FileSender, ReceiveLimits, TransferError};
use socklab_sys::ioerr::{is_timeout, is_transient_accept_error};

/// Bytes of file data per chunk (one frame, one `write`).
pub const TCP_CHUNK: usize = 256 * 1024;
/// Bytes per `read`.
const READ_SIZE: usize = 256 * 1024;
/// How often blocked reads and writes come back to check the stop flag and the deadline.
const POLL: Duration = Duration::from_millis(100);
/// Default idle timeout: a server session ends when the client makes no progress for this
/// long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Payload bytes of whole frames a client must deliver per idle period (unless its transfer
/// ends): partial frames and trickled bytes do not count.
pub const PROGRESS_BYTES: usize = 16 * 1024;
/// Default most sessions a TCP server serves at once.
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Most refused connections being told `server full` at once (each on a short-lived thread);
/// beyond that a refused connection is just closed.
const MAX_REFUSING: usize = 8;
/// Largest control frame the server writes.
const MAX_CONTROL_FRAME: usize = 1 << 20;

/// What the server saw of one connection.
#[derive(Debug, Clone)]
pub struct ServerSession {
    /// The client.
    pub peer: SocketAddr,
    /// Congestion control of the accepted socket, as read back.
    pub cc: String,
    /// Per-file outcomes (empty when the manifest never arrived).
    pub files: Vec<FileOutcome>,
    /// New file bytes written to disk.
    pub bytes: u64,
    /// Nanoseconds from accept until `Done` was sent (or the session failed).
    pub total_ns: u64,
    /// Why the session failed, if it did.
    pub error: Option<String>,
}

/// What one TCP transfer measured on the client.
#[derive(Debug, Clone)]
pub struct TcpReport {
    /// Congestion control the sending socket actually ran (read back with `getsockopt`).
    pub cc: String,
    /// Nanoseconds from the start of `connect` until `Done` arrived.
    pub total_ns: u64,
    /// File bytes in the manifest.
    pub bytes: u64,
    /// File bytes actually sent (the rest the server had from an earlier transfer).
    pub sent_bytes: u64,
    /// Per-file outcomes (all ok when this report is returned).
    pub files: Vec<FileOutcome>,
    /// `tcpi_total_retrans` growth while each file was written (sampled when its last chunk
    /// was handed to the kernel), in manifest order.
    pub per_file_retransmits: Vec<u64>,
    /// Retransmitted segments over the whole connection.
    pub total_retrans: u64,
    /// Smoothed RTT at the end, microseconds.
    pub rtt_us: u32,
    /// Segments sent over the connection.
    pub segs_out: u32,
    /// `TCP_INFO` of the sending socket at the end.
    pub tcp: TcpInfo,
}

fn set_cc(sock: SockRef<'_>, cc: &str) -> Result<(), TransferError> {
    sock.set_tcp_congestion(cc.as_bytes()).map_err(|source| {
        TransferError::SockOpt {
            option: "cc",
            value: cc.to_string(),
            hint: format!(
                " (available here: {}; load a module with `modprobe tcp_{cc}` or choose another `cc`)",
                std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                    .unwrap_or_default()
                    .trim()
            ),
            source,
        }
    })
}

fn read_cc(sock: SockRef<'_>) -> Result<String, TransferError> {
    let v = sock
        .tcp_congestion()
        .map_err(|e| TransferError::io("getsockopt TCP_CONGESTION", e))?;
    Ok(String::from_utf8_lossy(&v)
        .trim_end_matches('\0')
        .to_string())
}

/// How a TCP transfer server runs.
#[derive(Debug, Clone)]
pub struct TcpServeOptions {
    /// Congestion control of accepted sockets.
    pub cc: Option<String>,
    /// Most sessions served at once; further connections are refused with `server full`.
    pub max_sessions: usize,
    /// A session that makes no progress for this long is closed.
    pub idle_timeout: Duration,
    /// Limits shared by every session (memory before manifests, file sizes, free space).
    pub limits: ReceiveLimits,
}

impl Default for TcpServeOptions {
    fn default() -> Self {
        TcpServeOptions {
            cc: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle_timeout: IDLE_TIMEOUT,
            limits: ReceiveLimits::default(),
        }
    }
}

/// Two stop flags: the caller's and the server's own (set once a `--once` session ended).
#[derive(Clone, Copy)]
struct Stop<'a>(&'a AtomicBool, &'a AtomicBool);

impl Stop<'_> {
    fn is_set(self) -> bool {
        self.0.load(Ordering::Relaxed) || self.1.load(Ordering::Relaxed)
    }
}

/// [`serve_tcp_with`] with the default options but the congestion control `cc`.
pub fn serve_tcp(
    listener: TcpListener,
    dir: &Path,
    cc: Option<&str>,
    stop: &AtomicBool,
    once: bool,
) -> Result<Vec<ServerSession>, TransferError> {
    let opts = TcpServeOptions {
        cc: cc.map(str::to_string),
        ..TcpServeOptions::default()
    };
    serve_tcp_with(listener, dir, &opts, stop, once)
}

/// Serves transfers on `listener` into `dir`, each connection on its own thread, at most
/// `opts.max_sessions` at once, until `stop` is set (polled at least every 100 ms) or, with
/// `once`, after the first session ends (sessions still running then are interrupted and
/// reported after it). A failed session is reported in its [`ServerSession::error`] and the
/// server keeps serving; only listener errors are returned. Sessions come in the order they
/// ended.
pub fn serve_tcp_with(
    listener: TcpListener,
    dir: &Path,
    opts: &TcpServeOptions,
    stop: &AtomicBool,
    once: bool,
) -> Result<Vec<ServerSession>, TransferError> {
    use socklab_sys::io::{poll_flags, poll_one};
    // The directory must exist before any client comes.
    drop(FileReceiver::with_limits(dir, &opts.limits)?);
    if let Some(c) = &opts.cc {
        set_cc(SockRef::from(&listener), c)?;
    }
    let over = AtomicBool::new(false);
    let stop = Stop(stop, &over);
    let active = AtomicUsize::new(0);
    let refusing = AtomicUsize::new(0);
    let (tx, ended) = mpsc::channel::<ServerSession>();
    let mut sessions = Vec::new();
    std::thread::scope(|scope| {
        let result = loop {
            while let Ok(s) = ended.try_recv() {
                sessions.push(s);
                if once {
                    over.store(true, Ordering::Relaxed);
                }
            }
            if stop.is_set() {
                break Ok(());
            }
            let ready = match poll_one(listener.as_fd(), poll_flags::IN, POLL.as_millis() as i32) {
                Ok(n) => n,
                Err(e) => break Err(TransferError::io("poll on the listening socket", e)),
            };
            if ready == 0 {
                continue;
            }
            match listener.accept() {
                Ok((stream, peer)) => {
                    if active.load(Ordering::Acquire) >= opts.max_sessions.max(1) {
                        refuse(scope, stream, opts.max_sessions, &refusing);
                        continue;
                    }
                    active.fetch_add(1, Ordering::AcqRel);
                    let (tx, active) = (tx.clone(), &active);
                    let spawned = std::thread::Builder::new()
                        .name("transfer-session".into())
                        .spawn_scoped(scope, move || {
                            let s = serve_conn(stream, peer, dir, opts, stop);
                            active.fetch_sub(1, Ordering::AcqRel);
                            let _ = tx.send(s);
                        });
                    if let Err(e) = spawned {
                        active.fetch_sub(1, Ordering::AcqRel);
                        break Err(TransferError::io("starting a session thread", e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if is_transient_accept_error(&e) => std::thread::sleep(POLL / 2),
                Err(e) => break Err(TransferError::io("accept", e)),
            }
        };
        // Every session sees the stop within POLL and ends; the scope joins them.
        over.store(true, Ordering::Relaxed);
        result
    })?;
    drop(tx);
    sessions.extend(ended.try_iter());
    Ok(sessions)
}

/// Tells a connection beyond `--max-sessions` that the server is full, on a short-lived thread
/// (at most [`MAX_REFUSING`] at once) that lets the client read it before the close.
fn refuse<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    mut stream: TcpStream,
    max: usize,
    refusing: &'s AtomicUsize,
) {
    let mut msg = Vec::new();
    Control::Abort {
        detail: format!(
            "server full: {max} transfers in progress (its `max_sessions`); try again later"
        ),
    }
    .encode(&mut msg);
    let _ = stream.set_write_timeout(Some(POLL));
    let _ = write_control(&mut stream, &msg, &mut 0);
    let _ = stream.shutdown(Shutdown::Write);
    if refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
        refusing.fetch_sub(1, Ordering::AcqRel);
        return; // dropped: closed at once
    }
    let spawned = std::thread::Builder::new()
        .name("transfer-refuse".into())
        .spawn_scoped(scope, move || {
            drain(&mut stream, &AtomicBool::new(false), Duration::from_secs(1));
            refusing.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        refusing.fetch_sub(1, Ordering::AcqRel);
    }
}

fn serve_conn(
    mut stream: TcpStream,
    peer: SocketAddr,
    dir: &Path,
    opts: &TcpServeOptions,
    stop: Stop<'_>,
) -> ServerSession {
    let t0 = Instant::now();
    let mut rx = None;
    let mut cc_eff = String::new();
    let mut ctl_off = 0u64;
    let r = run_conn(
        &mut stream,
        dir,
        opts,
        stop,
        &mut rx,
        &mut cc_eff,
        &mut ctl_off,
    );
    let total_ns = t0.elapsed().as_nanos() as u64;
    if let Err(e) = &r {
        if !matches!(e, TransferError::Interrupted) {
            // Tell the client why (the receiver queued an Abort for its own errors), then let
            // it close first so it reads the message rather than a reset.
            let mut msg = rx
                .as_mut()
                .and_then(FileReceiver::poll_control)
                .unwrap_or_default();
            if !rx.as_ref().is_some_and(FileReceiver::failed) {
                Control::Abort {
                    detail: e.to_string(),
                }
                .encode(&mut msg);
            }
            let _ = write_control(&mut stream, &msg, &mut ctl_off);
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
    if !matches!(r, Err(TransferError::Interrupted)) {
        drain(&mut stream, stop.0, Duration::from_secs(5));
    }
    let (files, bytes) = rx
        .as_ref()
        .map(|r| (r.report(), r.bytes_written()))
        .unwrap_or_default();
    ServerSession {
        peer,
        cc: cc_eff,
        files,
        bytes,
        total_ns,
        error: r.err().map(|e| e.to_string()),
    }
}

/// Reads and discards until the peer closes, `limit` passes or `stop` is set.
fn drain(stream: &mut TcpStream, stop: &AtomicBool, limit: Duration) {
    use std::io::Read;
    let t0 = Instant::now();
    let _ = stream.set_read_timeout(Some(POLL));
    let mut buf = [0u8; 16 * 1024];
    while t0.elapsed() < limit && !stop.load(Ordering::Relaxed) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Writes encoded control messages as stream-0 frames at increasing offsets.
fn write_control(stream: &mut TcpStream, bytes: &[u8], ctl_off: &mut u64) -> io::Result<()> {
    for piece in bytes.chunks(MAX_CONTROL_FRAME) {
        let mut frame = vec![0u8; HEADER_LEN + piece.len()];
        let (h, d) = frame.split_at_mut(HEADER_LEN);
        put_header(
            h.try_into().expect("HEADER_LEN"),
            0,
            *ctl_off,
            piece.len() as u32,
        );
        d.copy_from_slice(piece);
        stream.write_all(&frame)?;
        *ctl_off += piece.len() as u64;
    }
    Ok(())
}

fn run_conn(
    stream: &mut TcpStream,
    dir: &Path,
    opts: &TcpServeOptions,
    stop: Stop<'_>,
    rx_slot: &mut Option<FileReceiver>,
    cc_eff: &mut String,
    ctl_off: &mut u64,
) -> Result<(), TransferError> {
    if let Some(c) = &opts.cc {
        set_cc(SockRef::from(&*stream), c)?;
    }
    *cc_eff = read_cc(SockRef::from(&*stream))?;
    let opt = |e| TransferError::io("setting socket options", e);
    stream.set_nodelay(true).map_err(opt)?;
    stream.set_read_timeout(Some(POLL)).map_err(opt)?;
    stream
        .set_write_timeout(Some(opts.idle_timeout))
        .map_err(opt)?;
    let rx = rx_slot.insert(FileReceiver::with_limits(dir, &opts.limits)?);
    let mut dec = FrameDecoder::new();
    // The idle timer restarts only on progress: PROGRESS_BYTES of whole frames.
    let mut last = Instant::now();
    let mut progress = 0usize;
    loop {
        if stop.is_set() {
            return Err(TransferError::Interrupted);
        }
        if last.elapsed() > opts.idle_timeout {
            return Err(TransferError::Timeout(format!(
                "no progress from the client for {:?}: fewer than {} KiB of whole frames arrived",
                opts.idle_timeout,
                PROGRESS_BYTES >> 10
            )));
        }
        match dec.read_from(stream, READ_SIZE) {
            Ok(0) => {
                dec.finish()?;
                return Err(TransferError::Protocol(
                    "the client closed the connection before every file arrived".into(),
                ));
            }
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(TransferError::io("reading from the client", e)),
        }
        while let Some(f) = dec.next_frame()? {
            progress += f.data.len();
            rx.on_chunk(f.stream, f.offset, f.data)?;
        }
        if progress >= PROGRESS_BYTES {
            last = Instant::now();
            progress = 0;
        }
        if let Some(b) = rx.poll_control() {
            write_control(stream, &b, ctl_off)
                .map_err(|e| TransferError::io("sending control messages to the client", e))?;
        }
        if rx.is_done() {
            return Ok(());
        }
    }
}

/// What the reader thread passes to the sending thread.
enum FromServer {
    Control(u64, Vec<u8>),
    Closed,
    Failed(TransferError),
}

fn read_server(mut s: TcpStream, tx: Sender<FromServer>, stop: Arc<AtomicBool>) {
    let mut dec = FrameDecoder::new();
    let fail = |tx: &Sender<FromServer>, e| {
        let _ = tx.send(FromServer::Failed(e));
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match dec.read_from(&mut s, 64 * 1024) {
            Ok(0) => {
                let _ = match dec.finish() {
                    Ok(()) => tx.send(FromServer::Closed),
                    Err(e) => tx.send(FromServer::Failed(e)),
                };
                return;
            }
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return fail(&tx, TransferError::io("reading from the server", e)),
        }
        loop {
            match dec.next_frame() {
                Ok(Some(f)) if f.stream == 0 => {
                    if tx
                        .send(FromServer::Control(f.offset, f.data.to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(Some(f)) => {
                    return fail(
                        &tx,
                        TransferError::Protocol(format!(
                            "the server sent data on stream {}; it only sends on stream 0",
                            f.stream
                        )),
                    )
                }
                Ok(None) => break,
                Err(e) => return fail(&tx, e),
            }
        }
    }
}

/// The sending side's state while it runs.
struct Client<'a> {
    stream: &'a TcpStream,
    sender: FileSender,
    from_server: Receiver<FromServer>,
    closed: bool,
    deadline: Instant,
    timeout: Duration,
    per_file: Vec<u64>,
    last_retrans: u32,
}

impl Client<'_> {
    /// Handles one message from the reader thread.
    fn handle(&mut self, m: FromServer) -> Result<(), TransferError> {
        match m {
            FromServer::Control(off, data) => self.sender.on_control(off, &data),
            FromServer::Closed => {
                self.closed = true;
                Ok(())
            }
            FromServer::Failed(e) => Err(e),
        }
    }

    /// Handles every message already waiting.
    fn pump(&mut self) -> Result<(), TransferError> {
        while let Ok(m) = self.from_server.try_recv() {
            self.handle(m)?;
        }
        Ok(())
    }

    /// Waits up to `d` for a message.
    fn wait(&mut self, d: Duration) -> Result<(), TransferError> {
        match self.from_server.recv_timeout(d) {
            Ok(m) => self.handle(m),
            Err(RecvTimeoutError::Timeout) => Ok(()),
            Err(RecvTimeoutError::Disconnected) => {
                self.closed = true;
                Ok(())
            }
        }
    }

    /// The sender's failure, as an error.
    fn failure(&self) -> Option<TransferError> {
        if let Some(d) = self.sender.aborted() {
            return Some(TransferError::Aborted(d.to_string()));
        }
        self.sender.failed().map(TransferError::Verdict)
    }

    fn check(&mut self) -> Result<(), TransferError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if self.sender.is_done() {
            return Ok(());
        }
        if self.closed {
            return Err(TransferError::Protocol(
                "the server closed the connection before it confirmed every file".into(),
            ));
        }
        if Instant::now() >= self.deadline {
            let n = self.sender.manifest().files.len();
            let verdicts = self.sender.outcomes().iter().filter(|o| o.ok).count();
            return Err(TransferError::Timeout(format!(
                "the transfer did not finish within {:?}: {} of {} file bytes sent, {verdicts} of {n} files confirmed (raise `timeout`?)",
                self.timeout,
                self.sender.sent_bytes(),
                self.sender.manifest().total_bytes()
            )));
        }
        Ok(())
    }

    /// After a failed write: give the reader a moment to deliver the server's reason.
    fn explain(&mut self, e: io::Error) -> TransferError {
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until && !self.closed && self.failure().is_none() {
            if self.wait(POLL).is_err() {
                break;
            }
        }
        self.failure()
            .unwrap_or_else(|| TransferError::io("sending to the server", e))
    }

    /// Writes all of `buf`, coming back every 100 ms to follow the server and the deadline.
    fn write_all(&mut self, buf: &[u8]) -> Result<(), TransferError> {
        let mut stream = self.stream;
        let mut at = 0;
        while at < buf.len() {
            match stream.write(&buf[at..]) {
                Ok(0) => return Err(self.explain(io::ErrorKind::WriteZero.into())),
                Ok(n) => at += n,
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                    self.pump()?;
                    self.check()?;
                }
                Err(e) => return Err(self.explain(e)),
            }
        }
        Ok(())
    }

    /// Samples the retransmission counter for files whose last chunk has been written.
    fn sample_files(&mut self) {
        while self.per_file.len() < self.sender.files_passed() {
            let now = tcp_info(self.stream.as_fd())
                .map(|t| t.total_retrans)
                .unwrap_or(self.last_retrans);
            self.per_file
                .push(u64::from(now.saturating_sub(self.last_retrans)));
            self.last_retrans = now;
        }
    }

    fn run(&mut self) -> Result<(), TransferError> {
        let mut buf = vec![0u8; HEADER_LEN + TCP_CHUNK];
        loop {
            self.pump()?;
            self.check()?;
            if self.sender.is_done() {
                self.sample_files();
                return Ok(());
            }
            if self.sender.sent_all() {
                self.sample_files();
                let left = self.deadline.saturating_duration_since(Instant::now());
                self.wait(left.min(POLL))?;
                continue;
            }
            let (h, payload) = buf.split_at_mut(HEADER_LEN);
            if let Some((stream, offset, n)) = self.sender.next_chunk(payload)? {
                put_header(h.try_into().expect("HEADER_LEN"), stream, offset, n as u32);
                self.write_all(&buf[..HEADER_LEN + n])?;
            }
            self.sample_files();
        }
    }
}

/// Sends `paths` to the transfer server at `to` over one TCP connection, with congestion
/// control `cc` if given (the one in effect is always read back and reported). Fails when a
/// file's verdict is not ok, the server aborts, or `timeout` passes (counted from the start of
/// `connect`; hashing the files before that is not counted).
pub fn send_tcp(
    to: SocketAddr,
    paths: &[PathBuf],
    cc: Option<&str>,
    timeout: Duration,
) -> Result<TcpReport, TransferError> {
    let sender = FileSender::new(paths)?;
    let t0 = Instant::now();
    let sock = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| TransferError::io("socket", e))?;
    if let Some(c) = cc {
        set_cc(SockRef::from(&sock), c)?;
    }
    sock.connect_timeout(&to.into(), timeout)
        .map_err(|source| TransferError::Connect { addr: to, source })?;
    let cc_eff = read_cc(SockRef::from(&sock))?;
    let stream: TcpStream = sock.into();
    let opt = |e| TransferError::io("setting socket options", e);
    stream.set_nodelay(true).map_err(opt)?;
    stream.set_write_timeout(Some(POLL)).map_err(opt)?;
    stream.set_read_timeout(Some(POLL)).map_err(opt)?;
    let info0 = tcp_info(stream.as_fd()).unwrap_or_default();
    let reader = stream
        .try_clone()
        .map_err(|e| TransferError::io("dup of the socket", e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, from_server) = mpsc::channel();
    let stop2 = stop.clone();
    let handle = std::thread::Builder::new()
        .name("transfer-reader".into())
        .spawn(move || read_server(reader, tx, stop2))
        .map_err(|e| TransferError::io("starting the reader thread", e))?;
    let mut c = Client {
        stream: &stream,
        sender,
        from_server,
        closed: false,
        deadline: t0 + timeout,
        timeout,
        per_file: Vec::new(),
        last_retrans: info0.total_retrans,
    };
    let r = c.run();
    let total_ns = t0.elapsed().as_nanos() as u64;
    let tcp = tcp_info(stream.as_fd()).unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    let _ = stream.shutdown(Shutdown::Both);
    let _ = handle.join();
    r?;
    Ok(TcpReport {
        cc: cc_eff,
        total_ns,
        bytes: c.sender.manifest().total_bytes(),
        sent_bytes: c.sender.sent_bytes(),
        files: c.sender.outcomes(),
        per_file_retransmits: c.per_file,
        total_retrans: u64::from(tcp.total_retrans.saturating_sub(info0.total_retrans)),
        rtt_us: tcp.rtt_us,
        segs_out: tcp.segs_out,
        tcp,
    })
}
