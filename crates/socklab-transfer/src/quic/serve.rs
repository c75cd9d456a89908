//! The QUIC server of `socklab transfer serve --proto quic`.
//!
//! Bounds (issue 30 part 4): at most `max_sessions` connections at once (more are refused by
//! QUIC's CONNECTION_REFUSED and counted); unvalidated Initials beyond half of
//! `max_handshaking` get a stateless Retry, so a flood from spoofed addresses costs no state;
//! quinn itself holds at most `max_handshaking` Initials awaiting an answer; a connection
//! without progress for `idle_timeout` is closed; each client has at most 16 streams open.

use std::cell::{Cell, RefCell};
use std::net::UdpSocket;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socklab_tls::{server_config, Identity, TlsVersion};

use super::{parse_header, runtime, tls_err, transport, QuicCc, ALPN, HEADER_LEN};
use crate::sessions::{SessionLog, KEEP_RECENT};
use crate::tcp::ServerSession;
use crate::{FileReceiver, ReceiveLimits, TransferError};

const POLL: Duration = Duration::from_millis(100);
/// How a session whose handshake failed begins its error (it is counted, not kept).
const HANDSHAKE_FAILED: &str = "QUIC handshake failed";

/// How a QUIC transfer server runs.
#[derive(Debug, Clone)]
pub struct QuicServeOptions {
    /// Most sessions at once; further clients are refused.
    pub max_sessions: usize,
    /// Most handshakes in progress; Initials beyond half of it must prove their address
    /// (a stateless Retry) first.
    pub max_handshaking: usize,
    /// A session without progress for this long is closed.
    pub idle_timeout: Duration,
    /// Limits shared by every session.
    pub limits: ReceiveLimits,
}

impl Default for QuicServeOptions {
    fn default() -> Self {
        Self {
            max_sessions: 64,
            max_handshaking: 256,
            idle_timeout: Duration::from_secs(10),
            limits: ReceiveLimits::default(),
        }
    }
}

/// Serves QUIC transfers on `socket` into `dir` with the certificate `identity`, until `stop`
/// is set or, with `once`, the first session ends. Failed sessions are recorded and the
/// server keeps serving; refused clients and Retries are counted in the log (`refused`).
pub fn serve_quic(
    socket: UdpSocket,
    dir: &Path,
    identity: &Identity,
    opts: &QuicServeOptions,
    stop: &AtomicBool,
    once: bool,
) -> Result<SessionLog, TransferError> {
    drop(FileReceiver::with_limits(dir, &opts.limits)?);
    let tls = server_config(identity, TlsVersion::Tls13, &[ALPN]).map_err(tls_err)?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| TransferError::Invalid(format!("QUIC TLS configuration: {e}")))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(transport(QuicCc::Cubic, opts.idle_timeout, 16));
    cfg.max_incoming(opts.max_handshaking.max(1));
    crate::rudp::enlarge_buffers(&socket);
    socket
        .set_nonblocking(true)
        .map_err(|e| TransferError::io("QUIC server socket", e))?;
    let rt = runtime()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(cfg),
            socket,
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|e| TransferError::io("QUIC server endpoint", e))?;
        let log = accept_loop(&endpoint, dir, opts, stop, once).await;
        endpoint.close(quinn::VarInt::from_u32(0), b"server stopped");
        let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
        Ok(log)
    })
}

async fn accept_loop(
    endpoint: &quinn::Endpoint,
    dir: &Path,
    opts: &QuicServeOptions,
    stop: &AtomicBool,
    once: bool,
) -> SessionLog {
    let mut log = SessionLog::new(KEEP_RECENT);
    let active = Rc::new(RefCell::new(0usize));
    let (tx, mut ended) = tokio::sync::mpsc::unbounded_channel::<ServerSession>();
    let mut open = 0usize;
    let over = Rc::new(Cell::new(false));
    loop {
        if stop.load(Ordering::Relaxed) || (once && log.sessions > 0) {
            break;
        }
        tokio::select! {
            inc = endpoint.accept() => {
                let Some(inc) = inc else { break };
                if *active.borrow() >= opts.max_sessions.max(1) {
                    log.refused += 1;
                    inc.refuse();
                    continue;
                }
                if !inc.remote_address_validated() && *active.borrow() >= opts.max_handshaking / 2 {
                    log.refused += 1;
                    let _ = inc.retry();
                    continue;
                }
                *active.borrow_mut() += 1;
                open += 1;
                let (tx, active) = (tx.clone(), active.clone());
                let (dir, opts) = (dir.to_path_buf(), opts.clone());
                let over = over.clone();
                tokio::task::spawn_local(async move {
                    let s = session(inc, &dir, &opts, &over).await;
                    *active.borrow_mut() -= 1;
                    let _ = tx.send(s);
                });
            }
            s = ended.recv() => {
                if let Some(s) = s {
                    open -= 1;
                    account(&mut log, s);
                }
            }
            _ = tokio::time::sleep(POLL) => {}
        }
    }
    // Sessions still running see the stop within POLL.
    over.set(true);
    let until = Instant::now() + Duration::from_secs(2);
    while open > 0 && Instant::now() < until {
        if let Ok(Some(s)) = tokio::time::timeout(POLL, ended.recv()).await {
            open -= 1;
            account(&mut log, s);
        }
    }
    log.open_at_stop += open as u64;
    log
}

