//! The latency percentile charts of the HTML report: round-trip time read from the stored
//! HDR histograms (pingpong), response time from the load workload's stored percentiles, both
//! on a "nines" axis with the spread across repetitions as the band.

use crate::model::stats::{CellStats, ExperimentStats};
use crate::summary::bucket_quantile;
use crate::svg::{self, figure, Point, Series};

/// The quantiles drawn from a histogram.
pub const QUANTILES: [f64; 7] = [0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999];

/// What the band of a percentile chart is, in its legend and tooltips.
pub const BAND_LABEL: &str = "min–max over repetitions";

/// The load workload's stored response-time percentiles, as `(metric, quantile)`.
const LOAD_PERCENTILES: [(&str, f64); 4] = [
    ("lat_p50_us", 0.5),
    ("lat_p90_us", 0.9),
    ("lat_p99_us", 0.99),
    ("lat_p999_us", 0.999),
];

/// Whether `total` values resolve quantile `q`: the median of any values, a higher quantile
/// only with at least `1 / (1 - q)` values (p99 needs 100), else it is just the maximum.
pub fn resolves(q: f64, total: u64) -> bool {
    total > 0 && (q <= 0.5 || (1.0 - q) * total as f64 >= 1.0 - 1e-9)
}

/// The percentile series of one cell's histogram, values divided by `per_unit`: each point is
/// the quantile of the histogram pooled over the repetitions (when the pool resolves it), its
/// band the lowest and highest of that quantile over the single repetitions (when there are
/// at least two and each resolves it).
pub fn histogram_series(
    name: &str,
    pooled: &[(u64, u64)],
    reps: &[Vec<(u64, u64)>],
    per_unit: f64,
) -> Option<Series> {
    let total: u64 = pooled.iter().map(|b| b.1).sum();
    let points: Vec<Point> = QUANTILES
        .iter()
        .filter(|q| resolves(**q, total))
        .filter_map(|&q| {
            let v = bucket_quantile(pooled, q)? as f64 / per_unit;
            let per_rep: Vec<f64> = reps
                .iter()
                .filter(|h| resolves(q, h.iter().map(|b| b.1).sum()))
                .filter_map(|h| bucket_quantile(h, q))
                .map(|x| x as f64 / per_unit)
                .collect();
            let band = (reps.len() >= 2 && per_rep.len() == reps.len()).then(|| {
                per_rep
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                        (a.min(x), b.max(x))
                    })
            });
            Some((q, v, band))
        })
        .collect();
    (!points.is_empty()).then(|| Series {
        name: name.to_string(),
        points,
    })
}

/// The load workload's percentile series of one cell: the mean over the repetitions of each
/// stored percentile, its band their lowest and highest (with at least two repetitions).
fn load_series(c: &CellStats) -> Option<Series> {
    let points: Vec<Point> = LOAD_PERCENTILES
        .iter()
        .filter_map(|(m, q)| {
            let s = c.metrics.get(*m)?;
            Some((*q, s.mean, (s.n >= 2).then_some((s.min, s.max))))
        })
        .collect();
    (points.len() >= 2).then(|| Series {
        name: c.cell.label.clone(),
        points,
    })
}

/// The caption's words on the axes and the band of a percentile chart of `series`.
fn axes_and_band(series: &[Series], band: &str, no_band: &str) -> String {
    let scale = if svg::nines_log_y(series) {
        "; the time axis is logarithmic"
    } else {
        ""
    };
    let banded = series
        .iter()
        .any(|s| s.points.iter().any(|p| p.2.is_some()));
    let band = if banded {
        format!("; shaded band: {band}")
    } else {
        format!("; no band: {no_band}")
    };
    format!(" The x axis is in nines (p50, p90, p99, p99.9, p99.99 evenly spaced){scale}{band}.")
}

/// Series this many or more are drawn as small multiples ([`svg::percentile_multiples`]),
/// one panel per cell, instead of overlapping lines and bands in one chart.
pub const MULTIPLES_FROM: usize = 4;

/// One percentile chart, or small multiples when there are [`MULTIPLES_FROM`] series or more.
fn draw(title: &str, series: &[Series], y_label: &str, notes: &[String]) -> String {
    if series.len() >= MULTIPLES_FROM {
        svg::percentile_multiples(title, series, y_label, BAND_LABEL, notes)
    } else {
        svg::percentile_chart(title, series, y_label, BAND_LABEL)
    }
}

/// The p99.9 a series draws, if it reaches it.
fn p999(s: &Series) -> Option<f64> {
    s.points
        .iter()
        .find(|p| (p.0 - 0.999).abs() < 1e-12)
        .map(|p| p.1)
}

