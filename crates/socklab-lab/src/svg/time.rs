//! The time-series chart (flent's style): a quantity over the time of a run, one colour per
//! stream, single repetitions drawn thin and light under the bold line of their mean, the
//! omitted start shaded and labelled.

use std::fmt::Write as _;

use super::*;

/// One line of a [`time_chart`].
#[derive(Debug, Clone, PartialEq)]
pub struct TimeLine {
    /// Its name (legend and tooltip), e.g. `stream 0` or `stream 0, rep 2`.
    pub name: String,
    /// Palette index of its colour (one per stream).
    pub colour: usize,
    /// A single repetition under a mean: drawn thin and light, not in the legend.
    pub faded: bool,
    /// `(start, end, value)` per interval, seconds: drawn as steps (an average over the
    /// interval) when the chart's `steps`, else as a line through `(end, value)`.
    pub points: Vec<(f64, f64, f64)>,
}

/// `(start, end, value)` of one interval.
type Pt = (f64, f64, f64);

/// The shaded start of a run (`omit`): from 0 to `end` seconds, with its label.
#[derive(Debug, Clone, PartialEq)]
pub struct Shade {
    /// Where the omitted start ends, seconds.
    pub end: f64,
    /// Its label, e.g. `omitted (first 2 s)`.
    pub label: String,
}

/// Time-series chart: time (s) on the x axis from 0, `y_label` on the y axis from 0; `steps`
/// draws each interval as a flat segment over its span (a rate averaged over it), otherwise a
/// line joins the readings at the intervals' ends (an instant value such as the RTT).
pub fn time_chart(
    title: &str,
    lines: &[TimeLine],
    shade: Option<&Shade>,
    y_label: &str,
    steps: bool,
) -> String {
    let lines: Vec<(&TimeLine, Vec<Pt>)> = lines
        .iter()
        .map(|l| {
            let mut p: Vec<Pt> = l
                .points
                .iter()
                .copied()
                .filter(|(a, b, v)| a.is_finite() && b.is_finite() && v.is_finite() && b > a)
                .collect();
            p.sort_by(|x, y| x.0.total_cmp(&y.0));
            (l, p)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if lines.is_empty() {
        return empty("time", title);
    }
    let (left, right) = (86.0, WIDTH - 24.0);
    let legend_y = 44.0;
    let (top, bottom) = (64.0, 64.0 + 340.0);
    let height = bottom + 60.0;
    let xmax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0_f64, f64::max);
    let ymax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.2))
        .fold(0.0_f64, f64::max);
    let (xt, xstep) = nice_ticks(0.0, xmax.max(shade.map_or(0.0, |s| s.end)), 10);
    let (yt, ystep) = nice_ticks(0.0, ymax, 6);
    let x = Scale {
        d0: xt[0],
        d1: xt[xt.len() - 1],
        r0: left,
        r1: right,
    };
    let y = Scale {
        d0: yt[0],
        d1: yt[yt.len() - 1],
        r0: bottom,
        r1: top,
    };
    let mut s = open("time", title, height);
    if let Some(sh) = shade.filter(|sh| sh.end.is_finite() && sh.end > 0.0) {
        let w = x.at(sh.end) - x.at(0.0);
        let _ = write!(
            s,
            "<g class=\"omitted\"><rect class=\"omitted\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#888\" fill-opacity=\"0.18\"><title>{}</title></rect>",
            f(x.at(0.0)),
            f(top),
            f(w.max(0.0)),
            f(bottom - top),
            esc(&sh.label)
        );
        s.push_str("</g>");
    }
    y_axis(&mut s, &yt, ystep, y, (left, right), (top, bottom), y_label);
    let xticks: Vec<(f64, String)> = xt.iter().map(|&v| (v, tick_label(v, xstep))).collect();
    x_axis(
        &mut s,
        &xticks,
        x,
        top,
        bottom,
        "time since the start of the repetition (s)",
    );
    // Faded repetitions first, so the means are drawn over them.
    let mut order: Vec<&(&TimeLine, Vec<Pt>)> = lines.iter().collect();
    order.sort_by_key(|(l, _)| !l.faded);
    for (l, pts) in order {
        let colour = PALETTE[l.colour % PALETTE.len()];
        let coords: Vec<String> = if steps {
            pts.iter()
                .flat_map(|&(a, b, v)| {
                    [
                        format!("{},{}", f(x.at(a)), f(y.at(v))),
                        format!("{},{}", f(x.at(b)), f(y.at(v))),
                    ]
                })
                .collect()
        } else {
            pts.iter()
                .map(|&(_, b, v)| format!("{},{}", f(x.at(b)), f(y.at(v))))
                .collect()
        };
        let (class, width, opacity) = if l.faded {
            ("rep", 1.2, 0.35)
        } else {
            ("line", 2.2, 1.0)
        };
        let _ = write!(
            s,
            "<g class=\"series\" data-series=\"{}\"><polyline class=\"{class}\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{}\" stroke-opacity=\"{}\" stroke-linejoin=\"round\"><title>{}</title></polyline></g>",
            esc(&l.name),
            coords.join(" "),
            f(width),
            opacity,
            esc(&l.name)
        );
    }
    // The shade's label, over the gridlines.
    if let Some(sh) = shade.filter(|sh| sh.end.is_finite() && sh.end > 0.0) {
        let _ = write!(
            s,
            "<rect class=\"omitted-label-bg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\" fill=\"#fff\" fill-opacity=\"0.8\"/>",
            f(x.at(0.0) + 2.0),
            f(top + 3.0),
            f(sh.label.chars().count() as f64 * CHAR_W + 8.0)
        );
        text(
            &mut s,
            "omitted-label",
            x.at(0.0) + 6.0,
            top + 16.0,
            "start",
            &sh.label,
        );
    }
    // Legend: each bold line, then the faded repetitions and the shade when drawn.
    let mut entries: Vec<(Swatch<'_>, String)> = Vec::new();
    for (l, _) in lines.iter().filter(|(l, _)| !l.faded) {
        let colour = PALETTE[l.colour % PALETTE.len()];
        entries.push((line_swatch(colour, 2.2, 1.0), l.name.clone()));
    }
    if lines.iter().any(|(l, _)| l.faded) {
        let colour = PALETTE[lines[0].0.colour % PALETTE.len()];
        entries.push((line_swatch(colour, 1.2, 0.35), "single repetitions".into()));
    }
    if shade.is_some() {
        entries.push((
            Box::new(|s: &mut String, x: f64, y: f64| {
                let _ = write!(
                    s,
                    "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" fill=\"#888\" fill-opacity=\"0.18\"/>",
                    f(x),
                    f(y - 5.0)
                );
            }),
            "omitted".into(),
        ));
    }
    legend_row(&mut s, right, legend_y, &entries);
    s.push_str("</svg>");
    s
}

fn line_swatch(colour: &'static str, width: f64, opacity: f64) -> Swatch<'static> {
    Box::new(move |s: &mut String, x: f64, y: f64| {
        let _ = write!(
            s,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"{}\" stroke-opacity=\"{opacity}\"/>",
            f(x),
            f(x + 16.0),
            f(width),
            y = f(y)
        );
    })
}
