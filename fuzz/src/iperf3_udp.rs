//! iperf3's UDP datagrams never panic the sink: a header that parses writes back the same, a
//! connect datagram is 4 bytes, and the stream table fed any datagrams from a
//! few peers (connect datagrams, data, garbage, before and after the start) counts each one
//! exactly once (into a stream, a connect datagram, late, or a stranger's) with finite, non-negative jitter and
//! no more lost than the highest number seen.
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use socklab_net::iperf3::proto::Cookie;
use socklab_net::iperf3::udp::{connect_reply, Header, Table, Verdict};

/// One input of the target.
pub fn run(data: &[u8]) {
    for wide in [false, true] {
        if let Ok(h) = Header::parse(data, wide) {
            let mut out = vec![0u8; Header::len(wide)];
            h.write(&mut out, wide);
            assert_eq!(Header::parse(&out, wide).unwrap(), h);
        }
    }
    if connect_reply(data).is_some() {
        assert_eq!(data.len(), 4);
    }
    // Datagrams: [peer byte][length byte][length bytes …] …
    let t0 = Instant::now();
    let mut table = Table::default();
    let test = Cookie([b'a'; 36]);
    let wide = data.first().is_some_and(|b| b & 1 == 1);
    table
        .open(test, "127.0.0.1".parse().unwrap(), 2, wide, false)
        .unwrap();
    let (mut i, mut n, mut counted, mut id, mut again) = (0usize, 0u64, 0u64, 1i64, 0u64);
    while i + 2 <= data.len() {
        let (who, len) = (data[i], usize::from(data[i + 1]));
        let body = &data[(i + 2).min(data.len())..(i + 2 + len).min(data.len())];
        i += 2 + len;
        let ip = if who & 0x80 == 0 {
            [127, 0, 0, 1]
        } else {
            [127, 0, 0, 2]
        };
        let peer = SocketAddr::from((ip, 1000 + u16::from(who & 3)));
        if who & 0x40 != 0 {
            table.start(&test);
        }
        let now = t0 + Duration::from_micros(u64::from(who) * 997 + n);
        n += 1;
        match table.datagram(now, peer, body) {
            Verdict::Joined { .. } => {
                table.confirm(peer, id);
                id += 1;
            }
            Verdict::Counted => counted += 1,
            Verdict::Reply(_) => again += 1,
            _ => {}
        }
    }
    let joined = (id - 1) as u64;
    let figures = table.stop(&test);
    let in_streams: u64 = figures.iter().map(|(_, r)| r.datagrams).sum();
    assert_eq!(in_streams, counted);
    assert_eq!(
        in_streams + joined + again + table.late.datagrams + table.strangers.datagrams,
        n,
        "every datagram counted once"
    );
    for (_, r) in &figures {
        assert!(r.jitter.is_finite() && r.jitter >= 0.0, "{}", r.jitter);
        assert!(r.lost <= r.highest);
    }
    table.forget(&test);
    assert_eq!(table.reserved(), 0);
}
