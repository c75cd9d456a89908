//! The tokio design's TLS connections (tokio-rustls): the handshake bounded by the idle
//! timeout and by the cap on handshakes in progress ([`TlsCtx`]), then the shared
//! [`Session`] over the decrypted stream. The idle timer moves on only with progress (a
//! request answered; echo and discard: any byte), as in the plain connections.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};
use tokio_rustls::TlsAcceptor;

use super::tls::TlsCtx;
use super::{Replies, Session};

/// Each connection's read buffer.
const BUF: usize = 16 << 10;
/// The handshake's bound when the idle timeout is off (only library callers; `serve` refuses
/// `idle_timeout` off with TLS).
const HANDSHAKE_FALLBACK: Duration = Duration::from_secs(10);

/// Serves one TLS connection until the client leaves, the session says close, an error, or
/// the idle timeout; `flush` gets the requests answered so far before every wait.
pub(super) async fn connection(
    stream: TcpStream,
    ctx: Arc<TlsCtx>,
    r: &Replies,
    idle: Option<Duration>,
    bytes_are_progress: bool,
    flush: &mut (dyn FnMut(u64) + Send),
) {
    if !ctx.begin_handshake() {
        return;
    }
    let acceptor = TlsAcceptor::from(ctx.config.clone());
    let limit = Instant::now() + idle.unwrap_or(HANDSHAKE_FALLBACK);
    let handshake = timeout_at(limit, acceptor.accept(stream)).await;
    ctx.end_handshake();
    let mut tls = match handshake {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            // A TLS error is a refusal; a client that left mid-handshake is not.
            if let Some(t) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                ctx.refuse(&t.to_string());
            }
            return;
        }
        Err(_) => {
            ctx.refuse("the handshake stalled past the idle timeout");
            return;
        }
    };
    let mut s: Session = r.session();
    let mut buf = vec![0u8; BUF];
    let mut input: Vec<u8> = Vec::new();
    let far = || Instant::now() + Duration::from_secs(86_400 * 365);
    let mut deadline = idle.map_or_else(far, |t| Instant::now() + t);
    loop {
        flush(s.requests());
        let before = s.requests();
        let n = match timeout_at(deadline, tls.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => break, // end of stream, an error, or the idle timeout
        };
        input.extend_from_slice(&buf[..n]);
        let mut off = 0;
        let mut close = false;
        loop {
            if s.has_pending() {
                let out = s.pending(r);
                let len = out.len();
                if !matches!(timeout_at(deadline, tls.write_all(out)).await, Ok(Ok(()))) {
                    flush(s.requests());
                    return;
                }
                s.sent(len, r);
                continue;
            }
            if s.should_close() {
                close = true;
                break;
            }
            if off == input.len() {
                break;
            }
            let c = s.receive(&input[off..]);
            off += c;
            if c == 0 && !s.has_pending() {
                break;
            }
        }
        input.drain(..off);
        if !matches!(timeout_at(deadline, tls.flush()).await, Ok(Ok(()))) || close {
            let _ = timeout_at(deadline, tls.shutdown()).await;
            break;
        }
        if let Some(t) = idle {
            if bytes_are_progress || s.requests() != before {
                deadline = Instant::now() + t;
            }
        }
    }
    flush(s.requests());
}
