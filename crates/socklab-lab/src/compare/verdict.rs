//! One metric of one pair of cells compared: means, the ratio B/A with Fieller's interval (or
//! the difference with Welch's interval, for a metric that is itself a difference), Welch and
//! Mann–Whitney, the verdict and the gate.
//!
//! The rules, as the report's: a verdict needs at least [`MIN_N_VERDICT`] repetitions on each
//! side; a change is significant only when Welch's test and the Mann–Whitney U test both find
//! p < 0.05 (as the report's bimodal and best rules); the direction comes from the metric's
//! table (`Better`), and a metric with no preferred direction is "changed", never faster or
//! slower.

use serde::Serialize;
use socklab_stats::{mann_whitney, mean, ratio_of_means, welch, welch_n_to_decide, RatioInterval};

use crate::model::metric::{Better, Metric};
use crate::workload::judge::MIN_N_VERDICT;
use crate::LabError;

/// The most repetitions per side [`Compared::n_to_decide`] looks for.
pub const MAX_N_TO_DECIDE: usize = 1000;

/// What the comparison says about one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significantly better in the metric's good direction.
    Faster,
    /// Significantly worse.
    Slower,
    /// Significantly different, for a metric with no preferred direction.
    Changed,
    /// No difference both tests find.
    Same,
    /// Fewer than [`MIN_N_VERDICT`] repetitions on a side (or fewer than two: no test).
    CannotTell,
}

impl Verdict {
    /// Its words.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Changed => "changed",
            Verdict::Same => "same",
            Verdict::CannotTell => "cannot tell at this n",
        }
    }
}

/// A percentage threshold for the gate, as a fraction (`5%` is 0.05).
pub fn parse_threshold(text: &str) -> Result<f64, LabError> {
    let bad = |why: &str| LabError::Plan(format!("`threshold` '{text}': {why}"));
    let Some(number) = text.trim().strip_suffix('%') else {
        return Err(bad("give a percentage such as 5%"));
    };
    match number.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x / 100.0),
        Ok(_) => Err(bad("give a percentage of 0% or more, such as 5%")),
        Err(_) => Err(bad("give a percentage such as 5%")),
    }
}

/// One metric compared.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    /// The metric's name.
    pub metric: String,
    /// Its unit.
    pub unit: &'static str,
    /// `higher`, `lower` or `neither` is better.
    pub better: &'static str,
    /// Compared by difference in its unit (a metric that is itself a difference), not ratio.
    pub by_difference: bool,
    /// Repetitions of A and of B.
    pub n_a: usize,
    pub n_b: usize,
    /// Means of A and of B.
    pub mean_a: Option<f64>,
    pub mean_b: Option<f64>,
    /// `mean_b / mean_a` (ratio metrics).
    pub ratio: Option<f64>,
    /// Its 95% interval (Fieller); `None` in JSON when unbounded or no ratio.
    pub ratio_interval: Option<RatioInterval>,
    /// `mean_b - mean_a` and Welch's 95% interval of it.
    pub diff: Option<f64>,
    pub diff_lo: Option<f64>,
    pub diff_hi: Option<f64>,
    /// Welch's two-sided p.
    pub welch_p: Option<f64>,
    /// The Mann–Whitney U test's two-sided p.
    pub mann_whitney_p: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// For "cannot tell": the repetitions per side that would decide if the means and
    /// deviations held (at least [`MIN_N_VERDICT`]).
    pub n_to_decide: Option<usize>,
    /// Whether the gate checks this metric.
    pub gated: bool,
    /// Whether the gate fails on it: significant, in the bad direction, beyond the threshold.
    pub gate_failed: bool,
}

/// The metric's `better` as text.
fn better_text(b: Better) -> &'static str {
    match b {
        Better::Higher => "higher",
        Better::Lower => "lower",
        Better::Neither => "neither",
    }
}

