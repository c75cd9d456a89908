//! The line chart: series over a size-like axis, with confidence bands.

use std::fmt::Write as _;

use super::*;

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
    y_axis(&mut s, &yt, ystep, y, (left, right), (top, bottom), y_label);
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
        // The CI entry only when some CI is drawn (a band, or a bar at a lone point).
        if series
            .iter()
            .any(|(_, _, p)| p.iter().any(|pt| pt.2.is_some()))
        {
            let note_y = top + 8.0 + series.len() as f64 * 22.0 + 6.0;
            let _ = write!(
                s,
                "<rect class=\"band-swatch\" x=\"{}\" y=\"{}\" width=\"24\" height=\"12\" fill=\"#888\" fill-opacity=\"0.3\"/>",
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
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}
