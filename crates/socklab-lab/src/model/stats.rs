//! The statistics of an experiment as plain data: what `summary.rs` computes from the store
//! and the reports read. The data types only; computing them stays in `summary.rs`.

use std::collections::BTreeMap;

use socklab_stats::Summary;

use crate::model::record::{CellRow, ExperimentRow, IntervalRow};

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
