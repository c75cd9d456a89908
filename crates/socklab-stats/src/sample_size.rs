//! How many repetitions per group a two-sample t-test needs to detect a difference.
//!
//! The repetitions per group `n` are the smallest for which
//! `t(1 − α/2, 2n − 2) + t(power, 2n − 2) ≤ |δ| / s · √(n / 2)` (the shifted central-t
//! approximation of the noncentral t's power, as in Cohen, *Statistical Power Analysis for the
//! Behavioral Sciences*, 2nd ed., table 2.4.1), δ the difference of means and `s` the pooled
//! standard deviation. It gives Cohen's table values (d = 0.5: 64 per group; d = 0.8: 26).

use crate::student_t_quantile;

/// The most repetitions per group [`two_sample_n`] searches; a larger need is `None` (no
/// number of repetitions worth running would decide it).
pub const MAX_SAMPLE_SIZE: usize = 1_000_000;

/// The pooled standard deviation of two samples of sizes `n1`, `n2` with standard
/// deviations `s1`, `s2`: √(((n1 − 1) s1² + (n2 − 1) s2²) / (n1 + n2 − 2)); `None` with fewer
/// than 3 values in all or non-finite input.
pub fn pooled_sd(s1: f64, n1: usize, s2: f64, n2: usize) -> Option<f64> {
    let df = (n1 + n2).checked_sub(2).filter(|&d| d > 0)? as f64;
    let v =
        ((n1.saturating_sub(1)) as f64 * s1 * s1 + (n2.saturating_sub(1)) as f64 * s2 * s2) / df;
    (v.is_finite() && v >= 0.0).then(|| v.sqrt())
}

/// The repetitions per group a two-sided two-sample t-test at level `alpha` needs to find a
/// difference of means `effect` significant with probability `power`, the pooled standard
/// deviation being `sd`. `None` when it cannot be decided by repetitions: `effect` zero (or
/// below 10⁻⁹ of `sd`), non-finite input, `sd` not positive, `alpha` or `power` outside
/// (0, 1), or more than [`MAX_SAMPLE_SIZE`] needed. At least 2.
pub fn two_sample_n(effect: f64, sd: f64, alpha: f64, power: f64) -> Option<usize> {
    let ok = |p: f64| p > 0.0 && p < 1.0;
    if !(effect.is_finite() && sd.is_finite() && sd > 0.0 && ok(alpha) && ok(power)) {
        return None;
    }
    let d = effect.abs() / sd;
    if d < 1e-9 {
        return None;
    }
    let enough = |n: usize| {
        let df = (2 * n - 2) as f64;
        student_t_quantile(1.0 - alpha / 2.0, df) + student_t_quantile(power, df)
            <= d * (n as f64 / 2.0).sqrt()
    };
    smallest(enough)
}

/// The repetitions per group for the `1 − alpha` Student-t interval of a difference of two
/// means, spread `sd` in each group, to have at most `half_width` either side: the smallest
/// `n` with `t(1 − α/2, 2n − 2) · sd · √(2 / n) ≤ half_width` (what showing two means the
/// same within a margin needs). `None` for non-finite input, `sd` or `half_width` not
/// positive, or more than [`MAX_SAMPLE_SIZE`] needed. At least 2.
pub fn precision_n(sd: f64, half_width: f64, alpha: f64) -> Option<usize> {
    let ok = |p: f64| p > 0.0 && p < 1.0;
    if !(sd.is_finite() && half_width.is_finite() && sd > 0.0 && half_width > 0.0 && ok(alpha)) {
        return None;
    }
    let enough = |n: usize| {
        student_t_quantile(1.0 - alpha / 2.0, (2 * n - 2) as f64) * sd * (2.0 / n as f64).sqrt()
            <= half_width
    };
    smallest(enough)
}

/// The smallest n in 2..=[`MAX_SAMPLE_SIZE`] for which the monotone `enough` holds.
fn smallest(enough: impl Fn(usize) -> bool) -> Option<usize> {
    let mut hi = 2;
    while !enough(hi) {
        if hi >= MAX_SAMPLE_SIZE {
            return None;
        }
        hi = (hi * 2).min(MAX_SAMPLE_SIZE);
    }
    let mut lo = hi / 2;
    if lo < 2 {
        return Some(2);
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if enough(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cohen (1988), table 2.4.1: two-tailed α = 0.05, power 0.80.
    #[test]
    fn matches_cohens_table() {
        assert_eq!(two_sample_n(0.5, 1.0, 0.05, 0.8), Some(64));
        assert_eq!(two_sample_n(0.8, 1.0, 0.05, 0.8), Some(26));
        let n = two_sample_n(0.2, 1.0, 0.05, 0.8).unwrap();
        // Cohen gives 393 (from the noncentral t); the approximation may round up one more.
        assert!((393..=394).contains(&n), "d = 0.2: {n}");
        // Scale-free: the same effect size in other units.
        assert_eq!(two_sample_n(-5.0, 10.0, 0.05, 0.8), Some(64));
    }

    #[test]
    fn larger_effects_and_lower_power_need_fewer() {
        let n = |d: f64, p: f64| two_sample_n(d, 1.0, 0.05, p).unwrap();
        assert!(n(1.0, 0.8) < n(0.5, 0.8));
        assert!(n(0.5, 0.5) < n(0.5, 0.8));
        assert_eq!(two_sample_n(100.0, 1.0, 0.05, 0.8), Some(2));
    }

    #[test]
    fn no_answer_for_no_effect_or_bad_input() {
        assert_eq!(two_sample_n(0.0, 1.0, 0.05, 0.8), None);
        assert_eq!(two_sample_n(1e-12, 1.0, 0.05, 0.8), None);
        assert_eq!(two_sample_n(1.0, 0.0, 0.05, 0.8), None);
        assert_eq!(two_sample_n(f64::NAN, 1.0, 0.05, 0.8), None);
        assert_eq!(two_sample_n(1.0, 1.0, 1.5, 0.8), None);
        // A need beyond any run: none.
        assert_eq!(two_sample_n(1e-4, 1.0, 0.05, 0.8), None);
    }

    /// sd 1, half-width 1: t(0.975, 2n−2)·√(2/n) ≤ 1 first at n = 9 (t(0.975, 16) = 2.120,
    /// ·0.4714 = 0.999); at n = 8 t(0.975, 14) = 2.145, ·0.5 = 1.072, not enough.
    #[test]
    fn precision_n_fits_the_interval() {
        assert_eq!(precision_n(1.0, 1.0, 0.05), Some(9));
        assert_eq!(precision_n(2.0, 2.0, 0.05), Some(9));
        assert!(precision_n(1.0, 0.5, 0.05).unwrap() > 9);
        assert_eq!(precision_n(1.0, 0.0, 0.05), None);
        assert_eq!(precision_n(1.0, 1e-9, 0.05), None);
    }

    #[test]
    fn pooled_sd_weights_by_degrees_of_freedom() {
        assert_eq!(pooled_sd(2.0, 5, 2.0, 9), Some(2.0));
        let p = pooled_sd(1.0, 3, 3.0, 3).unwrap();
        assert!((p - 5.0_f64.sqrt()).abs() < 1e-12);
        assert_eq!(pooled_sd(1.0, 1, 1.0, 1), None);
    }
}
