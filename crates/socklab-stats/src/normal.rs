//! The standard normal distribution (the `df = inf` limit of Student's t).

use std::f64::consts::PI;

use crate::incomplete_gamma::erfc;

/// Standard normal cumulative distribution function
/// `Φ(z) = erfc(-z / sqrt 2) / 2`, accurate in relative terms in the lower
/// tail. `NaN` for `NaN`.
#[must_use]
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Standard normal quantile (inverse of [`normal_cdf`]).
///
/// Method: P. J. Acklam's rational approximation (relative error about
/// `1.15e-9`) followed by one Halley refinement step using [`erfc`], giving
/// close to full double precision. Returns `-inf`/`+inf` for `p = 0`/`1` and
/// `NaN` for `p` outside `[0, 1]`.
#[must_use]
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.024_25;
    // Work with the lower tail so that tiny upper-tail probabilities given as
    // 1 - q are handled symmetrically.
    let (pl, sign) = if p > 0.5 { (1.0 - p, -1.0) } else { (p, 1.0) };
    let x = if pl < P_LOW {
        let q = (-2.0 * pl.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else {
        let q = pl - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    // x is now the (negative or zero) lower-tail quantile of pl. Halley step.
    let e = normal_cdf(x) - pl;
    let u = e * (2.0 * PI).sqrt() * (0.5 * x * x).exp();
    let refined = x - u / (1.0 + 0.5 * x * u);
    let x = if refined.is_finite() { refined } else { x };
    // x is the lower-tail quantile of pl; flip it back for p > 0.5.
    sign * x
}
