//! An established connection (both sides) under hostile input: random datagrams, and packets
//! that are well formed but malicious (ACKs of packets never sent, ACK ranges that underflow,
//! stream offsets near 2^62, stream ids at or above `MAX_STREAMS`, credit going backwards,
//! long CLOSE reasons, duplicated frames, replays), injected between the honest exchanges.
//!
//! A small reference model says what each injected datagram must do to the side it reaches:
//! nothing (it does not parse, is not for this connection, or repeats a packet number), close
//! it (a frame that breaks the protocol), or leave it established. Throughout, no byte is
//! delivered twice, every delivered byte is the one sent (unless the attacker injected it), and
//! when both sides stay open the honest transfer completes in both directions.

use std::collections::HashMap;
use std::net::SocketAddr;

use proptest::prelude::*;
use socklab_rudp::rangeset::RangeSet;
use socklab_rudp::wire::{self, Frame, Header, Packet, PacketType, PacketWriter, VARINT_MAX};
use socklab_rudp::{Config, Connection, Event, Server, ServerAction, MAX_STREAMS};

const CID: u64 = 0x5eed_0000_0000_0001;
const STEP_NS: u64 = 1_000_000;
/// Bytes each side writes on its stream (client: stream 1, server: stream 2).
const TOTAL: u64 = 150_000;

fn pattern(stream: u32, offset: u64) -> u8 {
    (offset.wrapping_mul(7) ^ (offset >> 9) ^ u64::from(stream).wrapping_mul(131)) as u8
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// One end and what its application saw.
struct End {
    conn: Box<Connection>,
    stream: u32,
    written: u64,
    delivered: HashMap<u32, RangeSet>,
    /// Stream bytes the attacker injected with other content than the pattern.
    tainted: HashMap<u32, RangeSet>,
    closed: bool,
    /// Initial packets it sent (they do not use the Data packet numbers).
    initials: u64,
}

impl End {
    fn new(conn: Box<Connection>, stream: u32, initials: u64) -> End {
        End {
            conn,
            stream,
            written: 0,
            delivered: HashMap::new(),
            tainted: HashMap::new(),
            closed: false,
            initials,
        }
    }

    /// The next Data packet number this end will send.
    fn next_pn(&self) -> u64 {
        self.conn.stats().packets_sent - self.initials
    }

    fn open(&self) -> bool {
        self.conn.is_established() && !self.closed
    }

    fn write_more(&mut self) {
        let mut buf = [0u8; 4096];
        while self.written < TOTAL && self.open() {
            let n = (TOTAL - self.written).min(buf.len() as u64) as usize;
            if n > self.conn.send_space() {
                break;
            }
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = pattern(self.stream, self.written + i as u64);
            }
            self.conn
                .write(self.stream, self.written, &buf[..n])
                .unwrap();
            self.written += n as u64;
        }
    }

    /// Reads everything: never a byte twice, never a byte other than the one sent.
    fn read_all(&mut self) {
        let mut buf = vec![0u8; 8192];
        while let Some(c) = self.conn.read(&mut buf) {
            assert!(c.len > 0 && c.len <= buf.len());
            let end = c.offset + c.len as u64;
            assert!(end <= VARINT_MAX + 1);
            let added = self
                .delivered
                .entry(c.stream)
                .or_default()
                .insert(c.offset..end);
            assert_eq!(added, c.len as u64, "bytes of {c:?} delivered twice");
            let tainted = self.tainted.get(&c.stream);
            for (i, &b) in buf[..c.len].iter().enumerate() {
                let at = c.offset + i as u64;
                if !tainted.is_some_and(|t| t.contains(at)) {
                    assert_eq!(b, pattern(c.stream, at), "stream {} byte {at}", c.stream);
                }
            }
        }
        while let Some(ev) = self.conn.poll_event() {
            if let Event::Closed(_) = ev {
                assert!(!self.closed, "two Closed events");
                self.closed = true;
            }
        }
    }

    fn check_stats(&self) {
        let s = self.conn.stats();
        assert!(s.stream_bytes_sent <= self.written, "{s:?}");
        assert!(s.lost_packets <= s.packets_sent, "{s:?}");
        assert!(s.spurious_losses <= s.lost_packets, "{s:?}");
        assert!(s.retransmitted_packets <= s.data_packets_sent, "{s:?}");
        assert!(s.packets_received <= s.bytes_received, "{s:?}");
        if self.conn.all_acked() && self.written > 0 {
            assert_eq!(s.stream_bytes_sent, self.written, "acked more than sent");
        }
    }
}

