//! Each frame type, byte by byte: its encoding, the writer's limits, and what the parser refuses.

use super::*;

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
