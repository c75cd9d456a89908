//! The HTML report, end to end: a store with synthetic results built through the public API,
//! the report parsed as XML (structure, statistics, no external references), and rendered by
//! a real headless Chromium (the screenshot must show the bars and the series).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use roxmltree::{Document, Node, ParsingOptions};
use socklab_lab::html::html_report;
use socklab_lab::model::params::Params;
use socklab_lab::plan::{Axis, Group, Order, Plan};
use socklab_lab::runner::Sample;
use socklab_lab::store::Store;
use socklab_lab::summary::experiment_stats;
use socklab_lab::svg::{BAR_COLOUR, BEST_COLOUR, PALETTE};
use socklab_lab::table::num;

const TITLE: &str = "Lab <report> & \"friends\"";

/// The store and helpers for the items of issue 15 the screenshot covers.
#[path = "report_html/trust.rs"]
mod trust;
use trust::{attr_f64, count_exact, on_white, trust_lab, INVALID_GBPS};

/// The store of the time-series charts (issue 17 item 5).
#[path = "report_html/series.rs"]
mod series;

/// The store shaped like `lab --quick` of the first-screen table (issue 28 part 1).
#[path = "report_html/glance.rs"]
mod glance;

/// Relative deviations of the five measured repetitions from a cell's base value.
const DEV: [f64; 5] = [-0.03, 0.01, 0.0, 0.04, -0.02];

/// A warm-up value that would show everywhere if warm-ups were counted.
const WARMUP_GBPS: f64 = 1000.0;

const BULK_SIZES: [&str; 7] = ["1K", "2K", "4K", "8K", "16K", "32K", "64K"];
const BULK_BASE: [f64; 7] = [1.5, 2.8, 5.1, 8.7, 12.4, 16.9, 15.2];
const REF_SIZES: [&str; 4] = ["4K", "16K", "64K", "256K"];
const PIPE_BASE: [f64; 4] = [21.0, 34.0, 47.5, 44.0];
const MEMCPY_BASE: [f64; 4] = [60.0, 85.0, 95.0, 70.0];
const STRATEGIES: [&str; 3] = ["write", "writev", "single"];
const STRATEGY_BASE: [f64; 3] = [3.0, 4.2, 3.9];

/// The five measured gbps values of a cell with base `base` (`noise` scales the deviations).
fn values(base: f64, noise: f64) -> Vec<f64> {
    DEV.iter().map(|d| base * (1.0 + d * noise)).collect()
}

/// The reads metric of cell `i`, repetition `r`.
fn reads(i: usize, r: usize) -> f64 {
    (100 * (i + 1) + r) as f64
}

struct Lab {
    _dir: tempfile::TempDir,
    store: Store,
    a: i64,
    b: i64,
}

/// Records one experiment: a warm-up (with an absurd value) and five measured repetitions
/// per cell, values from `bases` (in plan order), `noise` per cell.
fn record(store: &mut Store, plan: &Plan, bases: &[f64], noise: &[f64]) -> i64 {
    assert_eq!(
        plan.cells.len(),
        bases.len(),
        "plan cells: {:?}",
        plan.cells
    );
    let (id, cells) = store
        .begin_experiment(plan, &socklab_sys::host::host_facts())
        .unwrap();
    for (i, &cell) in cells.iter().enumerate() {
        let warm = Sample {
            metrics: vec![
                ("gbps".into(), WARMUP_GBPS),
                ("reads".into(), 1e6),
                ("writes".into(), 1e6),
            ],
            extra: serde_json::Value::Null,
            histograms: Vec::new(),
            intervals: Vec::new(),
        };
        store
            .record_sample(cell, 0, true, "2025-01-01T00:00:00Z", 1.0, &warm)
            .unwrap();
        for (r, v) in values(bases[i], noise[i]).into_iter().enumerate() {
            let s = Sample {
                metrics: vec![
                    ("gbps".into(), v),
                    ("reads".into(), reads(i, r)),
                    ("writes".into(), 50.0),
                ],
                extra: serde_json::Value::Null,
                histograms: Vec::new(),
                intervals: Vec::new(),
            };
            store
                .record_sample(cell, r, false, "2025-01-01T00:00:01Z", 1.0, &s)
                .unwrap();
        }
    }
    store.finish_experiment(id, "done").unwrap();
    id
}

