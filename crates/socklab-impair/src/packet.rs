//! Just enough of IPv4/IPv6 + TCP/UDP to find a packet's transport payload and to recompute
//! its transport checksum (for `corrupt … fixcsum`). Pure functions over bytes; anything that
//! is not a well-formed IPv4/IPv6 TCP or UDP packet is left alone (`None`).

use std::ops::Range;

const TCP: u8 = 6;
const UDP: u8 = 17;

/// Where an IP packet's transport header starts and what it is: IPv4 (not a fragment) or IPv6
/// (no extension header followed), its length within the bytes at hand. The one parse of an IP
/// header in socklab: the emulated link's offloads (`socklab-link`'s `vnet`) use it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpLayout {
    /// IPv4 (else IPv6).
    pub v4: bool,
    /// The transport protocol number (6 TCP, 17 UDP).
    pub proto: u8,
    /// The transport header's offset.
    pub l4: usize,
    /// The end of the IP packet (its total length).
    pub end: usize,
}

impl IpLayout {
    /// The pseudo-header's sum (unfolded) for a transport length `len`.
    pub fn pseudo(&self, p: &[u8], len: usize) -> u32 {
        let addrs = if self.v4 { &p[12..20] } else { &p[8..40] };
        sum16(addrs, 0) + u32::from(self.proto) + (len as u32 >> 16) + (len as u32 & 0xffff)
    }
}

/// Where the transport header and payload start, the protocol, and the IP pseudo-header sum.
struct Layout {
    proto: u8,
    l4: usize,
    end: usize,
    pseudo: u32,
}

/// The one IP checksum of socklab (RFC 1071), in its two halves so a pseudo-header's sum can be
/// carried in: adds `bytes` as big-endian 16-bit words to `acc` (an odd last byte is padded
/// with zero). The emulated link's offloads (`socklab-link`'s `vnet`) use it too.
pub fn sum16(bytes: &[u8], mut acc: u32) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// One's-complement fold of a [`sum16`] to 16 bits, not inverted (a partial checksum).
pub fn fold16(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum of `bytes` (RFC 1071): the inverted fold of their sum.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    !fold16(sum16(bytes, 0))
}

fn fold(acc: u32) -> u16 {
    !fold16(acc)
}

/// The IP layout of `p` ([`IpLayout`]), `None` for anything else.
pub fn ip_layout(p: &[u8]) -> Option<IpLayout> {
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]));
            // Fragments carry no complete transport segment.
            let frag = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]);
            if ihl < 20 || total < ihl || total > p.len() || frag & 0x3fff != 0 {
                return None;
            }
            Some(IpLayout {
                v4: true,
                proto: p[9],
                l4: ihl,
                end: total,
            })
        }
        6 => {
            if p.len() < 40 {
                return None;
            }
            let end = 40 + usize::from(u16::from_be_bytes([p[4], p[5]]));
            // Extension headers are not followed: only TCP or UDP directly after the header.
            if end > p.len() {
                return None;
            }
            Some(IpLayout {
                v4: false,
                proto: p[6],
                l4: 40,
                end,
            })
        }
        _ => None,
    }
}

fn layout(p: &[u8]) -> Option<Layout> {
    let l = ip_layout(p)?;
    Some(Layout {
        proto: l.proto,
        l4: l.l4,
        end: l.end,
        pseudo: l.pseudo(p, l.end - l.l4),
    })
}

fn header_len(p: &[u8], l: &Layout) -> Option<usize> {
    match l.proto {
        TCP => {
            let off = usize::from(*p.get(l.l4 + 12)? >> 4) * 4;
            (off >= 20 && l.l4 + off <= l.end).then_some(off)
        }
        UDP => (l.l4 + 8 <= l.end).then_some(8),
        _ => None,
    }
}

/// The byte range of a TCP or UDP packet's payload, if it has one.
pub fn payload_range(p: &[u8]) -> Option<Range<usize>> {
    let l = layout(p)?;
    let h = header_len(p, &l)?;
    let start = l.l4 + h;
    (start < l.end).then_some(start..l.end)
}

/// The checksum field's offset for the packet's transport protocol.
fn csum_offset(l: &Layout) -> usize {
    l.l4 + if l.proto == TCP { 16 } else { 6 }
}

