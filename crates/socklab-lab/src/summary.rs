//! Statistics of an experiment, computed from the store alone (never from memory of a run).
//! How cells are judged (primary metric, baseline, best) is the workloads' business (their
//! `judge` module), not this one's.

use std::collections::BTreeMap;

use socklab_stats::{summarize, Summary};

use crate::store::{CellRow, ExperimentRow, Store};
use crate::store_series::IntervalRow;
use crate::LabError;

/// One cell's statistics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellStats {
    /// The cell.
    pub cell: CellRow,
    /// Measured repetitions in the statistics (warm-ups excluded; invalid ones too, unless
    /// kept).
    pub n: usize,
    /// Measured repetitions marked invalid (`emu_valid = 0`), left out of the statistics
    /// unless [`ExperimentStats::keep_invalid`] (then counted in `n` as well).
    pub invalid: usize,
    /// Measured attempts stored (valid, invalid and retries; warm-ups excluded).
    pub attempts: usize,
    /// Of those, retries: attempts the Runner added because earlier ones were marked invalid
    /// (stored with `"retry": true`).
    pub retried: usize,
    /// Measured repetitions the experiment asked per cell (its `reps`).
    pub wanted: usize,
    /// Summary per metric.
    pub metrics: BTreeMap<String, Summary>,
    /// Raw values per metric, in run order (for tests and plots).
    #[serde(skip)]
    pub values: BTreeMap<String, Vec<f64>>,
    /// Histograms merged over the measured repetitions: name to sorted `(value, count)`.
    #[serde(skip)]
    pub histograms: BTreeMap<String, Vec<(u64, u64)>>,
    /// The same histograms, one per measured repetition in run order (for the spread of a
    /// percentile across repetitions).
    #[serde(skip)]
    pub rep_histograms: BTreeMap<String, Vec<Vec<(u64, u64)>>>,
    /// The time series of the repetitions in the statistics (`interval`), by repetition in
    /// run order.
    #[serde(skip)]
    pub series: Vec<IntervalRow>,
}

/// The value at quantile `q` (0..=1) of sorted `(value, count)` buckets.
pub fn bucket_quantile(buckets: &[(u64, u64)], q: f64) -> Option<u64> {
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    if total == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for &(v, c) in buckets {
        seen += c;
        if seen >= rank {
            return Some(v);
        }
    }
    buckets.last().map(|b| b.0)
}

/// An experiment's statistics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExperimentStats {
    /// The experiment.
    pub experiment: ExperimentRow,
    /// Host facts.
    pub host: Vec<(String, String)>,
    /// Experiment facts (e.g. sink accounting).
    pub facts: Vec<(String, String)>,
    /// Cells in plan order.
    pub cells: Vec<CellStats>,
    /// Whether repetitions marked invalid are in the statistics (`--keep-invalid`).
    pub keep_invalid: bool,
}

/// The metric a repetition is marked invalid by: `0` when the emulated link could not keep up.
pub const VALID_METRIC: &str = "emu_valid";

impl CellStats {
    /// The `n` column: `3`, `3 (+2 invalid)` (left out), `5 (incl. 2 invalid)` (kept),
    /// `5 (+2 invalid, retried)` (re-run until the cell had its 5), `3 (+7 invalid, 4 retried;
    /// short of 5 after 10 attempts)` (the `2 × reps` attempts did not give `reps` valid ones).
    pub fn n_text(&self, keep_invalid: bool) -> String {
        let n = self.n;
        match (self.invalid, keep_invalid, self.retried) {
            (0, _, _) => n.to_string(),
            (k, true, _) => format!("{n} (incl. {k} invalid)"),
            (k, false, 0) => format!("{n} (+{k} invalid)"),
            (k, false, r) => {
                let retried = if r == k {
                    "retried".to_string()
                } else {
                    format!("{r} retried")
                };
                if self.retries_exhausted() {
                    format!(
                        "{n} (+{k} invalid, {retried}; short of {} after {} attempts)",
                        self.wanted, self.attempts
                    )
                } else {
                    format!("{n} (+{k} invalid, {retried})")
                }
            }
        }
    }