fn lab() -> Lab {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("results.db")).unwrap();
    // A: bulk over bufsize, pipe and memcpy over size.
    let groups = [
        Group::new("bulk", Params::new().with("iterations", "1000"))
            .axis(Axis::single("bufsize", BULK_SIZES)),
        Group::new("pipe", Params::new().with("bytes", "64M"))
            .axis(Axis::single("size", REF_SIZES)),
        Group::new("memcpy", Params::new().with("bytes", "64M"))
            .axis(Axis::single("size", REF_SIZES)),
    ];
    let plan = Plan::build(
        "sizes <&>",
        "Throughput against transfer size: \"bulk\" & <pipe>.",
        &groups,
        5,
        1,
        Order::Interleaved,
        "socklab run --bufsize 1K..64K",
    )
    .unwrap();
    let bases: Vec<f64> = BULK_BASE
        .iter()
        .chain(&PIPE_BASE)
        .chain(&MEMCPY_BASE)
        .copied()
        .collect();
    let a = record(&mut store, &plan, &bases, &vec![1.0; bases.len()]);
    // B: bulk strategies, the last one noisy.
    let group = Group::new(
        "bulk",
        Params::new()
            .with("nbufs", "4")
            .with("bufsize", "16K")
            .with("iterations", "100"),
    )
    .axis(Axis::single("strategy", STRATEGIES));
    let plan = Plan::build(
        "strategies",
        "",
        &[group],
        5,
        1,
        Order::Interleaved,
        "socklab run --strategy write,writev,single",
    )
    .unwrap();
    let b = record(&mut store, &plan, &STRATEGY_BASE, &[1.0, 1.0, 5.0]);
    store.set_fact(b, "sink_maxrss_kib", "1234").unwrap();
    Lab {
        _dir: dir,
        store,
        a,
        b,
    }
}

fn parse(html: &str) -> Document<'_> {
    let opt = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    Document::parse_with_options(html, opt)
        .unwrap_or_else(|e| panic!("the report is not well-formed XML: {e}"))
}

fn has_class(n: &Node<'_, '_>, class: &str) -> bool {
    n.attribute("class")
        .is_some_and(|c| c.split_whitespace().any(|x| x == class))
}

fn find<'a, 'i>(root: Node<'a, 'i>, tag: &str, class: &str) -> Vec<Node<'a, 'i>> {
    root.descendants()
        .filter(|n| n.has_tag_name(tag) && has_class(n, class))
        .collect()
}

/// All the text inside a node.
fn text(n: Node<'_, '_>) -> String {
    n.descendants()
        .filter(|d| d.is_text())
        .filter_map(|d| d.text())
        .collect()
}

fn section<'a, 'i>(doc: &'a Document<'i>, id: i64) -> Node<'a, 'i> {
    let want = format!("exp-{id}");
    doc.descendants()
        .find(|n| n.has_tag_name("section") && n.attribute("id") == Some(want.as_str()))
        .unwrap_or_else(|| panic!("no section {want}"))
}

fn charts<'a, 'i>(root: Node<'a, 'i>, kind: &str) -> Vec<Node<'a, 'i>> {
    find(root, "svg", "chart")
        .into_iter()
        .filter(|n| n.attribute("data-kind") == Some(kind))
        .collect()
}

/// A summary table as (headers, rows of cell texts, row classes).
type Rows = (Vec<String>, Vec<Vec<String>>, Vec<String>);

fn table_rows(table: Node<'_, '_>) -> Rows {
    let thead = table
        .children()
        .find(|n| n.has_tag_name("thead"))
        .expect("thead");
    let head_rows: Vec<Node<'_, '_>> = thead.children().filter(|n| n.has_tag_name("tr")).collect();
    assert_eq!(head_rows.len(), 1, "one header row");
    let headers: Vec<String> = head_rows[0]
        .children()
        .filter(|n| n.has_tag_name("th"))
        .map(text)
        .collect();
    let tbody = table
        .children()
        .find(|n| n.has_tag_name("tbody"))
        .expect("tbody");
    let mut rows = Vec::new();
    let mut classes = Vec::new();
    for tr in tbody.children().filter(|n| n.has_tag_name("tr")) {
        let cells: Vec<String> = tr
            .children()
            .filter(|n| n.has_tag_name("td"))
            .map(text)
            .collect();
        assert_eq!(cells.len(), headers.len(), "row {cells:?} vs {headers:?}");
        rows.push(cells);
        classes.push(tr.attribute("class").unwrap_or("").to_string());
    }
    (headers, rows, classes)
}

fn summary<'a, 'i>(sec: Node<'a, 'i>) -> Node<'a, 'i> {
    let t = find(sec, "table", "summary");
    assert_eq!(t.len(), 1, "one summary table per experiment");
    t[0]
}

