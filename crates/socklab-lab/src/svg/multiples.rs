//! Percentile small multiples: one panel per series on a shared nines axis and a shared
//! latency scale, for experiments with too many cells for one readable percentile chart.

use std::fmt::Write as _;

use super::nines::{drawable, line_and_dots, log_ticks};
use super::*;

/// Height of one panel.
const PANEL_H: f64 = 250.0;

/// Small multiples of [`percentile_chart`]: a grid of panels (two columns up to four series,
/// else three), one series each in its palette colour, all on the same nines x axis and the
/// same latency axis (logarithmic when [`nines_log_y`] holds for all series together), so
/// panels compare by position. `notes[i]` (when given) is a line under series `i`'s name.
pub fn percentile_multiples(
    title: &str,
    series: &[Series],
    y_label: &str,
    band_label: &str,
    notes: &[String],
) -> String {
    let panels: Vec<(usize, &Series, Vec<Point>)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s, drawable(s)))
        .filter(|(_, _, p)| !p.is_empty())
        .collect();
    if panels.is_empty() {
        return empty("percentile", title);
    }
    let owned: Vec<Series> = panels.iter().map(|(_, s, _)| (*s).clone()).collect();
    let log_y = nines_log_y(&owned);
    let cols = if panels.len() <= 4 { 2 } else { 3 };
    let rows = panels.len().div_ceil(cols);
    let head = 64.0;
    let height = head + rows as f64 * PANEL_H + 12.0;
    let pw = (WIDTH - 24.0) / cols as f64;
    // Shared axes.
    let pts = || panels.iter().flat_map(|(_, _, p)| p.iter().copied());
    let (x0, x1) = pts().fold((nines(0.5), 1.0_f64), |(a, b), p| {
        (a.min(nines(p.0)), b.max(nines(p.0)))
    });
    let xticks: Vec<(f64, &str)> = NINES
        .iter()
        .map(|&(q, l)| (nines(q), l))
        .filter(|(n, _)| *n <= x1 + 1e-9)
        .collect();
    let (mut vlo, mut vhi) = (f64::INFINITY, 0.0_f64);
    for (_, v, band) in pts() {
        let (a, b) = band.unwrap_or((v, v));
        vlo = vlo.min(v).min(a);
        vhi = vhi.max(v).max(b);
    }
    let yticks: Vec<(f64, String)> = if log_y {
        log_ticks(vlo, vhi)
            .into_iter()
            .map(|v| (v.log10(), tick_label(v, v)))
            .collect()
    } else {
        let (t, step) = nice_ticks(0.0, vhi, 4);
        t.into_iter().map(|v| (v, tick_label(v, step))).collect()
    };
    let (yd0, yd1) = (yticks[0].0, yticks[yticks.len() - 1].0);
    let mut s = open("percentile", title, height);
    let _ = write!(
        s,
        "<text class=\"subtitle\" x=\"12\" y=\"46\" fill=\"{MUTED}\">One panel per cell, all on the same scales: y {}{}; x percentile (nines scale); shaded: {}.</text>",
        esc(y_label),
        if log_y { ", log scale" } else { "" },
        esc(band_label)
    );
    let _ = write!(
        s,
        "<g class=\"multiples\" data-scale=\"{}\">",
        if log_y { "log" } else { "linear" }
    );
    for (k, (i, sr, p)) in panels.iter().enumerate() {
        let (col, row) = (k % cols, k / cols);
        let px0 = 12.0 + col as f64 * pw;
        let py0 = head + row as f64 * PANEL_H;
        let (left, right) = (px0 + 58.0, px0 + pw - 14.0);
        let (top, bottom) = (py0 + 44.0, py0 + PANEL_H - 30.0);
        let x = Scale {
            d0: x0,
            d1: x1,
            r0: left + 8.0,
            r1: right - 8.0,
        };
        let y = Scale {
            d0: yd0,
            d1: yd1,
            r0: bottom,
            r1: top,
        };
        let ypos = |v: f64| {
            if log_y {
                y.at(v.max(1e-300).log10())
            } else {
                y.at(v)
            }
        };
        let colour = PALETTE[i % PALETTE.len()];
        let _ = write!(s, "<g class=\"panel\" data-series=\"{}\">", esc(&sr.name));
        let chars = ((pw - 20.0) / CHAR_W) as usize;
        let _ = write!(
            s,
            "<text class=\"panel-title\" x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"600\" fill=\"{colour}\">{}<title>{}</title></text>",
            f(px0 + 4.0),
            f(py0 + 16.0),
            esc(&truncate(&sr.name, chars)),
            esc(&sr.name)
        );
        if let Some(n) = notes.get(*i).filter(|n| !n.is_empty()) {
            let _ = write!(
                s,
                "<text class=\"panel-note\" x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{MUTED}\">{}<title>{}</title></text>",
                f(px0 + 4.0),
                f(py0 + 32.0),
                esc(&truncate(n, (chars as f64 * 1.08) as usize)),
                esc(n)
            );
        }
        for (t, l) in &yticks {
            let py = y.at(*t);
            line(&mut s, "grid", (left, py), (right, py), GRID, 1.0);
            text(&mut s, "tick-label", left - 5.0, py + 4.0, "end", l);
        }
        for (v, l) in &xticks {
            let px = x.at(*v);
            line(&mut s, "grid", (px, top), (px, bottom), GRID, 1.0);
            text(&mut s, "tick-label", px, bottom + 15.0, "middle", l);
        }
        line(&mut s, "axis", (left, top), (left, bottom), AXIS, 1.0);
        line(&mut s, "axis", (left, bottom), (right, bottom), AXIS, 1.0);
        let banded: Vec<(f64, f64, f64)> = p
            .iter()
            .filter_map(|&(q, _, b)| b.map(|(lo, hi)| (nines(q), lo, hi)))
            .collect();
        if banded.len() >= 2 {
            let mut poly: Vec<String> = banded
                .iter()
                .map(|&(n, _, hi)| format!("{},{}", f(x.at(n)), f(ypos(hi))))
                .collect();
            poly.extend(
                banded
                    .iter()
                    .rev()
                    .map(|&(n, lo, _)| format!("{},{}", f(x.at(n)), f(ypos(lo)))),
            );
            let _ = write!(
                s,
                "<polygon class=\"band\" points=\"{}\" fill=\"{colour}\" fill-opacity=\"0.2\" stroke=\"none\"/>",
                poly.join(" ")
            );
        }
        line_and_dots(&mut s, &sr.name, p, colour, band_label, &x, &ypos, 3.5);
        s.push_str("</g>");
    }
    s.push_str("</g></svg>");
    s
}
