//! How the `tun` driver's release threads keep their schedule, and the rule that says when they
//! did not: the release-lag histogram ([`LagHist`]), the spin window before a release time
//! sized from the thread's measured wake-up latency ([`SpinSizer`]), the levers a thread takes
//! at start ([`Levers`]: the real-time class, locked memory) and the validity rule
//! ([`ValidRule`], the `link_valid` key).

use std::time::Duration;

use crate::LinkError;

/// Sub-buckets per power of two of [`LagHist`] (a bucket spans at most 25 % of its value).
const SUB: usize = 4;
/// Powers of two of microseconds [`LagHist`] covers: up to 2^26 µs (67 s); longer lags count
/// in the last bucket.
const OCTAVES: usize = 26;
/// Buckets of [`LagHist`].
pub const LAG_BUCKETS: usize = SUB + OCTAVES * SUB;

/// Release lags in fixed logarithmic buckets of microseconds (exact below 4 µs, then four per
/// power of two): recording one is an index computation and an increment, never an
/// allocation. A percentile is the upper bound of the bucket it falls in (at most 25 % above
/// the true value, never below it).
#[derive(Clone, PartialEq, Eq)]
pub struct LagHist {
    counts: [u64; LAG_BUCKETS],
}

impl Default for LagHist {
    fn default() -> LagHist {
        LagHist {
            counts: [0; LAG_BUCKETS],
        }
    }
}

impl std::fmt::Debug for LagHist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LagHist(n={}, p50={}us, p99={}us)",
            self.count(),
            self.quantile_us(0.5),
            self.quantile_us(0.99)
        )
    }
}

/// The bucket of a lag of `us` microseconds.
fn bucket(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let g = 63 - us.leading_zeros() as usize; // floor(log2 us) ≥ 2
    let sub = ((us >> (g - 2)) & (SUB as u64 - 1)) as usize;
    (SUB + (g - 2) * SUB + sub).min(LAG_BUCKETS - 1)
}

/// The largest lag (µs) bucket `i` holds.
fn upper_us(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let g = (i - SUB) / SUB + 2;
    let sub = ((i - SUB) % SUB) as u64;
    ((SUB as u64 + sub + 1) << (g - 2)) - 1
}

impl LagHist {
    /// Counts one packet released `ns` nanoseconds after its scheduled time.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns / 1000)] += 1;
    }

    /// Packets counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `self + other`, bucket by bucket.
    pub fn add(&mut self, other: &LagHist) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// What was counted since `earlier` (a snapshot of the same histogram).
    pub fn since(&self, earlier: &LagHist) -> LagHist {
        let mut d = self.clone();
        for (a, b) in d.counts.iter_mut().zip(&earlier.counts) {
            *a = a.saturating_sub(*b);
        }
        d
    }

    /// The lag (µs) at or below which a fraction `q` of the packets left: the upper bound of
    /// the bucket holding the ⌈q·n⌉-th smallest lag; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper_us(i);
            }
        }
        upper_us(LAG_BUCKETS - 1)
    }
}

/// Longest spin before a release time. A `SCHED_FIFO` thread that spins keeps everything of
/// lower priority off its CPU, so the window stays short: at most 100 µs per release (and the
/// kernel's RT throttling, 95 % of each second by default, bounds the thread whatever it
/// does).
pub const MAX_SPIN: Duration = Duration::from_micros(100);
/// Wake-ups the spin window is sized from.
const SPIN_SAMPLES: usize = 32;

/// The spin window before each release time, sized from the thread's own wake-up latency:
/// how late its timed sleeps ended (the overshoot), over the last [`SPIN_SAMPLES`] sleeps that
/// ended on their timeout. The window is the 90th percentile of those overshoots, capped at
/// [`MAX_SPIN`]: the thread sleeps until that long before the release time and spins the rest.
#[derive(Debug, Clone)]
pub struct SpinSizer {
    ring: [u64; SPIN_SAMPLES],
    next: usize,
    filled: usize,
    window_ns: u64,
    cap_ns: u64,
}

impl SpinSizer {
    /// A sizer whose window never exceeds `cap` (0: never spin).
    pub fn new(cap: Duration) -> SpinSizer {
        SpinSizer {
            ring: [0; SPIN_SAMPLES],
            next: 0,
            filled: 0,
            window_ns: 0,
            cap_ns: cap.as_nanos() as u64,
        }
    }

