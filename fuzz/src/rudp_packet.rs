//! `socklab_rudp::wire`: any datagram parses or is refused without panicking; the frames of one
//! that parses obey the documented invariants, and re-emitting them with the `PacketWriter`
//! gives a packet that parses to the same frames.
use socklab_rudp::wire::{
    peek_cid, Frame, Packet, PacketWriter, CRC_LEN, MAX_ACK_RANGES, MAX_REASON_LEN, MIN_PACKET_LEN,
    VARINT_MAX,
};

/// A frame as the writer can emit it (owned, comparable).
#[derive(Debug, PartialEq)]
enum Expect {
    Padding(usize),
    Other(String),
    Ack {
        largest: u64,
        delay_us: u64,
        ranges: Vec<(u64, u64)>,
    },
}

fn expect_of(f: &Frame<'_>) -> Expect {
    match f {
        Frame::Padding(n) => Expect::Padding(*n),
        Frame::Ack(a) => Expect::Ack {
            largest: a.largest,
            delay_us: a.delay_us,
            ranges: a.ranges().map(|r| (*r.start(), *r.end())).collect(),
        },
        other => Expect::Other(format!("{other:?}")),
    }
}

fn check(data: &[u8]) {
    let Ok(pkt) = Packet::parse(data) else {
        return;
    };
    let header = pkt.header();
    assert!(data.len() >= MIN_PACKET_LEN);
    assert_eq!(peek_cid(data), Some(header.cid));
    assert!(header.pn <= VARINT_MAX);
    let frames: Vec<_> = pkt.frames().collect();
    assert!(frames.len() <= pkt.payload().len());
    let errors = frames.iter().filter(|f| f.is_err()).count();
    assert!(errors <= 1);
    if errors == 1 {
        assert!(frames.last().unwrap().is_err(), "frames after an error");
    }
    // Re-emit what parsed.
    let mut buf = vec![0u8; 2 * data.len() + 64];
    let mut w = PacketWriter::new(&mut buf, header).expect("header fits");
    let mut expected: Vec<Expect> = Vec::new();
    for f in frames.iter().filter_map(|f| f.as_ref().ok()) {
        match *f {
            Frame::Padding(n) => {
                assert!(n > 0);
                let before = w.len();
                w.pad_to(before + n + CRC_LEN);
                assert_eq!(w.len(), before + n);
            }
            Frame::Ping => assert!(w.ping()),
            Frame::Ack(a) => {
                let ranges: Vec<_> = a.ranges().collect();
                assert_eq!(ranges.len(), a.ranges().len());
                assert_eq!(*ranges[0].end(), a.largest);
                for r in &ranges {
                    assert!(r.start() <= r.end());
                }
                for p in ranges.windows(2) {
                    assert!(*p[1].end() + 2 <= *p[0].start());
                }
                assert!(ranges.len() <= MAX_ACK_RANGES + 1);
                let n = w.ack(a.largest, a.delay_us, ranges.iter().cloned());
                assert_eq!(n, ranges.len().min(MAX_ACK_RANGES));
                expected.push(Expect::Ack {
                    largest: a.largest,
                    delay_us: a.delay_us,
                    ranges: ranges[..n].iter().map(|r| (*r.start(), *r.end())).collect(),
                });
                continue;
            }
            Frame::Stream {
                stream,
                offset,
                data,
            } => {
                assert!(offset + data.len() as u64 <= VARINT_MAX);
                if data.is_empty() {
                    // The writer never emits an empty STREAM frame.
                    continue;
                }
                assert_eq!(w.stream(stream, offset, data), data.len());
            }
            Frame::Credit(v) => assert!(w.credit(v)),
            Frame::Connect { cookie } => assert!(w.connect(&cookie)),
            Frame::Close { code, reason } => {
                assert!(reason.len() <= MAX_REASON_LEN);
                assert!(w.close(code, reason));
            }
            Frame::Hello { version } => assert!(w.hello(version)),
            Frame::Cookie { cookie, credit } => assert!(w.cookie(&cookie, credit)),
        }
        let e = expect_of(f);
        // Paddings separated only by a skipped frame merge when parsed again.
        if let (Some(Expect::Padding(a)), Expect::Padding(b)) = (expected.last_mut(), &e) {
            *a += b;
        } else {
            expected.push(e);
        }
    }
    let n = w.finish();
    let again = Packet::parse(&buf[..n]).expect("re-emitted packet parses");
    assert_eq!(again.header(), header);
    let reparsed: Vec<Expect> = again
        .frames()
        .map(|f| expect_of(&f.expect("re-emitted frame parses")))
        .collect();
    assert_eq!(reparsed, expected);
    // The writer uses minimal varints: never longer than the input (but for the ACK range
    // count, which it writes as 2 bytes).
    let acks = expected
        .iter()
        .filter(|e| matches!(e, Expect::Ack { .. }))
        .count();
    if errors == 0 {
        assert!(n <= data.len() + acks, "{n} > {} + {acks}", data.len());
    }
}

/// One input of the target.
pub fn run(data: &[u8]) {
    check(data);
    // Most inputs fail the CRC: also try the same bytes with a valid one.
    if data.len() >= MIN_PACKET_LEN - CRC_LEN {
        let mut v = data.to_vec();
        let crc = socklab_rudp::crc32c::crc32c(&v);
        v.extend_from_slice(&crc.to_le_bytes());
        check(&v);
    }
}
