//! A self-signed certificate for one run.

use std::fmt;
use std::path::Path;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::TlsError;

/// SHA-256 of a certificate's DER bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of DER bytes.
    pub fn of(der: &[u8]) -> Self {
        let d = ring::digest::digest(&ring::digest::SHA256, der);
        let mut out = [0u8; 32];
        out.copy_from_slice(d.as_ref());
        Self(out)
    }

    /// Parses 64 hexadecimal digits, colons and case ignored (`openssl x509 -fingerprint
    /// -sha256` prints `AB:CD:…`).
    pub fn parse(text: &str) -> Result<Self, TlsError> {
        let hex: String = text.chars().filter(|c| *c != ':').collect();
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(TlsError::Fingerprint(text.to_string()));
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| TlsError::Fingerprint(text.to_string()))?;
        }
        Ok(Self(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = TlsError;
    fn from_str(s: &str) -> Result<Self, TlsError> {
        Self::parse(s)
    }
}

/// A certificate and its private key, made for one run and held in memory.
pub struct Identity {
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
    cert_pem: String,
    key_pem: String,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A new self-signed ECDSA P-256 certificate for `localhost`, `127.0.0.1` and `::1` and
    /// any extra names (host names or IP addresses).
    pub fn self_signed(extra_names: &[String]) -> Result<Self, TlsError> {
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        names.extend(extra_names.iter().cloned());
        let ck = rcgen::generate_simple_self_signed(names)
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        Ok(Self {
            cert: ck.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()),
            cert_pem: ck.cert.pem(),
            key_pem: ck.key_pair.serialize_pem(),
        })
    }

    /// The certificate, DER.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert.clone()
    }

    /// The private key, DER (PKCS#8).
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.clone_key())
    }

    /// SHA-256 of the certificate.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.cert)
    }

    /// The certificate as PEM text.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Writes `cert.pem` and `key.pem` (mode 0600) into `dir`, for a peer such as wrk or
    /// nginx that reads files. The caller removes them.
    pub fn write_pem(&self, dir: &Path) -> Result<(), TlsError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let write = |name: &str, text: &str| -> Result<(), TlsError> {
            let path = dir.join(name);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| TlsError::File {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
            f.write_all(text.as_bytes()).map_err(|e| TlsError::File {
                path,
                reason: e.to_string(),
            })
        };
        write("cert.pem", &self.cert_pem)?;
        write("key.pem", &self.key_pem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_print_and_parse_back() {
        let id = Identity::self_signed(&[]).unwrap();
        let fp = id.fingerprint();
        assert_eq!(Fingerprint::parse(&fp.to_string()).unwrap(), fp);
        let colons: Vec<String> = fp.0.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(Fingerprint::parse(&colons.join(":")).unwrap(), fp);
    }

    #[test]
    fn two_runs_get_two_certificates() {
        let a = Identity::self_signed(&[]).unwrap();
        let b = Identity::self_signed(&[]).unwrap();
        assert_ne!(a.fingerprint(), b.fingerprint());
    }

    #[test]
    fn a_bad_fingerprint_names_itself_and_the_fix() {
        let e = Fingerprint::parse("abc").unwrap_err().to_string();
        assert!(e.contains("\"abc\"") && e.contains("64 hexadecimal"), "{e}");
    }
}