    /// Whether the cell has fewer valid repetitions than asked after its `2 × reps` attempts.
    pub fn retries_exhausted(&self) -> bool {
        self.retried > 0 && self.n < self.wanted && self.attempts >= 2 * self.wanted
    }
}

/// Reads an experiment and computes every statistic; repetitions marked invalid
/// (`emu_valid = 0`) are left out and counted.
pub fn experiment_stats(store: &Store, id: i64) -> Result<ExperimentStats, LabError> {
    experiment_stats_with(store, id, false)
}

/// [`experiment_stats`], with the invalid repetitions kept in the statistics when
/// `keep_invalid` (they are counted either way).
pub fn experiment_stats_with(
    store: &Store,
    id: i64,
    keep_invalid: bool,
) -> Result<ExperimentStats, LabError> {
    let experiment = store.experiment(id)?;
    let host = store.host(experiment.host_id)?;
    let facts = store.facts(id)?;
    let samples = store.samples(id)?;
    // The time series by repetition: (cell, rep, warm-up) to its intervals.
    let mut by_rep: BTreeMap<(i64, i64, bool), Vec<IntervalRow>> = BTreeMap::new();
    for i in store.intervals(id)? {
        by_rep
            .entry((i.cell_id, i.rep, i.warmup))
            .or_default()
            .push(i);
    }
    let cells = store
        .cells(id)?
        .into_iter()
        .map(|cell| {
            let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut merged: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
            let mut rep_histograms: BTreeMap<String, Vec<Vec<(u64, u64)>>> = BTreeMap::new();
            let (mut n, mut invalid, mut attempts, mut retried) = (0, 0, 0, 0);
            let mut series = Vec::new();
            for s in samples.iter().filter(|s| s.cell_id == cell.id && !s.warmup) {
                attempts += 1;
                retried +=
                    usize::from(s.extra.get("retry") == Some(&serde_json::Value::Bool(true)));
                if s.metrics.get(VALID_METRIC) == Some(&0.0) {
                    invalid += 1;
                    if !keep_invalid {
                        continue;
                    }
                }
                n += 1;
                series.extend(
                    by_rep
                        .remove(&(s.cell_id, s.rep, false))
                        .unwrap_or_default(),
                );
                for (k, v) in &s.metrics {
                    values.entry(k.clone()).or_default().push(*v);
                }
                for (k, buckets) in &s.histograms {
                    rep_histograms
                        .entry(k.clone())
                        .or_default()
                        .push(buckets.clone());
                    let h = merged.entry(k.clone()).or_default();
                    for &(v, c) in buckets {
                        *h.entry(v).or_default() += c;
                    }
                }
            }
            let histograms = merged
                .into_iter()
                .map(|(k, h)| (k, h.into_iter().collect()))
                .collect();
            let metrics = values
                .iter()
                .filter_map(|(k, v)| summarize(v).map(|s| (k.clone(), s)))
                .collect();
            CellStats {
                cell,
                n,
                invalid,
                attempts,
                retried,
                wanted: usize::try_from(experiment.reps).unwrap_or(0),
                metrics,
                values,
                histograms,
                rep_histograms,
                series,
            }
        })
        .collect();
    Ok(ExperimentStats {
        experiment,
        host,
        facts,
        cells,
        keep_invalid,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn bucket_quantiles() {
        let b = [(10, 50), (20, 40), (100, 9), (1000, 1)];
        assert_eq!(super::bucket_quantile(&b, 0.5), Some(10));
        assert_eq!(super::bucket_quantile(&b, 0.51), Some(20));
        assert_eq!(super::bucket_quantile(&b, 0.99), Some(100));
        assert_eq!(super::bucket_quantile(&b, 1.0), Some(1000));
        assert_eq!(super::bucket_quantile(&[], 0.5), None);
    }
}
