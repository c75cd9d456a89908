//! Descriptive statistics of a sample: mean, standard deviation, quantiles,
//! Student-t confidence intervals and the [`Summary`] record.
//!
//! All functions return `None` for an empty sample or when any value is not
//! finite (`NaN` or `±inf`), so a single bad measurement can never silently
//! poison a summary.

use serde::{Deserialize, Serialize};

use crate::student_t::upper_quantile;

/// Summary of a sample. `sd` and the confidence intervals are `None` when
/// `n < 2`.
///
/// Serialized (JSON), `ci95_lo`/`ci95_hi` are the interval a report draws ([`Summary::ci95`])
/// and `ci95_method` names which one it is; the symmetric Student-t interval is
/// `ci95_t_half`/`ci95_t_lo`/`ci95_t_hi` and the log-scale one `ci95_log_lo`/`ci95_log_hi`,
/// each named for what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "SummaryRecord", from = "SummaryRecord")]
pub struct Summary {
    /// Number of observations.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (`n - 1` denominator); `None` if `n < 2`.
    pub sd: Option<f64>,
    /// Half width of the symmetric 95% Student-t confidence interval of the mean,
    /// `t_{0.975, n-1} * sd / sqrt(n)`; `None` if `n < 2`. Not necessarily the interval a
    /// report draws: that is [`Summary::ci95`].
    pub ci95_t_half: Option<f64>,
    /// `mean - ci95_t_half` (below zero for non-negative data with a wide spread).
    pub ci95_t_lo: Option<f64>,
    /// `mean + ci95_t_half`.
    pub ci95_t_hi: Option<f64>,
    /// Lower end of the 95% Student-t interval on the log scale, back-transformed
    /// (`exp(m - h)` with `m`, `h` the mean and half-width of `ln x`): only when every value
    /// is strictly positive and `n >= 2`. Never negative.
    pub ci95_log_lo: Option<f64>,
    /// Upper end of that interval (`exp(m + h)`).
    pub ci95_log_hi: Option<f64>,
    /// Smallest observation.
    pub min: f64,
    /// Median (type-7 quantile at 0.5, i.e. the mean of the two middle
    /// values for even `n`).
    pub median: f64,
    /// Largest observation.
    pub max: f64,
    /// Coefficient of variation `sd / |mean|`; `None` if `n < 2` or
    /// `mean == 0`.
    pub cv: Option<f64>,
}

/// Which 95% interval [`Summary::ci95`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiMethod {
    /// The symmetric Student-t interval `mean ± t sd / sqrt(n)`.
    StudentT,
    /// The Student-t interval of the logarithms, back-transformed (strictly positive data
    /// whose symmetric interval would reach below zero).
    LogT,
    /// The symmetric Student-t interval truncated at zero (non-negative data with zeros whose
    /// symmetric interval would reach below zero).
    StudentTTruncated,
}

impl CiMethod {
    /// The name it is serialized as (`student_t`, `log_t`, `student_t_truncated`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CiMethod::StudentT => "student_t",
            CiMethod::LogT => "log_t",
            CiMethod::StudentTTruncated => "student_t_truncated",
        }
    }
}

/// The serialized form of a [`Summary`]: the drawn interval under the plain names, every
/// other interval under its own.
#[derive(Serialize, Deserialize)]
struct SummaryRecord {
    n: usize,
    mean: f64,
    sd: Option<f64>,
    /// The interval a report draws ([`Summary::ci95`]).
    #[serde(default)]
    ci95_lo: Option<f64>,
    #[serde(default)]
    ci95_hi: Option<f64>,
    #[serde(default)]
    ci95_method: Option<CiMethod>,
    #[serde(default)]
    ci95_t_half: Option<f64>,
    #[serde(default)]
    ci95_t_lo: Option<f64>,
    #[serde(default)]
    ci95_t_hi: Option<f64>,
    #[serde(default)]
    ci95_log_lo: Option<f64>,
    #[serde(default)]
    ci95_log_hi: Option<f64>,
    min: f64,
    median: f64,
    max: f64,
    cv: Option<f64>,
}

