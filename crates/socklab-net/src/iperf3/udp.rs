//! iperf3's UDP streams, sans I/O: the "connect" datagram and its reply, the header every
//! data datagram starts with, the receiver's accounting (lost, out of order, RFC 1889 jitter)
//! from a header and the arrival time the caller passes in, and the table that tells the
//! streams of all tests apart by the peer's address.
//!
//! Learnt from iperf3's public source (esnet/iperf `src/iperf_udp.c` at tag 3.12:
//! `iperf_udp_recv`, `iperf_udp_send`, `iperf_udp_accept`, `iperf_udp_connect`; `src/iperf.h`:
//! `UDP_CONNECT_MSG`, `UDP_CONNECT_REPLY`, `MIN_UDP_BLOCKSIZE`, `MAX_UDP_BLOCKSIZE`) and from
//! Debian's iperf3 3.12 on loopback (strace); notes in docs/interop.md, "iperf3 UDP". The code
//! is ours.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::proto::Cookie;

/// UDP streams of all tests together, connected or reserved.
pub const MAX_STREAMS: usize = 256;

/// The connect datagram of a 3.x client: the integer 0x36373839 in the client's byte order,
/// so "9876" from a little-endian client (seen on the wire), "6789" from a big-endian one.
const CONNECT: u32 = 0x3637_3839;
/// The reply: 0x39383736 in the client's byte order.
const CONNECT_REPLY: u32 = 0x3938_3736;
/// What iperf3 before 3.1 sent (`123456789`) and answered (`987654321`); 3.12 clients accept
/// either reply.
const LEGACY_CONNECT: u32 = 123_456_789;
const LEGACY_REPLY: u32 = 987_654_321;

/// The reply to `datagram` when it is a connect datagram (4 bytes, one of the values above in
/// either byte order), in the byte order the client used: the client compares it with its
/// own integer. `None` for any other datagram.
pub fn connect_reply(datagram: &[u8]) -> Option<[u8; 4]> {
    let b: [u8; 4] = datagram.try_into().ok()?;
    for (ask, answer) in [(CONNECT, CONNECT_REPLY), (LEGACY_CONNECT, LEGACY_REPLY)] {
        if b == ask.to_le_bytes() {
            return Some(answer.to_le_bytes());
        }
        if b == ask.to_be_bytes() {
            return Some(answer.to_be_bytes());
        }
    }
    None
}

/// The header every data datagram starts with, big-endian: seconds and microseconds of the
/// sender's clock (3.12: `CLOCK_MONOTONIC`) when it sent, and the datagram's number, counted
/// from 1 per stream, 32 bits or, with `udp_counters_64bit`, 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Seconds of the send time.
    pub sec: u32,
    /// Microseconds of the send time.
    pub usec: u32,
    /// The datagram's number in its stream (from 1).
    pub count: u64,
}

impl Header {
    /// Bytes of the header: 12, or 16 with 64-bit counters.
    pub fn len(wide: bool) -> usize {
        if wide {
            16
        } else {
            12
        }
    }

    /// The header at the start of `datagram`; `Err` when it is too short.
    pub fn parse(datagram: &[u8], wide: bool) -> Result<Header, String> {
        let need = Header::len(wide);
        if datagram.len() < need {
            return Err(format!(
                "iperf3 UDP datagram of {} bytes: its header is {need}",
                datagram.len()
            ));
        }
        let word = |i: usize| {
            u32::from_be_bytes([
                datagram[i],
                datagram[i + 1],
                datagram[i + 2],
                datagram[i + 3],
            ])
        };
        let count = if wide {
            u64::from(word(8)) << 32 | u64::from(word(12))
        } else {
            u64::from(word(8))
        };
        Ok(Header {
            sec: word(0),
            usec: word(4),
            count,
        })
    }