/// Recomputes the TCP or UDP checksum (a UDP/IPv4 checksum of zero, meaning "none", stays
/// zero). Returns whether the packet was one it knows.
pub fn fix_transport_checksum(p: &mut [u8]) -> bool {
    let Some(l) = layout(p) else { return false };
    if header_len(p, &l).is_none() {
        return false;
    }
    let at = csum_offset(&l);
    let old = u16::from_be_bytes([p[at], p[at + 1]]);
    if l.proto == UDP && old == 0 && p[0] >> 4 == 4 {
        return true;
    }
    p[at] = 0;
    p[at + 1] = 0;
    let mut c = fold(sum16(&p[l.l4..l.end], l.pseudo));
    if l.proto == UDP && c == 0 {
        c = 0xffff;
    }
    p[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Whether the packet's transport checksum is valid (`None` when it is not TCP/UDP over IP).
pub fn transport_checksum_ok(p: &[u8]) -> Option<bool> {
    let l = layout(p)?;
    header_len(p, &l)?;
    let at = csum_offset(&l);
    if l.proto == UDP && p[at] == 0 && p[at + 1] == 0 && p[0] >> 4 == 4 {
        return Some(true);
    }
    Some(fold(sum16(&p[l.l4..l.end], l.pseudo)) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 UDP packet 10.0.0.1:1000 -> 10.0.0.2:2000 with a valid checksum.
    pub(crate) fn udp4(payload: &[u8]) -> Vec<u8> {
        let total = 20 + 8 + payload.len();
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = UDP;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&1000u16.to_be_bytes());
        p[22..24].copy_from_slice(&2000u16.to_be_bytes());
        p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        p[28..].copy_from_slice(payload);
        p[26] = 0xde; // any non-zero value, fixed below
        assert!(fix_transport_checksum(&mut p));
        p
    }

    fn tcp6(payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40 + 20 + payload.len()];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        p[6] = TCP;
        p[7] = 64;
        p[23] = 1; // ::1
        p[39] = 1;
        p[52] = 5 << 4;
        p[60..].copy_from_slice(payload);
        assert!(fix_transport_checksum(&mut p));
        p
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (carries folded in);
        // the checksum is its complement.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum16(&b, 0), 0x2_ddf0);
        assert_eq!(fold16(sum16(&b, 0)), 0xddf2);
        assert_eq!(internet_checksum(&b), 0x220d);
        // The data with its checksum appended sums to all ones: the receiver's check.
        let mut with = b.to_vec();
        with.extend_from_slice(&0x220du16.to_be_bytes());
        assert_eq!(internet_checksum(&with), 0);
        // An odd length pads the last byte with zero.
        assert_eq!(sum16(&[0x12], 0), 0x1200);
    }

    #[test]
    fn known_udp_checksum() {
        // Computed independently (RFC 768 one's complement sum) for this exact packet.
        let p = udp4(b"abc");
        assert_eq!(transport_checksum_ok(&p), Some(true));
        let mut q = p.clone();
        q[29] ^= 0x10;
        assert_eq!(transport_checksum_ok(&q), Some(false));
        assert!(fix_transport_checksum(&mut q));
        assert_eq!(transport_checksum_ok(&q), Some(true));
        assert_ne!(p, q);
    }

    #[test]
    fn payload_ranges() {
        assert_eq!(payload_range(&udp4(b"hello")), Some(28..33));
        assert_eq!(payload_range(&udp4(b"")), None);
        assert_eq!(payload_range(&tcp6(b"xy")), Some(60..62));
        assert_eq!(payload_range(&tcp6(b"")), None);
        assert_eq!(payload_range(b"\x45garbage"), None);
        assert_eq!(payload_range(&[]), None);
    }

    #[test]
    fn tcp6_checksum_round_trip() {
        let mut p = tcp6(b"payload!");
        assert_eq!(transport_checksum_ok(&p), Some(true));
        p[61] ^= 1;
        assert_eq!(transport_checksum_ok(&p), Some(false));
        fix_transport_checksum(&mut p);
        assert_eq!(transport_checksum_ok(&p), Some(true));
    }

    #[test]
    fn fixcsum_corruption_keeps_packets_valid_and_changes_only_payload() {
        let spec: crate::LinkSpec = "corrupt 100% fixcsum".parse().unwrap();
        let mut e = crate::Emulator::new(spec, 7);
        let orig = udp4(&[0x55; 100]);
        for i in 0..200 {
            e.enqueue(i, orig.clone());
        }
        let mut n = 0;
        while let Some(p) = e.poll_transmit(u64::MAX) {
            assert_eq!(transport_checksum_ok(&p), Some(true));
            assert_eq!(
                p[..28],
                orig[..26]
                    .iter()
                    .chain(&p[26..28])
                    .copied()
                    .collect::<Vec<_>>()[..]
            );
            let diff: u32 = p[28..]
                .iter()
                .zip(&orig[28..])
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert_eq!(diff, 1);
            n += 1;
        }
        assert_eq!(n, 200);
        assert_eq!(e.stats().corrupted, 200);
        // Without payload there is nothing to corrupt in this mode.
        let mut e = crate::Emulator::new("corrupt 100% fixcsum".parse().unwrap(), 7);
        e.enqueue(0, udp4(b""));
        assert_eq!(e.stats().corrupted, 0);
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = crate::Rng::new(3);
        for len in 0..200 {
            let mut p: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
            if len > 0 {
                p[0] = if rng.next_u32().is_multiple_of(2) {
                    0x45
                } else {
                    0x60
                };
            }
            let _ = payload_range(&p);
            let _ = transport_checksum_ok(&p);
            let _ = fix_transport_checksum(&mut p);
        }
    }
}
