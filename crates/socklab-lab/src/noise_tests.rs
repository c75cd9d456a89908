//! Issue 24 item 4 ("the report never promotes noise"): no best cell without a significant
//! difference, an axis no wild interval can flatten, percentile small multiples, bimodal marks
//! on the cell they describe, added latency compared by difference, headings that match their
//! table, memcpy figures labelled with what they measure, the rate search's criterion apart
//! from the measured loss. Each test builds a made-up experiment in a temporary store.

use crate::html::html_report;
use crate::model::params::Params;
use crate::output::{markdown_report, notes, summary_table, TOP_MEAN};
use crate::plan::{Axis, Group, Order, Plan};
use crate::runner::Sample;
use crate::store::Store;
use crate::summary::experiment_stats;
use crate::svg::{bar_chart, bar_domain, BarRow};
use crate::testkit::{lab, reps};
use crate::workload::report_tables;

fn col(t: &crate::table::Table, h: &str) -> usize {
    t.headers
        .iter()
        .position(|x| x == h)
        .unwrap_or_else(|| panic!("no column {h} in {:?}", t.headers))
}

/// Three ping-pong cells whose repetitions scatter wildly (cv near 90 %): reuseaddr has the
/// lowest mean, by chance.
fn noisy_pingpong() -> crate::testkit::Lab {
    lab(
        "pingpong",
        Params::new(),
        "opts",
        &["nodelay", "reuseaddr", "quickack"],
        &[
            reps("total_us", &[100.0, 900.0, 150.0, 1200.0, 300.0]),
            reps("total_us", &[90.0, 800.0, 140.0, 1100.0, 250.0]),
            reps("total_us", &[120.0, 1000.0, 130.0, 1300.0, 280.0]),
        ],
    )
}

#[test]
fn no_cell_is_named_best_when_no_difference_from_it_is_significant() {
    let l = noisy_pingpong();
    let st = experiment_stats(&l.store, l.id).unwrap();
    assert_eq!(st.top("total_us", "pingpong"), Some(1), "the lowest mean");
    assert_eq!(st.best("total_us", "pingpong"), None, "but it beats nobody");
    let n = notes(&st);
    assert!(!n.contains("Best pingpong cell"), "{n}");
    assert!(
        n.contains("No pingpong cell is significantly better than the others at this n")
            && n.contains("the top mean is **opts=reuseaddr**")
            && n.contains("significantly better than none of them")
            && n.contains("repetitions per cell to show"),
        "{n}"
    );
    // The table still shows the differences and (ns), from a row that is not called best.
    let t = summary_table(&st);
    let vs = col(&t, "vs top mean");
    assert_eq!(t.rows[1][vs], TOP_MEAN);
    assert!(t.rows[0][vs].ends_with("(ns)"), "{:?}", t.rows[0]);
    assert!(t.rows[2][vs].ends_with("(ns)"), "{:?}", t.rows[2]);
    // Nothing in the HTML highlights it: no best row, no best bar.
    let html = html_report(&l.store, &[l.id], "t").unwrap();
    assert!(!html.contains("<tr class=\"best\">"), "a best row");
    assert!(!html.contains("class=\"bar best\""), "a best bar");
    assert!(html.contains("none is significantly better than all the others"));
}

#[test]
fn a_best_cell_is_one_significantly_better_than_every_other() {
    let five = |base: f64| {
        reps(
            "total_us",
            &[base, base + 1.0, base - 1.0, base + 0.5, base],
        )
    };
    let clear = lab(
        "pingpong",
        Params::new(),
        "opts",
        &["nodelay", "reuseaddr", "quickack"],
        &[five(200.0), five(100.0), five(150.0)],
    );
    let st = experiment_stats(&clear.store, clear.id).unwrap();
    assert_eq!(st.best("total_us", "pingpong"), Some(1));
    let n = notes(&st);
    assert!(
        n.contains("Best pingpong cell: **opts=reuseaddr**")
            && n.contains("significantly better than every other pingpong cell"),
        "{n}"
    );
    let t = summary_table(&st);
    assert_eq!(t.rows[1][col(&t, "vs best")], "best");
    // Better than one cell, not the other: no best, and the note says which it beats.
    let partial = lab(
        "pingpong",
        Params::new(),
        "opts",
        &["nodelay", "reuseaddr", "quickack"],
        &[
            five(200.0),
            five(100.0),
            reps("total_us", &[101.0, 60.0, 160.0, 90.0, 110.0]),
        ],
    );
    let st = experiment_stats(&partial.store, partial.id).unwrap();
    assert_eq!(st.best("total_us", "pingpong"), None);
    let n = notes(&st);
    assert!(
        n.contains("it is significantly better only than opts=nodelay"),
        "{n}"
    );
}

