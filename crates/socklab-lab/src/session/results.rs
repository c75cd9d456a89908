//! The commands that read the results database: `results` (list, show, series, export) and
//! `report`; their text, the binary prints it.

use std::path::{Path, PathBuf};

use super::{stats_text, StatsFormat};
use crate::report::write_report;
use crate::series_export;
use crate::store::Store;
use crate::table::Table;
use crate::{output, LabError};

/// Opens the results database at `db` to read it; it must exist.
pub fn open_existing(db: &Path) -> Result<Store, LabError> {
    if !db.exists() {
        return Err(LabError::NoStore(db.to_path_buf()));
    }
    Store::open_read_only(db)
}

/// An export's format from `format` or its shorthands `csv` / `json`.
pub fn export_format(format: &str, csv: bool, json: bool) -> String {
    if csv {
        "csv".to_string()
    } else if json {
        "json".to_string()
    } else {
        format.to_string()
    }
}

/// `results export`'s query: the format from `format` or a shorthand (`prometheus` first),
/// of every experiment when `all`.
pub fn export_query(format: &str, csv: bool, json: bool, prometheus: bool, all: bool) -> Query {
    let f = match prometheus {
        true => "prometheus".to_string(),
        false => export_format(format, csv, json),
    };
    if all {
        Query::ExportAll(f)
    } else {
        Query::Export(f)
    }
}

/// What `socklab results` reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// The experiments, a line each.
    List,
    /// An experiment's statistics.
    Show(StatsFormat),
    /// An experiment's time series, in this format (csv or json).
    Series(String),
    /// An experiment's repetitions, in this format (csv or json), or its statistics
    /// (prometheus: the text exposition format).
    Export(String),
    /// [`Query::Export`] of every experiment.
    ExportAll(String),
}

impl Query {
    /// A dry run's words for it, reading `db`.
    pub fn dry_text(&self, db: &Path) -> String {
        let what = match self {
            Query::List => "list the experiments",
            Query::Show(_) => "show an experiment's statistics",
            Query::Export(f) if f == "prometheus" => "export an experiment's statistics",
            Query::ExportAll(f) if f == "prometheus" => "export every experiment's statistics",
            Query::Export(_) => "export an experiment's repetitions",
            Query::ExportAll(_) => "export every experiment's repetitions",
            Query::Series(_) => "export an experiment's time series",
        };
        format!("socklab results would {what} from '{}'", db.display())
    }

    /// Its text from `store`, of experiment `id` (default: the newest); `None` when no id is
    /// given and the store holds no experiment.
    pub fn text(&self, store: &Store, id: Option<i64>) -> Result<Option<String>, LabError> {
        if *self == Query::List {
            return list_text(store).map(Some);
        }
        if matches!(self, Query::Show(f) if f.stream) {
            return Err(LabError::Plan("`json_stream` prints a run's events as it goes; `results show` reads a stored experiment: use `json`".into()));
        }
        if let Query::ExportAll(f) = self {
            return export_all(store, f);
        }
        let Some(id) = id.map_or_else(|| store.latest_experiment(), |i| Ok(Some(i)))? else {
            return Ok(None);
        };
        let json = |v: serde_json::Value| {
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        };
        let unknown = |f: &str| LabError::Plan(format!("`format` '{f}': choose csv or json"));
        let unknown_export =
            |f: &str| LabError::Plan(format!("`format` '{f}': choose csv, json or prometheus"));
        Ok(Some(match self {
            Query::List | Query::ExportAll(_) => unreachable!("answered above"),
            Query::Show(format) => stats_text(store, id, format.clone(), false)?,
            Query::Series(f) => match f.as_str() {
                "csv" => series_export::series_csv(store, id)?,
                "json" => json(series_export::series_json(store, id)?),
                other => return Err(unknown(other)),
            },
            Query::Export(f) => match f.as_str() {
                "csv" => output::samples_csv(store, &[id])?,
                "json" => json(output::samples_json(store, id)?),
                "prometheus" => crate::prometheus::export(store, &[id])?,
                other => return Err(unknown_export(other)),
            },
        }))
    }
}