/// What a cell's percentile line says at p99.9 beside the table's `p99.9 us` column (the mean
/// of each repetition's own p99.9): the pooled value and the table's, or why the line has none.
pub fn p999_note(line: Option<f64>, table: Option<f64>) -> String {
    match (line, table) {
        (Some(l), Some(t)) if crate::table::num(l) == crate::table::num(t) => {
            format!("p99.9 {} µs, as in the table", crate::table::num(l))
        }
        (Some(l), Some(t)) => format!(
            "p99.9: line (pooled) {} µs, table (mean of reps) {} µs",
            crate::table::num(l),
            crate::table::num(t)
        ),
        (None, Some(t)) => format!(
            "table p99.9 {} µs; too few round trips pooled to draw it",
            crate::table::num(t)
        ),
        (Some(l), None) => format!("p99.9 {} µs", crate::table::num(l)),
        (None, None) => String::new(),
    }
}

/// The latency percentile charts of an experiment (none when nothing is stored for them).
pub fn percentile_charts(out: &mut String, st: &ExperimentStats) {
    let mut rtt_notes: Vec<String> = Vec::new();
    let rtt: Vec<Series> = st
        .cells
        .iter()
        .filter_map(|c| {
            let pooled = c.histograms.get("rtt_ns")?;
            let reps = c.rep_histograms.get("rtt_ns").map_or(&[][..], |r| &r[..]);
            let s = histogram_series(&c.cell.label, pooled, reps, 1000.0)?;
            let table = c.metrics.get("rtt_p999_us").map(|m| m.mean);
            rtt_notes.push(p999_note(p999(&s), table));
            Some(s)
        })
        .collect();
    if !rtt.is_empty() {
        let differ: Vec<String> = rtt
            .iter()
            .zip(&rtt_notes)
            .filter(|(_, n)| n.contains("line (pooled)"))
            .map(|(s, n)| format!("{}: {n}", s.name))
            .collect();
        let why = if differ.is_empty() {
            String::new()
        } else {
            format!(
                " The line's p99.9 is that of all round trips pooled; the table's p99.9 column is the mean of each repetition's own p99.9, so they differ when one repetition's tail is unlike the others' ({}).",
                differ.join("; ")
            )
        };
        let caption = format!(
            "Round-trip time at each percentile: the line reads the HDR histogram of all measured repetitions of a cell pooled (a percentile q only when the pool holds at least 1/(1 − q) round trips).{}{why}{}",
            axes_and_band(
                &rtt,
                "lowest to highest value of that percentile among the cell's single repetitions (where it has at least two and each holds at least 1/(1 − q) round trips)",
                "no cell has two repetitions that each hold enough round trips to resolve a percentile on their own"
            ),
            multiples_words(&rtt)
        );
        figure(
            out,
            &draw(
                "Round-trip time percentiles",
                &rtt,
                "round-trip time (µs)",
                &rtt_notes,
            ),
            &caption,
        );
    }
    let load: Vec<Series> = st.cells.iter().filter_map(load_series).collect();
    if !load.is_empty() {
        let notes: Vec<String> = load.iter().map(|s| p999_note(p999(s), p999(s))).collect();
        let caption = format!(
            "Response time at each percentile the load generator stores (p50, p90, p99, p99.9; from the intended send time in open loop): the line is the mean over a cell's measured repetitions of each repetition's own percentile, as in the tables.{}{}",
            axes_and_band(
                &load,
                "lowest to highest value of that percentile among the cell's repetitions (where it has at least two)",
                "no cell has two measured repetitions"
            ),
            multiples_words(&load)
        );
        figure(
            out,
            &draw(
                "Response time percentiles",
                &load,
                "response time (µs)",
                &notes,
            ),
            &caption,
        );
    }
}

