//! [`Stats`]: a connection's counters and current estimates, as [`Connection::stats`] reports
//! them.

use super::Connection;

/// Counters and estimates of a connection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Datagrams returned by `poll_transmit`.
    pub packets_sent: u64,
    /// Datagrams passed to `handle_datagram` that parsed and belonged here.
    pub packets_received: u64,
    /// Bytes of the datagrams sent.
    pub bytes_sent: u64,
    /// Bytes of the datagrams received.
    pub bytes_received: u64,
    /// Packets that carried stream data.
    pub data_packets_sent: u64,
    /// Distinct stream bytes sent (first transmissions).
    pub stream_bytes_sent: u64,
    /// Stream bytes sent again.
    pub stream_bytes_retransmitted: u64,
    /// Packets that carried retransmitted stream data (probes included).
    pub retransmitted_packets: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Packets declared lost and acknowledged later (the loss was reordering).
    pub spurious_losses: u64,
    /// Probe timeouts.
    pub probe_timeouts: u64,
    /// Times every packet in flight was declared lost (the last-resort RTO).
    pub persistent_congestion: u64,
    /// Datagrams dropped because they failed the checksum or did not parse.
    pub invalid_datagrams: u64,
    /// Packets received twice.
    pub duplicate_packets: u64,
    /// Distinct stream bytes received.
    pub stream_bytes_received: u64,
    /// Stream bytes received more than once.
    pub duplicate_stream_bytes: u64,
    /// Packets that carried only ACK (and padding) frames.
    pub ack_only_packets: u64,
    /// Smoothed RTT (ns).
    pub srtt_ns: u64,
    /// RTT variation (ns).
    pub rttvar_ns: u64,
    /// Minimum RTT (ns).
    pub min_rtt_ns: u64,
    /// Latest RTT sample (ns).
    pub latest_rtt_ns: u64,
    /// Estimated delivery rate of the path (bytes per second).
    pub btl_bw: u64,
    /// Pacing rate (bytes per second).
    pub pacing_rate: u64,
    /// Congestion window (bytes).
    pub cwnd: u64,
    /// Estimated random loss, parts per million.
    pub random_loss_ppm: u64,
    /// Rounds where loss rose with the sending rate or came with a queue.
    pub congestion_events: u64,
    /// Reordering window of the time-threshold loss detection (ns).
    pub reorder_window_ns: u64,
}

impl Connection {
    /// Counters and current estimates.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.srtt_ns = self.srtt;
        s.rttvar_ns = self.rttvar;
        s.min_rtt_ns = if self.min_rtt == u64::MAX {
            0
        } else {
            self.min_rtt
        };
        s.latest_rtt_ns = self.latest_rtt;
        s.btl_bw = self.cc.btl_bw() as u64;
        s.pacing_rate = self.cc.pacing_rate() as u64;
        s.cwnd = self.cc.cwnd();
        s.random_loss_ppm = (self.cc.random_loss() * 1e6) as u64;
        s.congestion_events = self.cc.congestion_events();
        s.reorder_window_ns = self.reorder_window();
        s
    }

    /// Packets that carried retransmitted data of `stream`.
    pub fn stream_retransmits(&self, stream: u32) -> u64 {
        self.stream_retx.get(&stream).copied().unwrap_or(0)
    }
}
