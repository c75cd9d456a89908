//! PIE, RFC 8033, from its pseudocode (section 5 and the appendix), with the timestamp way of
//! measuring the queue delay: every `tupdate` (from the link's start) the drop probability moves
//! by `alpha · (qdelay − target) + beta · (qdelay − qdelay_old)`, scaled down while it is small,
//! decays by 2 % an update when the queue has stayed empty, and is kept in `[0, 1]`; an
//! arriving packet is dropped with that probability, unless the burst allowance (150 ms, refilled
//! when the queue has been quiet) is left, the queue is short (two MTUs) or the delay is low
//! (`qdelay_old < target / 2` and the probability below 20 %). `qdelay` is the sojourn time of
//! the last packet dequeued, 0 once the queue is empty (Linux; the RFC would keep the last value
//! and never decay). With `ecn`, an ECN-capable packet is marked instead while the probability is
//! at most 10 % (RFC 8033 section 5.1). The optional de-randomisation of section 5.1 is not
//! modelled.

use std::collections::VecDeque;

use super::{Ctx, Entry};
use crate::aqm::PieConfig;
use crate::rng::Rng;

/// Burst allowance (MAX_BURST).
pub(crate) const MAX_BURST_NS: u64 = 150_000_000;
/// ECN marks replace drops up to this probability.
const MAX_ECNTH: f64 = 0.1;
/// "Two mean packets": below this backlog PIE never drops.
const SHORT_QUEUE_BYTES: u64 = 2 * 1500;

/// The PIE discipline.
#[derive(Debug, Clone)]
pub(crate) struct Pie {
    cfg: PieConfig,
    q: VecDeque<Entry>,
    bytes: u64,
    limit: usize,
    drop_prob: f64,
    qdelay_ns: u64,
    qdelay_old_ns: u64,
    burst_ns: u64,
    next_update: u64,
}

impl Pie {
    pub(crate) fn new(cfg: PieConfig, limit: usize) -> Pie {
        Pie {
            cfg,
            q: VecDeque::new(),
            bytes: 0,
            limit,
            drop_prob: 0.0,
            qdelay_ns: 0,
            qdelay_old_ns: 0,
            burst_ns: MAX_BURST_NS,
            next_update: cfg.tupdate_ns,
        }
    }

    /// The link starts at `origin`: updates at `origin + k·tupdate`.
    pub(crate) fn start(&mut self, origin: u64) {
        self.next_update = origin.saturating_add(self.cfg.tupdate_ns);
    }

    /// Applies the updates due up to `now` (inclusive). From an empty, quiet queue the update
    /// changes nothing, so a long idle period is skipped in one step.
    fn catch_up(&mut self, now: u64) {
        while self.next_update <= now {
            if self.drop_prob == 0.0
                && self.qdelay_ns == 0
                && self.qdelay_old_ns == 0
                && self.burst_ns == 0
            {
                let t = self.cfg.tupdate_ns;
                let k = (now - self.next_update) / t + 1;
                self.next_update = self.next_update.saturating_add(k.saturating_mul(t));
                return;
            }
            self.update();
            self.next_update = self.next_update.saturating_add(self.cfg.tupdate_ns);
        }
    }

    /// RFC 8033's `calculate_drop_prob`.
    fn update(&mut self) {
        let s = |ns: u64| ns as f64 / 1e9;
        let (cur, old) = (s(self.qdelay_ns), s(self.qdelay_old_ns));
        let mut p = self.cfg.alpha * (cur - s(self.cfg.target_ns)) + self.cfg.beta * (cur - old);
        let prob = self.drop_prob;
        p /= if prob < 0.000_001 {
            2048.0
        } else if prob < 0.000_01 {
            512.0
        } else if prob < 0.000_1 {
            128.0
        } else if prob < 0.001 {
            32.0
        } else if prob < 0.01 {
            8.0
        } else if prob < 0.1 {
            2.0
        } else {
            1.0
        };
        self.drop_prob += p;
        // Exponentially decay the drop probability when congestion goes away.
        if self.qdelay_ns == 0 && self.qdelay_old_ns == 0 {
            self.drop_prob *= 0.98;
        }
        self.drop_prob = self.drop_prob.clamp(0.0, 1.0);
        self.qdelay_old_ns = self.qdelay_ns;
        self.burst_ns = self.burst_ns.saturating_sub(self.cfg.tupdate_ns);
    }

