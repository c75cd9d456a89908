//! Statistics of an experiment, computed from the store alone (never from memory of a run).
//! How cells are judged (primary metric, baseline, best) is the workloads' business (their
//! `judge` module), not this one's.

use std::collections::BTreeMap;

use socklab_stats::summarize;

use crate::store::Store;

use crate::model::record::{CellRow, IntervalRow};
use crate::model::stats::{CellStats, ExperimentStats, VALID_METRIC};
use crate::store::SampleRow;
use crate::LabError;

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
    let wanted = usize::try_from(experiment.reps).unwrap_or(0);
    let cells = store
        .cells(id)?
        .into_iter()
        .map(|cell| cell_stats(cell, &samples, &mut by_rep, keep_invalid, wanted))
        .collect();
    Ok(ExperimentStats {
        experiment,
        host,
        facts,
        cells,
        keep_invalid,
    })
}

/// One cell's statistics from the experiment's `samples` (warm-ups skipped; repetitions
/// marked invalid left out and counted unless `keep_invalid`) and its time series `by_rep`
/// (taken out of the map); `wanted` the repetitions asked per cell.
pub(crate) fn cell_stats(
    cell: CellRow,
    samples: &[SampleRow],
    by_rep: &mut BTreeMap<(i64, i64, bool), Vec<IntervalRow>>,
    keep_invalid: bool,
    wanted: usize,
) -> CellStats {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut merged: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
    let mut rep_histograms: BTreeMap<String, Vec<Vec<(u64, u64)>>> = BTreeMap::new();
    let (mut n, mut invalid, mut attempts, mut retried) = (0, 0, 0, 0);
    let mut series = Vec::new();
    for s in samples.iter().filter(|s| s.cell_id == cell.id && !s.warmup) {
        attempts += 1;
        retried += usize::from(s.extra.get("retry") == Some(&serde_json::Value::Bool(true)));
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
        wanted,
        metrics,
        values,
        histograms,
        rep_histograms,
        series,
    }
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
