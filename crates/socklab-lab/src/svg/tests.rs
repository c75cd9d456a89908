//! Tests of the SVG charts.

use super::strip::jitter;
use super::*;

fn parse(svg: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"))
}

fn count(doc: &roxmltree::Document<'_>, tag: &str, class: &str) -> usize {
    doc.descendants()
        .filter(|n| {
            n.has_tag_name(tag)
                && n.attribute("class")
                    .is_some_and(|c| c.split_whitespace().any(|x| x == class))
        })
        .count()
}

fn assert_root(doc: &roxmltree::Document<'_>, kind: &str, title: &str) {
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.attribute("class"), Some("chart"));
    assert_eq!(root.attribute("data-kind"), Some(kind));
    assert_eq!(root.attribute("width"), Some("100%"));
    assert!(root.attribute("viewBox").unwrap().starts_with("0 0 1200 "));
    assert!(root
        .attribute("style")
        .unwrap()
        .contains("max-width:1200px"));
    let t = root.first_element_child().unwrap();
    assert!(t.has_tag_name("title"));
    assert_eq!(t.text(), Some(title));
}

fn assert_finite(svg: &str) {
    assert!(!svg.contains("NaN"), "{svg}");
    assert!(!svg.contains("inf"), "{svg}");
    assert!(!svg.contains("xmlns"), "{svg}");
    assert!(!svg.contains("http"), "{svg}");
}

fn bar_rows() -> Vec<BarRow> {
    vec![
        BarRow {
            label: "strategy=write".into(),
            mean: 3.2,
            ci: Some((3.0, 3.4)),
            best: false,
        },
        BarRow {
            label: "strategy=writev".into(),
            mean: 7.9,
            ci: Some((7.1, 8.7)),
            best: true,
        },
        BarRow {
            label: "strategy=single".into(),
            mean: 5.0,
            ci: None,
            best: false,
        },
        BarRow {
            label: "broken".into(),
            mean: f64::NAN,
            ci: Some((f64::NEG_INFINITY, f64::INFINITY)),
            best: false,
        },
    ]
}

#[test]
fn bar_chart_draws_one_bar_per_finite_row_with_whiskers_and_best() {
    let svg = bar_chart("Throughput", &bar_rows(), "Gbit/s (mean, 95% CI)");
    assert_finite(&svg);
    let doc = parse(&svg);
    assert_root(&doc, "bar", "Throughput");
    assert_eq!(count(&doc, "rect", "bar"), 3, "the NaN row is skipped");
    assert_eq!(count(&doc, "rect", "best"), 1);
    assert_eq!(count(&doc, "line", "cap"), 4, "two whiskers with two caps");
    let best = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("bar best"))
        .unwrap();
    assert_eq!(best.attribute("fill"), Some(BEST_COLOUR));
    let values: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("value"))
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(values, ["3.200", "7.900", "5"]);
    assert!(svg.contains("Gbit/s (mean, 95% CI)"));
    // The longest bar (with its CI) fits the plot.
    let w: f64 = best.attribute("width").unwrap().parse().unwrap();
    let x: f64 = best.attribute("x").unwrap().parse().unwrap();
    assert!(x + w <= WIDTH - 80.0);
}

#[test]
fn long_labels_are_truncated_with_an_ellipsis() {
    let long = "x".repeat(100);
    let svg = bar_chart(
        "t",
        &[BarRow {
            label: long.clone(),
            mean: 1.0,
            ci: None,
            best: false,
        }],
        "v",
    );
    let doc = parse(&svg);
    let label = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("row-label"))
        .unwrap();
    let shown = label.text().unwrap();
    assert_eq!(shown.chars().count(), MAX_LABEL_CHARS);
    assert!(shown.ends_with('…'));
    // The full label stays available as a tooltip.
    assert!(svg.contains(&long));
}

#[test]
fn text_is_escaped() {
    let nasty = "a<b>&\"c\"'d'";
    let rows = [BarRow {
        label: nasty.into(),
        mean: 1.0,
        ci: None,
        best: true,
    }];
    for svg in [
        bar_chart(nasty, &rows, nasty),
        line_chart(
            nasty,
            &[Series {
                name: nasty.into(),
                points: vec![(1.0, 1.0, None), (2.0, 2.0, None)],
            }],
            nasty,
            nasty,
            false,
        ),
        strip_chart(
            nasty,
            &[StripRow {
                label: nasty.into(),
                values: vec![1.0, 2.0],
            }],
            nasty,
        ),
    ] {
        let doc = parse(&svg);
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;"));
        assert_eq!(
            doc.root_element().first_element_child().unwrap().text(),
            Some(nasty)
        );
        assert!(doc
            .descendants()
            .any(|n| n.text() == Some(nasty) && n.attribute("class") == Some("chart-title")));
    }
}

