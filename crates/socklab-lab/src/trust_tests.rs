//! Issue 15 ("numbers a network engineer can trust"): intervals of quantities that cannot be
//! negative, verdicts on few or bimodal repetitions, invalid repetitions, options not in
//! effect. Each test builds a made-up experiment in a temporary store.

use crate::model::params::Params;
use crate::output::{human, summary_csv, summary_table};
use crate::summary::{experiment_stats, experiment_stats_with};
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
        s.mean - s.ci95_t_half.unwrap() < 0.0,
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

/// Item 10: a table has no column for a baseline the experiment does not have.
#[test]
fn the_designs_table_has_an_iterative_column_only_with_an_iterative_cell() {
    let cell = |cpu: f64| vec![("srv_cpu_s", cpu), ("cpu_us_per_conn", cpu * 10.0)];
    let with = lab(
        "load",
        Params::new(),
        "design",
        &["iterative", "fork"],
        &[vec![cell(0.1), cell(0.1)], vec![cell(0.5), cell(0.5)]],
    );
    let t = designs_table(&experiment_stats(&with.store, with.id).unwrap()).unwrap();
    let minus = col(&t, "- iterative");
    assert_eq!(t.rows[1][minus], "4", "fork minus the iterative baseline");
    let without = lab(
        "load",
        Params::new(),
        "design",
        &["epoll", "fork"],
        &[vec![cell(0.1), cell(0.1)], vec![cell(0.5), cell(0.5)]],
    );
    let t = designs_table(&experiment_stats(&without.store, without.id).unwrap()).unwrap();
    assert!(
        !t.headers.iter().any(|h| h == "- iterative"),
        "{:?}",
        t.headers
    );
    assert_eq!(t.headers.len(), t.rows[0].len());
}

/// A ping-pong experiment: `opts` baseline, then each of `opts`, with `total_us` values.
fn pingpong(opts: &[&str], cells: &[Vec<crate::testkit::Rep>]) -> crate::testkit::Lab {
    lab("pingpong", Params::new(), "opts", opts, cells)
}

