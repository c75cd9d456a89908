//! Plain tables rendered as aligned text or Markdown.

/// A table of strings.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows (each as long as `headers`).
    pub rows: Vec<Vec<String>>,
    /// Columns aligned left (the rest align right).
    pub left: Vec<bool>,
}

impl Table {
    /// A table with these headers; the first column aligns left, the others right.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            left: (0..headers.len()).map(|i| i == 0).collect(),
        }
    }

    /// A table with these headers (built at run time, e.g. with their units); the first column
    /// aligns left, the others right.
    pub fn from_headers(headers: Vec<String>) -> Table {
        Table {
            left: (0..headers.len()).map(|i| i == 0).collect(),
            headers,
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < w.len() {
                    w[i] = w[i].max(c.chars().count());
                }
            }
        }
        w
    }

    fn pad(&self, i: usize, s: &str, w: usize) -> String {
        let n = s.chars().count();
        let fill = " ".repeat(w.saturating_sub(n));
        if self.left.get(i).copied().unwrap_or(false) {
            format!("{s}{fill}")
        } else {
            format!("{fill}{s}")
        }
    }

    /// Aligned text with two spaces between columns.
    pub fn to_text(&self) -> String {
        let w = self.widths();
        let mut out = String::new();
        let line = |cells: &[String]| {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| self.pad(i, c, w[i]))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        out.push_str(&line(&self.headers));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// A GitHub-flavoured Markdown table; every header and cell is text
    /// ([`crate::md_escape::md_text`]: no tag, link or extra column gets through).
    pub fn to_markdown(&self) -> String {
        let esc = crate::md_escape::md_text;
        let mut out = format!(
            "| {} |\n|",
            self.headers
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        for i in 0..self.headers.len() {
            out.push_str(if self.left[i] { "---|" } else { "---:|" });
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }
}

/// Formats a number with about four significant digits, without exponent for usual ranges.
/// A summary's 95% confidence interval as a table cell: `±h` for the symmetric Student-t
/// interval, `lo–hi` for the log-scale one of positive data (see
/// [`socklab_stats::Summary::ci95`]), `-` with fewer than two values.
pub fn ci_cell(s: &socklab_stats::Summary) -> String {
    match (s.ci95(), s.ci95_t_half) {
        (Some((lo, hi)), _) if s.ci95_is_asymmetric() => format!("{}–{}", num(lo), num(hi)),
        (_, Some(h)) => format!("±{}", num(h)),
        _ => "-".into(),
    }
}

pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if (x.fract() == 0.0 && a < 1e15) || a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else if a >= 1.0 || a == 0.0 {
        format!("{x:.3}")
    } else {
        // Four significant digits.
        let digits = (3 - a.log10().floor() as i32).clamp(4, 12) as usize;
        format!("{x:.digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_text_and_markdown() {
        let mut t = Table::new(&["config", "Gbit/s"]);
        t.row(vec!["a|b".into(), num(12.3456)]);
        t.row(vec!["long name".into(), num(0.5)]);
        assert_eq!(
            t.to_text(),
            "config     Gbit/s\na|b         12.35\nlong name  0.5000\n"
        );
        assert_eq!(
            t.to_markdown(),
            "| config | Gbit/s |\n|---|---:|\n| a\\|b | 12.35 |\n| long name | 0.5000 |\n"
        );
        assert_eq!(num(1234.5), "1234");
        assert_eq!(num(512.0), "512");
        assert_eq!(num(0.000528), "0.0005280");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::NAN), "-");
    }
}
