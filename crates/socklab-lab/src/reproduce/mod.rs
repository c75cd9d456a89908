//! Each suite's experiment next to the seed it reproduces: the seed's published figures beside
//! ours (mean, 95% CI, n), and one verdict per finding of the seed: reproduced, contradicted
//! (with the statistics), not reproduced (no significant difference where the seed reports
//! one), or not comparable (and why).
//!
//! Only what carries across machines is judged: orderings, ratios and crossovers. Absolute
//! figures sit side by side but are never judged (other hardware, other decades, other
//! paths). Every judgement uses the product's statistics: Welch's test (with the
//! Mann–Whitney U test as well when a cell's repetitions are bimodal), no call with fewer than
//! [`MIN_N_VERDICT`] repetitions on a side, repetitions marked invalid left out as everywhere
//! else. A finding that needs several comparisons to be *reproduced* needs each of them
//! significant at 5 %; one that a single comparison out of `k` would *contradict* needs that
//! comparison significant at 5 % / k (Bonferroni).
//!
//! Which seed an experiment reproduces: its name (the `name` of the suite's experiment file,
//! stored with every experiment since the first store) together with its cells' workload, so
//! stores written before this module get their comparison too. An experiment of another name,
//! or of that name but another workload, gets none.

mod published;
mod s000;
mod s001;
mod s002;
mod s003;
mod s004;
#[cfg(test)]
pub(crate) mod tests;

use std::fmt::Write as _;

use socklab_stats::{bimodal, mann_whitney, welch, MannWhitney, Welch};
use socklab_units::parse_size;

use crate::model::stats::ExperimentStats;
use crate::svg::esc;
use crate::table::{ci_cell, num, Table};
use crate::workload::judge::MIN_N_VERDICT;

/// What a finding came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Our data shows what the seed reports, significantly.
    Reproduced,
    /// Our data shows the opposite, significantly.
    Contradicted,
    /// The seed reports a difference; ours is not significant.
    NotReproduced,
    /// No judgement possible (why is in the finding).
    NotComparable,
}

impl Verdict {
    /// The word printed.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Contradicted => "contradicted",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NotComparable => "not comparable",
        }
    }

    /// The CSS class of its line.
    fn class(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Contradicted => "contradicted",
            Verdict::NotReproduced => "not-reproduced",
            Verdict::NotComparable => "not-comparable",
        }
    }
}

/// One finding of a seed and what our data says of it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The seed's finding, in one sentence.
    pub claim: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why: the statistics, or what is missing.
    pub why: String,
    /// The comparison that decided it, in short (`a 3.1 vs b 2.0: +55.0%, p<0.001, n=5`), when
    /// one did.
    pub stat: Option<String>,
    /// What would decide it, when it is undecided for want of repetitions.
    pub more: Option<More>,
}

/// What would decide a finding left undecided for want of repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum More {
    /// About this many repetitions per cell (two-sample t-test, α = 0.05, power 0.8, at the
    /// effect and spread observed; at least [`MIN_N_VERDICT`]).
    About(usize),
    /// At least this many (no spread to estimate from yet).
    AtLeast(usize),
    /// The observed effect is about zero: more repetitions would not decide it.
    NotByReps,
}

impl More {
    /// `needs about 12 repetitions per cell`, `cannot be decided by repetitions`.
    pub fn text(self) -> String {
        match self {
            More::About(n) => format!("needs about {n} repetitions per cell"),
            More::AtLeast(n) => format!("needs at least {n} repetitions per cell"),
            More::NotByReps => {
                "cannot be decided by repetitions (the observed effect is about zero)".into()
            }
        }
    }

    /// How much it asks, to find the largest need (one repetitions cannot decide is largest).
    fn rank(self) -> usize {
        match self {
            More::About(n) | More::AtLeast(n) => n,
            More::NotByReps => usize::MAX,
        }
    }
}

impl Finding {
    fn new(claim: &str, verdict: Verdict, why: impl Into<String>) -> Finding {
        Finding {
            claim: claim.to_string(),
            verdict,
            why: why.into(),
            stat: None,
            more: None,
        }
    }

    /// This finding with its deciding comparison `d` (and what would decide it).
    fn by(mut self, d: Option<&Diff>, more: Option<More>) -> Finding {
        self.stat = d.map(Diff::short);
        self.more = more;
        self
    }

    /// The one line: `reproduced: claim (why)`.
    pub fn line(&self) -> String {
        format!("{}: {} — {}", self.verdict.word(), self.claim, self.why)
    }
}