#[test]
fn line_chart_has_a_point_per_finite_value_bands_and_a_legend() {
    let series = vec![
        Series {
            name: "bulk".into(),
            points: vec![
                (4096.0, 5.0, Some((4.5, 5.5))),
                (1024.0, 2.0, Some((1.8, 2.2))),
                (65536.0, 9.0, Some((8.0, 10.0))),
                (2048.0, f64::NAN, None),
            ],
        },
        Series {
            name: "pipe".into(),
            points: vec![(1024.0, 20.0, Some((19.0, 21.0))), (8192.0, 30.0, None)],
        },
        Series {
            name: "nothing".into(),
            points: vec![(f64::INFINITY, 1.0, None)],
        },
    ];
    let svg = line_chart("T", &series, "transfer size (bytes)", "Gbit/s", true);
    assert_finite(&svg);
    let doc = parse(&svg);
    assert_root(&doc, "line", "T");
    assert_eq!(count(&doc, "circle", "point"), 5);
    assert_eq!(
        count(&doc, "polygon", "band"),
        1,
        "pipe has one CI point only"
    );
    assert_eq!(count(&doc, "polyline", "line"), 2);
    let band = doc
        .descendants()
        .find(|n| n.has_tag_name("polygon"))
        .unwrap();
    assert_eq!(band.attribute("fill-opacity"), Some("0.2"));
    assert_eq!(band.attribute("points").unwrap().split(' ').count(), 6);
    let ticks: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("tick-label"))
        .filter_map(|n| n.text())
        .collect();
    for t in ["1K", "2K", "4K", "8K", "16K", "32K", "64K"] {
        assert!(ticks.contains(&t), "{t} missing from {ticks:?}");
    }
    assert!(svg.contains("transfer size (bytes)") && svg.contains(">Gbit/s<"));
    // A legend names each drawn series, in its colour.
    assert!(svg.contains(">bulk<") && svg.contains(">pipe<"));
    assert!(svg.contains(PALETTE[0]) && svg.contains(PALETTE[1]));
    // A single series needs no legend.
    let one = line_chart("T", &series[..1], "x", "y", false);
    assert_eq!(count(&parse(&one), "g", "legend"), 0);
}

#[test]
fn strip_chart_draws_a_dot_per_run_and_a_mean_tick_per_row() {
    let rows = vec![
        StripRow {
            label: "a".into(),
            values: vec![1.0, 1.1, 0.9, 1.05, 0.95],
        },
        StripRow {
            label: "b".into(),
            values: vec![2.0, f64::NAN, 2.2],
        },
        StripRow {
            label: "c".into(),
            values: vec![],
        },
    ];
    let svg = strip_chart("runs", &rows, "Gbit/s");
    assert_finite(&svg);
    let doc = parse(&svg);
    assert_root(&doc, "strip", "runs");
    assert_eq!(count(&doc, "circle", "dot"), 7);
    assert_eq!(count(&doc, "line", "mean"), 2);
    // Jitter is deterministic and small.
    assert_eq!(svg, strip_chart("runs", &rows, "Gbit/s"));
    assert!((0..20).all(|i| jitter(i).abs() <= 6.0));
    // Equal values still get distinct dots.
    assert_ne!(jitter(0), jitter(1));
}

