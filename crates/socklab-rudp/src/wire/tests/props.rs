//! Property tests: what the writer emits parses back to the same frames, and any bytes parse or
//! are refused without panicking; plus the seed corpus of the `rudp_packet` fuzz target.

use super::*;

/// An owned frame for the property tests.
#[derive(Debug, Clone)]
enum Spec {
    Padding(usize),
    Ping,
    Ack {
        largest: u64,
        delay_us: u64,
        ranges: Vec<RangeInclusive<u64>>,
    },
    Stream {
        stream: u32,
        offset: u64,
        data: Vec<u8>,
    },
    Credit(u64),
    Connect([u8; COOKIE_LEN]),
    Close {
        code: u64,
        reason: String,
    },
    Hello(u64),
    Cookie([u8; COOKIE_LEN], u64),
}

impl Spec {
    /// Writes the frame; it must fit.
    fn emit(&self, w: &mut PacketWriter<'_>) {
        let ok = match self {
            Spec::Padding(n) => {
                let before = w.len();
                w.pad_to(before + n + CRC_LEN);
                w.len() == before + n
            }
            Spec::Ping => w.ping(),
            Spec::Ack {
                largest,
                delay_us,
                ranges,
            } => w.ack(*largest, *delay_us, ranges.iter().cloned()) == ranges.len(),
            Spec::Stream {
                stream,
                offset,
                data,
            } => w.stream(*stream, *offset, data) == data.len(),
            Spec::Credit(v) => w.credit(*v),
            Spec::Connect(c) => w.connect(c),
            Spec::Close { code, reason } => w.close(*code, reason),
            Spec::Hello(v) => w.hello(*v),
            Spec::Cookie(c, v) => w.cookie(c, *v),
        };
        assert!(ok, "{self:?} did not fit");
    }

    fn matches(&self, f: &Frame<'_>) -> bool {
        match (self, f) {
            (Spec::Padding(a), Frame::Padding(b)) => a == b,
            (Spec::Ping, Frame::Ping) => true,
            (
                Spec::Ack {
                    largest,
                    delay_us,
                    ranges,
                },
                Frame::Ack(a),
            ) => {
                a.largest == *largest
                    && a.delay_us == *delay_us
                    && a.ranges().eq(ranges.iter().cloned())
            }
            (
                Spec::Stream {
                    stream,
                    offset,
                    data,
                },
                Frame::Stream {
                    stream: s,
                    offset: o,
                    data: d,
                },
            ) => stream == s && offset == o && data.as_slice() == *d,
            (Spec::Credit(a), Frame::Credit(b)) => a == b,
            (Spec::Connect(a), Frame::Connect { cookie }) => a == cookie,
            (Spec::Close { code, reason }, Frame::Close { code: c, reason: r }) => {
                code == c && reason == r
            }
            (Spec::Hello(a), Frame::Hello { version }) => a == version,
            (Spec::Cookie(a, b), Frame::Cookie { cookie, credit }) => a == cookie && b == credit,
            _ => false,
        }
    }
}

/// Varint values, biased toward the encoding boundaries.
fn value() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..64,
        60u64..70,
        0u64..16_384,
        16_380u64..16_390,
        0u64..1 << 30,
        (1u64 << 30) - 4..(1 << 30) + 4,
        0..=VARINT_MAX,
        VARINT_MAX - 4..=VARINT_MAX,
    ]
}

