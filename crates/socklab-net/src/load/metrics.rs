//! Summaries of the generator's HDR histograms: min, mean, sd, median, max and the wrk2
//! percentiles, in microseconds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The percentiles wrk2 prints, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// 50th.
    pub p50_us: f64,
    /// 75th.
    pub p75_us: f64,
    /// 90th.
    pub p90_us: f64,
    /// 99th.
    pub p99_us: f64,
    /// 99.9th.
    pub p99_9_us: f64,
    /// 99.99th.
    pub p99_99_us: f64,
}

impl Percentiles {
    /// The percentiles as (label, value) pairs, in order.
    pub fn rows(&self) -> [(&'static str, f64); 6] {
        [
            ("50%", self.p50_us),
            ("75%", self.p75_us),
            ("90%", self.p90_us),
            ("99%", self.p99_us),
            ("99.9%", self.p99_9_us),
            ("99.99%", self.p99_99_us),
        ]
    }
}

/// One timing's summary (ab's min/mean/[+/-sd]/median/max plus the HDR percentiles), in
/// microseconds; all zero when `count` is 0. Values carry the histogram's 3 significant digits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Values recorded.
    pub count: u64,
    /// Smallest.
    pub min_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Standard deviation (population, as HdrHistogram computes it).
    pub sd_us: f64,
    /// Median.
    pub median_us: f64,
    /// Largest.
    pub max_us: f64,
    /// Percentiles.
    pub percentiles: Percentiles,
}

impl Timing {
    /// The summary of a histogram of nanoseconds.
    pub fn from_ns(h: &Histogram<u64>) -> Timing {
        if h.is_empty() {
            return Timing::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let q = |p: f64| us(h.value_at_quantile(p));
        Timing {
            count: h.len(),
            min_us: us(h.min()),
            mean_us: h.mean() / 1000.0,
            sd_us: h.stdev() / 1000.0,
            median_us: q(0.5),
            max_us: us(h.max()),
            percentiles: Percentiles {
                p50_us: q(0.5),
                p75_us: q(0.75),
                p90_us: q(0.90),
                p99_us: q(0.99),
                p99_9_us: q(0.999),
                p99_99_us: q(0.9999),
            },
        }
    }
}

/// A histogram of nanoseconds from 1 ns to 60 s at 3 significant digits, sized up front so that
/// recording does not allocate (it grows, allocating, only for longer values).
pub fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3)
        .expect("1 ns .. 60 s at 3 significant figures is a valid histogram");
    h.auto(true);
    h
}

/// Records `ns` (at least 1), saturating past the range.
pub fn record(h: &mut Histogram<u64>, ns: u64) {
    let ns = ns.max(1);
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_histogram_is_all_zero() {
        assert_eq!(Timing::from_ns(&histogram()), Timing::default());
    }

    #[test]
    fn summary_of_known_values() {
        let mut h = histogram();
        for v in 1..=1000u64 {
            record(&mut h, v * 1000); // 1..=1000 us
        }
        let t = Timing::from_ns(&h);
        assert_eq!(t.count, 1000);
        assert!((t.min_us - 1.0).abs() < 0.01, "{t:?}");
        assert!((t.max_us - 1000.0).abs() < 1.0, "{t:?}");
        assert!((t.mean_us - 500.5).abs() < 1.0, "{t:?}");
        assert!((t.median_us - 500.0).abs() < 1.0, "{t:?}");
        assert!((t.percentiles.p90_us - 900.0).abs() < 1.0, "{t:?}");
        assert!((t.percentiles.p99_us - 990.0).abs() < 1.0, "{t:?}");
        // sd of 1..=1000 (population) = sqrt((n^2-1)/12) = 288.67
        assert!((t.sd_us - 288.67).abs() < 1.0, "{t:?}");
        let rows = t.percentiles.rows();
        assert!(rows.windows(2).all(|w| w[0].1 <= w[1].1));
    }

    #[test]
    fn zero_and_huge_values_are_recorded() {
        let mut h = histogram();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
    }
}
