//! Just enough of an IPv4/IPv6 header for the bottleneck's queue disciplines: a packet's flow
//! (its 5-tuple, for fq_codel), its ECN field, and setting CE (RFC 3168) with the IPv4 header
//! checksum updated incrementally (RFC 1624), as Linux's `INET_ECN_set_ce` does. Pure
//! functions over bytes; anything that is not an IPv4/IPv6 header is left alone (`None`,
//! `false`).

/// Not ECN-capable transport.
pub const NOT_ECT: u8 = 0b00;
/// ECN-capable transport, codepoint 1.
pub const ECT1: u8 = 0b01;
/// ECN-capable transport, codepoint 0.
pub const ECT0: u8 = 0b10;
/// Congestion experienced.
pub const CE: u8 = 0b11;

const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;
const UDPLITE: u8 = 136;

/// The IPv4 header length, when `p` starts with a well-formed one (version 4, IHL >= 5, the
/// header within `p`).
fn v4_header(p: &[u8]) -> Option<usize> {
    let ihl = usize::from(*p.first()? & 0x0f) * 4;
    (p[0] >> 4 == 4 && ihl >= 20 && p.len() >= ihl).then_some(ihl)
}

fn is_v6(p: &[u8]) -> bool {
    p.len() >= 40 && p[0] >> 4 == 6
}

/// The ECN codepoint (`NOT_ECT`, `ECT1`, `ECT0` or `CE`) of an IPv4 or IPv6 packet.
pub fn ecn(p: &[u8]) -> Option<u8> {
    if v4_header(p).is_some() {
        Some(p[1] & 0b11)
    } else if is_v6(p) {
        Some((p[1] >> 4) & 0b11)
    } else {
        None
    }
}

/// Marks an ECN-capable packet Congestion Experienced: true when the packet carries CE
/// afterwards (it was ECT(0), ECT(1) or CE already), false when it is not ECN-capable or not
/// an IP packet (then it is unchanged and a queue that wanted to mark it drops it instead).
/// An IPv4 header checksum is updated incrementally, so a header that was valid stays valid
/// (and one that was not stays invalid).
pub fn set_ce(p: &mut [u8]) -> bool {
    match ecn(p) {
        None | Some(NOT_ECT) => false,
        Some(CE) => true,
        Some(_) if p[0] >> 4 == 4 => {
            let old = u16::from_be_bytes([p[0], p[1]]);
            p[1] |= CE;
            let new = u16::from_be_bytes([p[0], p[1]]);
            let hc = u16::from_be_bytes([p[10], p[11]]);
            // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
            let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            true
        }
        Some(_) => {
            p[1] |= CE << 4;
            true
        }
    }
}

/// Whether an IPv4 header's checksum is valid (`None` when `p` is not IPv4).
pub fn ipv4_header_checksum_ok(p: &[u8]) -> Option<bool> {
    let ihl = v4_header(p)?;
    let mut sum = 0u32;
    for c in p[..ihl].chunks_exact(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    Some(sum == 0xffff)
}

fn mix(h: u64, v: u64) -> u64 {
    // One round of splitmix64's finaliser over the running hash.
    let mut z = (h ^ v).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    })
}