#[test]
fn ticks_are_nice_numbers_covering_the_range() {
    for (lo, hi) in [
        (0.0, 7.3),
        (0.0, 0.037),
        (-3.0, 120.0),
        (2.5, 2.5),
        (0.0, 0.0),
        (1e-3, 1.7e9),
        (13.0, 14.2),
        (f64::NAN, 1.0),
    ] {
        let (ticks, step) = nice_ticks(lo, hi, 8);
        assert!(ticks.len() >= 2 && ticks.len() <= 20, "{lo} {hi} {ticks:?}");
        let mantissa = step / 10f64.powf((step.log10() + 1e-9).floor());
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
            "step {step}"
        );
        for t in &ticks {
            let k = t / step;
            assert!(
                (k - k.round()).abs() < 1e-6,
                "{t} is not a multiple of {step}"
            );
        }
        if lo.is_finite() {
            assert!(ticks[0] <= lo.min(hi) && *ticks.last().unwrap() >= hi);
        }
    }
    let (t, step) = nice_ticks(0.0, 1.0, 5);
    let labels: Vec<String> = t.iter().map(|v| tick_label(*v, step)).collect();
    assert_eq!(labels, ["0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
    let (t, _) = nice_ticks(0.0, 7.3, 8);
    assert_eq!(t, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
}

#[test]
fn sizes_are_labelled_in_1024_multiples() {
    assert_eq!(size_label(512.0), "512");
    assert_eq!(size_label(1024.0), "1K");
    assert_eq!(size_label(1536.0), "1.5K");
    assert_eq!(size_label(65536.0), "64K");
    assert_eq!(size_label(1048576.0), "1M");
    assert_eq!(size_label(3.0 * 1024f64.powi(3)), "3G");
    assert_eq!(size_label(f64::NAN), "-");
}

#[test]
fn empty_input_gives_a_valid_chart_saying_no_data() {
    let nan_bar = [BarRow {
        label: "x".into(),
        mean: f64::NAN,
        ci: None,
        best: false,
    }];
    for (kind, svg) in [
        ("bar", bar_chart("e", &[], "v")),
        ("bar", bar_chart("e", &nan_bar, "v")),
        ("line", line_chart("e", &[], "x", "y", true)),
        (
            "line",
            line_chart(
                "e",
                &[Series {
                    name: "s".into(),
                    points: vec![(0.0, 1.0, None)],
                }],
                "x",
                "y",
                true,
            ),
        ),
        ("strip", strip_chart("e", &[], "v")),
    ] {
        let doc = parse(&svg);
        assert_root(&doc, kind, "e");
        assert!(svg.contains("no data"), "{svg}");
        assert_finite(&svg);
    }
}

/// The text of the elements of `class` inside the group of class `group`.
fn texts_in<'a>(doc: &'a roxmltree::Document<'_>, group: &str, class: &str) -> Vec<&'a str> {
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(group))
        .flat_map(|g| g.descendants())
        .filter(|n| n.attribute("class") == Some(class))
        .filter_map(|n| n.text())
        .collect()
}

/// x of each tick mark of the x axis of a percentile chart.
fn x_tick_positions(doc: &roxmltree::Document<'_>) -> Vec<f64> {
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("x-ticks"))
        .flat_map(|g| g.descendants())
        .filter(|n| n.has_tag_name("line") && n.attribute("class") == Some("tick"))
        .map(|n| n.attribute("x1").unwrap().parse().unwrap())
        .collect()
}

/// A latency series up to p99.99, banded or not.
fn rtt_series(name: &str, scale: f64, banded: bool) -> Series {
    let points = [0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999]
        .iter()
        .enumerate()
        .map(|(i, &q)| {
            let v = scale * (10.0 + i as f64);
            (q, v, banded.then_some((v * 0.9, v * 1.1)))
        })
        .collect();
    Series {
        name: name.into(),
        points,
    }
}

/// Item 9 of issue 15: the percentile axis is labelled in percentiles (p50 … p99.99, as
/// HdrHistogram's plotter), evenly spaced per nine, not as bare numbers 0, 1, 2, 3, 4.
#[test]
fn percentile_chart_has_a_nines_axis_labelled_p50_to_p9999() {
    assert!((nines(0.5) - std::f64::consts::LOG10_2).abs() < 1e-12);
    assert!((nines(0.99) - 2.0).abs() < 1e-9);
    assert_eq!(percentile_label(0.5), "p50");
    assert_eq!(percentile_label(0.75), "p75");
    assert_eq!(percentile_label(0.999), "p99.9");
    assert_eq!(percentile_label(0.9999), "p99.99");
    let svg = percentile_chart("RTT", &[rtt_series("a", 1.0, false)], "µs", "spread");
    assert_finite(&svg);
    let doc = parse(&svg);
    assert_root(&doc, "percentile", "RTT");
    assert_eq!(
        texts_in(&doc, "x-ticks", "tick-label"),
        ["p50", "p90", "p99", "p99.9", "p99.99"]
    );
    let x = x_tick_positions(&doc);
    let nine = x[2] - x[1];
    assert!(nine > 100.0, "{x:?}");
    for w in x.windows(2).skip(1) {
        assert!((w[1] - w[0] - nine).abs() < 0.5, "one nine apart: {x:?}");
    }
    assert!(
        ((x[1] - x[0]) / nine - (1.0 - std::f64::consts::LOG10_2)).abs() < 0.01,
        "p50 sits 0.7 nines before p90: {x:?}"
    );
    assert_eq!(count(&doc, "circle", "point"), 7);
    assert_eq!(count(&doc, "polyline", "line"), 1);
    // Values 10..16: a linear axis from 0.
    assert_eq!(texts_in(&doc, "y-axis", "tick-label")[0], "0");
    // The axis stops at the last percentile the data reaches.
    let short = Series {
        name: "s".into(),
        points: vec![(0.5, 1.0, None), (0.9, 2.0, None), (0.99, 3.0, None)],
    };
    let doc2 = percentile_chart("RTT", &[short], "µs", "spread");
    assert_eq!(
        texts_in(&parse(&doc2), "x-ticks", "tick-label"),
        ["p50", "p90", "p99"]
    );
}