/// The designs CPU chart at n = 2: one cell's interval spans orders of magnitude.
fn wild_rows() -> Vec<BarRow> {
    vec![
        BarRow {
            label: "iterative".into(),
            mean: 40.0,
            ci: Some((0.1961, 103_781.0)),
            best: false,
        },
        BarRow {
            label: "fork".into(),
            mean: 120.0,
            ci: Some((110.0, 130.0)),
            best: false,
        },
    ]
}

#[test]
fn a_wild_interval_does_not_set_the_bar_axis() {
    let rows = wild_rows();
    let (lo, hi) = bar_domain(&rows);
    assert_eq!(lo, 0.0);
    assert!(
        (120.0..=480.0).contains(&hi),
        "the axis follows the means: {hi}"
    );
    let svg = bar_chart("CPU", &rows, "µs");
    // The bars are wide: the axis ends within a nice step of twice the largest mean.
    let widths: Vec<f64> = svg
        .split("<rect class=\"bar\"")
        .skip(1)
        .map(|r| {
            let w = r.split("width=\"").nth(1).unwrap();
            w[..w.find('"').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(widths.len(), 2);
    assert!(widths.iter().all(|w| *w > 80.0), "slivers: {widths:?}");
    assert!(svg.contains("class=\"whisker clipped\""), "{svg}");
    assert!(svg.contains("CI clipped at the axis"), "the legend says so");
    assert!(
        svg.contains("(CI 0.1961 to 103781, clipped)"),
        "its ends are printed"
    );
    assert_eq!(
        svg.matches("whisker clipped").count(),
        1,
        "fork is not clipped"
    );
}

#[test]
fn the_designs_cpu_chart_keeps_its_bars_at_two_repetitions() {
    let cell = |us: f64| {
        vec![
            ("srv_cpu_s", us / 1e4),
            ("cpu_us_per_conn", us),
            ("cpu_us_per_req", us),
        ]
    };
    let l = lab(
        "load",
        Params::new(),
        "design",
        &["fork", "thread"],
        &[vec![cell(0.2), cell(80.0)], vec![cell(30.0), cell(31.0)]],
    );
    let html = html_report(&l.store, &[l.id], "t").unwrap();
    let bar = &html[html.find("data-kind=\"bar\"").unwrap()..];
    let bar = &bar[..bar.find("</svg>").unwrap()];
    assert!(
        bar.contains("whisker clipped"),
        "the wild interval is clipped: {bar}"
    );
    assert!(
        html.contains("The axis follows the means: the interval of"),
        "the caption says so"
    );
}

/// A ping-pong experiment of `n` cells, two repetitions each of 1000 round trips, whose
/// histograms differ per repetition; `rtt_p999_us` stored as the mean the table shows.
fn pingpong_histograms(n: usize) -> (tempfile::TempDir, Store, i64) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("results.db")).unwrap();
    let sizes = ["16", "32", "64", "128", "256", "512", "1K", "2K"];
    let group = Group::new("pingpong", Params::new())
        .axis(Axis::single("size", sizes[..n].iter().copied()));
    let plan = Plan::build("rtt", "", &[group], 2, 0, Order::Sequential, "t").unwrap();
    let (id, ids) = store
        .begin_experiment(&plan, &socklab_sys::host::host_facts())
        .unwrap();
    for (i, cell) in ids.iter().enumerate() {
        for r in 0..2u64 {
            let base = 10_000 * (i as u64 + 1);
            // The second repetition's tail is 3× the first's.
            let tail = base * 10 * (1 + 2 * r);
            let h = vec![(base, 900), (base * 2, 90), (base * 4, 9), (tail, 1)];
            let s = Sample {
                metrics: vec![
                    ("total_us".into(), base as f64),
                    ("rtt_p999_us".into(), tail as f64 / 1000.0),
                ],
                extra: serde_json::Value::Null,
                histograms: vec![("rtt_ns", h)],
                intervals: Vec::new(),
            };
            store
                .record_sample(*cell, r as usize, false, "2025-01-01T00:00:01Z", 1.0, &s)
                .unwrap();
        }
    }
    store.finish_experiment(id, "done").unwrap();
    (dir, store, id)
}

#[test]
fn seven_cells_get_percentile_small_multiples_that_say_why_p999_differs() {
    let (_d, store, id) = pingpong_histograms(7);
    let html = html_report(&store, &[id], "t").unwrap();
    let at = html
        .find("<title>Round-trip time percentiles</title>")
        .unwrap();
    let fig = &html[html[..at].rfind("<figure").unwrap()..];
    let fig = &fig[..fig.find("</figure>").unwrap()];
    assert_eq!(
        fig.matches("<g class=\"panel\"").count(),
        7,
        "one panel per cell"
    );
    assert_eq!(
        fig.matches("class=\"band\"").count(),
        7,
        "one band per panel"
    );
    assert!(fig.contains("small multiples"), "the caption says so");
    // The pooled p99.9 is not the table's (the mean of each repetition's p99.9): said per cell.
    assert!(
        fig.contains("p99.9: line (pooled) ") && fig.contains("table (mean of reps) 200 µs"),
        "{fig}"
    );
    assert!(fig.contains("so they differ when one repetition"), "{fig}");
    // Three cells still share one chart.
    let (_d, store, id) = pingpong_histograms(3);
    let html = html_report(&store, &[id], "t").unwrap();
    assert!(!html.contains("<g class=\"panel\""));
}

#[test]
fn the_bimodal_mark_names_whose_repetitions_are_bimodal() {
    // The baseline is the bimodal cell; nodelay's repetitions are one cluster.
    let two = [
        99.9, 100.0, 100.0, 100.0, 99.8, 100.0, 135.0, 134.5, 135.5, 135.2,
    ];
    let one = [
        100.0, 100.2, 99.8, 100.1, 99.9, 100.0, 100.3, 99.7, 100.1, 99.9,
    ];
    let l = lab(
        "pingpong",
        Params::new(),
        "opts",
        &["baseline", "nodelay"],
        &[reps("total_us", &two), reps("total_us", &one)],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = summary_table(&st);
    let vs = &t.rows[1][col(&t, "vs baseline")];
    assert!(vs.contains("bimodal: reference"), "{vs}");
    let n = notes(&st);
    assert!(n.contains("opts=nodelay (bimodal: reference;"), "{n}");
}

fn rrul(cells: &[(&[f64], &[f64])]) -> crate::testkit::Lab {
    let rep = |p50: f64, p99: f64| {
        vec![
            ("added_p50_ms", p50),
            ("added_p99_ms", p99),
            ("up_mbps", 10.0),
            ("down_mbps", 10.0),
        ]
    };
    lab(
        "rrul",
        Params::new(),
        "cc",
        &["cubic", "bbr", "reno"][..cells.len()],
        &cells
            .iter()
            .map(|(p50, p99)| p50.iter().zip(*p99).map(|(a, b)| rep(*a, *b)).collect())
            .collect::<Vec<_>>(),
    )
}

#[test]
fn added_latency_is_compared_by_difference_and_a_negative_one_is_explained() {
    let l = rrul(&[
        (
            &[0.010, 0.012, 0.011, 0.009, 0.010],
            &[-0.3, 0.2, -0.9, 0.1, -0.6],
        ),
        (&[3.2, 3.3, 3.25, 3.15, 3.2], &[5.0, 5.1, 5.2, 4.9, 5.0]),
    ]);
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = summary_table(&st);
    let vs = &t.rows[1][col(&t, "vs best")];
    assert!(
        vs.starts_with("+3.") && vs.contains(" ms") && !vs.contains('%'),
        "by difference, not +32525%: {vs}"
    );
    let rt = &report_tables(&st)[0].table;
    let p99 = &rt.rows[0][col(rt, "added p99 ms")];
    assert!(p99.starts_with("-0.3"), "{p99}");
    assert!(p99.contains("within the noise, CI"), "{p99}");
    assert!(!rt.rows[1][col(rt, "added p99 ms")].contains("noise"));
}

#[test]
fn minus_the_iterative_baseline_heads_only_a_table_that_has_it() {
    let cell = |cpu: f64| vec![("srv_cpu_s", cpu), ("cpu_us_per_conn", cpu * 10.0)];
    let four = |cpu: f64| vec![cell(cpu), cell(cpu), cell(cpu)];
    let without = lab(
        "load",
        Params::new(),
        "design",
        &["epoll", "fork"],
        &[four(0.1), four(0.5)],
    );
    let st = experiment_stats(&without.store, without.id).unwrap();
    let t = &report_tables(&st)[0];
    assert!(!t.text_heading.contains("minus"), "{}", t.text_heading);
    assert!(!t.note.contains("the same minus"), "{}", t.note);
    let md = markdown_report(&without.store, &[without.id], "t").unwrap();
    assert!(!md.contains("minus the iterative baseline"), "{md}");
    let with = lab(
        "load",
        Params::new(),
        "design",
        &["iterative", "fork"],
        &[four(0.1), four(0.5)],
    );
    let st = experiment_stats(&with.store, with.id).unwrap();
    let t = &report_tables(&st)[0];
    assert!(t.text_heading.contains("minus the iterative baseline"));
}

#[test]
fn each_memcpy_figure_says_which_cache_level_it_measured() {
    let rep = |gbps: f64, level: f64| vec![("gbps", gbps), ("copy_level", level)];
    let l = lab(
        "memcpy",
        Params::new().with("bytes", "1G"),
        "size",
        &["1K", "16M"],
        &[vec![rep(361.0, 1.0)], vec![rep(21.7, 0.0)]],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = report_tables(&st)
        .into_iter()
        .find(|t| t.class == "memcpy")
        .expect("a memcpy table");
    let held = col(&t.table, "held in");
    assert_eq!(t.table.rows[0][held], "L1 cache");
    assert_eq!(t.table.rows[1][held], "main memory (beyond every cache)");
    assert_eq!(t.table.rows[1][col(&t.table, "working set")], "32M");
    assert!(t.note.contains("bulk --reference") && t.note.contains("memcpy.toml"));
}

#[test]
fn the_rate_searchs_max_loss_is_not_shown_as_the_tests_loss() {
    let rep = |loss: f64| {
        vec![
            ("gbps", 0.9),
            ("max_gbps", 1.0),
            ("trial_loss_pct", 0.0),
            ("loss_pct", loss),
        ]
    };
    let l = lab(
        "udp",
        Params::new().with("rate", "max").with("max_loss", "0%"),
        "size",
        &["1472", "1000"],
        &[vec![rep(0.2172), rep(0.1)], vec![rep(0.0), rep(0.0)]],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = report_tables(&st)
        .into_iter()
        .find(|t| t.class == "udp-search")
        .expect("a rate-search table");
    assert!(t
        .text_heading
        .contains("max_loss bounds the trials, not the full test"));
    let r = &t.table;
    assert_eq!(r.rows[0][col(r, "criterion: trial loss ≤")], "0%");
    assert_eq!(r.rows[0][col(r, "trial loss %")], "0");
    assert!(
        r.rows[0][col(r, "held")].starts_with("no: the full test lost up to 0.2172%"),
        "{:?}",
        r.rows[0]
    );
    assert_eq!(r.rows[1][col(r, "held")], "yes");
    // A lone cell is neither best nor "top mean": it is compared with nothing.
    let lone = lab(
        "udp",
        Params::new().with("rate", "max"),
        "size",
        &["1472"],
        &[vec![rep(0.2172), rep(0.1)]],
    );
    let st = experiment_stats(&lone.store, lone.id).unwrap();
    let t = summary_table(&st);
    assert_eq!(t.rows[0][col(&t, "vs best")], "-");
}

#[test]
fn a_seed_comparison_names_the_bimodal_side() {
    let two = [
        99.9, 100.0, 100.0, 100.0, 99.8, 100.0, 135.0, 134.5, 135.5, 135.2,
    ];
    let one = [
        100.0, 100.2, 99.8, 100.1, 99.9, 100.0, 100.3, 99.7, 100.1, 99.9,
    ];
    let d = crate::reproduce::Diff::new("nodelay", &one, "baseline", &two);
    let t = d.text();
    assert!(t.contains("bimodal (baseline): Mann–Whitney"), "{t}");
}
