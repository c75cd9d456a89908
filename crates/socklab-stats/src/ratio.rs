//! The ratio of two means with Fieller's 95% interval, and the repetitions a difference
//! would need before Welch's test could call it.
//!
//! Why Fieller and not the delta method on log means: Fieller's interval is exact for
//! normal means (with the Welch–Satterthwaite degrees of freedom it is approximate only in
//! the df), it needs no positivity, and its one failure mode is the honest one: when the
//! denominator's mean is not distinguishable from zero, the set of plausible ratios is not
//! a bounded interval, and Fieller says so instead of inventing a bound. Its lower bound is
//! negative exactly when the numerator's mean is not distinguishable from zero; for
//! non-negative data that bound is clamped to 0 (a ratio of non-negative means cannot be
//! negative).

use serde::{Deserialize, Serialize};

use crate::student_t::student_t_quantile;
use crate::summary::{mean, std_dev};

/// Fieller's 95% interval of `mean(b) / mean(a)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RatioInterval {
    /// A bounded interval `[lo, hi]`.
    Bounded {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
    /// No bounded interval: `mean(a)` is not distinguishable from zero at the 95% level.
    Unbounded,
}

/// The ratio of means `mean(b) / mean(a)` with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// `mean(b) / mean(a)` (infinite or NaN when `mean(a) = 0`; then the interval is
    /// unbounded).
    pub ratio: f64,
    /// Fieller's 95% interval.
    pub interval: RatioInterval,
    /// Welch–Satterthwaite degrees of freedom of `b - ratio · a`.
    pub df: f64,
}

