//! QUIC (quinn) as the third transport of `socklab transfer` (issue 30).
//!
//! The application layer is the one TCP and rudp share: [`FileSender`](crate::FileSender)
//! hands out chunks `(stream, offset, bytes)`, [`FileReceiver`](crate::FileReceiver) writes
//! and verifies them, and the server's [`Control`](crate::Control) records come back in order.
//! On QUIC each logical stream gets unidirectional QUIC streams of its own: stream 0 (the
//! manifest) and one per file, so a loss in one file's data holds back only that file (seed
//! 004's head-of-line point). A QUIC stream starts with a 12-byte header, the logical stream
//! (u32) and the offset of its first byte (u64, little-endian); a sender that skips ranges the
//! server already has (resume) opens a new QUIC stream at the next offset. The server opens
//! one unidirectional stream back for its control records.
//!
//! Certificates: the server presents a per-run [`socklab_tls::Identity`]; the client pins a
//! fingerprint or, as the lab does for the servers it starts itself, trusts any (the link
//! between them is the lab's own). ALPN `socklab-transfer/1`.

mod client;
mod serve;

pub use client::{send_quic, QuicCc, QuicReport, QuicSendOptions};
pub use serve::{serve_quic, QuicServeOptions};

use std::sync::Arc;
use std::time::Duration;

use crate::TransferError;

/// ALPN of socklab's transfer protocol over QUIC.
pub const ALPN: &[u8] = b"socklab-transfer/1";

/// The key of the `REPORT` line in which the lab's QUIC transfer server names its
/// certificate's SHA-256 (the lab's client pins it).
pub const FINGERPRINT_KEY: &str = "quic_fingerprint";

/// Bytes of the header that starts every QUIC stream: logical stream (u32), offset (u64).
pub const HEADER_LEN: usize = 12;

/// Flow-control windows: a 100 Mbit/s, 100 ms path holds 1.25 MB in flight, a loopback one
/// far more; quinn's defaults (1.25 MB per stream) would cap loopback transfers.
const STREAM_WINDOW: u32 = 16 << 20;
const CONN_WINDOW: u32 = 64 << 20;

/// Encodes a stream header.
pub fn header(stream: u32, offset: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(&stream.to_le_bytes());
    h[4..].copy_from_slice(&offset.to_le_bytes());
    h
}

/// Decodes a stream header.
pub fn parse_header(h: &[u8; HEADER_LEN]) -> (u32, u64) {
    let mut s = [0u8; 4];
    s.copy_from_slice(&h[..4]);
    let mut o = [0u8; 8];
    o.copy_from_slice(&h[4..]);
    (u32::from_le_bytes(s), u64::from_le_bytes(o))
}

/// The transport settings both ends use: windows, idle timeout, congestion control.
fn transport(cc: QuicCc, idle: Duration, max_uni: u32) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(STREAM_WINDOW))
        .receive_window(quinn::VarInt::from_u32(CONN_WINDOW))
        .send_window(u64::from(CONN_WINDOW))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(max_uni))
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(0))
        .keep_alive_interval(Some(idle / 4));
    if let Ok(i) = quinn::IdleTimeout::try_from(idle) {
        t.max_idle_timeout(Some(i));
    }
    match cc {
        QuicCc::Cubic => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()))
        }
        QuicCc::NewReno => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()))
        }
        QuicCc::Bbr => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()))
        }
    };
    Arc::new(t)
}

/// A current-thread tokio runtime for one QUIC client or server.
fn runtime() -> Result<tokio::runtime::Runtime, TransferError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| TransferError::io("starting the QUIC runtime", e))
}

fn tls_err(e: socklab_tls::TlsError) -> TransferError {
    TransferError::Invalid(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        for (s, o) in [(0, 0), (1, 987_000), (u32::MAX, u64::MAX)] {
            assert_eq!(parse_header(&header(s, o)), (s, o));
        }
    }
}
