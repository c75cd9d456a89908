//! How a client decides to trust a server's certificate.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::Fingerprint;

/// What a client trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Exactly the certificate with this SHA-256 (socklab's own servers print theirs).
    Pinned(Fingerprint),
    /// Certificates that chain to the CA certificates in this PEM file (web PKI rules).
    CaFile(PathBuf),
    /// Any certificate; the handshake's signature is still checked. wrk and ab do this: a
    /// load generator measures the server, it does not authenticate it.
    Unverified,
}

impl Trust {
    /// Parses what a user writes: `unverified` (or `none`), a SHA-256 fingerprint (64 hex
    /// digits, colons allowed), or the path of a PEM file of CA certificates that exists.
    /// The error names the value and the three forms.
    pub fn parse(text: &str) -> Result<Trust, String> {
        let t = text.trim();
        if matches!(t, "unverified" | "none") {
            return Ok(Trust::Unverified);
        }
        if t.len() >= 64 && t.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return Fingerprint::parse(t)
                .map(Trust::Pinned)
                .map_err(|e| e.to_string());
        }
        if std::path::Path::new(t).is_file() {
            return Ok(Trust::CaFile(t.into()));
        }
        Err(format!(
            "'{t}' is neither a SHA-256 fingerprint (64 hex digits) nor a readable PEM file of CA certificates: give one of them, or unverified"
        ))
    }

    /// A short description for reports: `pinned ab12…`, `ca FILE`, `not verified`.
    pub fn describe(&self) -> String {
        match self {
            Trust::Pinned(fp) => format!("pinned sha256 {}", &fp.to_string()[..16]),
            Trust::CaFile(p) => format!("ca {}", p.display()),
            Trust::Unverified => "not verified".to_string(),
        }
    }
}

/// Accepts one certificate (pinned) or any (unverified); checks signatures with the provider.
#[derive(Debug)]
pub(crate) struct PinVerifier {
    pub(crate) pin: Option<Fingerprint>,
    pub(crate) provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.pin {
            None => Ok(ServerCertVerified::assertion()),
            Some(pin) => {
                let got = Fingerprint::of(end_entity);
                if got == pin {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(Error::General(format!(
                        "the server's certificate has SHA-256 {got}, not the pinned {pin}: \
                         pin the certificate the server prints, or trust a CA file"
                    )))
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn trust_parses_its_three_forms_and_names_a_bad_value() {
        assert_eq!(Trust::parse(" unverified "), Ok(Trust::Unverified));
        let fp = crate::Identity::self_signed(&[]).unwrap().fingerprint();
        assert_eq!(Trust::parse(&fp.to_string()), Ok(Trust::Pinned(fp)));
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        assert_eq!(Trust::parse(file), Ok(Trust::CaFile(file.into())));
        let e = Trust::parse("/no/such.pem").unwrap_err();
        assert!(e.starts_with("'/no/such.pem' is neither"), "{e}");
    }
}
