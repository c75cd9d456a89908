//! The client's side of a bulk test's TLS (`tls`, see [`super::BulkTls`]): the rustls
//! configuration made once per test, each stream's handshake after its READY (timed), and
//! what the streams agreed on, gathered into the result.

use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use socklab_tls::Negotiated;

use super::bounds::Bounds;
use super::result::TlsStats;
use super::BulkConfig;
use crate::tlsio::TlsStream;
use crate::NetError;

/// The client configuration of a test (`None`: plain TCP).
pub(crate) fn client_config(
    cfg: &BulkConfig,
) -> Result<Option<Arc<rustls::ClientConfig>>, NetError> {
    let Some(t) = &cfg.tls else {
        return Ok(None);
    };
    socklab_tls::client_config(&t.trust, t.version, &[])
        .map(Some)
        .map_err(|e| NetError::Invalid(format!("`tls_trust` {}: {e}", t.trust.describe())))
}

/// One stream's handshake: how long it took and what it agreed on.
#[derive(Debug, Clone)]
pub(crate) struct TlsDone {
    pub seconds: f64,
    pub negotiated: Negotiated,
}

/// Runs stream `index`'s handshake on `stream` within the bounds of `b` (its READY phase
/// limit, Ctrl-C, another stream's failure): a sink that fails the pin or does not speak TLS
/// ends the test with rustls' reason.
pub(crate) fn handshake(
    cfg: &BulkConfig,
    config: &Arc<rustls::ClientConfig>,
    stream: &TcpStream,
    b: &mut Bounds<'_>,
    index: u32,
) -> Result<(TlsStream, TlsDone), NetError> {
    let mut t = TlsStream::client(config.clone(), cfg.read_size)
        .map_err(|e| NetError::io("starting TLS", e))?;
    let t0 = Instant::now();
    b.phase = Some((t0 + super::READY_WAIT, "TLS handshake"));
    t.handshake(stream, b).map_err(|e| {
        if b.halted.is_some() {
            b.error(cfg, &format!("the TLS handshake of stream {index} with"), e)
        } else {
            NetError::Protocol {
                peer: cfg.to.to_string(),
                detail: format!("the TLS handshake of stream {index} failed: {e}"),
            }
        }
    })?;
    let seconds = t0.elapsed().as_secs_f64();
    let negotiated = t.negotiated();
    Ok((
        t,
        TlsDone {
            seconds,
            negotiated,
        },
    ))
}

/// The test's TLS figures from its streams' handshakes, by index (`None`: plain TCP).
pub(crate) fn stats<'a>(dones: impl Iterator<Item = Option<&'a TlsDone>>) -> Option<TlsStats> {
    let mut out: Option<TlsStats> = None;
    for d in dones {
        let d = d?;
        let s = out.get_or_insert_with(|| TlsStats {
            version: d.negotiated.version.clone(),
            cipher: d.negotiated.cipher.clone(),
            handshake_s: Vec::new(),
        });
        s.handshake_s.push(d.seconds);
    }
    out
}