/// The caption's words on small multiples, when `series` are drawn so.
fn multiples_words(series: &[Series]) -> &'static str {
    if series.len() >= MULTIPLES_FROM {
        " One panel per cell (small multiples), every panel on the same two scales."
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::html_report;
    use crate::model::params::Params;
    use crate::plan::{Axis, Group, Order, Plan};
    use crate::runner::Sample;
    use crate::store::Store;
    use crate::testkit::{lab, Rep};

    /// A store with one pingpong experiment: cell `i`, repetition `r` holds the round-trip
    /// histogram `cells[i][r]` (nanoseconds).
    fn pingpong(cells: &[Vec<Vec<(u64, u64)>>]) -> (tempfile::TempDir, Store, i64) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("results.db")).unwrap();
        let sizes = ["64", "1K", "4K", "16K"];
        let group = Group::new("pingpong", Params::new())
            .axis(Axis::single("size", sizes[..cells.len()].iter().copied()));
        let reps = cells.iter().map(Vec::len).max().unwrap();
        let plan = Plan::build("rtt", "", &[group], reps, 0, Order::Sequential, "t").unwrap();
        let (id, ids) = store
            .begin_experiment(&plan, &socklab_sys::host::host_facts())
            .unwrap();
        for (cell, hs) in ids.iter().zip(cells) {
            for (r, h) in hs.iter().enumerate() {
                let total: u64 = h.iter().map(|b| b.0 * b.1).sum();
                let s = Sample {
                    metrics: vec![("total_us".into(), total as f64 / 1000.0)],
                    extra: serde_json::Value::Null,
                    histograms: vec![("rtt_ns", h.clone())],
                    intervals: Vec::new(),
                };
                store
                    .record_sample(*cell, r, false, "2025-01-01T00:00:01Z", 1.0, &s)
                    .unwrap();
            }
        }
        store.finish_experiment(id, "done").unwrap();
        (dir, store, id)
    }

    /// 100 round trips: 90 of `a`, 9 of `b`, 1 of `c` nanoseconds.
    fn hundred(a: u64, b: u64, c: u64) -> Vec<(u64, u64)> {
        vec![(a, 90), (b, 9), (c, 1)]
    }

    /// The `<figure>` holding the chart titled `title`: (svg, caption).
    fn figure_of<'a>(html: &'a str, title: &str) -> Option<(&'a str, &'a str)> {
        let at = html.find(&format!("<title>{title}</title>"))?;
        let start = html[..at].rfind("<figure")?;
        let end = at + html[at..].find("</figure>")?;
        let fig = &html[start..end];
        let cap = fig.find("<figcaption>")?;
        Some((&fig[..cap], &fig[cap..]))
    }

    #[test]
    fn a_quantile_needs_one_over_one_minus_q_values() {
        assert!(resolves(0.5, 1));
        assert!(!resolves(0.5, 0));
        assert!(resolves(0.9, 10), "(1 - 0.9) × 10 rounds below 1");
        assert!(!resolves(0.9, 9));
        assert!(resolves(0.99, 100) && !resolves(0.99, 99));
        assert!(resolves(0.9999, 10_000) && !resolves(0.999, 999));
    }

    /// Item 9 of issue 15: the band is the spread of the percentile over the single
    /// repetitions, where each repetition resolves it; the line is the pooled histogram.
    #[test]
    fn the_band_is_the_spread_of_a_percentile_over_single_repetitions() {
        let reps = [hundred(1000, 2000, 5000), hundred(1100, 2500, 9000)];
        let pooled: Vec<(u64, u64)> = {
            let mut all: Vec<(u64, u64)> = reps.iter().flatten().copied().collect();
            all.sort_unstable();
            all
        };
        let s = histogram_series("c", &pooled, &reps, 1000.0).unwrap();
        let qs: Vec<f64> = s.points.iter().map(|p| p.0).collect();
        assert_eq!(
            qs,
            [0.5, 0.75, 0.9, 0.95, 0.99],
            "200 round trips: no p99.9"
        );
        // Pooled p99: rank 198 of 1000×90, 1100×90, 2000×9, 2500×9, 5000, 9000 → 2500 ns.
        // Per repetition p99 (rank 99): 2000 and 2500 ns.
        assert_eq!(s.points[4], (0.99, 2.5, Some((2.0, 2.5))));
        assert_eq!(s.points[0], (0.5, 1.1, Some((1.0, 1.1))));
        // One repetition: no band.
        let one = histogram_series("c", &reps[0], &reps[..1], 1000.0).unwrap();
        assert!(one.points.iter().all(|p| p.2.is_none()));
        assert_eq!(one.points.len(), 5);
        // A repetition of 10 round trips resolves p90 but not p95: the band stops there.
        let short = [hundred(1000, 2000, 5000), vec![(1000, 8), (3000, 2)]];
        let s = histogram_series("c", &short[0], &short, 1000.0).unwrap();
        let banded: Vec<f64> = s
            .points
            .iter()
            .filter(|p| p.2.is_some())
            .map(|p| p.0)
            .collect();
        assert_eq!(banded, [0.5, 0.75, 0.9]);
        assert_eq!(s.points[2].2, Some((1.0, 3.0)));
    }

    /// Item 9 of issue 15: the report's round-trip chart has the nines axis and the band its
    /// caption describes; without two repetitions neither draws nor promises a band.
    #[test]
    fn the_report_draws_the_rtt_nines_chart_and_the_band_its_caption_names() {
        let cells = vec![
            vec![
                hundred(1000, 2000, 5000),
                hundred(1100, 2500, 9000),
                hundred(1050, 2200, 6000),
            ],
            vec![
                hundred(3000, 4000, 7000),
                hundred(3100, 4100, 7500),
                hundred(2900, 3900, 8000),
            ],
        ];
        let (_d, store, id) = pingpong(&cells);
        let html = html_report(&store, &[id], "t").unwrap();
        let (svg, caption) = figure_of(&html, "Round-trip time percentiles").expect("the chart");
        assert!(svg.contains("data-kind=\"percentile\""));
        for t in ["p50", "p90", "p99"] {
            assert!(svg.contains(&format!(">{t}</text>")), "{t} tick");
        }
        assert!(
            !svg.contains(">p99.9</text>"),
            "300 round trips do not reach p99.9"
        );
        assert_eq!(svg.matches("<polygon class=\"band\"").count(), 2);
        assert!(
            svg.contains("size=64 p99: 2.500 (min–max over repetitions: 2 to 2.500)"),
            "{svg}"
        );
        assert!(caption.contains("shaded band: lowest to highest value of that percentile among the cell&#39;s single repetitions"), "{caption}");
        assert!(caption.contains("x axis is in nines"));
        // One repetition per cell: no band, and the caption says so.
        let single: Vec<Vec<Vec<(u64, u64)>>> = cells.iter().map(|c| c[..1].to_vec()).collect();
        let (_d, store, id) = pingpong(&single);
        let html = html_report(&store, &[id], "t").unwrap();
        let (svg, caption) = figure_of(&html, "Round-trip time percentiles").unwrap();
        assert!(!svg.contains("class=\"band"), "{svg}");
        assert!(!svg.contains("min–max"));
        assert!(
            caption.contains("no band: no cell has two repetitions"),
            "{caption}"
        );
        assert!(!caption.contains("shaded"));
    }

    /// Item 9 of issue 15: the load workload's stored response-time percentiles get the same
    /// nines chart, the band their spread over the repetitions.
    #[test]
    fn load_response_time_percentiles_get_the_nines_chart() {
        let rep = |k: f64| -> Rep {
            vec![
                ("req_per_s", 1000.0),
                ("lat_p50_us", 50.0 * k),
                ("lat_p90_us", 80.0 * k),
                ("lat_p99_us", 200.0 * k),
                ("lat_p999_us", 900.0 * k),
            ]
        };
        let l = lab(
            "load",
            Params::new(),
            "design",
            &["iterative", "thread"],
            &[vec![rep(1.0), rep(1.2)], vec![rep(0.5), rep(0.6)]],
        );
        let html = html_report(&l.store, &[l.id], "t").unwrap();
        let (svg, caption) = figure_of(&html, "Response time percentiles").expect("the chart");
        for t in ["p50", "p90", "p99", "p99.9"] {
            assert!(svg.contains(&format!(">{t}</text>")), "{t} tick");
        }
        assert_eq!(svg.matches("<polygon class=\"band\"").count(), 2);
        assert!(
            svg.contains("design=iterative p99: 220 (min–max over repetitions: 200 to 240)"),
            "{svg}"
        );
        assert!(
            svg.contains("data-scale=\"log\""),
            "25 to 1080 µs spans decades"
        );
        assert!(caption.contains("the time axis is logarithmic"));
        assert!(caption.contains("the mean over a cell&#39;s measured repetitions"));
    }

    /// Item 9 of issue 15: with one repetition per cell no chart promises a confidence
    /// interval it cannot draw.
    #[test]
    fn captions_promise_no_interval_a_single_repetition_cannot_have() {
        let l = lab(
            "bulk",
            Params::new(),
            "bufsize",
            &["1K", "4K"],
            &[
                crate::testkit::reps("gbps", &[1.0]),
                crate::testkit::reps("gbps", &[2.0]),
            ],
        );
        let html = html_report(&l.store, &[l.id], "t").unwrap();
        let (bar, bar_caption) = figure_of(&html, "Mean throughput per cell").unwrap();
        let (line, line_caption) = figure_of(&html, "Throughput against bufsize").unwrap();
        for text in [bar, bar_caption, line, line_caption] {
            assert!(!text.contains("95% CI"), "{text}");
            assert!(!text.contains("95%"), "{text}");
            assert!(!text.contains("shaded band"), "{text}");
        }
        assert!(bar_caption.contains("no whiskers: no cell has two repetitions"));
        assert!(line_caption.contains("no band: no point has two repetitions"));
    }
}
