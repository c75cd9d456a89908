//! Hand-written inline SVG charts for the HTML report: horizontal bar charts with 95% CI
//! whiskers, line charts with translucent CI bands, and per-run strip charts.
//!
//! Every function is pure and returns one `<svg>` element meant to be inlined in HTML5 (so no
//! `xmlns` attribute and no external reference of any kind). The element carries
//! `class="chart"`, a `data-kind` attribute (`bar`, `line` or `strip`) and a `<title>` child;
//! it is 1200 units wide (`viewBox`) and scales down with `width="100%"`. Text is XML-escaped
//! and every number written is finite: points with NaN or infinite values are skipped.

use std::fmt::Write as _;

use crate::table::num;

/// Width of every chart (the `viewBox` width, and the CSS `max-width` in pixels).
pub const WIDTH: f64 = 1200.0;

/// The tableau10 palette: series colours in order.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// Colour of ordinary bars (and of strip-chart dots).
pub const BAR_COLOUR: &str = PALETTE[0];

/// Colour of the best bar.
pub const BEST_COLOUR: &str = PALETTE[1];

/// Longest label drawn in full; longer labels are cut and end with `…`.
pub const MAX_LABEL_CHARS: usize = 60;

const FONT: &str = "system-ui,-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif";
const TEXT: &str = "#222";
const MUTED: &str = "#555";
const GRID: &str = "#e3e3e3";
const AXIS: &str = "#444";
/// Approximate advance of one character at the 12 px label size.
const CHAR_W: f64 = 6.9;

/// One bar of a [`bar_chart`].
#[derive(Debug, Clone, PartialEq)]
pub struct BarRow {
    /// Category label (one cell).
    pub label: String,
    /// Bar length.
    pub mean: f64,
    /// 95% confidence interval `(lo, hi)`, drawn as a whisker.
    pub ci: Option<(f64, f64)>,
    /// Highlight this bar (the best cell).
    pub best: bool,
}

/// One series of a [`line_chart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Name shown in the legend.
    pub name: String,
    /// `(x, mean, 95% CI)` points, in any order (drawn sorted by x).
    pub points: Vec<Point>,
}

/// A point of a [`Series`]: `(x, mean, 95% CI as (lo, hi))`.
pub type Point = (f64, f64, Option<(f64, f64)>);

/// One row of a [`strip_chart`].
#[derive(Debug, Clone, PartialEq)]
pub struct StripRow {
    /// Category label (one cell).
    pub label: String,
    /// One value per repetition, in run order.
    pub values: Vec<f64>,
}

/// Escapes text for XML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate, rounded to 0.1 and always finite.
fn f(x: f64) -> String {
    if !x.is_finite() {
        return "0".into();
    }
    let r = (x * 10.0).round() / 10.0;
    if r == 0.0 {
        "0".into()
    } else {
        format!("{r}")
    }
}

/// A label cut to `max` characters (ending with `…` when cut).
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// A "nice" tick step (1, 2 or 5 × 10^k) for `span` divided in about `target` intervals, as
/// `(mantissa, exponent)`.
fn nice_step(span: f64, target: usize) -> (i64, i32) {
    let raw = span / target.max(1) as f64;
    let raw = if raw.is_finite() && raw > 0.0 {
        raw
    } else {
        1.0
    };
    let mut e = raw.log10().floor() as i32;
    let fr = raw / 10f64.powi(e);
    let m = if fr <= 1.0 {
        1
    } else if fr <= 2.0 {
        2
    } else if fr <= 5.0 {
        5
    } else {
        e += 1;
        1
    };
    (m, e)
}

/// `k × 10^e` computed so that decimal ticks come out as close as possible to their decimal
/// value (0.3, not 0.30000000000000004).
fn scaled(k: i64, e: i32) -> f64 {
    if e >= 0 {
        k as f64 * 10f64.powi(e)
    } else {
        k as f64 / 10f64.powi(-e)
    }
}

