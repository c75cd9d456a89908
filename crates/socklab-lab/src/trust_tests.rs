//! Issue 15 ("numbers a network engineer can trust"): intervals of quantities that cannot be
//! negative, verdicts on few or bimodal repetitions, invalid repetitions, options not in
//! effect. Each test builds a made-up experiment in a temporary store.

use crate::output::{human, summary_csv, summary_table};
use crate::params::Params;
use crate::summary::experiment_stats;
use crate::testkit::{lab, reps};
use crate::workload::load::designs_table;

fn col(t: &crate::table::Table, h: &str) -> usize {
    t.headers
        .iter()
        .position(|x| x == h)
        .unwrap_or_else(|| panic!("no column {h} in {:?}", t.headers))
}

/// The numbers in a CI cell (`±h` or `lo–hi`), signs included.
fn bounds(cell: &str) -> Vec<f64> {
    cell.trim_start_matches('±')
        .split('–')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("{cell:?}"))
        })
        .collect()
}

#[test]
fn a_positive_metric_with_a_huge_spread_gets_no_negative_interval_anywhere() {
    let l = lab(
        "bulk",
        Params::new(),
        "bufsize",
        &["1K", "2K"],
        &[
            reps("gbps", &[0.2, 0.3, 40.0]),
            reps("gbps", &[5.0, 5.1, 4.9]),
        ],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let s = &st.cells[0].metrics["gbps"];
    assert!(
        s.mean - s.ci95_half.unwrap() < 0.0,
        "the symmetric one would"
    );
    // The summary table shows the asymmetric interval as lo–hi, both ends >= 0.
    let t = summary_table(&st);
    let ci = &t.rows[0][col(&t, "±95% CI")];
    assert!(!ci.starts_with('±'), "{ci}");
    let b = bounds(ci);
    assert_eq!(b.len(), 2, "{ci}");
    assert!(b[0] >= 0.0 && b[0] < b[1], "{ci}");
    // The narrow cell keeps ±h.
    assert!(t.rows[1][col(&t, "±95% CI")].starts_with('±'));
    // The CSV's interval is the same.
    let csv = summary_csv(&st);
    let line = csv
        .lines()
        .find(|l| l.contains(",1K,") || l.contains("bufsize=1K"))
        .unwrap();
    let lo: f64 = line.split(',').nth(9).unwrap().parse().unwrap();
    assert!(lo >= 0.0, "{line}");
    assert!(human(&st).contains("log"), "the note says which interval");
}

#[test]
fn the_designs_table_shows_no_negative_cpu_interval() {
    let cell = |cpu: f64| vec![("srv_cpu_s", cpu), ("cpu_us_per_conn", cpu * 10.0)];
    let l = lab(
        "load",
        Params::new(),
        "design",
        &["iterative", "fork"],
        &[
            vec![cell(0.001), cell(0.002), cell(0.9)],
            vec![cell(0.5), cell(0.5), cell(0.51)],
        ],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = designs_table(&st).unwrap();
    let ci = &t.rows[0][col(&t, "±95% CI")];
    let b = bounds(ci);
    assert!(b.iter().all(|&x| x >= 0.0) && b.len() == 2, "{ci}");
}
