//! Delay distributions (netem's `tabledist`).
//!
//! netem draws a (possibly correlated) 32-bit random value and looks it up in
//! a table of standardised samples scaled by 8192 in `i16`, so every sample is
//! `mu + sigma * t` with `|t| <= 4`. socklab uses the continuous distributions
//! instead of iproute2's tables:
//!
//! * `Uniform`: `t` uniform on `[-1, 1)` (netem without a table: `rnd % 2σ - σ`).
//! * `Normal`: `t = Φ⁻¹(u)`, clipped to `[-4, 4]` like netem's table.
//! * `Pareto`: Pareto with shape α = 3, standardised to mean 0 and standard
//!   deviation 1, clipped to `[-4, 4]` like netem's table.
//! * `ParetoNormal`: `0.25·N + 0.75·P` of an independent normal and standardised
//!   Pareto sample, as iproute2's `paretonormal.c` builds its table.

use socklab_stats::normal_quantile;
use std::fmt;

/// The shape of the jitter added to the base delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Distribution {
    /// Uniform on `[-jitter, +jitter]` (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Standardised Pareto (α = 3) scaled by `jitter`.
    Pareto,
    /// 25 % normal + 75 % Pareto, scaled by `jitter`.
    ParetoNormal,
}

/// The bound netem's tables put on a standardised sample.
pub const TABLE_BOUND: f64 = 4.0;

const PARETO_ALPHA: f64 = 3.0;

impl Distribution {
    /// Every distribution, for iteration.
    pub const ALL: [Distribution; 4] = [
        Distribution::Uniform,
        Distribution::Normal,
        Distribution::Pareto,
        Distribution::ParetoNormal,
    ];

    /// netem's name for the distribution.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::Pareto => "pareto",
            Distribution::ParetoNormal => "paretonormal",
        }
    }

    /// Parses netem's name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Distribution> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(name))
    }

    /// A standardised sample from the 32-bit value `rnd` (which may be
    /// correlated); `extra` supplies the independent second value that
    /// `ParetoNormal` needs.
    pub fn standard_sample(self, rnd: u32, extra: u32) -> f64 {
        let u = unit(rnd);
        match self {
            Distribution::Uniform => 2.0 * (f64::from(rnd) / 4_294_967_296.0) - 1.0,
            Distribution::Normal => normal_quantile(u).clamp(-TABLE_BOUND, TABLE_BOUND),
            Distribution::Pareto => pareto_standard(u).clamp(-TABLE_BOUND, TABLE_BOUND),
            Distribution::ParetoNormal => (0.25 * normal_quantile(unit(extra))
                + 0.75 * pareto_standard(u))
            .clamp(-TABLE_BOUND, TABLE_BOUND),
        }
    }

    /// The delay in nanoseconds: `mu + sigma * t`, never negative (netem
    /// `tabledist`; with `sigma == 0` exactly `mu`).
    pub fn delay_ns(self, mu: u64, sigma: u64, rnd: u32, extra: u32) -> u64 {
        if sigma == 0 {
            return mu;
        }
        let t = self.standard_sample(rnd, extra);
        let d = mu as f64 + sigma as f64 * t;
        if d <= 0.0 {
            0
        } else {
            d.round() as u64
        }
    }

    /// The cumulative distribution function of the standardised sample
    /// (before clipping), for goodness-of-fit tests.
    pub fn standard_cdf(self, t: f64) -> f64 {
        match self {
            Distribution::Uniform => ((t + 1.0) / 2.0).clamp(0.0, 1.0),
            Distribution::Normal => normal_cdf(t),
            Distribution::Pareto => {
                // X = xm·(1-u)^(-1/α), xm = 1; t = (X - mean) / sd.
                let (mean, sd) = pareto_moments();
                let x = t * sd + mean;
                if x < 1.0 {
                    0.0
                } else {
                    1.0 - x.powf(-PARETO_ALPHA)
                }
            }
            Distribution::ParetoNormal => f64::NAN,
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn unit(rnd: u32) -> f64 {
    (f64::from(rnd) + 0.5) / 4_294_967_296.0
}

fn pareto_moments() -> (f64, f64) {
    let a = PARETO_ALPHA;
    let mean = a / (a - 1.0);
    let var = a / ((a - 1.0) * (a - 1.0) * (a - 2.0));
    (mean, var.sqrt())
}

fn pareto_standard(u: f64) -> f64 {
    let (mean, sd) = pareto_moments();
    let x = (1.0 - u).powf(-1.0 / PARETO_ALPHA);
    (x - mean) / sd
}

/// The standard normal CDF (via an erfc approximation, |error| < 1.2e-7).
pub fn normal_cdf(x: f64) -> f64 {
    // Numerical Recipes erfc, Chebyshev fit.
    let z = (x / std::f64::consts::SQRT_2).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        1.0 - 0.5 * r
    } else {
        0.5 * r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_inverts_cdf() {
        for &p in &[0.001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999] {
            let x = normal_quantile(p);
            assert!((normal_cdf(x) - p).abs() < 1e-6, "p={p} x={x}");
        }
        assert!(normal_quantile(0.5).abs() < 1e-9);
    }

    #[test]
    fn zero_sigma_is_exact_and_negative_clamps() {
        assert_eq!(Distribution::Normal.delay_ns(5_000, 0, 123, 0), 5_000);
        assert_eq!(Distribution::Uniform.delay_ns(0, 1_000, 0, 0), 0);
    }

    #[test]
    fn names_round_trip() {
        for d in Distribution::ALL {
            assert_eq!(Distribution::from_name(d.name()), Some(d));
        }
        assert_eq!(Distribution::from_name("gauss"), None);
    }
}