    /// The window now, ns.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// Records one timed sleep that ended `overshoot_ns` after it was due; the window is
    /// re-sized every [`SPIN_SAMPLES`] samples (and after the first 8).
    pub fn record(&mut self, overshoot_ns: u64) {
        self.ring[self.next] = overshoot_ns;
        self.next = (self.next + 1) % SPIN_SAMPLES;
        self.filled = (self.filled + 1).min(SPIN_SAMPLES);
        if self.next == 0 || self.filled == 8 {
            let mut s = self.ring;
            let v = &mut s[..self.filled];
            v.sort_unstable();
            let p90 = v[(v.len() * 9).div_ceil(10) - 1];
            self.window_ns = p90.min(self.cap_ns);
        }
    }

    /// How to wait for a release at `due` (ns, the model's clock) when it is `now`: sleep for
    /// the first part (until `window` before `due`), then spin until `due`. `None` for `due`:
    /// nothing scheduled, sleep `max`.
    pub fn plan(&self, now: u64, due: Option<u64>, max: Duration) -> Wait {
        let max_ns = max.as_nanos() as u64;
        match due {
            None => Wait {
                sleep_ns: max_ns,
                spin_until: None,
            },
            Some(t) if t <= now => Wait {
                sleep_ns: 0,
                spin_until: None,
            },
            Some(t) => {
                let ahead = t - now;
                let sleep = ahead.saturating_sub(self.window_ns);
                if sleep > max_ns {
                    Wait {
                        sleep_ns: max_ns,
                        spin_until: None,
                    }
                } else {
                    Wait {
                        sleep_ns: sleep,
                        spin_until: (self.window_ns > 0).then_some(t),
                    }
                }
            }
        }
    }
}

/// One wait of a release thread ([`SpinSizer::plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// Sleep this long (ns) in `ppoll` (0: only look whether a packet is there).
    pub sleep_ns: u64,
    /// Then spin until this time (the model's clock), if the sleep ended on its timeout.
    pub spin_until: Option<u64>,
}

/// The scheduling class the release threads ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedClass {
    /// Not known (another driver, or the threads have not started).
    #[default]
    Unknown,
    /// The normal time-shared class (`SCHED_OTHER`): asked for by the levers, or the kernel
    /// refused `SCHED_FIFO` (not root).
    Other,
    /// `SCHED_FIFO` at [`FIFO_PRIORITY`].
    Fifo,
}

impl SchedClass {
    /// `fifo`, `other` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            SchedClass::Unknown => "unknown",
            SchedClass::Other => "other",
            SchedClass::Fifo => "fifo",
        }
    }

    /// As a stored metric (`emu_sched_fifo`): 1 for fifo, 0 for other, -1 unknown.
    pub fn metric(self) -> f64 {
        match self {
            SchedClass::Unknown => -1.0,
            SchedClass::Other => 0.0,
            SchedClass::Fifo => 1.0,
        }
    }

    /// From [`SchedClass::as_str`]'s code (the atomics of the driver).
    pub fn from_code(c: u8) -> SchedClass {
        match c {
            1 => SchedClass::Other,
            2 => SchedClass::Fifo,
            _ => SchedClass::Unknown,
        }
    }

    /// The code [`SchedClass::from_code`] reads.
    pub fn code(self) -> u8 {
        match self {
            SchedClass::Unknown => 0,
            SchedClass::Other => 1,
            SchedClass::Fifo => 2,
        }
    }
}

/// The real-time priority the release threads ask for: modest, below the kernel's threaded
/// interrupt handlers (50), above every normal task.
pub const FIFO_PRIORITY: i32 = 10;

/// The environment variable that turns the timekeeping levers off one by one
/// (for bench/emulator-under-load): a comma-separated list of `nofifo`, `nospin`, `mlock`,
/// `nobatchcap` (and their opposites).
pub const LEVERS_ENV: &str = "SOCKLAB_EMU_LEVERS";

