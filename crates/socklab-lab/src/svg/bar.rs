//! The bar chart: one bar per row with its 95% confidence interval.

use std::fmt::Write as _;

use super::*;

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
