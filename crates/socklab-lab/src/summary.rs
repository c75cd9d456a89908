//! Statistics of an experiment, computed from the store alone (never from memory of a run).

use std::collections::BTreeMap;

use socklab_stats::{summarize, welch, Summary, Welch};

use crate::metric::{metric, Better};
use crate::store::{CellRow, ExperimentRow, Store};
use crate::LabError;

/// One cell's statistics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellStats {
    /// The cell.
    pub cell: CellRow,
    /// Measured repetitions (warm-ups excluded).
    pub n: usize,
    /// Summary per metric.
    pub metrics: BTreeMap<String, Summary>,
    /// Raw values per metric, in run order (for tests and plots).
    #[serde(skip)]
    pub values: BTreeMap<String, Vec<f64>>,
    /// Histograms merged over the measured repetitions: name to sorted `(value, count)`.
    #[serde(skip)]
    pub histograms: BTreeMap<String, Vec<(u64, u64)>>,
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
}

/// Comparison of one cell with the best cell on a metric.
#[derive(Debug, Clone)]
pub struct VsBest {
    /// Relative difference of means, (cell − best) / |best|.
    pub rel: f64,
    /// Welch's test of the difference (None with fewer than 2 samples on either side).
    pub test: Option<Welch>,
}

/// Reads an experiment and computes every statistic.
pub fn experiment_stats(store: &Store, id: i64) -> Result<ExperimentStats, LabError> {
    let experiment = store.experiment(id)?;
    let host = store.host(experiment.host_id)?;
    let facts = store.facts(id)?;
    let samples = store.samples(id)?;
    let cells = store
        .cells(id)?
        .into_iter()
        .map(|cell| {
            let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut merged: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
            let mut n = 0;
            for s in samples.iter().filter(|s| s.cell_id == cell.id && !s.warmup) {
                n += 1;
                for (k, v) in &s.metrics {
                    values.entry(k.clone()).or_default().push(*v);
                }
                for (k, buckets) in &s.histograms {
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
                metrics,
                values,
                histograms,
            }
        })
        .collect();
    Ok(ExperimentStats {
        experiment,
        host,
        facts,
        cells,
    })
}

impl ExperimentStats {
    /// The index of the best cell on `metric` by mean (per the metric's preferred direction),
    /// among cells of `workload`.
    pub fn best(&self, metric_name: &str, workload: &str) -> Option<usize> {
        let better = metric(metric_name).better;
        let mut best: Option<(usize, f64)> = None;
        for (i, c) in self.cells.iter().enumerate() {
            if c.cell.workload != workload {
                continue;
            }
            let Some(s) = c.metrics.get(metric_name) else {
                continue;
            };
            let wins = match (best, better) {
                (None, _) => true,
                (Some((_, b)), Better::Lower) => s.mean < b,
                (Some((_, b)), _) => s.mean > b,
            };
            if wins {
                best = Some((i, s.mean));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The primary metric of the experiment (that of its first cell's workload).
    pub fn primary(&self) -> &'static str {
        let p = crate::metric::primary(
            self.cells
                .first()
                .map_or("bulk", |c| c.cell.workload.as_str()),
        );
        // A load against somebody else's server has no server CPU: judge it by requests/s.
        if p == "cpu_us_per_req" && !self.cells.iter().any(|c| c.metrics.contains_key(p)) {
            return "req_per_s";
        }
        p
    }

    /// The baseline cell of `workload` (options `baseline`, or the `iterative` server design:
    /// the book's baseline), when the experiment has one and
    /// other cells to compare with it.
    pub fn baseline(&self, workload: &str) -> Option<usize> {
        let same = self
            .cells
            .iter()
            .filter(|c| c.cell.workload == workload)
            .count();
        if same < 2 {
            return None;
        }
        self.cells.iter().position(|c| {
            c.cell.workload == workload
                && (c.cell.config.get("opts") == Some("baseline")
                    || c.cell.config.get("design") == Some("iterative"))
        })
    }

    /// The cell others of `workload` are compared with: the baseline if there is one, else the
    /// best on `metric`.
    pub fn reference(&self, metric_name: &str, workload: &str) -> Option<usize> {
        self.baseline(workload)
            .or_else(|| self.best(metric_name, workload))
    }

    /// Cell `i` compared with the reference cell of its workload (see [`Self::reference`]).
    pub fn vs_best(&self, i: usize, metric_name: &str) -> Option<VsBest> {
        let c = &self.cells[i];
        let b = self.reference(metric_name, &c.cell.workload)?;
        let (cm, bm) = (
            c.metrics.get(metric_name)?,
            self.cells[b].metrics.get(metric_name)?,
        );
        let rel = if bm.mean != 0.0 {
            (cm.mean - bm.mean) / bm.mean.abs()
        } else {
            0.0
        };
        let test = welch(&self.cells[b].values[metric_name], &c.values[metric_name]);
        Some(VsBest { rel, test })
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
