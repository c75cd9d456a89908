//! The TUN driver's offloads, pure functions over bytes: the virtio-net header that precedes
//! every packet of a TUN device opened with `IFF_VNET_HDR`, and its two halves.
//!
//! - **In**: the kernel hands the device TCP super-packets of up to 64 KiB (TSO) whose
//!   checksums are left to compute. [`split`] cuts one into the MTU-sized segments the wire
//!   would carry (the headers the kernel's own GSO would write: IPv4 id plus i, sequence
//!   number plus offset, FIN/PSH on the last only, CWR on the first only), so the emulator
//!   decides per segment exactly as it would for packets read one by one.
//! - **Out**: segments the emulator releases at the same instant that continue each other
//!   (same flow, consecutive sequence numbers, equal size) are joined again into one
//!   super-packet for the far device ([`groups`], [`joined_header`]), as the kernel's GRO would
//!   join them on a real interface: one write and one trip through the receiving stack instead
//!   of one per segment.
//!
//! Checksums: with offloads a TCP/UDP packet inside the emulator carries the "partial"
//! checksum (the folded pseudo-header sum, as the kernel leaves it for a device) and is written
//! with `NEEDS_CSUM`, which the receiving stack trusts. Where the model may corrupt packets
//! ([`complete_checksum`]) checksums are computed in full on the way in and written without a
//! flag, so the receiver checks them and drops what the emulator damaged, as before.

use std::ops::Range;

use socklab_impair::packet::{fold16, ip_layout, sum16, IpLayout};

/// Length of `struct virtio_net_hdr` (the TUN default, `TUNSETVNETHDRSZ` untouched).
pub const HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` is left to compute.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_ECN` (a flag on the GSO type).
pub const GSO_ECN: u8 = 0x80;

const TCP: u8 = 6;
const UDP: u8 = 17;
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const CWR: u8 = 0x80;

/// `struct virtio_net_hdr` (little-endian, as on every host socklab runs on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_*` bits.
    pub flags: u8,
    /// `GSO_*`.
    pub gso_type: u8,
    /// Length of the headers (IP + TCP) of a super-packet.
    pub hdr_len: u16,
    /// Payload bytes per segment of a super-packet (the MSS).
    pub gso_size: u16,
    /// Where the checksummed range starts (the transport header).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads the header at the start of `b`.
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b = b.get(..HDR_LEN)?;
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// The header's bytes.
    pub fn emit(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// The header of a packet written whole to the far device: `NEEDS_CSUM` for a TCP/UDP
    /// packet carrying a partial checksum (`partial`), else nothing (the receiver checks).
    pub fn for_packet(p: &[u8], partial: bool) -> VnetHdr {
        match layout(p) {
            Some(l) if partial && l.has_checksum(p) => VnetHdr {
                flags: F_NEEDS_CSUM,
                csum_start: l.l4 as u16,
                csum_offset: l.csum_field() as u16,
                ..VnetHdr::default()
            },
            _ => VnetHdr::default(),
        }
    }
}

/// Where an IP packet's transport header starts and what it is: impair's one parse.
type Layout = IpLayout;

/// What the offloads ask of a layout beyond impair's.
trait Transport {
    /// The transport checksum's offset in the transport header.
    fn csum_field(&self) -> usize;
    /// TCP always; UDP unless IPv4's "no checksum" (zero).
    fn has_checksum(&self, p: &[u8]) -> bool;
}

impl Transport for Layout {
    fn csum_field(&self) -> usize {
        if self.proto == TCP {
            16
        } else {
            6
        }
    }

    fn has_checksum(&self, p: &[u8]) -> bool {
        let at = self.l4 + self.csum_field();
        !(self.proto == UDP && self.v4 && p[at] == 0 && p[at + 1] == 0)
    }
}

/// A TCP or UDP packet over IPv4 (not a fragment) or IPv6 (no extension header), whose
/// transport header fits.
fn layout(p: &[u8]) -> Option<Layout> {
    let l = ip_layout(p)?;
    let need = match l.proto {
        TCP => 20,
        UDP => 8,
        _ => return None,
    };
    (l.l4 + need <= l.end).then_some(l)
}

