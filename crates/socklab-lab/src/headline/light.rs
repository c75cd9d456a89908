//! The headline figures of `results list`, read fast: each experiment's measured repetitions'
//! metrics only (no histograms, time series, host or facts), through the same per-cell
//! statistics as the report ([`crate::summary::cell_stats`]), so the figure is the report's.

use std::collections::BTreeMap;

use rusqlite::params;

use super::{headline, Headline};
use crate::model::stats::ExperimentStats;
use crate::store::{SampleRow, Store};
use crate::summary::cell_stats;
use crate::LabError;

/// The headline figure of experiment `id`, from its repetitions' metrics alone (repetitions
/// marked invalid left out and counted, as in the report).
pub fn headline_of(store: &Store, id: i64) -> Result<Headline, LabError> {
    let experiment = store.experiment(id)?;
    let samples = measured_samples(store, id)?;
    let wanted = usize::try_from(experiment.reps).unwrap_or(0);
    let mut none = BTreeMap::new();
    let cells = store
        .cells(id)?
        .into_iter()
        .map(|c| cell_stats(c, &samples, &mut none, false, wanted))
        .collect();
    let st = ExperimentStats {
        experiment,
        host: Vec::new(),
        facts: Vec::new(),
        cells,
        keep_invalid: false,
    };
    Ok(headline(&st))
}

/// The measured (not warm-up) samples of experiment `id` with their metrics, in run order.
fn measured_samples(store: &Store, id: i64) -> Result<Vec<SampleRow>, LabError> {
    let err = |e: rusqlite::Error| LabError::store(store.path(), e);
    let mut st = store
        .conn
        .prepare(
            "SELECT s.id, s.cell_id, s.rep, s.extra_json FROM samples s JOIN cells c ON s.cell_id=c.id
             WHERE c.experiment_id=?1 AND s.warmup=0 ORDER BY s.id",
        )
        .map_err(err)?;
    let mut rows: Vec<(i64, SampleRow)> = st
        .query_map(params![id], |r| {
            let extra: String = r.get(3)?;
            Ok((
                r.get(0)?,
                SampleRow {
                    cell_id: r.get(1)?,
                    rep: r.get(2)?,
                    warmup: false,
                    started_at: String::new(),
                    wall_s: 0.0,
                    metrics: BTreeMap::new(),
                    histograms: BTreeMap::new(),
                    extra: serde_json::from_str(&extra).unwrap_or(serde_json::Value::Null),
                },
            ))
        })
        .map_err(err)?
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let pos: BTreeMap<i64, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, (sid, _))| (*sid, i))
        .collect();
    let mut st = store
        .conn
        .prepare(
            "SELECT m.sample_id, m.name, m.value FROM sample_metrics m
             JOIN samples s ON m.sample_id=s.id JOIN cells c ON s.cell_id=c.id
             WHERE c.experiment_id=?1 AND s.warmup=0",
        )
        .map_err(err)?;
    let metrics = st
        .query_map(params![id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, f64>(2)?,
            ))
        })
        .map_err(err)?;
    for m in metrics {
        let (sid, name, value) = m.map_err(err)?;
        if let Some(&i) = pos.get(&sid) {
            rows[i].1.metrics.insert(name, value);
        }
    }
    Ok(rows.into_iter().map(|(_, s)| s).collect())
}
