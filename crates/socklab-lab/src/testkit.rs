//! Made-up experiments for the statistics and report tests: a temporary store with chosen
//! repetitions per cell, recorded through the public API as a run would.

use crate::model::params::Params;
use crate::plan::{Axis, Group, Order, Plan};
use crate::runner::Sample;
use crate::store::Store;

/// A temporary store holding one experiment.
pub struct Lab {
    _dir: tempfile::TempDir,
    /// The store.
    pub store: Store,
    /// The experiment.
    pub id: i64,
}

/// One repetition: metric name and value pairs.
pub type Rep = Vec<(&'static str, f64)>;

/// The repetitions of metric `name` with values `xs` (one metric per repetition).
pub fn reps(name: &'static str, xs: &[f64]) -> Vec<Rep> {
    xs.iter().map(|&x| vec![(name, x)]).collect()
}

/// Records an experiment of `workload` with `fixed` parameters and `key` taking `values`,
/// cell `i` measuring the repetitions `cells[i]` (no warm-up).
pub fn lab(workload: &str, fixed: Params, key: &str, values: &[&str], cells: &[Vec<Rep>]) -> Lab {
    lab_axes(workload, fixed, &[(key, values)], cells)
}

/// [`lab`] with several axes, crossed (the first varies slowest).
pub fn lab_axes(
    workload: &str,
    fixed: Params,
    axes: &[(&str, &[&str])],
    cells: &[Vec<Rep>],
) -> Lab {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("results.db")).unwrap();
    let mut group = Group::new(workload, fixed);
    for (key, values) in axes {
        group = group.axis(Axis::single(key, values.iter().copied()));
    }
    let reps = cells.iter().map(Vec::len).max().unwrap_or(1);
    let plan = Plan::build("made up", "", &[group], reps, 0, Order::Sequential, "test").unwrap();
    assert_eq!(plan.cells.len(), cells.len());
    let (id, ids) = store
        .begin_experiment(&plan, &socklab_sys::host::host_facts())
        .unwrap();
    for (cell, rs) in ids.iter().zip(cells) {
        for (r, metrics) in rs.iter().enumerate() {
            let s = Sample {
                metrics: metrics.iter().map(|(k, v)| ((*k).into(), *v)).collect(),
                extra: serde_json::Value::Null,
                histograms: Vec::new(),
                intervals: Vec::new(),
            };
            store
                .record_sample(*cell, r, false, "2025-01-01T00:00:01Z", 1.0, &s)
                .unwrap();
        }
    }
    store.finish_experiment(id, "done").unwrap();
    Lab {
        _dir: dir,
        store,
        id,
    }
}