/// The ratio of means `mean(b) / mean(a)` of two independent samples with Fieller's 95%
/// interval.
///
/// With `m_a, m_b` the means, `v_a = s_a^2/n_a`, `v_b = s_b^2/n_b` the squared standard
/// errors, `r = m_b / m_a`, `t = t_{0.975, df}` and `g = t^2 v_a / m_a^2`:
///
/// * `g >= 1` (`|m_a| <= t sqrt(v_a)`: `m_a` not distinguishable from 0): unbounded;
/// * otherwise `(r ± (t / |m_a|) sqrt(v_b (1 - g) + r^2 v_a)) / (1 - g)`,
///
/// with `df = (v_b + r^2 v_a)^2 / (v_b^2/(n_b-1) + r^4 v_a^2/(n_a-1))` (Welch–Satterthwaite
/// for `b - r a`; `n_a + n_b - 2` when both samples are constant). When `m_a > 0` and no
/// value of `b` is negative, the lower end is at least 0.
///
/// `None` when either sample has fewer than two values or a non-finite one.
#[must_use]
pub fn ratio_of_means(a: &[f64], b: &[f64]) -> Option<Ratio> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(a)?, mean(b)?);
    let (sa, sb) = (std_dev(a)?, std_dev(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (sa * sa / na, sb * sb / nb);
    if ma == 0.0 {
        let df = na + nb - 2.0;
        return Some(Ratio {
            ratio: mb / ma,
            interval: RatioInterval::Unbounded,
            df,
        });
    }
    let r = mb / ma;
    let var = vb + r * r * va;
    let df = if var > 0.0 {
        var * var / (vb * vb / (nb - 1.0) + (r * r * va) * (r * r * va) / (na - 1.0))
    } else {
        na + nb - 2.0
    };
    if !r.is_finite() || !df.is_finite() {
        return None;
    }
    let t = student_t_quantile(0.975, df);
    let g = t * t * va / (ma * ma);
    if g >= 1.0 {
        return Some(Ratio {
            ratio: r,
            interval: RatioInterval::Unbounded,
            df,
        });
    }
    let half = t / ma.abs() * (vb * (1.0 - g) + r * r * va).sqrt();
    let (mut lo, hi) = ((r - half) / (1.0 - g), (r + half) / (1.0 - g));
    if ma > 0.0 && b.iter().all(|&x| x >= 0.0) {
        lo = lo.max(0.0);
    }
    Some(Ratio {
        ratio: r,
        interval: RatioInterval::Bounded { lo, hi },
        df,
    })
}

/// The repetitions per side (at most `max`) at which Welch's test would find the
/// difference of `a` and `b` significant at 5% if their means and standard deviations
/// held: the smallest `n` with `t_{0.975, df(n)} sqrt((s_a^2 + s_b^2)/n) < |m_b - m_a|`.
///
/// `None` when the means are equal, a sample has fewer than two values or a non-finite
/// one, or no `n <= max` decides.
#[must_use]
pub fn welch_n_to_decide(a: &[f64], b: &[f64], max: usize) -> Option<usize> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let d = (mean(b)? - mean(a)?).abs();
    let (va, vb) = (std_dev(a)?.powi(2), std_dev(b)?.powi(2));
    if d == 0.0 || !d.is_finite() {
        return None;
    }
    let s2 = va + vb;
    if s2 == 0.0 {
        return Some(2);
    }
    (2..=max).find(|&n| {
        let nf = n as f64;
        let df = s2 * s2 * (nf - 1.0) / (va * va + vb * vb);
        student_t_quantile(0.975, df) * (s2 / nf).sqrt() < d
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(r: &Ratio) -> (f64, f64) {
        match r.interval {
            RatioInterval::Bounded { lo, hi } => (lo, hi),
            RatioInterval::Unbounded => panic!("unbounded: {r:?}"),
        }
    }

    #[test]
    fn a_halving_is_a_ratio_of_one_half_with_an_interval_around_it() {
        let a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let b = [50.0, 51.0, 49.0, 50.5, 49.5];
        let r = ratio_of_means(&a, &b).unwrap();
        assert!((r.ratio - 0.5).abs() < 1e-12);
        let (lo, hi) = bounds(&r);
        assert!(lo < 0.5 && 0.5 < hi && lo > 0.47 && hi < 0.53, "{lo} {hi}");
    }

    #[test]
    fn constant_samples_give_a_point_interval() {
        let r = ratio_of_means(&[2.0, 2.0, 2.0], &[3.0, 3.0]).unwrap();
        assert_eq!(bounds(&r), (1.5, 1.5));
        assert_eq!(r.df, 3.0);
    }

    #[test]
    fn a_denominator_not_distinguishable_from_zero_is_unbounded() {
        let r = ratio_of_means(&[-1.0, 1.0, 2.0, -2.0, 0.5], &[10.0, 11.0, 9.0]).unwrap();
        assert_eq!(r.interval, RatioInterval::Unbounded);
        let r = ratio_of_means(&[0.0, 0.0], &[1.0, 2.0]).unwrap();
        assert_eq!(r.interval, RatioInterval::Unbounded);
    }

    #[test]
    fn a_numerator_near_zero_clamps_the_lower_end_at_zero_for_positive_data() {
        let a = [10.0, 10.1, 9.9, 10.0];
        let b = [0.01, 5.0, 0.02, 0.03];
        let r = ratio_of_means(&a, &b).unwrap();
        let (lo, hi) = bounds(&r);
        assert_eq!(lo, 0.0);
        assert!(hi > r.ratio);
    }

    #[test]
    fn too_few_or_bad_values_give_none() {
        assert!(ratio_of_means(&[1.0], &[1.0, 2.0]).is_none());
        assert!(ratio_of_means(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
        assert!(welch_n_to_decide(&[1.0], &[1.0, 2.0], 100).is_none());
    }

    #[test]
    fn the_repetitions_to_decide_shrink_as_the_difference_grows() {
        let a = [10.0, 11.0, 9.0];
        let small = welch_n_to_decide(&a, &[10.5, 11.5, 9.5], 10_000).unwrap();
        let large = welch_n_to_decide(&a, &[12.0, 13.0, 11.0], 10_000).unwrap();
        assert!(large < small, "{large} {small}");
        // At that n, Welch's test of samples with these means and deviations is significant.
        let n = large;
        let ext = |m: f64| -> Vec<f64> {
            (0..n)
                .map(|i| m + if i % 2 == 0 { 1.0 } else { -1.0 })
                .collect()
        };
        let (xa, xb) = (ext(10.0), ext(12.0));
        assert!(crate::welch(&xa, &xb).unwrap().p_value < 0.05);
        assert_eq!(welch_n_to_decide(&a, &a, 100), None);
    }
}
