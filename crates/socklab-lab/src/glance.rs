//! The report's first screen: one compact table, right under the title, of each experiment's
//! headline figure ([`crate::headline`]) and each seed finding's verdict with the statistic
//! that decided it ([`crate::reproduce`]), every row linking to its section. It stays short
//! enough for a first screen (about [`MAX_ROWS`] rows): when there are more findings, those
//! left undecided are folded into one row per experiment, then the rest into a closing row
//! that counts them; the counts of every verdict head the table either way.

use std::fmt::Write as _;

use crate::headline::headline;
use crate::md_escape::md_text;
use crate::model::stats::ExperimentStats;
use crate::reproduce::{comparison, Finding, More, Verdict};
use crate::svg::esc;

/// The most rows the table shows (what fits a 1280×800 first screen under the title).
pub const MAX_ROWS: usize = 20;

/// The colour of the table's frame (the screenshot test looks for it in the first screen).
pub const GLANCE_COLOUR: &str = "#1f5fa8";

/// The CSS of the table (added to the report's).
pub const CSS: &str = r#"
section.glance { margin: 0.6em 0 1.2em; }
section.glance p.verdict-counts { margin: 0.3em 0; color: #333; }
table.glance { border: 2px solid #1f5fa8; font-size: 13px; line-height: 1.3; }
table.glance th, table.glance td { padding: 2px 8px; white-space: nowrap; }
table.glance td.what, table.glance td.detail { max-width: 34em; overflow: hidden; text-overflow: ellipsis; }
table.glance tr.experiment td { font-weight: 600; border-top: 1px solid #c9ced6; }
table.glance tr.experiment td.detail { font-weight: normal; }
table.glance tr.finding td.what { padding-left: 1.6em; }
.v-reproduced { color: #1b7a33; } .v-contradicted { color: #b3261e; }
.v-not-reproduced { color: #8a5a00; } .v-not-comparable { color: #555; }
"#;

/// What a row is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An experiment's headline figure.
    Experiment,
    /// One seed finding's verdict.
    Finding(Verdict),
    /// Several findings folded into one row (of one verdict, or `None`: of several).
    Folded(Option<Verdict>),
}

/// One row of the table: what (linked to `anchor`), the figure or verdict, and where it
/// comes from or the statistic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// What the row is.
    pub kind: Kind,
    /// The experiment or finding, in words.
    pub what: String,
    /// The headline figure or the verdict.
    pub result: String,
    /// The cell and n, or the statistic and what would decide it.
    pub detail: String,
    /// The id of the section it links to (`exp-3`, `seed-3`).
    pub anchor: String,
}

/// The table: verdict counts and rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glance {
    /// Findings per verdict, in [`VERDICTS`] order.
    pub counts: [usize; 4],
    /// Of the not-comparable findings, those undecided for want of repetitions.
    pub want_reps: usize,
    /// The rows, experiments in report order, each followed by its findings.
    pub rows: Vec<Row>,
}

/// The verdicts in the order they are counted.
pub const VERDICTS: [Verdict; 4] = [
    Verdict::Reproduced,
    Verdict::Contradicted,
    Verdict::NotReproduced,
    Verdict::NotComparable,
];

/// The claim of a finding, short: up to its first aside (` (`, `: `), at most 90 characters.
fn short_claim(claim: &str) -> String {
    let cut = [" (", ": ", "; "]
        .iter()
        .filter_map(|p| claim.find(p))
        .min()
        .unwrap_or(claim.len());
    let s = claim[..cut].trim();
    if s.chars().count() > 90 {
        let t: String = s.chars().take(89).collect();
        format!("{t}…")
    } else {
        s.to_string()
    }
}

/// A finding's statistic: the comparison that decided it (else its reason), and what would
/// decide it when repetitions would.
fn finding_detail(f: &Finding) -> String {
    let base = f.stat.clone().unwrap_or_else(|| short_claim(&f.why));
    match f.more {
        Some(m) => format!("{}; {base}", m.text()),
        None => base,
    }
}

/// The largest need of `findings`, as text (`needs about 12 repetitions per cell`).
fn largest_need(findings: &[&Finding]) -> Option<String> {
    let rank = |m: More| match m {
        More::About(n) | More::AtLeast(n) => n,
        More::NotByReps => usize::MAX,
    };
    findings
        .iter()
        .filter_map(|f| f.more)
        .max_by_key(|m| rank(*m))
        .map(More::text)
}

/// The table of experiments `stats` (in report order).
pub fn glance(stats: &[ExperimentStats]) -> Glance {
    let mut counts = [0; 4];
    let mut want_reps = 0;
    // Per experiment: its row and its findings.
    let mut groups: Vec<(i64, Row, String, Vec<Finding>)> = Vec::new();
    for st in stats {
        let e = &st.experiment;
        let h = headline(st);
        let row = Row {
            kind: Kind::Experiment,
            what: format!("{} (experiment {})", e.name, e.id),
            result: h.figure_and_link(),
            detail: h.detail(),
            anchor: format!("exp-{}", e.id),
        };
        let (seed, findings) = comparison(st).map_or((String::new(), Vec::new()), |c| {
            (c.seed.to_string(), c.findings)
        });
        for f in &findings {
            if let Some(i) = VERDICTS.iter().position(|v| *v == f.verdict) {
                counts[i] += 1;
            }
            want_reps += usize::from(f.more.is_some());
        }
        groups.push((e.id, row, seed, findings));
    }
    let finding_row = |id: i64, seed: &str, f: &Finding| Row {
        kind: Kind::Finding(f.verdict),
        what: format!("seed {seed}: {}", short_claim(&f.claim)),
        result: f.verdict.word().to_string(),
        detail: finding_detail(f),
        anchor: format!("seed-{id}"),
    };
    let total = |fold: bool| -> usize {
        groups
            .iter()
            .map(|(_, _, _, fs)| {
                let nc = fs
                    .iter()
                    .filter(|f| f.verdict == Verdict::NotComparable)
                    .count();
                1 + if fold && nc > 1 {
                    fs.len() - nc + 1
                } else {
                    fs.len()
                }
            })
            .sum()
    };
    let fold = total(false) > MAX_ROWS;
    let mut rows = Vec::new();
    for (id, row, seed, findings) in &groups {
        let id = *id;
        rows.push(row.clone());
        let nc: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.verdict == Verdict::NotComparable)
            .collect();
        for f in findings {
            if fold && nc.len() > 1 && f.verdict == Verdict::NotComparable {
                continue;
            }
            rows.push(finding_row(id, seed, f));
        }
        if fold && nc.len() > 1 {
            let why = largest_need(&nc)
                .map(|n| {
                    format!(
                        "{} undecided for want of repetitions: the neediest {n}",
                        nc.iter().filter(|f| f.more.is_some()).count()
                    )
                })
                .unwrap_or_else(|| "see the section for why".into());
            rows.push(Row {
                kind: Kind::Folded(Some(Verdict::NotComparable)),
                what: format!("seed {seed}: {} findings", nc.len()),
                result: Verdict::NotComparable.word().to_string(),
                detail: why,
                anchor: format!("seed-{id}"),
            });
        }
    }
    // Still too long: keep every experiment and the first findings, count the rest.
    if rows.len() > MAX_ROWS {
        let experiments = rows.iter().filter(|r| r.kind == Kind::Experiment).count();
        let room = MAX_ROWS.saturating_sub(experiments + 1);
        // The findings kept: contradicted first, then not reproduced, reproduced, undecided.
        let mut order: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].kind != Kind::Experiment)
            .collect();
        order.sort_by_key(|&i| priority(&rows[i].kind));
        let keep: Vec<usize> = order.iter().copied().take(room).collect();
        let hidden = order.len() - keep.len();
        let first_hidden = order.get(room).map(|&i| rows[i].anchor.clone());
        let mut i = 0;
        rows.retain(|r| {
            i += 1;
            r.kind == Kind::Experiment || keep.contains(&(i - 1))
        });
        if hidden > 0 {
            rows.push(Row {
                kind: Kind::Folded(None),
                what: format!("{hidden} more rows of findings"),
                result: "see their sections".into(),
                detail: "each experiment's section lists its seed's findings with their statistics"
                    .into(),
                anchor: first_hidden.unwrap_or_default(),
            });
        }
    }
    Glance {
        counts,
        want_reps,
        rows,
    }
}

