//! The QUIC client of `socklab transfer`: sends files and follows the server's records.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socklab_tls::{client_config, TlsVersion, Trust};

use super::{header, runtime, tls_err, transport, ALPN};
use crate::{FileOutcome, FileSender, TransferError};

/// The congestion controller of a QUIC connection (quinn's three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuicCc {
    /// CUBIC (RFC 9438), quinn's default.
    #[default]
    Cubic,
    /// NewReno (RFC 9002's reference).
    NewReno,
    /// quinn's BBR (experimental in quinn).
    Bbr,
}

impl QuicCc {
    /// The name as parameters spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cubic => "cubic",
            Self::NewReno => "newreno",
            Self::Bbr => "bbr",
        }
    }
}

impl FromStr for QuicCc {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "cubic" => Ok(Self::Cubic),
            "newreno" | "reno" => Ok(Self::NewReno),
            "bbr" => Ok(Self::Bbr),
            other => Err(format!(
                "QUIC has no congestion control {other:?}: quinn offers cubic, newreno and bbr"
            )),
        }
    }
}

/// How the client connects.
#[derive(Debug, Clone)]
pub struct QuicSendOptions {
    /// Which server certificate to accept.
    pub trust: Trust,
    /// Congestion control.
    pub cc: QuicCc,
}

impl Default for QuicSendOptions {
    fn default() -> Self {
        Self {
            trust: Trust::Unverified,
            cc: QuicCc::Cubic,
        }
    }
}

/// What one QUIC transfer measured on the client.
#[derive(Debug, Clone)]
pub struct QuicReport {
    /// Congestion control of the connection.
    pub cc: String,
    /// Nanoseconds from the start of the handshake until `Done` arrived.
    pub total_ns: u64,
    /// Nanoseconds the handshake took.
    pub handshake_ns: u64,
    /// File bytes in the manifest.
    pub bytes: u64,
    /// File bytes actually sent.
    pub sent_bytes: u64,
    /// Per-file outcomes.
    pub files: Vec<FileOutcome>,
    /// Always empty: quinn sends the files' streams side by side, so a lost packet belongs
    /// to no one file (a seed-004 per-file table has no QUIC row; `lost_packets` is the total).
    pub per_file_retransmits: Vec<u64>,
    /// Packets lost over the whole connection.
    pub lost_packets: u64,
    /// Packets sent over the connection.
    pub sent_packets: u64,
    /// Congestion events (window reductions).
    pub congestion_events: u64,
    /// Smoothed RTT at the end, microseconds.
    pub rtt_us: u64,
    /// Smallest RTT seen, microseconds.
    pub min_rtt_us: u64,
    /// The path MTU quinn used at the end (1200 at the start; PMTU discovery raises it).
    pub mtu: u16,
}

/// Sends `paths` to the QUIC transfer server at `to`. Fails when a file's verdict is not ok,
/// the server aborts, the certificate is not trusted, or `timeout` passes.
pub fn send_quic(
    to: SocketAddr,
    paths: &[PathBuf],
    opts: &QuicSendOptions,
    timeout: Duration,
) -> Result<QuicReport, TransferError> {
    let sender = FileSender::new(paths)?;
    let rt = runtime()?;
    rt.block_on(async {
        match tokio::time::timeout(timeout, run(to, sender, opts)).await {
            Ok(r) => r,
            Err(_) => Err(TransferError::Timeout(format!(
                "the QUIC transfer did not finish within {timeout:?} (raise `timeout`?)"
            ))),
        }
    })
}

