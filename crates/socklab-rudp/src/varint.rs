//! QUIC variable-length integers (RFC 9000 §16).
//!
//! The two most significant bits of the first byte give the length (`00` = 1, `01` = 2,
//! `10` = 4, `11` = 8 bytes); the remaining bits, big endian, hold the value, so a varint holds
//! 6, 14, 30 or 62 bits (at most [`VARINT_MAX`]). [`write`] always uses the shortest form;
//! [`read`] also accepts longer, non-minimal forms (e.g. `0x40 0x25` for 37), as QUIC does.

/// Largest value a varint holds.
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// Bytes the shortest encoding of `v` takes: 1, 2, 4 or 8.
///
/// `v` must be at most [`VARINT_MAX`]; larger values (which cannot be encoded) report 8.
pub fn len(v: u64) -> usize {
    if v < 1 << 6 {
        1
    } else if v < 1 << 14 {
        2
    } else if v < 1 << 30 {
        4
    } else {
        8
    }
}

/// Writes the shortest encoding of `v` at the start of `buf` and returns the number of bytes
/// used; `None` (and nothing written) when `v > VARINT_MAX` or `buf` is too short.
pub fn write(buf: &mut [u8], v: u64) -> Option<usize> {
    if v > VARINT_MAX {
        return None;
    }
    let n = len(v);
    let out = buf.get_mut(..n)?;
    match n {
        1 => out[0] = v as u8,
        2 => out.copy_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        4 => out.copy_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.copy_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
    Some(n)
}

/// Reads a varint from the start of `buf`: the value and the number of bytes it took; `None`
/// when `buf` is empty or shorter than the length announced by its first byte.
pub fn read(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let n = 1usize << (first >> 6);
    let bytes = buf.get(..n)?;
    let mut v = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        v = (v << 8) | u64::from(b);
    }
    Some((v, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9000_a1_examples() {
        let cases: [(&[u8], u64); 5] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            (&[0x40, 0x25], 37),
        ];
        for (bytes, value) in cases {
            assert_eq!(read(bytes), Some((value, bytes.len())), "{bytes:02x?}");
        }
        // The writer produces the minimal forms (all but the non-minimal 0x4025).
        for (bytes, value) in &cases[..4] {
            let mut buf = [0u8; 8];
            assert_eq!(write(&mut buf, *value), Some(bytes.len()));
            assert_eq!(&buf[..bytes.len()], *bytes);
            assert_eq!(len(*value), bytes.len());
        }
    }

    #[test]
    fn boundaries() {
        let cases = [
            (0, 1),
            (63, 1),
            (64, 2),
            (16_383, 2),
            (16_384, 4),
            ((1 << 30) - 1, 4),
            (1 << 30, 8),
            (VARINT_MAX, 8),
        ];
        for (v, n) in cases {
            assert_eq!(len(v), n, "len({v})");
            let mut buf = [0u8; 8];
            assert_eq!(write(&mut buf, v), Some(n));
            assert_eq!(read(&buf[..n]), Some((v, n)));
        }
        assert_eq!(len(u64::MAX), 8);
    }

    #[test]
    fn too_large_or_too_short_writes_nothing() {
        let mut buf = [0xaau8; 8];
        assert_eq!(write(&mut buf, VARINT_MAX + 1), None);
        assert_eq!(write(&mut buf, u64::MAX), None);
        assert_eq!(write(&mut buf[..1], 64), None);
        assert_eq!(write(&mut buf[..3], 16_384), None);
        assert_eq!(write(&mut buf[..7], 1 << 30), None);
        assert_eq!(write(&mut [], 0), None);
        assert_eq!(buf, [0xaa; 8]);
    }

    #[test]
    fn truncated_reads() {
        assert_eq!(read(&[]), None);
        assert_eq!(read(&[0x40]), None);
        assert_eq!(read(&[0x80, 1, 2]), None);
        assert_eq!(read(&[0xc0, 1, 2, 3, 4, 5, 6]), None);
        // Trailing bytes are not consumed.
        assert_eq!(read(&[0x25, 0xff, 0xff]), Some((37, 1)));
    }

    #[test]
    fn non_minimal_forms() {
        assert_eq!(read(&[0x40, 0x00]), Some((0, 2)));
        assert_eq!(read(&[0x80, 0, 0, 5]), Some((5, 4)));
        assert_eq!(read(&[0xc0, 0, 0, 0, 0, 0, 1, 0]), Some((256, 8)));
        // The fixed 2-byte form the ACK writer uses for the range count.
        assert_eq!(read(&[0x41, 0x00]), Some((256, 2)));
    }

    proptest! {
        #[test]
        fn round_trip(v in 0..=VARINT_MAX, extra in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut buf = [0u8; 12];
            let n = write(&mut buf, v).unwrap();
            prop_assert_eq!(n, len(v));
            buf[n..n + extra.len()].copy_from_slice(&extra);
            prop_assert_eq!(read(&buf[..n + extra.len()]), Some((v, n)));
            for short in 0..n {
                prop_assert_eq!(read(&buf[..short]), None);
            }
        }

        #[test]
        fn small_values_round_trip(v in 0u64..70_000) {
            let mut buf = [0u8; 8];
            let n = write(&mut buf, v).unwrap();
            prop_assert_eq!(read(&buf[..n]), Some((v, n)));
        }

        #[test]
        fn read_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..10)) {
            if let Some((v, n)) = read(&bytes) {
                prop_assert!(v <= VARINT_MAX);
                prop_assert!(n <= bytes.len() && [1, 2, 4, 8].contains(&n));
                prop_assert!(len(v) <= n);
            }
        }
    }
}