/// Nice ticks covering `[lo, hi]`: multiples of a step of 1, 2 or 5 × 10^k, about `target`
/// intervals, the first at or below `lo`, the last at or above `hi`. Also returns the step.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        let pad = lo.abs() * 0.1;
        (lo - pad, hi + pad)
    };
    let (m, e) = nice_step(hi - lo, target);
    let step = scaled(m, e);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    let ticks = (first..=last.max(first + 1))
        .map(|k| scaled(k * m, e))
        .collect();
    (ticks, step)
}

/// A tick label with just enough decimals for `step`.
fn tick_label(v: f64, step: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let decimals = if step > 0.0 && step.is_finite() {
        (-(step.log10().floor()) as i32).max(0) as usize
    } else {
        0
    };
    format!("{v:.decimals$}")
}

/// A byte count as a compact size label with 1024 multiples: `512`, `1K`, `1.5K`, `64K`, `1M`.
pub fn size_label(bytes: f64) -> String {
    if !bytes.is_finite() {
        return "-".into();
    }
    let a = bytes.abs();
    for (unit, suffix) in [
        (1024f64.powi(4), "T"),
        (1024f64.powi(3), "G"),
        (1024f64.powi(2), "M"),
        (1024.0, "K"),
    ] {
        if a >= unit {
            let v = bytes / unit;
            return if (v - v.round()).abs() < 1e-9 {
                format!("{}{suffix}", v.round())
            } else {
                let s = format!("{v:.1}");
                format!("{}{suffix}", s.trim_end_matches('0').trim_end_matches('.'))
            };
        }
    }
    if (bytes - bytes.round()).abs() < 1e-9 {
        format!("{}", bytes.round())
    } else {
        format!("{bytes:.1}")
    }
}

/// The opening of a chart: root element, accessible title, visible title.
fn open(kind: &str, title: &str, height: f64) -> String {
    let mut s = format!(
        "<svg class=\"chart\" data-kind=\"{kind}\" viewBox=\"0 0 {w} {h}\" width=\"100%\" \
         style=\"max-width:{w}px;height:auto\" role=\"img\" font-family=\"{FONT}\" \
         font-size=\"12\" fill=\"{TEXT}\">",
        w = f(WIDTH),
        h = f(height)
    );
    let _ = write!(
        s,
        "<title>{t}</title><rect class=\"background\" x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>\
         <text class=\"chart-title\" x=\"12\" y=\"24\" font-size=\"16\" font-weight=\"600\">{t}</text>",
        t = esc(title),
        w = f(WIDTH),
        h = f(height)
    );
    s
}

/// A valid chart saying "no data".
fn empty(kind: &str, title: &str) -> String {
    let mut s = open(kind, title, 120.0);
    let _ = write!(
        s,
        "<text class=\"no-data\" x=\"{}\" y=\"72\" text-anchor=\"middle\" font-size=\"14\" fill=\"{MUTED}\">no data</text></svg>",
        f(WIDTH / 2.0)
    );
    s
}

/// A line element from `(x1, y1)` to `(x2, y2)` (no class attribute when `class` is empty).
fn line(
    s: &mut String,
    class: &str,
    (x1, y1): (f64, f64),
    (x2, y2): (f64, f64),
    stroke: &str,
    w: f64,
) {
    s.push_str("<line");
    if !class.is_empty() {
        let _ = write!(s, " class=\"{class}\"");
    }
    let _ = write!(
        s,
        " x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{stroke}\" stroke-width=\"{}\"/>",
        f(x1),
        f(y1),
        f(x2),
        f(y2),
        f(w)
    );
}

/// A text element; `anchor` is start, middle or end.
fn text(s: &mut String, class: &str, x: f64, y: f64, anchor: &str, body: &str) {
    let _ = write!(
        s,
        "<text class=\"{class}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
        f(x),
        f(y),
        esc(body)
    );
}

