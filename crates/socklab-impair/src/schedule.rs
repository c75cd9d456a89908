//! [`RateSchedule`]: a rate that changes over time, `rate 100mbit@0s 10mbit@5s 100mbit@10s`
//! (socklab's extension of netem's `rate`). Each step holds from its time until the next; the
//! last step holds for ever (the schedule does not repeat: for a repeating pattern write a
//! trace). Time 0 is the link's first packet. A packet's serialisation follows the rate in
//! force while it is sent: one that starts at 10 Mbit/s just before a step to 100 Mbit/s finishes
//! at the faster rate.

use std::fmt;

use crate::error::ParseSpecError;
use crate::syntax::{err, parse_rate, parse_time, rate, time};

/// A piecewise-constant rate: `(from_ns, bits_per_second)` steps, the first at 0, times
/// increasing, at least two steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateSchedule {
    steps: Vec<(u64, u64)>,
}

impl RateSchedule {
    /// A schedule from its steps: the first at 0, times increasing, at least two steps.
    pub fn new(steps: Vec<(u64, u64)>) -> Option<RateSchedule> {
        let ok = steps.len() >= 2
            && steps[0].0 == 0
            && steps.windows(2).all(|w| w[0].0 < w[1].0)
            && steps.iter().all(|s| s.1 > 0);
        ok.then_some(RateSchedule { steps })
    }

    /// The steps: `(from_ns, bits_per_second)`.
    pub fn steps(&self) -> &[(u64, u64)] {
        &self.steps
    }

    /// The rate in force at `t_ns` after the start.
    pub fn rate_at(&self, t_ns: u64) -> u64 {
        let i = self.steps.partition_point(|s| s.0 <= t_ns);
        self.steps[i.saturating_sub(1)].1
    }

    /// The slowest step's rate.
    pub fn min_bps(&self) -> u64 {
        self.steps.iter().map(|s| s.1).min().unwrap_or(1)
    }

    /// The fastest step's rate.
    pub fn max_bps(&self) -> u64 {
        self.steps.iter().map(|s| s.1).max().unwrap_or(1)
    }

    /// When `bits` sent from `start_ns` (after the start) are all out.
    pub fn finish_ns(&self, start_ns: u64, bits: u64) -> u64 {
        // Work in bit·ns (bits × 1e9) so that every rate divides exactly as the constant-rate
        // path does (floor of bits·1e9 / rate).
        let mut need = u128::from(bits) * 1_000_000_000;
        let mut t = start_ns;
        let mut i = self.steps.partition_point(|s| s.0 <= t).saturating_sub(1);
        loop {
            let r = u128::from(self.steps[i].1);
            match self.steps.get(i + 1) {
                Some(&(end, _)) => {
                    let cap = r * u128::from(end - t);
                    if need <= cap {
                        return t.saturating_add(u64::try_from(need / r).unwrap_or(u64::MAX));
                    }
                    need -= cap;
                    t = end;
                    i += 1;
                }
                None => return t.saturating_add(u64::try_from(need / r).unwrap_or(u64::MAX)),
            }
        }
    }

    /// Bits the schedule carries in `[from_ns, to_ns)`.
    pub fn bits_between(&self, from_ns: u64, to_ns: u64) -> f64 {
        let mut bits = 0.0;
        for (i, &(at, r)) in self.steps.iter().enumerate() {
            let end = self.steps.get(i + 1).map_or(u64::MAX, |s| s.0);
            let (a, b) = (at.max(from_ns), end.min(to_ns));
            if b > a {
                bits += r as f64 * (b - a) as f64 / 1e9;
            }
        }
        bits
    }

    /// Parses `RATE@TIME` steps (the first given), then any further ones; a single step at 0
    /// is a constant rate (`Err(rate)` for the caller to keep as such).
    pub(crate) fn parse_steps(
        first: &str,
        more: &[&str],
    ) -> Result<Result<RateSchedule, u64>, ParseSpecError> {
        let mut steps: Vec<(u64, u64)> = Vec::new();
        for tok in std::iter::once(first).chain(more.iter().copied()) {
            let Some((r, t)) = tok.split_once('@') else {
                return Err(err(
                    "rate",
                    tok,
                    "every step of a rate schedule is RATE@TIME, e.g. rate 100mbit@0s 10mbit@5s",
                ));
            };
            let bps = parse_rate("rate", r)?;
            let at = parse_time("rate", t).map_err(|_| {
                err(
                    "rate",
                    tok,
                    "the time of a step is written like 5s or 500ms, e.g. 10mbit@5s",
                )
            })?;
            match steps.last() {
                None if at != 0 => {
                    return Err(err(
                        "rate",
                        tok,
                        "a rate schedule starts at 0s, e.g. rate 100mbit@0s 10mbit@5s",
                    ))
                }
                Some(&(prev, _)) if at <= prev => {
                    return Err(err(
                        "rate",
                        tok,
                        &format!("each step must come after the one before ({})", time(prev)),
                    ))
                }
                _ => steps.push((at, bps)),
            }
        }
        if steps.len() == 1 {
            return Ok(Err(steps[0].1));
        }
        RateSchedule::new(steps)
            .map(Ok)
            .ok_or_else(|| err("rate", first, "not a rate schedule"))
    }
}

impl fmt::Display for RateSchedule {
    /// `RATE@TIME …`, the form after `rate`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(at, r)) in self.steps.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            let t = if at == 0 { "0s".to_string() } else { time(at) };
            write!(f, "{}@{t}", rate(r))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_times_follow_the_steps() {
        // 8 Mbit/s for 1 ms, then 16 Mbit/s.
        let s = RateSchedule::new(vec![(0, 8_000_000), (1_000_000, 16_000_000)]).unwrap();
        // 8000 bits at 8 Mbit/s: 1 ms.
        assert_eq!(s.finish_ns(0, 8000), 1_000_000);
        // Starting at 0.5 ms: 4000 bits by 1 ms, 4000 more at 16 Mbit/s = 0.25 ms.
        assert_eq!(s.finish_ns(500_000, 8000), 1_250_000);
        assert_eq!(s.finish_ns(2_000_000, 16_000), 3_000_000);
        assert_eq!(s.rate_at(999_999), 8_000_000);
        assert_eq!(s.rate_at(1_000_000), 16_000_000);
        assert!((s.bits_between(500_000, 2_000_000) - 20_000.0).abs() < 1e-6);
        assert_eq!((s.min_bps(), s.max_bps()), (8_000_000, 16_000_000));
    }

    #[test]
    fn only_well_formed_schedules() {
        assert!(RateSchedule::new(vec![(0, 1)]).is_none());
        assert!(RateSchedule::new(vec![(1, 1), (2, 1)]).is_none());
        assert!(RateSchedule::new(vec![(0, 1), (0, 1)]).is_none());
        assert!(RateSchedule::new(vec![(0, 1), (5, 0)]).is_none());
    }
}