/// A hash of the packet's flow, keyed by `key`: protocol, source and destination address, and
/// for TCP, UDP, UDP-Lite and SCTP the ports (as Linux's flow dissector, which fq_codel uses:
/// fragments after the first, and IPv6 packets with extension headers, hash without ports).
/// `None` when the packet is not IPv4 or IPv6.
pub fn flow_hash(p: &[u8], key: u64) -> Option<u64> {
    let (proto, addrs, l4) = if let Some(ihl) = v4_header(p) {
        let first_fragment = u16::from_be_bytes([p[6], p[7]]) & 0x1fff == 0;
        (p[9], &p[12..20], first_fragment.then_some(ihl))
    } else if is_v6(p) {
        (p[6], &p[8..40], Some(40))
    } else {
        return None;
    };
    let ports = match (proto, l4) {
        (TCP | UDP | SCTP | UDPLITE, Some(at)) if p.len() >= at + 4 => {
            u64::from(u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]))
        }
        _ => 0,
    };
    let mut h = mix(key, u64::from(proto) << 32 | ports);
    for w in words(addrs) {
        h = mix(h, w);
    }
    Some(h)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An IPv4 UDP packet with a valid header checksum, ECN field `ecn`, ports `sport` → `dport`.
    pub(crate) fn udp4(ecn: u8, sport: u16, dport: u16, len: usize) -> Vec<u8> {
        let len = len.max(28);
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[1] = 0xb8 | ecn; // DSCP EF, to see that only the ECN bits change
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = UDP;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        let mut sum = 0u32;
        for c in p[..20].chunks_exact(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        p
    }

    fn tcp6(ecn: u8, sport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x60 | 0x0b; // traffic class high nibble 0xb
        p[1] = (ecn << 4) | 0x05; // low nibble: flow label bits
        p[4..6].copy_from_slice(&20u16.to_be_bytes());
        p[6] = TCP;
        p[7] = 64;
        p[23] = 1;
        p[39] = 2;
        p[40..42].copy_from_slice(&sport.to_be_bytes());
        p[42..44].copy_from_slice(&80u16.to_be_bytes());
        p
    }

    #[test]
    fn ce_marking_keeps_the_ipv4_checksum_valid_and_touches_only_ecn() {
        for e in [ECT0, ECT1] {
            let p = udp4(e, 1, 2, 100);
            assert_eq!(ipv4_header_checksum_ok(&p), Some(true));
            let mut q = p.clone();
            assert!(set_ce(&mut q));
            assert_eq!(ecn(&q), Some(CE));
            assert_eq!(ipv4_header_checksum_ok(&q), Some(true), "{e}");
            assert_eq!(q[1], 0xb8 | CE);
            let changed: Vec<usize> = (0..p.len()).filter(|&i| p[i] != q[i]).collect();
            assert!(
                changed.iter().all(|&i| i == 1 || i == 10 || i == 11),
                "{changed:?}"
            );
        }
        // Not ECN-capable: left alone. CE already: nothing to do, still CE.
        let mut p = udp4(NOT_ECT, 1, 2, 100);
        let before = p.clone();
        assert!(!set_ce(&mut p));
        assert_eq!(p, before);
        let mut p = udp4(CE, 1, 2, 100);
        let before = p.clone();
        assert!(set_ce(&mut p));
        assert_eq!(p, before);
    }

    #[test]
    fn ce_marking_ipv6_sets_the_traffic_class_ecn_bits() {
        let mut p = tcp6(ECT0, 5);
        assert_eq!(ecn(&p), Some(ECT0));
        assert!(set_ce(&mut p));
        assert_eq!(ecn(&p), Some(CE));
        assert_eq!((p[0], p[1]), (0x6b, 0x35));
        assert!(!set_ce(&mut tcp6(NOT_ECT, 5)));
    }

    #[test]
    fn flows_differ_by_ports_and_agree_on_the_same_tuple() {
        let a = flow_hash(&udp4(0, 1000, 2000, 64), 7).unwrap();
        assert_eq!(flow_hash(&udp4(ECT0, 1000, 2000, 1400), 7), Some(a));
        assert_ne!(flow_hash(&udp4(0, 1001, 2000, 64), 7), Some(a));
        assert_ne!(flow_hash(&udp4(0, 1000, 2000, 64), 8), Some(a), "keyed");
        assert_ne!(flow_hash(&tcp6(0, 1), 7), flow_hash(&tcp6(0, 2), 7));
        assert_eq!(flow_hash(b"not ip", 7), None);
        assert_eq!(ecn(b"\x45short"), None);
        // Later fragments carry no ports: two flows' later fragments hash alike.
        let mut f = udp4(0, 1000, 2000, 64);
        f[7] = 10;
        let mut g = udp4(0, 3000, 4000, 64);
        g[7] = 10;
        assert_eq!(flow_hash(&f, 7), flow_hash(&g, 7));
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = crate::Rng::new(5);
        for len in 0..120 {
            for _ in 0..20 {
                let mut p: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
                if len > 0 {
                    p[0] = [0x45, 0x46, 0x4f, 0x60, 0x41][rng.below(5) as usize];
                }
                let _ = flow_hash(&p, 1);
                let e = ecn(&p);
                let marked = set_ce(&mut p);
                assert_eq!(marked, matches!(e, Some(ECT0 | ECT1 | CE)));
            }
        }
    }
}
