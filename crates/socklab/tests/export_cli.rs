//! Issue 24 item 3: `socklab results show --json` / `--csv` (the same writers as
//! `socklab bulk --json`) print the interval the report draws: a metric whose every value is
//! ≥ 0 never gets a `ci95_lo` below zero. No network: the store is written through the library.

mod common;

use common::run;
use socklab_lab::model::params::Params;
use socklab_lab::plan::{Axis, Group, Order, Plan};
use socklab_lab::runner::Sample;
use socklab_lab::store::Store;

/// A store holding a two-repetition bulk experiment whose values are like those `bulk --reps
/// 2 --json` printed `cwnd.ci95_lo = -31.7` and `rcv_user_s.ci95_lo = -0.029` for.
fn store(dir: &std::path::Path) -> String {
    let db = dir.join("r.db");
    let mut store = Store::open(&db).unwrap();
    let g = Group::new("bulk", Params::new()).axis(Axis::single("bufsize", ["64K"]));
    let plan = Plan::build("made up", "", &[g], 2, 0, Order::Interleaved, "test").unwrap();
    let (id, cells) = store
        .begin_experiment(&plan, &socklab_sys::host::host_facts())
        .unwrap();
    for (rep, (gbps, cwnd, user, retrans)) in [(9.0, 10.0, 0.001, 0.0), (30.0, 80.0, 0.006, 7.0)]
        .into_iter()
        .enumerate()
    {
        let s = Sample::new(
            [
                ("gbps", gbps),
                ("cwnd", cwnd),
                ("rcv_user_s", user),
                ("retrans", retrans),
            ],
            serde_json::Value::Null,
        );
        store
            .record_sample(cells[0], rep, false, "2026-01-01T00:00:00Z", 1.0, &s)
            .unwrap();
    }
    store.finish_experiment(id, "done").unwrap();
    db.to_str().unwrap().to_string()
}

#[test]
fn the_printed_statistics_never_put_a_non_negative_metric_below_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let (code, json, err) = run(&["results", "show", "--json", "--db", &db]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let metrics = &v["cells"][0]["metrics"];
    for m in ["gbps", "cwnd", "rcv_user_s", "retrans"] {
        let lo = metrics[m]["ci95_lo"].as_f64().unwrap();
        let hi = metrics[m]["ci95_hi"].as_f64().unwrap();
        assert!(lo >= 0.0 && lo < hi, "{m}: {}", metrics[m]);
        assert!(
            metrics[m]["ci95_t_lo"].as_f64().unwrap() < 0.0,
            "{m}: the symmetric interval, under its own name, would reach below 0"
        );
    }
    assert_eq!(metrics["cwnd"]["ci95_method"], "log_t");
    assert_eq!(metrics["retrans"]["ci95_method"], "student_t_truncated");
    // The CSV prints the same interval.
    let (code, csv, err) = run(&["results", "show", "--csv", "--db", &db]);
    assert_eq!(code, 0, "{err}");
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |h: &str| head.iter().position(|x| *x == h).unwrap();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let m = f[col("metric")];
        let lo: f64 = f[col("ci95_lo")].parse().unwrap();
        let json_lo = metrics[m]["ci95_lo"].as_f64().unwrap();
        // serde_json parses floats to within an ulp or so, not exactly.
        assert!(
            (lo - json_lo).abs() <= 1e-12 * json_lo.abs(),
            "{line}: {json_lo}"
        );
        assert_eq!(f[col("ci95_method")], metrics[m]["ci95_method"], "{line}");
    }
}
