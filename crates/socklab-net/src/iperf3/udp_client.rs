//! iperf3's UDP streams, the client's side, sans I/O (`bulk --udp --to iperf3://`, issue 27
//! part 2): the connect datagram and its reply, the header every data datagram starts with,
//! and the receiver's accounting (lost, out of order, jitter) as iperf3 does it.
//!
//! Facts (esnet/iperf `src/iperf_udp.c`, `iperf_udp_connect`, `iperf_udp_accept`,
//! `iperf_udp_send`, `iperf_udp_recv`; `src/iperf.h`; checked against Debian's 3.12 with
//! `strace` on loopback):
//! - each stream is its own UDP socket connected to the server's port; it sends the 4 bytes
//!   `9876` (the int 0x36373839 written little-endian) and waits for the server's 4-byte
//!   answer `6789` (older servers: the int 987654321); then the server's socket is connected
//!   to the client's and the next stream may come;
//! - a data datagram starts with the sender's clock in seconds and microseconds (32-bit
//!   big-endian each; 3.12 uses its monotonic clock) and the datagram's number, counted from
//!   1 (32-bit big-endian, or 64-bit with `udp_counters_64bit`); the rest is payload;
//! - the receiver keeps the highest number seen: a number above the next expected counts the
//!   gap as lost, one below it counts out of order and takes one back from the lost; the
//!   jitter is RFC 1889's (RFC 3550 §6.4.1, A.8) over the transit times (arrival on the
//!   receiver's clock minus the sender's stamp), in seconds.
//!
//! The header codec is the sink's ([`super::udp::Header`]), shared.

use serde::Serialize;

/// What the client sends on a new UDP stream (3.12: `UDP_CONNECT_MSG`).
pub const CONNECT_MSG: [u8; 4] = *b"9876";
/// What the server answers (3.12: `UDP_CONNECT_REPLY`).
pub const CONNECT_REPLY: [u8; 4] = *b"6789";
/// What servers before the text form answer: 987654321 in their byte order.
const LEGACY_REPLIES: [[u8; 4]; 2] = [987_654_321u32.to_le_bytes(), 987_654_321u32.to_be_bytes()];

/// Whether `b` is a server's answer to [`CONNECT_MSG`].
pub fn is_connect_reply(b: &[u8]) -> bool {
    b == CONNECT_REPLY || LEGACY_REPLIES.iter().any(|l| b == l)
}

pub use super::udp::Header;

/// One UDP stream's receiver counts, as iperf3 keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RecvCounts {
    /// Datagrams that arrived with a header.
    pub datagrams: u64,
    /// Their bytes (headers included, as iperf3 counts).
    pub bytes: u64,
    /// The highest number seen (iperf3's `packet_count`: what it reports as packets).
    pub packets: u64,
    /// Lost: the gaps below the highest number, less the late arrivals (`cnt_error`).
    pub lost: u64,
    /// Arrivals numbered at or below the highest seen (`outoforder_packets`).
    pub out_of_order: u64,
    /// RFC 1889 interarrival jitter, seconds.
    pub jitter: f64,
    /// Datagrams shorter than the header (not counted above).
    pub short: u64,
    #[serde(skip)]
    prev_transit: f64,
}