    /// Writes the header at the start of `out` (at least [`Header::len`] bytes); a 32-bit
    /// counter keeps the low 32 bits, as iperf3's does.
    pub fn write(&self, out: &mut [u8], wide: bool) {
        out[0..4].copy_from_slice(&self.sec.to_be_bytes());
        out[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if wide {
            out[8..16].copy_from_slice(&self.count.to_be_bytes());
        } else {
            out[8..12].copy_from_slice(&(self.count as u32).to_be_bytes());
        }
    }

    /// A header stamped `since` (the sender's clock from any fixed start) with number `count`.
    pub fn at(since: std::time::Duration, count: u64) -> Header {
        Header {
            sec: since.as_secs() as u32,
            usec: since.subsec_micros(),
            count,
        }
    }

    /// The stamp in seconds.
    pub fn secs(&self) -> f64 {
        f64::from(self.sec) + f64::from(self.usec) / 1e6
    }

    /// The send time in microseconds.
    fn micros(&self) -> i64 {
        i64::from(self.sec) * 1_000_000 + i64::from(self.usec)
    }
}

/// One receiving stream's figures, as iperf3's receiver keeps them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Receiver {
    /// Bytes of the datagrams counted.
    pub bytes: u64,
    /// Datagrams counted.
    pub datagrams: u64,
    /// The highest datagram number seen: what iperf3 reports as the receiver's `packets`.
    pub highest: u64,
    /// Lost (`errors`): each gap in the numbers counts its missing datagrams, and each
    /// datagram that arrives late (out of order) takes one back.
    pub lost: u64,
    /// Datagrams that came with a number not above the highest seen.
    pub out_of_order: u64,
    /// Smoothed jitter in seconds (RFC 1889, 6.3.1 and A.8: `J += (|D| - J) / 16`).
    pub jitter: f64,
    /// Transit time of the previous datagram, µs (arrival on our clock minus send time on
    /// the sender's; only differences count, so the clocks need no sync).
    prev_transit: Option<i64>,
    /// Our clock's origin for transit times: the first arrival.
    base: Option<Instant>,
    /// When the last datagram counted arrived.
    pub last: Option<Instant>,
}

impl Receiver {
    /// Counts a datagram of `len` bytes with header `h` that arrived at `arrival`.
    pub fn datagram(&mut self, arrival: Instant, len: usize, h: &Header) {
        self.bytes = self.bytes.saturating_add(len as u64);
        self.datagrams = self.datagrams.saturating_add(1);
        if h.count > self.highest {
            // Forward; a gap is that many lost (until they turn up late).
            self.lost = self.lost.saturating_add(h.count - self.highest - 1);
            self.highest = h.count;
        } else {
            self.out_of_order = self.out_of_order.saturating_add(1);
            self.lost = self.lost.saturating_sub(1);
        }
        let base = *self.base.get_or_insert(arrival);
        let since = match arrival.checked_duration_since(base) {
            Some(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
            None => -i64::try_from(base.duration_since(arrival).as_micros()).unwrap_or(i64::MAX),
        };
        let transit = since.saturating_sub(h.micros());
        let prev = *self.prev_transit.get_or_insert(transit);
        let d = transit.saturating_sub(prev).unsigned_abs() as f64 / 1e6;
        self.jitter += (d - self.jitter) / 16.0;
        self.prev_transit = Some(transit);
        self.last = Some(arrival);
    }
}

/// Datagrams and bytes counted apart from every test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Apart {
    /// Datagrams.
    pub datagrams: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Apart {
    fn add(&mut self, len: usize) {
        self.datagrams = self.datagrams.saturating_add(1);
        self.bytes = self.bytes.saturating_add(len as u64);
    }
}

/// What a datagram was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Counted into its stream.
    Counted,
    /// The first connect datagram of a new stream of `test`: ask the test for the stream's id,
    /// then [`Table::confirm`] (and send `reply`) or [`Table::unbind`].
    Joined {
        /// The test.
        test: Cookie,
        /// What to send back once confirmed.
        reply: [u8; 4],
    },
    /// A connect datagram again from a stream already confirmed: send `reply` again.
    Reply([u8; 4]),
    /// From a stream of a test, but not a data datagram of a running receiving test (early,
    /// late, too short, or for a stream the sink sends on): counted apart.
    Late,
    /// From no stream of any test: counted apart.
    Stranger,
}

/// Why a test cannot open for its UDP streams now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Busy {
    /// Another test from the same client address is connecting its UDP streams: the connect
    /// datagram carries no cookie, so two such tests could not be told apart. Wait.
    SameAddress,
    /// The streams would exceed [`MAX_STREAMS`] (`in_use` are taken).
    Full {
        /// Streams taken now.
        in_use: usize,
    },
}

