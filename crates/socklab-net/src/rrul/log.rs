//! The pure part of the rrul probes: the fixed-rate schedule, the log of what was sent and
//! answered, and the statistics of a phase (percentiles of the round trips, lost, late and
//! missing probes). Times are durations since the start of the repetition; nothing here
//! touches a socket or a clock, so it is tested on made-up inputs.

use std::time::Duration;

/// When probes are due: slot `k` at `k × interval` from the start. A prober that wakes late
/// sends one probe now and goes on with the next slot after now, so it never bursts to catch
/// up; the slots it passed are counted as skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Time between probes.
    pub interval: Duration,
}

impl Schedule {
    /// When slot `k` is due.
    pub fn due(&self, k: u64) -> Duration {
        self.interval
            .saturating_mul(u32::try_from(k).unwrap_or(u32::MAX))
    }

    /// After the probe of slot `k` went out at `now`: the next slot, and how many slots
    /// between them were passed without a probe (their time had gone by).
    pub fn next(&self, k: u64, now: Duration) -> (u64, u64) {
        let i = self.interval.as_nanos().max(1);
        let passed = u64::try_from(now.as_nanos() / i).unwrap_or(u64::MAX);
        let next = (k + 1).max(passed.saturating_add(1));
        (next, next - k - 1)
    }
}

/// One probe: when it was sent and, if it was, when its answer came back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    /// Sent, since the start.
    pub sent: Duration,
    /// Answered, since the start.
    pub answered: Option<Duration>,
}

impl Probe {
    /// Its round trip, when answered.
    pub fn rtt(&self) -> Option<Duration> {
        self.answered.map(|a| a.saturating_sub(self.sent))
    }
}

/// Every probe of one kind (TCP or UDP) of a repetition, indexed by sequence number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeLog {
    /// The probes; the sequence number is the index.
    pub probes: Vec<Probe>,
    /// Slots passed without a probe (the prober woke too late for them).
    pub skipped: u64,
    /// Answers that matched no probe or a probe already answered (duplicates, strays).
    pub strays: u64,
}

impl ProbeLog {
    /// Records a probe sent at `at`; returns its sequence number.
    pub fn sent(&mut self, at: Duration) -> u64 {
        self.probes.push(Probe {
            sent: at,
            answered: None,
        });
        (self.probes.len() - 1) as u64
    }

    /// Records the answer to probe `seq` at `at`; false (counted as a stray) when there is
    /// no such probe or it was answered already.
    pub fn answered(&mut self, seq: u64, at: Duration) -> bool {
        match usize::try_from(seq)
            .ok()
            .and_then(|i| self.probes.get_mut(i))
        {
            Some(p) if p.answered.is_none() => {
                p.answered = Some(at.max(p.sent));
                true
            }
            _ => {
                self.strays += 1;
                false
            }
        }
    }

    /// Probes sent and not answered yet.
    pub fn outstanding(&self) -> usize {
        self.probes.iter().filter(|p| p.answered.is_none()).count()
    }

    /// When the last probe was sent.
    pub fn last_sent(&self) -> Option<Duration> {
        self.probes.last().map(|p| p.sent)
    }

    /// The statistics of the probes sent in `[from, to)`: an answer later than `bound` after
    /// its probe is late; `late_counts` says whether its round trip still counts (TCP: the
    /// answer is the stream's, it came; UDP: it counts as lost, as a ping past its timeout).
    pub fn phase(&self, from: Duration, to: Duration, bound: Duration, late_counts: bool) -> Phase {
        let mut rtts = Vec::new();
        let (mut sent, mut late, mut missing) = (0u64, 0u64, 0u64);
        for p in self.probes.iter().filter(|p| p.sent >= from && p.sent < to) {
            sent += 1;
            match p.rtt() {
                None => missing += 1,
                Some(r) if r > bound => {
                    late += 1;
                    if late_counts {
                        rtts.push(r);
                    }
                }
                Some(r) => rtts.push(r),
            }
        }
        rtts.sort_unstable();
        Phase {
            sent,
            late,
            missing,
            rtts,
        }
    }
}

/// What the probes of one phase saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Phase {
    /// Probes sent in the phase.
    pub sent: u64,
    /// Answered later than the bound.
    pub late: u64,
    /// Never answered.
    pub missing: u64,
    /// The round trips that count, sorted.
    pub rtts: Vec<Duration>,
}

impl Phase {
    /// The `q` quantile of the round trips (nearest rank: the smallest value with at least
    /// `q` of them at or below it), in milliseconds; `None` without any.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        percentile(&self.rtts, q).map(|d| d.as_secs_f64() * 1e3)
    }

    /// The share of probes lost, percent: never answered, or (when their round trip does not
    /// count) answered past the bound. `None` when none was sent.
    pub fn lost_pct(&self, late_counts: bool) -> Option<f64> {
        let lost = self.missing + if late_counts { 0 } else { self.late };
        (self.sent > 0).then(|| 100.0 * lost as f64 / self.sent as f64)
    }
}

/// The nearest-rank `q` quantile of sorted `xs` (`q` in 0..=1): the value at rank
/// ⌈q·n⌉ (the first for q = 0). `None` when `xs` is empty.
pub fn percentile(xs: &[Duration], q: f64) -> Option<Duration> {
    if xs.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * xs.len() as f64).ceil() as usize;
    Some(xs[rank.clamp(1, xs.len()) - 1])
}

