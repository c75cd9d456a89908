//! A comparison as text (a table per pair of cells and the gate's line last), as one JSON
//! object, and as a section of the Markdown and HTML reports (everything escaped).

use std::fmt::Write as _;

use serde_json::json;
use socklab_stats::RatioInterval;

use super::{Compared, Comparison, Verdict};
use crate::md_escape::md_text;
use crate::svg::esc;
use crate::table::{num, Table};

/// A p-value in three significant digits (`<0.001` below).
fn p(x: Option<f64>) -> String {
    match x {
        Some(v) if v < 0.001 => "<0.001".into(),
        Some(v) => format!("{v:.3}"),
        None => "-".into(),
    }
}

fn signed(x: f64) -> String {
    if x > 0.0 {
        format!("+{}", num(x))
    } else {
        num(x)
    }
}

fn with_unit(x: Option<f64>, unit: &str) -> String {
    match x {
        Some(v) if unit.is_empty() => num(v),
        Some(v) => format!("{} {unit}", num(v)),
        None => "-".into(),
    }
}

/// The change cell: `0.331 [0.310, 0.352]`, `1.02 [unbounded]`, `+3.20 us [+1.00, +5.40]`.
fn change(m: &Compared) -> String {
    if m.by_difference {
        return match (m.diff, m.diff_lo, m.diff_hi) {
            (Some(d), Some(lo), Some(hi)) => {
                format!("{} {} [{}, {}]", signed(d), m.unit, signed(lo), signed(hi))
            }
            _ => "-".into(),
        };
    }
    match (m.ratio, m.ratio_interval) {
        (Some(r), _) if !r.is_finite() => "-".into(),
        (Some(r), Some(RatioInterval::Bounded { lo, hi })) => {
            format!("{} [{}, {}]", num(r), num(lo), num(hi))
        }
        (Some(r), Some(RatioInterval::Unbounded)) => {
            format!("{} [unbounded: A's mean is not clear of 0]", num(r))
        }
        _ => "-".into(),
    }
}

fn verdict(m: &Compared) -> String {
    match (m.verdict, m.n_to_decide) {
        (Verdict::CannotTell, Some(n)) => {
            format!("cannot tell at this n (n={n} per side would decide if this held)")
        }
        (v, _) => v.text().to_string(),
    }
}

fn gate(m: &Compared) -> &'static str {
    match (m.gated, m.gate_failed) {
        (_, true) => "FAIL",
        (true, false) => "gated",
        (false, false) => "",
    }
}

/// The table of one pair of cells.
fn cell_table(metrics: &[Compared]) -> Table {
    let mut t = Table::new(&[
        "metric",
        "better",
        "A mean",
        "B mean",
        "B/A [95% CI]",
        "Welch p",
        "MW p",
        "n A/B",
        "verdict",
        "gate",
    ]);
    t.left = vec![
        true, true, false, false, true, false, false, false, true, true,
    ];
    for m in metrics {
        t.row(vec![
            m.metric.clone(),
            m.better.to_string(),
            with_unit(m.mean_a, m.unit),
            with_unit(m.mean_b, m.unit),
            change(m),
            p(m.welch_p),
            p(m.mann_whitney_p),
            format!("{}/{}", m.n_a, m.n_b),
            verdict(m),
            gate(m).to_string(),
        ]);
    }
    t
}

fn heading(c: &super::CellComparison) -> String {
    if c.label_a == c.label_b && c.label_a == c.workload {
        c.workload.clone()
    } else if c.label_a == c.label_b {
        format!("{} ({})", c.label_a, c.workload)
    } else {
        format!("{} vs {} ({})", c.label_a, c.label_b, c.workload)
    }
}

/// The gate's outcome, one line (the last the text prints).
pub fn gate_line(c: &Comparison) -> String {
    let Some(t) = c.threshold_pct else {
        return "gate: none (give `threshold` such as 5% to fail on a regression)".into();
    };
    let failures = c.failures();
    if failures.is_empty() {
        format!("gate: pass: no gated metric is significantly worse by more than {t}% (Welch and Mann–Whitney p < 0.05, n >= 5 per side)")
    } else {
        format!(
            "gate: FAIL: significantly worse by more than {t}%: {}",
            failures.join(", ")
        )
    }
}

/// The rules, a note under the tables.
pub const RULES: &str = "B/A: ratio of means with Fieller's 95% interval (difference metrics: B − A in their unit with Welch's interval); a verdict needs n >= 5 per side and Welch and Mann–Whitney (MW) both at p < 0.05; faster/slower follow the metric's better direction, a metric with none is \"changed\"; gated: checked by the gate (the primary metric and latency unless `metric` names others).";