impl From<Summary> for SummaryRecord {
    fn from(s: Summary) -> SummaryRecord {
        let drawn = s.ci95();
        SummaryRecord {
            n: s.n,
            mean: s.mean,
            sd: s.sd,
            ci95_lo: drawn.map(|c| c.0),
            ci95_hi: drawn.map(|c| c.1),
            ci95_method: s.ci95_method(),
            ci95_t_half: s.ci95_t_half,
            ci95_t_lo: s.ci95_t_lo,
            ci95_t_hi: s.ci95_t_hi,
            ci95_log_lo: s.ci95_log_lo,
            ci95_log_hi: s.ci95_log_hi,
            min: s.min,
            median: s.median,
            max: s.max,
            cv: s.cv,
        }
    }
}

impl From<SummaryRecord> for Summary {
    /// The intervals are read from their own fields; the drawn one follows from them.
    fn from(r: SummaryRecord) -> Summary {
        Summary {
            n: r.n,
            mean: r.mean,
            sd: r.sd,
            ci95_t_half: r.ci95_t_half,
            ci95_t_lo: r.ci95_t_lo,
            ci95_t_hi: r.ci95_t_hi,
            ci95_log_lo: r.ci95_log_lo,
            ci95_log_hi: r.ci95_log_hi,
            min: r.min,
            median: r.median,
            max: r.max,
            cv: r.cv,
        }
    }
}

impl Summary {
    /// The 95% confidence interval to report: the symmetric Student-t interval
    /// (`ci95_t_lo`, `ci95_t_hi`), unless the data cannot be negative (every value ≥ 0) and that
    /// interval would reach below zero. Then: the log-scale interval (`ci95_log_lo`,
    /// `ci95_log_hi`) when every value is strictly positive (asymmetric, never below zero);
    /// with zeros among the values (counts such as retransmissions), where logarithms do not
    /// exist, the Student-t interval truncated at zero, `(0, ci95_t_hi)`. A narrow interval
    /// keeps its familiar `mean ± h` form.
    #[must_use]
    pub fn ci95(&self) -> Option<(f64, f64)> {
        if self.ci95_is_log() {
            Some((self.ci95_log_lo?, self.ci95_log_hi?))
        } else if self.ci95_is_truncated() {
            Some((0.0, self.ci95_t_hi?))
        } else {
            Some((self.ci95_t_lo?, self.ci95_t_hi?))
        }
    }

    /// Which interval [`Self::ci95`] is; `None` when there is none (`n < 2`).
    #[must_use]
    pub fn ci95_method(&self) -> Option<CiMethod> {
        self.ci95()?;
        Some(if self.ci95_is_log() {
            CiMethod::LogT
        } else if self.ci95_is_truncated() {
            CiMethod::StudentTTruncated
        } else {
            CiMethod::StudentT
        })
    }

    /// Whether [`Self::ci95`] is the log-scale interval (asymmetric, printed `lo–hi`).
    #[must_use]
    pub fn ci95_is_log(&self) -> bool {
        self.ci95_log_lo.is_some() && self.ci95_t_lo.is_some_and(|lo| lo < 0.0)
    }

    /// Whether [`Self::ci95`] is the symmetric interval truncated at zero (non-negative data
    /// with zeros whose interval would reach below zero).
    #[must_use]
    pub fn ci95_is_truncated(&self) -> bool {
        !self.ci95_is_log() && self.min >= 0.0 && self.ci95_t_lo.is_some_and(|lo| lo < 0.0)
    }

    /// Whether [`Self::ci95`] is not `mean ± h` (printed `lo–hi`).
    #[must_use]
    pub fn ci95_is_asymmetric(&self) -> bool {
        self.ci95_is_log() || self.ci95_is_truncated()
    }
}

/// A validated sample: all values finite, at least one value.
struct Sample<'a> {
    xs: &'a [f64],
    min: f64,
    max: f64,
}

impl<'a> Sample<'a> {
    fn new(xs: &'a [f64]) -> Option<Self> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let (min, max) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        Some(Sample { xs, min, max })
    }

