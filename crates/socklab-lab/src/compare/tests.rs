//! The comparison of made-up sides: sources, JSON baselines, the gate, the text and the
//! report sections.

use std::collections::BTreeMap;

use super::source::parse_json;
use super::*;

fn cell(label: &str, bufsize: &str, gbps: &[f64]) -> SideCell {
    SideCell {
        workload: "bulk".into(),
        label: label.into(),
        config: [("bufsize", bufsize), ("streams", "1")]
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        values: BTreeMap::from([
            ("gbps".to_string(), gbps.to_vec()),
            ("cwnd".to_string(), vec![10.0, 10.0, 10.0, 10.0, 10.0]),
        ]),
    }
}

fn side(name: &str, cells: Vec<SideCell>) -> Side {
    Side {
        name: name.into(),
        cells,
    }
}

const FAST: [f64; 5] = [30.0, 31.0, 29.5, 30.5, 30.2];
const SLOW: [f64; 5] = [10.0, 10.5, 9.8, 10.2, 10.1];

#[test]
fn a_slowdown_beyond_the_threshold_fails_the_gate_and_a_rerun_passes() {
    let a = side("A", vec![cell("128K", "128K", &FAST)]);
    let b = side("B", vec![cell("2K", "2K", &SLOW)]);
    let ignore = ["bufsize".to_string()];
    let c = compare_sides(&a, &b, &ignore, &[], Some(0.5)).unwrap();
    assert!(c.gate_failed());
    assert_eq!(c.failures(), ["2K: gbps"]);
    let gbps = &c.cells[0]
        .metrics
        .iter()
        .find(|m| m.metric == "gbps")
        .unwrap();
    assert_eq!(gbps.verdict, Verdict::Slower);
    // cwnd has no direction and is not gated.
    let cwnd = c.cells[0]
        .metrics
        .iter()
        .find(|m| m.metric == "cwnd")
        .unwrap();
    assert!(!cwnd.gated && cwnd.verdict == Verdict::Same);
    let t = text::text(&c);
    assert!(t.lines().last().unwrap().starts_with("gate: FAIL"), "{t}");
    assert!(t.contains("slower"), "{t}");
    // The same configuration again: pass.
    let rerun = side(
        "B",
        vec![cell("128K", "128K", &[30.3, 30.8, 29.9, 30.1, 31.0])],
    );
    let c = compare_sides(&a, &rerun, &[], &[], Some(0.5)).unwrap();
    assert!(!c.gate_failed());
    assert!(text::gate_line(&c).starts_with("gate: pass"));
    // No threshold: no gate.
    let c = compare_sides(&a, &b, &ignore, &[], None).unwrap();
    assert!(!c.gate_failed());
    assert!(text::gate_line(&c).starts_with("gate: none"));
}

#[test]
fn named_metrics_are_the_ones_compared_and_gated_and_unknown_ones_are_named() {
    let a = side("A", vec![cell("x", "128K", &FAST)]);
    let b = side("B", vec![cell("x", "128K", &SLOW)]);
    let c = compare_sides(&a, &b, &[], &["cwnd".into()], Some(0.5)).unwrap();
    assert_eq!(c.cells[0].metrics.len(), 1);
    assert!(c.cells[0].metrics[0].gated && !c.gate_failed());
    let e = compare_sides(&a, &b, &[], &["gbsp".into()], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("gbsp") && e.contains("cwnd, gbps"), "{e}");
}

#[test]
fn the_json_is_one_object_with_the_gate() {
    let a = side("A", vec![cell("x", "128K", &FAST)]);
    let b = side("B", vec![cell("x", "128K", &SLOW)]);
    let v = text::json(&compare_sides(&a, &b, &[], &[], Some(0.05)).unwrap());
    assert_eq!(v["schema"], "socklab.compare/1");
    assert_eq!(v["gate"]["outcome"], "fail");
    let m = &v["cells"][0]["metrics"];
    let gbps = m
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["metric"] == "gbps")
        .unwrap();
    assert_eq!(gbps["verdict"], "slower");
    assert_eq!(gbps["ratio_interval"]["kind"], "bounded");
}

