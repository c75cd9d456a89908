use super::*;
use proptest::prelude::*;

const HDR: Header = Header {
    ty: PacketType::Data,
    cid: 0x0102_0304_0506_0708,
    pn: 5,
};

/// Builds a packet in a buffer of `cap` bytes with `f` writing the frames.
fn build_in(cap: usize, header: Header, f: impl FnOnce(&mut PacketWriter<'_>)) -> Vec<u8> {
    let mut buf = vec![0u8; cap];
    let mut w = PacketWriter::new(&mut buf, header).unwrap();
    f(&mut w);
    let n = w.finish();
    buf.truncate(n);
    buf
}

fn build(f: impl FnOnce(&mut PacketWriter<'_>)) -> Vec<u8> {
    build_in(2048, HDR, f)
}

/// A packet with HDR and exactly these payload bytes, CRC appended.
fn seal(header: Header, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![VERSION << 4 | header.ty as u8];
    v.extend_from_slice(&header.cid.to_le_bytes());
    let mut pn = [0u8; 8];
    let n = varint::write(&mut pn, header.pn).unwrap();
    v.extend_from_slice(&pn[..n]);
    v.extend_from_slice(payload);
    let crc = crc32c(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

/// Appends the CRC to `body`.
fn reseal(body: &[u8]) -> Vec<u8> {
    let mut v = body.to_vec();
    v.extend_from_slice(&crc32c(body).to_le_bytes());
    v
}

fn frames_of(datagram: &[u8]) -> Vec<Result<Frame<'_>, WireError>> {
    Packet::parse(datagram).unwrap().frames().collect()
}

fn one_frame(payload: &[u8]) -> Result<Frame<'static>, WireError> {
    // Leak to get 'static frames in the tests (tests only).
    let datagram: &'static [u8] = Box::leak(seal(HDR, payload).into_boxed_slice());
    let mut frames = Packet::parse(datagram).unwrap().frames();
    let f = frames.next().expect("one frame");
    if f.is_ok() {
        assert!(
            frames.next().is_none(),
            "more than one frame in {payload:02x?}"
        );
    } else {
        assert!(frames.next().is_none(), "not fused");
    }
    f
}

fn ack_ranges_of(f: Result<Frame<'_>, WireError>) -> Vec<RangeInclusive<u64>> {
    match f {
        Ok(Frame::Ack(a)) => a.ranges().collect(),
        other => panic!("not an ack: {other:?}"),
    }
}

// ---- header ----

#[test]
fn header_layout_and_round_trip() {
    let p = build(|_| {});
    assert_eq!(p.len(), 1 + 8 + 1 + CRC_LEN);
    assert_eq!(p.len(), MIN_PACKET_LEN);
    assert_eq!(p[0], 0x13);
    assert_eq!(&p[1..9], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(p[9], 5);
    assert_eq!(
        u32::from_le_bytes(p[10..14].try_into().unwrap()),
        crc32c(&p[..10])
    );
    let pkt = Packet::parse(&p).unwrap();
    assert_eq!(pkt.header(), HDR);
    assert!(pkt.payload().is_empty());
    assert_eq!(pkt.frames().next(), None);
    for ty in [PacketType::Initial, PacketType::Challenge, PacketType::Data] {
        for pn in [
            0,
            63,
            64,
            16_383,
            16_384,
            (1 << 30) - 1,
            1 << 30,
            VARINT_MAX,
        ] {
            for cid in [0, 1, u64::MAX, 0xdead_beef_0bad_f00d] {
                let h = Header { ty, cid, pn };
                let p = build_in(64, h, |w| assert!(w.ping()));
                assert_eq!(p.len(), 1 + 8 + varint::len(pn) + 1 + CRC_LEN);
                let pkt = Packet::parse(&p).unwrap();
                assert_eq!(pkt.header(), h);
                assert_eq!(pkt.payload(), &[FRAME_PING]);
                assert_eq!(peek_cid(&p), Some(cid));
            }
        }
    }
}

#[test]
fn peek_cid_needs_nine_bytes() {
    assert_eq!(peek_cid(&[]), None);
    assert_eq!(peek_cid(&[0x13, 1, 2, 3, 4, 5, 6, 7]), None);
    assert_eq!(peek_cid(&[0xff, 1, 0, 0, 0, 0, 0, 0, 0]), Some(1));
    assert_eq!(
        peek_cid(&[0, 0, 0, 0, 0, 0, 0, 0, 0x80, 9, 9]),
        Some(1 << 63)
    );
}

#[test]
fn parse_rejects_bad_datagrams() {
    let good = build(|w| assert!(w.ping()));
    for n in 0..MIN_PACKET_LEN {
        assert_eq!(
            Packet::parse(&good[..n]).unwrap_err(),
            WireError::Truncated,
            "len {n}"
        );
    }
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(Packet::parse(&bad_crc).unwrap_err(), WireError::BadCrc);
    // Version and type are checked after the CRC.
    let mut v2 = good[..good.len() - CRC_LEN].to_vec();
    v2[0] = 0x23;
    assert_eq!(
        Packet::parse(&reseal(&v2)).unwrap_err(),
        WireError::BadVersion(2)
    );
    v2[0] = 0x03;
    assert_eq!(
        Packet::parse(&reseal(&v2)).unwrap_err(),
        WireError::BadVersion(0)
    );
    for t in [0u8, 4, 5, 15] {
        v2[0] = VERSION << 4 | t;
        assert_eq!(
            Packet::parse(&reseal(&v2)).unwrap_err(),
            WireError::UnknownPacketType(t)
        );
    }
    // A packet number varint that runs into the CRC.
    let mut long_pn = good[..9].to_vec();
    long_pn.push(0x80);
    long_pn.push(0);
    assert_eq!(
        Packet::parse(&reseal(&long_pn)).unwrap_err(),
        WireError::BadVarint
    );
    // A non-minimal packet number is accepted.
    let mut nm = good[..9].to_vec();
    nm.extend_from_slice(&[0x40, 0x05, FRAME_PING]);
    let p = reseal(&nm);
    assert_eq!(Packet::parse(&p).unwrap().header(), HDR);
    assert_eq!(frames_of(&p), vec![Ok(Frame::Ping)]);
}

#[test]
fn display_is_one_short_lowercase_sentence() {
    let all = [
        WireError::Truncated,
        WireError::BadCrc,
        WireError::BadVersion(2),
        WireError::UnknownPacketType(9),
        WireError::UnknownFrame(0x42),
        WireError::BadVarint,
        WireError::BadAckRanges,
        WireError::StreamIdTooLarge(1 << 40),
        WireError::OffsetOverflow,
        WireError::BadUtf8,
        WireError::BufferTooSmall,
        WireError::ValueTooLarge(7),
    ];
    for e in all {
        let s = e.to_string();
        assert!(
            !s.is_empty() && !s.contains('\n') && !s.ends_with('.'),
            "{s}"
        );
        assert!(s.chars().next().unwrap().is_lowercase(), "{s}");
    }
    assert_eq!(WireError::BadCrc.to_string(), "crc32c mismatch");
    assert_eq!(
        WireError::UnknownFrame(0x42).to_string(),
        "unknown frame type 0x42"
    );
    let e: Box<dyn std::error::Error> = Box::new(WireError::BadUtf8);
    assert_eq!(e.to_string(), "close reason is not utf-8");
}

// ---- frames, byte by byte ----

#[test]
fn padding_runs() {
    assert_eq!(one_frame(&[0]), Ok(Frame::Padding(1)));
    assert_eq!(one_frame(&[0; 100]), Ok(Frame::Padding(100)));
    let p = seal(HDR, &[0, 0, 1, 0, 1, 0, 0, 0]);
    assert_eq!(
        frames_of(&p),
        vec![
            Ok(Frame::Padding(2)),
            Ok(Frame::Ping),
            Ok(Frame::Padding(1)),
            Ok(Frame::Ping),
            Ok(Frame::Padding(3))
        ]
    );
}

#[test]
fn ping_frame() {
    assert_eq!(one_frame(&[1]), Ok(Frame::Ping));
    assert_eq!(build(|w| assert!(w.ping())), seal(HDR, &[1]));
}

#[test]
fn credit_frame() {
    assert_eq!(one_frame(&[4, 0x7b, 0xbd]), Ok(Frame::Credit(15_293)));
    assert_eq!(one_frame(&[4]), Err(WireError::BadVarint));
    assert_eq!(one_frame(&[4, 0x80, 1]), Err(WireError::BadVarint));
    assert_eq!(
        build(|w| assert!(w.credit(15_293))),
        seal(HDR, &[4, 0x7b, 0xbd])
    );
    build(|w| {
        assert!(!w.credit(VARINT_MAX + 1));
        assert!(w.is_empty());
    });
}

#[test]
fn hello_frame() {
    assert_eq!(one_frame(&[7, 1]), Ok(Frame::Hello { version: 1 }));
    assert_eq!(one_frame(&[7]), Err(WireError::BadVarint));
    assert_eq!(build(|w| assert!(w.hello(1))), seal(HDR, &[7, 1]));
    build(|w| assert!(!w.hello(u64::MAX)));
}

#[test]
fn connect_frame() {
    let cookie: [u8; COOKIE_LEN] = std::array::from_fn(|i| i as u8 + 0xa0);
    let mut bytes = vec![5];
    bytes.extend_from_slice(&cookie);
    assert_eq!(one_frame(&bytes), Ok(Frame::Connect { cookie }));
    assert_eq!(build(|w| assert!(w.connect(&cookie))), seal(HDR, &bytes));
    for n in 1..bytes.len() {
        assert_eq!(
            one_frame(&bytes[..n]),
            Err(WireError::Truncated),
            "cut at {n}"
        );
    }
}

#[test]
fn cookie_frame() {
    let cookie: [u8; COOKIE_LEN] = std::array::from_fn(|i| (i * 7) as u8);
    let mut bytes = vec![8];
    bytes.extend_from_slice(&cookie);
    bytes.extend_from_slice(&[0x80, 0x01, 0x00, 0x00]); // 65536
    assert_eq!(
        one_frame(&bytes),
        Ok(Frame::Cookie {
            cookie,
            credit: 65_536
        })
    );
    assert_eq!(
        build(|w| assert!(w.cookie(&cookie, 65_536))),
        seal(HDR, &bytes)
    );
    assert_eq!(one_frame(&bytes[..5]), Err(WireError::Truncated));
    assert_eq!(one_frame(&bytes[..17]), Err(WireError::BadVarint));
    assert_eq!(one_frame(&bytes[..19]), Err(WireError::BadVarint));
    build(|w| assert!(!w.cookie(&cookie, VARINT_MAX + 1)));
}

#[test]
fn close_frame() {
    let mut bytes = vec![6, 0x40, 0x64, 5];
    bytes.extend_from_slice(b"bye \xc3\xa9"[..5].as_ref());
    // "bye " + first byte of 'é' is not UTF-8.
    assert_eq!(one_frame(&bytes), Err(WireError::BadUtf8));
    let p = build(|w| assert!(w.close(100, "bye é")));
    assert_eq!(p, seal(HDR, b"\x06\x40\x64\x06bye \xc3\xa9"));
    assert_eq!(
        frames_of(&p),
        vec![Ok(Frame::Close {
            code: 100,
            reason: "bye é"
        })]
    );
    assert_eq!(
        one_frame(&[6, 0, 0]),
        Ok(Frame::Close {
            code: 0,
            reason: ""
        })
    );
    assert_eq!(one_frame(&[6, 0, 3, b'a']), Err(WireError::Truncated));
    assert_eq!(one_frame(&[6, 0]), Err(WireError::BadVarint));
    // reason_len 1025 > 1024
    assert_eq!(
        one_frame(&[6, 0, 0x44, 0x01]),
        Err(WireError::ValueTooLarge(1025))
    );
    let mut max = vec![6, 0, 0x44, 0x00];
    max.extend_from_slice(&[b'x'; 1024]);
    assert!(
        matches!(one_frame(&max), Ok(Frame::Close { code: 0, reason }) if reason.len() == 1024)
    );
}

#[test]
fn close_truncates_reason_at_a_char_boundary() {
    let long = "é".repeat(600); // 1200 bytes, chars of 2 bytes
    let p = build(|w| assert!(w.close(1, &long)));
    let frames = frames_of(&p);
    let Ok(Frame::Close { code: 1, reason }) = frames[0] else {
        panic!("{frames:?}")
    };
    assert_eq!(reason.len(), 1024);
    let odd = format!("a{long}"); // boundary at 1024 falls inside a char
    let p = build(|w| assert!(w.close(1, &odd)));
    let frames = frames_of(&p);
    let Ok(Frame::Close { reason, .. }) = frames[0] else {
        panic!("{frames:?}")
    };
    assert_eq!(reason.len(), 1023);
    assert!(odd.starts_with(reason));
    build(|w| assert!(!w.close(VARINT_MAX + 1, "x")));
}

#[test]
fn stream_frame() {
    let p = build(|w| assert_eq!(w.stream(3, 70, b"hello"), 5));
    assert_eq!(p, seal(HDR, b"\x03\x03\x40\x46\x05hello"));
    assert_eq!(
        frames_of(&p),
        vec![Ok(Frame::Stream {
            stream: 3,
            offset: 70,
            data: b"hello"
        })]
    );
    assert_eq!(
        one_frame(b"\x03\x00\x00\x00"),
        Ok(Frame::Stream {
            stream: 0,
            offset: 0,
            data: b""
        })
    );
    assert_eq!(
        one_frame(b"\x03\x01\x00\x06hello"),
        Err(WireError::Truncated)
    );
    assert_eq!(one_frame(b"\x03\x01\x00"), Err(WireError::BadVarint));
    // stream id 2^32 (8-byte varint)
    assert_eq!(
        one_frame(b"\x03\xc0\x00\x00\x01\x00\x00\x00\x00\x00\x00"),
        Err(WireError::StreamIdTooLarge(1 << 32))
    );
    let max_id = one_frame(b"\x03\xc0\x00\x00\x00\xff\xff\xff\xff\x00\x01z");
    assert_eq!(
        max_id,
        Ok(Frame::Stream {
            stream: u32::MAX,
            offset: 0,
            data: b"z"
        })
    );
    // offset VARINT_MAX + len 1 overflows; offset VARINT_MAX + len 0 is fine.
    let mut of = vec![3, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(
        one_frame(&[&of[..], &[0]].concat()),
        Ok(Frame::Stream {
            stream: 0,
            offset: VARINT_MAX,
            data: b""
        })
    );
    of.extend_from_slice(&[1, b'x']);
    assert_eq!(one_frame(&of), Err(WireError::OffsetOverflow));
}

#[test]
fn stream_writer_fills_exactly() {
    let data = vec![0x5a; 100_000];
    for cap in MIN_PACKET_LEN..=400 {
        let mut buf = vec![0u8; cap];
        let mut w = PacketWriter::new(&mut buf, HDR).unwrap();
        let avail = w.remaining();
        let n = w.stream(7, 1_000_000, &data);
        let overhead = PacketWriter::stream_overhead(7, 1_000_000, n);
        if n == 0 {
            assert!(w.is_empty());
            assert!(avail <= PacketWriter::stream_overhead(7, 1_000_000, 1));
        } else {
            // Either everything fits, or the buffer is full (or one byte short because the
            // length varint would have to grow).
            assert_eq!(w.len(), 10 + overhead + n);
            assert!(w.remaining() <= 1, "cap {cap}: {} left", w.remaining());
            assert_eq!(overhead + n + w.remaining(), avail);
        }
        let len = w.finish();
        let f = frames_of(&buf[..len]);
        if n > 0 {
            assert_eq!(
                f,
                vec![Ok(Frame::Stream {
                    stream: 7,
                    offset: 1_000_000,
                    data: &data[..n]
                })]
            );
        } else {
            assert!(f.is_empty());
        }
    }
    // Around 63 vs 64 data bytes the length varint grows from 1 to 2 bytes. With the
    // 3 fixed bytes (type, stream 0, offset 0): room 67 = 3 + 1 + 63 is filled exactly;
    // room 68 still carries 63 bytes (64 would need 3 + 2 + 64 = 69), one byte left;
    // room 69 carries 64 with a 2-byte length.
    for (room, n, left) in [
        (66, 62, 0),
        (67, 63, 0),
        (68, 63, 1),
        (69, 64, 0),
        (70, 65, 0),
    ] {
        let mut buf = vec![0u8; 10 + room + CRC_LEN];
        let mut w = PacketWriter::new(&mut buf, HDR).unwrap();
        assert_eq!(w.remaining(), room);
        assert_eq!(w.stream(0, 0, &data), n, "room {room}");
        assert_eq!(w.remaining(), left, "room {room}");
    }
}

#[test]
fn stream_writer_limits() {
    build(|w| {
        assert_eq!(w.stream(1, 0, b""), 0);
        assert_eq!(w.stream(1, VARINT_MAX, b"x"), 0);
        assert_eq!(w.stream(1, u64::MAX, b"x"), 0);
        assert!(w.is_empty());
        // Only 2 bytes left below VARINT_MAX.
        assert_eq!(w.stream(1, VARINT_MAX - 2, b"abcdef"), 2);
    });
    assert_eq!(PacketWriter::stream_overhead(0, 0, 0), 4);
    assert_eq!(
        PacketWriter::stream_overhead(64, 16_384, 1 << 30),
        1 + 2 + 4 + 8
    );
    assert_eq!(
        PacketWriter::stream_overhead(u32::MAX, VARINT_MAX, 63),
        1 + 8 + 8 + 1
    );
}

#[test]
fn ack_frame_bytes_and_ranges() {
    // largest 100, delay 25, 2 more ranges, first range 10 → 90..=100;
    // (gap 3, len 4) → hi 85, lo 81; (gap 0, len 0) → 79..=79.
    let bytes = [2, 0x40, 100, 25, 2, 10, 3, 4, 0, 0];
    let f = one_frame(&bytes);
    let Ok(Frame::Ack(a)) = f else {
        panic!("{f:?}")
    };
    assert_eq!((a.largest, a.delay_us), (100, 25));
    assert_eq!(a.ranges().len(), 3);
    assert_eq!(
        a.ranges().collect::<Vec<_>>(),
        vec![90..=100, 81..=85, 79..=79]
    );
    // The writer emits the same frame (with the fixed 2-byte range count).
    let p = build(|w| assert_eq!(w.ack(100, 25, [90..=100, 81..=85, 79..=79].into_iter()), 3));
    assert_eq!(p, seal(HDR, &[2, 0x40, 100, 25, 0x40, 2, 10, 3, 4, 0, 0]));
    assert_eq!(frames_of(&p), vec![f]);
    // One range covering 0..=0.
    assert_eq!(ack_ranges_of(one_frame(&[2, 0, 0, 0, 0])), vec![0..=0]);
    // A range ending exactly at 0.
    assert_eq!(
        ack_ranges_of(one_frame(&[2, 5, 0, 1, 0, 0, 3])),
        vec![5..=5, 0..=3]
    );
}

#[test]
fn ack_frame_validation() {
    // first_range > largest
    assert_eq!(one_frame(&[2, 5, 0, 0, 6]), Err(WireError::BadAckRanges));
    // gap reaches below 0: lo 5, gap 4 → hi = 5 - 4 - 2 < 0
    assert_eq!(
        one_frame(&[2, 5, 0, 1, 0, 4, 0]),
        Err(WireError::BadAckRanges)
    );
    // len reaches below 0: hi = 5 - 0 - 2 = 3, len 4
    assert_eq!(
        one_frame(&[2, 5, 0, 1, 0, 0, 4]),
        Err(WireError::BadAckRanges)
    );
    // range_count 257
    assert_eq!(
        one_frame(&[2, 5, 0, 0x41, 0x01, 0]),
        Err(WireError::BadAckRanges)
    );
    // Truncations.
    let full = [2, 0x40, 100, 25, 2, 10, 3, 4, 0, 0];
    for n in 1..full.len() {
        assert_eq!(
            one_frame(&full[..n]),
            Err(WireError::BadVarint),
            "cut at {n}"
        );
    }
    // Huge values with 8-byte varints.
    let mut big = vec![2];
    big.extend_from_slice(&[0xff; 8]); // largest = VARINT_MAX
    big.extend_from_slice(&[0]); // delay
    big.extend_from_slice(&[1]); // count
    big.extend_from_slice(&[0xff; 8]); // first_range = VARINT_MAX → lo = 0
    big.extend_from_slice(&[0, 0]); // gap 0 → hi = -2
    assert_eq!(one_frame(&big), Err(WireError::BadAckRanges));
    big.truncate(big.len() - 2);
    big[10] = 0;
    assert_eq!(ack_ranges_of(one_frame(&big)), vec![0..=VARINT_MAX]);
}

#[test]
fn ack_equality_ignores_encoding() {
    // 100 does not fit a 1-byte varint (at most 63): its minimal form is 0x40 0x64.
    let minimal = seal(HDR, &[2, 0x40, 100, 0, 1, 10, 3, 4]);
    let padded = seal(HDR, &[2, 0x40, 100, 0x80, 0, 0, 0, 0x40, 1, 10, 0x40, 3, 4]);
    let parsed = frames_of(&minimal);
    assert_eq!(ack_ranges_of(parsed[0]), vec![90..=100, 81..=85]);
    assert_eq!(parsed, frames_of(&padded));
    let other = seal(HDR, &[2, 0x40, 100, 0, 1, 10, 3, 5]);
    assert!(frames_of(&other)[0].is_ok());
    assert_ne!(parsed, frames_of(&other));
    let other_delay = seal(HDR, &[2, 0x40, 100, 1, 1, 10, 3, 4]);
    assert!(frames_of(&other_delay)[0].is_ok());
    assert_ne!(parsed, frames_of(&other_delay));
}

#[test]
fn ack_writer_space_and_cap() {
    // 300 ranges of one packet each, 2 apart: 1000, 998, 996, ...
    let ranges: Vec<RangeInclusive<u64>> = (0..300).map(|i| 1000 - 2 * i..=1000 - 2 * i).collect();
    let p = build_in(4096, HDR, |w| {
        assert_eq!(w.ack(1000, 7, ranges.iter().cloned()), MAX_ACK_RANGES)
    });
    assert_eq!(
        ack_ranges_of(frames_of(&p)[0]),
        ranges[..MAX_ACK_RANGES].to_vec()
    );
    // Header 10 + ack fixed part (1 + 2 + 1 + 2 + 1 = 7) + 2 bytes per extra range.
    for cap in 10 + CRC_LEN..10 + CRC_LEN + 7 + 2 * 20 {
        let mut buf = vec![0u8; cap];
        let mut w = PacketWriter::new(&mut buf, HDR).unwrap();
        let n = w.ack(1000, 7, ranges.iter().cloned());
        let expect = if cap < 10 + CRC_LEN + 7 {
            0
        } else {
            1 + (cap - 10 - CRC_LEN - 7) / 2
        };
        assert_eq!(n, expect, "cap {cap}");
        assert_eq!(w.is_empty(), n == 0);
        let len = w.finish();
        let f = frames_of(&buf[..len]);
        if n == 0 {
            assert!(f.is_empty());
        } else {
            assert_eq!(ack_ranges_of(f[0]), ranges[..n].to_vec());
        }
    }
}

#[test]
fn ack_writer_rejects_bad_input() {
    build(|w| {
        assert_eq!(w.ack(10, 0, std::iter::empty()), 0);
        assert_eq!(w.ack(10, 0, [5..=9].into_iter()), 0); // must end at largest
        #[allow(clippy::reversed_empty_ranges)]
        let empty = 10..=9;
        assert_eq!(w.ack(10, 0, [empty].into_iter()), 0);
        assert_eq!(
            w.ack(
                VARINT_MAX + 1,
                0,
                [VARINT_MAX + 1..=VARINT_MAX + 1].into_iter()
            ),
            0
        );
        assert_eq!(w.ack(10, VARINT_MAX + 1, [10..=10].into_iter()), 0);
        assert!(w.is_empty());
    });
    // Overlapping, adjacent, ascending or empty later ranges end the frame.
    #[allow(clippy::reversed_empty_ranges)]
    let cases: [(Vec<RangeInclusive<u64>>, usize); 5] = [
        (vec![8..=10, 7..=7], 1),          // adjacent
        (vec![8..=10, 5..=8], 1),          // overlapping
        (vec![8..=10, 4..=5, 12..=13], 2), // ascending
        (vec![8..=10, 5..=4, 1..=1], 1),   // empty
        (vec![8..=10, 6..=6, 0..=4], 3),   // fine
    ];
    for (ranges, n) in cases {
        let p = build(|w| assert_eq!(w.ack(10, 0, ranges.iter().cloned()), n, "{ranges:?}"));
        assert_eq!(ack_ranges_of(frames_of(&p)[0]), ranges[..n].to_vec());
    }
}

#[test]
fn unknown_frames_and_fusing() {
    for t in [9u8, 0x10, 0x40, 0xff] {
        assert_eq!(one_frame(&[t]), Err(WireError::UnknownFrame(t)));
    }
    // An error in the middle ends the iteration.
    let p = seal(HDR, &[1, 0x09, 1, 1]);
    let mut it = Packet::parse(&p).unwrap().frames();
    assert_eq!(it.next(), Some(Ok(Frame::Ping)));
    assert_eq!(it.next(), Some(Err(WireError::UnknownFrame(9))));
    assert_eq!(it.next(), None);
    assert_eq!(it.next(), None);
}

// ---- writer ----

#[test]
fn writer_buffer_checks() {
    let mut buf = [0u8; 64];
    assert_eq!(
        PacketWriter::new(
            &mut buf,
            Header {
                pn: VARINT_MAX + 1,
                ..HDR
            }
        )
        .unwrap_err(),
        WireError::ValueTooLarge(VARINT_MAX + 1)
    );
    assert_eq!(
        PacketWriter::new(&mut buf[..13], HDR).unwrap_err(),
        WireError::BufferTooSmall
    );
    let big = Header { pn: 1 << 30, ..HDR };
    assert_eq!(
        PacketWriter::new(&mut buf[..20], big).unwrap_err(),
        WireError::BufferTooSmall
    );
    let w = PacketWriter::new(&mut buf[..21], big).unwrap();
    assert_eq!((w.len(), w.remaining(), w.is_empty()), (17, 0, true));
    assert_eq!(w.finish(), 21);
    let mut w = PacketWriter::new(&mut buf[..14], HDR).unwrap();
    assert_eq!((w.len(), w.remaining()), (10, 0));
    assert!(!w.ping());
    assert!(!w.credit(0));
    assert!(!w.hello(0));
    assert!(!w.close(0, ""));
    assert!(!w.connect(&[0; COOKIE_LEN]));
    assert!(!w.cookie(&[0; COOKIE_LEN], 0));
    assert_eq!(w.stream(0, 0, b"x"), 0);
    assert_eq!(w.ack(0, 0, [0..=0].into_iter()), 0);
    w.pad_to(1000);
    assert!(w.is_empty());
    assert_eq!(w.finish(), 14);
}

#[test]
fn frames_that_do_not_fit_write_nothing() {
    let cookie = [3u8; COOKIE_LEN];
    for room in 0..40 {
        let mut buf = vec![0xeeu8; 10 + room + CRC_LEN];
        let mut w = PacketWriter::new(&mut buf, HDR).unwrap();
        let before = w.len();
        let fits = [
            (w.credit(1 << 20), 1 + 4),
            (w.hello(1 << 40), 1 + 8),
            (w.connect(&cookie), 1 + COOKIE_LEN),
            (w.cookie(&cookie, 100), 1 + COOKIE_LEN + 2),
            (w.close(70, "abcdef"), 1 + 2 + 1 + 6),
        ];
        // Each call sees whatever the previous ones left; check the byte accounting.
        let used: usize = fits.iter().filter(|f| f.0).map(|f| f.1).sum();
        assert_eq!(w.len(), before + used, "room {room}");
        assert!(w.remaining() <= room);
        let len = w.finish();
        let n = frames_of(&buf[..len]).len();
        assert_eq!(n, fits.iter().filter(|f| f.0).count());
    }
}

#[test]
fn pad_to_and_len() {
    let p = build(|w| {
        assert!(w.is_empty());
        assert!(w.hello(1));
        assert!(!w.is_empty());
        assert_eq!(w.len(), 12);
        w.pad_to(MIN_INITIAL_SIZE);
        assert_eq!(w.len() + CRC_LEN, MIN_INITIAL_SIZE);
        w.pad_to(100); // never shrinks
        assert_eq!(w.len() + CRC_LEN, MIN_INITIAL_SIZE);
    });
    assert_eq!(p.len(), MIN_INITIAL_SIZE);
    assert_eq!(
        frames_of(&p),
        vec![
            Ok(Frame::Hello { version: 1 }),
            Ok(Frame::Padding(MIN_INITIAL_SIZE - 12 - CRC_LEN))
        ]
    );
    // Padding stops at the end of the buffer.
    let p = build_in(50, HDR, |w| w.pad_to(1 << 20));
    assert_eq!(p.len(), 50);
    assert_eq!(frames_of(&p), vec![Ok(Frame::Padding(50 - 10 - CRC_LEN))]);
}

#[test]
fn initial_and_challenge_sizes() {
    let initial = build_in(
        1500,
        Header {
            ty: PacketType::Initial,
            cid: 42,
            pn: 0,
        },
        |w| {
            assert!(w.hello(u64::from(VERSION)));
            w.pad_to(MIN_INITIAL_SIZE);
        },
    );
    let challenge = build_in(
        1500,
        Header {
            ty: PacketType::Challenge,
            cid: 42,
            pn: 0,
        },
        |w| {
            assert!(w.cookie(&[9; COOKIE_LEN], 1 << 20));
        },
    );
    assert_eq!(initial.len(), MIN_INITIAL_SIZE);
    assert!(challenge.len() * 3 < initial.len(), "no amplification");
    assert_eq!(
        Packet::parse(&challenge).unwrap().header().ty,
        PacketType::Challenge
    );
}

// ---- property tests ----

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

/// The error messages stay as they are (logs and CLOSE reasons carry them).
#[test]
fn error_messages_are_exact() {
    for (e, text) in [
        (WireError::Truncated, "packet truncated"),
        (WireError::BadCrc, "crc32c mismatch"),
        (WireError::BadVersion(2), "unsupported version 2"),
        (WireError::UnknownPacketType(9), "unknown packet type 9"),
        (WireError::UnknownFrame(0x0a), "unknown frame type 0x0a"),
        (
            WireError::BadVarint,
            "varint runs past the end of the packet",
        ),
        (WireError::BadAckRanges, "invalid ack ranges"),
        (
            WireError::StreamIdTooLarge(1 << 33),
            "stream id 8589934592 too large",
        ),
        (
            WireError::OffsetOverflow,
            "stream offset + length too large",
        ),
        (WireError::BadUtf8, "close reason is not utf-8"),
        (WireError::BufferTooSmall, "buffer too small for a packet"),
        (WireError::ValueTooLarge(7), "value 7 too large"),
    ] {
        assert_eq!(e.to_string(), text);
    }
    for (e, text) in [
        (crate::WriteError::Full, "send buffer full"),
        (crate::WriteError::Closed, "connection closed"),
        (
            crate::WriteError::Invalid,
            "stream id or offset out of range",
        ),
    ] {
        assert_eq!(e.to_string(), text);
    }
}
