//! Welch's t-test against scipy.stats.ttest_ind(b, a, equal_var=False)
//! (which agrees with R's t.test(b, a)).

mod common;
use common::assert_rel;
use socklab_stats::welch;

const A: [f64; 15] = [
    27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
];
const B: [f64; 15] = [
    27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
];

#[test]
fn classic_example() {
    let w = welch(&A, &B).expect("valid samples");
    assert_rel(w.diff, 2.166_666_666_666_668, 1e-12);
    assert_rel(w.t, 2.455_356_398_286_006, 1e-12);
    assert_rel(w.df, 24.988_529_290_231_416, 1e-12);
    assert_rel(w.p_value, 0.021_378_001_462_866_992, 1e-10);
    assert_rel(w.ci95_lo, 0.349_237_066_192_406_9, 1e-10);
    assert_rel(w.ci95_hi, 3.984_096_267_140_929, 1e-10);
    assert!(w.significant);
}

#[test]
fn unequal_sizes_and_variances() {
    let a = [10.1, 10.3, 9.8, 10.0, 10.2, 9.9];
    let b = [11.5, 12.5, 10.9, 13.1, 11.8, 12.2, 11.1, 12.9, 11.7];
    let w = welch(&a, &b).expect("valid samples");
    assert_rel(w.t, 7.187_499_999_999_999, 1e-12);
    assert_rel(w.df, 9.373_902_657_936_794, 1e-12);
    assert_rel(w.p_value, 4.172_219_626_332_485e-5, 1e-9);
    assert_rel(w.ci95_lo, 1.317_072_796_764_704, 1e-10);
    assert_rel(w.ci95_hi, 2.516_260_536_568_628, 1e-10);
    assert!(w.significant);
}

#[test]
fn not_significant_example() {
    let w = welch(&[1.0, 2.0, 3.0, 4.0], &[3.0, 4.0, 5.0, 6.0]).expect("valid");
    assert_eq!(w.diff, 2.0);
    assert_rel(w.t, 2.190_890_230_020_664_7, 1e-12);
    assert_rel(w.df, 6.0, 1e-12);
    assert_rel(w.p_value, 0.070_987_654_320_987_58, 1e-10);
    assert_rel(w.ci95_lo, -0.233_714_695_164_713_33, 1e-9);
    assert_rel(w.ci95_hi, 4.233_714_695_164_713, 1e-10);
    assert!(!w.significant);
}

#[test]
fn swapping_samples_negates_the_difference() {
    let fwd = welch(&A, &B).expect("valid");
    let rev = welch(&B, &A).expect("valid");
    assert_eq!(rev.diff, -fwd.diff);
    assert_eq!(rev.t, -fwd.t);
    assert_eq!(rev.df, fwd.df);
    assert_eq!(rev.p_value, fwd.p_value);
}

#[test]
fn identical_constant_samples() {
    let w = welch(&[5.0, 5.0, 5.0], &[5.0, 5.0]).expect("valid");
    assert_eq!(w.diff, 0.0);
    assert_eq!(w.t, 0.0);
    assert_eq!(w.p_value, 1.0);
    assert_eq!(w.df, 3.0);
    assert_eq!((w.ci95_lo, w.ci95_hi), (0.0, 0.0));
    assert!(!w.significant);
}

#[test]
fn different_constant_samples() {
    let w = welch(&[5.0, 5.0, 5.0], &[7.0, 7.0]).expect("valid");
    assert_eq!(w.diff, 2.0);
    assert_eq!(w.t, f64::INFINITY);
    assert_eq!(w.p_value, 0.0);
    assert_eq!((w.ci95_lo, w.ci95_hi), (2.0, 2.0));
    assert!(w.significant);
    let w = welch(&[7.0, 7.0], &[5.0, 5.0, 5.0]).expect("valid");
    assert_eq!(w.t, f64::NEG_INFINITY);
    assert!(w.significant);
}

#[test]
fn one_constant_sample_uses_the_other_variance() {
    // se comes from b only; df = n_b - 1.
    let w = welch(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).expect("valid");
    assert_rel(w.df, 2.0, 1e-12);
    assert_rel(w.t, 1.0 / (1.0 / 3f64.sqrt()), 1e-12);
    assert!(!w.p_value.is_nan());
}

#[test]
fn invalid_inputs() {
    assert_eq!(welch(&[1.0], &[1.0, 2.0]), None);
    assert_eq!(welch(&[1.0, 2.0], &[]), None);
    assert_eq!(welch(&[1.0, f64::NAN], &[1.0, 2.0]), None);
    assert_eq!(welch(&[1.0, 2.0], &[1.0, f64::INFINITY]), None);
}
