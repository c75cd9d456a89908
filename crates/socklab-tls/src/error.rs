//! Errors of TLS set-up, each naming the bad value and the fix.

use std::path::PathBuf;

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen could not make the per-run certificate.
    #[error("could not make a self-signed certificate: {0}")]
    Generate(String),
    /// rustls refused the configuration.
    #[error("TLS configuration refused: {0}")]
    Config(#[from] rustls::Error),
    /// A CA or certificate file could not be read.
    #[error("cannot read TLS file {path}: {reason}; give a PEM file of certificates")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A fingerprint given as text is not 64 hexadecimal digits.
    #[error("bad certificate fingerprint {0:?}: give the SHA-256 as 64 hexadecimal digits (colons allowed), as the server prints it")]
    Fingerprint(String),
    /// The kernel has no `tls` ULP.
    #[error("{0}")]
    Ktls(String),
}