/// Counts an ended session in the log: a failed handshake is only counted (it is no session),
/// the rest recorded, one closed for want of progress counted as such too.
fn account(log: &mut SessionLog, s: ServerSession) {
    let error = s.error.as_deref().unwrap_or("");
    if s.files.is_empty() && error.starts_with(HANDSHAKE_FAILED) {
        log.handshakes_failed += 1;
        return;
    }
    if error.contains("without progress") {
        log.idle_closed += 1;
    }
    log.record(s);
}

/// One client's session: handshake, then every QUIC stream it opens fed to one receiver, the
/// receiver's records written back on one stream, until `Done` (or a failure, the stop, or no
/// progress for the idle timeout).
async fn session(
    inc: quinn::Incoming,
    dir: &Path,
    opts: &QuicServeOptions,
    over: &Cell<bool>,
) -> ServerSession {
    let t0 = Instant::now();
    let peer = inc.remote_address();
    let mut s = ServerSession {
        peer,
        cc: "cubic".into(),
        files: Vec::new(),
        bytes: 0,
        total_ns: 0,
        error: None,
    };
    let conn = match inc.await {
        Ok(c) => c,
        Err(e) => {
            s.error = Some(format!("{HANDSHAKE_FAILED} with {peer}: {e}"));
            s.total_ns = t0.elapsed().as_nanos() as u64;
            return s;
        }
    };
    let rx = match FileReceiver::with_limits(dir, &opts.limits) {
        Ok(r) => Rc::new(RefCell::new(r)),
        Err(e) => {
            conn.close(quinn::VarInt::from_u32(1), e.to_string().as_bytes());
            s.error = Some(e.to_string());
            return s;
        }
    };
    let r = run_session(&conn, &rx, opts, over).await;
    (s.files, s.bytes) = {
        let rx = rx.borrow();
        (rx.report(), rx.bytes_written())
    };
    s.total_ns = t0.elapsed().as_nanos() as u64;
    if let Err(e) = r {
        let msg = e.to_string();
        conn.close(quinn::VarInt::from_u32(1), msg.as_bytes());
        s.error = Some(msg);
    } else {
        // Let the client read the last records and close first.
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await;
    }
    s
}

async fn run_session(
    conn: &quinn::Connection,
    rx: &Rc<RefCell<FileReceiver>>,
    opts: &QuicServeOptions,
    over: &Cell<bool>,
) -> Result<(), TransferError> {
    let lost = |e: quinn::ConnectionError| match e {
        quinn::ConnectionError::ApplicationClosed(_) | quinn::ConnectionError::LocallyClosed => {
            TransferError::Protocol("the client closed the connection before Done".into())
        }
        other => TransferError::Protocol(format!("the QUIC connection ended: {other}")),
    };
    let mut ctl = conn.open_uni().await.map_err(lost)?;
    let progress = Rc::new(Cell::new(Instant::now()));
    let failure: Rc<RefCell<Option<TransferError>>> = Rc::new(RefCell::new(None));
    let notify = Rc::new(tokio::sync::Notify::new());
    loop {
        // Records first: the receiver queues them as chunks arrive.
        let out = rx.borrow_mut().poll_control();
        if let Some(bytes) = out {
            ctl.write_all(&bytes)
                .await
                .map_err(|e| TransferError::io("QUIC control write", std::io::Error::other(e)))?;
        }
        if rx.borrow().is_done() {
            let _ = ctl.finish();
            return Ok(());
        }
        if let Some(e) = failure.borrow_mut().take() {
            return Err(e);
        }
        if rx.borrow().failed() {
            return Err(TransferError::Protocol("the session failed".into()));
        }
        if over.get() {
            return Err(TransferError::Interrupted);
        }
        if progress.get().elapsed() > opts.idle_timeout {
            return Err(TransferError::Timeout(format!(
                "closed without progress for {:?} (`idle_timeout`)",
                opts.idle_timeout
            )));
        }
        tokio::select! {
            st = conn.accept_uni() => {
                let st = st.map_err(lost)?;
                let (rx, progress, failure, notify) =
                    (rx.clone(), progress.clone(), failure.clone(), notify.clone());
                tokio::task::spawn_local(async move {
                    if let Err(e) = read_stream(st, &rx, &progress).await {
                        failure.borrow_mut().get_or_insert(e);
                    }
                    notify.notify_one();
                });
            }
            _ = notify.notified() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// Feeds one QUIC stream to the receiver: its header, then its bytes at their offsets.
async fn read_stream(
    mut st: quinn::RecvStream,
    rx: &RefCell<FileReceiver>,
    progress: &Cell<Instant>,
) -> Result<(), TransferError> {
    let read = |e: String| TransferError::Protocol(format!("reading a QUIC stream: {e}"));
    let mut h = [0u8; HEADER_LEN];
    st.read_exact(&mut h)
        .await
        .map_err(|e| read(e.to_string()))?;
    let (stream, start) = parse_header(&h);
    let mut off = start;
    while let Some(c) = st
        .read_chunk(64 * 1024, true)
        .await
        .map_err(|e| read(e.to_string()))?
    {
        rx.borrow_mut().on_chunk(stream, off, &c.bytes)?;
        off = off.checked_add(c.bytes.len() as u64).ok_or_else(|| {
            TransferError::Protocol(format!("stream {stream} runs past 2^64 bytes"))
        })?;
        progress.set(Instant::now());
    }
    Ok(())
}