/// Compares metric `m` (named `name`) of A's values `a` with B's `b`; with `threshold`
/// (a fraction), a gated metric fails the gate when the change is significant, in the bad
/// direction and larger than the threshold (of A's mean, for a difference metric).
pub fn compare_metric(
    name: &str,
    m: &Metric,
    a: &[f64],
    b: &[f64],
    gated: bool,
    threshold: Option<f64>,
) -> Compared {
    let (mean_a, mean_b) = (mean(a), mean(b));
    let w = welch(a, b);
    let mw = mann_whitney(a, b);
    let ratio = (!m.difference).then(|| ratio_of_means(a, b)).flatten();
    let (welch_p, mann_whitney_p) = (
        w.as_ref().map(|w| w.p_value),
        mw.as_ref().map(|m| m.p_value),
    );
    let enough = a.len() >= MIN_N_VERDICT && b.len() >= MIN_N_VERDICT && w.is_some();
    let significant =
        enough && welch_p.is_some_and(|p| p < 0.05) && mann_whitney_p.is_some_and(|p| p < 0.05);
    let diff = w.as_ref().map(|w| w.diff);
    let better_b = |d: f64| match m.better {
        Better::Higher => Some(d > 0.0),
        Better::Lower => Some(d < 0.0),
        Better::Neither => None,
    };
    let verdict = match (enough, significant, diff.and_then(better_b)) {
        (false, _, _) => Verdict::CannotTell,
        (true, false, _) => Verdict::Same,
        (true, true, None) => Verdict::Changed,
        (true, true, Some(true)) => Verdict::Faster,
        (true, true, Some(false)) => Verdict::Slower,
    };
    let n_to_decide = (verdict == Verdict::CannotTell)
        .then(|| welch_n_to_decide(a, b, MAX_N_TO_DECIDE))
        .flatten()
        .map(|n| n.max(MIN_N_VERDICT).max(a.len().min(b.len())));
    // The change in the bad direction, as a fraction: of the ratio, or of A's mean.
    let change = match (m.difference, ratio, diff, mean_a) {
        (false, Some(r), _, _) => Some(r.ratio - 1.0),
        (true, _, Some(d), Some(ma)) if ma != 0.0 => Some(d / ma.abs()),
        _ => None,
    };
    let beyond = |thr: f64| {
        change.is_some_and(|c| match m.better {
            Better::Higher => c < -thr,
            Better::Lower => c > thr,
            Better::Neither => false,
        })
    };
    let gate_failed = gated && verdict == Verdict::Slower && threshold.is_some_and(beyond);
    Compared {
        metric: name.to_string(),
        unit: m.unit,
        better: better_text(m.better),
        by_difference: m.difference,
        n_a: a.len(),
        n_b: b.len(),
        mean_a,
        mean_b,
        ratio: ratio.map(|r| r.ratio),
        ratio_interval: ratio.map(|r| r.interval),
        diff,
        diff_lo: w.as_ref().map(|w| w.ci95_lo),
        diff_hi: w.as_ref().map(|w| w.ci95_hi),
        welch_p,
        mann_whitney_p,
        verdict,
        n_to_decide,
        gated,
        gate_failed,
    }
}

