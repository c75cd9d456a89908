//! The sender's schedule, sans-IO: datagram `k` is due at `k × size × 8 / rate` seconds after
//! the start (its intended send time). A sender asks how many are due *now*, sends them (a late
//! sender catches up in one batch, so the mean rate holds, as iperf3's does), and sleeps until
//! the next one is due.

/// The schedule of a paced sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    rate_bps: u64,
    bits: u64,
    sent: u64,
}

impl Pacer {
    /// Datagrams of `size` bytes (UDP payload) at `rate_bps` bits of payload per second.
    pub fn new(rate_bps: u64, size: usize) -> Pacer {
        Pacer {
            rate_bps: rate_bps.max(1),
            bits: (size as u64).max(1) * 8,
            sent: 0,
        }
    }

    /// Datagrams due by `elapsed_ns` after the start and not sent yet.
    pub fn due(&self, elapsed_ns: u64) -> u64 {
        let owed = u128::from(elapsed_ns) * u128::from(self.rate_bps)
            / (u128::from(self.bits) * 1_000_000_000)
            + 1;
        u64::try_from(owed)
            .unwrap_or(u64::MAX)
            .saturating_sub(self.sent)
    }

    /// When the next datagram is due, ns after the start.
    pub fn next_due_ns(&self) -> u64 {
        // The smallest t with due(t) > 0: ceil(sent × bits × 10⁹ / rate).
        let t = (u128::from(self.sent) * u128::from(self.bits) * 1_000_000_000)
            .div_ceil(u128::from(self.rate_bps));
        u64::try_from(t).unwrap_or(u64::MAX)
    }

    /// `n` more were sent.
    pub fn sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// Datagrams sent so far.
    pub fn count(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_fall_due_at_their_intended_times() {
        // 1000 bytes at 8 Mbit/s: one per millisecond.
        let mut p = Pacer::new(8_000_000, 1000);
        assert_eq!(p.due(0), 1, "the first is due at the start");
        assert_eq!(p.next_due_ns(), 0);
        p.sent(1);
        assert_eq!(p.due(999_999), 0);
        assert_eq!(p.next_due_ns(), 1_000_000);
        assert_eq!(p.due(1_000_000), 1);
        // A sender 10 ms late owes 10 at once.
        assert_eq!(p.due(10_500_000), 10);
        p.sent(10);
        assert_eq!(p.due(10_500_000), 0);
        assert_eq!(p.next_due_ns(), 11_000_000);
        assert_eq!(p.count(), 11);
    }

    #[test]
    fn the_next_due_time_is_never_before_the_datagram_is_due() {
        // 1472 bytes at 1 Gbit/s: 11.776 µs apart, not a whole number of ns.
        let mut p = Pacer::new(1_000_000_000, 1472);
        for _ in 0..10_000 {
            let t = p.next_due_ns();
            assert_eq!(p.due(t), 1, "at {t}");
            if t > 0 {
                assert_eq!(p.due(t - 1), 0, "before {t}");
            }
            p.sent(1);
        }
        // A second's worth (datagram 0 at 0 s, 84918 at 0.99999 s): the mean rate holds.
        assert_eq!(Pacer::new(1_000_000_000, 1472).due(1_000_000_000), 84_919);
    }

    #[test]
    fn huge_rates_and_times_saturate() {
        let p = Pacer::new(u64::MAX, 1);
        assert_eq!(p.due(u64::MAX), u64::MAX);
        let mut p = Pacer::new(1, 65507);
        p.sent(u64::MAX / 2);
        assert_eq!(p.next_due_ns(), u64::MAX);
    }
}
