//! `serve`'s TLS keys: `tls` (a per-run self-signed certificate held in memory), or the
//! user's PEM files (`tls_cert` and `tls_key`, which imply `tls`).

use std::path::Path;
use std::time::Duration;

use socklab_net::server::{design, Design, ServeTls};
use socklab_tls::{Fingerprint, Identity, TlsVersion};

use super::RoleError;

/// The TLS keys as given.
#[derive(Debug, Clone, Default)]
pub struct TlsArgs {
    /// Serve TLS.
    pub tls: bool,
    /// A PEM certificate chain (with `key`).
    pub cert: Option<String>,
    /// The PEM private key of `cert`.
    pub key: Option<String>,
}

impl TlsArgs {
    /// Checks the keys against the design and builds the server configuration with its
    /// certificate's fingerprint; None without TLS.
    pub fn config(
        &self,
        d: Design,
        idle: Option<Duration>,
    ) -> Result<Option<(ServeTls, Fingerprint)>, RoleError> {
        let usage = RoleError::Usage;
        if !self.tls && self.cert.is_none() && self.key.is_none() {
            return Ok(None);
        }
        if !d.carries_tls() {
            return Err(usage(design::tls_refusal(d)));
        }
        if idle.is_none() {
            return Err(usage(
                "`idle_timeout` off with `tls`: a stalled handshake would hold its slot forever; give a duration, e.g. `idle_timeout` 10s".into(),
            ));
        }
        let made = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => socklab_tls::server_config_from_pem(
                Path::new(c),
                Path::new(k),
                TlsVersion::Tls13,
                &[],
            ),
            (None, None) => Identity::self_signed(&[]).and_then(|id| {
                socklab_tls::server_config(&id, TlsVersion::Tls13, &[])
                    .map(|c| (c, id.fingerprint()))
            }),
            (Some(_), None) => {
                return Err(usage(
                    "`tls_cert` without `tls_key`: give the certificate's private key too".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(usage(
                    "`tls_key` without `tls_cert`: give the certificate too".into(),
                ))
            }
        };
        made.map(|(config, fp)| {
            Some((
                ServeTls {
                    config,
                    log_refusals: true,
                },
                fp,
            ))
        })
        .map_err(|e| usage(format!("`tls_cert` {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_on_a_classic_design_names_the_designs_that_can() {
        let a = TlsArgs {
            tls: true,
            ..Default::default()
        };
        let e = a
            .config(Design::Thread, Some(Duration::from_secs(1)))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("thread") && e.contains("reuseport, tokio"),
            "{e}"
        );
        let ok = a.config(Design::Reuseport, Some(Duration::from_secs(1)));
        assert!(ok.unwrap().is_some());
        let off = a.config(Design::Epoll, None).unwrap_err().to_string();
        assert!(off.contains("`idle_timeout` off"), "{off}");
        let half = TlsArgs {
            cert: Some("c.pem".into()),
            ..Default::default()
        };
        let e = half
            .config(Design::Epoll, Some(Duration::from_secs(1)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tls_key`"), "{e}");
        assert!(TlsArgs::default()
            .config(Design::Thread, None)
            .unwrap()
            .is_none());
    }
}