#[test]
fn no_significance_call_with_fewer_than_five_repetitions() {
    let l = pingpong(
        &["baseline", "nodelay"],
        &[
            reps("total_us", &[100.0, 101.0, 99.0]),
            reps("total_us", &[50.0, 50.5, 49.5]),
        ],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = summary_table(&st);
    let vs = &t.rows[1][col(&t, "vs baseline")];
    assert_eq!(vs, "-50.0% (n<5)", "no verdict on three repetitions");
    let notes = crate::output::notes(&st);
    assert!(!notes.contains("Significantly"), "{notes}");
    assert!(
        notes.contains("n<5") && notes.contains("nodelay"),
        "{notes}"
    );
    let v = st.vs_best(1, "total_us").unwrap();
    assert_eq!(v.significant(), None);
}

#[test]
fn a_bimodal_cell_is_named_and_compared_by_medians_and_mann_whitney() {
    let base = [
        100.0, 100.2, 99.8, 100.1, 99.9, 100.0, 100.3, 99.7, 100.1, 99.9,
    ];
    // Six repetitions like the baseline, four 35% slower: equal medians, two clusters.
    let two = [
        99.9, 100.0, 100.0, 100.0, 99.8, 100.0, 135.0, 134.5, 135.5, 135.2,
    ];
    let l = pingpong(
        &["baseline", "nodelay"],
        &[reps("total_us", &base), reps("total_us", &two)],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let v = st.vs_best(1, "total_us").unwrap();
    assert!(v.test.as_ref().unwrap().significant, "Welch alone calls it");
    assert!(v.bimodal);
    let mw = v.rank.as_ref().expect("a Mann–Whitney test");
    assert!(!mw.significant, "p = {}", mw.p_value);
    assert_eq!(v.significant(), Some(false), "both tests must agree");
    assert!(v.rel_median.abs() < 0.005, "{}", v.rel_median);
    let t = summary_table(&st);
    let vs = &t.rows[1][col(&t, "vs baseline")];
    assert!(vs.contains("bimodal") && vs.contains("MW p="), "{vs}");
    assert!(vs.starts_with("+0.0% median"), "{vs}");
    assert!(vs.ends_with("(ns)"), "{vs}");
    let notes = crate::output::notes(&st);
    assert!(!notes.contains("Significantly"), "{notes}");
    assert!(
        notes.contains("Bimodal") && notes.contains("Mann–Whitney") && notes.contains("nodelay"),
        "{notes}"
    );
}

#[test]
fn invalid_repetitions_leave_the_statistics_and_are_counted() {
    let rep = |gbps: f64, valid: f64| vec![("gbps", gbps), ("emu_valid", valid)];
    let l = lab(
        "bulk",
        Params::new(),
        "bufsize",
        &["1K", "2K"],
        &[
            vec![
                rep(5.0, 1.0),
                rep(0.1, 0.0),
                rep(5.2, 1.0),
                rep(0.2, 0.0),
                rep(4.8, 1.0),
            ],
            vec![rep(0.1, 0.0), rep(0.2, 0.0)],
        ],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let c = &st.cells[0];
    assert_eq!((c.n, c.invalid), (3, 2));
    assert_eq!(c.values["gbps"], [5.0, 5.2, 4.8]);
    assert!((c.metrics["gbps"].mean - 5.0).abs() < 1e-12);
    assert_eq!((st.cells[1].n, st.cells[1].invalid), (0, 2));
    assert!(!st.cells[1].metrics.contains_key("gbps"));
    let t = summary_table(&st);
    assert_eq!(t.rows[0][col(&t, "n")], "3 (+2 invalid)");
    assert_eq!(t.rows[1][col(&t, "n")], "0 (+2 invalid)");
    let md = crate::output::markdown_report(&l.store, &[l.id], "t").unwrap();
    assert!(
        md.contains("3 (+2 invalid)") && md.contains("emu_valid"),
        "{md}"
    );
    let html = crate::html::html_report(&l.store, &[l.id], "t").unwrap();
    assert!(html.contains("3 (+2 invalid)"));

    // --keep-invalid brings them back, and says so.
    let kept = experiment_stats_with(&l.store, l.id, true).unwrap();
    assert_eq!((kept.cells[0].n, kept.cells[0].invalid), (5, 2));
    assert_eq!(kept.cells[0].values["gbps"].len(), 5);
    let t = summary_table(&kept);
    assert_eq!(t.rows[0][col(&t, "n")], "5 (incl. 2 invalid)");
    let md = crate::output::markdown_report_with(&l.store, &[l.id], "t", true).unwrap();
    assert!(md.contains("5 (incl. 2 invalid)"));
    let html = crate::html::html_report_with(&l.store, &[l.id], "t", true).unwrap();
    assert!(html.contains("5 (incl. 2 invalid)"));
}

#[test]
fn an_option_that_did_not_take_effect_is_never_best() {
    let rep = |us: f64, tfo: f64| vec![("total_us", us), ("tfo_active", tfo)];
    let five = |us: f64, tfo: f64| (0..5).map(|i| rep(us + i as f64, tfo)).collect::<Vec<_>>();
    let l = pingpong(
        &["nodelay", "fastopen", "fastopen+nodelay"],
        // The fastest cell asked for fastopen, but the kernel used it on no connection.
        &[five(200.0, 0.0), five(150.0, 0.0), five(180.0, 40.0)],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let reason = st.not_in_effect(1).expect("fastopen had no effect");
    assert!(
        reason.contains("sysctl -w net.ipv4.tcp_fastopen=3"),
        "{reason}"
    );
    assert_eq!(st.not_in_effect(0), None, "nodelay makes no such claim");
    assert_eq!(st.not_in_effect(2), None, "TFO was used");
    assert_eq!(st.best("total_us", "pingpong"), Some(2));
    let t = summary_table(&st);
    let vs = col(&t, "vs best");
    assert!(t.rows[1][vs].contains("not in effect"), "{:?}", t.rows[1]);
    assert_eq!(t.rows[2][vs], "best");
    let notes = crate::output::notes(&st);
    assert!(
        notes.contains("Best pingpong cell: **opts=fastopen+nodelay**"),
        "{notes}"
    );
    assert!(
        notes.contains("Not in effect") && notes.contains("tcp_fastopen=3"),
        "{notes}"
    );
    let html = crate::html::html_report(&l.store, &[l.id], "t").unwrap();
    assert!(html.contains("not in effect") && html.contains("tcp_fastopen=3"));
}

/// A bulk TLS cell is compared with its plain twin (the same cell with tls=off), not with the
/// experiment's first plain cell; a plain cell still with the baseline.
#[test]
fn a_tls_cell_is_compared_with_its_plain_twin() {
    let g = |x: f64| reps("gbps", &[x, x * 1.01, x * 0.99, x * 1.02, x * 0.98]);
    let l = crate::testkit::lab_axes(
        "bulk",
        Params::new(),
        &[("bufsize", &["16K", "128K"]), ("tls", &["off", "on"])],
        &[g(20.0), g(10.0), g(40.0), g(12.0)],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let label = |i: usize| st.cells[i].cell.label.clone();
    assert_eq!(label(3), "bufsize=128K tls=on");
    assert_eq!(st.baseline("bulk"), Some(0));
    assert_eq!(
        (st.twin_of(3), st.twin_of(1), st.twin_of(2)),
        (Some(2), Some(0), None)
    );
    assert_eq!(st.reference_of(2, "gbps"), Some(0), "plain: the baseline");
    let v = st.vs_best(3, "gbps").unwrap();
    assert!((v.rel - (12.0 / 40.0 - 1.0)).abs() < 0.01, "{}", v.rel);
    let t = summary_table(&st);
    assert_eq!(t.rows[3][col(&t, "vs baseline")], "-70.0%");
    assert_eq!(t.rows[2][col(&t, "vs baseline")], "+100.0%");
    let text = human(&st);
    assert!(text.contains("a TLS cell's from its plain twin"), "{text}");
    let json = crate::output_json::comparison(&st, 3);
    assert_eq!(json["against"], "twin");
    assert_eq!(json["reference_cell"], st.cells[2].cell.idx);
}
