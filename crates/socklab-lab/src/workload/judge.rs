//! How an experiment's cells are judged, per their workload: the primary metric, the baseline
//! cell, the best cell, and each cell against its reference (Welch's test). The statistics
//! come from [`crate::summary`]; what counts as primary or baseline comes from each
//! workload's [`Spec`](crate::workload::Spec).

use socklab_stats::{bimodal, mann_whitney, welch, MannWhitney, Welch};

use crate::model::metric::Better;
use crate::model::stats::ExperimentStats;
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
    /// Difference of means, cell − reference, in the metric's unit.
    pub diff: f64,
    /// Difference of medians, cell − reference.
    pub diff_median: f64,
    /// Whether the metric is itself a difference (added latency: loaded − idle), so the
    /// comparison is shown in its unit, never as a percentage of a value near zero.
    pub by_difference: bool,
    /// The metric's unit (for a comparison by difference).
    pub unit: &'static str,
    /// Welch's test of the difference (None with fewer than 2 samples on either side).
    pub test: Option<Welch>,
    /// The Mann–Whitney U test of the two cells' repetitions.
    pub rank: Option<MannWhitney>,
    /// Whether either cell's repetitions fall into two clusters ([`socklab_stats::bimodal`]).
    pub bimodal: bool,
    /// Whether this cell's own repetitions fall into two clusters.
    pub bimodal_self: bool,
    /// Whether the reference cell's repetitions do (then every comparison with it is
    /// bimodal, and the mark names the reference, not this cell).
    pub bimodal_reference: bool,
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

    /// The difference shown as text: relative (`-3.2%`), or in the metric's unit for a
    /// metric that is itself a difference (`+3.20 ms`); `median` appended when bimodal.
    pub fn shown_text(&self) -> String {
        let (rel, abs) = if self.bimodal {
            (self.rel_median, self.diff_median)
        } else {
            (self.rel, self.diff)
        };
        let v = if self.by_difference {
            format!(
                "{}{} {}",
                sign(abs),
                crate::table::num(abs.abs()),
                self.unit
            )
        } else {
            format!("{:+.1}%", rel * 100.0)
        };
        if self.bimodal {
            format!("{v} median")
        } else {
            v
        }
    }

    /// Which side of the comparison is bimodal: `this cell`, `reference` or `both`.
    pub fn bimodal_side(&self) -> &'static str {
        match (self.bimodal_self, self.bimodal_reference) {
            (true, true) => "both",
            (false, true) => "reference",
            _ => "this cell",
        }
    }

    /// The table's text: `-3.2%`, `+1.0% (ns)`, `-50.0% (n<5)`, `+3.20 ms (ns)`,
    /// `+0.0% median, bimodal: this cell, MW p=0.52 (ns)` (the bimodal mark says whose
    /// repetitions are bimodal: this row's cell, the reference's, or both).
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
                "{}, bimodal: {}, MW p={p}{verdict}",
                self.shown_text(),
                self.bimodal_side()
            )
        } else {
            format!("{}{verdict}", self.shown_text())
        }
    }
}

fn sign(x: f64) -> &'static str {
    if x < 0.0 {
        "-"
    } else {
        "+"
    }
}