    /// RFC 8033's `drop_early`.
    fn drop_early(&self, rng: &mut Rng) -> bool {
        // Safeguard PIE to be work conserving.
        if (self.qdelay_old_ns < self.cfg.target_ns / 2 && self.drop_prob < 0.2)
            || self.bytes <= SHORT_QUEUE_BYTES
        {
            return false;
        }
        rng.next_f64() < self.drop_prob
    }

    pub(crate) fn enqueue(&mut self, now: u64, mut e: Entry, ctx: &mut Ctx<'_>, rng: &mut Rng) {
        self.catch_up(now);
        if self.q.len() >= self.limit {
            ctx.queue_drop(now, e);
            return;
        }
        if self.drop_prob == 0.0
            && self.qdelay_ns < self.cfg.target_ns / 2
            && self.qdelay_old_ns < self.cfg.target_ns / 2
        {
            self.burst_ns = MAX_BURST_NS;
        }
        if self.burst_ns == 0 && self.drop_early(rng) {
            let marked = self.drop_prob <= MAX_ECNTH && ctx.mark(now, &mut e);
            if !marked {
                ctx.aqm_drop(now, e);
                return;
            }
        }
        self.bytes += e.bytes.len() as u64;
        self.q.push_back(e);
    }

    pub(crate) fn dequeue(&mut self, now: u64) -> Option<Entry> {
        self.catch_up(now);
        let e = self.q.pop_front()?;
        self.bytes -= e.bytes.len() as u64;
        self.qdelay_ns = if self.q.is_empty() {
            0
        } else {
            now.saturating_sub(e.arrival_ns)
        };
        Some(e)
    }

    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn pie(qdelay_ms: u64, old_ms: u64, prob: f64) -> Pie {
        let mut p = Pie::new(PieConfig::default(), 1000);
        p.qdelay_ns = qdelay_ms * MS;
        p.qdelay_old_ns = old_ms * MS;
        p.drop_prob = prob;
        p
    }

    #[test]
    fn the_drop_probability_moves_as_rfc_8033_computes() {
        // alpha (0.030 - 0.015) + beta (0.030 - 0.020) = 0.014375, scaled by 1/2048 below 1e-6.
        let mut p = pie(30, 20, 0.0);
        p.update();
        assert!(
            (p.drop_prob - 0.014375 / 2048.0).abs() < 1e-18,
            "{}",
            p.drop_prob
        );
        assert_eq!((p.qdelay_old_ns, p.burst_ns), (30 * MS, 135 * MS));
        // Then alpha · 0.015 = 0.001875, by 1/512 (1e-6 <= p < 1e-5), then 1/128.
        let first = p.drop_prob;
        p.update();
        assert!((p.drop_prob - (first + 0.001875 / 512.0)).abs() < 1e-18);
        let second = p.drop_prob;
        p.update();
        assert!((p.drop_prob - (second + 0.001875 / 128.0)).abs() < 1e-18);
        // Above 10 % unscaled; an empty queue decays it by 2 % an update.
        let mut p = pie(0, 0, 0.5);
        p.update();
        assert!((p.drop_prob - (0.5 - 0.001875) * 0.98).abs() < 1e-15);
        // Bounded to [0, 1].
        let mut p = pie(2000, 0, 0.99);
        p.update();
        assert_eq!(p.drop_prob, 1.0);
        let mut p = pie(0, 50, 1e-7);
        p.update();
        assert_eq!(p.drop_prob, 0.0);
    }

    #[test]
    fn a_long_idle_period_is_skipped_and_updates_stay_on_their_grid() {
        let mut p = Pie::new(PieConfig::default(), 1000);
        p.start(7);
        // The queue emptied (qdelay 0) with the probability high and the last delay 40 ms.
        p.drop_prob = 0.3;
        p.qdelay_old_ns = 40 * MS;
        // Idle for a day: the state settles within a few hundred updates, then the rest is
        // skipped at once.
        let day = 86_400_000 * MS;
        p.catch_up(day);
        assert_eq!((p.drop_prob, p.qdelay_old_ns, p.burst_ns), (0.0, 0, 0));
        assert!(p.next_update > day);
        assert_eq!((p.next_update - 7) % PIE_TUPDATE, 0);
    }

    const PIE_TUPDATE: u64 = crate::aqm::PIE_TUPDATE_NS;
}