/// Draws a legend symbol at `(x, y)` (left edge, vertical centre) in a box 16 units wide.
type Swatch<'a> = Box<dyn Fn(&mut String, f64, f64) + 'a>;

/// A horizontal legend, right-aligned to `right` on baseline `y`: each entry is its symbol
/// followed by its text.
fn legend_row(s: &mut String, right: f64, y: f64, entries: &[(Swatch<'_>, String)]) {
    let widths: Vec<f64> = entries
        .iter()
        .map(|(_, t)| 22.0 + t.chars().count() as f64 * CHAR_W + 18.0)
        .collect();
    let mut x = right - widths.iter().sum::<f64>() + 18.0;
    s.push_str("<g class=\"legend\">");
    for ((draw, t), w) in entries.iter().zip(&widths) {
        draw(s, x, y - 4.0);
        text(s, "legend-label", x + 22.0, y, "start", t);
        x += w;
    }
    s.push_str("</g>");
}

fn rect_swatch(colour: &'static str) -> Swatch<'static> {
    Box::new(move |s: &mut String, x: f64, y: f64| {
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" fill=\"{colour}\"/>",
            f(x),
            f(y - 5.0)
        );
    })
}

/// A linear scale from `[d0, d1]` to `[r0, r1]`.
#[derive(Debug, Clone, Copy)]
struct Scale {
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Scale {
    fn at(&self, v: f64) -> f64 {
        let span = self.d1 - self.d0;
        if span == 0.0 {
            return self.r0;
        }
        self.r0 + (v - self.d0) / span * (self.r1 - self.r0)
    }
}

/// Width of the category-label column for these labels.
fn label_column(labels: impl Iterator<Item = usize>) -> f64 {
    let chars = labels.map(|n| n.min(MAX_LABEL_CHARS)).max().unwrap_or(0);
    (chars as f64 * CHAR_W + 12.0).clamp(80.0, MAX_LABEL_CHARS as f64 * CHAR_W + 12.0)
}

/// Vertical gridlines, tick labels, the x axis and its label below a plot spanning
/// `top..bottom`.
fn x_axis(s: &mut String, ticks: &[(f64, String)], x: Scale, top: f64, bottom: f64, label: &str) {
    s.push_str("<g class=\"x-axis\">");
    for (v, t) in ticks {
        let px = x.at(*v);
        line(s, "grid", (px, top), (px, bottom), GRID, 1.0);
        line(s, "tick", (px, bottom), (px, bottom + 5.0), AXIS, 1.0);
        text(s, "tick-label", px, bottom + 18.0, "middle", t);
    }
    line(s, "axis", (x.r0, bottom), (x.r1, bottom), AXIS, 1.0);
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\" fill=\"{MUTED}\">{}</text>",
        f((x.r0 + x.r1) / 2.0),
        f(bottom + 40.0),
        esc(label)
    );
    s.push_str("</g>");
}

/// Horizontal bar chart: one bar per row with its label on the left, the 95% CI as a whisker
/// with caps, the value printed at the bar's end, the best row in another colour.
pub fn bar_chart(title: &str, rows: &[BarRow], value_label: &str) -> String {
    let rows: Vec<&BarRow> = rows.iter().filter(|r| r.mean.is_finite()).collect();
    if rows.is_empty() {
        return empty("bar", title);
    }
    let ci = |r: &BarRow| {
        r.ci.filter(|(lo, hi)| lo.is_finite() && hi.is_finite())
            .map(|(lo, hi)| (lo.min(hi), lo.max(hi)))
    };
    let label_w = label_column(rows.iter().map(|r| r.label.chars().count()));
    let (left, right) = (12.0 + label_w + 8.0, WIDTH - 90.0);
    let (top, row_h, bar_h) = (58.0, 28.0, 16.0);
    let bottom = top + rows.len() as f64 * row_h;
    let height = bottom + 58.0;
    let mut lo: f64 = 0.0;
    let mut hi: f64 = 0.0;
    for r in &rows {
        lo = lo.min(r.mean);
        hi = hi.max(r.mean);
        if let Some((a, b)) = ci(r) {
            lo = lo.min(a);
            hi = hi.max(b);
        }
    }
    let (ticks, step) = nice_ticks(lo, hi, 8);
    let x = Scale {
        d0: ticks[0],
        d1: ticks[ticks.len() - 1],
        r0: left,
        r1: right,
    };
    let mut s = open("bar", title, height);
    let mut entries: Vec<(Swatch<'_>, String)> = vec![(rect_swatch(BAR_COLOUR), "mean".into())];
    if rows.iter().any(|r| r.best) {
        entries.push((rect_swatch(BEST_COLOUR), "best".into()));
    }
    if rows.iter().any(|r| ci(r).is_some()) {
        entries.push((
            Box::new(|s: &mut String, x: f64, y: f64| {
                line(s, "", (x, y), (x + 16.0, y), TEXT, 1.5);
                line(s, "", (x, y - 5.0), (x, y + 5.0), TEXT, 1.5);
                line(s, "", (x + 16.0, y - 5.0), (x + 16.0, y + 5.0), TEXT, 1.5);
            }),
            "95% CI".into(),
        ));
    }
    legend_row(&mut s, WIDTH - 12.0, 24.0, &entries);
    let labelled: Vec<(f64, String)> = ticks.iter().map(|&t| (t, tick_label(t, step))).collect();
    x_axis(&mut s, &labelled, x, top - 6.0, bottom, value_label);
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"13\" font-weight=\"600\" fill=\"{MUTED}\">cell</text>",
        f(left - 8.0),
        f(top - 12.0)
    );
    let zero = x.at(0.0_f64.clamp(x.d0, x.d1));
    s.push_str("<g class=\"bars\">");
    for (i, r) in rows.iter().enumerate() {
        let yc = top + (i as f64 + 0.5) * row_h;
        let label = truncate(&r.label, MAX_LABEL_CHARS);
        let _ = write!(
            s,
            "<text class=\"row-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}<title>{}</title></text>",
            f(left - 8.0),
            f(yc + 4.0),
            esc(&label),
            esc(&r.label)
        );
        let xm = x.at(r.mean);
        let (colour, class) = if r.best {
            (BEST_COLOUR, "bar best")
        } else {
            (BAR_COLOUR, "bar")
        };
        let tip = match ci(r) {
            Some((a, b)) => format!(
                "{}: {} (95% CI {} to {})",
                r.label,
                num(r.mean),
                num(a),
                num(b)
            ),
            None => format!("{}: {}", r.label, num(r.mean)),
        };
        let _ = write!(
            s,
            "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{colour}\"><title>{}</title></rect>",
            f(zero.min(xm)),
            f(yc - bar_h / 2.0),
            f((xm - zero).abs()),
            f(bar_h),
            esc(&tip)
        );
        let mut end = xm.max(zero);
        if let Some((a, b)) = ci(r) {
            let (xa, xb) = (x.at(a), x.at(b));
            s.push_str("<g class=\"whisker\">");
            line(&mut s, "ci", (xa, yc), (xb, yc), TEXT, 1.5);
            line(&mut s, "cap", (xa, yc - 6.0), (xa, yc + 6.0), TEXT, 1.5);
            line(&mut s, "cap", (xb, yc - 6.0), (xb, yc + 6.0), TEXT, 1.5);
            s.push_str("</g>");
            end = end.max(xb);
        }
        text(&mut s, "value", end + 6.0, yc + 4.0, "start", &num(r.mean));
    }
    s.push_str("</g>");
    line(&mut s, "axis", (left, top - 6.0), (left, bottom), AXIS, 1.0);
    s.push_str("</svg>");
    s
}

/// Line chart: one line with markers per series and a translucent band for the 95% CI. With
/// `log2_x` the x axis is logarithmic (base 2) and its ticks are labelled as sizes (1K, 2K, …).
pub fn line_chart(
    title: &str,
    series: &[Series],
    x_label: &str,
    y_label: &str,
    log2_x: bool,
) -> String {
    // Keep drawable points only, sorted by x.
    let series: Vec<(usize, &Series, Vec<Point>)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut pts: Vec<Point> = s
                .points
                .iter()
                .filter(|(x, y, _)| x.is_finite() && y.is_finite() && (!log2_x || *x > 0.0))
                .map(|&(x, y, ci)| {
                    let ci = ci
                        .filter(|(a, b)| a.is_finite() && b.is_finite())
                        .map(|(a, b)| (a.min(b), a.max(b)));
                    (if log2_x { x.log2() } else { x }, y, ci)
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (i, s, pts)
        })
        .filter(|(_, _, p)| !p.is_empty())
        .collect();
    if series.is_empty() {
        return empty("line", title);
    }
    let legend = series.len() > 1;
    let legend_w = if legend {
        let chars = series
            .iter()
            .map(|(_, s, _)| s.name.chars().count().min(40))
            .max()
            .unwrap_or(0);
        (chars as f64 * CHAR_W + 44.0).clamp(120.0, 330.0)
    } else {
        0.0
    };
    let (left, right) = (86.0, WIDTH - 24.0 - legend_w);
    let (top, bottom) = (52.0, 52.0 + 400.0);
    let height = bottom + 60.0;
    let all = || series.iter().flat_map(|(_, _, p)| p.iter());
    let (mut xmin, mut xmax) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut ymin, mut ymax) = (0.0_f64, 0.0_f64);
    for &(x, y, ci) in all() {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymin = ymin.min(y);
        ymax = ymax.max(y);
        if let Some((a, b)) = ci {
            ymin = ymin.min(a);
            ymax = ymax.max(b);
        }
    }
    let xticks: Vec<(f64, String)> = if log2_x {
        let (mut lo, mut hi) = (xmin.floor(), xmax.ceil());
        if hi <= lo {
            lo -= 1.0;
            hi += 1.0;
        }
        let every = ((hi - lo) / 12.0).ceil().max(1.0) as i64;
        (lo as i64..=hi as i64)
            .filter(|e| (e - lo as i64) % every == 0)
            .map(|e| (e as f64, size_label(2f64.powi(e as i32))))
            .collect()
    } else {
        let (t, step) = nice_ticks(xmin, xmax, 8);
        t.into_iter().map(|v| (v, tick_label(v, step))).collect()
    };
    let (x0, x1) = if log2_x {
        (
            xmin.floor().min(xticks[0].0),
            xmax.ceil().max(xticks[xticks.len() - 1].0),
        )
    } else {
        (xticks[0].0, xticks[xticks.len() - 1].0)
    };
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x0 + 1.0)
    };
    let x = Scale {
        d0: x0,
        d1: x1,
        r0: left,
        r1: right,
    };
    let (yt, ystep) = nice_ticks(ymin, ymax, 6);
    let y = Scale {
        d0: yt[0],
        d1: yt[yt.len() - 1],
        r0: bottom,
        r1: top,
    };
    let mut s = open("line", title, height);
    // Horizontal gridlines and y ticks.
    s.push_str("<g class=\"y-axis\">");
    for &t in &yt {
        let py = y.at(t);
        line(&mut s, "grid", (left, py), (right, py), GRID, 1.0);
        line(&mut s, "tick", (left - 5.0, py), (left, py), AXIS, 1.0);
        text(
            &mut s,
            "tick-label",
            left - 8.0,
            py + 4.0,
            "end",
            &tick_label(t, ystep),
        );
    }
    line(&mut s, "axis", (left, top), (left, bottom), AXIS, 1.0);
    let cy = (top + bottom) / 2.0;
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"20\" y=\"{cy}\" transform=\"rotate(-90 20 {cy})\" text-anchor=\"middle\" font-size=\"13\" fill=\"{MUTED}\">{}</text>",
        esc(y_label),
        cy = f(cy)
    );
    s.push_str("</g>");
    x_axis(&mut s, &xticks, x, top, bottom, x_label);
    for (i, sr, pts) in &series {
        let colour = PALETTE[i % PALETTE.len()];
        let _ = write!(s, "<g class=\"series\" data-series=\"{}\">", esc(&sr.name));
        let band: Vec<(f64, f64, f64)> = pts
            .iter()
            .filter_map(|&(px, _, ci)| ci.map(|(a, b)| (px, a, b)))
            .collect();
        if band.len() >= 2 {
            let mut p: Vec<String> = band
                .iter()
                .map(|&(px, _, b)| format!("{},{}", f(x.at(px)), f(y.at(b))))
                .collect();
            p.extend(
                band.iter()
                    .rev()
                    .map(|&(px, a, _)| format!("{},{}", f(x.at(px)), f(y.at(a)))),
            );
            let _ = write!(
                s,
                "<polygon class=\"band\" points=\"{}\" fill=\"{colour}\" fill-opacity=\"0.2\" stroke=\"none\"/>",
                p.join(" ")
            );
        } else if let Some(&(px, a, b)) = band.first() {
            line(
                &mut s,
                "ci",
                (x.at(px), y.at(a)),
                (x.at(px), y.at(b)),
                colour,
                1.5,
            );
        }
        if pts.len() >= 2 {
            let p: Vec<String> = pts
                .iter()
                .map(|&(px, py, _)| format!("{},{}", f(x.at(px)), f(y.at(py))))
                .collect();
            let _ = write!(
                s,
                "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.5\" stroke-linejoin=\"round\"/>",
                p.join(" ")
            );
        }
        for &(px, py, ci) in pts {
            let xv = if log2_x {
                size_label(2f64.powf(px))
            } else {
                num(px)
            };
            let tip = match ci {
                Some((a, b)) => format!(
                    "{} at {xv}: {} (95% CI {} to {})",
                    sr.name,
                    num(py),
                    num(a),
                    num(b)
                ),
                None => format!("{} at {xv}: {}", sr.name, num(py)),
            };
            let _ = write!(
                s,
                "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"{colour}\" stroke=\"#fff\" stroke-width=\"1\"><title>{}</title></circle>",
                f(x.at(px)),
                f(y.at(py)),
                esc(&tip)
            );
        }
        s.push_str("</g>");
    }
    if legend {
        let lx = right + 24.0;
        s.push_str("<g class=\"legend\">");
        for (k, (i, sr, _)) in series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let ly = top + 8.0 + k as f64 * 22.0;
            line(&mut s, "", (lx, ly), (lx + 24.0, ly), colour, 2.5);
            let _ = write!(
                s,
                "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{colour}\"/>",
                f(lx + 12.0),
                f(ly)
            );
            let _ = write!(
                s,
                "<text class=\"legend-label\" x=\"{}\" y=\"{}\">{}<title>{}</title></text>",
                f(lx + 32.0),
                f(ly + 4.0),
                esc(&truncate(&sr.name, 40)),
                esc(&sr.name)
            );
        }
        let note_y = top + 8.0 + series.len() as f64 * 22.0 + 6.0;
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"24\" height=\"12\" fill=\"#888\" fill-opacity=\"0.3\"/>",
            f(lx),
            f(note_y - 6.0)
        );
        text(
            &mut s,
            "legend-label",
            lx + 32.0,
            note_y + 4.0,
            "start",
            "95% CI",
        );
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

