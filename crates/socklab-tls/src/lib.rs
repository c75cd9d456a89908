//! `socklab-tls`: what every encrypted workload of socklab shares.
//!
//! - [`Identity`]: a self-signed certificate made for one run (rcgen, ECDSA P-256), held in
//!   memory and never written to disk unless a caller asks ([`Identity::write_pem`]), with its
//!   SHA-256 fingerprint, which a server prints and a client pins.
//! - [`server_config`] and [`client_config`]: rustls configurations (ring as the crypto
//!   provider, TLS 1.3 by default, 1.2 on request) with ALPN, and the client's [`Trust`]:
//!   a pinned fingerprint, a CA file, or none (as wrk and ab do).
//! - [`Negotiated`]: the protocol version and cipher suite a handshake agreed on, as text.
//! - [`ktls`]: whether the kernel offers the `tls` ULP, with the one-line error where not.
//!
//! QUIC (quinn) builds its configurations from the same [`Identity`] and [`Trust`].

mod config;
mod error;
mod identity;
pub mod ktls;
mod pem;
mod verify;

pub use config::{client_config, server_config, Negotiated, TlsVersion};
pub use error::TlsError;
pub use identity::{Fingerprint, Identity};
pub use pem::server_config_from_pem;
pub use verify::Trust;

/// rustls' crypto provider used everywhere in socklab (ring).
pub fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
