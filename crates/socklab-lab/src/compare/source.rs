//! Where a side of a comparison comes from: an experiment id in the results database, `DB:ID`
//! (another database), or a saved JSON file (a baseline): `results export` JSON (every
//! repetition) or the statistics JSON of `results show` / a measuring command (with each
//! metric's `values`). Every failure is a one-line [`LabError::Plan`] (bad input, exit 2).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::model::stats::VALID_METRIC;
use crate::session::open_existing;
use crate::summary::experiment_stats;
use crate::LabError;

/// One cell of a side: its workload, label, configuration and per-repetition values.
#[derive(Debug, Clone, PartialEq)]
pub struct SideCell {
    /// The workload (`bulk`, `pingpong`, …).
    pub workload: String,
    /// The cell's label.
    pub label: String,
    /// Its configuration (key to value as stored).
    pub config: BTreeMap<String, String>,
    /// Values per metric, one per measured valid repetition.
    pub values: BTreeMap<String, Vec<f64>>,
}

/// A side of a comparison: what it is (for people) and its cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// `experiment 3 in 'socklab.db'`, `'base.json'`.
    pub name: String,
    /// Its cells, in order.
    pub cells: Vec<SideCell>,
}

/// How a side was named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An experiment in the database given by `db`.
    Id(i64),
    /// `DB:ID`: an experiment in another database.
    DbId(PathBuf, i64),
    /// A JSON file.
    File(PathBuf),
}

fn bad(what: &str, text: &str, why: &str) -> LabError {
    LabError::Plan(format!("{what} '{text}': {why}"))
}

impl Source {
    /// Reads `text` (an id, `DB:ID` or a file path) for side `what` (`A` or `B`).
    pub fn parse(what: &str, text: &str) -> Result<Source, LabError> {
        let text_t = text.trim();
        if let Ok(id) = text_t.parse::<i64>() {
            return Ok(Source::Id(id));
        }
        if Path::new(text).is_file() {
            return Ok(Source::File(text.into()));
        }
        if let Some((db, id)) = text.rsplit_once(':') {
            if let Ok(id) = id.trim().parse::<i64>() {
                return Ok(Source::DbId(db.into(), id));
            }
        }
        Err(bad(
            what,
            text,
            "no such file; give an experiment id, DB:ID or a JSON file saved by `socklab results export`",
        ))
    }

    /// Loads the side from `db` (for an id) or its own database or file.
    pub fn load(&self, what: &str, db: &Path) -> Result<Side, LabError> {
        match self {
            Source::Id(id) => from_store(what, db, *id),
            Source::DbId(other, id) => from_store(what, other, *id),
            Source::File(path) => from_file(what, path),
        }
    }
}

fn from_store(what: &str, db: &Path, id: i64) -> Result<Side, LabError> {
    let text = format!("{}:{id}", db.display());
    let one_line = |e: LabError| bad(what, &text, &e.to_string().replace('\n', " "));
    let store = open_existing(db).map_err(one_line)?;
    let ids: Vec<i64> = store
        .experiments()
        .map_err(one_line)?
        .into_iter()
        .map(|e| e.id)
        .collect();
    if !ids.contains(&id) {
        let have = ids
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(bad(
            what,
            &text,
            &format!(
                "no experiment {id} in '{}' (it holds: {}; see `socklab results list`)",
                db.display(),
                if have.is_empty() { "none" } else { &have }
            ),
        ));
    }
    let st = experiment_stats(&store, id).map_err(one_line)?;
    Ok(Side {
        name: format!("experiment {id} in '{}'", db.display()),
        cells: st
            .cells
            .into_iter()
            .map(|c| SideCell {
                workload: c.cell.workload,
                label: c.cell.label,
                config: c.cell.config.0,
                values: c.values,
            })
            .collect(),
    })
}

