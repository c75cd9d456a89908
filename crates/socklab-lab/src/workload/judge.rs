//! How an experiment's cells are judged, per their workload: the primary metric, the baseline
//! cell, the best cell, and each cell against its reference (Welch's test). The statistics
//! come from [`crate::summary`]; what counts as primary or baseline comes from each
//! workload's [`Spec`](crate::workload::Spec).

use socklab_stats::{bimodal, mann_whitney, welch, MannWhitney, Welch};

use crate::metric::Better;
use crate::summary::ExperimentStats;
use crate::workload::{kind, metric};

/// Fewer repetitions than this on either side: no significance call (the interval is too
/// wide to decide).
pub const MIN_N_VERDICT: usize = 5;

/// Comparison of one cell with the reference cell on a metric.
#[derive(Debug, Clone)]
pub struct VsBest {
    /// Relative difference of means, (cell − best) / |best|.
    pub rel: f64,
    /// Relative difference of medians (what a bimodal comparison reports).
    pub rel_median: f64,
    /// Welch's test of the difference (None with fewer than 2 samples on either side).
    pub test: Option<Welch>,
    /// The Mann–Whitney U test of the two cells' repetitions.
    pub rank: Option<MannWhitney>,
    /// Whether either cell's repetitions fall into two clusters ([`socklab_stats::bimodal`]).
    pub bimodal: bool,
    /// The fewer repetitions of the two cells.
    pub n: usize,
}

impl VsBest {
    /// The verdict: `None` when there is none to make (fewer than [`MIN_N_VERDICT`]
    /// repetitions on a side, or no test); for a bimodal comparison, significant only when
    /// Welch's test and the Mann–Whitney U test both find p < 0.05.
    pub fn significant(&self) -> Option<bool> {
        if self.n < MIN_N_VERDICT {
            return None;
        }
        let welch = self.test.as_ref()?.significant;
        if self.bimodal {
            Some(welch && self.rank.as_ref()?.significant)
        } else {
            Some(welch)
        }
    }

    /// The difference shown: of medians when bimodal, of means otherwise.
    pub fn shown(&self) -> f64 {
        if self.bimodal {
            self.rel_median
        } else {
            self.rel
        }
    }

    /// The table's text: `-3.2%`, `+1.0% (ns)`, `-50.0% (n<5)`,
    /// `+0.0% median, bimodal, MW p=0.52 (ns)`.
    pub fn text(&self) -> String {
        let verdict = match (self.significant(), &self.test) {
            (_, None) => " (n<2)",
            (None, _) => " (n<5)",
            (Some(true), _) => "",
            (Some(false), _) => " (ns)",
        };
        if self.bimodal {
            let p = self
                .rank
                .as_ref()
                .map_or_else(|| "-".into(), |m| format!("{:.2}", m.p_value));
            format!(
                "{:+.1}% median, bimodal, MW p={p}{verdict}",
                self.rel_median * 100.0
            )
        } else {
            format!("{:+.1}%{verdict}", self.rel * 100.0)
        }
    }
}

impl ExperimentStats {
    /// The index of the best cell on `metric` by mean (per the metric's preferred direction),
    /// among cells of `workload` whose configuration took effect (see
    /// [`Self::not_in_effect`]).
    pub fn best(&self, metric_name: &str, workload: &str) -> Option<usize> {
        let better = metric(metric_name).better;
        let mut best: Option<(usize, f64)> = None;
        for (i, c) in self.cells.iter().enumerate() {
            if c.cell.workload != workload || self.not_in_effect(i).is_some() {
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

    /// Why cell `i` did not get what its configuration asked for (its workload's
    /// [`Spec::not_in_effect`](crate::workload::Spec::not_in_effect)); such a cell is never
    /// the best.
    pub fn not_in_effect(&self, i: usize) -> Option<String> {
        let c = self.cells.get(i)?;
        kind(&c.cell.workload)?.not_in_effect(&c.cell.config, &c.metrics)
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
        let rel_median = if bm.median != 0.0 {
            (cm.median - bm.median) / bm.median.abs()
        } else {
            0.0
        };
        let (bv, cv) = (&self.cells[b].values[metric_name], &c.values[metric_name]);
        Some(VsBest {
            rel,
            rel_median,
            test: welch(bv, cv),
            rank: mann_whitney(cv, bv),
            bimodal: bimodal(bv).is_some() || bimodal(cv).is_some(),
            n: bv.len().min(cv.len()),
        })
    }
}
