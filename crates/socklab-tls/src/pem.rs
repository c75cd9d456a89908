//! A server identity from the user's PEM files (`tls_cert`, `tls_key`): the certificate chain
//! and its private key, as nginx takes them.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::{provider, Fingerprint, TlsError, TlsVersion};

/// A server configuration from a PEM certificate chain and a PEM private key, with the
/// SHA-256 fingerprint of the chain's first (leaf) certificate.
pub fn server_config_from_pem(
    cert: &Path,
    key: &Path,
    version: TlsVersion,
    alpn: &[&[u8]],
) -> Result<(Arc<ServerConfig>, Fingerprint), TlsError> {
    let file_err = |path: &Path, reason: String| TlsError::File {
        path: path.to_path_buf(),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file_err(cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_err(cert, e.to_string()))?;
    let Some(leaf) = chain.first() else {
        return Err(file_err(cert, "no certificate in it".into()));
    };
    let fingerprint = Fingerprint::of(leaf);
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| file_err(key, format!("no private key: {e}")))?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(version.versions())?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok((Arc::new(cfg), fingerprint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Identity;

    #[test]
    fn pem_files_written_by_an_identity_load_back_with_its_fingerprint() {
        let id = Identity::self_signed(&[]).unwrap();
        let dir = std::env::temp_dir().join(format!("sl-tls-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        id.write_pem(&dir).unwrap();
        let r = server_config_from_pem(
            &dir.join("cert.pem"),
            &dir.join("key.pem"),
            TlsVersion::Tls13,
            &[],
        );
        let wrong = server_config_from_pem(
            &dir.join("key.pem"),
            &dir.join("cert.pem"),
            TlsVersion::Tls13,
            &[],
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(r.unwrap().1, id.fingerprint());
        let e = wrong.unwrap_err().to_string();
        assert!(e.contains("key.pem"), "{e}");
    }
}