#[test]
fn report_sections_escape_labels() {
    let mut x = cell("<b>x|y</b>", "128K", &FAST);
    x.label = "<b>x|y</b>".into();
    let a = side("<script>", vec![x.clone()]);
    let b = side("B", vec![x]);
    let c = compare_sides(&a, &b, &[], &[], None).unwrap();
    let (h, md) = text::add_to_report(&c, "<main>\n<footer>f</footer>", "# r\n");
    assert!(
        h.contains("&lt;script&gt;") && !h.contains("<script>"),
        "{h}"
    );
    assert!(h.find("id=\"compare\"").unwrap() < h.find("<footer>").unwrap());
    assert!(md.contains("&lt;b&gt;x\\|y&lt;/b&gt;"), "{md}");
}

#[test]
fn export_rows_leave_out_warmups_and_invalid_repetitions() {
    let rows = r#"[
      {"cell":0,"label":"a","workload":"bulk","config":{"bufsize":"128K"},"warmup":true,"metrics":{"gbps":1.0}},
      {"cell":0,"label":"a","workload":"bulk","config":{"bufsize":"128K"},"warmup":false,"metrics":{"gbps":2.0}},
      {"cell":0,"label":"a","workload":"bulk","config":{"bufsize":"128K"},"warmup":false,"metrics":{"gbps":9.0,"emu_valid":0.0}},
      {"cell":0,"label":"a","workload":"bulk","config":{"bufsize":"128K"},"warmup":false,"metrics":{"gbps":3.0}}
    ]"#;
    let cells = parse_json(rows).unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].values["gbps"], [2.0, 3.0]);
    assert_eq!(cells[0].config["bufsize"], "128K");
}

#[test]
fn stats_json_needs_values_and_says_how_to_save_a_baseline() {
    let with = r#"{"schema":"socklab.experiment/1","cells":[{"label":"a","workload":"bulk","config":{"streams":1},"metrics":{"gbps":{"mean":2.5,"values":[2.0,3.0]}}}]}"#;
    let cells = parse_json(with).unwrap();
    assert_eq!(cells[0].values["gbps"], [2.0, 3.0]);
    assert_eq!(cells[0].config["streams"], "1");
    // A time series run prints JSON lines; the statistics are the last.
    let lines = format!("{{\"interval\":1}}\n{with}\n");
    assert_eq!(parse_json(&lines).unwrap(), cells);
    let old = r#"{"schema":"socklab.experiment/1","cells":[{"label":"a","workload":"bulk","config":{},"metrics":{"gbps":{"mean":2.5}}}]}"#;
    let e = parse_json(old).unwrap_err();
    assert!(
        e.contains("`values`") && e.contains("socklab results export"),
        "{e}"
    );
    assert!(parse_json("hello")
        .unwrap_err()
        .starts_with("not socklab JSON"));
    assert!(parse_json("{\"a\":1}")
        .unwrap_err()
        .starts_with("not socklab JSON"));
    assert_eq!(parse_json("[]").unwrap_err(), "holds no cells");
}

#[test]
fn sources_are_ids_db_ids_or_files() {
    assert_eq!(Source::parse("A", "3").unwrap(), Source::Id(3));
    assert_eq!(
        Source::parse("A", "other.db:7").unwrap(),
        Source::DbId("other.db".into(), 7)
    );
    let e = Source::parse("B", "/nonexistent/base.json")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("B '/nonexistent/base.json': no such file"),
        "{e}"
    );
    let e = Source::Id(3)
        .load("A", std::path::Path::new("/nonexistent/x.db"))
        .unwrap_err();
    assert!(matches!(e, crate::LabError::Plan(_)), "{e}");
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn thresholds_are_checked_before_anything_is_read() {
    let run = CompareRun {
        a: "1".into(),
        b: "2".into(),
        threshold: Some("5".into()),
        ..CompareRun::default()
    };
    let e = run
        .run(std::path::Path::new("/nonexistent/x.db"))
        .unwrap_err();
    assert!(e.to_string().contains("`threshold` '5'"), "{e}");
}
