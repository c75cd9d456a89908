//! The bar chart: one bar per row with its 95% confidence interval.

use std::fmt::Write as _;

use super::*;

/// The value axis of a bar chart of `rows`, `(lo, hi)` before rounding to ticks: from 0 (or
/// the lowest negative mean) to the highest mean, widened to take in each confidence
/// interval only as far as three times the means' own span on either side (so the shortest
/// of comparable bars keeps a quarter of the plot). An interval past that
/// (at n = 2 one can span orders of magnitude) is drawn clipped with an arrow, so it never
/// flattens the bars.
pub fn bar_domain(rows: &[BarRow]) -> (f64, f64) {
    let means = rows.iter().map(|r| r.mean).filter(|m| m.is_finite());
    let (mlo, mhi) = means.fold((0.0_f64, 0.0_f64), |(a, b), m| (a.min(m), b.max(m)));
    let span = (mhi - mlo).max(f64::MIN_POSITIVE);
    let (limit_lo, limit_hi) = (
        if mlo < 0.0 { mlo - 3.0 * span } else { 0.0 },
        mhi + 3.0 * span,
    );
    let (mut lo, mut hi) = (mlo, mhi);
    for (a, b) in rows.iter().filter_map(|r| r.ci) {
        if a.is_finite() && b.is_finite() {
            lo = lo.min(a.min(b).max(limit_lo));
            hi = hi.max(a.max(b).min(limit_hi));
        }
    }
    (lo, hi)
}

/// A number for a label: [`num`], or 3 significant digits in scientific notation when it is
/// huge or tiny (an interval end at small n: `1.36e17`, `2.00e-7`).
fn compact(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e7 || v.abs() < 1e-4) {
        format!("{v:.2e}")
    } else {
        num(v)
    }
}

/// An arrow head at `(x, y)` pointing right (`dir` 1) or left (-1): a clipped whisker.
fn arrow(s: &mut String, x: f64, y: f64, dir: f64) {
    let _ = write!(
        s,
        "<polygon class=\"clip-arrow\" points=\"{},{} {},{} {},{}\" fill=\"{TEXT}\"/>",
        f(x + 6.0 * dir),
        f(y),
        f(x - 2.0 * dir),
        f(y - 6.0),
        f(x - 2.0 * dir),
        f(y + 6.0)
    );
}

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
    let (lo, hi) = bar_domain(&rows.iter().map(|r| (*r).clone()).collect::<Vec<_>>());
    let clipped = rows
        .iter()
        .any(|r| ci(r).is_some_and(|(a, b)| a < lo || b > hi));
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
    if clipped {
        entries.push((
            Box::new(|s: &mut String, x: f64, y: f64| {
                line(s, "", (x, y), (x + 8.0, y), TEXT, 1.5);
                arrow(s, x + 10.0, y, 1.0);
            }),
            "CI clipped at the axis".into(),
        ));
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
                "{}: {} (95% CI {} to {}{})",
                r.label,
                num(r.mean),
                num(a),
                num(b),
                if a < x.d0 || b > x.d1 {
                    ", clipped at the axis"
                } else {
                    ""
                }
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
        let mut value = num(r.mean);
        if let Some((a, b)) = ci(r) {
            // A whisker past the axis stops at its edge with an arrow (the axis follows the
            // means, so one wild interval at small n cannot flatten every bar).
            let (ca, cb) = (a.max(x.d0), b.min(x.d1));
            let (xa, xb) = (x.at(ca), x.at(cb));
            let cut = a < x.d0 || b > x.d1;
            s.push_str(if cut {
                "<g class=\"whisker clipped\">"
            } else {
                "<g class=\"whisker\">"
            });
            line(&mut s, "ci", (xa, yc), (xb, yc), TEXT, 1.5);
            if a < x.d0 {
                arrow(&mut s, xa, yc, -1.0);
            } else {
                line(&mut s, "cap", (xa, yc - 6.0), (xa, yc + 6.0), TEXT, 1.5);
            }
            if b > x.d1 {
                arrow(&mut s, xb, yc, 1.0);
            } else {
                line(&mut s, "cap", (xb, yc - 6.0), (xb, yc + 6.0), TEXT, 1.5);
            }
            s.push_str("</g>");
            end = end.max(xb);
            if cut {
                value = format!("{value} (CI {} to {}, clipped)", compact(a), compact(b));
            }
        }
        if end + 6.0 + value.chars().count() as f64 * CHAR_W > WIDTH - 4.0 {
            // No room right of a whisker at the edge: the text ends at the edge, above the row.
            text(&mut s, "value", WIDTH - 4.0, yc - 9.0, "end", &value);
        } else {
            text(&mut s, "value", end + 6.0, yc + 4.0, "start", &value);
        }
    }
    s.push_str("</g>");
    line(&mut s, "axis", (left, top - 6.0), (left, bottom), AXIS, 1.0);
    s.push_str("</svg>");
    s
}