/// Item 9 of issue 15: the band a percentile chart's legend names is drawn, and a chart
/// without band does not name one.
#[test]
fn percentile_chart_draws_the_band_its_legend_names_and_only_then_names_it() {
    let banded = percentile_chart(
        "RTT",
        &[rtt_series("a", 1.0, true)],
        "µs",
        "min–max over repetitions",
    );
    let doc = parse(&banded);
    assert_eq!(count(&doc, "polygon", "band"), 1);
    let band = doc
        .descendants()
        .find(|n| n.has_tag_name("polygon"))
        .unwrap();
    assert_eq!(band.attribute("fill"), Some(PALETTE[0]));
    assert_eq!(band.attribute("points").unwrap().split(' ').count(), 14);
    assert_eq!(count(&doc, "rect", "band-swatch"), 1);
    assert!(texts_in(&doc, "legend", "legend-label").contains(&"min–max over repetitions"));
    assert!(banded.contains("a p99: 14 (min–max over repetitions: 12.60 to 15.40)"));
    // No band: no polygon, and neither legend nor tooltips mention one.
    let bare = percentile_chart(
        "RTT",
        &[rtt_series("a", 1.0, false)],
        "µs",
        "min–max over repetitions",
    );
    let doc = parse(&bare);
    assert_eq!(count(&doc, "polygon", "band"), 0);
    assert_eq!(count(&doc, "rect", "band-swatch"), 0);
    assert!(!bare.contains("min–max"), "{bare}");
    // A band at one percentile only: a shaded bar there, and the legend names it.
    let mut lone = rtt_series("a", 1.0, false);
    lone.points[0].2 = Some((9.0, 11.0));
    let lone = percentile_chart("RTT", &[lone], "µs", "spread");
    let doc = parse(&lone);
    assert_eq!(count(&doc, "polygon", "band"), 0);
    assert_eq!(count(&doc, "rect", "band"), 1);
    assert_eq!(count(&doc, "rect", "band-swatch"), 1);
}

/// Item 9 of issue 15: latencies spanning decades get a log axis (p50 and p99.99 both
/// readable); a narrow span keeps a linear axis from 0.
#[test]
fn percentile_chart_uses_a_log_time_axis_for_a_wide_span() {
    let wide = [rtt_series("a", 1.0, false), rtt_series("b", 300.0, false)];
    assert!(nines_log_y(&wide));
    assert!(!nines_log_y(&[rtt_series("a", 1.0, true)]));
    let svg = percentile_chart("RTT", &wide, "round-trip time (µs)", "spread");
    assert_finite(&svg);
    let doc = parse(&svg);
    let axis = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("y-axis"))
        .unwrap();
    assert_eq!(axis.attribute("data-scale"), Some("log"));
    let ticks = texts_in(&doc, "y-axis", "tick-label");
    assert_eq!(ticks.first(), Some(&"10"), "{ticks:?}");
    assert_eq!(ticks.last(), Some(&"5000"), "{ticks:?}");
    for t in ["20", "100", "1000"] {
        assert!(ticks.contains(&t), "{t} not in {ticks:?}");
    }
    assert!(svg.contains("round-trip time (µs), log scale"));
    // Every point lies inside the plot (between the top and bottom gridlines).
    let ys: Vec<f64> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("point"))
        .map(|n| n.attribute("cy").unwrap().parse().unwrap())
        .collect();
    assert_eq!(ys.len(), 14);
    assert!(ys.iter().all(|y| (52.0..=452.0).contains(y)), "{ys:?}");
    assert_eq!(count(&doc, "g", "legend"), 1, "two series: a legend");
    assert_eq!(count(&doc, "rect", "band-swatch"), 0);
}

