//! Issue 28 part 2: tables show what the experiment is about: a cell over an emulated link
//! shows its latency beside its throughput, units scale down a column, `columns` picks the
//! columns, and labels keep the whole link spec.

use crate::columns::{known_for_plan, known_for_stats, summary_table, summary_table_with, Columns};
use crate::model::params::Params;
use crate::output::{human_with, markdown_report};
use crate::plan::{Axis, Group, Order, Plan};
use crate::summary::experiment_stats;
use crate::testkit::{lab, Lab, Rep};
use crate::workload::report_tables;

const FIFO: &str = "rate 20mbit limit 1000";
const CODEL: &str = "rate 20mbit limit 1000 aqm fq_codel";

/// The bufferbloat pair, made up after a real run: both cells at 19.3 Mbit/s, the 1000-packet
/// FIFO with a 119 ms RTT and 64 ms of queueing, fq_codel with 7.6 ms and 7.7 ms.
fn bufferbloat() -> Lab {
    let rep = |gbps: f64, rtt: f64, q: f64| -> Rep {
        vec![
            ("gbps", gbps),
            ("rtt_us", rtt),
            ("link_fwd_qdelay_mean_us", q),
            ("link_fwd_in", 3700.0),
            ("retrans", 0.0),
        ]
    };
    lab(
        "bulk",
        Params::new().with("duration", "2s"),
        "link",
        &[FIFO, CODEL],
        &[
            vec![
                rep(0.019_30, 119_300.0, 64_100.0),
                rep(0.019_31, 119_400.0, 64_200.0),
                rep(0.019_29, 119_500.0, 64_150.0),
            ],
            vec![
                rep(0.019_30, 7_500.0, 7_600.0),
                rep(0.019_29, 7_600.0, 7_700.0),
                rep(0.019_31, 7_650.0, 7_750.0),
            ],
        ],
    )
}

fn col(t: &crate::table::Table, h: &str) -> usize {
    t.headers
        .iter()
        .position(|x| x == h)
        .unwrap_or_else(|| panic!("no column {h} in {:?}", t.headers))
}

#[test]
fn a_cell_over_a_link_shows_its_latency_beside_throughput_in_mbit_and_ms() {
    let l = bufferbloat();
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = summary_table(&st);
    // Below 1 Gbit/s the column is in Mbit/s (today: 0.01930 Gbit/s in both cells).
    assert_eq!(t.headers[2], "Mbit/s", "{:?}", t.headers);
    assert_eq!(t.rows[0][2], "19.30");
    // The latency comes right after the primary's block (mean, CI, sd, min, median, max, vs).
    let rtt = col(&t, "rtt ms");
    let q = col(&t, "qdelay ms");
    assert_eq!((rtt, q), (9, 10), "{:?}", t.headers);
    assert_eq!(t.rows[0][rtt], "119.4");
    assert_eq!(t.rows[1][rtt], "7.583");
    assert_eq!(t.rows[0][q], "64.15");
    assert_eq!(t.rows[1][q], "7.683");
    // The report draws the same table.
    let md = markdown_report(&l.store, &[l.id], "t").unwrap();
    assert!(md.contains("| rtt ms | qdelay ms |"), "{md}");
    assert!(md.contains("| 119.4 | 64.15 |"), "{md}");
}