/// The comparison for people.
pub fn text(c: &Comparison) -> String {
    let mut out = format!("A: {}\nB: {}\n", c.a, c.b);
    if !c.ignore.is_empty() {
        let _ = writeln!(out, "ignored keys: {}", c.ignore.join(", "));
    }
    for cell in &c.cells {
        let _ = writeln!(out, "\n{}", heading(cell));
        out.push_str(&cell_table(&cell.metrics).to_text());
    }
    for (side, labels) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !labels.is_empty() {
            let _ = writeln!(
                out,
                "\nonly in {side} (not compared): {}",
                labels.join(", ")
            );
        }
    }
    let _ = writeln!(out, "\n{RULES}\n{}", gate_line(c));
    out
}

/// The comparison as one JSON object.
pub fn json(c: &Comparison) -> serde_json::Value {
    let mut v = serde_json::to_value(c).unwrap_or_default();
    v["schema"] = json!("socklab.compare/1");
    v["gate"] = json!({
        "threshold_pct": c.threshold_pct,
        "failed": c.failures(),
        "outcome": match (c.threshold_pct, c.gate_failed()) {
            (None, _) => "none",
            (Some(_), false) => "pass",
            (Some(_), true) => "fail",
        },
    });
    v
}

/// The comparison as a Markdown section of the report.
pub fn markdown(c: &Comparison) -> String {
    let mut out = format!(
        "## Comparison: {} (A) with {} (B)\n\n",
        md_text(&c.a),
        md_text(&c.b)
    );
    for cell in &c.cells {
        let _ = writeln!(out, "### {}\n", md_text(&heading(cell)));
        out.push_str(&cell_table(&cell.metrics).to_markdown());
        out.push('\n');
    }
    for (side, labels) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !labels.is_empty() {
            let _ = writeln!(
                out,
                "Only in {side} (not compared): {}.\n",
                md_text(&labels.join(", "))
            );
        }
    }
    let _ = writeln!(out, "{}\n\n{}\n", md_text(RULES), md_text(&gate_line(c)));
    out
}

/// The comparison as an HTML section of the report.
pub fn html(c: &Comparison) -> String {
    let mut out = format!(
        "<section id=\"compare\">\n<h2>Comparison: {} (A) with {} (B)</h2>\n",
        esc(&c.a),
        esc(&c.b)
    );
    for cell in &c.cells {
        let _ = writeln!(out, "<h3>{}</h3>", esc(&heading(cell)));
        let t = cell_table(&cell.metrics);
        out.push_str("<div class=\"table-wrap\"><table class=\"compare\">\n<thead><tr>");
        for h in &t.headers {
            let _ = write!(out, "<th>{}</th>", esc(h));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for r in &t.rows {
            out.push_str("<tr>");
            for x in r {
                let _ = write!(out, "<td>{}</td>", esc(x));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table></div>\n");
    }
    for (side, labels) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !labels.is_empty() {
            let _ = writeln!(
                out,
                "<p>Only in {side} (not compared): {}.</p>",
                esc(&labels.join(", "))
            );
        }
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">{}</p>\n<p><strong>{}</strong></p>\n</section>",
        esc(RULES),
        esc(&gate_line(c))
    );
    out
}

/// Adds the comparison's section to a written report: before the HTML footer (or its end)
/// and at the end of the Markdown.
pub fn add_to_report(c: &Comparison, html_text: &str, md: &str) -> (String, String) {
    let section = html(c);
    let html_out = match html_text.rfind("<footer>") {
        Some(i) => format!("{}{section}{}", &html_text[..i], &html_text[i..]),
        None => format!("{html_text}{section}"),
    };
    (html_out, format!("{md}\n{}", markdown(c)))
}

/// Adds the comparison's section to the report files `html_path` and `md_path`.
pub fn write_into_report(
    c: &Comparison,
    html_path: &std::path::Path,
    md_path: &std::path::Path,
) -> Result<(), crate::LabError> {
    let io = |p: &std::path::Path, source| crate::LabError::Io {
        context: format!("cannot add the comparison to '{}'", p.display()),
        source,
    };
    let h = std::fs::read_to_string(html_path).map_err(|e| io(html_path, e))?;
    let m = std::fs::read_to_string(md_path).map_err(|e| io(md_path, e))?;
    let (h, m) = add_to_report(c, &h, &m);
    std::fs::write(html_path, h).map_err(|e| io(html_path, e))?;
    std::fs::write(md_path, m).map_err(|e| io(md_path, e))
}
