//! The Mann–Whitney U test (Wilcoxon rank-sum), as R's `wilcox.test(a, b)`.

use serde::{Deserialize, Serialize};

use crate::normal::normal_cdf;

/// Result of a two-sided Mann–Whitney U test of samples `a` and `b`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// `U` of `a`: the number of pairs `(a_i, b_j)` with `a_i > b_j`, ties counting ½ (R's W).
    pub u: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Whether `p_value` is exact (no ties, both samples under 50) or from the normal
    /// approximation with tie and continuity corrections.
    pub exact: bool,
    /// `p_value < 0.05`.
    pub significant: bool,
}

/// Two-sided Mann–Whitney U test of `a` against `b`.
///
/// Without ties and with fewer than 50 values on each side, the exact null distribution of
/// `U` (the Gaussian binomial coefficient `[n_a + n_b choose n_a]_q`) gives
/// `p = min(1, 2 min(P(U <= u), P(U >= u)))`; otherwise the normal approximation with
/// `sigma^2 = n_a n_b / 12 ((n + 1) - Σ(t^3 - t) / (n (n - 1)))` over tie groups of size `t`
/// and a continuity correction of ½, as R does.
///
/// `None` if either sample is empty or holds a non-finite value.
#[must_use]
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (na, nb) = (a.len(), b.len());
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Mid-ranks; the rank sum of a and the tie groups.
    let n = all.len();
    let (mut rank_a, mut ties, mut i) = (0.0, 0.0, 0);
    let mut tied = false;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid = (i + j) as f64 / 2.0 + 1.0;
        rank_a += mid * all[i..=j].iter().filter(|v| v.1).count() as f64;
        if t > 1.0 {
            tied = true;
            ties += t * t * t - t;
        }
        i = j + 1;
    }
    let (naf, nbf, nf) = (na as f64, nb as f64, n as f64);
    let u = rank_a - naf * (naf + 1.0) / 2.0;
    let exact = !tied && na < 50 && nb < 50;
    let p_value = if exact {
        let counts = u_distribution(na, nb);
        let total: f64 = counts.iter().sum();
        let k = u as usize;
        let le: f64 = counts[..=k].iter().sum::<f64>() / total;
        let ge: f64 = counts[k..].iter().sum::<f64>() / total;
        (2.0 * le.min(ge)).min(1.0)
    } else {
        let sigma2 = naf * nbf / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)));
        let d = u - naf * nbf / 2.0;
        if sigma2 <= 0.0 {
            1.0
        } else {
            let z = (d - 0.5 * d.signum()) / sigma2.sqrt();
            (2.0 * normal_cdf(-z.abs())).min(1.0)
        }
    };
    Some(MannWhitney {
        u,
        p_value,
        exact,
        significant: p_value < 0.05,
    })
}

/// How many of the `C(m + n, m)` orderings give `U = k`, for `k` in `0..=m n`: the
/// coefficients of `Π_{i=1..m} (1 - q^{n+i}) / (1 - q^i)`, each partial product a polynomial.
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n + 1];
    c[0] = 1.0;
    for i in 1..=m {
        // × (1 - q^{n+i})
        for k in (n + i..c.len()).rev() {
            c[k] -= c[k - n - i];
        }
        // ÷ (1 - q^i): a running sum with stride i.
        for k in i..c.len() {
            c[k] += c[k - i];
        }
    }
    c
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_u_distribution_sums_to_the_binomial_coefficient() {
        let c = super::u_distribution(3, 3);
        assert_eq!(c, [1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 2.0, 1.0, 1.0]);
        assert_eq!(super::u_distribution(5, 5).iter().sum::<f64>(), 252.0);
    }
}