/// An experiment beside its seed.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The seed's number, `000` to `004`.
    pub seed: &'static str,
    /// Where the figures are in the seed (file and place).
    pub source: &'static str,
    /// Why absolute figures are not judged, and what is.
    pub note: String,
    /// The seed's published figures beside ours.
    pub table: Table,
    /// One verdict per finding.
    pub findings: Vec<Finding>,
}

/// The comparison of `st` with the seed it reproduces, if it reproduces one.
pub fn comparison(st: &ExperimentStats) -> Option<Comparison> {
    let workload = st.cells.first()?.cell.workload.as_str();
    match (st.experiment.name.as_str(), workload) {
        ("writev", "bulk") => Some(s003::writev(st)),
        ("bufsize", "bulk" | "pipe") => Some(s000::bufsize(st)),
        ("memcpy", "memcpy") => Some(s000::memcpy(st)),
        ("states", "states") => Some(s000::states(st)),
        ("sockopts", "pingpong") => Some(s001::sockopts(st)),
        ("fastopen", "pingpong") => Some(s001::fastopen(st)),
        ("designs", "load") => Some(s002::designs(st)),
        ("designs-http", "load") => Some(s002::designs_http(st)),
        ("lossy", "transfer") => Some(s004::lossy(st)),
        _ => None,
    }
}

/// The `<div class="seed">` of `st`'s section (nothing when it reproduces no seed).
pub fn seed_html(out: &mut String, st: &ExperimentStats) {
    let Some(c) = comparison(st) else {
        return;
    };
    let _ = writeln!(
        out,
        "<div class=\"seed\" id=\"seed-{}\">\n<h3>Seed {} beside ours</h3>\n<p class=\"seed-source\">{}</p>\n<p class=\"seed-note\">{}</p>",
        st.experiment.id,
        c.seed,
        esc(c.source),
        esc(&c.note)
    );
    let _ = write!(
        out,
        "<div class=\"table-wrap\"><table class=\"seed\">\n<thead><tr>"
    );
    for h in &c.table.headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in &c.table.rows {
        out.push_str("<tr>");
        for cell in r {
            let _ = write!(out, "<td>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n<ul class=\"verdicts\">\n");
    for f in &c.findings {
        let _ = writeln!(
            out,
            "<li class=\"{}\"><strong>{}</strong>: {} — {}</li>",
            f.verdict.class(),
            f.verdict.word(),
            esc(&f.claim),
            esc(&f.why)
        );
    }
    out.push_str("</ul>\n</div>\n");
}

/// The same as Markdown, for the text twin of the report (empty when no seed).
pub fn seed_markdown(st: &ExperimentStats) -> String {
    let Some(c) = comparison(st) else {
        return String::new();
    };
    let mut out = format!(
        "<a id=\"seed-{}\"></a>\n\n### Seed {} beside ours\n\n{}\n\n{}\n\n",
        st.experiment.id, c.seed, c.source, c.note
    );
    out.push_str(&c.table.to_markdown());
    out.push('\n');
    for f in &c.findings {
        let _ = writeln!(out, "- **{}**: {} — {}", f.verdict.word(), f.claim, f.why);
    }
    out.push('\n');
    out
}

// ------------------------------------------------------------------------------ cells, values

/// Whether stored value `have` is `want` (sizes compared as byte counts: `1K` = `1024`).
fn same_value(have: &str, want: &str) -> bool {
    have == want || matches!((parse_size(have), parse_size(want)), (Ok(a), Ok(b)) if a == b)
}

/// The index of the first cell of `workload` whose configuration has every `key = value`.
fn find(st: &ExperimentStats, workload: &str, want: &[(&str, &str)]) -> Option<usize> {
    st.cells.iter().position(|c| {
        c.cell.workload == workload
            && want
                .iter()
                .all(|(k, v)| c.cell.config.get(k).is_some_and(|have| same_value(have, v)))
    })
}

/// Our figure of cell `i` on `metric`: `mean ±h (n=…)`, `-` when it has none.
fn ours(st: &ExperimentStats, i: Option<usize>, metric: &str) -> String {
    let Some(c) = i.map(|i| &st.cells[i]) else {
        return "no such cell".into();
    };
    match c.metrics.get(metric) {
        Some(s) => format!(
            "{} {} (n={})",
            num(s.mean),
            ci_cell(s),
            c.n_text(st.keep_invalid)
        ),
        None => format!("not measured (n={})", c.n_text(st.keep_invalid)),
    }
}

/// The values of cell `i` on `metric` (empty when missing).
fn values<'a>(st: &'a ExperimentStats, i: usize, metric: &str) -> &'a [f64] {
    st.cells[i]
        .values
        .get(metric)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

// ---------------------------------------------------------------------------------- statistics

/// Two sets of repetitions compared: `a` against `b`.
#[derive(Debug, Clone)]
pub struct Diff {
    /// What `a` is (e.g. `write 15x100`).
    pub a: String,
    /// What `b` is.
    pub b: String,
    mean_a: f64,
    mean_b: f64,
    sd_a: Option<f64>,
    sd_b: Option<f64>,
    /// Welch's test of `mean(a) - mean(b)`.
    welch: Option<Welch>,
    /// The Mann–Whitney U test of `a` against `b`.
    rank: Option<MannWhitney>,
    bimodal: bool,
    /// Whether `a`'s (and `b`'s) repetitions are themselves bimodal (the mark names them).
    bimodal_a: bool,
    bimodal_b: bool,
    n: usize,
    /// Repetitions on each side.
    n_a: usize,
    n_b: usize,
}

/// Which way a difference went, at the level asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// `a` significantly greater than `b`.
    Greater,
    /// `a` significantly less than `b`.
    Less,
    /// No significant difference.
    Neither,
    /// Too few repetitions on a side to decide.
    TooFew,
}