/// Which findings stay when not all fit (lower first): the verdicts that contradict the
/// seed or fail to reproduce it, then those that reproduce it, then the undecided.
fn priority(k: &Kind) -> u8 {
    match k {
        Kind::Finding(Verdict::Contradicted) => 0,
        Kind::Finding(Verdict::NotReproduced) => 1,
        Kind::Finding(Verdict::Reproduced) => 2,
        _ => 3,
    }
}

impl Glance {
    /// `3 reproduced, 1 contradicted, 0 not reproduced, 5 not comparable (4 for want of
    /// repetitions)`; `None` without findings.
    pub fn counts_text(&self) -> Option<String> {
        if self.counts.iter().sum::<usize>() == 0 {
            return None;
        }
        let parts: Vec<String> = VERDICTS
            .iter()
            .zip(self.counts)
            .map(|(v, n)| format!("{n} {}", v.word()))
            .collect();
        let reps = if self.want_reps > 0 {
            format!(" ({} for want of repetitions)", self.want_reps)
        } else {
            String::new()
        };
        Some(format!("Seed findings: {}{reps}.", parts.join(", ")))
    }

    /// The table as HTML: a `<section class="glance">` with the counts and the table.
    pub fn html(&self) -> String {
        let mut out = String::from("<section class=\"glance\" id=\"glance\">\n");
        if let Some(c) = self.counts_text() {
            let _ = writeln!(out, "<p class=\"verdict-counts\">{}</p>", esc(&c));
        }
        out.push_str("<div class=\"table-wrap\"><table class=\"glance\">\n<thead><tr><th>experiment or seed finding</th><th>headline figure (95% CI) or verdict</th><th>cell and n, or statistic</th></tr></thead>\n<tbody>\n");
        for r in &self.rows {
            let (class, vclass) = match &r.kind {
                Kind::Experiment => ("experiment", String::new()),
                Kind::Finding(v) | Kind::Folded(Some(v)) => (
                    "finding",
                    format!(" class=\"v-{}\"", v.word().replace(' ', "-")),
                ),
                Kind::Folded(None) => ("finding", String::new()),
            };
            let _ = writeln!(
                out,
                "<tr class=\"{class}\"><td class=\"what\" title=\"{w}\"><a href=\"#{a}\">{w}</a></td><td{vclass}>{res}</td><td class=\"detail\" title=\"{d}\">{d}</td></tr>",
                w = esc(&r.what),
                a = esc(&r.anchor),
                res = esc(&r.result),
                d = esc(&r.detail),
            );
        }
        out.push_str("</tbody>\n</table></div>\n</section>\n");
        out
    }

