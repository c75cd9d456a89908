//! rustls configurations for socklab's servers and clients.

use std::fmt;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::verify::PinVerifier;
use crate::{provider, Identity, TlsError, Trust};

/// Which TLS versions a configuration offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsVersion {
    /// TLS 1.3 only (the default: what a modern peer negotiates).
    #[default]
    Tls13,
    /// TLS 1.2 only.
    Tls12,
}

impl TlsVersion {
    /// Parses `1.3` or `1.2`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "1.3" | "tls1.3" => Ok(Self::Tls13),
            "1.2" | "tls1.2" => Ok(Self::Tls12),
            _ => Err(format!("unknown TLS version {text:?}: give 1.3 or 1.2")),
        }
    }

    pub(crate) fn versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static V13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        static V12: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
        match self {
            Self::Tls13 => &V13,
            Self::Tls12 => &V12,
        }
    }
}

impl fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tls13 => "1.3",
            Self::Tls12 => "1.2",
        })
    }
}

/// A server configuration presenting `identity`, offering `alpn` (empty: none).
pub fn server_config(
    identity: &Identity,
    version: TlsVersion,
    alpn: &[&[u8]],
) -> Result<Arc<ServerConfig>, TlsError> {
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(version.versions())?
        .with_no_client_auth()
        .with_single_cert(vec![identity.cert_der()], identity.key_der())?;
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

/// A client configuration trusting as `trust` says, offering `alpn` (empty: none).
pub fn client_config(
    trust: &Trust,
    version: TlsVersion,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(version.versions())?;
    let mut cfg = match trust {
        Trust::Pinned(fp) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinVerifier {
                pin: Some(*fp),
                provider: provider(),
            }))
            .with_no_client_auth(),
        Trust::Unverified => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinVerifier {
                pin: None,
                provider: provider(),
            }))
            .with_no_client_auth(),
        Trust::CaFile(path) => {
            let file_err = |reason: String| TlsError::File {
                path: path.clone(),
                reason,
            };
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| file_err(e.to_string()))? {
                let cert = cert.map_err(|e| file_err(e.to_string()))?;
                roots.add(cert).map_err(|e| file_err(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(file_err("no certificate in it".to_string()));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

/// What a finished handshake agreed on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Negotiated {
    /// `TLSv1_3`-style version name as rustls prints it, shortened to `1.3`.
    pub version: String,
    /// The cipher suite, e.g. `TLS13_AES_256_GCM_SHA384`.
    pub cipher: String,
}

impl Negotiated {
    /// Reads the version and suite off a connection whose handshake is complete.
    pub fn of<D>(conn: &rustls::ConnectionCommon<D>) -> Self {
        let version = match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "1.3".to_string(),
            Some(rustls::ProtocolVersion::TLSv1_2) => "1.2".to_string(),
            Some(v) => format!("{v:?}"),
            None => String::new(),
        };
        let cipher = conn
            .negotiated_cipher_suite()
            .map(|s| format!("{:?}", s.suite()))
            .unwrap_or_default();
        Self { version, cipher }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{ClientConnection, ServerConnection};
    use rustls_pki_types::ServerName;

    fn handshake(
        server: Arc<ServerConfig>,
        client: Arc<ClientConfig>,
    ) -> Result<Negotiated, String> {
        let mut s = ServerConnection::new(server).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut c = ClientConnection::new(client, name).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            s.read_tls(&mut &buf[..]).map_err(|e| e.to_string())?;
            s.process_new_packets().map_err(|e| e.to_string())?;
            let mut back = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut back).unwrap();
            }
            c.read_tls(&mut &back[..]).map_err(|e| e.to_string())?;
            c.process_new_packets().map_err(|e| e.to_string())?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(Negotiated::of(&c));
            }
        }
        Err("handshake did not finish".into())
    }

    #[test]
    fn a_pinned_client_completes_tls13_with_its_server() {
        let id = Identity::self_signed(&[]).unwrap();
        let s = server_config(&id, TlsVersion::Tls13, &[]).unwrap();
        let c = client_config(&Trust::Pinned(id.fingerprint()), TlsVersion::Tls13, &[]).unwrap();
        let n = handshake(s, c).unwrap();
        assert_eq!(n.version, "1.3");
        assert!(n.cipher.starts_with("TLS13_"), "{n:?}");
    }

    #[test]
    fn tls12_negotiates_an_ecdhe_suite() {
        let id = Identity::self_signed(&[]).unwrap();
        let s = server_config(&id, TlsVersion::Tls12, &[]).unwrap();
        let c = client_config(&Trust::Unverified, TlsVersion::Tls12, &[]).unwrap();
        let n = handshake(s, c).unwrap();
        assert_eq!(n.version, "1.2");
        assert!(n.cipher.contains("ECDHE"), "{n:?}");
    }

    #[test]
    fn a_client_pinned_to_another_certificate_refuses_and_names_both() {
        let id = Identity::self_signed(&[]).unwrap();
        let other = Identity::self_signed(&[]).unwrap();
        let s = server_config(&id, TlsVersion::Tls13, &[]).unwrap();
        let c = client_config(&Trust::Pinned(other.fingerprint()), TlsVersion::Tls13, &[]).unwrap();
        let e = handshake(s, c).unwrap_err();
        assert!(e.contains(&id.fingerprint().to_string()), "{e}");
        assert!(e.contains(&other.fingerprint().to_string()), "{e}");
    }

    #[test]
    fn a_ca_file_that_is_not_pem_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("sl-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("ca.pem");
        std::fs::write(&p, "not a certificate").unwrap();
        let e = client_config(&Trust::CaFile(p.clone()), TlsVersion::Tls13, &[])
            .unwrap_err()
            .to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("ca.pem") && e.contains("PEM"), "{e}");
    }

    #[test]
    fn a_ca_file_with_the_servers_certificate_verifies_it() {
        let id = Identity::self_signed(&[]).unwrap();
        let dir = std::env::temp_dir().join(format!("sl-tls-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        id.write_pem(&dir).unwrap();
        let c = client_config(&Trust::CaFile(dir.join("cert.pem")), TlsVersion::Tls13, &[]);
        std::fs::remove_dir_all(&dir).unwrap();
        let s = server_config(&id, TlsVersion::Tls13, &[]).unwrap();
        let r = handshake(s.clone(), c.unwrap());
        assert!(r.is_ok(), "{r:?}");
        // The same file does not vouch for another server's certificate.
        let other = Identity::self_signed(&[]).unwrap();
        let s2 = server_config(&other, TlsVersion::Tls13, &[]).unwrap();
        let dir2 = std::env::temp_dir().join(format!("sl-tls-ca2-{}", std::process::id()));
        std::fs::create_dir_all(&dir2).unwrap();
        id.write_pem(&dir2).unwrap();
        let c2 = client_config(
            &Trust::CaFile(dir2.join("cert.pem")),
            TlsVersion::Tls13,
            &[],
        );
        std::fs::remove_dir_all(&dir2).unwrap();
        assert!(handshake(s2, c2.unwrap()).is_err());
        drop(s);
    }
}
