//! CRC32C (Castagnoli): the checksum at the end of every packet.
//!
//! Reflected polynomial `0x82F63B78`, initial value `!0`, final xor `!0` (the CRC of iSCSI,
//! SCTP and ext4, RFC 3720 §B.4). Computed by the `crc32c` crate: the SSE4.2 `crc32`
//! instruction on x86-64 and the ARMv8 CRC extension on aarch64 (detected at run time), a
//! software table otherwise. The hand-written slicing-by-8 it replaced took ~14% of a
//! loopback transfer's CPU (issue 29); it lives on in the tests as the reference.

/// The CRC32C of `data`.
///
/// ```
/// assert_eq!(socklab_rudp::crc32c::crc32c(b"123456789"), 0xE306_9283);
/// ```
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Continues a running CRC32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`, and
/// `crc32c_append(0, b) == crc32c(b)`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, data)
}

#[cfg(test)]
mod tests {
    // The slicing-by-8 implementation this module used before the `crc32c` crate, kept
    // as an independent reference.
    /// The reflected Castagnoli polynomial.
    const POLY: u32 = 0x82F6_3B78;

    /// `TABLES[0]` is the classic bytewise table; `TABLES[k][b]` is the CRC register after feeding
    /// byte `b` followed by `k` zero bytes, so 8 lookups advance the register by 8 bytes.
    static TABLES: [[u32; 256]; 8] = make_tables();

    const fn make_tables() -> [[u32; 256]; 8] {
        let mut t = [[0u32; 256]; 8];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
                k += 1;
            }
            t[0][i] = c;
            i += 1;
        }
        let mut i = 0;
        while i < 256 {
            let mut s = 1;
            while s < 8 {
                let prev = t[s - 1][i];
                t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
                s += 1;
            }
            i += 1;
        }
        t
    }

    /// Advances the (un-inverted) CRC register over `data`.
    fn update(mut crc: u32, data: &[u8]) -> u32 {
        let t = &TABLES;
        let mut chunks = data.chunks_exact(8);
        for c in &mut chunks {
            let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            let lo = (x as u32) ^ crc;
            let hi = (x >> 32) as u32;
            crc = t[7][(lo & 0xff) as usize]
                ^ t[6][((lo >> 8) & 0xff) as usize]
                ^ t[5][((lo >> 16) & 0xff) as usize]
                ^ t[4][(lo >> 24) as usize]
                ^ t[3][(hi & 0xff) as usize]
                ^ t[2][((hi >> 8) & 0xff) as usize]
                ^ t[1][((hi >> 16) & 0xff) as usize]
                ^ t[0][(hi >> 24) as usize];
        }
        for &b in chunks.remainder() {
            crc = (crc >> 8) ^ t[0][((crc ^ u32::from(b)) & 0xff) as usize];
        }
        crc
    }

    use super::*;
    use proptest::prelude::*;

    /// Bit-at-a-time reference, straight from the definition.
    fn reference(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ POLY
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    /// Bytewise (table) reference.
    fn bytewise(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc = (crc >> 8) ^ TABLES[0][((crc ^ u32::from(b)) & 0xff) as usize];
        }
        !crc
    }

    #[test]
    fn check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(reference(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn rfc3720_b4_vectors() {
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
        let descending: Vec<u8> = (0..32).rev().collect();
        assert_eq!(crc32c(&descending), 0x113F_DB5C);
    }

    #[test]
    fn empty_and_tables() {
        assert_eq!(crc32c(&[]), 0);
        assert_eq!(crc32c_append(0x1234_5678, &[]), 0x1234_5678);
        assert_eq!(TABLES[0][0x80], POLY);
        for (i, &v) in TABLES[0].iter().enumerate() {
            assert_eq!(v, reference_table_entry(i as u8));
        }
    }

    fn reference_table_entry(b: u8) -> u32 {
        let mut c = u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
        }
        c
    }

    #[test]
    fn every_length_up_to_64() {
        let data: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        for n in 0..=data.len() {
            assert_eq!(crc32c(&data[..n]), reference(&data[..n]), "length {n}");
        }
    }

    #[test]
    fn append_at_every_split() {
        let data: Vec<u8> = (0..50u32).map(|i| (i * 91 + 3) as u8).collect();
        let whole = crc32c(&data);
        for k in 0..=data.len() {
            assert_eq!(
                crc32c_append(crc32c(&data[..k]), &data[k..]),
                whole,
                "split {k}"
            );
        }
    }

    #[test]
    fn hardware_matches_old_table_on_packet_sizes() {
        let data: Vec<u8> = (0..9000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for n in [0, 1, 7, 8, 9, 63, 64, 65, 1200, 1452, 1472, 8999, 9000] {
            assert_eq!(crc32c(&data[..n]), !update(!0, &data[..n]), "length {n}");
        }
    }

    proptest! {
        #[test]
        fn hardware_matches_old_slicing_by_8(
            data in proptest::collection::vec(any::<u8>(), 0..4000),
            seed in any::<u32>(),
        ) {
            prop_assert_eq!(crc32c(&data), !update(!0, &data));
            prop_assert_eq!(crc32c_append(seed, &data), !update(!seed, &data));
        }

        #[test]
        fn slicing_by_8_matches_bytewise(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            prop_assert_eq!(!update(!0, &data), bytewise(&data));
            prop_assert_eq!(crc32c(&data), bytewise(&data));
            prop_assert_eq!(crc32c(&data), reference(&data));
        }

        #[test]
        fn append_matches_whole(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            a in any::<prop::sample::Index>(),
            b in any::<prop::sample::Index>(),
        ) {
            let (mut i, mut j) = (a.index(data.len() + 1), b.index(data.len() + 1));
            if i > j {
                std::mem::swap(&mut i, &mut j);
            }
            let c = crc32c_append(crc32c_append(crc32c(&data[..i]), &data[i..j]), &data[j..]);
            prop_assert_eq!(c, bytewise(&data));
        }
    }
}
