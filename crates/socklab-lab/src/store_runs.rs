//! What `--resume` reads of an experiment: the runs it holds and which were marked invalid.

use rusqlite::params;

use crate::model::stats::VALID_METRIC;
use crate::store::Store;
use crate::LabError;

/// A run an experiment holds (see [`Store::stored_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredRun {
    /// Cell index in the plan.
    pub cell: usize,
    /// Repetition (attempt) number.
    pub rep: usize,
    /// A warm-up.
    pub warmup: bool,
    /// Marked invalid (`emu_valid = 0`: the emulated link could not keep up).
    pub invalid: bool,
}

impl Store {
    /// The runs an experiment already holds, with whether each was marked invalid: what a
    /// resumed run counts a cell's valid repetitions and attempts by.
    pub fn stored_runs(&self, experiment: i64) -> Result<Vec<StoredRun>, LabError> {
        let err = |e: rusqlite::Error| LabError::store(self.path(), e);
        let mut st = self
            .conn
            .prepare(
                "SELECT c.idx, s.rep, s.warmup, EXISTS(SELECT 1 FROM sample_metrics m
                    WHERE m.sample_id=s.id AND m.name=?2 AND m.value=0)
                 FROM samples s JOIN cells c ON s.cell_id=c.id WHERE c.experiment_id=?1",
            )
            .map_err(err)?;
        let rows = st
            .query_map(params![experiment, VALID_METRIC], |r| {
                Ok(StoredRun {
                    cell: r.get::<_, i64>(0)? as usize,
                    rep: r.get::<_, i64>(1)? as usize,
                    warmup: r.get(2)?,
                    invalid: r.get(3)?,
                })
            })
            .map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)
    }
}