fn put16(p: &mut [u8], at: usize, v: u16) {
    p[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn get32(p: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

fn ipv4_header_checksum(p: &mut [u8]) {
    let ihl = usize::from(p[0] & 0x0f) * 4;
    put16(p, 10, 0);
    let c = socklab_impair::packet::internet_checksum(&p[..ihl]);
    put16(p, 10, c);
}

/// Puts the partial checksum (the folded pseudo-header sum) in a TCP/UDP packet's checksum
/// field, as the kernel leaves it for a device with checksum offload. Returns whether the
/// packet is one that has a checksum.
pub fn make_partial(p: &mut [u8]) -> bool {
    let Some(l) = layout(p) else { return false };
    if !l.has_checksum(p) {
        return false;
    }
    let v = fold16(l.pseudo(p, l.end - l.l4));
    put16(p, l.l4 + l.csum_field(), v);
    true
}

/// Computes a TCP/UDP packet's checksum in full from its partial form (the field holds the
/// pseudo-header sum: [`make_partial`], or what the kernel handed over with `NEEDS_CSUM`).
pub fn complete_checksum(p: &mut [u8]) -> bool {
    let Some(l) = layout(p) else { return false };
    if !l.has_checksum(p) {
        return false;
    }
    // The field is part of the sum: it holds the pseudo-header's share.
    let mut c = !fold16(sum16(&p[l.l4..l.end], 0));
    if l.proto == UDP && c == 0 {
        c = 0xffff;
    }
    put16(p, l.l4 + l.csum_field(), c);
    true
}

/// Why a super-packet could not be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// Not TCP over IPv4/IPv6 with a valid header.
    NotTcp,
    /// `gso_size` is zero.
    NoSegmentSize,
}

/// Cuts the TCP super-packet `p` (a packet with a `GSO_TCPV4`/`GSO_TCPV6` header `h`) into
/// segments of `h.gso_size` payload bytes, each built in a buffer from `alloc` (cleared first)
/// and passed to `out`, with the headers the kernel's GSO would give them and a partial
/// checksum. Returns the number of segments.
pub fn split(
    h: &VnetHdr,
    p: &[u8],
    alloc: &mut impl FnMut() -> Vec<u8>,
    out: &mut impl FnMut(Vec<u8>),
) -> Result<usize, SplitError> {
    let l = layout(p)
        .filter(|l| l.proto == TCP)
        .ok_or(SplitError::NotTcp)?;
    let doff = usize::from(p[l.l4 + 12] >> 4) * 4;
    let hl = l.l4 + doff;
    if doff < 20 || hl > l.end {
        return Err(SplitError::NotTcp);
    }
    let mss = usize::from(h.gso_size);
    if mss == 0 {
        return Err(SplitError::NoSegmentSize);
    }
    let payload = &p[hl..l.end];
    let seq0 = get32(p, l.l4 + 4);
    let id0 = u16::from_be_bytes([p[4], p[5]]);
    let flags0 = p[l.l4 + 13];
    let n = payload.len().div_ceil(mss).max(1);
    for i in 0..n {
        let chunk = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        let mut b = alloc();
        b.clear();
        b.extend_from_slice(&p[..hl]);
        b.extend_from_slice(chunk);
        let len = b.len();
        if l.v4 {
            put16(&mut b, 2, len as u16);
            put16(&mut b, 4, id0.wrapping_add(i as u16));
            ipv4_header_checksum(&mut b);
        } else {
            put16(&mut b, 4, (len - 40) as u16);
        }
        let seq = seq0.wrapping_add((i * mss) as u32);
        b[l.l4 + 4..l.l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut f = flags0;
        if i + 1 < n {
            f &= !(FIN | PSH);
        }
        if i > 0 {
            f &= !CWR;
        }
        b[l.l4 + 13] = f;
        let v = fold16(l.pseudo(&b, len - l.l4));
        put16(&mut b, l.l4 + 16, v);
        out(b);
    }
    Ok(n)
}

/// A TCP segment's fields that decide whether it can join a super-packet.
struct Seg {
    l: Layout,
    /// IP + TCP header length.
    hl: usize,
    seq: u32,
    flags: u8,
    payload: usize,
}

fn seg(p: &[u8]) -> Option<Seg> {
    let l = layout(p).filter(|l| l.proto == TCP)?;
    if l.v4 && (l.l4 != 20 || p[6] & 0x20 != 0) {
        return None; // IP options or more fragments: never joined
    }
    let doff = usize::from(p[l.l4 + 12] >> 4) * 4;
    let hl = l.l4 + doff;
    if doff < 20 || hl > l.end || l.end != p.len() {
        return None;
    }
    Some(Seg {
        hl,
        seq: get32(p, l.l4 + 4),
        flags: p[l.l4 + 13],
        payload: l.end - hl,
        l,
    })
}

/// Whether `next` continues the super-packet that starts with `first` and ends (so far) with
/// `prev`, `len` bytes long: the same flow and header (addresses, ports, TOS/traffic class,
/// TTL, acknowledgement, window, TCP options), the next sequence number, segments of equal
/// size (the last may be shorter), only ACK before the last (which may add PSH), at most 64 KiB.
fn continues(first: &[u8], f: &Seg, prev: &Seg, next_p: &[u8], n: &Seg, len: usize) -> bool {
    let l4 = f.l.l4;
    n.l.v4 == f.l.v4
        && n.hl == f.hl
        && prev.flags == ACK
        && (n.flags == ACK || n.flags == ACK | PSH)
        && prev.payload == f.payload
        && n.payload > 0
        && n.payload <= f.payload
        && n.seq == prev.seq.wrapping_add(prev.payload as u32)
        && len + n.payload <= 65535
        // Addresses; for IPv4 also TOS, DF and TTL; for IPv6 the first word (version, class,
        // flow label) and the hop limit.
        && if f.l.v4 {
            first[1] == next_p[1] && first[6] == next_p[6] && first[8] == next_p[8]
                && first[12..20] == next_p[12..20]
        } else {
            first[..4] == next_p[..4] && first[7] == next_p[7] && first[8..40] == next_p[8..40]
        }
        // Ports, acknowledgement, window, urgent pointer and options (not seq, flags, checksum).
        && first[l4..l4 + 4] == next_p[l4..l4 + 4]
        && first[l4 + 8..l4 + 12] == next_p[l4 + 8..l4 + 12]
        && first[l4 + 14..l4 + 16] == next_p[l4 + 14..l4 + 16]
        && first[l4 + 18..f.hl] == next_p[l4 + 18..f.hl]
}

/// Most segments joined into one super-packet.
pub const MAX_RUN: usize = 64;

/// Splits `packets` (released at one instant, in release order) into runs that can be written
/// as one super-packet each (a run of one is written as it is).
pub fn groups<P: AsRef<[u8]>>(packets: &[P]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    groups_into(packets, &mut out);
    out
}

/// [`groups`] into `out` (appended).
pub fn groups_into<P: AsRef<[u8]>>(packets: &[P], out: &mut Vec<Range<usize>>) {
    let mut i = 0;
    while i < packets.len() {
        let start = i;
        i += 1;
        let first = packets[start].as_ref();
        if let Some(f) = seg(first).filter(|f| f.flags == ACK && f.payload > 0) {
            let mut prev = seg(first).expect("parsed above");
            let mut len = first.len();
            while let Some(n) = packets
                .get(i)
                .filter(|_| i - start < MAX_RUN)
                .and_then(|p| seg(p.as_ref()))
            {
                let np = packets[i].as_ref();
                if !continues(first, &f, &prev, np, &n, len) {
                    break;
                }
                len += n.payload;
                i += 1;
                let last = n.flags != ACK;
                prev = n;
                if last {
                    break;
                }
            }
        }
        out.push(start..i);
    }
}

/// For a run of segments from [`groups`] (more than one): the virtio header and the joined
/// IP + TCP header (written to `hdr`) of the super-packet, whose payload is every segment's
/// payload in order (`payload_at` bytes into each). `None` for a run of one.
pub fn joined_header<P: AsRef<[u8]>>(run: &[P], hdr: &mut Vec<u8>) -> Option<(VnetHdr, usize)> {
    if run.len() < 2 {
        return None;
    }
    let first = run[0].as_ref();
    let f = seg(first)?;
    let last = seg(run[run.len() - 1].as_ref())?;
    let payload: usize = run.iter().map(|p| p.as_ref().len() - f.hl).sum::<usize>();
    let len = f.hl + payload;
    hdr.clear();
    hdr.extend_from_slice(&first[..f.hl]);
    if f.l.v4 {
        put16(hdr, 2, len as u16);
        ipv4_header_checksum(hdr);
    } else {
        put16(hdr, 4, (len - 40) as u16);
    }
    hdr[f.l.l4 + 13] = last.flags;
    // Partial checksum over the whole: the pseudo-header with the joined length.
    let l = Layout { end: len, ..f.l };
    let v = fold16(l.pseudo(hdr, len - l.l4));
    put16(hdr, l.l4 + 16, v);
    Some((
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if f.l.v4 { GSO_TCPV4 } else { GSO_TCPV6 },
            hdr_len: f.hl as u16,
            gso_size: f.payload as u16,
            csum_start: f.l.l4 as u16,
            csum_offset: 16,
        },
        f.hl,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP packet 10.77.0.1:40000 -> 10.77.0.2:5201 with `payload`, id, seq and flags,
    /// timestamps option, complete checksums.
    fn tcp4(payload: &[u8], id: u16, seq: u32, flags: u8) -> Vec<u8> {
        let hl = 20 + 32;
        let mut p = vec![0u8; hl + payload.len()];
        p[0] = 0x45;
        let total = p.len() as u16;
        put16(&mut p, 2, total);
        put16(&mut p, 4, id);
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        ipv4_header_checksum(&mut p);
        put16(&mut p, 20, 40000);
        put16(&mut p, 22, 5201);
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[28..32].copy_from_slice(&777u32.to_be_bytes());
        p[32] = 8 << 4;
        p[33] = flags;
        put16(&mut p, 34, 501);
        // NOP NOP TS(10): 12 bytes of options.
        p[40..52].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
        p[hl..].copy_from_slice(payload);
        make_partial(&mut p);
        complete_checksum(&mut p);
        p
    }

    /// The reference checksum check: the one's-complement sum over pseudo-header and segment
    /// is 0xffff.
    fn checksum_ok(p: &[u8]) -> bool {
        let l = layout(p).unwrap();
        fold16(sum16(&p[l.l4..l.end], l.pseudo(p, l.end - l.l4))) == 0xffff
    }

    #[test]
    fn header_round_trips_byte_exactly() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let b = h.emit();
        assert_eq!(b, [1, 1, 52, 0, 0xa8, 0x05, 20, 0, 16, 0]);
        assert_eq!(VnetHdr::parse(&b), Some(h));
        assert_eq!(VnetHdr::parse(&b[..9]), None);
    }

    #[test]
    fn partial_then_complete_gives_the_right_checksum() {
        let p = tcp4(b"hello world", 1, 1000, ACK | PSH);
        assert!(checksum_ok(&p));
        let mut q = p.clone();
        assert!(make_partial(&mut q));
        assert!(!checksum_ok(&q));
        assert!(complete_checksum(&mut q));
        assert_eq!(q, p);
        // An ICMP packet has no transport checksum of ours.
        let mut icmp = p.clone();
        icmp[9] = 1;
        assert!(!make_partial(&mut icmp) && !complete_checksum(&mut icmp));
    }

    /// A super-packet of 3000 bytes with MSS 1400: three segments whose headers are those the
    /// kernel's GSO writes, each a valid packet once its checksum is completed, and joined
    /// back they give the super-packet's payload.
    #[test]
    fn split_gives_the_wires_segments_and_groups_join_them_again() {
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let mut sp = tcp4(&payload, 100, 5000, ACK | PSH | CWR);
        make_partial(&mut sp);
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1400,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut segs = Vec::new();
        let n = split(&h, &sp, &mut Vec::new, &mut |b| segs.push(b)).unwrap();
        assert_eq!(n, 3);
        let sizes: Vec<usize> = segs.iter().map(|s| s.len() - 52).collect();
        assert_eq!(sizes, [1400, 1400, 200]);
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(u16::from_be_bytes([s[2], s[3]]) as usize, s.len());
            assert_eq!(u16::from_be_bytes([s[4], s[5]]), 100 + i as u16);
            assert_eq!(fold16(sum16(&s[..20], 0)), 0xffff, "IP header checksum");
            assert_eq!(get32(s, 24), 5000 + 1400 * i as u32);
            let want = match i {
                0 => ACK | CWR,
                1 => ACK,
                _ => ACK | PSH,
            };
            assert_eq!(s[33], want, "flags of segment {i}");
            let mut c = s.clone();
            complete_checksum(&mut c);
            assert!(checksum_ok(&c), "segment {i}");
            assert_eq!(&s[52..], &payload[1400 * i..(1400 * (i + 1)).min(3000)]);
        }
        // The first carries CWR: it does not start a run (only plain ACK segments do); the
        // other two join.
        assert_eq!(groups(&segs), vec![0..1, 1..3]);
        segs[0][33] = ACK;
        assert_eq!(groups(&segs), vec![0..3]);
        let mut hdr = Vec::new();
        let (vh, hl) = joined_header(&segs, &mut hdr).unwrap();
        assert_eq!(hl, 52);
        assert_eq!(
            vh,
            VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                hdr_len: 52,
                gso_size: 1400,
                csum_start: 20,
                csum_offset: 16
            }
        );
        let mut whole = hdr.clone();
        for s in &segs {
            whole.extend_from_slice(&s[52..]);
        }
        assert_eq!(
            u16::from_be_bytes([whole[2], whole[3]]) as usize,
            whole.len()
        );
        assert_eq!(whole[33], ACK | PSH);
        complete_checksum(&mut whole);
        assert!(checksum_ok(&whole));
        assert_eq!(&whole[52..], &payload[..]);
    }

    #[test]
    fn only_continuing_segments_join() {
        let a = tcp4(&[1; 100], 1, 0, ACK);
        let b = tcp4(&[2; 100], 2, 100, ACK);
        let c = tcp4(&[3; 50], 3, 200, ACK | PSH);
        let d = tcp4(&[4; 100], 4, 250, ACK);
        assert_eq!(groups(&[&a, &b, &c, &d]), vec![0..3, 3..4]);
        // A gap in the sequence (a lost segment) breaks the run.
        assert_eq!(groups(&[&a, &c]), vec![0..1, 1..2]);
        // A longer segment after a shorter one, another flow, another ack: no.
        let long = tcp4(&[2; 120], 2, 100, ACK);
        assert_eq!(groups(&[&a, &long]), vec![0..1, 1..2]);
        let mut other = b.clone();
        put16(&mut other, 22, 5202);
        assert_eq!(groups(&[&a, &other]), vec![0..1, 1..2]);
        let mut ack = b.clone();
        ack[31] ^= 1;
        assert_eq!(groups(&[&a, &ack]), vec![0..1, 1..2]);
        // A CE mark on one segment (its TOS differs) keeps it apart, as GRO does.
        let mut ce = b.clone();
        ce[1] |= 3;
        assert_eq!(groups(&[&a, &ce]), vec![0..1, 1..2]);
        // Pure ACKs and garbage stay single.
        let pure = tcp4(&[], 5, 0, ACK);
        assert_eq!(groups(&[&pure, &pure]), vec![0..1, 1..2]);
        assert_eq!(groups(&[&b"\x45junk"[..], &a[..]]), vec![0..1, 1..2]);
    }

    /// TSO super-packets of one ECN-capable flow, split and sent through the model with a
    /// CoDel bottleneck that marks (`ecn`), released together: each marked segment carries CE
    /// with a valid IPv4 header checksum (and its TCP checksum still completes), and no
    /// super-packet joined again mixes marked and unmarked segments.
    #[test]
    fn aqm_marks_split_segments_and_marked_segments_are_not_joined() {
        use socklab_impair::{ip, Emulator};
        let mut emu = Emulator::new("rate 20mbit limit 2000 aqm codel ecn".parse().unwrap(), 1);
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut segs = 0u64;
        for i in 0..40u32 {
            let mut sp = tcp4(&vec![i as u8; 1448 * 44], i as u16 * 44, 1448 * 44 * i, ACK);
            sp[1] = ip::ECT0;
            ipv4_header_checksum(&mut sp);
            make_partial(&mut sp);
            let mut add = |b: Vec<u8>| {
                emu.enqueue(u64::from(i) * 1_000_000, b);
                segs += 1;
            };
            split(&h, &sp, &mut Vec::new, &mut add).unwrap();
        }
        // Everything released at one instant, in release order (as a late wake-up would).
        let mut out = Vec::new();
        while let Some((_, p)) = emu.poll_release(u64::MAX) {
            out.push(p);
        }
        let st = emu.stats();
        assert_eq!(st.packets_in, segs);
        assert_eq!(
            st.aqm_dropped, 0,
            "every segment is ECN-capable: marked, never dropped"
        );
        assert!(st.aqm_marked > 20, "{st:?}");
        let ce: Vec<bool> = out.iter().map(|p| ip::ecn(p) == Some(ip::CE)).collect();
        assert_eq!(ce.iter().filter(|&&c| c).count() as u64, st.aqm_marked);
        for (p, &c) in out.iter().zip(&ce) {
            assert_eq!(ip::ipv4_header_checksum_ok(p), Some(true));
            assert_eq!(p[1] & 3, if c { ip::CE } else { ip::ECT0 });
            let mut full = p.clone();
            complete_checksum(&mut full);
            assert!(checksum_ok(&full));
        }
        let runs = groups(&out);
        // Some marked segment sat between unmarked ones that continue it (else nothing here
        // could have joined them), and runs of unmarked segments did join.
        assert!(runs.iter().any(|r| r.len() > 1));
        assert!((1..out.len() - 1).any(|i| ce[i] && !ce[i - 1] && !ce[i + 1]));
        let mut hdr = Vec::new();
        for r in runs {
            assert!(
                ce[r.clone()].iter().all(|&c| c == ce[r.start]),
                "run {r:?} mixes CE and non-CE segments"
            );
            if let Some((_, hl)) = joined_header(&out[r.clone()], &mut hdr) {
                assert_eq!(hl, 52);
                assert_eq!(
                    hdr[1], out[r.start][1],
                    "the joined header keeps the ECN field"
                );
                assert_eq!(ip::ipv4_header_checksum_ok(&hdr), Some(true));
            }
        }
    }

    #[test]
    fn single_packets_carry_needs_csum_only_when_partial() {
        let p = tcp4(b"x", 1, 0, ACK);
        assert_eq!(
            VnetHdr::for_packet(&p, true),
            VnetHdr {
                flags: F_NEEDS_CSUM,
                csum_start: 20,
                csum_offset: 16,
                ..VnetHdr::default()
            }
        );
        assert_eq!(VnetHdr::for_packet(&p, false), VnetHdr::default());
        assert_eq!(VnetHdr::for_packet(b"\x45", true), VnetHdr::default());
    }

    #[test]
    fn split_refuses_what_it_cannot_cut() {
        let h = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 0,
            ..VnetHdr::default()
        };
        let p = tcp4(&[0; 10], 1, 0, ACK);
        let mut none = |_: Vec<u8>| panic!("no segment expected");
        assert_eq!(
            split(&h, &p, &mut Vec::new, &mut none),
            Err(SplitError::NoSegmentSize)
        );
        assert_eq!(
            split(&h, b"\x45\x00", &mut Vec::new, &mut none),
            Err(SplitError::NotTcp)
        );
    }
}
