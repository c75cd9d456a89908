//! The IP/TCP/UDP packet code of `corrupt … fixcsum` never panics on any bytes, and a packet
//! whose checksum it fixed always verifies.
#![no_main]
use libfuzzer_sys::fuzz_target;
use socklab_impair::packet::{fix_transport_checksum, payload_range, transport_checksum_ok};

fuzz_target!(|data: &[u8]| {
    let mut p = data.to_vec();
    if let Some(r) = payload_range(&p) {
        assert!(r.start < r.end && r.end <= p.len());
    }
    let _ = transport_checksum_ok(&p);
    if fix_transport_checksum(&mut p) {
        assert_eq!(transport_checksum_ok(&p), Some(true));
    }
});
