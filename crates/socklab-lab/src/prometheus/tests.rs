//! The exposition's names, units and escaping, driven directly; the exposition of a made-up
//! experiment. (`crates/socklab/tests/export_prometheus.rs` runs real experiments and
//! `promtool check metrics`.)

use std::collections::BTreeMap;

use super::*;
use crate::model::params::Params;
use crate::summary::experiment_stats;
use crate::testkit::lab;
use crate::workload::REGISTRY;

/// The units of the workloads' tables that are counts or unitless: they keep name and value.
const COUNTS: &[&str] = &[
    "",
    "0/1",
    "index",
    "segments",
    "sends",
    "messages",
    "replies",
    "connections",
    "datagrams",
    "positions",
    "calls",
    "requests",
    "switches",
    "probes",
    "slots",
    "packets",
    "sockets",
    "trials",
    "options",
];

/// Promtool's linter (promlint): abbreviated units it rejects as a `_word_` or a `_word` end.
const PROMLINT_ABBREVIATIONS: &[&str] = &[
    "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d",
];

/// The names Prometheus' linter would complain about, or the format refuses.
fn lint(name: &str) -> Option<String> {
    let valid = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        return Some(format!("{name}: not [a-z_][a-z0-9_]*"));
    }
    for a in PROMLINT_ABBREVIATIONS {
        if name.contains(&format!("_{a}_")) || name.ends_with(&format!("_{a}")) {
            return Some(format!("{name}: abbreviated unit {a}"));
        }
    }
    for s in ["_total", "_count", "_sum", "_bucket", "_info"] {
        if name.ends_with(s) {
            return Some(format!("{name}: a gauge ending {s}"));
        }
    }
    None
}

#[test]
fn units_convert_to_their_base_unit() {
    let f = family("rtt_us", "us");
    assert_eq!(f.name(""), "socklab_rtt_seconds");
    assert_eq!(f.name("ci95_lo"), "socklab_rtt_ci95_lo_seconds");
    assert_eq!(f.scale, -6);
    let f = family("gbps", "Gbit/s");
    assert_eq!(
        (f.name(""), f.scale),
        ("socklab_throughput_bytes_per_second".into(), 9)
    );
    assert_eq!(family("gbps", "Gbit/s").convert(8.0), 1e9);
    let f = family("xfer_mbps", "Mbit/s");
    assert_eq!(
        (f.name(""), f.scale),
        ("socklab_xfer_bytes_per_second".into(), 6)
    );
    assert_eq!(
        family("gbps_up", "Gbit/s").name(""),
        "socklab_throughput_up_bytes_per_second"
    );
    let f = family("snd_cpu_pct", "%");
    assert_eq!((f.name(""), f.scale), ("socklab_snd_cpu_ratio".into(), -2));
    assert_eq!(f.convert(37.0), 0.37);
    assert_eq!(
        family("failed", "fraction").name(""),
        "socklab_failed_ratio"
    );
    assert_eq!(family("srv_cpu_s", "s").name(""), "socklab_srv_cpu_seconds");
    assert_eq!(family("total_ms", "ms").scale, -3);
    assert_eq!(
        family("total_us", "us").name(""),
        "socklab_round_trips_seconds"
    );
    assert_eq!(family("total_s", "s").name(""), "socklab_transfer_seconds");
    assert_eq!(family("rtt_us", "us").convert(50.0), 0.00005);
    assert_eq!(
        family("cpu_us_per_conn", "us").name(""),
        "socklab_cpu_per_conn_seconds"
    );
    assert_eq!(
        family("rtt_per_s", "1/s").name(""),
        "socklab_rtt_per_second"
    );
    assert_eq!(
        family("req_per_s", "req/s").name(""),
        "socklab_req_per_second"
    );
    // A name that says its unit keeps it; a count keeps its name and value.
    assert_eq!(family("send_seconds", "s").name(""), "socklab_send_seconds");
    // The statistic goes before the unit; a name that is its unit gets a word.
    assert_eq!(
        family("send_seconds", "s").name("ci95_lo"),
        "socklab_send_ci95_lo_seconds"
    );
    assert_eq!(
        family("seconds", "s").name(""),
        "socklab_end_to_end_seconds"
    );
    assert_eq!(
        family("bytes", "B").name("ci95_hi"),
        "socklab_sent_ci95_hi_bytes"
    );
    assert_eq!(
        family("bytes.s1", "B").name(""),
        "socklab_per_stream_sent_bytes"
    );
    assert_eq!(
        family("bytes_per_read", "B").name(""),
        "socklab_bytes_per_read"
    );
    let f = family("retrans", "segments");
    assert_eq!(
        (f.name(""), f.scale, f.unit),
        ("socklab_retrans".into(), 0, None)
    );
}

#[test]
fn a_per_stream_or_per_file_metric_is_a_label_of_its_own_family() {
    let f = family("gbps.s3", "Gbit/s");
    assert_eq!(f.name(""), "socklab_per_stream_throughput_bytes_per_second");
    assert_eq!(f.part, Some(("stream", "3".to_string())));
    let f = family("rtt_us.s0", "us");
    assert_eq!(f.name(""), "socklab_per_stream_rtt_seconds");
    let f = family("retx.big file.bin", "packets");
    assert_eq!(f.name(""), "socklab_per_file_retx");
    assert_eq!(f.part, Some(("file", "big file.bin".to_string())));
}