#[test]
fn report_is_self_contained_well_formed_and_has_the_expected_charts_and_tables() {
    let lab = lab();
    let html = html_report(&lab.store, &[lab.a, lab.b], TITLE).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"),
        "{}",
        &html[..80]
    );
    let doc = parse(&html);
    let root = doc.root_element();
    assert!(root.has_tag_name("html"));
    assert_eq!(root.attribute("lang"), Some("en"));
    let head = root.children().find(|n| n.has_tag_name("head")).unwrap();
    assert!(head
        .children()
        .any(|n| n.has_tag_name("meta") && n.attribute("charset") == Some("utf-8")));
    let title = head.children().find(|n| n.has_tag_name("title")).unwrap();
    assert_eq!(title.text(), Some(TITLE), "the title is escaped and intact");
    let h1 = doc.descendants().find(|n| n.has_tag_name("h1")).unwrap();
    assert_eq!(text(h1), TITLE);
    assert!(head.children().any(|n| n.has_tag_name("style")));
    let generated = text(
        doc.descendants()
            .find(|n| has_class(n, "generated"))
            .unwrap(),
    );
    assert!(generated.contains(&format!("socklab {}", env!("CARGO_PKG_VERSION"))));
    assert!(generated.contains(&lab.store.path().display().to_string()));

    // Offline and script-free: no external reference, no JavaScript of any kind.
    for n in doc.descendants() {
        assert!(!n.has_tag_name("script"), "a <script> element");
        assert!(
            !n.has_tag_name("link") && !n.has_tag_name("img") && !n.has_tag_name("iframe"),
            "an element that may load something: {:?}",
            n.tag_name()
        );
        for a in n.attributes() {
            let v = a.value();
            assert!(
                !v.contains("http:") && !v.contains("https:") && !v.starts_with("//"),
                "external URL in {}={v}",
                a.name()
            );
            assert!(!a.name().starts_with("on"), "event handler {}", a.name());
            assert!(!v.contains("NaN") && !v.contains("inf"), "{}={v}", a.name());
        }
    }
    for bad in [
        "xmlns",
        "NaN",
        "javascript:",
        "url(",
        "@import",
        "http:",
        "https:",
    ] {
        assert!(!html.contains(bad), "the report contains {bad:?}");
    }

    // Host facts: one table, once, a row per fact.
    let host = experiment_stats(&lab.store, lab.a).unwrap().host;
    let host_tables = find(root, "table", "host");
    assert_eq!(host_tables.len(), 1);
    let (_, rows, _) = table_rows(host_tables[0]);
    assert_eq!(rows.len(), host.len());
    assert_eq!(rows[0], [host[0].0.clone(), host[0].1.clone()]);
    assert_eq!(
        doc.descendants()
            .filter(|n| n.has_tag_name("table"))
            .count(),
        6,
        "the first-screen table, host, two summaries, A's memcpy table (what each memcpy figure measures), B's facts"
    );

    // Experiment A: a bar chart per workload, one line chart, one strip chart.
    let a = section(&doc, lab.a);
    assert!(has_class(&a, "experiment"));
    let h2 = a.children().find(|n| n.has_tag_name("h2")).unwrap();
    assert_eq!(text(h2), format!("sizes <&> (experiment {})", lab.a));
    assert!(text(a).contains("Throughput against transfer size: \"bulk\" & <pipe>."));
    let code: Vec<String> = a
        .descendants()
        .filter(|n| n.has_tag_name("code"))
        .map(text)
        .collect();
    assert!(code.contains(&"socklab run --bufsize 1K..64K".to_string()));
    assert_eq!(find(a, "svg", "chart").len(), 5);
    let bars = charts(a, "bar");
    assert_eq!(bars.len(), 3, "bulk, pipe, memcpy");
    assert_eq!(charts(a, "line").len(), 1);
    assert_eq!(charts(a, "strip").len(), 1);
    for svg in find(root, "svg", "chart") {
        let t = svg.first_element_child().unwrap();
        assert!(t.has_tag_name("title") && !text(t).is_empty());
        assert!(
            svg.parent().is_some_and(|p| p.has_tag_name("figure")),
            "charts sit in figures"
        );
        let fig = svg.parent().unwrap();
        assert!(has_class(&fig, "chart"));
        assert!(fig.children().any(|n| n.has_tag_name("figcaption")));
    }
    for (chart, n) in bars.iter().zip([BULK_SIZES.len(), 4, 4]) {
        assert_eq!(find(*chart, "rect", "bar").len(), n);
        assert_eq!(find(*chart, "rect", "best").len(), 1);
    }
    let line = charts(a, "line")[0];
    assert_eq!(find(line, "circle", "point").len(), 15);
    assert_eq!(find(line, "polygon", "band").len(), 3);
    let line_text = text(line);
    assert!(line_text.contains("transfer size (bytes)"));
    assert!(line_text.contains("Gbit/s"));
    let series: Vec<&str> = find(line, "g", "series")
        .iter()
        .filter_map(|g| g.attribute("data-series"))
        .collect();
    assert_eq!(series, ["bulk", "pipe", "memcpy"]);
    let ticks: Vec<String> = find(line, "text", "tick-label")
        .into_iter()
        .map(text)
        .collect();
    for t in ["1K", "4K", "64K", "256K"] {
        assert!(ticks.contains(&t.to_string()), "{t} not in {ticks:?}");
    }
    let strip = charts(a, "strip")[0];
    assert_eq!(
        find(strip, "circle", "dot").len(),
        15 * 5,
        "warm-ups excluded"
    );
    assert_eq!(find(strip, "line", "mean").len(), 15);
    let (_, rows, _) = table_rows(summary(a));
    assert_eq!(rows.len(), 15);

    // Experiment B: one bar chart, no line chart, one strip chart, the facts.
    let b = section(&doc, lab.b);
    assert_eq!(find(b, "svg", "chart").len(), 2);
    assert_eq!(charts(b, "bar").len(), 1);
    assert_eq!(charts(b, "line").len(), 0, "no size-like key varies");
    assert_eq!(charts(b, "strip").len(), 1);
    assert_eq!(find(charts(b, "bar")[0], "rect", "bar").len(), 3);
    let (_, rows, _) = table_rows(summary(b));
    assert_eq!(rows.len(), 3);
    let labels: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        labels,
        ["strategy=write", "strategy=writev", "strategy=single"]
    );
    // Its facts: a table read in words and units (stored: sink_maxrss_kib = 1234).
    let facts = find(b, "table", "facts");
    assert_eq!(facts.len(), 1);
    let (headers, rows, _) = table_rows(facts[0]);
    assert_eq!(headers, ["fact", "value"]);
    assert_eq!(rows, [["sink: peak resident memory", "1234 KiB"]]);
    assert!(text(b).contains("Fixed parameters: "));
    let notes = find(b, "ul", "notes");
    assert_eq!(notes.len(), 1);
    let items: Vec<String> = notes[0]
        .children()
        .filter(|n| n.has_tag_name("li"))
        .map(text)
        .collect();
    assert!(items
        .iter()
        .any(|i| i.starts_with("Noisy") && i.contains("strategy=single")));

    // The footer explains the columns, like the Markdown report.
    let footer = doc
        .descendants()
        .find(|n| n.has_tag_name("footer"))
        .unwrap();
    assert!(text(footer)
        .trim_start()
        .starts_with("Columns: the mean of the primary metric (throughput"));
}

