//! Student's t distribution against published table values and
//! high-precision references (mpmath, 40 digits).

mod common;
use common::{assert_abs, assert_rel};
use socklab_stats::{
    student_t_cdf, student_t_pdf, student_t_quantile, student_t_sf, student_t_two_sided_p,
};
use std::f64::consts::PI;

#[test]
fn quantiles_match_tables() {
    let table = [
        (0.975, 1.0, 12.706_204_736),
        (0.975, 2.0, 4.302_652_730),
        (0.975, 5.0, 2.570_581_836),
        (0.975, 7.0, 2.364_624_252),
        (0.975, 9.0, 2.262_157_163),
        (0.975, 29.0, 2.045_229_642),
        (0.975, 30.0, 2.042_272_456),
        (0.975, 100.0, 1.983_971_519),
        (0.995, 10.0, 3.169_272_673),
        (0.9, 3.0, 1.637_744_354),
    ];
    for (p, df, want) in table {
        // Table values are rounded to 9 decimals.
        assert_rel(student_t_quantile(p, df), want, 1e-9);
        assert_rel(student_t_quantile(1.0 - p, df), -want, 1e-9);
    }
    assert_rel(student_t_quantile(0.975, 1e6), 1.959_966, 1e-6);
    assert_rel(student_t_quantile(0.975, 1e6), 1.959_966_356_814_107, 1e-12);
}

#[test]
fn quantile_is_antisymmetric() {
    for &df in &[0.5, 1.0, 2.0, 3.7, 10.0, 24.99, 1e3, 1e8] {
        // 2^-40 so that 1 - p is exact even deep in the tail.
        for &p in &[f64::powi(2.0, -40), 0.001, 0.025, 0.2, 0.4999] {
            let lo = student_t_quantile(p, df);
            let hi = student_t_quantile(1.0 - p, df);
            assert!(lo < 0.0 && hi > 0.0);
            // 1 - p is itself rounded, so allow for the conditioning.
            assert_rel(-lo, hi, 1e-9);
        }
    }
}

#[test]
fn quantile_extremes_and_small_df() {
    // mpmath references.
    assert_rel(
        student_t_quantile(1e-300, 10.0),
        -2.564_525_718_948_125_4e30,
        1e-12,
    );
    assert_rel(student_t_quantile(0.3, 0.05), -3_119.219_146_032_867, 1e-12);
    assert_rel(
        student_t_quantile(0.499_999_9, 10.0),
        -2.569_978_035_004_409e-7,
        1e-12,
    );
    assert_rel(
        student_t_quantile(0.025, 1e10),
        -1.959_963_984_777_281,
        1e-12,
    );
    // Real-valued df (Welch).
    assert_rel(
        student_t_cdf(
            student_t_quantile(0.975, 24.988_529_290_231_416),
            24.988_529_290_231_416,
        ),
        0.975,
        1e-14,
    );
    // df = +inf is the normal distribution.
    assert_rel(
        student_t_quantile(0.975, f64::INFINITY),
        1.959_963_984_540_054,
        1e-14,
    );
    // Beyond the largest double.
    assert_eq!(student_t_quantile(1e-300, 0.05), f64::NEG_INFINITY);
}

#[test]
fn quantile_edge_cases() {
    assert_eq!(student_t_quantile(0.5, 7.0), 0.0);
    assert_eq!(student_t_quantile(0.0, 7.0), f64::NEG_INFINITY);
    assert_eq!(student_t_quantile(1.0, 7.0), f64::INFINITY);
    assert!(student_t_quantile(-0.1, 7.0).is_nan());
    assert!(student_t_quantile(1.1, 7.0).is_nan());
    assert!(student_t_quantile(f64::NAN, 7.0).is_nan());
    assert!(student_t_quantile(0.3, 0.0).is_nan());
    assert!(student_t_quantile(0.3, -2.0).is_nan());
    assert!(student_t_quantile(0.3, f64::NAN).is_nan());
}

#[test]
fn cdf_known_values() {
    for &df in &[0.3, 1.0, 2.0, 10.0, 1e6] {
        assert_eq!(student_t_cdf(0.0, df), 0.5);
    }
    assert_abs(student_t_cdf(2.228_138_852, 10.0), 0.975, 1e-10);
    // Cauchy: F(t) = 1/2 + atan(t)/π.
    assert_rel(student_t_cdf(-3.0, 1.0), 0.5 + (-3.0f64).atan() / PI, 1e-14);
    // df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)).
    assert_rel(
        student_t_cdf(1.3, 2.0),
        0.5 + 1.3 / (2.0 * (2.0f64 + 1.69).sqrt()),
        1e-14,
    );
    assert_rel(student_t_cdf(-1.7, 2.5), 0.102_806_108_579_941_93, 1e-13);
    assert_eq!(student_t_cdf(f64::INFINITY, 3.0), 1.0);
    assert_eq!(student_t_cdf(f64::NEG_INFINITY, 3.0), 0.0);
    assert!(student_t_cdf(1.0, 0.0).is_nan());
    assert!(student_t_cdf(f64::NAN, 3.0).is_nan());
}

#[test]
fn tails_are_accurate_in_relative_terms() {
    assert_rel(student_t_sf(5.0, 1e6), 2.866_998_935_445_371e-7, 1e-12);
    assert_rel(student_t_sf(40.0, 3.0), 1.719_034_039_457_926_4e-5, 1e-12);
    assert_rel(student_t_sf(3.0, 1e9), 1.349_898_064_868_957_8e-3, 1e-12);
    assert_rel(student_t_sf(1e3, 0.5), 1.014_145_454_085_709_5e-2, 1e-12);
    assert_rel(student_t_sf(8.0, 30.0), 3.132_911_237_850_379_5e-9, 1e-12);
    assert_rel(
        student_t_two_sided_p(-8.0, 30.0),
        2.0 * 3.132_911_237_850_379_5e-9,
        1e-12,
    );
    assert_eq!(student_t_two_sided_p(0.0, 4.0), 1.0);
}

#[test]
fn pdf_known_values() {
    assert_rel(student_t_pdf(0.0, 1.0), 1.0 / PI, 1e-14);
    assert_rel(student_t_pdf(2.0, 5.0), 0.065_090_310_326_216_47, 1e-13);
    assert_rel(student_t_pdf(-0.5, 7.3), 0.335_268_313_889_933_8, 1e-13);
    assert_eq!(student_t_pdf(f64::INFINITY, 3.0), 0.0);
}

#[test]
fn quantile_inverts_cdf_on_a_grid() {
    for &df in &[
        0.7, 1.0, 1.5, 2.0, 3.0, 4.5, 7.0, 15.0, 29.0, 80.0, 1e3, 1e5, 1e7,
    ] {
        for i in -40..=40 {
            let t = f64::from(i) * 0.1;
            if t == 0.0 {
                continue;
            }
            let back = student_t_quantile(student_t_cdf(t, df), df);
            // The cdf is rounded near 1, so the attainable accuracy is
            // limited by eps / (f(t) * |t|) relative to t.
            let tol = 1e-13 / (student_t_pdf(t, df) * t.abs()).min(1.0) + 1e-12;
            assert_rel(back, t, tol);
        }
    }
}

#[test]
fn tail_quantile_inverts_sf() {
    for &df in &[0.2, 1.3, 5.0, 60.0, 1e6] {
        for &t in &[1.5, 10.0, 300.0, 1e5] {
            let q = student_t_sf(t, df);
            if q > 0.0 {
                assert_rel(-student_t_quantile(q, df), t, 1e-11);
            }
        }
    }
}