async fn run(
    to: SocketAddr,
    sender: FileSender,
    opts: &QuicSendOptions,
) -> Result<QuicReport, TransferError> {
    let tls = client_config(&opts.trust, TlsVersion::Tls13, &[ALPN]).map_err(tls_err)?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| TransferError::Invalid(format!("QUIC TLS configuration: {e}")))?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(transport(opts.cc, Duration::from_secs(10), 16));
    let bind: SocketAddr = if to.is_ipv4() {
        "0.0.0.0:0".parse().expect("address")
    } else {
        "[::]:0".parse().expect("address")
    };
    let sock =
        std::net::UdpSocket::bind(bind).map_err(|e| TransferError::io("QUIC client socket", e))?;
    // The same socket buffers as rudp's, so neither transport loses packets the other would
    // have queued.
    crate::rudp::enlarge_buffers(&sock);
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        sock,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(|e| TransferError::io("QUIC client endpoint", e))?;
    let t0 = Instant::now();
    let connecting = endpoint
        .connect_with(cfg, to, "localhost")
        .map_err(|e| TransferError::Invalid(format!("QUIC connect to {to}: {e}")))?;
    let conn = connecting.await.map_err(|e| match e {
        // The handshake itself failed (a certificate not trusted, no common ALPN).
        quinn::ConnectionError::TransportError(t) => {
            TransferError::Invalid(format!("the QUIC handshake with {to} failed: {t}"))
        }
        other => TransferError::Connect {
            addr: to,
            source: std::io::Error::other(format!("QUIC handshake: {other}")),
        },
    })?;
    let handshake_ns = t0.elapsed().as_nanos() as u64;
    let sender = Arc::new(Mutex::new(sender));
    let writer = write_all(conn.clone(), sender.clone());
    let reader = read_control(conn.clone(), sender.clone());
    tokio::pin!(writer);
    tokio::pin!(reader);
    let mut wrote = false;
    let result = loop {
        tokio::select! {
            w = &mut writer, if !wrote => {
                if let Err(e) = w {
                    // The server's reason, when it gave one, says more than a write error.
                    let why = tokio::time::timeout(Duration::from_secs(1), &mut reader).await;
                    break Err(match why {
                        Ok(Err(r)) => r,
                        _ => e,
                    });
                }
                wrote = true;
            }
            r = &mut reader => break r,
        }
    };
    let total_ns = t0.elapsed().as_nanos() as u64;
    let stats = conn.stats();
    conn.close(quinn::VarInt::from_u32(0), b"done");
    endpoint.wait_idle().await;
    result?;
    let s = sender.lock().map_err(|_| poisoned())?;
    Ok(QuicReport {
        cc: opts.cc.as_str().to_string(),
        total_ns,
        handshake_ns,
        bytes: s.manifest().total_bytes(),
        sent_bytes: s.sent_bytes(),
        files: s.outcomes(),
        per_file_retransmits: Vec::new(),
        lost_packets: stats.path.lost_packets,
        sent_packets: stats.path.sent_packets,
        congestion_events: stats.path.congestion_events,
        rtt_us: stats.path.rtt.as_micros() as u64,
        min_rtt_us: stats.path.min_rtt.as_micros() as u64,
        mtu: stats.path.current_mtu,
    })
}

fn poisoned() -> TransferError {
    TransferError::Protocol("a QUIC task panicked".into())
}

fn write_err(e: impl std::fmt::Display) -> TransferError {
    TransferError::io("QUIC write", std::io::Error::other(e.to_string()))
}

/// Hands every chunk to the connection, one QUIC stream per logical stream (a new one where
/// the offsets jump).
async fn write_all(
    conn: quinn::Connection,
    sender: Arc<Mutex<FileSender>>,
) -> Result<(), TransferError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut open: Option<(u32, u64, quinn::SendStream)> = None;
    loop {
        let chunk = sender
            .lock()
            .map_err(|_| poisoned())?
            .next_chunk(&mut buf)?;
        let Some((stream, offset, len)) = chunk else {
            break;
        };
        let reuse = matches!(&open, Some((s, next, _)) if *s == stream && *next == offset);
        if !reuse {
            if let Some((_, _, mut old)) = open.take() {
                old.finish().map_err(write_err)?;
            }
            let mut st = conn.open_uni().await.map_err(write_err)?;
            st.write_all(&header(stream, offset))
                .await
                .map_err(write_err)?;
            open = Some((stream, offset, st));
        }
        let (_, next, st) = open.as_mut().expect("opened above");
        st.write_all(&buf[..len]).await.map_err(write_err)?;
        *next += len as u64;
    }
    if let Some((_, _, mut st)) = open.take() {
        st.finish().map_err(write_err)?;
    }
    Ok(())
}

/// Reads the server's control stream until the sender is done or has failed.
async fn read_control(
    conn: quinn::Connection,
    sender: Arc<Mutex<FileSender>>,
) -> Result<(), TransferError> {
    let mut rx = match conn.accept_uni().await {
        Ok(rx) => rx,
        Err(e) => return Err(closed(e)),
    };
    let mut off = 0u64;
    loop {
        match rx.read_chunk(64 * 1024, true).await {
            Ok(Some(c)) => {
                let mut s = sender.lock().map_err(|_| poisoned())?;
                s.on_control(off, &c.bytes)?;
                off += c.bytes.len() as u64;
                if let Some(d) = s.aborted() {
                    return Err(TransferError::Aborted(d.to_string()));
                }
                if let Some(f) = s.failed() {
                    return Err(TransferError::Verdict(f));
                }
                if s.is_done() {
                    return Ok(());
                }
            }
            Ok(None) => {
                return Err(TransferError::Protocol(
                    "the server ended its control stream before it confirmed every file".into(),
                ))
            }
            Err(quinn::ReadError::ConnectionLost(e)) => return Err(closed(e)),
            Err(e) => {
                return Err(TransferError::Protocol(format!(
                    "reading the server's records: {e}"
                )))
            }
        }
    }
}

fn closed(e: quinn::ConnectionError) -> TransferError {
    match e {
        quinn::ConnectionError::ApplicationClosed(a) => {
            TransferError::Aborted(String::from_utf8_lossy(&a.reason).to_string())
        }
        other => TransferError::Protocol(format!("the QUIC connection ended: {other}")),
    }
}
