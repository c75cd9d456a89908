//! `socklab results series`: an experiment's time series, tidy — one row per interval per
//! stream per repetition, with the cell's label and parameters, the repetition and its
//! warm-up flag, the stream, its direction, the interval's start, end and omitted flag, then
//! one column per metric (CSV) or a `metrics` object (JSON).

use std::fmt::Write as _;

use serde_json::json;

use crate::model::record::CellRow;
use crate::model::record::IntervalRow;
use crate::output::csv_field;
use crate::series::ordered;
use crate::store::Store;
use crate::LabError;

/// The intervals of `experiment` with their cells; an error naming the fix when it has none.
fn rows(store: &Store, experiment: i64) -> Result<(Vec<CellRow>, Vec<IntervalRow>), LabError> {
    store.experiment(experiment)?;
    let cells = store.cells(experiment)?;
    let rows = store.intervals(experiment)?;
    if rows.is_empty() {
        return Err(LabError::NoSeries(experiment));
    }
    Ok((cells, rows))
}

/// The CSV of an experiment's time series.
pub fn series_csv(store: &Store, experiment: i64) -> Result<String, LabError> {
    let (cells, rows) = rows(store, experiment)?;
    let mut cfg_keys: Vec<&String> = cells.iter().flat_map(|c| c.config.0.keys()).collect();
    cfg_keys.sort();
    cfg_keys.dedup();
    let metrics = ordered(
        rows.iter()
            .flat_map(|r| r.values.keys().map(String::as_str)),
    );
    let mut out = String::from(
        "experiment,cell,label,workload,rep,warmup,stream,direction,start_s,end_s,omitted",
    );
    for k in &cfg_keys {
        let _ = write!(out, ",cfg_{k}");
    }
    for m in &metrics {
        let _ = write!(out, ",{m}");
    }
    out.push('\n');
    for r in &rows {
        let Some(c) = cells.iter().find(|c| c.id == r.cell_id) else {
            continue;
        };
        let _ = write!(
            out,
            "{experiment},{},{},{},{},{},{},{},{},{},{}",
            c.idx,
            csv_field(&c.label),
            c.workload,
            r.rep,
            u8::from(r.warmup),
            r.stream,
            r.direction,
            r.start_s,
            r.end_s,
            u8::from(r.omitted)
        );
        for k in &cfg_keys {
            let _ = write!(
                out,
                ",{}",
                csv_field(c.config.0.get(*k).map(String::as_str).unwrap_or(""))
            );
        }
        for m in &metrics {
            let _ = write!(
                out,
                ",{}",
                r.values.get(m).map(f64::to_string).unwrap_or_default()
            );
        }
        out.push('\n');
    }
    Ok(out)
}

/// The JSON of an experiment's time series: an array of objects, one per interval.
pub fn series_json(store: &Store, experiment: i64) -> Result<serde_json::Value, LabError> {
    let (cells, rows) = rows(store, experiment)?;
    let out: Vec<serde_json::Value> = rows
        .iter()
        .filter_map(|r| {
            let c = cells.iter().find(|c| c.id == r.cell_id)?;
            Some(json!({
                "experiment": experiment,
                "cell": c.idx,
                "label": c.label,
                "workload": c.workload,
                "config": c.config.0,
                "rep": r.rep,
                "warmup": r.warmup,
                "stream": r.stream,
                "direction": r.direction,
                "start_s": r.start_s,
                "end_s": r.end_s,
                "omitted": r.omitted,
                "metrics": r.values,
            }))
        })
        .collect();
    Ok(serde_json::Value::Array(out))
}
