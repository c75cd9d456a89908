//! Property tests: invariants of summaries, Welch's test and the t quantile,
//! plus "never panics" checks on arbitrary input.

use proptest::prelude::*;
use socklab_stats::{
    confidence_interval, ln_gamma, mean, median, quantile, regularized_incomplete_beta, std_dev,
    student_t_cdf, student_t_pdf, student_t_quantile, student_t_sf, summarize, welch,
};

fn sample() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-1e6..1e6_f64, 2..60)
}

/// Largest magnitude in the data, used to scale rounding tolerances.
fn scale(xs: &[f64]) -> f64 {
    xs.iter().fold(1.0_f64, |m, x| m.max(x.abs()))
}

proptest! {
    #[test]
    fn summary_orderings(xs in sample()) {
        let s = summarize(&xs).expect("finite sample");
        let lo = s.ci95_t_lo.expect("n >= 2");
        let hi = s.ci95_t_hi.expect("n >= 2");
        prop_assert!(s.min <= s.median && s.median <= s.max);
        prop_assert!(s.min <= s.mean && s.mean <= s.max);
        prop_assert!(lo <= s.mean && s.mean <= hi);
        prop_assert!(s.sd.expect("n >= 2") >= 0.0);
        prop_assert_eq!(s.n, xs.len());
        prop_assert_eq!(Some(s.median), median(&xs));
        prop_assert_eq!(Some((lo, hi)), confidence_interval(&xs, 0.95));
    }

    #[test]
    fn quantiles_are_monotone_in_q(xs in sample(), q1 in 0.0..=1.0_f64, q2 in 0.0..=1.0_f64) {
        let (a, b) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
        let qa = quantile(&xs, a).expect("valid");
        let qb = quantile(&xs, b).expect("valid");
        prop_assert!(qa <= qb);
    }

    #[test]
    fn shifting_moves_location_not_spread(xs in sample(), c in -1e6..1e6_f64) {
        let shifted: Vec<f64> = xs.iter().map(|x| x + c).collect();
        let tol = 1e-9 * (scale(&xs) + c.abs());
        let s0 = summarize(&xs).expect("valid");
        let s1 = summarize(&shifted).expect("valid");
        prop_assert!((s1.mean - (s0.mean + c)).abs() <= tol);
        prop_assert!((s1.median - (s0.median + c)).abs() <= tol);
        prop_assert!((s1.sd.expect("n>=2") - s0.sd.expect("n>=2")).abs() <= tol);
        prop_assert!((s1.ci95_t_lo.expect("n>=2") - (s0.ci95_t_lo.expect("n>=2") + c)).abs() <= tol);
        prop_assert!((s1.ci95_t_hi.expect("n>=2") - (s0.ci95_t_hi.expect("n>=2") + c)).abs() <= tol);
    }

    #[test]
    fn scaling_scales_spread(xs in sample(), c in 1e-3..1e3_f64) {
        let scaled: Vec<f64> = xs.iter().map(|x| x * c).collect();
        let sd0 = std_dev(&xs).expect("n >= 2");
        let sd1 = std_dev(&scaled).expect("n >= 2");
        prop_assert!((sd1 - c * sd0).abs() <= 1e-10 * c * scale(&xs));
        let m0 = mean(&xs).expect("valid");
        let m1 = mean(&scaled).expect("valid");
        prop_assert!((m1 - c * m0).abs() <= 1e-12 * c * scale(&xs));
    }

    #[test]
    fn welch_is_shift_invariant_and_antisymmetric(a in sample(), b in sample(), c in -1e3..1e3_f64) {
        let w = welch(&a, &b).expect("valid");
        prop_assert!(w.p_value >= 0.0 && w.p_value <= 1.0);
        prop_assert!(w.df >= 1.0 - 1e-12);
        prop_assert!(w.ci95_lo <= w.diff && w.diff <= w.ci95_hi);
        prop_assert_eq!(w.significant, w.p_value < 0.05);
        // The CI excludes 0 exactly when the test is significant (up to
        // rounding at the boundary).
        if w.p_value < 0.049 {
            prop_assert!(w.ci95_lo > 0.0 || w.ci95_hi < 0.0);
        } else if w.p_value > 0.051 {
            prop_assert!(w.ci95_lo < 0.0 && w.ci95_hi > 0.0);
        }
        let r = welch(&b, &a).expect("valid");
        prop_assert_eq!(r.t, -w.t);
        prop_assert_eq!(r.p_value, w.p_value);
        let a2: Vec<f64> = a.iter().map(|x| x + c).collect();
        let b2: Vec<f64> = b.iter().map(|x| x + c).collect();
        let s = welch(&a2, &b2).expect("valid");
        prop_assert!((s.t - w.t).abs() <= 1e-6 * (1.0 + w.t.abs()));
        prop_assert!((s.df - w.df).abs() <= 1e-6 * w.df);
    }

    #[test]
    fn t_quantile_is_monotone_in_p(p1 in 1e-12..1.0_f64, p2 in 1e-12..1.0_f64, df in 0.1..1e6_f64) {
        let (a, b) = if p1 <= p2 { (p1, p2) } else { (p2, p1) };
        let qa = student_t_quantile(a, df);
        let qb = student_t_quantile(b, df);
        prop_assert!(qa <= qb, "q({a}) = {qa} > q({b}) = {qb} for df {df}");
    }

    #[test]
    fn t_quantile_inverts_cdf(p in 1e-10..0.5_f64, df in 0.2..1e7_f64) {
        let t = student_t_quantile(p, df);
        prop_assert!(t < 0.0);
        // Residual in t via one Newton step: (F(t) - p) / f(t).
        let resid = (student_t_cdf(t, df) - p) / student_t_pdf(t, df);
        prop_assert!(resid.abs() <= 1e-10 * t.abs(), "p {p} df {df} t {t} resid {resid}");
        let tail = student_t_sf(-t, df);
        prop_assert!((tail - p).abs() <= 1e-11 * p);
    }

    #[test]
    fn t_cdf_is_monotone(t1 in -100.0..100.0_f64, t2 in -100.0..100.0_f64, df in 0.1..1e9_f64) {
        let (a, b) = if t1 <= t2 { (t1, t2) } else { (t2, t1) };
        prop_assert!(student_t_cdf(a, df) <= student_t_cdf(b, df));
        let s = student_t_cdf(a, df) + student_t_sf(a, df);
        prop_assert!((s - 1.0).abs() <= 1e-14);
    }

    #[test]
    fn never_panics_on_arbitrary_input(
        xs in prop::collection::vec(any::<f64>(), 0..8),
        ys in prop::collection::vec(any::<f64>(), 0..8),
        a in any::<f64>(),
        b in any::<f64>(),
        c in any::<f64>(),
    ) {
        let _ = summarize(&xs);
        let _ = quantile(&xs, a);
        let _ = confidence_interval(&xs, a);
        let _ = welch(&xs, &ys);
        let _ = ln_gamma(a);
        let _ = regularized_incomplete_beta(a, b, c);
        let _ = student_t_cdf(a, b);
        let _ = student_t_pdf(a, b);
        let _ = student_t_quantile(a, b);
    }

    #[test]
    fn finite_extreme_samples_never_produce_nan(
        xs in prop::collection::vec(prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO, 2..8),
    ) {
        let s = summarize(&xs).expect("finite sample");
        prop_assert!(!s.mean.is_nan() && !s.median.is_nan());
        prop_assert!(s.min <= s.mean && s.mean <= s.max);
        prop_assert!(!s.sd.expect("n >= 2").is_nan());
    }
}