impl Diff {
    /// `a` against `b`.
    pub fn new(a: &str, xa: &[f64], b: &str, xb: &[f64]) -> Diff {
        let mean = |x: &[f64]| socklab_stats::mean(x).unwrap_or(f64::NAN);
        Diff {
            a: a.to_string(),
            b: b.to_string(),
            mean_a: mean(xa),
            mean_b: mean(xb),
            sd_a: socklab_stats::std_dev(xa),
            sd_b: socklab_stats::std_dev(xb),
            welch: welch(xb, xa),
            rank: mann_whitney(xa, xb),
            bimodal: bimodal(xa).is_some() || bimodal(xb).is_some(),
            bimodal_a: bimodal(xa).is_some(),
            bimodal_b: bimodal(xb).is_some(),
            n: xa.len().min(xb.len()),
            n_a: xa.len(),
            n_b: xb.len(),
        }
    }

    /// The cells `a` and `b` of `st` on `metric`; `None` when either is missing.
    fn cells(
        st: &ExperimentStats,
        metric: &str,
        a: (&str, Option<usize>),
        b: (&str, Option<usize>),
    ) -> Result<Diff, String> {
        match (a.1, b.1) {
            (Some(i), Some(j)) => Ok(Diff::new(
                a.0,
                values(st, i, metric),
                b.0,
                values(st, j, metric),
            )),
            (None, _) => Err(format!("this experiment has no cell {}", a.0)),
            (_, None) => Err(format!("this experiment has no cell {}", b.0)),
        }
    }

    /// The direction, significant at `alpha` (Welch, and Mann–Whitney too when bimodal), as
    /// [`crate::workload::judge::VsBest::significant`] decides at 5 %.
    pub fn sign(&self, alpha: f64) -> Sign {
        if self.n < MIN_N_VERDICT {
            return Sign::TooFew;
        }
        let Some(w) = &self.welch else {
            return Sign::TooFew;
        };
        let rank_ok = !self.bimodal || self.rank.as_ref().is_some_and(|m| m.p_value < alpha);
        if w.p_value < alpha && rank_ok {
            if w.diff > 0.0 {
                Sign::Greater
            } else {
                Sign::Less
            }
        } else {
            Sign::Neither
        }
    }

    /// Whether Welch's 95% interval of `a - b` lies within `margin` × |mean(b)| (only its
    /// upper end when `upper_only`).
    fn within(&self, margin: f64, upper_only: bool) -> bool {
        let Some(w) = &self.welch else {
            return false;
        };
        let m = margin * self.mean_b.abs();
        w.ci95_hi < m && (upper_only || w.ci95_lo > -m)
    }

    /// Welch's p-value (1 without a test).
    fn p(&self) -> f64 {
        self.welch.as_ref().map_or(1.0, |w| w.p_value)
    }