    /// Exact power-of-two factor that brings the largest magnitude near 1
    /// when the data are so large or small that squares could overflow or
    /// underflow; `1` otherwise. Multiplying by it is exact.
    fn scale(&self) -> f64 {
        let max_abs = self.min.abs().max(self.max.abs());
        if max_abs == 0.0 {
            return 1.0;
        }
        let e = max_abs.log2().floor();
        if e.abs() > 500.0 {
            2f64.powi(-(e.clamp(-1000.0, 1000.0) as i32))
        } else {
            1.0
        }
    }

    /// Mean via Neumaier-compensated summation (on exactly rescaled values
    /// to rule out overflow), clamped into `[min, max]`, where the true mean
    /// must lie.
    fn mean(&self) -> f64 {
        if self.min == self.max {
            return self.min;
        }
        let k = self.scale();
        let m = neumaier_sum(self.xs.iter().map(|&x| x * k)) / self.xs.len() as f64 / k;
        m.clamp(self.min, self.max)
    }

    /// Sample standard deviation (`n - 1` denominator) by the corrected
    /// two-pass algorithm (Chan, Golub & LeVeque 1983):
    /// `var = (Σ d_i^2 - (Σ d_i)^2 / n) / (n - 1)` with `d_i = x_i - mean`.
    fn std_dev(&self, mean: f64) -> Option<f64> {
        let n = self.xs.len();
        if n < 2 {
            return None;
        }
        if self.min == self.max {
            return Some(0.0);
        }
        let k = self.scale();
        let m = mean * k;
        let mut sum_d = 0.0;
        let mut sum_d2 = 0.0;
        for &x in self.xs {
            let d = x * k - m;
            sum_d += d;
            sum_d2 += d * d;
        }
        let nf = n as f64;
        let ss = (sum_d2 - sum_d * sum_d / nf).max(0.0);
        Some((ss / (nf - 1.0)).sqrt() / k)
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.xs.to_vec();
        v.sort_by(f64::total_cmp);
        v
    }
}

/// Neumaier's improved Kahan summation.
fn neumaier_sum(values: impl Iterator<Item = f64>) -> f64 {
    let mut sum = 0.0_f64;
    let mut comp = 0.0_f64;
    for v in values {
        let t = sum + v;
        if sum.abs() >= v.abs() {
            comp += (sum - t) + v;
        } else {
            comp += (v - t) + sum;
        }
        sum = t;
    }
    sum + comp
}

/// Type-7 quantile of an already sorted, non-empty slice (`q` in `[0, 1]`).
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let h = (n - 1) as f64 * q;
    let lo = (h.floor() as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    let frac = h - lo as f64;
    lerp(sorted[lo], sorted[hi], frac)
}

/// Linear interpolation as numpy does it (`a + (b-a) t` for `t < 1/2`,
/// `b - (b-a)(1-t)` otherwise), so the endpoints are reproduced exactly;
/// the result is kept within `[a, b]`.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    if t == 0.0 || a == b {
        return a;
    }
    let diff = b - a;
    let v = if !diff.is_finite() {
        a * (1.0 - t) + b * t
    } else if t < 0.5 {
        a + diff * t
    } else {
        b - diff * (1.0 - t)
    };
    v.clamp(a.min(b), a.max(b))
}

/// Half width of the two-sided Student-t confidence interval of the mean at
/// confidence `level` for `n` observations with standard deviation `sd`.
fn ci_half_width(sd: f64, n: usize, level: f64) -> f64 {
    let alpha_half = 0.5 * (1.0 - level);
    upper_quantile(alpha_half, (n - 1) as f64) * sd / (n as f64).sqrt()
}

/// Arithmetic mean. `None` for an empty slice or any non-finite value.
///
/// Uses compensated (Neumaier) summation; never overflows for finite input.
#[must_use]
pub fn mean(xs: &[f64]) -> Option<f64> {
    Sample::new(xs).map(|s| s.mean())
}