#[test]
fn a_loopback_bulk_table_gets_no_latency_columns_and_keeps_gbit() {
    let l = lab(
        "bulk",
        Params::new(),
        "bufsize",
        &["64K", "128K"],
        &[
            crate::testkit::reps("gbps", &[20.0, 21.0]),
            crate::testkit::reps("gbps", &[0.5, 0.6]),
        ],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = summary_table(&st);
    // One value at or above 1 Gbit/s keeps the column in Gbit/s: comparable down it.
    assert_eq!(t.headers[2], "Gbit/s");
    assert_eq!(t.rows[1][2], "0.5500");
    assert!(
        !t.headers.iter().any(|h| h.contains("rtt")),
        "{:?}",
        t.headers
    );
}

#[test]
fn labels_keep_the_whole_link_spec_limit_1000_included() {
    let l = bufferbloat();
    let st = experiment_stats(&l.store, l.id).unwrap();
    let labels: Vec<&str> = st.cells.iter().map(|c| c.cell.label.as_str()).collect();
    // Today: "link=rate 20mbit" and "link=rate 20mbit aqm fq_codel" (the default limit left out
    // of the canonical text).
    assert_eq!(labels, [format!("link={FIFO}"), format!("link={CODEL}")]);
    // The stored configuration stays canonical (exports and --resume read it).
    assert_eq!(st.cells[0].cell.config.get("link"), Some("rate 20mbit"));
    // As given, white space collapsed; other keys as before.
    let g = Group::new("bulk", Params::new()).axis(Axis::single(
        "link",
        ["delay 5ms   limit 1000", "delay 5ms loss 1%"],
    ));
    let p = Plan::build("x", "", &[g], 1, 0, Order::Sequential, "t").unwrap();
    assert_eq!(p.cells[0].label, "link=delay 5ms limit 1000");
    assert_eq!(p.cells[1].label, "link=delay 5ms loss 1%");
}

#[test]
fn columns_parse_and_name_the_available_metrics_when_unknown() {
    let c: Columns = "gbps, rtt_us ,link_fwd_qdelay_mean_us".parse().unwrap();
    assert_eq!(c.0, ["gbps", "rtt_us", "link_fwd_qdelay_mean_us"]);
    let e = "gbps,,rtt_us".parse::<Columns>().unwrap_err();
    assert!(e.contains("separated by commas"), "{e}");
    let l = bufferbloat();
    let st = experiment_stats(&l.store, l.id).unwrap();
    let known = known_for_stats(&st);
    c.check(&known).unwrap();
    // A per-stream name matches its table's pattern.
    Columns(vec!["gbps.s3".into()]).check(&known).unwrap();
    let e = Columns(vec!["gbps".into(), "rtt".into()])
        .check(&known)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("`columns`: no metric 'rtt' here; choose from gbps, "),
        "{e}"
    );
    assert!(
        e.contains("rtt_us") && e.contains("link_fwd_qdelay_mean_us"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
    // Before a run, the plan's workloads say what they will record.
    let g = Group::new("pingpong", Params::new());
    let p = Plan::build("x", "", &[g], 1, 0, Order::Sequential, "t").unwrap();
    let known = known_for_plan(&p);
    assert!(known.iter().any(|k| k == "rtt_p50_us"), "{known:?}");
    assert!(Columns(vec!["gbps".into()]).check(&known).is_err());
}

#[test]
fn columns_pick_the_human_tables_columns_in_their_order() {
    let l = bufferbloat();
    let st = experiment_stats(&l.store, l.id).unwrap();
    let pick: Columns = "link_fwd_qdelay_mean_us,gbps,retrans".parse().unwrap();
    let t = summary_table_with(&st, Some(&pick));
    assert_eq!(
        t.headers,
        [
            "config",
            "n",
            "qdelay ms",
            "Mbit/s",
            "±95% CI",
            "sd",
            "min",
            "median",
            "max",
            "vs top mean",
            "retrans"
        ]
    );
    // Only a secondary metric: its mean, no interval; one held by no cell reads "-".
    let t = summary_table_with(&st, Some(&"rtt_us,cwnd".parse().unwrap()));
    assert_eq!(t.headers, ["config", "n", "rtt ms", "cwnd"]);
    assert_eq!(
        t.rows[1],
        [
            format!("link={CODEL}"),
            "3".into(),
            "7.583".into(),
            "-".into()
        ]
    );
    let text = human_with(&st, Some(&pick));
    assert!(text.contains("qdelay ms  Mbit/s"), "{text}");
    assert!(!text.contains("rtt ms"), "{text}");
}

#[test]
fn rrul_tables_print_latency_in_ms_and_say_so() {
    let rep = |p50: f64, up: f64| -> Rep {
        vec![
            ("added_p50_ms", p50),
            ("added_p99_ms", p50 * 2.0),
            ("idle_tcp_p50_ms", 0.122),
            ("loaded_tcp_p50_ms", 0.122 + p50),
            ("up_mbps", up),
            ("down_mbps", up * 0.8),
            ("udp_loss_loaded_pct", 0.0),
        ]
    };
    let l = lab(
        "rrul",
        Params::new(),
        "cc",
        &["cubic", "bbr"],
        &[
            vec![rep(0.05, 17_736.0), rep(0.06, 17_000.0)],
            vec![rep(110.0, 18.0), rep(111.0, 19.0)],
        ],
    );
    let st = experiment_stats(&l.store, l.id).unwrap();
    let t = summary_table(&st);
    assert_eq!(t.headers[2], "added p50 ms", "{:?}", t.headers);
    for h in ["idle p50 ms", "loaded p50 ms", "added p99 ms"] {
        col(&t, h);
    }
    // ms stay ms, even at 0.122 ms: the tables print latency in ms.
    assert_eq!(t.rows[0][col(&t, "idle p50 ms")], "0.1220");
    // Throughput scales with its column: one cell at 17 Gbit/s puts it in Gbit/s.
    assert_eq!(t.rows[0][col(&t, "up Gbit/s")], "17.37");
    let rt = &report_tables(&st)[0].table;
    for h in [
        "tcp idle p50 ms",
        "tcp loaded p50 ms",
        "added p50 ms",
        "udp added p50 ms",
    ] {
        col(rt, h);
    }
    assert_eq!(rt.rows[1][col(rt, "added p50 ms")], "110.5");
    assert_eq!(rt.rows[1][col(rt, "up Gbit/s")], "0.01850");
}