/// Item 9 of issue 15: a line chart's legend offers "95% CI" only when a CI is drawn.
#[test]
fn line_chart_legend_names_a_ci_only_when_one_is_drawn() {
    let series: Vec<Series> = ["a", "b"]
        .iter()
        .map(|n| Series {
            name: n.to_string(),
            points: vec![(1.0, 1.0, None), (2.0, 2.0, None)],
        })
        .collect();
    let svg = line_chart("T", &series, "x", "y", false);
    assert_eq!(count(&parse(&svg), "g", "legend"), 1);
    assert!(!svg.contains("95% CI"), "{svg}");
    let mut with = series.clone();
    with[1].points[0].2 = Some((0.5, 1.5));
    let svg = line_chart("T", &with, "x", "y", false);
    assert!(svg.contains("95% CI"));
    assert_eq!(count(&parse(&svg), "rect", "band-swatch"), 1);
}

/// Issue 17 item 5: the time-series chart draws each line as steps (a rate over the interval)
/// or through the interval ends (an instant reading), the faded repetitions under the bold
/// mean, the omitted start as a shaded, labelled band from 0, and skips what is not finite.
#[test]
fn time_chart_draws_steps_faded_repetitions_and_the_omitted_start() {
    let rep = |k: f64| TimeLine {
        name: format!("stream 0 up, rep {k}"),
        colour: 0,
        faded: true,
        points: vec![
            (0.0, 0.1, 10.0 * k),
            (0.1, 0.2, 12.0 * k),
            (0.2, 0.25, f64::NAN),
        ],
    };
    let mean = TimeLine {
        name: "stream 0 up: mean of 2 repetitions".into(),
        colour: 0,
        faded: false,
        points: vec![(0.0, 0.1, 15.0), (0.1, 0.2, 18.0)],
    };
    let shade = Shade {
        end: 0.1,
        label: "omitted: the first 0.10 s".into(),
    };
    let svg = time_chart(
        "Throughput over time: c",
        &[rep(1.0), rep(2.0), mean],
        Some(&shade),
        "Gbit/s",
        true,
    );
    assert_finite(&svg);
    let doc = parse(&svg);
    assert_root(&doc, "time", "Throughput over time: c");
    assert_eq!(count(&doc, "polyline", "rep"), 2);
    assert_eq!(count(&doc, "polyline", "line"), 1);
    let lines: Vec<roxmltree::Node<'_, '_>> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .collect();
    // The repetitions come first (drawn under the mean), light and thin.
    assert_eq!(lines[0].attribute("class"), Some("rep"));
    assert_eq!(lines[0].attribute("stroke-opacity"), Some("0.35"));
    assert_eq!(lines[2].attribute("class"), Some("line"));
    // Steps: two vertices per interval; the NaN interval is skipped.
    assert_eq!(lines[0].attribute("points").unwrap().split(' ').count(), 4);
    // The omitted start: a rect from x(0) to x(0.1), its label, and a legend entry.
    let rect = doc
        .descendants()
        .find(|n| n.has_tag_name("rect") && n.attribute("class") == Some("omitted"))
        .expect("the shaded start");
    let x0: f64 = rect.attribute("x").unwrap().parse().unwrap();
    let w: f64 = rect.attribute("width").unwrap().parse().unwrap();
    assert_eq!(x0, 86.0, "from the y axis, time 0");
    assert_eq!(w, 545.0, "0.1 s of an axis of 0 to 0.2 s over 1090 units");
    assert!(svg.contains(">omitted: the first 0.10 s</text>"));
    let legend = texts_in(&doc, "legend", "legend-label");
    assert_eq!(
        legend,
        [
            "stream 0 up: mean of 2 repetitions",
            "single repetitions",
            "omitted"
        ]
    );
    // Instant readings: one vertex per interval, at its end; no shade without omit.
    let svg = time_chart("RTT", &[rep(1.0)], None, "µs", false);
    let doc = parse(&svg);
    let pts = doc
        .descendants()
        .find(|n| n.has_tag_name("polyline"))
        .unwrap()
        .attribute("points")
        .unwrap()
        .split(' ')
        .count();
    assert_eq!(pts, 2);
    assert_eq!(count(&doc, "rect", "omitted"), 0);
    assert!(time_chart("T", &[], None, "y", true).contains("no data"));
}