    /// The repetitions per cell that would decide this comparison at the effect and spread
    /// observed: for a difference (`same` false), a two-sample t-test at α = 0.05 with power 0.8
    /// ([`socklab_stats::two_sample_n`]); for "no difference" (`same`), enough for Welch's 95%
    /// interval to fit inside [`SAME_WITHIN`] of `b` (or, when the effect itself is beyond it,
    /// to show that difference).
    fn more(&self, same: bool) -> More {
        let (Some(sa), Some(sb)) = (self.sd_a, self.sd_b) else {
            return More::AtLeast(MIN_N_VERDICT);
        };
        let Some(sd) = socklab_stats::pooled_sd(sa, self.n_a, sb, self.n_b) else {
            return More::AtLeast(MIN_N_VERDICT);
        };
        let effect = (self.mean_a - self.mean_b).abs();
        if !effect.is_finite() {
            return More::AtLeast(MIN_N_VERDICT);
        }
        let margin = SAME_WITHIN * self.mean_b.abs();
        let n = if same && effect < margin {
            if sd == 0.0 {
                Some(2)
            } else {
                socklab_stats::precision_n(sd, margin - effect, 0.05)
            }
        } else if sd == 0.0 {
            (effect > 0.0).then_some(2)
        } else {
            socklab_stats::two_sample_n(effect, sd, 0.05, 0.8)
        };
        n.map_or(More::NotByReps, |n| More::About(n.max(MIN_N_VERDICT)))
    }

    /// The short form: `a 3.1 vs b 2.0: +55.0%, p<0.001, n=5`.
    pub fn short(&self) -> String {
        let mut s = self.sides();
        if let Some(w) = &self.welch {
            let _ = write!(s, ", {}", p_text(w.p_value));
        }
        if self.bimodal {
            if let Some(m) = &self.rank {
                let _ = write!(s, ", bimodal: Mann–Whitney {}", p_text(m.p_value));
            }
        }
        s.push_str(&self.n_text());
        s
    }

    /// `a 3.1 vs b 2.0: +55.0%`.
    fn sides(&self) -> String {
        let side = |name: &str, mean: f64| {
            if mean.is_finite() {
                format!("{name} {}", num(mean))
            } else {
                format!("{name} (no measured repetition)")
            }
        };
        let mut s = format!(
            "{} vs {}",
            side(&self.a, self.mean_a),
            side(&self.b, self.mean_b)
        );
        if self.mean_b != 0.0 && self.mean_a.is_finite() && self.mean_b.is_finite() {
            let _ = write!(
                s,
                ": {:+.1}%",
                (self.mean_a - self.mean_b) / self.mean_b.abs() * 100.0
            );
        }
        s
    }

    /// `, n=5` or `, n=3 and 5`.
    fn n_text(&self) -> String {
        if self.n_a == self.n_b {
            format!(", n={}", self.n)
        } else {
            format!(", n={} and {}", self.n_a, self.n_b)
        }
    }

    /// `a 3.1 vs b 2.0: +55.0%, Welch difference 1.1 (95% CI 0.9 to 1.3), p<0.001, n=20`.
    pub fn text(&self) -> String {
        let mut s = self.sides();
        match &self.welch {
            Some(w) => {
                let _ = write!(
                    s,
                    ", Welch difference {} (95% CI {} to {}), {}",
                    num(w.diff),
                    num(w.ci95_lo),
                    num(w.ci95_hi),
                    p_text(w.p_value)
                );
            }
            None => s.push_str(", no test (fewer than 2 repetitions)"),
        }
        if self.bimodal {
            if let Some(m) = &self.rank {
                let whose = match (self.bimodal_a, self.bimodal_b) {
                    (true, true) => format!("{} and {}", self.a, self.b),
                    (true, false) => self.a.clone(),
                    _ => self.b.clone(),
                };
                let _ = write!(s, ", bimodal ({whose}): Mann–Whitney {}", p_text(m.p_value));
            }
        }
        s.push_str(&self.n_text());
        s
    }
}

fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".into()
    } else {
        format!("p={p:.3}")
    }
}

/// What "roughly the same" (seed 003) and "essentially the same value" (seed 000) are taken
/// to mean: a difference of means within 10% of the reference, the repeatability seed 002
/// gives for its own figures. A finding of no difference is reproduced only when Welch's 95%
/// interval of the difference lies inside this margin (for "no gain": below it).
pub const SAME_WITHIN: f64 = 0.10;

/// What a finding expects of each comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// `a` greater than `b` in every comparison.
    Greater,
    /// `a` less than `b` in every comparison.
    Less,
    /// No difference in any comparison.
    Same,
    /// `a` not greater than `b` in any comparison (no gain).
    NotGreater,
}