#[test]
fn statistics_shown_equal_those_recomputed_from_the_raw_values() {
    let lab = lab();
    let html = html_report(&lab.store, &[lab.a, lab.b], TITLE).unwrap();
    let doc = parse(&html);
    let (headers, rows, classes) = table_rows(summary(section(&doc, lab.a)));
    let col = |h: &str| headers.iter().position(|x| x == h).unwrap();
    let row = |label: &str| {
        rows.iter()
            .position(|r| r[0] == label)
            .unwrap_or_else(|| panic!("no row {label}"))
    };

    // Recompute one cell by hand: mean, Student-t 95% CI (t = 2.776 for 4 degrees of freedom).
    let i = 3; // bulk bufsize=8K
    let v = values(BULK_BASE[i], 1.0);
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let half = 2.776_445_105_197_799 * sd / n.sqrt();
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    let r = &rows[row("bulk bufsize=8K")];
    assert_eq!(r[col("n")], "5", "the warm-up is not counted");
    assert_eq!(r[col("Gbit/s")], num(mean));
    assert_eq!(r[col("±95% CI")], format!("±{}", num(half)));
    assert_eq!(r[col("sd")], num(sd));
    assert_eq!(r[col("min")], num(sorted[0]));
    assert_eq!(r[col("median")], num(sorted[2]));
    assert_eq!(r[col("max")], num(sorted[4]));
    assert_eq!(r[col("reads")], num(reads(i, 2)), "mean of 100(i+1)+r");
    // Its distance from the best bulk cell (32K).
    let best_mean = values(BULK_BASE[5], 1.0).iter().sum::<f64>() / n;
    let rel = format!("{:+.1}%", (mean - best_mean) / best_mean * 100.0);
    assert_eq!(r[col("vs best")], rel, "clearly significant: no (ns)");

    // The best cell of each workload is marked, and only it.
    let best: Vec<&str> = rows
        .iter()
        .zip(&classes)
        .filter(|(r, _)| r[col("vs best")] == "best")
        .map(|(r, c)| {
            assert_eq!(c, "best", "the best row is highlighted");
            r[0].as_str()
        })
        .collect();
    assert_eq!(
        best,
        ["bulk bufsize=32K", "pipe size=64K", "memcpy size=64K"]
    );
    assert_eq!(classes.iter().filter(|c| *c == "best").count(), 3);

    // The bar charts highlight the same cells, with the same means.
    let a = section(&doc, lab.a);
    let best_bars: Vec<String> = find(a, "rect", "best").into_iter().map(text).collect();
    assert_eq!(best_bars.len(), 3);
    assert!(
        best_bars[0].starts_with("bulk bufsize=32K: "),
        "{best_bars:?}"
    );
    for b in find(a, "rect", "best") {
        assert_eq!(b.attribute("fill"), Some(BEST_COLOUR));
    }
    let values_shown: Vec<String> = find(a, "text", "value").into_iter().map(text).collect();
    assert!(values_shown.contains(&num(mean)));
    assert!(!values_shown.contains(&num(WARMUP_GBPS)));

    // The notes name the fastest cells in bold.
    let strong: Vec<String> = a
        .descendants()
        .filter(|n| n.has_tag_name("strong"))
        .map(text)
        .collect();
    assert!(
        strong.contains(&"bulk bufsize=32K".to_string()),
        "{strong:?}"
    );
    let best_b = values(STRATEGY_BASE[1], 1.0).iter().sum::<f64>() / n;
    let b = section(&doc, lab.b);
    let li: Vec<String> = b
        .descendants()
        .filter(|n| n.has_tag_name("li"))
        .map(text)
        .collect();
    // writev has the top mean but is not significantly faster than single (noisy): no best.
    assert!(
        li.iter().any(|l| l.starts_with(
            "No bulk cell is significantly better than the others at this n (the closest difference would need ≈ "
        ) && l.ends_with(&format!(
            "the top mean is strategy=writev at {} Gbit/s, and it is significantly better only than strategy=write.",
            num(best_b)
        ))),
        "{li:?}"
    );
    assert!(
        !li.iter().any(|l| l.starts_with("Best bulk cell")),
        "{li:?}"
    );

    // The Markdown twin shows the same numbers.
    let md = socklab_lab::output::markdown_report(&lab.store, &[lab.a, lab.b], TITLE).unwrap();
    for r in &rows {
        assert!(md.contains(&format!("| {} |", r.join(" | "))), "{r:?}");
    }
    // And the same facts table.
    assert!(
        md.contains("Experiment facts:\n\n| fact | value |\n|---|---|\n| sink: peak resident memory | 1234 KiB |\n"),
        "{md}"
    );
}