impl RecvCounts {
    /// Takes one datagram `d` that arrived at `arrival_secs` (the receiver's clock, from any
    /// fixed start: only differences of transit times count).
    pub fn datagram(&mut self, wide: bool, d: &[u8], arrival_secs: f64) {
        let Some(h) = Header::parse(d, wide).ok() else {
            self.short += 1;
            return;
        };
        let first = self.datagrams == 0;
        self.datagrams += 1;
        self.bytes += d.len() as u64;
        if h.count > self.packets {
            self.lost += h.count - 1 - self.packets;
            self.packets = h.count;
        } else {
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        let transit = arrival_secs - h.secs();
        if first {
            self.prev_transit = transit;
        }
        let d = (transit - self.prev_transit).abs();
        self.prev_transit = transit;
        self.jitter += (d - self.jitter) / 16.0;
    }

    /// The lost share of the datagrams numbered so far, 0 to 1.
    pub fn loss(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.lost as f64 / self.packets as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_header_is_big_endian_seconds_microseconds_and_count() {
        let h = Header::at(Duration::from_micros(33_408_381_842), 1);
        assert_eq!((h.sec, h.usec), (33_408, 381_842));
        let mut b = [0u8; 16];
        h.write(&mut b, false);
        // As 3.12 wrote its first datagram (strace on loopback), its stamp aside.
        assert_eq!(
            &b[..12],
            b"\x00\x00\x82\x80\x00\x05\xd3\x92\x00\x00\x00\x01"
        );
        assert_eq!(Header::parse(&b, false).ok(), Some(h));
        let big = Header {
            count: 1 << 40,
            ..h
        };
        big.write(&mut b, true);
        assert_eq!(&b[8..16], &(1u64 << 40).to_be_bytes());
        assert_eq!(Header::parse(&b, true).ok(), Some(big));
        // A 32-bit count wraps as iperf3's.
        big.write(&mut b, false);
        assert_eq!(Header::parse(&b, false).ok().unwrap().count, 0);
        assert_eq!(Header::parse(&b[..11], false).ok(), None);
        assert_eq!(Header::parse(&b[..15], true).ok(), None);
    }

    #[test]
    fn the_connect_exchange_is_the_text_form_and_the_legacy_reply_is_taken() {
        assert_eq!(CONNECT_MSG, 0x3637_3839u32.to_le_bytes());
        assert_eq!(CONNECT_REPLY, 0x3938_3736u32.to_le_bytes());
        assert!(is_connect_reply(b"6789"));
        assert!(is_connect_reply(&987_654_321u32.to_le_bytes()));
        assert!(!is_connect_reply(b"9876"));
        assert!(!is_connect_reply(b"678"));
    }

    fn dgram(count: u64, sent_us: u64) -> Vec<u8> {
        let mut b = vec![0u8; 100];
        Header::at(Duration::from_micros(sent_us), count).write(&mut b, false);
        b
    }

    #[test]
    fn gaps_count_lost_and_late_arrivals_take_them_back_as_iperf3_does() {
        let mut r = RecvCounts::default();
        for (n, t) in [(1, 0.0), (2, 0.001), (5, 0.002), (3, 0.003), (6, 0.004)] {
            r.datagram(false, &dgram(n, 0), t);
        }
        assert_eq!(r.datagrams, 5);
        assert_eq!(r.bytes, 500);
        assert_eq!(r.packets, 6);
        assert_eq!(r.out_of_order, 1);
        assert_eq!(r.lost, 1, "3 and 4 missed at 5, 3 came late: 4 is lost");
        assert!((r.loss() - 1.0 / 6.0).abs() < 1e-12);
        // A duplicate counts out of order too (iperf3 cannot tell them apart).
        r.datagram(false, &dgram(6, 0), 0.005);
        assert_eq!((r.out_of_order, r.lost), (2, 0));
        r.datagram(false, b"short", 0.006);
        assert_eq!((r.short, r.datagrams), (1, 6));
    }

    #[test]
    fn jitter_is_the_rfc1889_mean_of_transit_differences() {
        let mut r = RecvCounts::default();
        // Sent every 1 ms; transits 10 ms, 12 ms, 10 ms (the clocks' offset cancels).
        r.datagram(false, &dgram(1, 5_000_000), 5.010 + 100.0);
        assert_eq!(r.jitter, 0.0, "the first datagram only sets the transit");
        r.datagram(false, &dgram(2, 5_001_000), 5.013 + 100.0);
        let j1 = 0.002 / 16.0;
        assert!((r.jitter - j1).abs() < 1e-9, "{}", r.jitter);
        r.datagram(false, &dgram(3, 5_002_000), 5.012 + 100.0);
        let j2 = j1 + (0.002 - j1) / 16.0;
        assert!((r.jitter - j2).abs() < 1e-9, "{}", r.jitter);
        // Even spacing keeps it falling.
        r.datagram(false, &dgram(4, 5_003_000), 5.013 + 100.0);
        assert!(r.jitter < j2);
    }
}