fn from_file(what: &str, path: &Path) -> Result<Side, LabError> {
    let text = path.display().to_string();
    let body = std::fs::read_to_string(path)
        .map_err(|e| bad(what, &text, &format!("cannot read: {e}")))?;
    let cells = parse_json(&body).map_err(|why| bad(what, &text, &why))?;
    Ok(Side {
        name: format!("'{text}'"),
        cells,
    })
}

/// The cells of a saved JSON text: an array of repetitions (`results export`), the
/// statistics object (`results show`, a measuring command's JSON) or JSON lines whose last
/// line is that object (a run with a time series).
pub fn parse_json(body: &str) -> Result<Vec<SideCell>, String> {
    let value: serde_json::Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => body
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("cells").is_some())
            .ok_or_else(|| format!("not socklab JSON ({e})"))?,
    };
    let cells =
        match &value {
            serde_json::Value::Array(rows) => from_repetitions(rows)?,
            serde_json::Value::Object(o) if o.contains_key("cells") => from_stats(&value)?,
            _ => return Err(
                "not socklab JSON: neither `results export` repetitions nor experiment statistics"
                    .into(),
            ),
        };
    if cells.is_empty() {
        return Err("holds no cells".into());
    }
    Ok(cells)
}

fn config_of(v: &serde_json::Value) -> BTreeMap<String, String> {
    v.get("config")
        .and_then(|c| c.as_object())
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn text_of(v: &serde_json::Value, key: &str) -> String {
    v.get(key)
        .and_then(|x| x.as_str())
        .unwrap_or_default()
        .to_string()
}

/// `results export` rows: measured, valid repetitions grouped by cell.
fn from_repetitions(rows: &[serde_json::Value]) -> Result<Vec<SideCell>, String> {
    let mut cells: BTreeMap<i64, SideCell> = BTreeMap::new();
    for r in rows {
        let (Some(idx), Some(metrics)) = (
            r.get("cell").and_then(serde_json::Value::as_i64),
            r.get("metrics").and_then(|m| m.as_object()),
        ) else {
            return Err("not a `results export` row: each needs `cell` and `metrics`".into());
        };
        let cell = cells.entry(idx).or_insert_with(|| SideCell {
            workload: text_of(r, "workload"),
            label: text_of(r, "label"),
            config: config_of(r),
            values: BTreeMap::new(),
        });
        let warmup = r.get("warmup").and_then(serde_json::Value::as_bool) == Some(true);
        let invalid = metrics
            .get(VALID_METRIC)
            .and_then(serde_json::Value::as_f64)
            == Some(0.0);
        if warmup || invalid {
            continue;
        }
        for (k, v) in metrics {
            if let Some(x) = v.as_f64() {
                cell.values.entry(k.clone()).or_default().push(x);
            }
        }
    }
    Ok(cells.into_values().collect())
}

/// The statistics object: each metric's `values`; an older file without them cannot give
/// the tests their repetitions.
fn from_stats(v: &serde_json::Value) -> Result<Vec<SideCell>, String> {
    let cells = v
        .get("cells")
        .and_then(|c| c.as_array())
        .ok_or("not socklab JSON: `cells` is not a list")?;
    cells
        .iter()
        .map(|c| {
            let metrics = c
                .get("metrics")
                .and_then(|m| m.as_object())
                .ok_or("not socklab JSON: a cell without `metrics`")?;
            let mut values = BTreeMap::new();
            for (k, m) in metrics {
                let Some(list) = m.get("values").and_then(|x| x.as_array()) else {
                    return Err(format!(
                        "its statistics carry no per-repetition `values` (written by an older socklab): save the baseline with `{}`",
                        crate::roles::argv::shown::export_json()
                    ));
                };
                values.insert(
                    k.clone(),
                    list.iter().filter_map(serde_json::Value::as_f64).collect(),
                );
            }
            Ok(SideCell {
                workload: text_of(c, "workload"),
                label: text_of(c, "label"),
                config: config_of(c),
                values,
            })
        })
        .collect()
}
