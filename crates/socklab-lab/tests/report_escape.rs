//! report.md and results.csv of a report whose experiment name, description, command and cell
//! labels are hostile (as a store written by another tool or an edited one may hold them):
//! report.md holds no raw tag, link or extra table column, results.csv no formula.

use socklab_lab::model::params::Params;
use socklab_lab::plan::{Axis, Group, Order, Plan};
use socklab_lab::report::write_report;
use socklab_lab::runner::Sample;
use socklab_lab::store::Store;
use socklab_sys::host::host_facts;

const NAME: &str = "<script>alert(1)</script> [x](javascript:alert(2))";
const DESCRIPTION: &str = "<svg onload=alert(3)>\n![i](javascript:alert(4)) a|b";
const LABELS: [&str; 3] = [
    "=HYPERLINK(\"http://e\")",
    "@SUM(1)|<img src=x onerror=y>",
    "-1.5",
];

fn record(store: &mut Store) -> i64 {
    let g = Group::new("memcpy", Params::new()).axis(Axis::single("size", ["64", "128", "256"]));
    let mut plan = Plan::build(
        NAME,
        DESCRIPTION,
        &[g],
        2,
        0,
        Order::Sequential,
        "a `b` <c>",
    )
    .unwrap();
    for (c, label) in plan.cells.iter_mut().zip(LABELS) {
        c.label = label.into();
    }
    let (id, cells) = store.begin_experiment(&plan, &host_facts()).unwrap();
    for (i, cell) in cells.iter().enumerate() {
        for r in 0..2 {
            let s = Sample {
                metrics: vec![("gbps".into(), 1.0 + (i + r) as f64)],
                extra: serde_json::Value::Null,
                histograms: Vec::new(),
                intervals: Vec::new(),
            };
            store
                .record_sample(*cell, r, false, "2025-01-01T00:00:00Z", 1.0, &s)
                .unwrap();
        }
    }
    store.finish_experiment(id, "done").unwrap();
    id
}

#[test]
fn hostile_names_and_values_are_text_in_report_md_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let id = record(&mut store);
    let files = write_report(&store, &[id], "<b>t</b>", &dir.path().join("out"), false).unwrap();

    let md = std::fs::read_to_string(&files.markdown).unwrap();
    for raw in [
        "<script",
        "<svg",
        "<img",
        "<b>",
        "](javascript:",
        "|<",
        "\"http",
    ] {
        // `\]` is an escaped bracket: no link.
        let unescaped = md.replace("\\]", "");
        assert!(
            !unescaped.contains(raw),
            "report.md holds raw `{raw}`:\n{md}"
        );
    }
    assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt; \\[x\\](javascript:alert(2))"));
    assert!(md.contains("&lt;svg onload=alert(3)&gt;\n!\\[i\\](javascript:alert(4)) a\\|b"));
    // The command stays a code span (shown literally), closed by a longer fence.
    assert!(md.contains("Command: ``a `b` <c>``"), "{md}");
    // Each table row has as many columns as its header.
    for table in md.split("\n\n").filter(|p| p.starts_with("| ")) {
        let cols = |l: &str| l.replace("\\|", "").matches('|').count();
        let mut lines = table.lines();
        let head = cols(lines.next().unwrap());
        for l in lines {
            assert_eq!(cols(l), head, "{l}");
        }
    }

    let csv = std::fs::read_to_string(&files.csv).unwrap();
    for line in csv.lines().skip(1) {
        for field in line.split(',') {
            assert!(
                !field.starts_with(['=', '@'])
                    && !field.starts_with("\"=")
                    && !field.starts_with("\"@"),
                "results.csv holds a formula: {line}"
            );
        }
    }
    assert!(csv.contains(",\"'=HYPERLINK(\"\"http://e\"\")\","), "{csv}");
    assert!(csv.contains(",'@SUM(1)|<img src=x onerror=y>,"), "{csv}");
    // A negative number stays a number.
    assert!(csv.contains(",-1.5,"), "{csv}");
}