struct Pair {
    client: End,
    server: End,
    endpoint: Server,
    t: u64,
    /// Honest datagrams seen, for replays: (to, bytes).
    log: Vec<(Side, Vec<u8>)>,
}

fn peer_addr() -> SocketAddr {
    "127.0.0.1:4000".parse().unwrap()
}

impl Pair {
    fn new() -> Pair {
        let t = 1_000_000_000;
        let mut endpoint = Server::new(Config::default(), [3u8; 32]);
        let mut client = Connection::client(Config::default(), CID, t);
        let mut buf = vec![0u8; 2048];
        let mut out = vec![0u8; 2048];
        let n = client.poll_transmit(t, &mut buf).unwrap();
        let ServerAction::Reply(m) = endpoint.handle_datagram(t, peer_addr(), &buf[..n], &mut out)
        else {
            panic!("no challenge")
        };
        client.handle_datagram(t + STEP_NS, &out[..m]);
        let n = client.poll_transmit(t + STEP_NS, &mut buf).unwrap();
        let ServerAction::Accept(server) =
            endpoint.handle_datagram(t + STEP_NS, peer_addr(), &buf[..n], &mut out)
        else {
            panic!("no connection")
        };
        let mut pair = Pair {
            client: End::new(Box::new(client), 1, 1),
            server: End::new(server, 2, 0),
            endpoint,
            t: t + STEP_NS,
            log: Vec::new(),
        };
        pair.client.read_all();
        pair.server.read_all();
        assert!(pair.client.open() && pair.server.open());
        pair
    }

