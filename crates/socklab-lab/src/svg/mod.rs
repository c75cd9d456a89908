//! Hand-written inline SVG charts for the HTML report: horizontal bar charts with 95% CI
//! whiskers, line charts with translucent CI bands, per-run strip charts and percentile
//! charts on a "nines" axis.
//!
//! Every function is pure and returns one `<svg>` element meant to be inlined in HTML5 (so no
//! `xmlns` attribute and no external reference of any kind). The element carries
//! `class="chart"`, a `data-kind` attribute (`bar`, `line`, `strip`, `percentile` or `time`) and a `<title>` child;
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
/// A linear y axis: horizontal gridlines across `(left, right)` with their ticks and labels
/// (`step` sets the labels' precision), the axis line from `top` to `bottom`, and its label
/// turned upright on the left.
fn y_axis(
    s: &mut String,
    ticks: &[f64],
    step: f64,
    y: Scale,
    (left, right): (f64, f64),
    (top, bottom): (f64, f64),
    label: &str,
) {
    s.push_str("<g class=\"y-axis\">");
    for &t in ticks {
        let py = y.at(t);
        line(s, "grid", (left, py), (right, py), GRID, 1.0);
        line(s, "tick", (left - 5.0, py), (left, py), AXIS, 1.0);
        text(
            s,
            "tick-label",
            left - 8.0,
            py + 4.0,
            "end",
            &tick_label(t, step),
        );
    }
    line(s, "axis", (left, top), (left, bottom), AXIS, 1.0);
    let cy = (top + bottom) / 2.0;
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"20\" y=\"{cy}\" transform=\"rotate(-90 20 {cy})\" text-anchor=\"middle\" font-size=\"13\" fill=\"{MUTED}\">{}</text>",
        esc(label),
        cy = f(cy)
    );
    s.push_str("</g>");
}

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

/// An SVG chart in an HTML figure with its caption (the reports' charts: `html.rs`,
/// `charts.rs`, `series_charts.rs`).
pub(crate) fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure class=\"chart\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
        esc(caption)
    );
}

/// Horizontal bar chart: one bar per row with its label on the left, the 95% CI as a whisker
/// with caps, the value printed at the bar's end, the best row in another colour.
mod bar;
mod line;
mod multiples;
mod nines;
mod strip;
mod time;

pub use bar::{bar_chart, bar_domain};
pub use line::line_chart;
pub use multiples::percentile_multiples;
pub use nines::{nines, nines_log_y, percentile_chart, percentile_label, NINES};
pub use strip::strip_chart;
pub use time::{time_chart, Shade, TimeLine};

#[cfg(test)]
mod tests;