    /// The table as Markdown: the counts, then a table whose rows link to their sections.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        if let Some(c) = self.counts_text() {
            let _ = writeln!(out, "{}\n", md_text(&c));
        }
        out.push_str("| experiment or seed finding | headline figure (95% CI) or verdict | cell and n, or statistic |\n|---|---|---|\n");
        for r in &self.rows {
            let what = if r.kind == Kind::Experiment {
                format!("**[{}](#{})**", md_text(&r.what), r.anchor)
            } else {
                format!("[{}](#{})", md_text(&r.what), r.anchor)
            };
            let _ = writeln!(
                out,
                "| {what} | {} | {} |",
                md_text(&r.result),
                md_text(&r.detail)
            );
        }
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::reproduce::tests::{plan, stats, writev_stats};
    use crate::testkit::{lab, reps};

    fn memcpy_stats(name: &str, id: i64) -> ExperimentStats {
        let l = lab(
            "memcpy",
            Params::new().with("bytes", "1M"),
            "size",
            &["1K", "2K"],
            &[
                reps("gbps", &[10.0, 10.2, 9.8, 10.1, 9.9]),
                reps("gbps", &[20.0, 20.2, 19.8, 20.1, 19.9]),
            ],
        );
        let mut st = crate::summary::experiment_stats(&l.store, l.id).unwrap();
        st.experiment.name = name.into();
        st.experiment.id = id;
        st
    }

    #[test]
    fn experiments_then_their_findings_each_linked_to_its_section() {
        let mut writev = writev_stats(4, false);
        writev.experiment.id = 2;
        let g = glance(&[memcpy_stats("copies", 1), writev]);
        let kinds: Vec<&Kind> = g.rows.iter().map(|r| &r.kind).collect();
        assert_eq!(kinds[0], &Kind::Experiment);
        assert_eq!(g.rows[0].what, "copies (experiment 1)");
        assert_eq!(g.rows[0].anchor, "exp-1");
        assert!(
            g.rows[0].result.starts_with("20 Gbit/s ±"),
            "{:?}",
            g.rows[0]
        );
        assert_eq!(g.rows[0].detail, "size=2K, best, n=5");
        assert_eq!(g.rows[1].what, "writev (experiment 2)");
        // Seed 003's five findings follow, undecided at n = 4, each saying what would decide it.
        let findings = &g.rows[2..];
        assert_eq!(findings.len(), 5, "{findings:#?}");
        for r in findings {
            assert_eq!(r.kind, Kind::Finding(Verdict::NotComparable));
            assert_eq!(r.anchor, "seed-2");
            assert!(r.what.starts_with("seed 003: "), "{}", r.what);
            assert!(r.detail.starts_with("needs about "), "{}", r.detail);
            assert!(r.detail.contains(" vs "), "{}", r.detail);
        }
        let claim = "many write()s give the least throughput, below writev() and one write() at every nbufs x bufsize";
        let short: String = claim.chars().take(89).collect();
        assert_eq!(findings[0].what, format!("seed 003: {short}…"));
        assert_eq!(g.counts, [0, 0, 0, 5]);
        assert_eq!(
            g.counts_text().unwrap(),
            "Seed findings: 0 reproduced, 0 contradicted, 0 not reproduced, 5 not comparable (5 for want of repetitions)."
        );
        // Decided: the verdict and the comparison that decided it.
        let g = glance(&[writev_stats(10, false)]);
        assert_eq!(g.rows[1].result, "reproduced");
        assert!(g.rows[1].detail.contains("p<0.001"), "{}", g.rows[1].detail);
        assert_eq!(g.rows[2].result, "contradicted");
    }

    #[test]
    fn many_findings_fold_to_fit_the_first_screen() {
        // Eight seed experiments of five undecided findings each: 48 rows unfolded.
        let many: Vec<ExperimentStats> = (1..=8)
            .map(|id| {
                let mut st = writev_stats(4, false);
                st.experiment.id = id;
                st
            })
            .collect();
        let g = glance(&many);
        assert!(g.rows.len() <= MAX_ROWS, "{} rows", g.rows.len());
        assert_eq!(
            g.rows.iter().filter(|r| r.kind == Kind::Experiment).count(),
            8,
            "every experiment keeps its row"
        );
        let folded = &g.rows[1];
        assert_eq!(folded.kind, Kind::Folded(Some(Verdict::NotComparable)));
        assert_eq!(folded.what, "seed 003: 5 findings");
        assert!(
            folded
                .detail
                .starts_with("5 undecided for want of repetitions: the neediest needs about "),
            "{}",
            folded.detail
        );
        assert_eq!(g.counts, [0, 0, 0, 40]);
        // Forty experiments: the findings that do not fit are counted in a closing row.
        let lots: Vec<ExperimentStats> = (1..=30)
            .map(|id| {
                let mut st = stats(&plan("writev.toml", false), 10, |_| {
                    vec![("gbps", 4.0), ("reads", 20000.0)]
                });
                st.experiment.id = id;
                st
            })
            .collect();
        let g = glance(&lots);
        assert_eq!(
            g.rows.last().unwrap().kind,
            Kind::Folded(None),
            "{:#?}",
            g.rows.last()
        );
    }

    #[test]
    fn the_frame_is_drawn_in_the_colour_the_screenshot_test_looks_for() {
        assert!(CSS.contains(&format!(
            "table.glance {{ border: 2px solid {GLANCE_COLOUR};"
        )));
    }

    #[test]
    fn names_are_escaped_in_html_and_markdown() {
        let st = memcpy_stats("<script>alert(1)</script> [x](javascript:y) a|b", 7);
        let g = glance(&[st]);
        let html = g.html();
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("<a href=\"#exp-7\">&lt;script&gt;"), "{html}");
        let md = g.markdown();
        // `\]` is an escaped bracket: no link.
        let unescaped = md.replace("\\]", "");
        assert!(
            !md.contains("<script") && !unescaped.contains("](javascript"),
            "{md}"
        );
        assert!(md.contains("**[&lt;script&gt;alert(1)&lt;/script&gt; \\[x\\](javascript:y) a\\|b (experiment 7)](#exp-7)**"), "{md}");
    }

    /// The Markdown twin opens with the table: right after the title and generated line,
    /// before the host and the experiments.
    #[test]
    fn the_markdown_report_opens_with_the_table() {
        let l = lab(
            "memcpy",
            Params::new().with("bytes", "1M"),
            "size",
            &["1K", "2K"],
            &[
                reps("gbps", &[10.0, 10.2, 9.8]),
                reps("gbps", &[20.0, 20.2, 19.8]),
            ],
        );
        let md = crate::output::markdown_report(&l.store, &[l.id], "t").unwrap();
        let table = md
            .find("| experiment or seed finding |")
            .unwrap_or_else(|| panic!("{md}"));
        let generated = md.find("Generated by socklab").unwrap();
        assert!(
            generated < table && table < md.find("## Host").unwrap(),
            "{md}"
        );
        let row = format!(
            "| **[made up (experiment {id})](#exp-{id})** | 20 Gbit/s ±",
            id = l.id
        );
        assert!(md.contains(&row), "{md}");
        assert!(md.contains("| size=2K, top mean, n=3 |"), "{md}");
        // The link's target exists.
        assert!(
            md.contains(&format!("<a id=\"exp-{}\"></a>\n\n## made up", l.id)),
            "{md}"
        );
    }
}
