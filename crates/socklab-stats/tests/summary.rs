//! Sample summaries, quantiles and confidence intervals.

mod common;
use common::{assert_abs, assert_rel};
use socklab_stats::{
    confidence_interval, mean, median, quantile, relative_change, std_dev, summarize,
};

const SAMPLE: [f64; 8] = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
const T_975_7: f64 = 2.364_624_252;
const SD: f64 = 2.138_089_935;

#[test]
fn summary_of_fixed_sample() {
    let s = summarize(&SAMPLE).expect("valid sample");
    assert_eq!(s.n, 8);
    assert_eq!(s.mean, 5.0);
    assert_rel(s.sd.expect("n >= 2"), SD, 1e-9);
    assert_eq!(s.median, 4.5);
    assert_eq!(s.min, 2.0);
    assert_eq!(s.max, 9.0);
    let half = T_975_7 * SD / 8f64.sqrt();
    assert_rel(s.ci95_t_half.expect("n >= 2"), half, 1e-9);
    assert_rel(s.ci95_t_lo.expect("n >= 2"), 5.0 - half, 1e-9);
    assert_rel(s.ci95_t_hi.expect("n >= 2"), 5.0 + half, 1e-9);
    assert_rel(s.cv.expect("mean != 0"), SD / 5.0, 1e-9);
}

#[test]
fn summary_degenerate_inputs() {
    let one = summarize(&[3.5]).expect("n = 1 is valid");
    assert_eq!(
        (one.n, one.mean, one.median, one.min, one.max),
        (1, 3.5, 3.5, 3.5, 3.5)
    );
    assert_eq!(one.sd, None);
    assert_eq!(one.ci95_t_half, None);
    assert_eq!(one.ci95_t_lo, None);
    assert_eq!(one.ci95_t_hi, None);
    assert_eq!(one.cv, None);

    assert_eq!(summarize(&[]), None);
    assert_eq!(summarize(&[1.0, f64::NAN]), None);
    assert_eq!(summarize(&[1.0, f64::INFINITY]), None);

    let zero_mean = summarize(&[-1.0, 1.0]).expect("valid");
    assert_eq!(zero_mean.mean, 0.0);
    assert_eq!(zero_mean.cv, None);

    let constant = summarize(&[0.1, 0.1, 0.1]).expect("valid");
    assert_eq!(constant.mean, 0.1);
    assert_eq!(constant.sd, Some(0.0));
    assert_eq!(constant.ci95_t_half, Some(0.0));
}

#[test]
fn summary_serde_roundtrip_is_derived() {
    fn assert_serde<T: serde::Serialize + serde::de::DeserializeOwned>() {}
    assert_serde::<socklab_stats::Summary>();
    assert_serde::<socklab_stats::Welch>();
}

#[test]
fn mean_and_sd() {
    assert_eq!(mean(&SAMPLE), Some(5.0));
    assert_eq!(mean(&[]), None);
    assert_eq!(mean(&[f64::NAN]), None);
    assert_rel(std_dev(&SAMPLE).expect("n >= 2"), SD, 1e-9);
    assert_eq!(std_dev(&[1.0]), None);
    assert_eq!(std_dev(&[1.0, f64::NEG_INFINITY]), None);
    // Numerical stability: a huge offset must not destroy the variance.
    let shifted: Vec<f64> = [4.0, 7.0, 13.0, 16.0].iter().map(|x| x + 1e9).collect();
    assert_rel(std_dev(&shifted).expect("n >= 2"), 30f64.sqrt(), 1e-12);
    // Extreme magnitudes neither overflow nor underflow.
    assert_rel(
        std_dev(&[1e300, -1e300]).expect("n >= 2"),
        2e300 / 2f64.sqrt(),
        1e-14,
    );
    assert_rel(
        std_dev(&[1e-300, 3e-300]).expect("n >= 2"),
        2f64.sqrt() * 1e-300,
        1e-14,
    );
    assert_eq!(mean(&[f64::MAX, f64::MAX]), Some(f64::MAX));
}

