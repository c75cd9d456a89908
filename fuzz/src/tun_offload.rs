//! The tun driver's offload code (`socklab_link::vnet`) never panics on any bytes the
//! kernel could hand over: a virtio-net header and a packet, split into segments, grouped
//! and joined again; every segment is a header plus a slice of the packet's payload, and the
//! runs cover the segments in order.
use socklab_link::vnet::{self, VnetHdr, HDR_LEN};

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some(h) = VnetHdr::parse(data) else {
        return;
    };
    let p = &data[HDR_LEN..];
    let mut segs = Vec::new();
    if let Ok(n) = vnet::split(&h, p, &mut Vec::new, &mut |s| segs.push(s)) {
        assert_eq!(n, segs.len());
        assert!(segs.iter().all(|s| s.len() <= p.len()));
    }
    let runs = vnet::groups(&segs);
    let mut next = 0;
    let mut hdr = Vec::new();
    for r in runs {
        assert_eq!(r.start, next);
        assert!(r.end > r.start && r.end - r.start <= vnet::MAX_RUN);
        next = r.end;
        if let Some((vh, hl)) = vnet::joined_header(&segs[r.clone()], &mut hdr) {
            assert_eq!(hdr.len(), hl);
            assert_eq!(usize::from(vh.hdr_len), hl);
        }
    }
    assert_eq!(next, segs.len());
    let mut q = p.to_vec();
    vnet::make_partial(&mut q);
    vnet::complete_checksum(&mut q);
    let _ = VnetHdr::for_packet(p, true);
}