/// Whether the gate checks metric `m` by default: the cell's primary metric, and latency
/// (lower-is-better metrics in ns, us or ms named `rtt…`, `lat…`, `owd…` or `…delay…`
/// whose statistic is a mean or a median, p90 or p99; not the max or p99.9, which few
/// repetitions cannot pin down, nor CPU time).
pub fn gated_by_default(name: &str, m: &Metric, primary: &str) -> bool {
    if name == primary {
        return true;
    }
    let time = matches!(m.unit, "ns" | "us" | "ms");
    let latency =
        ["rtt", "lat", "owd"].iter().any(|p| name.starts_with(p)) || name.contains("delay");
    let statistic = name
        .split(['_', '.'])
        .any(|s| matches!(s, "mean" | "p50" | "p90" | "p99"));
    m.better == Better::Lower && time && latency && statistic && !m.difference
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metric::m;

    const GBPS: Metric = m("gbps", "Gbit/s", "Gbit/s", "", Better::Higher);
    const RTT: Metric = m("rtt_mean_us", "us", "us", "", Better::Lower);
    const COUNT: Metric = m("cwnd", "segments", "cwnd", "", Better::Neither);

    const A: [f64; 5] = [10.0, 10.2, 9.8, 10.1, 9.9];
    const HALF: [f64; 5] = [5.0, 5.1, 4.9, 5.05, 4.95];

    #[test]
    fn thresholds_parse_as_percentages_and_bad_ones_are_named() {
        assert_eq!(parse_threshold("5%").unwrap(), 0.05);
        assert_eq!(parse_threshold("50%").unwrap(), 0.5);
        assert_eq!(parse_threshold("0%").unwrap(), 0.0);
        for bad in ["5", "-3%", "x%", "%", "inf%"] {
            let e = parse_threshold(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains("`threshold`"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_halved_throughput_is_slower_and_fails_a_gate_under_the_drop() {
        let c = compare_metric("gbps", &GBPS, &A, &HALF, true, Some(0.3));
        assert_eq!(c.verdict, Verdict::Slower);
        assert!((c.ratio.unwrap() - 0.5).abs() < 1e-9);
        assert!(c.gate_failed);
        // A threshold beyond the drop passes.
        assert!(!compare_metric("gbps", &GBPS, &A, &HALF, true, Some(0.6)).gate_failed);
        // A metric the gate does not check never fails it.
        assert!(!compare_metric("gbps", &GBPS, &A, &HALF, false, Some(0.3)).gate_failed);
        // The other way round it is faster and passes.
        let c = compare_metric("gbps", &GBPS, &HALF, &A, true, Some(0.3));
        assert_eq!(c.verdict, Verdict::Faster);
        assert!(!c.gate_failed);
    }

    #[test]
    fn for_latency_lower_is_faster() {
        let c = compare_metric("rtt_mean_us", &RTT, &A, &HALF, true, Some(0.1));
        assert_eq!(c.verdict, Verdict::Faster);
        assert!(!c.gate_failed);
        let c = compare_metric("rtt_mean_us", &RTT, &HALF, &A, true, Some(0.1));
        assert_eq!(c.verdict, Verdict::Slower);
        assert!(c.gate_failed);
    }

    #[test]
    fn a_metric_without_direction_is_changed_never_faster() {
        let c = compare_metric("cwnd", &COUNT, &A, &HALF, true, Some(0.0));
        assert_eq!(c.verdict, Verdict::Changed);
        assert!(!c.gate_failed);
    }

    #[test]
    fn too_few_repetitions_cannot_tell_and_say_what_would() {
        let c = compare_metric("gbps", &GBPS, &A[..3], &HALF[..3], true, Some(0.1));
        assert_eq!(c.verdict, Verdict::CannotTell);
        assert!(!c.gate_failed);
        assert_eq!(c.n_to_decide, Some(MIN_N_VERDICT));
        // A small difference in noisy data needs more.
        let noisy = [9.0, 11.0, 10.0];
        let c = compare_metric("gbps", &GBPS, &noisy, &[9.5, 11.5, 10.5], true, None);
        assert!(
            c.n_to_decide.unwrap() > MIN_N_VERDICT,
            "{:?}",
            c.n_to_decide
        );
    }

    #[test]
    fn noise_is_the_same() {
        let b = [10.1, 9.9, 10.0, 10.2, 9.8];
        let c = compare_metric("gbps", &GBPS, &A, &b, true, Some(0.0));
        assert_eq!(c.verdict, Verdict::Same);
        assert!(!c.gate_failed);
    }

    #[test]
    fn a_difference_metric_compares_by_difference_not_ratio() {
        let added = m("added_us", "us", "us", "", Better::Lower).as_difference();
        let a = [-1.0, 1.0, 0.5, -0.5, 0.0];
        let b = [99.0, 101.0, 100.5, 99.5, 100.0];
        let c = compare_metric("added_us", &added, &a, &b, true, Some(0.05));
        assert!(c.ratio.is_none() && c.ratio_interval.is_none());
        assert_eq!(c.diff, Some(100.0));
        assert_eq!(c.verdict, Verdict::Slower);
    }

    #[test]
    fn the_default_gate_is_the_primary_metric_and_latency() {
        assert!(gated_by_default("gbps", &GBPS, "gbps"));
        assert!(gated_by_default("rtt_mean_us", &RTT, "gbps"));
        let max = m("rtt_max_us", "us", "us", "", Better::Lower);
        assert!(!gated_by_default("rtt_max_us", &max, "gbps"));
        let srtt = m("rtt_us", "us", "us", "", Better::Lower);
        assert!(!gated_by_default("rtt_us", &srtt, "gbps"));
        let cpu = m("cpu_s", "s", "s", "", Better::Lower);
        assert!(!gated_by_default("cpu_s", &cpu, "gbps"));
    }
}