/// What a release thread does to keep its schedule. The default is what measured better
/// under load (bench/emulator-under-load, docs/benchmarks.md): `SCHED_FIFO` where permitted
/// and the read-batch cap. The spin window took the median lag to 0 but did not improve the
/// tail (p99.9 1.0–1.1 ms with it, 0.2–0.9 ms without), cost CPU and changed no repetition's
/// validity: off unless asked for (`spin`). Locked memory changed nothing beyond the noise
/// (no swap here): off unless asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levers {
    /// Ask for `SCHED_FIFO` at [`FIFO_PRIORITY`].
    pub fifo: bool,
    /// Spin before release times, at most this long (zero: never).
    pub spin_cap: Duration,
    /// `mlockall` the process (as pages are touched).
    pub mlock: bool,
    /// End a read batch once a release is overdue (else a batch of up to 64 segments is read
    /// and modelled before anything due is released).
    pub batch_cap: bool,
}

impl Default for Levers {
    fn default() -> Levers {
        Levers {
            fifo: true,
            spin_cap: Duration::ZERO,
            mlock: false,
            batch_cap: true,
        }
    }
}

impl Levers {
    /// The levers `value` of [`LEVERS_ENV`] asks for; an unknown word is an error naming the
    /// choices.
    pub fn parse(value: &str) -> Result<Levers, LinkError> {
        let mut l = Levers::default();
        for w in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "fifo" => l.fifo = true,
                "nofifo" => l.fifo = false,
                "spin" => l.spin_cap = MAX_SPIN,
                "nospin" => l.spin_cap = Duration::ZERO,
                "mlock" => l.mlock = true,
                "nomlock" => l.mlock = false,
                "batchcap" => l.batch_cap = true,
                "nobatchcap" => l.batch_cap = false,
                other => {
                    return Err(LinkError::Invalid(format!(
                        "{LEVERS_ENV}: unknown lever '{other}': use a comma-separated list of fifo, nofifo, spin, nospin, mlock, nomlock, batchcap, nobatchcap"
                    )))
                }
            }
        }
        Ok(l)
    }

    /// The levers [`LEVERS_ENV`] asks for (the default when unset).
    pub fn from_env() -> Result<Levers, LinkError> {
        match std::env::var(LEVERS_ENV) {
            Err(_) => Ok(Levers::default()),
            Ok(v) => Levers::parse(&v),
        }
    }
}

/// When a repetition over the emulated link counts: at most `share` of the packets may leave
/// more than `lag` after their scheduled time, and at most `share` may be dropped by the kernel
/// in front of the emulator (the `link_valid` key, `--link-valid`; default `1% 1ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidRule {
    /// Largest share of late (or kernel-dropped) packets, parts per million.
    pub share_ppm: u32,
    /// A packet released later than this after its scheduled time is late, ns.
    pub lag_ns: u64,
}

impl Default for ValidRule {
    fn default() -> ValidRule {
        ValidRule {
            share_ppm: 10_000,
            lag_ns: 1_000_000,
        }
    }
}

/// The fix named by a bad `link_valid`.
pub const VALID_HELP: &str = "use SHARE LAG, e.g. '1% 1ms' (valid when at most SHARE of the packets leave more than LAG after their scheduled time)";

impl ValidRule {
    /// The share as a fraction.
    pub fn share(&self) -> f64 {
        f64::from(self.share_ppm) / 1e6
    }

    /// The lag, as text (`1ms`, `500us`).
    pub fn lag_text(&self) -> String {
        lag_text(self.lag_ns)
    }

    /// The rule in words, for the output.
    pub fn describe(&self) -> String {
        format!(
            "valid when at most {} of packets leave more than {} after their scheduled time",
            percent_text(self.share_ppm),
            lag_text(self.lag_ns)
        )
    }
}

fn percent_text(ppm: u32) -> String {
    let s = format!("{:.4}", f64::from(ppm) / 1e4);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

fn lag_text(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1000) {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}

impl std::fmt::Display for ValidRule {
    /// `1% 1ms`: what [`str::parse`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}",
            percent_text(self.share_ppm),
            lag_text(self.lag_ns)
        )
    }
}

impl std::str::FromStr for ValidRule {
    type Err = String;

