//! What the sink keeps of a finished iperf3 test: the client's parameters, the sink's own
//! figures (its results message) and the client's, for the sink's results database (issue
//! 27 part 1: "stored like any sink-side measurement when the sink has a `db`").

use super::proto::{Params, Results};

/// One finished test.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRecord {
    /// What the client asked for.
    pub params: Params,
    /// The sink's figures: what it received (or, reversed, sent), its CPU.
    pub ours: Results,
    /// The client's own figures, kept beside (never trusted for the sink's).
    pub client: Results,
    /// The client's options the sink put in effect, as read back (e.g. `TCP_NODELAY 1
    /// (nodelay 1 asked)`), for its log.
    pub applied: Vec<String>,
}

impl TestRecord {
    /// The sink sent (`-R`).
    pub fn reverse(&self) -> bool {
        self.params.reverse
    }

    /// Bytes the sink moved, all streams.
    pub fn bytes(&self) -> u64 {
        self.ours.streams.iter().map(|s| s.bytes).sum()
    }

    /// Seconds from the start to the last stream's end, as the sink saw them.
    pub fn seconds(&self) -> f64 {
        self.ours
            .streams
            .iter()
            .map(|s| s.end_time)
            .fold(0.0, f64::max)
    }

    /// The sink's rate, Gbit/s (0 for a test of no time).
    pub fn gbps(&self) -> f64 {
        let s = self.seconds();
        if s > 0.0 {
            self.bytes() as f64 * 8.0 / s / 1e9
        } else {
            0.0
        }
    }

    /// Bytes the client reports, all streams.
    pub fn client_bytes(&self) -> u64 {
        self.client.streams.iter().map(|s| s.bytes).sum()
    }

    /// The sender's retransmits, where it knows them: the sink's (`TCP_INFO`) when it sent,
    /// else the client's own count.
    pub fn retransmits(&self) -> Option<i64> {
        let sender = if self.reverse() {
            &self.ours
        } else {
            &self.client
        };
        (sender.sender_has_retransmits == 1)
            .then(|| sender.streams.iter().map(|s| s.retransmits.max(0)).sum())
    }
}