#[test]
fn type7_quantiles_match_numpy() {
    let xs = [1.0, 2.0, 3.0, 4.0];
    for (q, want) in [
        (0.0, 1.0),
        (0.1, 1.3),
        (0.25, 1.75),
        (0.5, 2.5),
        (0.75, 3.25),
        (0.9, 3.7),
        (1.0, 4.0),
    ] {
        assert_abs(quantile(&xs, q).expect("valid"), want, 1e-12);
    }
    // Unsorted input, odd n.
    let ys = [3.5, -1.0, 10.0, 2.25, 7.0];
    for (q, want) in [
        (0.1, 0.3),
        (0.25, 2.25),
        (0.5, 3.5),
        (0.75, 7.0),
        (0.9, 8.8),
    ] {
        assert_abs(quantile(&ys, q).expect("valid"), want, 1e-12);
    }
    assert_eq!(median(&ys), Some(3.5));
    assert_eq!(median(&xs), Some(2.5));
    assert_eq!(quantile(&[42.0], 0.3), Some(42.0));
    assert_eq!(quantile(&xs, 1.5), None);
    assert_eq!(quantile(&xs, -0.1), None);
    assert_eq!(quantile(&xs, f64::NAN), None);
    assert_eq!(quantile(&[], 0.5), None);
    assert_eq!(median(&[1.0, f64::NAN]), None);
}

#[test]
fn confidence_intervals() {
    let (lo, hi) = confidence_interval(&SAMPLE, 0.95).expect("n >= 2");
    let half = T_975_7 * SD / 8f64.sqrt();
    assert_rel(lo, 5.0 - half, 1e-9);
    assert_rel(hi, 5.0 + half, 1e-9);
    // 99%: t(0.995, 7) = 3.499483297.
    let (lo, hi) = confidence_interval(&SAMPLE, 0.99).expect("n >= 2");
    assert_rel(hi - lo, 2.0 * 3.499_483_297 * SD / 8f64.sqrt(), 1e-9);
    assert_eq!(confidence_interval(&[1.0], 0.95), None);
    assert_eq!(confidence_interval(&SAMPLE, 1.0), None);
    assert_eq!(confidence_interval(&SAMPLE, 0.0), None);
    assert_eq!(confidence_interval(&SAMPLE, f64::NAN), None);
}

#[test]
fn relative_changes() {
    assert_eq!(relative_change(100.0, 110.0), Some(0.1));
    assert_eq!(relative_change(-4.0, -2.0), Some(0.5));
    assert_eq!(relative_change(4.0, 2.0), Some(-0.5));
    assert_eq!(relative_change(0.0, 2.0), None);
    assert_eq!(relative_change(1.0, f64::NAN), None);
}

/// `bulk --reps 2 --json` printed `cwnd.ci95_lo = -31.7` for a metric whose every value is
/// positive: the serialized `ci95_lo`/`ci95_hi` are now the interval the report draws.
#[test]
fn the_json_interval_of_a_positive_metric_is_the_drawn_one() {
    let s = summarize(&[10.0, 60.0]).expect("valid");
    assert!(
        s.ci95_t_lo.expect("n >= 2") < 0.0,
        "the symmetric one crosses 0"
    );
    let v = serde_json::to_value(&s).expect("serializes");
    let (lo, hi) = s.ci95().expect("n >= 2");
    assert!(lo > 0.0);
    assert_eq!(v["ci95_lo"].as_f64(), Some(lo));
    assert_eq!(v["ci95_hi"].as_f64(), Some(hi));
    assert_eq!(v["ci95_method"], "log_t");
    assert_eq!(v["ci95_t_lo"].as_f64(), s.ci95_t_lo);
    assert_eq!(v["ci95_t_half"].as_f64(), s.ci95_t_half);
    assert!(v.get("ci95_half").is_none(), "no unnamed half-width");
    // Counts with zeros: truncated at zero, and said so.
    let c = serde_json::to_value(summarize(&[0.0, 0.0, 9.0]).expect("valid")).expect("json");
    assert_eq!(
        (c["ci95_lo"].as_f64(), c["ci95_method"].as_str()),
        (Some(0.0), Some("student_t_truncated"))
    );
    // A narrow interval is the plain Student-t one.
    let n = serde_json::to_value(summarize(&SAMPLE).expect("valid")).expect("json");
    assert_eq!(n["ci95_method"], "student_t");
    assert_eq!(n["ci95_lo"], n["ci95_t_lo"]);
    assert!(
        serde_json::to_value(summarize(&[1.0]).expect("valid")).expect("json")["ci95_method"]
            .is_null()
    );
}
