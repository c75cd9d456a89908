//! Issue 28 part 1: the report's first screen shows the findings. A store shaped like
//! `socklab lab --quick` (every suite's experiment file, its quick repetitions, made-up values)
//! rendered at 1280×800: the table of headline figures and seed verdicts is whole within that
//! first viewport, above the table of contents and the host.

use socklab_lab::model::params::Params;
use socklab_lab::runner::Sample;
use socklab_lab::store::Store;

/// The primary metric of each workload, as its workload defines it.
fn primary(workload: &str) -> &'static str {
    match workload {
        "pingpong" => "total_us",
        "load" => "cpu_us_per_req",
        "states" => "rebind_ok",
        "transfer" => "total_s",
        "rrul" => "added_p50_ms",
        _ => "gbps",
    }
}

/// A store holding one experiment per suite file, as `lab --quick` makes them.
pub fn quick_lab() -> (tempfile::TempDir, Store, Vec<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("results.db")).unwrap();
    let mut ids = Vec::new();
    for suite in socklab_lab::suites::SUITES {
        for (name, text) in suite.files {
            let plan = socklab_lab::file::parse(text, name)
                .unwrap()
                .plan(true, "socklab lab --quick")
                .unwrap();
            let (id, cells) = store
                .begin_experiment(&plan, &socklab_sys::host::host_facts())
                .unwrap();
            for (i, (&cell, c)) in cells.iter().zip(&plan.cells).enumerate() {
                let params: Params = c.workload.params();
                let m = primary(c.workload.kind());
                let base = if m == "rebind_ok" {
                    1.0
                } else {
                    1.0 + (i % 5) as f64 * 0.7
                };
                for r in 0..plan.reps {
                    let dev = [-0.03, 0.02, 0.0, 0.04, -0.02][r % 5];
                    let mut metrics = vec![(m.into(), base * (1.0 + dev))];
                    if params.get("link").is_some() {
                        metrics.push(("rtt_us".into(), 100_000.0 * (1.0 + dev)));
                    }
                    let s = Sample {
                        metrics,
                        extra: serde_json::Value::Null,
                        histograms: Vec::new(),
                        intervals: Vec::new(),
                    };
                    store
                        .record_sample(cell, r, false, "2025-01-01T00:00:01Z", 1.0, &s)
                        .unwrap();
                }
            }
            store.finish_experiment(id, "done").unwrap();
            ids.push(id);
        }
    }
    (dir, store, ids)
}
