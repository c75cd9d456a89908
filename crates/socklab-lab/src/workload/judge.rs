//! How an experiment's cells are judged, per their workload: the primary metric, the baseline
//! cell, the best cell, and each cell against its reference (Welch's test). The statistics
//! come from [`crate::summary`]; what counts as primary or baseline comes from each
//! workload's [`Spec`](crate::workload::Spec).

use socklab_stats::{welch, Welch};

use crate::metric::Better;
use crate::summary::ExperimentStats;
use crate::workload::{kind, metric};

/// Comparison of one cell with the reference cell on a metric.
#[derive(Debug, Clone)]
pub struct VsBest {
    /// Relative difference of means, (cell − best) / |best|.
    pub rel: f64,
    /// Welch's test of the difference (None with fewer than 2 samples on either side).
    pub test: Option<Welch>,
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
        let has = |m: &str| self.cells.iter().any(|c| c.metrics.contains_key(m));
        self.cells
            .first()
            .and_then(|c| kind(&c.cell.workload))
            .map_or("gbps", |k| k.primary(&has))
    }

    /// The baseline cell of `workload` (as its workload defines it: options `baseline`, the
    /// `iterative` server design), when the experiment has one and other cells to compare
    /// with it.
    pub fn baseline(&self, workload: &str) -> Option<usize> {
        let k = kind(workload)?;
        let same = self
            .cells
            .iter()
            .filter(|c| c.cell.workload == workload)
            .count();
        if same < 2 {
            return None;
        }
        self.cells
            .iter()
            .position(|c| c.cell.workload == workload && k.is_baseline(&c.cell.config))
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