    /// `SHARE LAG` in either order: a percentage (0–100 %) and a duration (`500us`, `1ms`,
    /// `2ms`; more than 0, at most 10 s). The error is the reason alone (the caller names
    /// the key and value).
    fn from_str(s: &str) -> Result<ValidRule, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let [a, b] = words[..] else {
            return Err(VALID_HELP.into());
        };
        let (pct, lag) = if a.ends_with('%') { (a, b) } else { (b, a) };
        let share: f64 = pct
            .strip_suffix('%')
            .and_then(|p| p.parse().ok())
            .filter(|p: &f64| (0.0..=100.0).contains(p))
            .ok_or_else(|| {
                format!("the share '{pct}' is not a percentage from 0% to 100%; {VALID_HELP}")
            })?;
        let lag_ns = parse_lag(lag)
            .filter(|&ns| ns > 0 && ns <= 10_000_000_000)
            .ok_or_else(|| {
                format!("the lag '{lag}' is not a duration from 1us to 10s; {VALID_HELP}")
            })?;
        Ok(ValidRule {
            share_ppm: (share * 1e4).round() as u32,
            lag_ns,
        })
    }
}

/// `500us`, `1ms`, `0.5ms`, `2s`, `100ns` → ns.
fn parse_lag(s: &str) -> Option<u64> {
    let i = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(i);
    let v: f64 = n.parse().ok()?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    (v.is_finite() && v >= 0.0).then(|| (v * scale).round() as u64)
}

