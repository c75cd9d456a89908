//! The IP/TCP/UDP packet code of `corrupt … fixcsum` never panics on any bytes, and a packet
//! whose checksum it fixed always verifies.
use socklab_impair::packet::{fix_transport_checksum, payload_range, transport_checksum_ok};

/// One input of the target.
pub fn run(data: &[u8]) {
    let mut p = data.to_vec();
    if let Some(r) = payload_range(&p) {
        assert!(r.start < r.end && r.end <= p.len());
    }
    let _ = transport_checksum_ok(&p);
    if fix_transport_checksum(&mut p) {
        assert_eq!(transport_checksum_ok(&p), Some(true));
    }
}
