//! Issue 24, item 3: what programs read (the JSON and CSV statistics) is the interval the
//! report draws, never a symmetric interval below zero of a metric that cannot be negative.

use proptest::prelude::*;

use crate::model::params::Params;
use crate::model::stats::ExperimentStats;
use crate::output::{summary_csv, summary_table, to_json};
use crate::scale::Scale;
use crate::summary::experiment_stats;
use crate::table::ci_cell;
use crate::testkit::{lab, Rep};

/// The CSV's `(ci95_lo, ci95_hi, ci95_method)` of cell `idx` and `metric`.
fn csv_interval(csv: &str, idx: usize, metric: &str) -> (Option<f64>, Option<f64>, String) {
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let at = |h: &str| head.iter().position(|x| *x == h).unwrap();
    let row: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|r| r[1] == idx.to_string() && r[4] == metric)
        .unwrap_or_else(|| panic!("no row {idx} {metric} in {csv}"));
    let f = |h: &str| row[at(h)].parse::<f64>().ok();
    (
        f("ci95_lo"),
        f("ci95_hi"),
        row[at("ci95_method")].to_string(),
    )
}

/// Checks every cell and metric: the JSON's and the CSV's interval is the drawn one
/// ([`socklab_stats::Summary::ci95`], which the HTML charts draw), the summary table's CI
/// cell prints it, and no metric whose values are all ≥ 0 gets a lower end below zero.
fn check_exports(st: &ExperimentStats) {
    let json = to_json(st);
    let csv = summary_csv(st);
    let table = summary_table(st);
    let ci_col = table.headers.iter().position(|h| h == "±95% CI").unwrap();
    for (i, c) in st.cells.iter().enumerate() {
        for (m, s) in &c.metrics {
            let drawn = s.ci95();
            let j = &json["cells"][i]["metrics"][m];
            let what = format!("cell {i} {m} {:?}: {j}", c.values[m]);
            assert_eq!(j["ci95_lo"].as_f64(), drawn.map(|d| d.0), "{what}");
            assert_eq!(j["ci95_hi"].as_f64(), drawn.map(|d| d.1), "{what}");
            let (lo, hi, method) = csv_interval(&csv, c.cell.idx as usize, m);
            assert_eq!((lo, hi), (drawn.map(|d| d.0), drawn.map(|d| d.1)), "{what}");
            assert_eq!(j["ci95_method"].as_str().unwrap_or(""), method, "{what}");
            if c.values[m].iter().all(|&x| x >= 0.0) {
                assert!(lo.is_none_or(|lo| lo >= 0.0), "{what}");
            }
            // The report's table prints this very interval, in the unit of its column.
            if m == st.primary() {
                let means = st.cells.iter().filter_map(|c| c.metrics.get(m));
                let sc = Scale::column("Gbit/s", means.map(|s| s.mean));
                let cell = &table.rows[i][ci_col];
                assert_eq!(cell, &ci_cell(&sc.summary(s)), "{what}");
                if let Some((lo, hi)) = drawn.filter(|_| s.ci95_is_asymmetric()) {
                    assert_eq!(cell, &format!("{}–{}", sc.num(lo), sc.num(hi)), "{what}");
                }
            }
        }
    }
}

#[test]
fn the_exported_interval_is_the_one_the_report_draws() {
    let rep = |gbps: f64, retrans: f64, cwnd: f64| {
        vec![("gbps", gbps), ("retrans", retrans), ("cwnd", cwnd)]
    };
    let l = lab(
        "bulk",
        Params::new(),
        "bufsize",
        &["1K", "2K"],
        &[
            // `bulk --reps 2 --json` printed cwnd.ci95_lo = -31.7 for values like these.
            vec![rep(0.2, 0.0, 10.0), rep(40.0, 9.0, 60.0)],
            vec![
                rep(5.0, 0.0, 20.0),
                rep(5.1, 0.0, 21.0),
                rep(4.9, 0.0, 19.0),
            ],
        ],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let cwnd = &st.cells[0].metrics["cwnd"];
    assert!(
        cwnd.ci95_t_lo.unwrap() < 0.0,
        "the symmetric interval would"
    );
    check_exports(&st);
    let j = &to_json(&st)["cells"][0]["metrics"];
    assert_eq!(j["cwnd"]["ci95_method"], "log_t");
    assert_eq!(j["retrans"]["ci95_method"], "student_t_truncated");
    assert!(
        j["cwnd"]["ci95_t_lo"].as_f64().unwrap() < 0.0,
        "named for what it is"
    );
    assert!(j["cwnd"].get("ci95_half").is_none());
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), 0.0..1e-3_f64, 0.0..10.0_f64, 0.0..1e7_f64]
}

fn cell() -> impl Strategy<Value = Vec<Rep>> {
    prop::collection::vec(
        (value(), value(), value())
            .prop_map(|(g, r, c)| vec![("gbps", g), ("retrans", r), ("cwnd", c)]),
        1..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any non-negative repetitions: the exported `ci95_lo` is ≥ 0 and the JSON and CSV
    /// interval is the one the report draws.
    #[test]
    fn any_non_negative_sample_exports_the_drawn_interval(a in cell(), b in cell()) {
        let l = lab("bulk", Params::new(), "bufsize", &["1K", "2K"], &[a, b]);
        check_exports(&experiment_stats(&l.store, l.id).unwrap());
    }
}

/// A text cell that a spreadsheet would read as a formula gets a leading `'` (OWASP's advice
/// on CSV injection); numbers, negative ones included, stay numbers; quoting still applies.
#[test]
fn csv_field_neutralises_formulas_but_not_numbers() {
    use crate::output::csv_field;
    assert_eq!(csv_field("=1+1"), "'=1+1");
    assert_eq!(csv_field("+cmd"), "'+cmd");
    assert_eq!(
        csv_field("-2+3+cmd|' /C calc'!A0"),
        "'-2+3+cmd|' /C calc'!A0"
    );
    assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
    assert_eq!(csv_field("\t=x"), "'\t=x");
    assert_eq!(csv_field("\r=x"), "\"'\r=x\"");
    assert_eq!(
        csv_field("=HYPERLINK(\"http://e\",\"x\")"),
        "\"'=HYPERLINK(\"\"http://e\"\",\"\"x\"\")\""
    );
    for number in ["-1.5", "+3", "-0", "1e-3", "-2E5", "64", "0.5"] {
        assert_eq!(csv_field(number), number);
    }
    for normal in ["strategy=write nbufs=15", "cubic", "64K", "a, b"] {
        assert_eq!(csv_field(normal).trim_matches('"'), normal);
    }
}