/// Sample standard deviation with the `n - 1` (Bessel) denominator.
///
/// `None` if `n < 2` or any value is non-finite. Computed with the corrected
/// two-pass algorithm, which is numerically stable (no catastrophic
/// cancellation for data with a large offset); a constant sample gives
/// exactly `0`.
#[must_use]
pub fn std_dev(xs: &[f64]) -> Option<f64> {
    let s = Sample::new(xs)?;
    s.std_dev(s.mean())
}

/// Sample quantile by linear interpolation between order statistics
/// (Hyndman & Fan type 7, numpy's default `linear` method and R's default):
/// with sorted values `x_0 <= ... <= x_{n-1}` and `h = (n - 1) q`, the result
/// is `x_⌊h⌋ + (h - ⌊h⌋) (x_⌊h⌋+1 - x_⌊h⌋)`.
///
/// `None` for an empty slice, any non-finite value, or `q` outside `[0, 1]`.
#[must_use]
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if !(0.0..=1.0).contains(&q) {
        return None;
    }
    let s = Sample::new(xs)?;
    Some(quantile_sorted(&s.sorted(), q))
}

/// Median, i.e. [`quantile`] at `q = 0.5`. `None` for an empty slice or any
/// non-finite value.
#[must_use]
pub fn median(xs: &[f64]) -> Option<f64> {
    quantile(xs, 0.5)
}

/// Two-sided Student-t confidence interval `(lo, hi)` for the mean at
/// confidence `level` (e.g. `0.95`):
/// `mean ± t_{(1+level)/2, n-1} * sd / sqrt(n)`.
///
/// `None` if `n < 2`, any value is non-finite, or `level` is not strictly
/// between 0 and 1.
#[must_use]
pub fn confidence_interval(xs: &[f64], level: f64) -> Option<(f64, f64)> {
    if level.is_nan() || level <= 0.0 || level >= 1.0 {
        return None;
    }
    let s = Sample::new(xs)?;
    let m = s.mean();
    let sd = s.std_dev(m)?;
    let h = ci_half_width(sd, xs.len(), level);
    Some((m - h, m + h))
}

/// Two-sided Student-t confidence interval at confidence `level` computed on the
/// logarithms of the data and back-transformed: `(exp(m - h), exp(m + h))` with `m` the mean
/// of `ln x` and `h = t_{(1+level)/2, n-1} sd(ln x) / sqrt(n)`. It is an interval for the
/// geometric mean (the median of a log-normal quantity), asymmetric, and never below zero.
///
/// `None` if `n < 2`, any value is not strictly positive or not finite, or `level` is not
/// strictly between 0 and 1.
#[must_use]
pub fn log_confidence_interval(xs: &[f64], level: f64) -> Option<(f64, f64)> {
    if xs.iter().any(|&x| x.is_nan() || x <= 0.0) {
        return None;
    }
    let ln: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
    let (lo, hi) = confidence_interval(&ln, level)?;
    Some((lo.exp(), hi.exp()))
}

/// Computes a [`Summary`] of the sample. `None` for an empty slice or when
/// any value is non-finite.
#[must_use]
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let s = Sample::new(xs)?;
    let n = xs.len();
    let mean = s.mean();
    let sd = s.std_dev(mean);
    let sorted = s.sorted();
    let ci95_t_half = sd.map(|sd| ci_half_width(sd, n, 0.95));
    let log_ci = log_confidence_interval(xs, 0.95);
    let cv = match sd {
        Some(sd) if mean != 0.0 => Some(sd / mean.abs()),
        _ => None,
    };
    Some(Summary {
        n,
        mean,
        sd,
        ci95_t_half,
        ci95_t_lo: ci95_t_half.map(|h| mean - h),
        ci95_t_hi: ci95_t_half.map(|h| mean + h),
        ci95_log_lo: log_ci.map(|c| c.0),
        ci95_log_hi: log_ci.map(|c| c.1),
        min: s.min,
        median: quantile_sorted(&sorted, 0.5),
        max: s.max,
        cv,
    })
}

