//! The percentile chart (HdrHistogram's plotter style): latency against percentile on a
//! "nines" axis, so p50, p90, p99, p99.9 and p99.99 are evenly spaced and all readable.

use std::fmt::Write as _;

use super::*;

/// The labelled percentiles of a nines axis, as `(quantile, label)`.
pub const NINES: [(f64, &str); 6] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
    (0.99999, "p99.999"),
];

/// The position of quantile `q` on a nines axis, `-log10(1 - q)`: p50 at 0.301, p90 at 1,
/// p99 at 2, p99.9 at 3.
pub fn nines(q: f64) -> f64 {
    -(1.0 - q).log10()
}

/// A quantile as a percentile label: `p50`, `p75`, `p99.9`.
pub fn percentile_label(q: f64) -> String {
    let s = format!("{:.4}", q * 100.0);
    format!("p{}", s.trim_end_matches('0').trim_end_matches('.'))
}

/// The drawable points of a percentile series: `0 < q < 1`, a finite value at least 0, and a
/// band kept only when finite and at least 0; sorted by quantile.
pub(super) fn drawable(s: &Series) -> Vec<Point> {
    let mut p: Vec<Point> = s
        .points
        .iter()
        .filter(|(q, v, _)| *q > 0.0 && *q < 1.0 && v.is_finite() && *v >= 0.0)
        .map(|&(q, v, band)| {
            let band = band
                .filter(|(a, b)| a.is_finite() && b.is_finite() && a.min(*b) >= 0.0)
                .map(|(a, b)| (a.min(b), a.max(b)));
            (q, v, band)
        })
        .collect();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    p
}

/// Whether [`percentile_chart`] draws the latency axis of `series` logarithmically: every
/// value (bands included) above 0 and the highest at least 10 times the lowest.
pub fn nines_log_y(series: &[Series]) -> bool {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0_f64);
    for (_, v, band) in series.iter().flat_map(drawable) {
        let (a, b) = band.unwrap_or((v, v));
        lo = lo.min(v).min(a);
        hi = hi.max(v).max(b);
    }
    lo > 0.0 && lo.is_finite() && hi / lo >= 10.0
}

/// Ticks of a log axis covering `[lo, hi]` (both above 0): 1, 2, 5 × 10^k (only 1 × 10^k
/// over more than four decades), from the last at or below `lo` to the first at or above `hi`.
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (e0, e1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mantissas: &[i64] = if e1 - e0 > 4 { &[1] } else { &[1, 2, 5] };
    let all: Vec<f64> = (e0..=e1.max(e0 + 1))
        .flat_map(|e| mantissas.iter().map(move |&m| scaled(m, e)))
        .collect();
    let first = all
        .iter()
        .rposition(|&v| v <= lo * (1.0 + 1e-12))
        .unwrap_or(0);
    let last = all
        .iter()
        .position(|&v| v >= hi * (1.0 - 1e-12))
        .unwrap_or(all.len() - 1);
    all[first..=last.max(first + 1).min(all.len() - 1)].to_vec()
}

