//! Property tests of the ratio of means (Fieller's interval).

use proptest::prelude::*;
use socklab_stats::{confidence_interval, ratio_of_means, RatioInterval};

fn positive() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(1e-3..1e6_f64, 2..30)
}

proptest! {
    /// For positive data the interval never has a negative end, and it holds the ratio.
    #[test]
    fn positive_data_never_give_a_negative_bound(a in positive(), b in positive()) {
        let r = ratio_of_means(&a, &b).expect("valid");
        prop_assert!(r.ratio > 0.0);
        if let RatioInterval::Bounded { lo, hi } = r.interval {
            prop_assert!(lo >= 0.0, "{lo}");
            prop_assert!(lo <= r.ratio * (1.0 + 1e-9) && r.ratio <= hi * (1.0 + 1e-9), "{lo} {} {hi}", r.ratio);
        }
    }

    /// Bounded whenever A's Student-t interval stays clear of zero even at a far higher
    /// level (B as large as A, so the Welch df is at least A's own).
    #[test]
    fn bounded_when_a_is_clear_of_zero(
        (a, b) in (2..20_usize).prop_flat_map(|n| (
            prop::collection::vec(-10.0..10.0_f64, n),
            prop::collection::vec(1e-3..1e3_f64, n),
        ))
    ) {
        let r = ratio_of_means(&a, &b).expect("valid");
        let (lo, hi) = confidence_interval(&a, 0.999_999).expect("n >= 2");
        if lo > 0.0 || hi < 0.0 {
            let bounded = matches!(r.interval, RatioInterval::Bounded { .. });
            prop_assert!(bounded);
        }
        if let RatioInterval::Bounded { lo, hi } = r.interval {
            prop_assert!(lo.is_finite() && hi.is_finite() && lo <= hi);
        }
    }

    /// A centred on zero is never given a bound.
    #[test]
    fn a_centred_on_zero_is_unbounded(xs in positive(), b in positive()) {
        let a: Vec<f64> = xs.iter().flat_map(|&x| [x, -x]).collect();
        let r = ratio_of_means(&a, &b).expect("valid");
        prop_assert_eq!(r.interval, RatioInterval::Unbounded);
    }

    /// Scaling B by c scales the ratio and its interval by c.
    #[test]
    fn scaling_b_scales_the_interval(a in positive(), b in positive(), c in 1e-3..1e3_f64) {
        let r0 = ratio_of_means(&a, &b).expect("valid");
        let bc: Vec<f64> = b.iter().map(|x| x * c).collect();
        let r1 = ratio_of_means(&a, &bc).expect("valid");
        prop_assert!((r1.ratio - c * r0.ratio).abs() <= 1e-9 * c * r0.ratio);
        match (r0.interval, r1.interval) {
            (RatioInterval::Bounded { lo: l0, hi: h0 }, RatioInterval::Bounded { lo: l1, hi: h1 }) => {
                prop_assert!((l1 - c * l0).abs() <= 1e-6 * c * h0);
                prop_assert!((h1 - c * h0).abs() <= 1e-6 * c * h0);
            }
            (x, y) => prop_assert_eq!(x, y),
        }
    }
}