/// Every experiment of `store` in export format `f` (csv, json: one array of every
/// repetition, prometheus); `None` when it holds none.
fn export_all(store: &Store, f: &str) -> Result<Option<String>, LabError> {
    let ids: Vec<i64> = store.experiments()?.into_iter().map(|e| e.id).collect();
    if ids.is_empty() {
        return Ok(None);
    }
    Ok(Some(match f {
        "csv" => output::samples_csv(store, &ids)?,
        "prometheus" => crate::prometheus::export(store, &ids)?,
        "json" => {
            let mut rows = Vec::new();
            for &id in &ids {
                if let serde_json::Value::Array(r) = output::samples_json(store, id)? {
                    rows.extend(r);
                }
            }
            let v = serde_json::Value::Array(rows);
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        other => {
            return Err(LabError::Plan(format!(
                "`format` '{other}': choose csv, json or prometheus"
            )))
        }
    }))
}

/// The experiments of `store`, a row each, with its headline figure (read from the
/// repetitions' metrics alone, so a store of hundreds lists fast).
fn list_text(store: &Store) -> Result<String, LabError> {
    let mut t = Table::new(&[
        "id", "created", "name", "status", "cells", "samples", "headline", "command",
    ]);
    t.left = vec![false, true, true, true, false, false, true, true];
    for e in store.experiments()? {
        let headline = crate::headline::light::headline_of(store, e.id)?.text();
        t.row(vec![
            e.id.to_string(),
            e.created_at,
            e.name,
            e.status,
            e.cells.to_string(),
            e.samples.to_string(),
            headline,
            e.command,
        ]);
    }
    Ok(t.to_text())
}

/// `socklab report`: which experiments (none: all), the title, the directory, whether invalid
/// repetitions are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportRun {
    /// Experiment ids (empty: every experiment).
    pub experiments: Vec<i64>,
    /// The report's title.
    pub title: String,
    /// The directory written.
    pub out: PathBuf,
    /// Keep invalid repetitions in the statistics.
    pub keep_invalid: bool,
    /// `[A, B]`: add the comparison of A with B as a section (empty: none).
    pub compare: Vec<String>,
    /// The configuration keys that comparison leaves out of the matching (`compare`'s
    /// `ignore`).
    pub compare_ignore: Vec<String>,
}

impl ReportRun {
    /// A dry run's words for it, reading `db`.
    pub fn dry_text(&self, db: &Path) -> String {
        format!(
            "socklab report would read {} from '{}' and write index.html, report.md and results.csv into '{}'",
            if self.experiments.is_empty() {
                "every experiment".to_string()
            } else {
                format!("experiments {:?}", self.experiments)
            },
            db.display(),
            self.out.display()
        )
    }

    /// Writes the report from the database at `db`; returns the line that says where.
    pub fn write(&self, db: &Path) -> Result<String, LabError> {
        let store = open_existing(db)?;
        let ids = if self.experiments.is_empty() {
            store.experiments()?.into_iter().map(|e| e.id).collect()
        } else {
            for &id in &self.experiments {
                store.experiment(id)?;
            }
            self.experiments.clone()
        };
        // The comparison first: bad input fails before anything is written.
        let compared = (!self.compare.is_empty())
            .then(|| {
                let pair = crate::compare::CompareRun::pair(&self.compare)?;
                let ignore = self.compare_ignore.clone();
                crate::compare::CompareRun { ignore, ..pair }.run(db)
            })
            .transpose()?;
        let files = write_report(&store, &ids, &self.title, &self.out, self.keep_invalid)?;
        if let Some(c) = &compared {
            crate::compare::text::write_into_report(c, &files.html, &files.markdown)?;
        }
        Ok(format!(
            "report: {} (also {} and {})\n",
            files.html.display(),
            files.markdown.display(),
            files.csv.display()
        ))
    }
}
