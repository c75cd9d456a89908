//! The store's time series (schema 3): one row of `sample_intervals` per interval of a
//! repetition, written in the same transaction as its sample, so a killed run never keeps half
//! a repetition.

use std::path::Path;

use rusqlite::{params, Connection, Transaction};

use crate::model::record::IntervalRow;
use crate::model::sample::Interval;
use crate::LabError;

/// Writes the intervals of sample `sid` inside its transaction.
pub(crate) fn insert(
    tx: &Transaction<'_>,
    sid: i64,
    intervals: &[Interval],
) -> rusqlite::Result<()> {
    if intervals.is_empty() {
        return Ok(());
    }
    let mut st = tx.prepare_cached(
        "INSERT INTO sample_intervals(sample_id, idx, stream, direction, start_s, end_s, omitted, values_json)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (idx, iv) in intervals.iter().enumerate() {
        let values: serde_json::Map<String, serde_json::Value> = iv
            .values
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect();
        st.execute(params![
            sid,
            idx as i64,
            iv.stream,
            iv.direction.as_str(),
            iv.start_s,
            iv.end_s,
            iv.omitted,
            serde_json::Value::Object(values).to_string()
        ])?;
    }
    Ok(())
}

/// Every interval of an experiment (warm-ups included, flagged), by repetition in run order,
/// then in stored order (stream by stream, in time order), from the store at `path` over
/// `conn` ([`crate::store::Store::intervals`]).
pub(crate) fn read(
    conn: &Connection,
    path: &Path,
    experiment: i64,
) -> Result<Vec<IntervalRow>, LabError> {
    let err = |e: rusqlite::Error| LabError::store(path, e);
    let mut st = conn
        .prepare(
            "SELECT s.cell_id, s.rep, s.warmup, i.stream, i.direction, i.start_s, i.end_s, i.omitted, i.values_json
             FROM sample_intervals i JOIN samples s ON i.sample_id=s.id JOIN cells c ON s.cell_id=c.id
             WHERE c.experiment_id=?1 ORDER BY s.id, i.idx",
        )
        .map_err(err)?;
    let rows = st
        .query_map([experiment], |r| {
            let json: String = r.get(8)?;
            Ok(IntervalRow {
                cell_id: r.get(0)?,
                rep: r.get(1)?,
                warmup: r.get(2)?,
                stream: r.get(3)?,
                direction: r.get(4)?,
                start_s: r.get(5)?,
                end_s: r.get(6)?,
                omitted: r.get(7)?,
                values: serde_json::from_str(&json).unwrap_or_default(),
            })
        })
        .map_err(err)?;
    rows.collect::<Result<_, _>>().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::model::sample::{Direction, Sample};
    use crate::plan::{Group, Order, Plan};
    use crate::store::Store;

    fn iv(stream: u32, start: f64, end: f64, gbps: f64) -> Interval {
        Interval {
            stream,
            direction: Direction::Up,
            start_s: start,
            end_s: end,
            omitted: start < 0.1,
            values: vec![("gbps".into(), gbps), ("bad".into(), f64::NAN)],
        }
    }

    #[test]
    fn intervals_round_trip_with_their_repetition() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let g = Group::new("memcpy", Params::new().with("bytes", "1M"));
        let plan = Plan::build("t", "", &[g], 2, 1, Order::Sequential, "t").unwrap();
        let (id, cells) = store
            .begin_experiment(&plan, &socklab_sys::host::host_facts())
            .unwrap();
        for (rep, warmup) in [(0, true), (0, false), (1, false)] {
            let mut s = Sample::new([("gbps", 1.0)], serde_json::Value::Null);
            s.intervals = vec![iv(0, 0.0, 0.1, 1.0 + rep as f64), iv(0, 0.1, 0.25, 2.0)];
            store
                .record_sample(cells[0], rep, warmup, "2025-01-01T00:00:00Z", 1.0, &s)
                .unwrap();
        }
        let rows = store.intervals(id).unwrap();
        assert_eq!(rows.len(), 6);
        assert!(rows[0].warmup && !rows[2].warmup);
        assert_eq!((rows[4].rep, rows[4].start_s, rows[4].end_s), (1, 0.0, 0.1));
        assert_eq!(rows[4].get("gbps"), Some(2.0));
        assert_eq!(rows[4].get("bad"), None, "non-finite values are not stored");
        assert!(rows[4].omitted && !rows[5].omitted);
        assert_eq!(rows[5].direction(), Direction::Up);
    }
}
