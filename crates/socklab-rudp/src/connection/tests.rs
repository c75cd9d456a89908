//! Receive-side tests that look inside the connection (per-stream state, reassembly) and the
//! exact messages of the settings check.

use super::*;
use crate::{crc32c::crc32c, varint};

#[test]
fn empty_stream_frames_leave_no_per_stream_state() {
    let mut conn = Connection::server(Config::default(), 5, 0);
    for pn in 0..50u64 {
        // Header, then 100 empty STREAM frames (type, stream id, offset 0, length 0) to
        // distinct streams (no writer method emits an empty one), then the CRC.
        let mut p = vec![wire::VERSION << 4 | PacketType::Data as u8];
        p.extend_from_slice(&5u64.to_le_bytes());
        p.push(pn as u8);
        for i in 0..100u64 {
            let mut v = [0u8; 8];
            let n = varint::write(&mut v, pn * 100 + i).unwrap();
            p.push(0x03);
            p.extend_from_slice(&v[..n]);
            p.extend_from_slice(&[0, 0]);
        }
        let crc = crc32c(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        conn.handle_datagram(1_000, &p);
    }
    assert_eq!(conn.stats().packets_received, 50);
    assert!(conn.is_established());
    assert!(conn.recv_streams.is_empty());
    assert_eq!(conn.stats().stream_bytes_received, 0);
}

/// One-byte frames in descending order with gaps between them: each is delivered once and
/// kept as its own range (in a `RangeMap`, so each insert is O(log n), not a shift of every
/// range above it: with the `Vec`-backed `RangeSet` 3000 such packets took 75 s).
#[test]
fn descending_fragments_are_delivered_once() {
    let mut conn = Connection::server(Config::default(), 5, 0);
    let mut offset = 1u64 << 40;
    let mut frames = 0u64;
    for pn in 0..200u64 {
        let mut buf = vec![0u8; 1472];
        let mut w = PacketWriter::new(
            &mut buf,
            Header {
                ty: PacketType::Data,
                cid: 5,
                pn,
            },
        )
        .unwrap();
        while w.remaining() > 12 {
            offset -= 2;
            assert_eq!(w.stream(1, offset, &[(offset % 251) as u8]), 1);
            frames += 1;
        }
        // The same frame again: a duplicate, not delivered.
        w.stream(1, offset, &[(offset % 251) as u8]);
        let n = w.finish();
        conn.handle_datagram(1_000 + pn, &buf[..n]);
    }
    assert!(conn.is_established());
    assert_eq!(conn.recv_streams[&1].range_count() as u64, frames);
    assert_eq!(conn.stats().stream_bytes_received, frames);
    let mut got = 0u64;
    let mut b = [0u8; 16];
    while let Some(c) = conn.read(&mut b) {
        assert_eq!((c.stream, c.len), (1, 1));
        assert_eq!(b[0], (c.offset % 251) as u8);
        assert_eq!(c.offset, (1u64 << 40) - 2 * (got + 1));
        got += 1;
    }
    assert_eq!(got, frames);
}

/// Each refused setting keeps its exact message (callers print it).
#[test]
fn config_errors_keep_their_messages() {
    let err = |f: fn(&mut Config)| {
        let mut c = Config::default();
        f(&mut c);
        c.validate().unwrap_err().to_string()
    };
    assert!(Config::default().validate().is_ok());
    assert_eq!(
        err(|c| c.max_datagram = 1199),
        "max datagram 1199 bytes is outside 1200..=65507"
    );
    assert_eq!(
        err(|c| c.max_datagram = 65_508),
        "max datagram 65508 bytes is outside 1200..=65507"
    );
    assert_eq!(
        err(|c| c.send_buffer = 1000),
        "receive window and send buffer must be at least 64 KiB"
    );
    assert_eq!(
        err(|c| c.ack_every = 0),
        "ack_every and initial_window_packets must be at least 1"
    );
    assert_eq!(
        err(|c| c.initial_rtt_ns = 0),
        "idle timeout must be at least 1 ms and the initial RTT positive"
    );
}