#[test]
fn label_values_and_help_are_escaped_as_the_format_says() {
    assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
    assert_eq!(escape_label("two\nlines"), "two\\nlines");
    assert_eq!(escape_label("µs ok"), "µs ok");
    assert_eq!(
        escape_help("a \"quote\"\\ and\nmore"),
        "a \"quote\"\\\\ and\\nmore"
    );
    assert_eq!(sanitize("read-size"), "read_size");
    assert_eq!(sanitize("9lives"), "_9lives");
    assert_eq!(value(1e-6), "0.000001");
    assert_eq!(value(f64::NAN), "NaN");
    assert_eq!(value(f64::NEG_INFINITY), "-Inf");
    assert_eq!("0.000001".parse::<f64>().unwrap(), 1e-6);
}

#[test]
fn every_metric_of_every_workload_has_a_clean_name_of_its_own() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let unknown: Vec<String> = REGISTRY
        .iter()
        .flat_map(|k| k.metrics)
        .filter(|m| base_unit(m.unit).is_none() && !COUNTS.contains(&m.unit))
        .map(|m| format!("{} ({})", m.name, m.unit))
        .collect();
    assert!(
        unknown.is_empty(),
        "units with no base unit here: add them to base_unit (or to COUNTS): {unknown:?}"
    );
    for k in REGISTRY {
        for m in k.metrics {
            // A pattern entry (`gbps.s<n>`) stands for its names.
            let name = m.name.replace("<n>", "0").replace("<file>", "f");
            let f = family(&name, m.unit);
            for stat in ["", "ci95_lo", "ci95_hi"] {
                let full = f.name(stat);
                assert_eq!(lint(&full), None, "{}", m.name);
                if let Some(other) = seen.insert(full.clone(), m.name.to_string()) {
                    assert_eq!(other, m.name, "{full}: two metrics, one family");
                }
            }
        }
    }
    for fixed in [
        "socklab_cell_repetitions",
        "socklab_cell_invalid_repetitions",
    ] {
        assert_eq!(lint(fixed), None);
        assert!(!seen.contains_key(fixed));
    }
}

#[test]
fn the_exposition_has_one_help_and_type_per_family_and_escaped_labels() {
    let l = lab(
        "bulk",
        Params::new(),
        "bufsize",
        &["64K", "128K"],
        &[
            [10.0, 11.0, 12.0]
                .iter()
                .map(|&g| vec![("gbps", g), ("gbps.s0", g * 0.4), ("gbps.s1", g * 0.6)])
                .collect(),
            vec![vec![("gbps", 20.0), ("rtt_us", 50.0)]],
        ],
    );
    let mut st = experiment_stats(&l.store, l.id).unwrap();
    st.cells[0].cell.label = "a \"quoted\" \\ label\nover two lines".into();
    st.cells[0]
        .cell
        .config
        .0
        .insert("cell".into(), "mine".into());
    st.cells[0].invalid = 2;
    let text = exposition(&[st.clone()]);
    let mut helps = BTreeMap::new();
    let mut types = BTreeMap::new();
    let mut current = String::new();
    let mut families_seen = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            *helps.entry(name.clone()).or_insert(0) += 1;
            assert!(!families_seen.contains(&name), "{name} twice:\n{text}");
            families_seen.push(name.clone());
            current = name;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            assert_eq!(rest, format!("{current} gauge"));
            *types.entry(current.clone()).or_insert(0) += 1;
        } else {
            let name = line.split('{').next().unwrap();
            assert_eq!(name, current, "a sample outside its family: {line}");
        }
    }
    assert!(helps.values().all(|&n| n == 1) && helps == types, "{text}");
    // The label escaped; the configuration key `cell` renamed, not a second `cell`.
    assert!(
        text.contains(r#"cell="a \"quoted\" \\ label\nover two lines""#),
        "{text}"
    );
    assert!(text.contains(r#"config_cell="mine""#), "{text}");
    // The mean in its base unit; the interval only where n ≥ 2; n and invalid per cell.
    let rtt = text
        .lines()
        .find(|l| l.starts_with("socklab_rtt_seconds{"))
        .unwrap();
    assert!(rtt.ends_with(" 0.00005"), "{rtt}");
    assert!(!text.contains("socklab_rtt_ci95_lo_seconds{"), "{text}");
    let mean_line = text
        .lines()
        .find(|l| {
            l.starts_with("socklab_throughput_bytes_per_second{") && l.contains("bufsize=\"64K\"")
        })
        .unwrap();
    assert!(mean_line.ends_with(" 1375000000"), "{mean_line}");
    let (lo, hi) = st.cells[0].metrics["gbps"].ci95().unwrap();
    assert!(
        text.contains(&format!(" {}\n", value(lo * 1e9 / 8.0))),
        "{text}"
    );
    assert!(
        text.contains(&format!(" {}\n", value(hi * 1e9 / 8.0))),
        "{text}"
    );
    assert!(text.contains("experiment_name=\"made up\""), "{text}");
    // Both streams in one family, told apart by `stream`; nothing left out.
    let streams: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("socklab_per_stream_throughput_bytes_per_second{"))
        .collect();
    assert_eq!(streams.len(), 2, "{text}");
    assert!(streams[0].contains("stream=\"0\"") && streams[1].contains("stream=\"1\""));
    assert!(!text.contains("# socklab: left out"), "{text}");
    let invalid: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("socklab_cell_invalid_repetitions{"))
        .collect();
    assert_eq!(invalid.len(), 2);
    assert!(invalid[0].ends_with(" 2") && invalid[1].ends_with(" 0"));
    // Two experiments: the families stay grouped, the series told apart by `experiment`.
    let mut other = st.clone();
    other.experiment.id += 1;
    let both = exposition(&[st, other]);
    let helps = both.lines().filter(|l| l.starts_with("# HELP ")).count();
    assert_eq!(helps, families_seen.len());
    let mut series: Vec<&str> = both
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.rsplit_once(' ').unwrap().0)
        .collect();
    let n = series.len();
    series.sort_unstable();
    series.dedup();
    assert_eq!(series.len(), n, "a series twice:\n{both}");
}