/// CPUs a link's release threads can have to themselves: those of `online` not in `avoid`
/// (the measured endpoints' CPUs), when the machine has at least 4 CPUs and at least one is
/// left; `None` otherwise (no core is spare: the threads stay where the kernel puts them).
pub fn spare_cpus(online: &[usize], avoid: &[usize]) -> Option<Vec<usize>> {
    if online.len() < 4 || avoid.is_empty() {
        return None;
    }
    let spare: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !avoid.contains(c))
        .collect();
    (!spare.is_empty()).then_some(spare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_buckets_cover_every_lag_without_gaps_and_within_25_percent() {
        // Consecutive buckets: each starts right after the one before ends.
        assert_eq!(bucket(0), 0);
        for i in 1..LAG_BUCKETS {
            assert_eq!(bucket(upper_us(i - 1) + 1), i, "bucket {i}");
            assert_eq!(bucket(upper_us(i)), i, "bucket {i}");
        }
        for us in [4u64, 5, 100, 999, 1000, 1001, 65_000, 1_000_000] {
            let up = upper_us(bucket(us));
            assert!(up >= us && up as f64 <= us as f64 * 1.25, "{us} -> {up}");
        }
        // Past the last bucket: counted there, not lost.
        assert_eq!(bucket(u64::MAX / 1000), LAG_BUCKETS - 1);
    }

    #[test]
    fn the_histogram_quantiles_name_the_bucket_of_the_rank() {
        let mut h = LagHist::default();
        assert_eq!(h.quantile_us(0.5), 0);
        // 990 packets at 10 µs, 9 at 2 ms, 1 at 50 ms.
        for _ in 0..990 {
            h.record(10_000);
        }
        for _ in 0..9 {
            h.record(2_000_000);
        }
        h.record(50_000_000);
        assert_eq!(h.count(), 1000);
        assert_eq!(h.quantile_us(0.5), upper_us(bucket(10)));
        assert_eq!(h.quantile_us(0.99), upper_us(bucket(10)));
        assert_eq!(h.quantile_us(0.999), upper_us(bucket(2000)));
        assert_eq!(h.quantile_us(1.0), upper_us(bucket(50_000)));
        let before = h.clone();
        h.record(3_000);
        let d = h.since(&before);
        assert_eq!(d.count(), 1);
        assert_eq!(d.quantile_us(0.5), 3);
        let mut sum = before.clone();
        sum.add(&d);
        assert_eq!(sum, h);
    }

    #[test]
    fn the_spin_window_is_the_p90_of_the_overshoots_capped() {
        let mut s = SpinSizer::new(Duration::from_micros(100));
        assert_eq!(s.window_ns(), 0);
        // Sized after the first 8 samples: 7 at 20 µs and one outlier.
        for _ in 0..7 {
            s.record(20_000);
        }
        s.record(5_000_000);
        assert_eq!(
            s.window_ns(),
            100_000,
            "the outlier is the p90 of 8: capped"
        );
        // A full ring of 32: 29 at 30 µs, 3 at 5 ms: the p90 (29th) is 30 µs.
        for i in 0..32 {
            s.record(if i % 11 == 10 { 5_000_000 } else { 30_000 });
        }
        assert_eq!(s.window_ns(), 30_000);
        let never = SpinSizer::new(Duration::ZERO);
        let mut never = never;
        for _ in 0..32 {
            never.record(50_000);
        }
        assert_eq!(never.window_ns(), 0);
    }

    #[test]
    fn a_wait_sleeps_until_the_window_then_spins_to_the_release_time() {
        let mut s = SpinSizer::new(MAX_SPIN);
        for _ in 0..32 {
            s.record(40_000);
        }
        let max = Duration::from_millis(200);
        // Due in 1 ms: sleep 960 µs, spin to the release time.
        let w = s.plan(1_000_000, Some(2_000_000), max);
        assert_eq!(w.sleep_ns, 960_000);
        assert_eq!(w.spin_until, Some(2_000_000));
        // Due within the window: no sleep, spin.
        let w = s.plan(1_000_000, Some(1_010_000), max);
        assert_eq!((w.sleep_ns, w.spin_until), (0, Some(1_010_000)));
        // Already due: neither.
        assert_eq!(s.plan(5, Some(5), max).spin_until, None);
        // Far away or nothing due: the longest sleep, no spin.
        let w = s.plan(0, Some(10_000_000_000), max);
        assert_eq!((w.sleep_ns, w.spin_until), (200_000_000, None));
        assert_eq!(s.plan(0, None, max).sleep_ns, 200_000_000);
        // Without a window, the sleep runs to the release time.
        let w = SpinSizer::new(Duration::ZERO).plan(0, Some(1_000), max);
        assert_eq!((w.sleep_ns, w.spin_until), (1_000, None));
    }

    #[test]
    fn the_rule_parses_either_order_and_prints_back() {
        let r: ValidRule = "1% 1ms".parse().unwrap();
        assert_eq!(r, ValidRule::default());
        assert_eq!(r.to_string(), "1% 1ms");
        let r: ValidRule = "500us 0.1%".parse().unwrap();
        assert_eq!((r.share_ppm, r.lag_ns), (1000, 500_000));
        assert_eq!(r.to_string(), "0.1% 500us");
        assert_eq!(r.to_string().parse::<ValidRule>().unwrap(), r);
        assert_eq!(
            ValidRule::default().describe(),
            "valid when at most 1% of packets leave more than 1ms after their scheduled time"
        );
        for bad in [
            "", "1%", "1% 1ms 2", "x 1ms", "101% 1ms", "1% 0ms", "1% 1mb", "1% 11s",
        ] {
            let e = bad.parse::<ValidRule>().unwrap_err();
            assert!(
                e.contains("e.g. '1% 1ms'") && !e.contains('\n'),
                "{bad}: {e}"
            );
        }
        assert!("5% 1h"
            .parse::<ValidRule>()
            .unwrap_err()
            .starts_with("the lag '1h'"));
    }

    #[test]
    fn levers_parse_and_name_the_choices_on_a_bad_word() {
        assert_eq!(Levers::parse("").unwrap(), Levers::default());
        // The default: what measured better (real-time class, batch cap), not the spin.
        let d = Levers::default();
        assert!(d.fifo && d.batch_cap && !d.mlock && d.spin_cap.is_zero());
        assert_eq!(Levers::parse("spin").unwrap().spin_cap, MAX_SPIN);
        let l = Levers::parse("nofifo, nospin,mlock,nobatchcap").unwrap();
        assert_eq!(
            l,
            Levers {
                fifo: false,
                spin_cap: Duration::ZERO,
                mlock: true,
                batch_cap: false,
            }
        );
        let e = Levers::parse("turbo").unwrap_err().to_string();
        assert!(e.contains("'turbo'") && e.contains("nofifo"), "{e}");
    }

    #[test]
    fn spare_cpus_only_with_four_cpus_and_one_left() {
        assert_eq!(spare_cpus(&[0, 1], &[0]), None);
        assert_eq!(spare_cpus(&[0, 1, 2, 3], &[]), None);
        assert_eq!(spare_cpus(&[0, 1, 2, 3], &[0, 1]), Some(vec![2, 3]));
        assert_eq!(spare_cpus(&[0, 1, 2, 3], &[0, 1, 2, 3]), None);
    }

    #[test]
    fn sched_class_codes_round_trip() {
        for c in [SchedClass::Unknown, SchedClass::Other, SchedClass::Fifo] {
            assert_eq!(SchedClass::from_code(c.code()), c);
        }
        assert_eq!(SchedClass::Fifo.metric(), 1.0);
    }
}