/// `name` on PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Decodes a PNG as (width, height, RGB pixels).
fn decode(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let mut decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let samples = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks_exact(samples)
        .map(|p| match samples {
            1 | 2 => [p[0], p[0], p[0]],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    (info.width, info.height, px)
}

fn rgb(hex: &str) -> [u8; 3] {
    let c = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
    [c(1), c(3), c(5)]
}

fn count(px: &[[u8; 3]], colour: [u8; 3]) -> usize {
    px.iter()
        .filter(|p| (0..3).all(|i| p[i].abs_diff(colour[i]) <= 12))
        .count()
}

/// The report `html` as rendered by a headless chromium in a window `height` pixels tall, as
/// (width, height, RGB pixels); `None` when chromium is not installed (outside CI).
fn screenshot(html: &str, height: u32) -> Option<(u32, u32, Vec<[u8; 3]>)> {
    let Some(chromium) = which("chromium").or_else(|| which("chromium-browser")) else {
        if std::env::var_os("CI").is_some() {
            panic!("chromium is not installed: scripts/test must install Debian's chromium (apt-get install -y chromium) so the report is checked in a real browser");
        }
        socklab_sys::skip::skip(
            &format!("report_html screenshot ({height} px)"),
            "no chromium",
            "chromium not installed (apt-get install chromium)",
        );
        return None;
    };
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("index.html");
    std::fs::write(&page, html).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let shot = out.path().join("shot.png");
    // Chromium's chatter goes to a file: a pipe nobody reads could fill up and stall it.
    let log = out.path().join("chromium.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size=1280,{height}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::from(log_file.try_clone().unwrap()))
        .stderr(Stdio::from(log_file))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium.display()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        shot.is_file(),
        "chromium wrote no screenshot (status {status:?}, timed out: {}):\n{stderr}",
        status.is_none()
    );
    if let Some(keep) = std::env::var_os("SOCKLAB_KEEP_SCREENSHOT") {
        let keep = PathBuf::from(keep).with_extension(format!("{height}.png"));
        std::fs::copy(&shot, &keep).unwrap();
        std::fs::copy(&page, keep.with_extension("html")).unwrap();
    }
    Some(decode(&shot))
}

#[test]
fn a_real_browser_renders_the_charts() {
    let lab = lab();
    let html = html_report(&lab.store, &[lab.a, lab.b], TITLE).unwrap();
    let Some((w, h, px)) = screenshot(&html, 3000) else {
        return;
    };
    assert_eq!(w, 1280, "screenshot width");
    assert!(h >= 1000, "screenshot height {h}");
    // Thousands of pixels: the bars themselves, not only the lines and dots of these colours.
    let bar = count(&px, rgb(BAR_COLOUR));
    let best = count(&px, rgb(BEST_COLOUR));
    assert!(
        bar >= 5000,
        "only {bar} pixels of the bar colour {BAR_COLOUR}"
    );
    assert!(
        best >= 5000,
        "only {best} pixels of the best-bar colour {BEST_COLOUR}"
    );
    // The line chart's three series (bulk, pipe, memcpy) each show in their own colour.
    for (i, c) in PALETTE[..3].iter().enumerate() {
        let n = count(&px, rgb(c));
        assert!(n >= 100, "only {n} pixels of series {i}'s colour {c}");
    }

    // Items 5, 7 and 9 of issue 15, in a report of their own (the latency experiment first,
    // so its percentile chart is high on the page).
    let (_dir, store, c, d) = trust_lab();
    let html = html_report(&store, &[d, c], TITLE).unwrap();
    let doc = parse(&html);
    let trust = section(&doc, c);
    // Item 5: the lossy cell's interval is the log-scale one (above zero), the bar axis starts
    // at 0 and nothing (bar, whisker, cap) is drawn left of the zero line.
    let (headers, rows, _) = table_rows(summary(trust));
    let col = |h: &str| headers.iter().position(|x| x == h).unwrap();
    let lossy = rows.iter().find(|r| r[0] == "strategy=write").unwrap();
    let ci = &lossy[col("±95% CI")];
    assert!(
        !ci.starts_with('±') && !ci.contains('-'),
        "log-scale CI: {ci}"
    );
    let bar = charts(trust, "bar");
    assert_eq!(bar.len(), 1);
    let ticks = find(bar[0], "text", "tick-label");
    assert_eq!(text(ticks[0]), "0", "the bar axis starts at 0");
    let zero = attr_f64(ticks[0], "x");
    for r in find(bar[0], "rect", "bar") {
        assert!(attr_f64(r, "x") >= zero - 0.05, "a bar left of zero: {r:?}");
    }
    let whiskers: Vec<Node<'_, '_>> = find(bar[0], "g", "whisker")
        .into_iter()
        .flat_map(|g| g.children().filter(|n| n.has_tag_name("line")))
        .collect();
    // The lossy cell's interval reaches far past the means: clipped at the axis with an arrow
    // in place of its upper cap.
    let clipped = find(bar[0], "g", "clipped");
    assert_eq!(clipped.len(), 1, "the lossy cell's whisker is clipped");
    let arrows = find(clipped[0], "polygon", "clip-arrow");
    assert_eq!(
        whiskers.len() + arrows.len(),
        6,
        "two whiskers with two ends each"
    );
    for l in whiskers {
        for x in ["x1", "x2"] {
            assert!(
                attr_f64(l, x) >= zero - 0.05,
                "a whisker left of zero: {l:?}"
            );
        }
    }
    let tip = text(find(bar[0], "rect", "bar")[0]);
    assert!(
        tip.starts_with("strategy=write: ") && !tip.contains("CI -"),
        "{tip}"
    );
    // Item 7: n = 3 (+2 invalid); the invalid values are neither in the bar nor in the dots.
    let judged = rows.iter().find(|r| r[0] == "strategy=writev").unwrap();
    assert_eq!(judged[col("n")], "3 (+2 invalid)");
    assert_eq!(judged[col("Gbit/s")], num(5.0));
    let strip = charts(trust, "strip");
    assert_eq!(strip.len(), 1);
    let dots: Vec<String> = find(strip[0], "circle", "dot")
        .into_iter()
        .map(text)
        .collect();
    let judged_dots: Vec<&String> = dots
        .iter()
        .filter(|t| t.starts_with("strategy=writev:"))
        .collect();
    assert_eq!(judged_dots.len(), 3, "{dots:?}");
    assert!(
        dots.iter()
            .all(|t| !t.ends_with(&format!("= {}", num(INVALID_GBPS)))),
        "an invalid repetition is drawn: {dots:?}"
    );
    assert!(!text(trust).contains(&num(INVALID_GBPS)));
    // Item 9: the round-trip percentiles on a nines axis, with the band the caption names.
    let latency = section(&doc, d);
    let nines = charts(latency, "percentile");
    assert_eq!(nines.len(), 1);
    let labels: Vec<String> = find(nines[0], "g", "x-ticks")
        .into_iter()
        .flat_map(|g| find(g, "text", "tick-label"))
        .map(text)
        .collect();
    assert_eq!(labels, ["p50", "p90", "p99", "p99.9", "p99.99"]);
    let bands = find(nines[0], "polygon", "band");
    assert_eq!(bands.len(), 2, "one band per cell");
    assert_eq!(bands[0].attribute("fill"), Some(PALETTE[0]));
    assert_eq!(bands[0].attribute("fill-opacity"), Some("0.2"));
    let caption = text(
        nines[0]
            .parent()
            .unwrap()
            .children()
            .find(|n| n.has_tag_name("figcaption"))
            .unwrap(),
    );
    assert!(
        caption.contains("shaded band: lowest to highest value of that percentile"),
        "{caption}"
    );
    assert!(
        caption.contains("the time axis is logarithmic"),
        "{caption}"
    );
    let Some((w, _, px)) = screenshot(&html, 4000) else {
        return;
    };
    assert_eq!(w, 1280);
    // The band shows: thousands of pixels of the first series' colour at 20% on white.
    let tint = on_white(PALETTE[0], 0.2);
    let n = count_exact(&px, tint);
    println!("band tint pixels: {n}");
    assert!(n >= 3000, "only {n} pixels of the band's tint {tint:?}");
    // The lines of both series show in their colours.
    for c in &PALETTE[..2] {
        let n = count(&px, rgb(c));
        assert!(n >= 300, "only {n} pixels of series colour {c}");
    }
}

#[test]
fn bar_chart_axes_of_a_positive_metric_never_start_below_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("results.db")).unwrap();
    let group = Group::new("bulk", Params::new().with("iterations", "1000"))
        .axis(Axis::single("bufsize", ["1K", "2K"]));
    let plan = Plan::build("spread", "", &[group], 3, 0, Order::Interleaved, "t").unwrap();
    let (id, cells) = store
        .begin_experiment(&plan, &socklab_sys::host::host_facts())
        .unwrap();
    // A lossy cell: two collapsed repetitions and a good one; the symmetric interval would
    // reach about -50 Gbit/s.
    for (cell, xs) in cells.iter().zip([[0.2, 0.3, 40.0], [5.0, 5.1, 4.9]]) {
        for (r, v) in xs.into_iter().enumerate() {
            let s = Sample {
                metrics: vec![("gbps".into(), v)],
                extra: serde_json::Value::Null,
                histograms: Vec::new(),
                intervals: Vec::new(),
            };
            store
                .record_sample(*cell, r, false, "2025-01-01T00:00:01Z", 1.0, &s)
                .unwrap();
        }
    }
    store.finish_experiment(id, "done").unwrap();
    let html = html_report(&store, &[id], TITLE).unwrap();
    let doc = parse(&html);
    let bars = charts(section(&doc, id), "bar");
    assert_eq!(bars.len(), 1);
    let ticks: Vec<f64> = find(bars[0], "text", "tick-label")
        .into_iter()
        .map(|t| text(t).parse::<f64>().unwrap())
        .collect();
    assert!(!ticks.is_empty());
    assert!(ticks.iter().all(|&t| t >= 0.0), "axis ticks {ticks:?}");
    for r in find(bars[0], "rect", "bar") {
        let tip = text(r);
        assert!(!tip.contains("CI -"), "{tip}");
    }
}

