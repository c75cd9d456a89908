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
            let mut n = 0;
            for s in samples.iter().filter(|s| s.cell_id == cell.id && !s.warmup) {
                n += 1;
                for (k, v) in &s.metrics {
                    values.entry(k.clone()).or_default().push(*v);
                }
            }
            let metrics = values
                .iter()
                .filter_map(|(k, v)| summarize(v).map(|s| (k.clone(), s)))
                .collect();
            CellStats {
                cell,
                n,
                metrics,
                values,
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

    /// Cell `i` compared with the best cell of its workload on `metric`.
    pub fn vs_best(&self, i: usize, metric_name: &str) -> Option<VsBest> {
        let c = &self.cells[i];
        let b = self.best(metric_name, &c.cell.workload)?;
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
