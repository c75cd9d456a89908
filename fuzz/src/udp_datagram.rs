//! `socklab_net::udpbulk`: any datagram parses or is refused without panicking; one that parses
//! is emitted back to the same header bytes. The same bytes cut into datagrams and fed to the
//! receiver's collector keep its counts consistent, each from one of 4 sources (its last byte
//! chooses): the table never holds more than its limit, and a refused test is reported with
//! its reason and nothing counted; as text, a rate parses and prints back to itself or is
//! refused.
use std::net::SocketAddr;

use socklab_net::udpbulk::collector::{Collector, MAX_OPEN};
use socklab_net::udpbulk::wire::{Header, HEADER_LEN};
use socklab_net::udpbulk::End;
use socklab_units::parse_rate;

/// One input of the target.
pub fn run(data: &[u8]) {
    if let Ok(h) = Header::parse(data) {
        let mut again = vec![0u8; HEADER_LEN];
        h.emit(&mut again).expect("room for a header");
        assert_eq!(&again[..], &data[..HEADER_LEN]);
        assert_eq!(Header::parse(&again), Ok(h));
    }
    // The first byte sets the datagram length; the rest are datagrams, fed in order, with
    // arrival times from their own bytes.
    if let Some((&len, rest)) = data.split_first() {
        let len = usize::from(len).max(1) + HEADER_LEN - 1;
        let mut c = Collector::new(1_000_000, 100_000);
        for (i, d) in rest.chunks(len).enumerate() {
            let now = i as u64 * 1_000;
            let arrival = u64::from(d[0]) << 20;
            let port = 40_000 + u16::from(d[d.len() - 1] % 4);
            c.on_datagram(now, arrival, SocketAddr::from(([127, 0, 0, 1], port)), d);
            assert!(c.open() <= MAX_OPEN);
            for r in c.refusals() {
                assert_eq!(r.ended, End::Refused);
                assert!(r.refused.is_some() && r.counts.arrivals == 0);
            }
            for r in c.poll(now) {
                let k = r.counts;
                assert!(k.unique + k.duplicates + k.too_old == k.arrivals);
                assert!(k.reordered <= k.unique && k.early <= k.unique);
            }
        }
        for r in c.stop() {
            let k = r.counts;
            assert!(k.unique + k.duplicates + k.too_old == k.arrivals);
            assert!(r.fin_bytes <= k.bytes);
        }
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(r) = parse_rate(&text) {
        assert_eq!(parse_rate(&r.to_string()), Ok(r));
    }
}