/// Issue 17 item 5: each cell with a time series gets flent's charts — throughput and RTT over
/// time for bulk (the three repetitions overlaid, light, under their mean; the omitted start
/// shaded and named), requests/s and p99 over time for load — and a real browser shows them.
#[test]
fn time_series_charts_overlay_the_repetitions_and_shade_the_omitted_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("results.db")).unwrap();
    let (bulk, load) = series::series_lab(&mut store);
    let html = html_report(&store, &[bulk, load], TITLE).unwrap();
    let doc = parse(&html);
    let b = section(&doc, bulk);
    let time = charts(b, "time");
    let titles: Vec<String> = time
        .iter()
        .map(|c| text(c.first_element_child().unwrap()))
        .collect();
    assert_eq!(
        titles,
        ["Throughput over time: bulk", "RTT over time: bulk"]
    );
    for c in &time {
        assert_eq!(
            find(*c, "polyline", "rep").len(),
            3,
            "one light line per repetition"
        );
        assert_eq!(find(*c, "polyline", "line").len(), 1, "their mean");
        assert_eq!(find(*c, "rect", "omitted").len(), 1);
        assert!(
            text(*c).contains("omitted: the first 1.00 s"),
            "{}",
            text(*c)
        );
        let caption = text(
            c.parent()
                .unwrap()
                .children()
                .find(|n| n.has_tag_name("figcaption"))
                .unwrap(),
        );
        assert!(
            caption.contains("each of the 3 measured repetitions"),
            "{caption}"
        );
        assert!(
            caption.contains("shaded: the omitted start (the first 1.00 s"),
            "{caption}"
        );
    }
    assert!(text(time[1]).contains("smoothed RTT (µs)"));
    let l = section(&doc, load);
    let time = charts(l, "time");
    let titles: Vec<String> = time
        .iter()
        .map(|c| text(c.first_element_child().unwrap()))
        .collect();
    assert_eq!(
        titles,
        [
            "Requests per second over time: load",
            "p99 response time over time: load"
        ]
    );
    assert!(time.iter().all(|c| find(*c, "rect", "omitted").is_empty()));
    assert!(
        time.iter().all(|c| find(*c, "polyline", "rep").is_empty()),
        "one repetition: one bold line"
    );
    let Some((w, _, px)) = screenshot(&html, 3400) else {
        return;
    };
    assert_eq!(w, 1280);
    // The shaded start shows: thousands of pixels of its grey tint on white.
    let tint = on_white("#888888", 0.18);
    let n = count_exact(&px, tint);
    println!("omitted tint pixels: {n}");
    assert!(
        n >= 20_000,
        "only {n} pixels of the omitted start's tint {tint:?}"
    );
    // The mean lines in the first series colour.
    let n = count(&px, rgb(PALETTE[0]));
    assert!(
        n >= 2000,
        "only {n} pixels of the lines' colour {}",
        PALETTE[0]
    );
}

