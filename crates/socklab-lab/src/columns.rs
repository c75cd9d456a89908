//! The human summary table and its columns (issue 28 part 2): the primary metric's statistics,
//! then the means of the secondary metrics; over an emulated link the latency (TCP's RTT and
//! the link's queueing delay) comes right after the primary; `columns` (the `--columns` of the
//! measuring commands and `results show`) picks which columns are shown. Every column of a
//! rate, size or latency is printed in one unit that suits its values ([`Scale`]); JSON and
//! CSV keep each metric's own unit.

use crate::model::stats::ExperimentStats;
use crate::plan::Plan;
use crate::scale::Scale;
use crate::table::{ci_cell, Table};
use crate::workload::{kind, link_metrics, metric, table_columns};
use crate::LabError;

/// The metrics shown beside the primary one when a cell ran over an emulated link: TCP's final
/// smoothed RTT (bulk's) and the link's mean queueing delay (the bufferbloat a queue adds).
pub const LINK_COLUMNS: &[&str] = &["rtt_us", link_metrics::QDELAY];

pub use crate::output_json::TOP_MEAN;

/// The columns picked for the human table (`columns`): metric names, in order. The primary
/// metric brings its whole block (mean, interval, sd, min, median, max, comparison); any other
/// its mean.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Columns(pub Vec<String>);

impl std::str::FromStr for Columns {
    type Err = String;

    /// Parses `gbps,rtt_us,…` (white space around a name is ignored).
    fn from_str(text: &str) -> Result<Columns, String> {
        let names: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
        if names.iter().any(String::is_empty) {
            return Err("give metric names separated by commas, e.g. gbps,rtt_us".into());
        }
        Ok(Columns(names))
    }
}

impl Columns {
    /// Checks that every name is one of `known` (a table entry `prefix<…>` stands for every
    /// `prefix…` name); an unknown name is an error listing them.
    pub fn check(&self, known: &[String]) -> Result<(), LabError> {
        match self.0.iter().find(|n| !known.iter().any(|k| matches(k, n))) {
            None => Ok(()),
            Some(n) => Err(LabError::Plan(format!(
                "`columns`: no metric '{n}' here; choose from {}",
                known.join(", ")
            ))),
        }
    }
}

/// Whether the metric table entry `entry` names `name` (itself, or a pattern `gbps.s<n>`).
fn matches(entry: &str, name: &str) -> bool {
    entry == name
        || entry
            .strip_suffix('>')
            .and_then(|e| e.rfind('<').map(|i| &e[..i]))
            .is_some_and(|prefix| name.len() > prefix.len() && name.starts_with(prefix))
}

/// The metric names the workloads `kinds` record: their tables, and the link's where one takes
/// a link; then `held` (names an experiment holds), each once.
fn known<'a>(kinds: impl Iterator<Item = &'a str>, held: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut linked = false;
    for k in kinds.filter_map(kind) {
        linked |= k.linked;
        out.extend(k.metrics.iter().map(|m| m.name.to_string()));
    }
    if linked {
        out.extend(link_metrics::METRICS.iter().map(|m| m.name.to_string()));
    }
    for h in held {
        if !out.iter().any(|k| matches(k, &h)) {
            out.push(h);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|n| seen.insert(n.clone()));
    out
}

/// The metrics `columns` may name for `plan`, before it runs.
pub fn known_for_plan(plan: &Plan) -> Vec<String> {
    known(plan.cells.iter().map(|c| c.workload.kind()), Vec::new())
}

/// The metrics `columns` may name for `st`: its workloads' and every metric it holds.
pub fn known_for_stats(st: &ExperimentStats) -> Vec<String> {
    let held = st
        .cells
        .iter()
        .flat_map(|c| c.metrics.keys().cloned())
        .collect();
    known(st.cells.iter().map(|c| c.cell.workload.as_str()), held)
}

/// The metrics of the default table after the primary: over a link its latency, then every
/// workload's columns that some cell holds.
fn default_columns<'a>(st: &ExperimentStats, primary: &'a str) -> Vec<&'a str> {
    let has = |m: &str| st.cells.iter().any(|c| c.metrics.contains_key(m));
    let mut out = vec![primary];
    let linked = has(link_metrics::QDELAY);
    let latency = LINK_COLUMNS.iter().filter(|_| linked);
    for m in latency.chain(&table_columns()) {
        if has(m) && !out.contains(m) {
            out.push(m);
        }
    }
    out
}

/// The summary table of an experiment (see the module doc).
pub fn summary_table(st: &ExperimentStats) -> Table {
    summary_table_with(st, None)
}

/// [`summary_table`] with the metrics `pick` names as its columns (default: see the module
/// doc); a metric no cell holds reads `-`.
pub fn summary_table_with(st: &ExperimentStats, pick: Option<&Columns>) -> Table {
    let primary = st.primary();
    let names: Vec<&str> = match pick {
        Some(p) => p.0.iter().map(String::as_str).collect(),
        None => default_columns(st, primary),
    };
    let scale = |name: &str| {
        let m = metric(name);
        let means = st.cells.iter().filter_map(|c| c.metrics.get(name));
        (m, Scale::column(m.unit, means.map(|s| s.mean)))
    };
    let mut headers = vec!["config".to_string(), "n".to_string()];
    for name in &names {
        let (m, s) = scale(name);
        headers.push(s.header(m.short, m.unit));
        if *name == primary {
            let vs = vs_header(st, primary);
            headers.extend(["±95% CI", "sd", "min", "median", "max", vs].map(String::from));
        }
    }
    let mut t = Table::from_headers(headers);
    for (i, c) in st.cells.iter().enumerate() {
        let mut row = vec![c.cell.label.clone(), c.n_text(st.keep_invalid)];
        for name in &names {
            let (_, sc) = scale(name);
            let s = c.metrics.get(*name);
            if *name != primary {
                row.push(s.map_or_else(|| "-".into(), |s| sc.num(s.mean)));
                continue;
            }
            let Some(s) = s.map(|s| sc.summary(s)) else {
                row.extend(std::iter::repeat_n("-".to_string(), 7));
                continue;
            };
            let n = crate::table::num;
            row.push(n(s.mean));
            row.push(ci_cell(&s));
            row.push(s.sd.map(n).unwrap_or_else(|| "-".into()));
            row.extend([n(s.min), n(s.median), n(s.max)]);
            row.push(crate::output_json::vs_text(st, i, primary));
        }
        t.row(row);
    }
    t
}

/// The header of the comparison column: `vs baseline` when the first workload has one,
/// `vs best` when every workload has a best ([`ExperimentStats::best`]: significantly better
/// than all its other cells), else `vs top mean` (the differences from the cell with the top
/// mean, none of which makes it the best).
fn vs_header(st: &ExperimentStats, primary: &str) -> &'static str {
    if st
        .cells
        .first()
        .and_then(|c| st.baseline(&c.cell.workload))
        .is_some()
    {
        return "vs baseline";
    }
    let mut workloads: Vec<&str> = st.cells.iter().map(|c| c.cell.workload.as_str()).collect();
    workloads.dedup();
    if workloads.iter().all(|w| {
        st.baseline(w).is_some()
            || st.best(primary, w).is_some()
            || st.beaten(primary, w).is_empty()
    }) {
        "vs best"
    } else {
        "vs top mean"
    }
}