/// Percentile plot: one line per series of `(quantile, value, band)` points, the x axis in
/// nines labelled p50, p90, p99, p99.9, p99.99 (as far as the data reaches), the value axis
/// from 0, or logarithmic when [`nines_log_y`]. A point's band `(lo, hi)` is shaded (a
/// polygon over consecutive banded points, a bar for a lone one); `band_label` names it in the
/// legend and the tooltips, and the legend shows it only when a band is drawn.
pub fn percentile_chart(title: &str, series: &[Series], y_label: &str, band_label: &str) -> String {
    let series: Vec<(usize, &Series, Vec<Point>)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s, drawable(s)))
        .filter(|(_, _, p)| !p.is_empty())
        .collect();
    if series.is_empty() {
        return empty("percentile", title);
    }
    let owned: Vec<Series> = series.iter().map(|(_, s, _)| (*s).clone()).collect();
    let log_y = nines_log_y(&owned);
    let banded = series
        .iter()
        .any(|(_, _, p)| p.iter().any(|pt| pt.2.is_some()));
    let legend = series.len() > 1 || banded;
    let legend_w = if legend {
        let chars = series
            .iter()
            .map(|(_, s, _)| s.name.chars().count().min(40))
            .chain(banded.then(|| band_label.chars().count().min(40)))
            .max()
            .unwrap_or(0);
        (chars as f64 * CHAR_W + 44.0).clamp(120.0, 330.0)
    } else {
        0.0
    };
    let (left, right) = (86.0, WIDTH - 24.0 - legend_w);
    let (top, bottom) = (52.0, 52.0 + 400.0);
    let height = bottom + 60.0;
    let xmax = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|pt| nines(pt.0)))
        .fold(1.0_f64, f64::max);
    let mut xticks: Vec<(f64, String)> = Vec::new();
    for (q, label) in NINES {
        xticks.push((nines(q), label.to_string()));
        if nines(q) >= xmax - 1e-9 {
            break;
        }
    }
    let x0 = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|pt| nines(pt.0)))
        .fold(nines(0.5), f64::min);
    let x = Scale {
        d0: x0,
        d1: xmax.max(xticks[xticks.len() - 1].0),
        r0: left + 16.0,
        r1: right - 16.0,
    };
    let (mut vlo, mut vhi) = (f64::INFINITY, 0.0_f64);
    for (_, v, band) in series.iter().flat_map(|(_, _, p)| p.iter().copied()) {
        let (a, b) = band.unwrap_or((v, v));
        vlo = vlo.min(v).min(a);
        vhi = vhi.max(v).max(b);
    }
    let (yticks, ylabels): (Vec<f64>, Vec<String>) = if log_y {
        let t = log_ticks(vlo, vhi);
        let l = t.iter().map(|&v| tick_label(v, v)).collect();
        (t.iter().map(|v| v.log10()).collect(), l)
    } else {
        let (t, step) = nice_ticks(0.0, vhi, 6);
        let l = t.iter().map(|&v| tick_label(v, step)).collect();
        (t, l)
    };
    let y = Scale {
        d0: yticks[0],
        d1: yticks[yticks.len() - 1],
        r0: bottom,
        r1: top,
    };
    let ypos = |v: f64| if log_y { y.at(v.log10()) } else { y.at(v) };
    let mut s = open("percentile", title, height);
    let _ = write!(
        s,
        "<g class=\"y-axis\" data-scale=\"{}\">",
        if log_y { "log" } else { "linear" }
    );
    for (t, l) in yticks.iter().zip(&ylabels) {
        let py = y.at(*t);
        line(&mut s, "grid", (left, py), (right, py), GRID, 1.0);
        line(&mut s, "tick", (left - 5.0, py), (left, py), AXIS, 1.0);
        text(&mut s, "tick-label", left - 8.0, py + 4.0, "end", l);
    }
    line(&mut s, "axis", (left, top), (left, bottom), AXIS, 1.0);
    let cy = (top + bottom) / 2.0;
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"20\" y=\"{cy}\" transform=\"rotate(-90 20 {cy})\" text-anchor=\"middle\" font-size=\"13\" fill=\"{MUTED}\">{}</text>",
        esc(&if log_y {
            format!("{y_label}, log scale")
        } else {
            y_label.to_string()
        }),
        cy = f(cy)
    );
    s.push_str("</g>");
    // The x axis spans the whole plot, its ticks sit where the percentiles are.
    let frame = Scale {
        r0: left,
        r1: right,
        ..x
    };
    x_axis(&mut s, &[], frame, top, bottom, "percentile (nines scale)");
    s.push_str("<g class=\"x-ticks\">");
    for (v, t) in &xticks {
        let px = x.at(*v);
        line(&mut s, "grid", (px, top), (px, bottom), GRID, 1.0);
        line(&mut s, "tick", (px, bottom), (px, bottom + 5.0), AXIS, 1.0);
        text(&mut s, "tick-label", px, bottom + 18.0, "middle", t);
    }
    s.push_str("</g>");
    for (i, sr, pts) in &series {
        let colour = PALETTE[i % PALETTE.len()];
        let _ = write!(s, "<g class=\"series\" data-series=\"{}\">", esc(&sr.name));
        // Consecutive banded points make one shaded polygon; a lone one, a bar.
        let mut runs: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new()];
        for &(q, _, band) in pts {
            match band {
                Some((a, b)) => runs.last_mut().unwrap().push((nines(q), a, b)),
                None => runs.push(Vec::new()),
            }
        }
        for run in runs.iter().filter(|r| !r.is_empty()) {
            if run.len() >= 2 {
                let mut p: Vec<String> = run
                    .iter()
                    .map(|&(px, _, b)| format!("{},{}", f(x.at(px)), f(ypos(b))))
                    .collect();
                p.extend(
                    run.iter()
                        .rev()
                        .map(|&(px, a, _)| format!("{},{}", f(x.at(px)), f(ypos(a)))),
                );
                let _ = write!(
                    s,
                    "<polygon class=\"band\" points=\"{}\" fill=\"{colour}\" fill-opacity=\"0.2\" stroke=\"none\"/>",
                    p.join(" ")
                );
            } else {
                let (px, a, b) = run[0];
                let _ = write!(
                    s,
                    "<rect class=\"band\" x=\"{}\" y=\"{}\" width=\"8\" height=\"{}\" fill=\"{colour}\" fill-opacity=\"0.2\"/>",
                    f(x.at(px) - 4.0),
                    f(ypos(b)),
                    f((ypos(a) - ypos(b)).max(1.0))
                );
            }
        }
        line_and_dots(&mut s, &sr.name, pts, colour, band_label, &x, &ypos, 4.5);
        s.push_str("</g>");
    }
    if legend {
        let lx = right + 24.0;
        s.push_str("<g class=\"legend\">");
        let mut ly = top + 8.0;
        for (i, sr, _) in &series {
            let colour = PALETTE[i % PALETTE.len()];
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
            ly += 22.0;
        }
        if banded {
            let _ = write!(
                s,
                "<rect class=\"band-swatch\" x=\"{}\" y=\"{}\" width=\"24\" height=\"12\" fill=\"#888\" fill-opacity=\"0.3\"/>",
                f(lx),
                f(ly - 6.0)
            );
            text(
                &mut s,
                "legend-label",
                lx + 32.0,
                ly + 4.0,
                "start",
                &truncate(band_label, 40),
            );
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

/// A series' line through its percentile points and a dot at each, with a tooltip naming the
/// value and its band (`band_label`); `radius` is the dot's.
#[allow(clippy::too_many_arguments)]
pub(super) fn line_and_dots(
    s: &mut String,
    name: &str,
    pts: &[Point],
    colour: &str,
    band_label: &str,
    x: &Scale,
    ypos: &dyn Fn(f64) -> f64,
    radius: f64,
) {
    if pts.len() >= 2 {
        let p: Vec<String> = pts
            .iter()
            .map(|&(q, v, _)| format!("{},{}", f(x.at(nines(q))), f(ypos(v))))
            .collect();
        let _ = write!(
            s,
            "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.5\" stroke-linejoin=\"round\"/>",
            p.join(" ")
        );
    }
    for &(q, v, band) in pts {
        let tip = match band {
            Some((a, b)) => format!(
                "{name} {}: {} ({band_label}: {} to {})",
                percentile_label(q),
                num(v),
                num(a),
                num(b)
            ),
            None => format!("{name} {}: {}", percentile_label(q), num(v)),
        };
        let _ = write!(
            s,
            "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"{radius}\" fill=\"{colour}\" stroke=\"#fff\" stroke-width=\"1\"><title>{}</title></circle>",
            f(x.at(nines(q))),
            f(ypos(v)),
            esc(&tip)
        );
    }
}
