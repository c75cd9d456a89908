//! The datagram header of `socklab bulk --udp`: `Header::emit` writes it, `Header::parse` reads
//! it back (a pure pair, fuzzed by `fuzz/fuzz_targets/udp_datagram.rs`). Big-endian:
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 4 | magic `SLUB` (0x534c5542) |
//! | 4 | 1 | version (1) |
//! | 5 | 1 | flags: bit 0 FIN (an end-of-test marker); other bits 0 |
//! | 6 | 2 | header length (48) |
//! | 8 | 8 | test id (the sender's random number; one per test) |
//! | 16 | 8 | sequence number (0, 1, 2, …; the FIN datagrams continue the sequence) |
//! | 24 | 8 | send time, ns since the epoch (`CLOCK_REALTIME` of the sender) |
//! | 32 | 8 | FIN: datagrams in the test, FIN datagrams included; else 0 |
//! | 40 | 4 | FIN: how long the receiver waits after the first FIN for stragglers, ms; else 0 |
//! | 44 | 4 | FNV-1a (32 bit) of bytes 0..44: a damaged header is refused, not miscounted |
//!
//! The rest of the datagram is filler. The send time is read on the sender's clock: one-way
//! delay is meaningful only where both ends share the clock (one host: loopback, socklab's
//! emulated links); jitter (RFC 3550) only uses differences and holds across hosts.

/// `SLUB`.
pub const MAGIC: u32 = 0x534c_5542;
/// The version this build writes and reads.
pub const VERSION: u8 = 1;
/// Bytes of the header; the smallest datagram.
pub const HEADER_LEN: usize = 48;
/// The largest UDP payload over IPv4 (65535 − 20 − 8).
pub const MAX_DATAGRAM: usize = 65507;
/// The FIN flag.
pub const FLAG_FIN: u8 = 1;

/// What a FIN datagram adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fin {
    /// Datagrams in the test, the FIN datagrams included (the receiver's loss count).
    pub total: u64,
    /// How long the receiver waits after the first FIN for datagrams still on the way, ms.
    pub drain_ms: u32,
}

/// One datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The test it belongs to.
    pub test_id: u64,
    /// Its sequence number.
    pub seq: u64,
    /// When it was sent, ns since the epoch on the sender's clock.
    pub send_ns: u64,
    /// Set on the end-of-test markers.
    pub fin: Option<Fin>,
}

fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf` (the rest is left as it
    /// is). `buf` must hold at least [`HEADER_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), UdpWireError> {
        if buf.len() < HEADER_LEN {
            return Err(UdpWireError::Short(buf.len()));
        }
        let (flags, total, drain) = match self.fin {
            Some(f) => (FLAG_FIN, f.total, f.drain_ms),
            None => (0, 0, 0),
        };
        buf[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        buf[4] = VERSION;
        buf[5] = flags;
        buf[6..8].copy_from_slice(&(HEADER_LEN as u16).to_be_bytes());
        buf[8..16].copy_from_slice(&self.test_id.to_be_bytes());
        buf[16..24].copy_from_slice(&self.seq.to_be_bytes());
        buf[24..32].copy_from_slice(&self.send_ns.to_be_bytes());
        buf[32..40].copy_from_slice(&total.to_be_bytes());
        buf[40..44].copy_from_slice(&drain.to_be_bytes());
        let check = fnv1a32(&buf[..44]);
        buf[44..48].copy_from_slice(&check.to_be_bytes());
        Ok(())
    }

    /// Reads the header of a datagram (any length from [`HEADER_LEN`] on).
    pub fn parse(buf: &[u8]) -> Result<Header, UdpWireError> {
        if buf.len() < HEADER_LEN {
            return Err(UdpWireError::Short(buf.len()));
        }
        let magic = u32_at(buf, 0);
        if magic != MAGIC {
            return Err(UdpWireError::Magic(magic));
        }
        if buf[4] != VERSION {
            return Err(UdpWireError::Version(buf[4]));
        }
        if u32_at(buf, 44) != fnv1a32(&buf[..44]) {
            return Err(UdpWireError::Check);
        }
        let flags = buf[5];
        let len = u16::from_be_bytes([buf[6], buf[7]]);
        let (total, drain_ms) = (u64_at(buf, 32), u32_at(buf, 40));
        let fin = match flags {
            0 if total == 0 && drain_ms == 0 => None,
            FLAG_FIN => Some(Fin { total, drain_ms }),
            _ => return Err(UdpWireError::Layout { flags, len }),
        };
        if usize::from(len) != HEADER_LEN {
            return Err(UdpWireError::Layout { flags, len });
        }
        Ok(Header {
            test_id: u64_at(buf, 8),
            seq: u64_at(buf, 16),
            send_ns: u64_at(buf, 24),
            fin,
        })
    }
}

