//! Tests of the packet format: the header, the writer, the error messages, and the helpers the
//! frame and property tests share.

use super::*;
use proptest::prelude::*;

mod frames;
mod props;

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
