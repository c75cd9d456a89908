//! The strip chart: every repetition of every row as a dot.

use std::fmt::Write as _;

use super::*;

/// Vertical offset of repetition `i` in a strip chart: deterministic, within ±6 units.
pub(super) fn jitter(i: usize) -> f64 {
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