#[derive(Debug)]
struct TestEntry {
    /// The client's address, as its control connection came from.
    ip: IpAddr,
    /// Streams it asked for (reserved).
    want: u32,
    /// Streams bound to it (by their first connect datagram), in order.
    peers: Vec<SocketAddr>,
    /// 64-bit counters.
    wide: bool,
    /// The sink sends on its streams.
    reverse: bool,
    /// Counting (between start and stop).
    running: bool,
}

#[derive(Debug)]
struct StreamEntry {
    test: Cookie,
    /// The id the test gave it, once confirmed.
    id: Option<i64>,
    rx: Receiver,
}

/// The UDP streams of all tests, keyed by the peer's address (IP and port): each stream is one
/// client socket, bound to its test by its first connect datagram.
#[derive(Debug, Default)]
pub struct Table {
    tests: HashMap<Cookie, TestEntry>,
    streams: HashMap<SocketAddr, StreamEntry>,
    /// Datagrams from no stream.
    pub strangers: Apart,
    /// Datagrams from a stream but outside its test's counting.
    pub late: Apart,
}

/// The address an IPv4 client has on a dual-stack socket, made plain (`::ffff:a.b.c.d` is
/// `a.b.c.d`), so a control connection and its streams compare equal.
fn plain(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

impl Table {
    /// Whether no test is open.
    pub fn is_empty(&self) -> bool {
        self.tests.is_empty()
    }

    /// Streams reserved by all tests (each test reserves what it asked for).
    pub fn reserved(&self) -> usize {
        self.tests.values().map(|t| t.want as usize).sum()
    }

    fn connecting(t: &TestEntry) -> bool {
        !t.running && t.peers.len() < t.want as usize
    }

    /// Opens `test` (from `client`, wanting `want` streams) to its connect datagrams: it
    /// reserves the streams. Call before sending `CREATE_STREAMS`.
    pub fn open(
        &mut self,
        test: Cookie,
        client: IpAddr,
        want: u32,
        wide: bool,
        reverse: bool,
    ) -> Result<(), Busy> {
        let ip = plain(client);
        if self
            .tests
            .iter()
            .any(|(c, t)| *c != test && t.ip == ip && Table::connecting(t))
        {
            return Err(Busy::SameAddress);
        }
        let in_use = self.reserved();
        if in_use + want as usize > MAX_STREAMS {
            return Err(Busy::Full { in_use });
        }
        self.tests.insert(
            test,
            TestEntry {
                ip,
                want,
                peers: Vec::new(),
                wide,
                reverse,
                running: false,
            },
        );
        Ok(())
    }

    /// Whether `test` has all its streams (or is not open).
    pub fn complete(&self, test: &Cookie) -> bool {
        self.tests.get(test).is_none_or(|t| !Table::connecting(t))
    }

    /// A datagram of `len` bytes (`datagram`, at least its first bytes) from `peer` at `now`.
    pub fn datagram(&mut self, now: Instant, peer: SocketAddr, datagram: &[u8]) -> Verdict {
        let len = datagram.len();
        if let Some(s) = self.streams.get_mut(&peer) {
            let t = self.tests.get(&s.test);
            let reply = connect_reply(datagram);
            match t {
                Some(t) if t.running && !t.reverse => {
                    if let Ok(h) = Header::parse(datagram, t.wide) {
                        s.rx.datagram(now, len, &h);
                        return Verdict::Counted;
                    }
                }
                Some(t) if !t.running && s.id.is_some() => {
                    if let Some(r) = reply {
                        return Verdict::Reply(r);
                    }
                }
                _ => {}
            }
            self.late.add(len);
            return Verdict::Late;
        }
        if let Some(reply) = connect_reply(datagram) {
            let ip = plain(peer.ip());
            let found = self
                .tests
                .iter_mut()
                .find(|(_, t)| t.ip == ip && Table::connecting(t));
            if let Some((cookie, t)) = found {
                t.peers.push(peer);
                let test = *cookie;
                self.streams.insert(
                    peer,
                    StreamEntry {
                        test,
                        id: None,
                        rx: Receiver::default(),
                    },
                );
                return Verdict::Joined { test, reply };
            }
        }
        self.strangers.add(len);
        Verdict::Stranger
    }

    /// The test took the stream from `peer` as its stream `id`.
    pub fn confirm(&mut self, peer: SocketAddr, id: i64) {
        if let Some(s) = self.streams.get_mut(&peer) {
            s.id = Some(id);
        }
    }

    /// The test refused the stream from `peer`: it is a stranger.
    pub fn unbind(&mut self, peer: SocketAddr) {
        if let Some(s) = self.streams.remove(&peer) {
            if let Some(t) = self.tests.get_mut(&s.test) {
                t.peers.retain(|p| *p != peer);
            }
        }
    }

    /// `test` starts: its receiving streams count from now. Its streams, `(id, peer)` in
    /// order (those a sending test sends to).
    pub fn start(&mut self, test: &Cookie) -> Vec<(i64, SocketAddr)> {
        let Some(t) = self.tests.get_mut(test) else {
            return Vec::new();
        };
        t.running = true;
        t.peers
            .iter()
            .filter_map(|p| Some((self.streams.get(p)?.id?, *p)))
            .collect()
    }

    /// `test` stops counting; its streams' figures, `(id, figures)` in order. Datagrams that
    /// come later from them are counted apart (late).
    pub fn stop(&mut self, test: &Cookie) -> Vec<(i64, Receiver)> {
        let Some(t) = self.tests.get_mut(test) else {
            return Vec::new();
        };
        t.running = false;
        t.want = t.peers.len() as u32;
        t.peers
            .iter()
            .filter_map(|p| {
                let s = self.streams.get(p)?;
                Some((s.id?, s.rx.clone()))
            })
            .collect()
    }

    /// `test` is over: its streams and reservation go.
    pub fn forget(&mut self, test: &Cookie) {
        if let Some(t) = self.tests.remove(test) {
            for p in t.peers {
                self.streams.remove(&p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cookie(c: u8) -> Cookie {
        Cookie([c; 36])
    }

    fn at(t0: Instant, us: u64) -> Instant {
        t0 + Duration::from_micros(us)
    }

    fn hdr(count: u64, sent_us: u64) -> Header {
        Header {
            sec: (sent_us / 1_000_000) as u32,
            usec: (sent_us % 1_000_000) as u32,
            count,
        }
    }

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn the_connect_datagram_is_answered_in_the_clients_byte_order() {
        // Seen on the wire from Debian's 3.12 (little-endian): "9876", answered "6789".
        assert_eq!(connect_reply(b"9876"), Some(*b"6789"));
        assert_eq!(
            connect_reply(b"6789"),
            Some(*b"9876"),
            "a big-endian client"
        );
        assert_eq!(
            connect_reply(&123_456_789u32.to_le_bytes()),
            Some(987_654_321u32.to_le_bytes())
        );
        assert_eq!(connect_reply(b"98765"), None);
        assert_eq!(connect_reply(b"abcd"), None);
        assert_eq!(connect_reply(b""), None);
    }

    #[test]
    fn headers_of_32_and_64_bit_counters_parse_and_write_back() {
        // The first datagram 3.12 sent for `-u -b 1M -P 2`: sec 0x783e, usec 0x8385d, count 1.
        let d = [0, 0, 0x78, 0x3e, 0, 8, 0x38, 0x5d, 0, 0, 0, 1, 0xbb, 0xf0];
        let h = Header::parse(&d, false).unwrap();
        assert_eq!(
            h,
            Header {
                sec: 0x783e,
                usec: 0x8385d,
                count: 1
            }
        );
        let wide = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4];
        let h = Header::parse(&wide, true).unwrap();
        assert_eq!(h.count, (3 << 32) | 4);
        let mut out = [0u8; 16];
        h.write(&mut out, true);
        assert_eq!(out, wide);
        h.write(&mut out, false);
        assert_eq!(
            &out[8..12],
            &[0, 0, 0, 4],
            "a 32-bit counter keeps the low bits"
        );
        let why = Header::parse(&wide[..12], true).unwrap_err();
        assert_eq!(why, "iperf3 UDP datagram of 12 bytes: its header is 16");
        assert!(Header::parse(&d[..11], false).is_err());
    }

    #[test]
    fn gaps_count_as_lost_and_late_datagrams_take_them_back() {
        let t0 = Instant::now();
        let mut r = Receiver::default();
        for (i, n) in [1u64, 2, 5, 3, 6, 6].iter().enumerate() {
            r.datagram(at(t0, i as u64 * 1000), 100, &hdr(*n, i as u64 * 1000));
        }
        // 5 after 2: 3 and 4 lost; 3 turns up late: one back; 6 twice: the second is "late".
        assert_eq!(r.highest, 6);
        assert_eq!(r.lost, 0);
        assert_eq!(r.out_of_order, 2);
        assert_eq!((r.datagrams, r.bytes), (6, 600));
        let mut r = Receiver::default();
        r.datagram(t0, 10, &hdr(4, 0));
        assert_eq!(r.lost, 3, "the numbers start at 1");
        // A forged number cannot overflow the counts.
        r.datagram(t0, 10, &hdr(u64::MAX, 0));
        assert_eq!(r.lost, u64::MAX - 2);
        r.datagram(t0, 10, &hdr(u64::MAX, 0));
        assert_eq!(r.highest, u64::MAX);
    }

    #[test]
    fn jitter_follows_rfc_1889_on_transit_differences() {
        let t0 = Instant::now();
        let mut r = Receiver::default();
        // Sent every 1000 µs; all arrive with the same transit: no jitter.
        for i in 0..10u64 {
            r.datagram(
                at(t0, i * 1000 + 50),
                1000,
                &hdr(i + 1, 7_000_000 + i * 1000),
            );
        }
        assert_eq!(r.jitter, 0.0);
        // One arrives 160 µs late: |D| = 160 µs, J = 160/16 µs = 10 µs; the next is back
        // on time, |D| = 160 µs again: J = 10 + (160 - 10)/16 = 19.375 µs.
        r.datagram(at(t0, 10_000 + 50 + 160), 1000, &hdr(11, 7_010_000));
        assert!((r.jitter - 10e-6).abs() < 1e-12, "{}", r.jitter);
        r.datagram(at(t0, 11_000 + 50), 1000, &hdr(12, 7_011_000));
        assert!((r.jitter - 19.375e-6).abs() < 1e-12, "{}", r.jitter);
        // The first datagram sets the transit; its own D is 0.
        let mut r = Receiver::default();
        r.datagram(at(t0, 5), 10, &hdr(1, 123_456_789));
        assert_eq!(r.jitter, 0.0);
        // A sender clock far ahead of ours (a negative transit) changes nothing.
        let mut r = Receiver::default();
        r.datagram(at(t0, 0), 10, &hdr(1, 4_000_000_000_000_000));
        r.datagram(at(t0, 1000 + 160), 10, &hdr(2, 4_000_000_000_001_000));
        assert!((r.jitter - 10e-6).abs() < 1e-12, "{}", r.jitter);
        // Arrival times passed out of order (two threads) do not panic.
        r.datagram(t0, 10, &hdr(3, 0));
        assert!(r.jitter.is_finite());
    }

    #[test]
    fn streams_are_bound_to_the_open_test_of_their_address_and_strangers_kept_apart() {
        let t0 = Instant::now();
        let mut t = Table::default();
        let (a, b) = (cookie(b'a'), cookie(b'b'));
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        // A datagram before any test opened: a stranger, even a connect datagram.
        assert_eq!(t.datagram(t0, peer(1000), b"9876"), Verdict::Stranger);
        t.open(a, "::ffff:127.0.0.1".parse().unwrap(), 2, false, false)
            .unwrap();
        // A second test from the same address waits until the first has its streams.
        assert_eq!(t.open(b, lo, 1, false, false), Err(Busy::SameAddress));
        // Only a connect datagram binds; data from an unknown port is a stranger.
        assert_eq!(t.datagram(t0, peer(2000), &[0; 100]), Verdict::Stranger);
        assert_eq!(
            t.datagram(t0, peer(1001), b"9876"),
            Verdict::Joined {
                test: a,
                reply: *b"6789"
            }
        );
        t.confirm(peer(1001), 1);
        assert_eq!(
            t.datagram(t0, peer(1001), b"9876"),
            Verdict::Reply(*b"6789")
        );
        assert!(!t.complete(&a));
        assert_eq!(
            t.datagram(t0, peer(1002), b"9876"),
            Verdict::Joined {
                test: a,
                reply: *b"6789"
            }
        );
        t.confirm(peer(1002), 3);
        assert!(t.complete(&a));
        // Complete: a third connect datagram is a stranger's, and b may open now.
        assert_eq!(t.datagram(t0, peer(1003), b"9876"), Verdict::Stranger);
        t.open(b, lo, 1, true, false).unwrap();
        // Data before the start is counted apart.
        assert_eq!(t.datagram(t0, peer(1001), &[0; 100]), Verdict::Late);
        assert_eq!(t.start(&a), vec![(1, peer(1001)), (3, peer(1002))]);
        let mut d = [0u8; 100];
        hdr(1, 0).write(&mut d, false);
        assert_eq!(t.datagram(t0, peer(1001), &d), Verdict::Counted);
        assert_eq!(
            t.datagram(t0, peer(1001), &d[..8]),
            Verdict::Late,
            "too short"
        );
        let figs = t.stop(&a);
        assert_eq!(figs.len(), 2);
        assert_eq!((figs[0].0, figs[0].1.bytes, figs[0].1.highest), (1, 100, 1));
        assert_eq!((figs[1].0, figs[1].1.bytes), (3, 0));
        assert_eq!(
            t.datagram(t0, peer(1001), &d),
            Verdict::Late,
            "after the stop"
        );
        assert_eq!(
            t.strangers,
            Apart {
                datagrams: 3,
                bytes: 108
            }
        );
        assert_eq!(
            t.late,
            Apart {
                datagrams: 3,
                bytes: 208
            }
        );
        t.forget(&a);
        assert_eq!(t.datagram(t0, peer(1001), &d), Verdict::Stranger);
        assert_eq!(t.reserved(), 1);
    }

    #[test]
    fn a_refused_stream_is_unbound_and_the_caps_hold() {
        let t0 = Instant::now();
        let mut t = Table::default();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        t.open(cookie(b'a'), lo, 1, false, false).unwrap();
        assert!(matches!(
            t.datagram(t0, peer(1), b"9876"),
            Verdict::Joined { .. }
        ));
        t.unbind(peer(1));
        assert!(!t.complete(&cookie(b'a')));
        assert!(matches!(
            t.datagram(t0, peer(2), b"9876"),
            Verdict::Joined { .. }
        ));
        // Streams of all tests together: at most MAX_STREAMS reserved.
        let mut t = Table::default();
        for i in 0..4u8 {
            let ip = IpAddr::from([10, 0, 0, i]);
            t.open(cookie(b'a' + i), ip, 64, false, false).unwrap();
        }
        let e = t.open(cookie(b'z'), IpAddr::from([10, 0, 1, 1]), 1, false, false);
        assert_eq!(e, Err(Busy::Full { in_use: 256 }));
        t.forget(&cookie(b'a'));
        t.open(cookie(b'z'), IpAddr::from([10, 0, 1, 1]), 1, false, false)
            .unwrap();
    }

    #[test]
    fn a_sending_tests_streams_count_nothing() {
        let t0 = Instant::now();
        let mut t = Table::default();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        t.open(cookie(b'r'), lo, 1, false, true).unwrap();
        assert!(matches!(
            t.datagram(t0, peer(1), b"9876"),
            Verdict::Joined { .. }
        ));
        t.confirm(peer(1), 1);
        assert_eq!(t.start(&cookie(b'r')), vec![(1, peer(1))]);
        assert_eq!(t.datagram(t0, peer(1), &[0; 64]), Verdict::Late);
    }

    #[test]
    fn udp_parameters_are_bounded_by_iperf3s_own_limits() {
        use crate::iperf3::proto::Params;
        let p = |len: u32, parallel: u32| {
            Params::parse(
                format!(r#"{{"udp":true,"time":1,"parallel":{parallel},"len":{len},"bandwidth":1048576}}"#)
                    .as_bytes(),
            )
        };
        assert!(p(16, 1).is_ok());
        assert!(p(65_507, 64).is_ok());
        assert!(p(15, 1).unwrap_err().contains("len 15 for UDP"));
        assert!(p(65_508, 1).unwrap_err().contains("len 65508 for UDP"));
        assert!(p(1000, 65).unwrap_err().contains("parallel 65 for UDP"));
    }
}
