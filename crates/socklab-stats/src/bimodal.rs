//! A simple test for repetitions that fall into two clusters.

use serde::{Deserialize, Serialize};

/// How much larger than the spread inside the clusters the gap between them must be.
pub const BIMODAL_GAP_RATIO: f64 = 3.0;

/// The smallest gap, relative to the median's magnitude, that counts as a second cluster.
pub const BIMODAL_MIN_REL_GAP: f64 = 0.05;

/// Two clusters found by [`bimodal`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bimodal {
    /// Values in the lower cluster.
    pub low: usize,
    /// Values in the upper cluster.
    pub high: usize,
    /// The gap between the clusters (smallest upper value minus largest lower value).
    pub gap: f64,
    /// The larger of the two clusters' ranges.
    pub spread: f64,
}

/// Whether the values fall into two clusters. The rule: sort the values, split them at the
/// largest gap between neighbours; they are bimodal when each side holds at least two values,
/// the gap exceeds [`BIMODAL_GAP_RATIO`] × the larger range (max − min) of the two sides, and
/// it exceeds [`BIMODAL_MIN_REL_GAP`] × |median| (so that sub-percent noise on identical
/// values is not called bimodal).
///
/// `None` when they are not, for fewer than four values, or for any non-finite value.
#[must_use]
pub fn bimodal(xs: &[f64]) -> Option<Bimodal> {
    if xs.len() < 4 || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let (split, gap) = (1..n)
        .map(|i| (i, v[i] - v[i - 1]))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if split < 2 || n - split < 2 {
        return None;
    }
    let spread = (v[split - 1] - v[0]).max(v[n - 1] - v[split]);
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (gap > BIMODAL_GAP_RATIO * spread && gap > BIMODAL_MIN_REL_GAP * median.abs()).then_some(
        Bimodal {
            low: split,
            high: n - split,
            gap,
            spread,
        },
    )
}