impl ExperimentStats {
    /// The index of the cell with the top mean on `metric` (per the metric's preferred
    /// direction), among cells of `workload` whose configuration took effect (see
    /// [`Self::not_in_effect`]): the cell the others are compared with when there is no
    /// baseline. It is only named *best* when [`Self::best`] says so.
    pub fn top(&self, metric_name: &str, workload: &str) -> Option<usize> {
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

    /// The other measured cells of `workload` (configuration in effect) that the top cell is
    /// compared with, and whether the top cell is significantly better than each.
    pub fn beaten(&self, metric_name: &str, workload: &str) -> Vec<(usize, bool)> {
        let Some(t) = self.top(metric_name, workload) else {
            return Vec::new();
        };
        (0..self.cells.len())
            .filter(|&i| i != t && self.cells[i].cell.workload == workload)
            .filter(|&i| self.not_in_effect(i).is_none())
            .filter(|&i| self.cells[i].metrics.contains_key(metric_name))
            .map(|i| {
                let sig = self
                    .compare(t, i, metric_name)
                    .is_some_and(|v| v.significant() == Some(true));
                (i, sig)
            })
            .collect()
    }

    /// The best cell of `workload` on `metric`: the top cell ([`Self::top`]), and only when
    /// it is significantly better than every other cell of the workload whose configuration
    /// took effect (Welch's test, Mann–Whitney too when bimodal, each side ≥
    /// [`MIN_N_VERDICT`] repetitions). `None` when no such cell exists, or when the workload
    /// has a single cell (nothing to be best against): the report then names no best.
    pub fn best(&self, metric_name: &str, workload: &str) -> Option<usize> {
        let t = self.top(metric_name, workload)?;
        let others = self.beaten(metric_name, workload);
        (!others.is_empty() && others.iter().all(|(_, sig)| *sig)).then_some(t)
    }

    /// About how many repetitions per cell a two-sample t-test would need to tell the top cell
    /// of `workload` from its closest rival at the difference and pooled spread measured now
    /// (two-sided α = 0.05, power 0.8: [`socklab_stats::two_sample_n`], as the seed verdicts'
    /// needs), at least [`MIN_N_VERDICT`]; `None` when it cannot be estimated (no rival, no
    /// spread, equal means).
    pub fn needed_reps(&self, metric_name: &str, workload: &str) -> Option<usize> {
        let t = self.top(metric_name, workload)?;
        let top = self.cells[t].metrics.get(metric_name)?;
        let rival = self
            .beaten(metric_name, workload)
            .into_iter()
            .filter(|(_, sig)| !sig)
            .filter_map(|(i, _)| self.cells[i].metrics.get(metric_name))
            .min_by(|a, b| {
                let (da, db) = ((a.mean - top.mean).abs(), (b.mean - top.mean).abs());
                da.total_cmp(&db)
            })?;
        let sd = socklab_stats::pooled_sd(top.sd?, top.n, rival.sd?, rival.n)?;
        let n = socklab_stats::two_sample_n(rival.mean - top.mean, sd, 0.05, 0.8)?;
        Some(n.max(MIN_N_VERDICT))
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
    /// top cell on `metric` ([`Self::top`], whether or not it is the best).
    pub fn reference(&self, metric_name: &str, workload: &str) -> Option<usize> {
        self.baseline(workload)
            .or_else(|| self.top(metric_name, workload))
    }

    /// The cell cell `i` is compared with: its twin when the experiment has it (a TLS cell's
    /// plain twin, [`crate::workload::Spec::twin`]), else its workload's reference.
    pub fn reference_of(&self, i: usize, metric_name: &str) -> Option<usize> {
        self.twin_of(i)
            .or_else(|| self.reference(metric_name, &self.cells[i].cell.workload))
    }

    /// The twin of cell `i` in this experiment, if its workload names one and it ran.
    pub fn twin_of(&self, i: usize) -> Option<usize> {
        let c = &self.cells[i].cell;
        let twin = kind(&c.workload)?.twin(&c.config)?;
        self.cells
            .iter()
            .position(|o| o.cell.workload == c.workload && o.cell.config == twin)
    }

    /// Cell `i` compared with the cell it is compared with (see [`Self::reference_of`]).
    pub fn vs_best(&self, i: usize, metric_name: &str) -> Option<VsBest> {
        let b = self.reference_of(i, metric_name)?;
        self.compare(b, i, metric_name)
    }

    /// Cell `i` compared with cell `b` on `metric_name`.
    pub fn compare(&self, b: usize, i: usize, metric_name: &str) -> Option<VsBest> {
        let c = &self.cells[i];
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
        let m = metric(metric_name);
        Some(VsBest {
            rel,
            rel_median,
            diff: cm.mean - bm.mean,
            diff_median: cm.median - bm.median,
            by_difference: m.difference,
            unit: m.unit,
            test: welch(bv, cv),
            rank: mann_whitney(cv, bv),
            bimodal: bimodal(bv).is_some() || bimodal(cv).is_some(),
            bimodal_self: bimodal(cv).is_some(),
            bimodal_reference: bimodal(bv).is_some(),
            n: bv.len().min(cv.len()),
        })
    }
}
