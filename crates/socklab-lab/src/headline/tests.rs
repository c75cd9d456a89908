//! Which cell heads an experiment, and how its figure reads.

use super::light::headline_of;
use super::*;
use crate::model::params::Params;
use crate::summary::experiment_stats;
use crate::testkit::{lab, reps, Lab, Rep};

fn of(l: &Lab) -> Headline {
    let h = headline(&experiment_stats(&l.store, l.id).unwrap());
    // `results list` reads the same figure from the metrics alone.
    assert_eq!(headline_of(&l.store, l.id).unwrap(), h);
    h
}

fn memcpy(sizes: &[&str], cells: &[Vec<Rep>]) -> Lab {
    lab(
        "memcpy",
        Params::new().with("bytes", "1M"),
        "size",
        sizes,
        cells,
    )
}

#[test]
fn a_single_cell_is_its_own_headline() {
    let l = memcpy(&["1K"], &[reps("gbps", &[10.0, 10.2, 9.8, 10.1, 9.9])]);
    let h = of(&l);
    assert_eq!(h.metric, "gbps");
    assert_eq!(h.rank, Rank::Only);
    assert_eq!(h.cell, None);
    assert_eq!(h.mean, Some(10.0));
    let s = &experiment_stats(&l.store, l.id).unwrap().cells[0].metrics["gbps"];
    assert_eq!(h.ci.as_deref(), Some(ci_cell(s).as_str()));
    assert_eq!(h.text(), format!("10 Gbit/s {} (n=5)", ci_cell(s)));
}

#[test]
fn best_only_when_significantly_better_than_every_other_cell() {
    // 2K clearly above 1K and 4K: best.
    let l = memcpy(
        &["1K", "2K", "4K"],
        &[
            reps("gbps", &[10.0, 10.2, 9.8, 10.1, 9.9]),
            reps("gbps", &[20.0, 20.2, 19.8, 20.1, 19.9]),
            reps("gbps", &[15.0, 15.2, 14.8, 15.1, 14.9]),
        ],
    );
    let h = of(&l);
    assert_eq!(h.rank, Rank::Best);
    assert_eq!(h.cell.as_deref(), Some("size=2K"));
    assert!(h.text().ends_with("(size=2K, best, n=5)"), "{}", h.text());
    // 4K's mean a hair above 2K's, within the noise: the top mean, never "best".
    let l = memcpy(
        &["1K", "2K", "4K"],
        &[
            reps("gbps", &[10.0, 10.2, 9.8, 10.1, 9.9]),
            reps("gbps", &[20.0, 22.0, 18.0, 21.0, 19.0]),
            reps("gbps", &[20.5, 22.5, 18.5, 21.5, 19.5]),
        ],
    );
    let h = of(&l);
    assert_eq!(h.rank, Rank::TopMean);
    assert_eq!(h.cell.as_deref(), Some("size=4K"));
    assert!(
        h.text().contains("(size=4K, top mean, n=5)"),
        "{}",
        h.text()
    );
    assert!(!h.text().contains("best"), "{}", h.text());
}

#[test]
fn too_few_repetitions_name_no_best_and_no_interval_under_two() {
    // Far apart, but 3 repetitions: no verdict, so the top mean.
    let l = memcpy(
        &["1K", "2K"],
        &[
            reps("gbps", &[10.0, 10.2, 9.8]),
            reps("gbps", &[20.0, 20.2, 19.8]),
        ],
    );
    let h = of(&l);
    assert_eq!(h.rank, Rank::TopMean);
    assert!(
        h.text().ends_with("(size=2K, top mean, n=3)"),
        "{}",
        h.text()
    );
    // One repetition: a figure without an interval, said so.
    let l = memcpy(&["1K"], &[reps("gbps", &[7.0])]);
    let h = of(&l);
    assert_eq!(h.ci, None);
    assert_eq!(h.text(), "7 Gbit/s (n=1, no interval)");
    // Nothing valid measured.
    let l = memcpy(&["1K"], &[vec![vec![("gbps", 9.0), ("emu_valid", 0.0)]]]);
    assert_eq!(of(&l).text(), "no measured repetition");
}

#[test]
fn a_positive_metric_with_a_wide_spread_gets_the_log_interval_above_zero() {
    let l = memcpy(&["1K"], &[reps("gbps", &[0.2, 0.3, 40.0])]);
    let h = of(&l);
    let ci = h.ci.clone().unwrap();
    assert!(!ci.starts_with('±') && ci.contains('–'), "{ci}");
    let lo: f64 = ci.split('–').next().unwrap().parse().unwrap();
    assert!(lo > 0.0, "{ci}");
}

#[test]
fn invalid_repetitions_are_left_out_and_counted() {
    let rep = |g: f64, valid: f64| vec![("gbps", g), ("emu_valid", valid)];
    let l = memcpy(
        &["1K"],
        &[vec![
            rep(10.0, 1.0),
            rep(1000.0, 0.0),
            rep(10.2, 1.0),
            rep(9.8, 1.0),
        ]],
    );
    let h = of(&l);
    assert_eq!(h.mean, Some(10.0));
    assert_eq!(h.n, "3 (+1 invalid)");
    assert!(h.text().ends_with("(n=3 (+1 invalid))"), "{}", h.text());
}

#[test]
fn a_cell_over_an_emulated_link_shows_its_rtt_and_queue_wait() {
    let rep = |g: f64, rtt: f64, q: f64| {
        vec![("gbps", g), ("rtt_us", rtt), ("link_fwd_qdelay_mean_us", q)]
    };
    let l = lab(
        "bulk",
        Params::new().with("link", "rate 100mbit delay 50ms"),
        "bufsize",
        &["128K"],
        &[vec![
            rep(0.09, 101_000.0, 4_000.0),
            rep(0.091, 102_000.0, 4_400.0),
            rep(0.092, 103_000.0, 4_600.0),
        ]],
    );
    let h = of(&l);
    assert_eq!(h.link, ["RTT 102 ms", "queue 4.333 ms"]);
    assert!(
        h.text().ends_with("(n=3; RTT 102 ms, queue 4.333 ms)"),
        "{}",
        h.text()
    );
    // Without a link, the same metrics are not a link's.
    let l = lab(
        "bulk",
        Params::new(),
        "bufsize",
        &["128K"],
        &[vec![rep(1.0, 50.0, 0.0), rep(1.1, 50.0, 0.0)]],
    );
    assert!(of(&l).link.is_empty());
}

#[test]
fn a_latency_headline_scales_its_unit_as_the_tables_do() {
    let l = lab(
        "pingpong",
        Params::new(),
        "size",
        &["64"],
        &[reps("total_us", &[1200.0, 1210.0, 1190.0])],
    );
    let h = of(&l);
    assert_eq!(h.metric, "total_us");
    // 1200 µs reads as 1.2 ms, as the tables scale a column from 1 ms.
    assert!(h.figure().starts_with("1.2"), "{}", h.figure());
    assert_eq!(h.unit, "ms", "{}", h.figure());
}
