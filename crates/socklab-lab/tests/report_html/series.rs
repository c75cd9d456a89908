//! The store of the time-series page of the report (issue 17 item 5): a bulk experiment with
//! an omitted start over three repetitions, and a load experiment of one repetition.

use socklab_lab::model::params::Params;
use socklab_lab::model::sample::{Direction, Interval};
use socklab_lab::plan::Group;
use socklab_lab::runner::Sample;
use socklab_lab::store::Store;

use super::trust::record_samples;

/// 40 intervals of 0.1 s: `gbps` and `srtt_us` from `f(t)`, the first `omitted` flagged.
fn tcp_series(k: f64, omitted: usize) -> Vec<Interval> {
    (0..40)
        .map(|i| {
            let t = i as f64 * 0.1;
            let ramp = (t / 1.0).min(1.0);
            Interval {
                stream: 0,
                direction: Direction::Up,
                start_s: t,
                end_s: t + 0.1,
                omitted: i < omitted,
                values: vec![
                    ("gbps".into(), k * (2.0 + 8.0 * ramp)),
                    ("bytes".into(), k * (2.0 + 8.0 * ramp) * 1e9 / 8.0 * 0.1),
                    ("srtt_us".into(), 50.0 + 400.0 * ramp * k),
                    ("cwnd".into(), 10.0 + 90.0 * ramp),
                ],
            }
        })
        .collect()
}

/// A load run's 10 intervals of 0.5 s.
fn load_series() -> Vec<Interval> {
    (0..10)
        .map(|i| Interval {
            stream: 0,
            direction: Direction::Up,
            start_s: i as f64 * 0.5,
            end_s: (i + 1) as f64 * 0.5,
            omitted: false,
            values: vec![
                ("req_per_s".into(), 20_000.0 + 1000.0 * i as f64),
                ("requests".into(), 10_000.0 + 500.0 * i as f64),
                ("lat_p99_us".into(), 300.0 + 20.0 * i as f64),
            ],
        })
        .collect()
}

/// `(bulk experiment, load experiment)` in `store`.
pub fn series_lab(store: &mut Store) -> (i64, i64) {
    let reps: Vec<Sample> = [1.0, 0.8, 1.1]
        .iter()
        .map(|&k| {
            let mut s = Sample::new([("gbps", 9.0 * k)], serde_json::Value::Null);
            s.intervals = tcp_series(k, 10);
            s
        })
        .collect();
    let bulk = record_samples(
        store,
        "bulk over time",
        Group::new(
            "bulk",
            Params::new()
                .with("duration", "4s")
                .with("interval", "100ms")
                .with("omit", "1s"),
        ),
        &[reps],
    );
    let mut s = Sample::new([("req_per_s", 24_500.0)], serde_json::Value::Null);
    s.intervals = load_series();
    let load = record_samples(
        store,
        "load over time",
        Group::new(
            "load",
            Params::new()
                .with("handler", "http")
                .with("duration", "5s")
                .with("interval", "500ms"),
        ),
        &[vec![s]],
    );
    (bulk, load)
}
