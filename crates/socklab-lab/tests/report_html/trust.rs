//! The store of the report screenshot's second page (items 5, 7 and 9 of issue 15) and the
//! pixel helpers it needs.

use roxmltree::Node;
use socklab_lab::model::params::Params;
use socklab_lab::plan::{Axis, Group, Order, Plan};
use socklab_lab::runner::Sample;
use socklab_lab::store::Store;

use super::rgb;

/// One measured repetition with `metrics` and round-trip histogram `rtt`.
pub fn sample(metrics: &[(&'static str, f64)], rtt: Option<Vec<(u64, u64)>>) -> Sample {
    Sample {
        metrics: metrics.iter().map(|(k, v)| ((*k).into(), *v)).collect(),
        extra: serde_json::Value::Null,
        histograms: rtt.map(|h| vec![("rtt_ns", h)]).unwrap_or_default(),
        intervals: Vec::new(),
    }
}

/// Records one experiment of `group`, cell `i` measuring the repetitions `cells[i]`.
pub fn record_samples(store: &mut Store, name: &str, group: Group, cells: &[Vec<Sample>]) -> i64 {
    let reps = cells.iter().map(Vec::len).max().unwrap();
    let plan = Plan::build(name, "", &[group], reps, 0, Order::Sequential, "t").unwrap();
    let (id, ids) = store
        .begin_experiment(&plan, &socklab_sys::host::host_facts())
        .unwrap();
    for (cell, samples) in ids.iter().zip(cells) {
        for (r, s) in samples.iter().enumerate() {
            store
                .record_sample(*cell, r, false, "2025-01-01T00:00:01Z", 1.0, s)
                .unwrap();
        }
    }
    store.finish_experiment(id, "done").unwrap();
    id
}

/// The throughputs of the lossy cell: positive, but the Student-t interval would reach about
/// -50 Gbit/s (item 5).
pub const LOSSY: [f64; 3] = [0.2, 0.3, 40.0];
/// The valid and the invalid throughputs of the cell with invalid repetitions (item 7).
pub const VALID: [f64; 3] = [5.0, 5.1, 4.9];
/// A value no timestamp of the report can hold (99 could: `…:12.994Z`), so its absence from the
/// section's text means the invalid repetitions are left out.
pub const INVALID_GBPS: f64 = 97.31;

/// 10 000 round trips (ns) around `base` µs, the tail `spread` times longer: p99.99 exists.
pub fn rtt(base: u64, spread: f64) -> Vec<(u64, u64)> {
    let at = |k: f64| (base as f64 * 1000.0 * k) as u64;
    vec![
        (at(1.0), 5000),
        (at(1.2 * spread), 4000),
        (at(2.0 * spread), 900),
        (at(4.0 * spread), 90),
        (at(10.0 * spread), 9),
        (at(40.0 * spread), 1),
    ]
}

/// A store for the items of issue 15 the screenshot covers: (c) a bulk experiment with a
/// lossy cell (5) and a cell with two invalid repetitions (7), (d) a pingpong experiment
/// with round-trip histograms (9).
pub fn trust_lab() -> (tempfile::TempDir, Store, i64, i64) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("results.db")).unwrap();
    let group = Group::new("bulk", Params::new().with("iterations", "100"))
        .axis(Axis::single("strategy", ["write", "writev"]));
    let lossy = LOSSY
        .iter()
        .map(|&v| sample(&[("gbps", v)], None))
        .collect();
    let mut judged: Vec<Sample> = VALID
        .iter()
        .map(|&v| sample(&[("gbps", v), ("emu_valid", 1.0)], None))
        .collect();
    for at in [1, 3] {
        let bad = sample(&[("gbps", INVALID_GBPS), ("emu_valid", 0.0)], None);
        judged.insert(at, bad);
    }
    let c = record_samples(&mut store, "trust", group, &[lossy, judged]);
    let group = Group::new("pingpong", Params::new()).axis(Axis::single("udp", ["false", "true"]));
    let cells: Vec<Vec<Sample>> = [(20, [1.0, 1.25, 1.5]), (150, [1.0, 1.1, 1.3])]
        .iter()
        .map(|(base, spreads)| {
            spreads
                .iter()
                .map(|&k| {
                    let total = 10_000.0 * *base as f64 * k;
                    sample(&[("total_us", total)], Some(rtt(*base, k)))
                })
                .collect()
        })
        .collect();
    let d = record_samples(&mut store, "latency", group, &cells);
    (dir, store, c, d)
}

/// A colour seen through `opacity` on white, as the browser blends it.
pub fn on_white(hex: &str, opacity: f64) -> [u8; 3] {
    rgb(hex).map(|c| (c as f64 * opacity + 255.0 * (1.0 - opacity)).round() as u8)
}

/// Pixels within 3 of `colour` on every channel (tighter than [`count`]: a 20% tint of the
/// series colour is within 12 of the grey gridlines, not within 3).
pub fn count_exact(px: &[[u8; 3]], colour: [u8; 3]) -> usize {
    px.iter()
        .filter(|p| (0..3).all(|i| p[i].abs_diff(colour[i]) <= 3))
        .count()
}

pub fn attr_f64(n: Node<'_, '_>, name: &str) -> f64 {
    n.attribute(name)
        .unwrap_or_else(|| panic!("no {name} on {n:?}"))
        .parse()
        .unwrap()
}