/// Why a datagram is not one of `socklab bulk --udp` (this module's header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UdpWireError {
    /// Shorter than the header.
    #[error("datagram of {0} bytes, shorter than the {len}-byte header", len = HEADER_LEN)]
    Short(usize),
    /// Not socklab's magic number.
    #[error("not a socklab UDP bulk datagram (magic {0:#010x})")]
    Magic(u32),
    /// A version this build does not speak.
    #[error("UDP bulk datagram version {0}, this socklab speaks {v}", v = VERSION)]
    Version(u8),
    /// The header checksum does not match (the header was damaged on the way).
    #[error("UDP bulk datagram header checksum mismatch")]
    Check,
    /// Flags or a length that this version does not define.
    #[error("UDP bulk datagram with unknown flags {flags:#04x} or header length {len}")]
    Layout {
        /// The flags byte.
        flags: u8,
        /// The header length field.
        len: u16,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_header_has_the_documented_layout() {
        let h = Header {
            test_id: 0x0102_0304_0506_0708,
            seq: 9,
            send_ns: 10,
            fin: Some(Fin {
                total: 11,
                drain_ms: 12,
            }),
        };
        let mut b = [0xaau8; 60];
        h.emit(&mut b).unwrap();
        assert_eq!(&b[0..4], b"SLUB");
        assert_eq!((b[4], b[5]), (1, 1));
        assert_eq!(&b[6..8], &[0, 48]);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(b[23], 9);
        assert_eq!(b[31], 10);
        assert_eq!(b[39], 11);
        assert_eq!(b[43], 12);
        assert_eq!(&b[48..], &[0xaa; 12], "the filler is left alone");
        assert_eq!(Header::parse(&b), Ok(h));
        assert_eq!(Header::parse(&b[..48]), Ok(h));
    }

    #[test]
    fn damaged_or_foreign_datagrams_are_refused_with_the_reason() {
        let h = Header {
            test_id: 1,
            seq: 2,
            send_ns: 3,
            fin: None,
        };
        let mut b = [0u8; 48];
        h.emit(&mut b).unwrap();
        assert_eq!(Header::parse(&b[..47]), Err(UdpWireError::Short(47)));
        assert_eq!(h.emit(&mut [0u8; 10]), Err(UdpWireError::Short(10)));
        let mut c = b;
        c[17] ^= 1;
        assert_eq!(Header::parse(&c), Err(UdpWireError::Check));
        let mut c = b;
        c[0] = b'X';
        assert!(matches!(Header::parse(&c), Err(UdpWireError::Magic(_))));
        let mut c = b;
        c[4] = 2;
        assert_eq!(Header::parse(&c), Err(UdpWireError::Version(2)));
        // A total without the FIN flag is a layout error even with a valid checksum.
        let mut c = b;
        c[39] = 5;
        let check = fnv1a32(&c[..44]);
        c[44..48].copy_from_slice(&check.to_be_bytes());
        assert!(matches!(
            Header::parse(&c),
            Err(UdpWireError::Layout { flags: 0, .. })
        ));
    }

    proptest! {
        #[test]
        fn every_header_parses_back_to_itself(
            test_id: u64, seq: u64, send_ns: u64, fin: Option<(u64, u32)>, extra in 0usize..100
        ) {
            let h = Header { test_id, seq, send_ns, fin: fin.map(|(total, drain_ms)| Fin { total, drain_ms }) };
            let mut b = vec![0u8; HEADER_LEN + extra];
            h.emit(&mut b).unwrap();
            prop_assert_eq!(Header::parse(&b), Ok(h));
        }

        #[test]
        fn one_flipped_header_bit_is_caught(seq: u64, bit in 0usize..(HEADER_LEN * 8)) {
            let h = Header { test_id: 7, seq, send_ns: 1, fin: None };
            let mut b = [0u8; HEADER_LEN];
            h.emit(&mut b).unwrap();
            b[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(Header::parse(&b).is_err());
        }
    }
}