    fn end(&mut self, side: Side) -> &mut End {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    /// Runs the honest exchange for `steps` ms (no loss, delivery within the step).
    fn pump(&mut self, steps: u32) {
        let mut buf = vec![0u8; 2048];
        for _ in 0..steps {
            self.t += STEP_NS;
            let t = self.t;
            for (from, to) in [(Side::Client, Side::Server), (Side::Server, Side::Client)] {
                self.end(from).write_more();
                self.end(from).conn.handle_timeout(t);
                let mut sent = Vec::new();
                while let Some(n) = self.end(from).conn.poll_transmit(t, &mut buf) {
                    assert!(n <= Config::default().max_datagram);
                    sent.push(buf[..n].to_vec());
                    assert!(sent.len() < 10_000, "poll_transmit never stops");
                }
                for d in sent {
                    self.end(to).conn.handle_datagram(t, &d);
                    if self.log.len() < 64 {
                        self.log.push((to, d));
                    }
                }
            }
            for side in [Side::Client, Side::Server] {
                let e = self.end(side);
                e.read_all();
                e.check_stats();
                if let Some(w) = e.conn.poll_timeout() {
                    assert!(!e.conn.is_closed());
                    // A timer in the past is run at the next step; never far in the future.
                    assert!(w <= t + 20_000_000_000, "timer {w} at {t}");
                }
            }
        }
    }

    /// Delivers an attacker's datagram to `side` and checks what the model expects.
    fn inject(&mut self, side: Side, datagram: &[u8]) {
        let t = self.t;
        let e = self.end(side);
        let expect = classify(e, datagram);
        let was_open = e.open();
        let dups = e.conn.stats().duplicate_packets;
        let invalid = e.conn.stats().invalid_datagrams;
        let credit = e.conn.peer_credit_left();
        taint(e, datagram);
        e.conn.handle_datagram(t, datagram);
        e.read_all();
        e.check_stats();
        if !was_open {
            return;
        }
        let s = e.conn.stats();
        match expect {
            Expect::Dropped => {
                assert_eq!(s.invalid_datagrams, invalid + 1);
                assert!(e.open());
            }
            Expect::Ignored => assert!(e.open()),
            Expect::Processed { fatal } => {
                if s.duplicate_packets > dups {
                    // A packet number it already has: dropped whatever it carries.
                    assert!(e.open());
                } else if fatal {
                    assert!(!e.open(), "a fatal packet left the connection open");
                    assert!(e.closed, "no Closed event");
                } else {
                    assert!(e.open(), "a harmless packet closed the connection");
                    assert!(e.conn.peer_credit_left() >= credit, "credit went backwards");
                }
            }
        }
    }

    /// Delivers a datagram to the stateless endpoint: never an amplification, never a
    /// connection without a valid cookie.
    fn inject_endpoint(&mut self, datagram: &[u8]) {
        let mut out = vec![0u8; 2048];
        match self
            .endpoint
            .handle_datagram(self.t, peer_addr(), datagram, &mut out)
        {
            ServerAction::Drop => {}
            ServerAction::Reply(n) => {
                assert!(datagram.len() >= wire::MIN_INITIAL_SIZE);
                assert!(n * 3 < datagram.len(), "reply {n} to {}", datagram.len());
            }
            ServerAction::Accept(_) => panic!("a connection without a valid cookie"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Fails the CRC or the header, or has another connection id: counted invalid.
    Dropped,
    /// Parses but is not a Data packet: an open connection ignores it.
    Ignored,
    /// A Data packet: its frames are processed unless the packet number is a duplicate.
    Processed { fatal: bool },
}

/// What a datagram must do to an open `end` (the reference model).
fn classify(end: &End, datagram: &[u8]) -> Expect {
    let Ok(p) = Packet::parse(datagram) else {
        return Expect::Dropped;
    };
    if p.header().cid != CID {
        return Expect::Dropped;
    }
    if p.header().ty != PacketType::Data {
        return Expect::Ignored;
    }
    let next_pn = end.next_pn();
    let fatal = p.frames().any(|f| match f {
        Err(_) => true,
        Ok(Frame::Ack(a)) => a.largest >= next_pn,
        Ok(Frame::Stream { stream, .. }) => stream >= MAX_STREAMS,
        Ok(Frame::Close { .. } | Frame::Hello { .. } | Frame::Cookie { .. }) => true,
        Ok(_) => false,
    });
    Expect::Processed { fatal }
}

/// Marks the stream bytes of `datagram` that differ from the pattern.
fn taint(end: &mut End, datagram: &[u8]) {
    let Ok(p) = Packet::parse(datagram) else {
        return;
    };
    for f in p.frames() {
        if let Ok(Frame::Stream {
            stream,
            offset,
            data,
        }) = f
        {
            for (i, &b) in data.iter().enumerate() {
                let at = offset + i as u64;
                if b != pattern(stream, at) {
                    end.tainted.entry(stream).or_default().insert(at..at + 1);
                }
            }
        }
    }
}

/// A frame the attacker writes with the wire writers.
#[derive(Debug, Clone)]
enum Evil {
    Ping,
    Padding(usize),
    /// ACK of packets that were sent: `largest` is taken modulo the target's next packet
    /// number; `gaps` are (gap, len) pairs below it.
    AckSent {
        largest: u64,
        delay_us: u64,
        first: u64,
        gaps: Vec<(u64, u64)>,
    },
    /// ACK whose largest packet number was never sent (next_pn + extra).
    AckNeverSent {
        extra: u64,
    },
    /// An ACK frame, raw, whose ranges go below 0 (the parser refuses it).
    AckUnderflow {
        largest: u64,
        first_over: u64,
    },
    /// Stream data (content follows the pattern unless `garble`).
    Stream {
        stream: u32,
        offset: u64,
        len: usize,
        garble: bool,
    },
    Credit(u64),
    Close {
        code: u64,
        reason: String,
    },
    Hello(u64),
    Cookie(u64),
    Connect,
}

impl Evil {
    fn write(&self, w: &mut PacketWriter<'_>, target_next_pn: u64, raw: &mut Vec<u8>) {
        match self {
            Evil::Ping => {
                w.ping();
            }
            Evil::Padding(n) => w.pad_to(w.len() + n + 4),
            Evil::AckSent {
                largest,
                delay_us,
                first,
                gaps,
            } => {
                if target_next_pn == 0 {
                    return;
                }
                let largest = largest % target_next_pn;
                let mut lo = largest - first.min(&largest);
                let mut ranges = vec![lo..=largest];
                for &(gap, len) in gaps {
                    let Some(hi) = lo.checked_sub(gap + 2) else {
                        break;
                    };
                    let Some(l) = hi.checked_sub(len) else { break };
                    ranges.push(l..=hi);
                    lo = l;
                }
                w.ack(largest, *delay_us, ranges.into_iter());
            }
            Evil::AckNeverSent { extra } => {
                let largest = (target_next_pn + extra).min(VARINT_MAX);
                w.ack(largest, 0, std::iter::once(largest / 2..=largest));
            }
            Evil::AckUnderflow {
                largest,
                first_over,
            } => {
                // type, largest, delay 0, range count 0, first range > largest.
                raw.push(2);
                push_varint(raw, *largest);
                raw.extend_from_slice(&[0, 0]);
                push_varint(raw, (largest + 1 + first_over).min(VARINT_MAX));
            }
            Evil::Stream {
                stream,
                offset,
                len,
                garble,
            } => {
                let offset = (*offset).min(VARINT_MAX - *len as u64);
                let data: Vec<u8> = (0..*len as u64)
                    .map(|i| pattern(*stream, offset + i) ^ u8::from(*garble))
                    .collect();
                w.stream(*stream, offset, &data);
            }
            Evil::Credit(v) => {
                w.credit(*v);
            }
            Evil::Close { code, reason } => {
                w.close(*code, reason);
            }
            Evil::Hello(v) => {
                w.hello(*v);
            }
            Evil::Cookie(v) => {
                w.cookie(&[9; wire::COOKIE_LEN], *v);
            }
            Evil::Connect => {
                w.connect(&[9; wire::COOKIE_LEN]);
            }
        }
    }
}

fn push_varint(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 8];
    let n = socklab_rudp::varint::write(&mut b, v).unwrap();
    out.extend_from_slice(&b[..n]);
}

/// Builds a Data packet to `target` with packet number `pn` and these frames (each once, or
/// twice with `dup`); raw frames (refused by the parser) go after the written ones.
fn build(target: &End, pn: u64, frames: &[Evil], dup: bool) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let mut raw = Vec::new();
    let next_pn = target.next_pn();
    let mut w = PacketWriter::new(
        &mut buf,
        Header {
            ty: PacketType::Data,
            cid: CID,
            pn,
        },
    )
    .unwrap();
    for f in frames {
        for _ in 0..1 + usize::from(dup) {
            f.write(&mut w, next_pn, &mut raw);
        }
    }
    let n = w.len();
    let mut body = buf[..n].to_vec();
    body.extend_from_slice(&raw);
    seal(body)
}

fn seal(mut body: Vec<u8>) -> Vec<u8> {
    let crc = socklab_rudp::crc32c::crc32c(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

#[derive(Debug, Clone)]
enum Op {
    /// Raw bytes; with `cid` the connection id is set to the connection's, with `crc` a
    /// valid CRC is appended.
    Raw {
        to: Side,
        bytes: Vec<u8>,
        cid: bool,
        crc: bool,
    },
    /// A packet built from evil frames. `pn`: `Err(i)` reuses an old packet number (i modulo
    /// the peer's next one), `Ok(n)` a fresh, large one.
    Packet {
        to: Side,
        pn: Result<u64, u64>,
        frames: Vec<Evil>,
        dup: bool,
    },
    /// An honest datagram seen earlier, again.
    Replay { index: usize },
    /// Bytes to the stateless endpoint.
    Endpoint { bytes: Vec<u8>, crc: bool },
    /// The honest exchange goes on for this many ms.
    Pump(u32),
}

fn varint_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..64,
        0u64..20_000,
        (1u64 << 30) - 2..(1 << 30) + 2,
        VARINT_MAX - 10..=VARINT_MAX,
        0..=VARINT_MAX,
    ]
}

/// Attacker frames; the harmless ones weigh more, so that many cases keep both ends open and
/// the final check (everything arrives) runs.
fn evil() -> impl Strategy<Value = Evil> {
    let stream_id = prop_oneof![
        4 => Just(1u32),
        4 => Just(2u32),
        4 => 0u32..64,
        4 => 0..MAX_STREAMS,
        1 => MAX_STREAMS - 1..=MAX_STREAMS + 1,
        1 => any::<u32>(),
    ];
    prop_oneof![
        3 => Just(Evil::Ping),
        2 => (1usize..50).prop_map(Evil::Padding),
        6 => (
            any::<u64>(),
            0u64..1 << 20,
            prop_oneof![0u64..4, 0u64..1000, any::<u64>()],
            proptest::collection::vec((0u64..50, 0u64..50), 0..20)
        )
            .prop_map(|(largest, delay_us, first, gaps)| Evil::AckSent {
                largest,
                delay_us,
                first,
                gaps
            }),
        1 => prop_oneof![0u64..3, varint_value()].prop_map(|extra| Evil::AckNeverSent { extra }),
        1 => (varint_value(), 0u64..100)
            .prop_map(|(largest, first_over)| Evil::AckUnderflow { largest, first_over }),
        6 => (
            stream_id,
            prop_oneof![0u64..TOTAL, VARINT_MAX - 2000..=VARINT_MAX, varint_value()],
            0usize..600,
            any::<bool>()
        )
            .prop_map(|(stream, offset, len, garble)| Evil::Stream {
                stream,
                offset,
                len,
                garble
            }),
        3 => varint_value().prop_map(Evil::Credit),
        1 => (varint_value(), 0usize..1100).prop_map(|(code, n)| Evil::Close {
            code,
            reason: "é".repeat(n / 2) + &"x".repeat(n % 2)
        }),
        1 => varint_value().prop_map(Evil::Hello),
        1 => varint_value().prop_map(Evil::Cookie),
        2 => Just(Evil::Connect),
    ]
}

fn side() -> impl Strategy<Value = Side> {
    prop_oneof![Just(Side::Client), Just(Side::Server)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (side(), proptest::collection::vec(any::<u8>(), 0..300), any::<bool>(), any::<bool>())
            .prop_map(|(to, bytes, cid, crc)| Op::Raw { to, bytes, cid, crc }),
        6 => (
            side(),
            prop_oneof![4 => any::<u64>().prop_map(Err), 1 => ((1u64 << 30)..=VARINT_MAX).prop_map(Ok)],
            proptest::collection::vec(evil(), 1..4),
            any::<bool>()
        )
            .prop_map(|(to, pn, frames, dup)| Op::Packet { to, pn, frames, dup }),
        1 => any::<usize>().prop_map(|index| Op::Replay { index }),
        1 => (proptest::collection::vec(any::<u8>(), 0..1400), any::<bool>())
            .prop_map(|(bytes, crc)| Op::Endpoint { bytes, crc }),
        2 => (1u32..40).prop_map(Op::Pump),
    ]
}

fn run(ops: &[Op]) {
    let mut pair = Pair::new();
    pair.pump(20);
    for op in ops {
        match op {
            Op::Raw {
                to,
                bytes,
                cid,
                crc,
            } => {
                let mut b = bytes.clone();
                if *cid && b.len() >= 9 {
                    b[1..9].copy_from_slice(&CID.to_le_bytes());
                    // A valid version and type nibble half of the time.
                    if b[0] & 1 == 0 {
                        b[0] = wire::VERSION << 4 | PacketType::Data as u8;
                    }
                }
                let b = if *crc { seal(b) } else { b };
                pair.inject(*to, &b);
            }
            Op::Packet {
                to,
                pn,
                frames,
                dup,
            } => {
                let peer = match to {
                    Side::Client => Side::Server,
                    Side::Server => Side::Client,
                };
                let pn = match *pn {
                    Ok(fresh) => fresh,
                    // A number the peer already used (one it has yet to use would make the
                    // target drop the honest packet as a duplicate: undetectable without
                    // cryptography, and not what this test is about).
                    Err(i) => i % pair.end(peer).next_pn().max(1),
                };
                let d = build(pair.end(*to), pn, frames, *dup);
                pair.inject(*to, &d);
            }
            Op::Replay { index } => {
                if !pair.log.is_empty() {
                    let (to, d) = pair.log[index % pair.log.len()].clone();
                    pair.inject(to, &d);
                }
            }
            Op::Endpoint { bytes, crc } => {
                let b = if *crc {
                    seal(bytes.clone())
                } else {
                    bytes.clone()
                };
                pair.inject_endpoint(&b);
            }
            Op::Pump(n) => pair.pump(*n),
        }
    }
    // The honest exchange goes on: if both sides are still open, everything arrives.
    pair.pump(3_000);
    if pair.client.open() && pair.server.open() {
        for (from, to) in [(&pair.client, &pair.server), (&pair.server, &pair.client)] {
            assert_eq!(from.written, TOTAL);
            assert!(from.conn.all_acked(), "not all acked");
            let got = to.delivered.get(&from.stream).cloned().unwrap_or_default();
            assert!(got.covers(0..TOTAL), "stream {} incomplete", from.stream);
        }
    } else {
        // A side that closed tells the other, which closes too (or times out).
        pair.pump(12_000);
        assert!(pair.client.conn.is_closed() && pair.server.conn.is_closed());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hostile_input_never_breaks_an_established_connection(
        ops in proptest::collection::vec(op(), 1..12)
    ) {
        run(&ops);
    }
}

/// Without an attacker the harness transfers everything (so the checks above mean something).
#[test]
fn the_honest_exchange_completes() {
    run(&[]);
}

#[test]
fn an_ack_of_a_packet_never_sent_closes_with_a_protocol_violation() {
    for side in [Side::Client, Side::Server] {
        let mut pair = Pair::new();
        pair.pump(5);
        let t = pair.t;
        let target = pair.end(side);
        let next = target.next_pn();
        let d = build(target, 1 << 40, &[Evil::AckNeverSent { extra: 0 }], false);
        target.conn.handle_datagram(t, &d);
        let mut violation = false;
        while let Some(ev) = target.conn.poll_event() {
            if let Event::Closed(socklab_rudp::CloseReason::ProtocolViolation(why)) = ev {
                assert!(why.contains(&format!("{next}")), "{why}");
                violation = true;
            }
        }
        assert!(violation, "{side:?}");
    }
}

#[test]
fn duplicated_stream_frames_are_delivered_once() {
    let mut pair = Pair::new();
    pair.pump(5);
    let frames = [Evil::Stream {
        stream: 7,
        offset: VARINT_MAX - 100,
        len: 100,
        garble: false,
    }];
    let d = build(&pair.server, 1 << 40, &frames, true);
    pair.inject(Side::Server, &d);
    pair.inject(Side::Server, &build(&pair.server, 1 << 41, &frames, true));
    let got = pair.server.delivered.get(&7).cloned().unwrap_or_default();
    assert_eq!(got.total(), 100);
    assert_eq!(pair.server.conn.stats().duplicate_stream_bytes, 300);
}
