//! `socklab compare A B`: did a change make it faster or slower? Cells of two experiments (or
//! saved baselines) matched by configuration, each metric compared (ratio B/A with Fieller's
//! 95% interval, Welch, Mann–Whitney, a verdict), and a gate for CI: with a threshold, the
//! comparison fails when a gated metric got significantly worse by more than it.
//!
//! * [`source`]: where A and B come from (an id, `DB:ID`, a JSON file);
//! * [`matching`]: which cells pair up;
//! * [`verdict`]: one metric compared, the verdict and the gate;
//! * [`text`]: the text, JSON, Markdown and HTML of a comparison.

pub mod matching;
pub mod source;
pub mod text;
pub mod verdict;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

pub use source::{Side, SideCell, Source};
pub use verdict::{parse_threshold, Compared, Verdict};

use crate::model::stats::VALID_METRIC;
use crate::workload::{kind, metric};
use crate::LabError;

/// What to compare and how.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompareRun {
    /// A (the baseline) and B as named: an id, `DB:ID` or a JSON file.
    pub a: String,
    pub b: String,
    /// Configuration keys left out of the matching.
    pub ignore: Vec<String>,
    /// Only these metrics (and the gate checks them all); empty: every metric both have,
    /// the gate checking each cell's primary metric and its latency.
    pub metrics: Vec<String>,
    /// The gate's threshold as given (`5%`); `None`: no gate.
    pub threshold: Option<String>,
}

/// One pair of cells compared.
#[derive(Debug, Clone, Serialize)]
pub struct CellComparison {
    /// The workload.
    pub workload: String,
    /// A's and B's labels.
    pub label_a: String,
    pub label_b: String,
    /// The configuration they share (ignored keys left out).
    pub config: BTreeMap<String, String>,
    /// Each metric compared.
    pub metrics: Vec<Compared>,
}

/// A whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// A's and B's names.
    pub a: String,
    pub b: String,
    /// Keys left out of the matching.
    pub ignore: Vec<String>,
    /// The gate's threshold as a percentage (`None`: no gate).
    pub threshold_pct: Option<f64>,
    /// The paired cells.
    pub cells: Vec<CellComparison>,
    /// Labels of cells without a partner.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

impl Comparison {
    /// The gated metrics that failed, as `label: metric`.
    pub fn failures(&self) -> Vec<String> {
        self.cells
            .iter()
            .flat_map(|c| {
                c.metrics
                    .iter()
                    .filter(|m| m.gate_failed)
                    .map(move |m| format!("{}: {}", c.label_b, m.metric))
            })
            .collect()
    }

    /// Whether the gate failed (exit 1).
    pub fn gate_failed(&self) -> bool {
        !self.failures().is_empty()
    }
}

impl CompareRun {
    /// `[A, B]`, the keys to ignore, the metrics and the threshold.
    pub fn new(
        [a, b]: [String; 2],
        ignore: Vec<String>,
        metrics: Vec<String>,
        threshold: Option<String>,
    ) -> CompareRun {
        CompareRun {
            a,
            b,
            ignore,
            metrics,
            threshold,
        }
    }

    /// A dry run's words, reading ids from `db`.
    pub fn dry_text(&self, db: &Path) -> String {
        format!(
            "socklab compare would compare '{}' (A) with '{}' (B), ids read from '{}'",
            self.a,
            self.b,
            db.display()
        )
    }

    /// Loads both sides (ids from `db`) and compares them; every bad input is a one-line
    /// [`LabError::Plan`].
    pub fn run(&self, db: &Path) -> Result<Comparison, LabError> {
        let threshold = self.threshold.as_deref().map(parse_threshold).transpose()?;
        let a = Source::parse("A", &self.a)?.load("A", db)?;
        let b = Source::parse("B", &self.b)?.load("B", db)?;
        compare_sides(&a, &b, &self.ignore, &self.metrics, threshold)
    }
}

impl CompareRun {
    /// The comparison as text (or one JSON object when `json`), and whether its gate failed.
    pub fn output(&self, db: &Path, json: bool) -> Result<(String, bool), LabError> {
        let c = self.run(db)?;
        let body = if json {
            format!(
                "{}\n",
                serde_json::to_string_pretty(&text::json(&c)).unwrap_or_default()
            )
        } else {
            text::text(&c)
        };
        Ok((body, c.gate_failed()))
    }

    /// From `report`'s `compare` list `[A, B]`.
    pub fn pair(list: &[String]) -> Result<CompareRun, LabError> {
        match list {
            [a, b] => Ok(CompareRun {
                a: a.clone(),
                b: b.clone(),
                ..CompareRun::default()
            }),
            _ => Err(LabError::Plan(format!(
                "`compare` '{}': give two experiments, A,B (ids, DB:ID or JSON files)",
                list.join(",")
            ))),
        }
    }
}

/// Compares sides `a` and `b` (see [`CompareRun`]); `threshold` a fraction.
pub fn compare_sides(
    a: &Side,
    b: &Side,
    ignore: &[String],
    metrics: &[String],
    threshold: Option<f64>,
) -> Result<Comparison, LabError> {
    let matched = matching::match_cells(a, b, ignore)?;
    let mut cells = Vec::new();
    for (ca, cb) in &matched.pairs {
        let common: Vec<&String> = ca
            .values
            .keys()
            .filter(|k| cb.values.contains_key(*k) && k.as_str() != VALID_METRIC)
            .collect();
        let unknown: Vec<&str> = metrics
            .iter()
            .filter(|m| !common.iter().any(|c| c == m))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(LabError::Plan(format!(
                "`metric` names {}, which cell '{}' does not have in both; its metrics are: {}",
                unknown.join(", "),
                ca.label,
                common
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let primary =
            kind(&ca.workload).map_or("", |k| k.primary(&|m: &str| ca.values.contains_key(m)));
        let chosen: Vec<&String> = if metrics.is_empty() {
            common
        } else {
            metrics.iter().collect()
        };
        let compared = chosen
            .into_iter()
            .map(|name| {
                let m = metric(name);
                let gated = !metrics.is_empty() || verdict::gated_by_default(name, &m, primary);
                verdict::compare_metric(
                    name,
                    &m,
                    &ca.values[name],
                    &cb.values[name],
                    gated,
                    threshold,
                )
            })
            .collect();
        cells.push(CellComparison {
            workload: ca.workload.clone(),
            label_a: ca.label.clone(),
            label_b: cb.label.clone(),
            config: ca
                .config
                .iter()
                .filter(|(k, _)| !ignore.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            metrics: compared,
        });
    }
    Ok(Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        ignore: ignore.to_vec(),
        threshold_pct: threshold.map(|t| t * 100.0),
        cells,
        only_a: matched.only_a.iter().map(|c| c.label.clone()).collect(),
        only_b: matched.only_b.iter().map(|c| c.label.clone()).collect(),
    })
}

#[cfg(test)]
mod tests;