/// `largest` and valid descending, non-adjacent ranges whose first one ends at `largest`.
fn ack_ranges() -> impl Strategy<Value = (u64, Vec<RangeInclusive<u64>>)> {
    let small = || prop_oneof![0u64..4, 0u64..100, 0u64..100_000, value()];
    (
        value(),
        any::<bool>(),
        small(),
        proptest::collection::vec((small(), small()), 0..300),
    )
        .prop_map(|(largest, big_first, f, pairs)| {
            let first = if big_first {
                f % (largest + 1)
            } else {
                f.min(largest)
            };
            let mut lo = largest - first;
            let mut ranges = vec![lo..=largest];
            for (gap, len) in pairs {
                let Some(hi) = lo.checked_sub(gap + 2) else {
                    break;
                };
                let Some(l) = hi.checked_sub(len) else { break };
                ranges.push(l..=hi);
                lo = l;
            }
            ranges.truncate(MAX_ACK_RANGES);
            (largest, ranges)
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    let cookie = || any::<[u8; COOKIE_LEN]>();
    prop_oneof![
        (1usize..40).prop_map(Spec::Padding),
        Just(Spec::Ping),
        (ack_ranges(), value()).prop_map(|((largest, mut ranges), delay_us)| {
            ranges.truncate(40);
            Spec::Ack {
                largest,
                delay_us,
                ranges,
            }
        }),
        (
            any::<u32>(),
            value(),
            proptest::collection::vec(any::<u8>(), 1..100)
        )
            .prop_map(|(stream, offset, data)| {
                let offset = offset.min(VARINT_MAX - data.len() as u64);
                Spec::Stream {
                    stream,
                    offset,
                    data,
                }
            }),
        value().prop_map(Spec::Credit),
        cookie().prop_map(Spec::Connect),
        (value(), "\\PC{0,40}").prop_map(|(code, reason)| Spec::Close { code, reason }),
        value().prop_map(Spec::Hello),
        (cookie(), value()).prop_map(|(c, v)| Spec::Cookie(c, v)),
    ]
}

fn header() -> impl Strategy<Value = Header> {
    (
        prop_oneof![
            Just(PacketType::Initial),
            Just(PacketType::Challenge),
            Just(PacketType::Data)
        ],
        any::<u64>(),
        value(),
    )
        .prop_map(|(ty, cid, pn)| Header { ty, cid, pn })
}

/// Consecutive paddings merge when parsed: merge them in the expectation too.
fn normalize(specs: Vec<Spec>) -> Vec<Spec> {
    let mut out: Vec<Spec> = Vec::new();
    for s in specs {
        if let (Some(Spec::Padding(a)), Spec::Padding(b)) = (out.last_mut(), &s) {
            *a += b;
        } else {
            out.push(s);
        }
    }
    out
}

fn emit_all(header: Header, specs: &[Spec]) -> Vec<u8> {
    build_in(64 * 1024, header, |w| specs.iter().for_each(|s| s.emit(w)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_round_trips(h in header(), s in spec()) {
        let p = emit_all(h, std::slice::from_ref(&s));
        let pkt = Packet::parse(&p).unwrap();
        prop_assert_eq!(pkt.header(), h);
        let frames: Vec<_> = pkt.frames().collect();
        prop_assert_eq!(frames.len(), 1);
        prop_assert!(s.matches(frames[0].as_ref().unwrap()), "{:?} vs {:?}", s, frames[0]);
    }

    #[test]
    fn frame_sequences_round_trip(h in header(), specs in proptest::collection::vec(spec(), 0..20)) {
        let specs = normalize(specs);
        let p = emit_all(h, &specs);
        let frames: Vec<_> = Packet::parse(&p).unwrap().frames().collect();
        prop_assert_eq!(frames.len(), specs.len());
        for (s, f) in specs.iter().zip(&frames) {
            prop_assert!(s.matches(f.as_ref().unwrap()), "{:?} vs {:?}", s, f);
        }
    }

    #[test]
    fn ack_ranges_round_trip(
        (largest, ranges) in ack_ranges(),
        delay_us in value(),
        room in 0usize..5000,
    ) {
        let mut buf = vec![0u8; 10 + room + CRC_LEN];
        let mut w = PacketWriter::new(&mut buf, HDR).unwrap();
        let n = w.ack(largest, delay_us, ranges.iter().cloned());
        prop_assert!(n <= ranges.len());
        let full_size = 1 + varint::len(largest) + varint::len(delay_us) + 2
            + varint::len(largest - ranges[0].start())
            + ranges.windows(2).map(|p| {
                varint::len(p[0].start() - p[1].end() - 2) + varint::len(p[1].end() - p[1].start())
            }).sum::<usize>();
        if full_size <= room {
            prop_assert_eq!(n, ranges.len());
        }
        let len = w.finish();
        let frames: Vec<_> = Packet::parse(&buf[..len]).unwrap().frames().collect();
        if n == 0 {
            prop_assert!(frames.is_empty());
        } else {
            prop_assert_eq!(frames.len(), 1);
            let Ok(Frame::Ack(a)) = frames[0] else { panic!("{:?}", frames[0]) };
            prop_assert_eq!((a.largest, a.delay_us), (largest, delay_us));
            prop_assert_eq!(a.ranges().len(), n);
            prop_assert_eq!(a.ranges().collect::<Vec<_>>(), ranges[..n].to_vec());
        }
    }

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        exercise(&bytes);
        // Most random datagrams fail the CRC: also try them with a valid one.
        exercise(&reseal(&bytes));
    }

    #[test]
    fn parse_never_panics_on_arbitrary_payloads(
        h in header(),
        payload in proptest::collection::vec(
            prop_oneof![4 => 0u8..10, 1 => any::<u8>()], 0..200),
    ) {
        exercise(&seal(h, &payload));
    }

    #[test]
    fn truncations_are_rejected_or_parse_as_a_prefix(
        h in header(),
        specs in proptest::collection::vec(spec(), 1..8),
    ) {
        let specs = normalize(specs);
        let p = emit_all(h, &specs);
        for n in 0..p.len() {
            exercise(&p[..n]);
            prop_assert!(Packet::parse(&p[..n]).is_err(), "prefix {} of {} parsed", n, p.len());
        }
        // Cut the frames anywhere and fix the CRC: the frames before the cut come back.
        let header_len = p.len() - CRC_LEN - Packet::parse(&p).unwrap().payload().len();
        for cut in header_len..p.len() - CRC_LEN {
            let q = reseal(&p[..cut]);
            exercise(&q);
            for (i, f) in Packet::parse(&q).unwrap().frames().enumerate() {
                match f {
                    Ok(Frame::Padding(m)) if matches!(specs[i], Spec::Padding(n) if m < n) => {}
                    Ok(f) => prop_assert!(specs[i].matches(&f), "cut {}: {:?} vs {:?}", cut, specs[i], f),
                    Err(_) => {}
                }
            }
        }
    }

    #[test]
    fn single_bit_flips_are_rejected(
        h in header(),
        specs in proptest::collection::vec(spec(), 0..5),
    ) {
        let p = emit_all(h, &normalize(specs));
        let mut q = p.clone();
        for bit in 0..p.len() * 8 {
            q[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(Packet::parse(&q).is_err(), "flip of bit {} accepted", bit);
            q[bit / 8] ^= 1 << (bit % 8);
        }
    }
}

/// Parses and walks everything; checks the invariants that must hold for any input.
fn exercise(datagram: &[u8]) {
    let Ok(pkt) = Packet::parse(datagram) else {
        return;
    };
    assert_eq!(peek_cid(datagram), Some(pkt.header().cid));
    assert!(pkt.payload().len() + MIN_PACKET_LEN - 1 <= datagram.len());
    let mut errors = 0;
    let mut total = 0;
    let mut frames = pkt.frames();
    for f in frames.by_ref() {
        match f {
            Ok(Frame::Ack(a)) => {
                let ranges: Vec<_> = a.ranges().collect();
                assert_eq!(ranges.len(), a.ranges().len());
                assert_eq!(*ranges[0].end(), a.largest);
                for r in &ranges {
                    assert!(r.start() <= r.end());
                }
                for w in ranges.windows(2) {
                    assert!(*w[1].end() + 2 <= *w[0].start());
                }
            }
            Ok(Frame::Padding(n)) => assert!(n > 0),
            Ok(Frame::Stream { offset, data, .. }) => {
                assert!(offset + data.len() as u64 <= VARINT_MAX)
            }
            Ok(Frame::Close { reason, .. }) => assert!(reason.len() <= MAX_REASON_LEN),
            Ok(_) => {}
            Err(_) => errors += 1,
        }
        total += 1;
        assert!(total <= pkt.payload().len(), "more frames than bytes");
    }
    assert!(errors <= 1);
    assert_eq!(frames.next(), None);
}

/// Writes the seed corpus of the `rudp_packet` fuzz target (`cargo test -p socklab-rudp
/// --lib write_fuzz_seeds -- --ignored`).
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rudp_packet");
    std::fs::create_dir_all(&dir).unwrap();
    let cookie: [u8; COOKIE_LEN] = std::array::from_fn(|i| i as u8 * 17);
    let seeds: Vec<Vec<u8>> = vec![
        build_in(
            1500,
            Header {
                ty: PacketType::Initial,
                cid: 0x1122_3344_5566_7788,
                pn: 0,
            },
            |w| {
                w.hello(u64::from(VERSION));
                w.pad_to(MIN_INITIAL_SIZE);
            },
        ),
        build_in(
            1500,
            Header {
                ty: PacketType::Challenge,
                cid: 0x1122_3344_5566_7788,
                pn: 0,
            },
            |w| {
                w.cookie(&cookie, 1 << 20);
            },
        ),
        build_in(
            1500,
            Header {
                ty: PacketType::Data,
                cid: 0x1122_3344_5566_7788,
                pn: 1,
            },
            |w| {
                w.connect(&cookie);
                w.stream(0, 0, b"GET / HTTP/1.0\r\n\r\n");
            },
        ),
        build_in(
            1500,
            Header {
                ty: PacketType::Data,
                cid: 7,
                pn: 70_000,
            },
            |w| {
                w.ack(1000, 25, [990..=1000, 900..=950, 0..=10].into_iter());
                w.credit(1 << 24);
                w.ping();
                w.stream(3, 1 << 31, &[0xab; 64]);
            },
        ),
        build_in(
            1500,
            Header {
                ty: PacketType::Data,
                cid: 7,
                pn: 70_001,
            },
            |w| {
                w.close(42, "bye é");
            },
        ),
        build_in(
            1500,
            Header {
                ty: PacketType::Data,
                cid: u64::MAX,
                pn: VARINT_MAX,
            },
            |w| {
                w.ack(
                    VARINT_MAX,
                    VARINT_MAX,
                    (0..40u64).map(|i| VARINT_MAX - 3 * i - 1..=VARINT_MAX - 3 * i),
                );
                w.pad_to(300);
            },
        ),
    ];
    for s in &seeds {
        exercise(s);
        let name = blake3::hash(s).to_hex();
        std::fs::write(dir.join(&name[..40]), s).unwrap();
    }
}