/// The verdict of a finding made of `diffs`, every one expected to go `expect`. Missing cells
/// or too few repetitions: not comparable. A comparison significantly against the finding at
/// 5 %/k (k comparisons): contradicted. For a difference, every comparison significant at 5 %
/// in its direction: reproduced; else not reproduced. For "no difference", none significant
/// at 5 %/k: reproduced (which shows no difference was found, not that there is none).
fn judge(claim: &str, diffs: Vec<Result<Diff, String>>, expect: Expect) -> Finding {
    let mut ok = Vec::new();
    for d in diffs {
        match d {
            Ok(d) => ok.push(d),
            Err(why) => return Finding::new(claim, Verdict::NotComparable, why),
        }
    }
    if ok.is_empty() {
        return Finding::new(claim, Verdict::NotComparable, "no cells to compare");
    }
    let k = ok.len();
    let strict = 0.05 / k as f64;
    let bonferroni = if k > 1 {
        format!(" (significant at 5%/{k}, Bonferroni over {k} comparisons)")
    } else {
        String::new()
    };
    let same = matches!(expect, Expect::Same | Expect::NotGreater);
    let few: Vec<&Diff> = ok.iter().filter(|d| d.sign(0.05) == Sign::TooFew).collect();
    if let Some(d) = few.first() {
        // The comparison that needs the most repetitions decides how many the finding needs.
        let (need, widest) = few
            .iter()
            .map(|d| (d.more(same), *d))
            .max_by_key(|(m, _)| m.rank())
            .unwrap_or((More::AtLeast(MIN_N_VERDICT), d));
        return Finding::new(
            claim,
            Verdict::NotComparable,
            format!(
                "too few repetitions to decide: {} (at least {MIN_N_VERDICT} per cell are needed)",
                d.text()
            ),
        )
        .by(Some(widest), Some(need));
    }
    let weakest = ok.iter().max_by(|x, y| x.p().total_cmp(&y.p()));
    let against = |d: &&Diff| match expect {
        Expect::Greater => d.sign(strict) == Sign::Less,
        Expect::Less => d.sign(strict) == Sign::Greater,
        Expect::Same => d.sign(strict) != Sign::Neither,
        Expect::NotGreater => d.sign(strict) == Sign::Greater,
    };
    let bad: Vec<String> = ok.iter().filter(against).map(Diff::text).collect();
    if !bad.is_empty() {
        let strongest = ok
            .iter()
            .filter(against)
            .min_by(|x, y| x.p().total_cmp(&y.p()));
        return Finding::new(
            claim,
            Verdict::Contradicted,
            format!("{}{bonferroni}", bad.join("; ")),
        )
        .by(strongest, None);
    }
    let want = match expect {
        Expect::Greater => Sign::Greater,
        Expect::Less => Sign::Less,
        Expect::Same | Expect::NotGreater => {
            // No significant difference does not show sameness: the interval must also be
            // narrow enough to exclude a difference of more than SAME_WITHIN.
            let wide: Vec<String> = ok
                .iter()
                .filter(|d| !d.within(SAME_WITHIN, expect == Expect::NotGreater))
                .map(Diff::text)
                .collect();
            let what = if expect == Expect::Same {
                "no significant difference"
            } else {
                "no significant gain"
            };
            let pct = SAME_WITHIN * 100.0;
            if !wide.is_empty() {
                let need = ok
                    .iter()
                    .filter(|d| !d.within(SAME_WITHIN, expect == Expect::NotGreater))
                    .map(|d| (d.more(true), d))
                    .max_by_key(|(m, _)| m.rank());
                return Finding::new(
                    claim,
                    Verdict::NotComparable,
                    format!(
                        "{what}, but the 95% interval of the difference is too wide to tell whether it is within {pct:.0}%: {}",
                        wide.join("; ")
                    ),
                )
                .by(need.map(|n| n.1), need.map(|n| n.0));
            }
            let all: Vec<String> = ok.iter().map(Diff::text).collect();
            return Finding::new(
                claim,
                Verdict::Reproduced,
                format!(
                    "{what}{}, and the 95% interval of the difference within {pct:.0}%: {}",
                    if k > 1 { " in any comparison" } else { "" },
                    all.join("; ")
                ),
            )
            .by(weakest, None);
        }
    };
    let weak: Vec<String> = ok
        .iter()
        .filter(|d| d.sign(0.05) != want)
        .map(Diff::text)
        .collect();
    if weak.is_empty() {
        let text = weakest.map(Diff::text).unwrap_or_default();
        let why = if k > 1 {
            format!("all {k} comparisons significant in the seed's direction; the weakest: {text}")
        } else {
            text
        };
        Finding::new(claim, Verdict::Reproduced, why).by(weakest, None)
    } else {
        let first = ok.iter().find(|d| d.sign(0.05) != want);
        Finding::new(
            claim,
            Verdict::NotReproduced,
            format!("no significant difference: {}", weak.join("; ")),
        )
        .by(first, None)
    }
}
