//! The sink's side of a bulk test's TLS (`tls` in a `BULK/2` request): one self-signed
//! certificate per sink run, made when it binds and held in memory (its SHA-256 is printed, so
//! a client can pin it), and each stream's handshake after the stream's READY.
//!
//! Bounds: a handshake is bounded as every read of the sink (the stop flag, the test given
//! up, the idle timeout) and as a whole by the idle timeout or [`HANDSHAKE_LIMIT`], whichever
//! is shorter (a handshake is a few round trips), so a client that trickles a byte at a time
//! holds its thread no longer. A client that sends no TLS (plain text, garbage)
//! is refused with rustls' reason, and counted as any refused connection.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use socklab_tls::{Fingerprint, Identity, TlsVersion};

use super::{conn_error, Conn, Outcome};
use crate::partial::{is_no_progress, Policy};
use crate::tlsio::TlsStream;

/// The key of the sink role's `REPORT` line that names its certificate's SHA-256.
pub const TLS_FINGERPRINT_KEY: &str = "tls_fingerprint";

/// The longest a stream's handshake may take, however it trickles (the idle timeout when that
/// is shorter).
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// The sink's certificate of this run and its two server configurations.
#[derive(Debug)]
pub(super) struct TlsServer {
    v13: Arc<rustls::ServerConfig>,
    v12: Arc<rustls::ServerConfig>,
    pub fingerprint: Fingerprint,
}

impl TlsServer {
    /// A new self-signed certificate (ECDSA P-256), in memory only.
    pub fn new() -> Result<TlsServer, String> {
        let id = Identity::self_signed(&[]).map_err(|e| e.to_string())?;
        let config = |v| socklab_tls::server_config(&id, v, &[]).map_err(|e| e.to_string());
        Ok(TlsServer {
            v13: config(TlsVersion::Tls13)?,
            v12: config(TlsVersion::Tls12)?,
            fingerprint: id.fingerprint(),
        })
    }
}

/// The bounds of a handshake at the sink.
struct Bounds<'a, 'b> {
    c: &'a Conn<'b>,
    started: Instant,
    limit: Duration,
    halted: Option<Outcome>,
}

impl Bounds<'_, '_> {
    fn over(&mut self, since: Option<Instant>) -> io::Result<()> {
        let o = if let Err(o) = self.c.halted() {
            o
        } else if self.started.elapsed() >= self.limit {
            Outcome::Refused(format!(
                "its TLS handshake did not finish within {}",
                socklab_units::format_duration(self.limit)
            ))
        } else if since.is_some_and(|s| s.elapsed() >= self.c.sh.cfg.idle_timeout) {
            Outcome::IdleTimeout
        } else {
            return Ok(());
        };
        self.halted = Some(o);
        Err(io::Error::other("given up"))
    }
}

impl Policy for Bounds<'_, '_> {
    fn stalled(&mut self, e: io::Error, since: Instant) -> io::Result<()> {
        if !is_no_progress(&e) {
            return Err(e);
        }
        self.over(Some(since))
    }

    fn moved(&mut self, _n: usize) -> io::Result<()> {
        self.over(None)
    }
}

/// The stream's handshake, right after its READY: on success the connection's reads go
/// through TLS from now on ([`Conn::read`]).
pub(super) fn accept(
    c: &mut Conn<'_>,
    version: TlsVersion,
    read_size: usize,
) -> Result<(), Outcome> {
    let Some(server) = c.sh.tls.as_ref() else {
        return Err(Outcome::Refused("this sink has no certificate".into()));
    };
    let config = match version {
        TlsVersion::Tls13 => server.v13.clone(),
        TlsVersion::Tls12 => server.v12.clone(),
    };
    let mut t = TlsStream::server(config, read_size).map_err(|e| conn_error(&e))?;
    let mut b = Bounds {
        c,
        started: Instant::now(),
        limit: HANDSHAKE_LIMIT.min(c.sh.cfg.idle_timeout),
        halted: None,
    };
    let r = t.handshake(&c.stream, &mut b);
    if let Some(o) = b.halted.take() {
        return Err(o);
    }
    match r {
        Ok(()) => {
            c.tls = Some(Box::new(t));
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(Outcome::Refused(format!(
            "its TLS handshake failed: {e} (the test asked for TLS on every stream)"
        ))),
        Err(e) => Err(conn_error(&e)),
    }
}

/// Sends `close_notify` on a TLS stream (best effort, within a tick or two): the clean end a
/// TLS peer reads before the FIN.
pub(super) fn close(c: &mut Conn<'_>) {
    let stop = &c.sh.stop;
    if let Some(t) = c.tls.as_deref_mut() {
        let mut patient = |e: io::Error, since: Instant| {
            if !is_no_progress(&e)
                || stop.load(Ordering::Relaxed)
                || since.elapsed() >= Duration::from_secs(1)
            {
                Err(e)
            } else {
                Ok(())
            }
        };
        let _ = t.close(&c.stream, &mut patient);
    }
}

/// [`Conn::receive`] on a TLS stream: the plaintext counted and hashed where rustls holds
/// it (no copy into a read buffer); `reads` counts the socket's reads that returned data.
pub(super) fn receive(
    c: &mut Conn<'_>,
    result: &mut crate::protocol::SinkResult,
    hasher: &mut Option<blake3::Hasher>,
) -> Outcome {
    let Some(mut t) = c.tls.take() else {
        return Outcome::Aborted("no TLS".into());
    };
    let outcome = loop {
        let mut hash = |d: &[u8]| {
            if let Some(h) = hasher.as_mut() {
                h.update(d);
            }
        };
        match t.read_in_place(&c.stream, &mut hash) {
            Ok(0) => break Outcome::Complete,
            Ok(n) => {
                c.idle_since = None;
                result.bytes += n as u64;
                if let Err(o) = c.halted() {
                    break o;
                }
            }
            Err(e) => {
                if let Err(o) = c.waited(e) {
                    break o;
                }
            }
        }
    };
    result.reads = t.socket_reads;
    c.tls = Some(t);
    outcome
}

impl super::Sink {
    /// The SHA-256 of the certificate this sink presents to TLS streams (`None`: it has none).
    pub fn tls_fingerprint(&self) -> Option<Fingerprint> {
        self.shared.tls.as_ref().map(|t| t.fingerprint)
    }
}