/// Relative change `(x - base) / |base|`.
///
/// `None` if `base == 0` or either value is non-finite.
#[must_use]
pub fn relative_change(base: f64, x: f64) -> Option<f64> {
    if base == 0.0 || !base.is_finite() || !x.is_finite() {
        return None;
    }
    Some((x - base) / base.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_data_with_a_huge_spread_never_get_a_negative_lower_bound() {
        let xs = [0.2, 0.3, 40.0];
        let s = summarize(&xs).unwrap();
        assert!(
            s.ci95_t_lo.unwrap() < 0.0,
            "the symmetric interval crosses zero"
        );
        let (lo, hi) = s.ci95().unwrap();
        assert!(lo > 0.0, "lower bound {lo}");
        assert!(lo < s.median && hi > s.mean, "{lo}..{hi}");
        assert!(s.ci95_is_log());
        // The back-transformed log interval: exp(mean(ln x) ± t sd(ln x) / sqrt(n)).
        let ln: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
        let (m, sd) = (mean(&ln).unwrap(), std_dev(&ln).unwrap());
        let h = 4.302_652_729_911_275 * sd / 3f64.sqrt();
        assert!((lo - (m - h).exp()).abs() < 1e-9 * lo);
        assert!((hi - (m + h).exp()).abs() < 1e-9 * hi);
        assert_eq!(log_confidence_interval(&xs, 0.95), Some((lo, hi)));
        assert_eq!((s.ci95_log_lo, s.ci95_log_hi), (Some(lo), Some(hi)));
    }

    #[test]
    fn the_log_interval_is_none_unless_every_value_is_positive() {
        assert_eq!(log_confidence_interval(&[0.0, 1.0, 2.0], 0.95), None);
        assert_eq!(log_confidence_interval(&[-1.0, 1.0, 2.0], 0.95), None);
        assert_eq!(log_confidence_interval(&[1.0], 0.95), None);
        let (lo, hi) = log_confidence_interval(&[1e-6, 1e-3, 1e3, 1e6], 0.95).unwrap();
        assert!(lo > 0.0 && hi.is_finite() && lo < hi);
        // Every reported lower bound of positive data is positive, whatever the spread.
        for k in 1..30 {
            let xs = [1.0, 1.0 + k as f64, 10f64.powi(k)];
            let (lo, _) = summarize(&xs).unwrap().ci95().unwrap();
            assert!(lo >= 0.0, "{xs:?}: {lo}");
        }
    }

    #[test]
    fn a_narrow_interval_keeps_the_symmetric_student_t_form() {
        let xs = [9.0, 10.0, 11.0, 10.5, 9.5];
        let s = summarize(&xs).unwrap();
        let h = s.ci95_t_half.unwrap();
        assert!(!s.ci95_is_log());
        assert_eq!(s.ci95(), Some((s.mean - h, s.mean + h)));
        // Data that can be negative keep it even when it crosses zero.
        let s = summarize(&[-5.0, 1.0, 20.0]).unwrap();
        assert!(!s.ci95_is_log() && s.ci95().unwrap().0 < 0.0);
        assert_eq!(s.ci95_log_lo, None);
    }

    #[test]
    fn counts_with_zeros_get_an_interval_truncated_at_zero() {
        let s = summarize(&[0.0, 0.0, 0.0, 9.0]).unwrap();
        assert!(
            s.ci95_t_lo.unwrap() < 0.0,
            "the symmetric interval crosses zero"
        );
        assert!(s.ci95_log_lo.is_none(), "no logarithm of zero");
        assert!(s.ci95_is_truncated() && s.ci95_is_asymmetric());
        let (lo, hi) = s.ci95().unwrap();
        assert_eq!(lo, 0.0);
        assert_eq!(hi, s.ci95_t_hi.unwrap());
        // Data that can be negative keep the symmetric interval.
        let d = summarize(&[-5.0, 0.0, 5.0, 1.0]).unwrap();
        assert!(!d.ci95_is_asymmetric());
        assert_eq!(d.ci95(), Some((d.ci95_t_lo.unwrap(), d.ci95_t_hi.unwrap())));
    }
}