/// Vertical offset of repetition `i` in a strip chart: deterministic, within ±6 units.
fn jitter(i: usize) -> f64 {
    ((i * 7) % 9) as f64 * 1.5 - 6.0
}

/// Per-run scatter: one row per cell, one dot per repetition (slightly jittered vertically by
/// run index so equal values stay visible), a vertical tick at the mean.
pub fn strip_chart(title: &str, rows: &[StripRow], value_label: &str) -> String {
    let rows: Vec<(&StripRow, Vec<f64>)> = rows
        .iter()
        .map(|r| {
            (
                r,
                r.values
                    .iter()
                    .copied()
                    .filter(|v| v.is_finite())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    if rows.iter().all(|(_, v)| v.is_empty()) {
        return empty("strip", title);
    }
    let label_w = label_column(rows.iter().map(|(r, _)| r.label.chars().count()));
    let (left, right) = (12.0 + label_w + 8.0, WIDTH - 40.0);
    let (top, row_h) = (58.0, 26.0);
    let bottom = top + rows.len() as f64 * row_h;
    let height = bottom + 58.0;
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in rows.iter().flat_map(|(_, v)| v) {
        lo = lo.min(*v);
        hi = hi.max(*v);
    }
    if hi <= lo {
        let pad = (lo.abs() * 0.05).max(1e-9);
        lo -= pad;
        hi += pad;
    }
    let (ticks, step) = nice_ticks(lo, hi, 8);
    let x = Scale {
        d0: ticks[0],
        d1: ticks[ticks.len() - 1],
        r0: left,
        r1: right,
    };
    let mut s = open("strip", title, height);
    let entries: Vec<(Swatch<'_>, String)> = vec![
        (
            Box::new(|s: &mut String, x: f64, y: f64| {
                let _ = write!(
                    s,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{BAR_COLOUR}\" fill-opacity=\"0.8\"/>",
                    f(x + 8.0),
                    f(y)
                );
            }),
            "one repetition".into(),
        ),
        (
            Box::new(|s: &mut String, x: f64, y: f64| {
                line(s, "", (x + 8.0, y - 8.0), (x + 8.0, y + 8.0), TEXT, 2.5);
            }),
            "mean".into(),
        ),
    ];
    legend_row(&mut s, WIDTH - 12.0, 24.0, &entries);
    // Zebra bands behind the rows.
    for i in (0..rows.len()).step_by(2) {
        let _ = write!(
            s,
            "<rect class=\"zebra\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f4f6f9\"/>",
            f(left),
            f(top + i as f64 * row_h),
            f(right - left),
            f(row_h)
        );
    }
    let labelled: Vec<(f64, String)> = ticks.iter().map(|&t| (t, tick_label(t, step))).collect();
    x_axis(&mut s, &labelled, x, top - 6.0, bottom, value_label);
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"13\" font-weight=\"600\" fill=\"{MUTED}\">cell</text>",
        f(left - 8.0),
        f(top - 12.0)
    );
    for (i, (r, values)) in rows.iter().enumerate() {
        let yc = top + (i as f64 + 0.5) * row_h;
        let _ = write!(
            s,
            "<g class=\"strip\"><text class=\"row-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}<title>{}</title></text>",
            f(left - 8.0),
            f(yc + 4.0),
            esc(&truncate(&r.label, MAX_LABEL_CHARS)),
            esc(&r.label)
        );
        for (j, v) in values.iter().enumerate() {
            let _ = write!(
                s,
                "<circle class=\"dot\" cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{BAR_COLOUR}\" fill-opacity=\"0.75\"><title>{}: run {} = {}</title></circle>",
                f(x.at(*v)),
                f(yc + jitter(j)),
                esc(&r.label),
                j + 1,
                num(*v)
            );
        }
        if !values.is_empty() {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            line(
                &mut s,
                "mean",
                (x.at(mean), yc - 9.0),
                (x.at(mean), yc + 9.0),
                TEXT,
                2.5,
            );
        }
        s.push_str("</g>");
    }
    line(&mut s, "axis", (left, top - 6.0), (left, bottom), AXIS, 1.0);
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
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
}
