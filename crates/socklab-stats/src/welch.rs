//! Welch's unequal-variance t-test.

use serde::{Deserialize, Serialize};

use crate::student_t::{student_t_two_sided_p, upper_quantile};
use crate::summary::{mean, std_dev};

/// Result of Welch's unequal-variance t-test of `mean(b) - mean(a)`.
///
/// Note that `t` is `±inf` when both samples are constant but different;
/// JSON serializers such as `serde_json` write non-finite floats as `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// `mean(b) - mean(a)`.
    pub diff: f64,
    /// Test statistic `diff / sqrt(s_a^2/n_a + s_b^2/n_b)`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom (real-valued).
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Lower end of the 95% confidence interval of `diff`.
    pub ci95_lo: f64,
    /// Upper end of the 95% confidence interval of `diff`.
    pub ci95_hi: f64,
    /// `p_value < 0.05`.
    pub significant: bool,
}

/// Significance level used for [`Welch::significant`] and the confidence
/// interval.
const ALPHA: f64 = 0.05;

/// Welch's unequal-variance t-test of `mean(b) - mean(a)` (as R's
/// `t.test(b, a)`).
///
/// * `t = (mean_b - mean_a) / se` with `se = sqrt(s_a^2/n_a + s_b^2/n_b)`,
/// * `df = se^4 / ((s_a^2/n_a)^2/(n_a-1) + (s_b^2/n_b)^2/(n_b-1))`
///   (Welch–Satterthwaite), evaluated in a normalized form that cannot
///   overflow,
/// * two-sided `p = P(|T_df| >= |t|)`, CI `diff ± t_{0.975, df} se`.
///
/// Returns `None` if either sample has fewer than two observations or
/// contains a non-finite value (or, for data near `f64::MAX`, if the
/// difference or standard error overflows).
///
/// Degenerate case, both samples constant (`se = 0`): `df = n_a + n_b - 2`;
/// if the constants are equal the result is `t = 0`, `p = 1`, not
/// significant; otherwise `t = ±inf`, `p = 0`, significant. The confidence
/// interval is then `[diff, diff]`. No field is ever `NaN` for finite input.
#[must_use]
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (mean_a, sd_a) = (mean(a)?, std_dev(a)?);
    let (mean_b, sd_b) = (mean(b)?, std_dev(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let diff = mean_b - mean_a;
    // Standard errors of the two means; se combines them without overflow.
    let (se_a, se_b) = (sd_a / na.sqrt(), sd_b / nb.sqrt());
    let se = se_a.hypot(se_b);

    if !se.is_finite() || !diff.is_finite() {
        // Only reachable for data near f64::MAX.
        return None;
    }
    if se == 0.0 {
        let df = na + nb - 2.0;
        let (t, p_value) = if diff == 0.0 {
            (0.0, 1.0)
        } else {
            (diff.signum() * f64::INFINITY, 0.0)
        };
        return Some(Welch {
            diff,
            t,
            df,
            p_value,
            ci95_lo: diff,
            ci95_hi: diff,
            significant: p_value < ALPHA,
        });
    }

    // Welch–Satterthwaite with the variance shares w = (se_i/se)^2 in [0, 1].
    let wa = (se_a / se) * (se_a / se);
    let wb = (se_b / se) * (se_b / se);
    let df = 1.0 / (wa * wa / (na - 1.0) + wb * wb / (nb - 1.0));
    let t = diff / se;
    let p_value = student_t_two_sided_p(t, df);
    let half = upper_quantile(0.5 * ALPHA, df) * se;
    Some(Welch {
        diff,
        t,
        df,
        p_value,
        ci95_lo: diff - half,
        ci95_hi: diff + half,
        significant: p_value < ALPHA,
    })
}
