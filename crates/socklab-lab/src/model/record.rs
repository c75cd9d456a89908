//! The store's records as plain data: what the store writes for a plan (a [`PlanRecord`]: the
//! fields it stores, not the plan itself) and the rows it reads back.

use std::collections::BTreeMap;

use crate::model::params::Params;
use crate::model::sample::Direction;

/// What the store keeps of a plan when an experiment begins (`Store::begin_experiment`): plain
/// data, so the store need not know plans or workloads. `plan.rs` makes one from a `Plan`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRecord {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Command line.
    pub command: String,
    /// Measured repetitions per cell.
    pub reps: usize,
    /// Warm-up repetitions per cell.
    pub warmup: usize,
    /// Run order as stored: `interleaved`, `random:SEED` or `sequential`.
    pub run_order: String,
    /// Cells in plan order.
    pub cells: Vec<CellRecord>,
}

/// What the store keeps of one cell of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRecord {
    /// Index in its plan.
    pub index: usize,
    /// Workload name.
    pub workload: String,
    /// Label.
    pub label: String,
    /// Full configuration.
    pub config: Params,
}

/// An experiment as stored.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExperimentRow {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Command line.
    pub command: String,
    /// Start time.
    pub created_at: String,
    /// End time, if it ended.
    pub finished_at: Option<String>,
    /// running, done, interrupted or failed (a `running` row whose process is gone was killed).
    pub status: String,
    /// Measured repetitions asked per cell.
    pub reps: i64,
    /// Warm-up repetitions per cell.
    pub warmup: i64,
    /// Run order.
    pub run_order: String,
    /// Cells.
    pub cells: i64,
    /// Measured samples stored.
    pub samples: i64,
    /// Host.
    pub host_id: i64,
}

/// A cell as stored.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellRow {
    /// Id.
    pub id: i64,
    /// Index in its plan.
    pub idx: i64,
    /// Workload name.
    pub workload: String,
    /// Label.
    pub label: String,
    /// Full configuration.
    pub config: Params,
}

/// An interval as stored, with the repetition it belongs to.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IntervalRow {
    /// Cell id.
    pub cell_id: i64,
    /// Repetition number.
    pub rep: i64,
    /// Warm-up?
    pub warmup: bool,
    /// Stream number.
    pub stream: u32,
    /// `up` or `down`.
    pub direction: String,
    /// Start, seconds since the start of the repetition.
    pub start_s: f64,
    /// End, seconds since the start of the repetition.
    pub end_s: f64,
    /// In the omitted start.
    pub omitted: bool,
    /// Metric values.
    pub values: BTreeMap<String, f64>,
}

impl IntervalRow {
    /// The value of a metric, if present.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.values.get(name).copied()
    }

    /// Its direction, typed (`up` for anything unknown).
    pub fn direction(&self) -> Direction {
        self.direction.parse().unwrap_or_default()
    }
}