/// The latency a load added: loaded minus idle (milliseconds), when both are known.
pub fn added(idle_ms: Option<f64>, loaded_ms: Option<f64>) -> Option<f64> {
    Some(loaded_ms? - idle_ms?)
}

/// The mean round trip (microseconds) of the probes sent in `[from, to)` and answered, for
/// the time series; `None` when none was.
pub fn mean_rtt_us(log: &ProbeLog, from: Duration, to: Duration) -> Option<f64> {
    let (sum, n) = log
        .probes
        .iter()
        .filter(|p| p.sent >= from && p.sent < to)
        .filter_map(|p| p.rtt())
        .fold((0.0, 0u32), |(s, n), r| (s + r.as_secs_f64() * 1e6, n + 1));
    (n > 0).then(|| sum / f64::from(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn the_schedule_is_fixed_rate_and_skips_rather_than_bursts() {
        let s = Schedule { interval: ms(100) };
        assert_eq!(s.due(0), ms(0));
        assert_eq!(s.due(7), ms(700));
        // On time (a little after the due time): the next slot, nothing skipped.
        assert_eq!(s.next(0, ms(1)), (1, 0));
        assert_eq!(s.next(3, ms(305)), (4, 0));
        // Woken 250 ms late for slot 3 (at 550 ms): slots 4 and 5 have gone by.
        assert_eq!(s.next(3, ms(550)), (6, 2));
        // Early (cannot happen, but never goes backwards).
        assert_eq!(s.next(5, ms(10)), (6, 0));
    }

    #[test]
    fn answers_are_matched_by_sequence_and_strays_counted() {
        let mut log = ProbeLog::default();
        assert_eq!(log.sent(ms(0)), 0);
        assert_eq!(log.sent(ms(100)), 1);
        assert!(log.answered(1, ms(130)));
        assert!(!log.answered(1, ms(140)), "a duplicate");
        assert!(!log.answered(9, ms(140)), "no such probe");
        assert_eq!(log.strays, 2);
        assert_eq!(log.outstanding(), 1);
        assert_eq!(log.probes[1].rtt(), Some(ms(30)));
        assert_eq!(log.last_sent(), Some(ms(100)));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let xs: Vec<Duration> = (1..=10).map(ms).collect();
        assert_eq!(percentile(&xs, 0.5), Some(ms(5)));
        assert_eq!(percentile(&xs, 0.99), Some(ms(10)));
        assert_eq!(percentile(&xs, 0.0), Some(ms(1)));
        assert_eq!(percentile(&xs, 0.91), Some(ms(10)));
        assert_eq!(percentile(&xs, 0.9), Some(ms(9)));
        assert_eq!(percentile(&[], 0.5), None);
        let hundred: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&hundred, 0.99), Some(ms(99)));
    }

    /// Idle probes answered in 10-14 ms, loaded ones in 200-240 ms, one UDP probe lost and
    /// one late: the phases split by send time, the added latency is loaded - idle.
    #[test]
    fn phases_split_by_send_time_and_count_loss_and_lateness() {
        let mut log = ProbeLog::default();
        for k in 0..5u64 {
            let s = log.sent(ms(k * 100));
            log.answered(s, ms(k * 100 + 10 + k));
        }
        // Loaded, from 600 ms: 200 + 10k ms, the third never answered, the fourth 1.5 s late.
        for k in 0..5u64 {
            let at = ms(600 + k * 100);
            let s = log.sent(at);
            match k {
                2 => {}
                3 => {
                    log.answered(s, at + ms(1500));
                }
                _ => {
                    log.answered(s, at + ms(200 + 10 * k));
                }
            }
        }
        let bound = ms(1000);
        let idle = log.phase(ms(0), ms(500), bound, false);
        assert_eq!((idle.sent, idle.late, idle.missing), (5, 0, 0));
        assert_eq!(idle.quantile_ms(0.5), Some(12.0));
        assert_eq!(idle.quantile_ms(0.99), Some(14.0));
        assert_eq!(idle.lost_pct(false), Some(0.0));
        // UDP-style: the late answer is lost.
        let udp = log.phase(ms(600), ms(1100), bound, false);
        assert_eq!((udp.sent, udp.late, udp.missing), (5, 1, 1));
        assert_eq!(udp.rtts, vec![ms(200), ms(210), ms(240)]);
        assert_eq!(udp.lost_pct(false), Some(40.0));
        // TCP-style: the late answer counts.
        let tcp = log.phase(ms(600), ms(1100), bound, true);
        assert_eq!(tcp.rtts.len(), 4);
        assert_eq!(tcp.quantile_ms(0.99), Some(1500.0));
        assert_eq!(tcp.lost_pct(true), Some(20.0));
        let added_p50 = added(idle.quantile_ms(0.5), udp.quantile_ms(0.5));
        assert_eq!(added_p50, Some(210.0 - 12.0));
        assert_eq!(added(None, Some(1.0)), None);
        assert_eq!(
            log.phase(ms(5000), ms(6000), bound, true).lost_pct(true),
            None
        );
        // The series: the mean of the probes sent in an interval.
        assert_eq!(mean_rtt_us(&log, ms(0), ms(200)), Some(10_500.0));
        assert_eq!(mean_rtt_us(&log, ms(800), ms(900)), None, "never answered");
    }
}
