//! Mann–Whitney U against values published by R (`wilcox.test`).

use socklab_stats::mann_whitney;

#[test]
fn completely_separated_samples_of_five_exact() {
    // R: wilcox.test(1:5, 6:10) -> W = 0, p-value = 0.007937 (= 2/252)
    let m = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
    assert_eq!(m.u, 0.0);
    assert!(m.exact);
    assert!((m.p_value - 2.0 / 252.0).abs() < 1e-12, "{}", m.p_value);
    assert!(m.significant);
    // Three against three can never reach p < 0.05: the smallest p is 2/20.
    let m = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
    assert!((m.p_value - 0.1).abs() < 1e-12, "{}", m.p_value);
    assert!(!m.significant);
}

#[test]
fn r_documentation_example_exact() {
    // R's ?wilcox.test: x <- c(0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46);
    // y <- c(1.15, 0.88, 0.90, 0.74, 1.21); wilcox.test(x, y, alternative = "g")
    // -> W = 35, p-value = 0.1272 (one-sided), so 0.2544 two-sided.
    let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
    let y = [1.15, 0.88, 0.90, 0.74, 1.21];
    let m = mann_whitney(&x, &y).unwrap();
    assert_eq!(m.u, 35.0);
    assert!(m.exact);
    assert!((m.p_value - 0.2544).abs() < 2e-4, "{}", m.p_value);
    // Symmetric: the other way round U is n1 n2 - U and p is the same.
    let r = mann_whitney(&y, &x).unwrap();
    assert_eq!(r.u, 15.0);
    assert!((r.p_value - m.p_value).abs() < 1e-12);
}

#[test]
fn ties_use_the_normal_approximation_with_tie_and_continuity_corrections() {
    // R: wilcox.test(c(1,2,2,3), c(2,3,4,5)) -> W = 2.5, p-value = 0.1367 (normal
    // approximation, ties): sigma^2 = 16/12 (9 - 30/56), z = (2.5 - 8 + 0.5) / sigma.
    let m = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 4.0, 5.0]).unwrap();
    assert_eq!(m.u, 2.5);
    assert!(!m.exact);
    assert!((m.p_value - 0.1367).abs() < 3e-4, "{}", m.p_value);
    // All equal: no evidence at all.
    let m = mann_whitney(&[1.0, 1.0], &[1.0, 1.0, 1.0]).unwrap();
    assert_eq!(m.p_value, 1.0);
    assert!(mann_whitney(&[], &[1.0]).is_none());
    assert!(mann_whitney(&[f64::NAN], &[1.0]).is_none());
}

#[test]
fn two_clusters_are_bimodal_noise_is_not() {
    use socklab_stats::bimodal;
    let b = bimodal(&[99.0, 160.0, 100.0, 161.0, 101.0]).expect("two clusters");
    assert_eq!((b.low, b.high), (3, 2));
    assert!((b.gap - 59.0).abs() < 1e-12);
    assert!(
        bimodal(&[1.0, 2.0, 3.0, 4.0, 5.0]).is_none(),
        "even spacing"
    );
    assert!(
        bimodal(&[1.0, 1.0, 1.0, 5.0]).is_none(),
        "one outlier is no cluster"
    );
    assert!(bimodal(&[1.0, 1.0, 5.0]).is_none());
    assert!(
        bimodal(&[100.0, 100.0, 100.2, 100.2]).is_none(),
        "gap under 5% of the median"
    );
    assert!(bimodal(&[1.0, 1.0, 2.0, 2.0]).is_some());
}
