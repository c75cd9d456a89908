//! The HTML report's header: when it was generated (UTC, RFC 3339), by which socklab, and the
//! facts of every host its experiments ran on.

use roxmltree::{Document, ParsingOptions};
use socklab_lab::clock::now_rfc3339;
use socklab_lab::html::html_report;
use socklab_lab::model::params::Params;
use socklab_lab::plan::{Axis, Group, Order, Plan};
use socklab_lab::runner::Sample;
use socklab_lab::store::Store;
use socklab_sys::host::{host_facts, HostFacts};

/// Records a one-cell experiment on `host` with five measured repetitions.
fn record(store: &mut Store, host: &HostFacts) -> i64 {
    let g = Group::new("memcpy", Params::new()).axis(Axis::single("size", ["64"]));
    let plan = Plan::build("m", "", &[g], 5, 0, Order::Sequential, "test").unwrap();
    let (id, cells) = store.begin_experiment(&plan, host).unwrap();
    for r in 0..5 {
        let s = Sample {
            metrics: vec![("gbps".into(), 1.0 + r as f64)],
            extra: serde_json::Value::Null,
            histograms: Vec::new(),
            intervals: Vec::new(),
        };
        store
            .record_sample(cells[0], r, false, "2025-01-01T00:00:00Z", 1.0, &s)
            .unwrap();
    }
    store.finish_experiment(id, "done").unwrap();
    id
}

fn doc(html: &str) -> Document<'_> {
    let opts = ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    Document::parse_with_options(html, opts).unwrap()
}

fn text(n: roxmltree::Node) -> String {
    n.descendants()
        .filter(|d| d.is_text())
        .filter_map(|d| d.text())
        .collect()
}

#[test]
fn header_names_the_generation_time_version_and_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let here = host_facts();
    let mut there = here.clone();
    there.hostname = "elsewhere".into();
    there.kernel = "Linux 4.19.0 x86_64".into();
    let a = record(&mut store, &here);
    let b = record(&mut store, &there);
    let before = now_rfc3339();
    let html = html_report(&store, &[a, b], "t").unwrap();
    let after = now_rfc3339();
    let d = doc(&html);
    let generated = d
        .descendants()
        .find(|n| n.attribute("class") == Some("generated"))
        .unwrap();
    assert!(text(generated).contains(&format!("socklab {}", env!("CARGO_PKG_VERSION"))));
    let time = generated
        .descendants()
        .find(|n| n.has_tag_name("time"))
        .expect("a <time> element");
    let at = time.attribute("datetime").unwrap();
    // RFC 3339, UTC: YYYY-MM-DDTHH:MM:SS.mmmZ, between the calls before and after.
    assert_eq!(at.len(), 24, "{at}");
    assert!(at.ends_with('Z') && &at[10..11] == "T", "{at}");
    assert!(
        before.as_str() <= at && at <= after.as_str(),
        "{before} <= {at} <= {after}"
    );
    assert_eq!(text(time), at);
    // One host table per host, each named by its experiments, with the kernel, CPU, cores
    // and default congestion control.
    let heads: Vec<String> = d
        .descendants()
        .filter(|n| n.has_tag_name("h2") && text(*n).starts_with("Host"))
        .map(text)
        .collect();
    assert_eq!(
        heads,
        [
            format!("Host of experiment(s) {a}"),
            format!("Host of experiment(s) {b}")
        ]
    );
    let hosts: Vec<String> = d
        .descendants()
        .filter(|n| n.attribute("class") == Some("host"))
        .map(text)
        .collect();
    assert_eq!(hosts.len(), 2);
    for (h, facts) in hosts.iter().zip([&here, &there]) {
        for key in [
            "kernel",
            "cpu_model",
            "cores",
            "cc_default",
            "socklab_version",
        ] {
            assert!(h.contains(key), "{key} missing: {h}");
        }
        assert!(h.contains(&facts.kernel), "{h}");
    }
    // A single host: one table, headed "Host".
    let html = html_report(&store, &[a], "t").unwrap();
    assert!(html.contains("<h2>Host</h2>"));
    assert_eq!(html.matches("class=\"host\"").count(), 1);
}