/// Non-negative samples as measurements give them: counts with zeros, spreads over orders of
/// magnitude, few repetitions.
fn non_negative() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(
        prop_oneof![Just(0.0), 0.0..1e-3_f64, 0.0..100.0_f64, 0.0..1e9_f64],
        1..12,
    )
}

proptest! {
    /// What a program reads (`ci95_lo`/`ci95_hi` of the JSON) is the interval the report
    /// draws, and of a metric that cannot be negative it never reaches below zero.
    #[test]
    fn the_serialized_interval_is_the_drawn_one_and_never_below_zero(xs in non_negative()) {
        let s = summarize(&xs).expect("finite sample");
        let v = serde_json::to_value(&s).expect("serializes");
        let drawn = s.ci95();
        prop_assert_eq!(v["ci95_lo"].as_f64(), drawn.map(|c| c.0));
        prop_assert_eq!(v["ci95_hi"].as_f64(), drawn.map(|c| c.1));
        if let Some(lo) = v["ci95_lo"].as_f64() {
            prop_assert!(lo >= 0.0, "{xs:?}: ci95_lo {lo}");
            prop_assert!(lo <= v["ci95_hi"].as_f64().expect("both ends"));
        }
        // The symmetric interval keeps its own name, whatever it is.
        prop_assert_eq!(v["ci95_t_lo"].as_f64(), s.ci95_t_lo);
        prop_assert_eq!(v["ci95_method"].is_null(), drawn.is_none());
        // And reads back as the same summary.
        let back: socklab_stats::Summary = serde_json::from_value(v).expect("deserializes");
        prop_assert_eq!(back, s);
    }
}
