//! `--rate max`: the highest offered rate without loss, searched by short trials, sans-IO.
//!
//! A trial *passes* when it lost at most `max_loss` of what it sent and the sender reached at
//! least [`REACHED`] of the rate asked (a sender that cannot offer the rate has not shown the
//! path carries it). From `start`, the rate doubles while trials pass and halves while they
//! fail, until one of each brackets the answer; then bisection, until the bracket is within
//! `precision` or the trials run out. The answer is the highest rate that passed. A pass above
//! an earlier failure (noise) drops that failure; a failure below an earlier pass drops the
//! pass; so the bracket always holds, and the number of trials bounds the search.

use serde::{Deserialize, Serialize};

/// The fraction of the asked rate a sender must reach for its trial to pass.
pub const REACHED: f64 = 0.95;
/// Lowest rate the search goes down to: 1 Mbit/s.
pub const FLOOR_BPS: u64 = 1_000_000;

/// How to search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchConfig {
    /// The first trial's rate, bits/s.
    pub start_bps: u64,
    /// Highest rate tried, bits/s.
    pub max_bps: u64,
    /// Most trials.
    pub max_trials: usize,
    /// Stop when the bracket's top is within this fraction of its bottom.
    pub precision: f64,
    /// Largest lost fraction of a passing trial (0: no loss at all).
    pub max_loss: f64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            start_bps: 500_000_000,
            max_bps: socklab_units::MAX_BPS,
            max_trials: 14,
            precision: 0.05,
            max_loss: 0.0,
        }
    }
}

/// One trial.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The rate asked, bits/s.
    pub rate_bps: u64,
    /// The rate the sender reached, bits/s.
    pub sent_bps: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams lost.
    pub lost: u64,
    /// Whether it passed.
    pub passed: bool,
}

/// The search's state.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSearch {
    cfg: SearchConfig,
    trials: Vec<Trial>,
    lo: Option<u64>,
    hi: Option<u64>,
}

impl RateSearch {
    /// A search with `cfg`.
    pub fn new(cfg: SearchConfig) -> RateSearch {
        RateSearch {
            cfg,
            trials: Vec::new(),
            lo: None,
            hi: None,
        }
    }

    /// The rate of the next trial, or `None` when the search is over.
    pub fn next_rate(&self) -> Option<u64> {
        if self.trials.len() >= self.cfg.max_trials {
            return None;
        }
        let c = &self.cfg;
        match (self.lo, self.hi) {
            (None, None) => Some(c.start_bps.clamp(FLOOR_BPS, c.max_bps)),
            (Some(l), None) => (l < c.max_bps).then(|| l.saturating_mul(2).min(c.max_bps)),
            (None, Some(h)) => (h > FLOOR_BPS).then(|| (h / 2).max(FLOOR_BPS)),
            (Some(l), Some(h)) => {
                (h as f64 > l as f64 * (1.0 + c.precision)).then(|| l + (h - l) / 2)
            }
        }
    }

    /// Records a trial at `rate_bps` that sent `sent` datagrams at `sent_bps` and lost `lost`;
    /// returns whether it passed.
    pub fn record(&mut self, rate_bps: u64, sent_bps: f64, sent: u64, lost: u64) -> bool {
        let passed = sent > 0
            && lost as f64 <= self.cfg.max_loss * sent as f64
            && sent_bps >= REACHED * rate_bps as f64;
        if passed {
            self.lo = Some(self.lo.map_or(rate_bps, |l| l.max(rate_bps)));
            if self.hi.is_some_and(|h| h <= rate_bps) {
                self.hi = None;
            }
        } else {
            self.hi = Some(self.hi.map_or(rate_bps, |h| h.min(rate_bps)));
            if self.lo.is_some_and(|l| l >= rate_bps) {
                self.lo = None;
            }
        }
        self.trials.push(Trial {
            rate_bps,
            sent_bps,
            sent,
            lost,
            passed,
        });
        passed
    }

    /// The highest rate that passed (and was not contradicted by a failure at or below it).
    pub fn best(&self) -> Option<u64> {
        self.lo
    }

    /// The trials so far.
    pub fn trials(&self) -> &[Trial] {
        &self.trials
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a path that carries up to `capacity` bits/s and a sender that
    /// reaches up to `sender` bits/s.
    fn against(cfg: SearchConfig, capacity: u64, sender: u64) -> RateSearch {
        let mut s = RateSearch::new(cfg);
        while let Some(r) = s.next_rate() {
            let reached = r.min(sender) as f64;
            let lost = if r > capacity { 1 } else { 0 };
            s.record(r, reached, 1000, lost);
        }
        s
    }

    #[test]
    fn the_search_brackets_the_capacity_within_its_precision() {
        let cfg = SearchConfig::default();
        for capacity in [3_000_000u64, 700_000_000, 2_345_000_000, 40_000_000_000] {
            let s = against(cfg, capacity, u64::MAX);
            let best = s.best().unwrap();
            assert!(best <= capacity, "{best} > {capacity}");
            assert!(
                best as f64 >= capacity as f64 / (1.0 + cfg.precision) - 1.0,
                "{best} far below {capacity}: {:?}",
                s.trials()
            );
            assert!(s.trials().len() <= cfg.max_trials);
        }
    }

    #[test]
    fn a_slow_sender_bounds_the_answer_without_loss() {
        let s = against(SearchConfig::default(), u64::MAX, 1_500_000_000);
        let best = s.best().unwrap();
        // Within the search's precision below what the sender reaches, and at most the rate at
        // which it still reaches REACHED of what is asked.
        assert!(
            (1_400_000_000..=(1_500_000_000f64 / REACHED) as u64).contains(&best),
            "{best}"
        );
        assert!(s.trials().iter().any(|t| !t.passed && t.lost == 0));
    }

    #[test]
    fn a_path_that_loses_at_any_rate_has_no_answer_and_stops_at_the_floor() {
        let mut s = RateSearch::new(SearchConfig::default());
        while let Some(r) = s.next_rate() {
            s.record(r, r as f64, 100, 1);
        }
        assert_eq!(s.best(), None);
        assert_eq!(s.trials().last().unwrap().rate_bps, FLOOR_BPS);
        assert!(s.trials().len() <= SearchConfig::default().max_trials);
    }

    #[test]
    fn a_loss_threshold_lets_some_loss_pass_and_noise_does_not_break_the_bracket() {
        let cfg = SearchConfig {
            max_loss: 0.01,
            max_trials: 5,
            ..SearchConfig::default()
        };
        let mut s = RateSearch::new(cfg);
        assert!(s.record(100_000_000, 1e8, 1000, 10), "1 % loss passes");
        assert!(!s.record(200_000_000, 2e8, 1000, 11));
        // A pass above the failure: the failure was noise and is dropped.
        assert!(s.record(300_000_000, 3e8, 1000, 0));
        assert_eq!(s.next_rate(), Some(600_000_000));
        // A failure below the pass drops the pass.
        assert!(!s.record(250_000_000, 2.5e8, 1000, 500));
        assert_eq!(s.best(), None);
        assert_eq!(s.next_rate(), Some(125_000_000));
        s.record(125_000_000, 1.25e8, 1000, 0);
        assert_eq!(s.next_rate(), None, "five trials");
        assert_eq!(s.best(), Some(125_000_000));
    }
}