/// Issue 28 part 1: at 1280×800, the first screen shows the table of headline figures and
/// seed verdicts, whole (its frame's top and bottom edges both drawn), right under the title
/// and before the table of contents and the host.
#[test]
fn the_first_screen_shows_the_findings() {
    let (_dir, store, ids) = glance::quick_lab();
    assert!(ids.len() >= 9, "{} experiments", ids.len());
    let html = html_report(&store, &ids, TITLE).unwrap();
    let doc = parse(&html);
    let table = find(doc.root(), "table", "glance");
    assert_eq!(table.len(), 1, "one first-screen table");
    let (headers, rows, _) = table_rows(table[0]);
    assert_eq!(headers[0], "experiment or seed finding");
    assert!(
        rows.len() <= socklab_lab::glance::MAX_ROWS,
        "{} rows",
        rows.len()
    );
    // Every experiment heads a row linked to its section, with its headline figure.
    let links: Vec<String> = table[0]
        .descendants()
        .filter(|n| n.has_tag_name("a"))
        .filter_map(|n| n.attribute("href").map(str::to_string))
        .collect();
    for id in &ids {
        assert!(links.contains(&format!("#exp-{id}")), "{links:?}");
        section(&doc, *id);
    }
    let bufsize = rows.iter().find(|r| r[0].starts_with("bufsize ")).unwrap();
    assert!(bufsize[1].contains(" Gbit/s "), "{bufsize:?}");
    assert!(
        bufsize[2].contains("top mean") || bufsize[2].contains("best"),
        "{bufsize:?}"
    );
    // Seed findings with their verdicts, each linked to an existing seed block.
    let verdicts = [
        "reproduced",
        "contradicted",
        "not reproduced",
        "not comparable",
    ];
    assert!(
        rows.iter().any(|r| verdicts.contains(&r[1].as_str())),
        "{rows:?}"
    );
    for l in links.iter().filter(|l| l.starts_with("#seed-")) {
        let want = &l[1..];
        assert!(
            doc.descendants().any(|n| n.attribute("id") == Some(want)),
            "no target for {l}"
        );
    }
    let counts = find(doc.root(), "p", "verdict-counts");
    assert!(
        text(counts[0]).starts_with("Seed findings: "),
        "{}",
        text(counts[0])
    );
    // In document order: the table before the table of contents and the host.
    let pos = |n: Node<'_, '_>| n.range().start;
    let toc = find(doc.root(), "nav", "toc")[0];
    let host = doc
        .descendants()
        .find(|n| n.has_tag_name("h2") && text(*n) == "Host")
        .unwrap();
    assert!(pos(table[0]) < pos(toc) && pos(toc) < pos(host));

    let Some((w, h, px)) = screenshot(&html, 800) else {
        return;
    };
    assert_eq!((w, h), (1280, 800), "screenshot size");
    // The table's frame: pixel rows where a long run of its colour is drawn (its top and
    // bottom edges); both must be in the first 800 pixels.
    let frame = rgb(socklab_lab::glance::GLANCE_COLOUR);
    let edges: Vec<usize> = (0..h as usize)
        .filter(|y| count(&px[y * w as usize..(y + 1) * w as usize], frame) >= 400)
        .collect();
    assert!(
        !edges.is_empty(),
        "no frame of the first-screen table in the first screen"
    );
    let (top, bottom) = (edges[0], *edges.last().unwrap());
    println!("first-screen table from y={top} to y={bottom} of {h}");
    assert!(
        bottom > top + 100,
        "only one edge of the table's frame in the first screen (rows {edges:?}): it does not fit"
    );
}
