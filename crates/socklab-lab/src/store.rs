//! The results store: one SQLite file (WAL), one row per finished repetition, committed as it
//! finishes, so a killed run loses nothing it finished.
//!
//! Schema (version [`SCHEMA_VERSION`], also in `PRAGMA user_version`):
//!
//! ```text
//! meta(key, value)                                   schema_version, created_by
//! hosts(id, hostname, kernel, cpu_model, cores, mem_mib, cc_default, cc_available,
//!       tcp_wmem, tcp_rmem, socklab_version)
//! experiments(id, name, description, command, created_at, finished_at, status, host_id,
//!             reps, warmup, run_order)                status: running|done|interrupted|failed
//! experiment_facts(experiment_id, key, value)        e.g. the self-started sink's wait4 rusage
//! cells(id, experiment_id, idx, workload, label, config_json)
//! samples(id, cell_id, rep, warmup, started_at, wall_s, extra_json)
//! sample_metrics(sample_id, name, value)             tidy: one row per metric of a sample
//! sample_histograms(sample_id, name, buckets_json)   v2: latency histograms, [[value, count], …]
//! sample_intervals(sample_id, idx, stream, direction, start_s, end_s, omitted, values_json)
//!                                                    v3: the time series, one row per interval
//! ```
//!
//! An older store is upgraded in place (its missing tables created) when socklab opens it for
//! writing; opened read-only, a version-2 store is read as it is (it holds no intervals).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use socklab_sys::host::HostFacts;

use crate::clock::now_rfc3339;
use crate::model::record::{CellRow, ExperimentRow, IntervalRow, PlanRecord};
use crate::model::sample::Sample;
use crate::LabError;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 3;

/// The oldest schema read without upgrading it (read-only opening writes nothing).
const READABLE_AS_IS: i64 = 2;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hosts(
    id INTEGER PRIMARY KEY,
    hostname TEXT NOT NULL, kernel TEXT NOT NULL, cpu_model TEXT NOT NULL,
    cores INTEGER NOT NULL, mem_mib INTEGER NOT NULL,
    cc_default TEXT NOT NULL, cc_available TEXT NOT NULL,
    tcp_wmem TEXT NOT NULL, tcp_rmem TEXT NOT NULL, socklab_version TEXT NOT NULL,
    UNIQUE(hostname, kernel, cpu_model, cores, mem_mib, cc_default, cc_available, tcp_wmem, tcp_rmem, socklab_version)
);
CREATE TABLE IF NOT EXISTS experiments(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL, description TEXT NOT NULL, command TEXT NOT NULL,
    created_at TEXT NOT NULL, finished_at TEXT, status TEXT NOT NULL,
    host_id INTEGER NOT NULL REFERENCES hosts(id),
    reps INTEGER NOT NULL, warmup INTEGER NOT NULL, run_order TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS experiment_facts(
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY(experiment_id, key)
);
CREATE TABLE IF NOT EXISTS cells(
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    idx INTEGER NOT NULL, workload TEXT NOT NULL, label TEXT NOT NULL, config_json TEXT NOT NULL,
    UNIQUE(experiment_id, idx)
);
CREATE TABLE IF NOT EXISTS samples(
    id INTEGER PRIMARY KEY,
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    rep INTEGER NOT NULL, warmup INTEGER NOT NULL,
    started_at TEXT NOT NULL, wall_s REAL NOT NULL, extra_json TEXT NOT NULL,
    UNIQUE(cell_id, rep, warmup)
);
CREATE TABLE IF NOT EXISTS sample_metrics(
    sample_id INTEGER NOT NULL REFERENCES samples(id),
    name TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY(sample_id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sample_histograms(
    sample_id INTEGER NOT NULL REFERENCES samples(id),
    name TEXT NOT NULL, buckets_json TEXT NOT NULL,
    PRIMARY KEY(sample_id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sample_intervals(
    sample_id INTEGER NOT NULL REFERENCES samples(id),
    idx INTEGER NOT NULL,
    stream INTEGER NOT NULL, direction TEXT NOT NULL,
    start_s REAL NOT NULL, end_s REAL NOT NULL, omitted INTEGER NOT NULL,
    values_json TEXT NOT NULL,
    PRIMARY KEY(sample_id, idx)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cells_by_experiment ON cells(experiment_id);
CREATE INDEX IF NOT EXISTS samples_by_cell ON samples(cell_id);
"#;

/// An open results database.
#[derive(Debug)]
pub struct Store {
    pub(crate) conn: Connection,
    path: PathBuf,
    /// Whether the store has the `sample_intervals` table (a version-2 store read as it is
    /// has not).
    pub(crate) has_intervals: bool,
}

/// A sample as stored.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SampleRow {
    /// Cell id.
    pub cell_id: i64,
    /// Repetition number.
    pub rep: i64,
    /// Warm-up?
    pub warmup: bool,
    /// Start time.
    pub started_at: String,
    /// Wall time of the repetition, seconds.
    pub wall_s: f64,
    /// Metric values.
    pub metrics: BTreeMap<String, f64>,
    /// Histograms: name to `(value, count)` buckets.
    pub histograms: BTreeMap<String, Vec<(u64, u64)>>,
    /// Effective settings read back and other facts.
    pub extra: serde_json::Value,
}

/// The tables every socklab store has had since schema 1.
const CORE_TABLES: [&str; 4] = ["meta", "experiments", "cells", "samples"];

/// Refuses a `--db` that exists but is not a regular file (`/dev/null`, a directory, a FIFO):
/// SQLite would open it and leave a `-journal` or `-wal` beside it.
fn check_regular(path: &Path) -> Result<(), LabError> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(LabError::not_a_store(
            path,
            "is not a regular file: name a database file with `db` PATH (e.g. `db` socklab.db)",
        )),
        _ => Ok(()),
    }
}

/// Whether `conn` is a socklab store (version > 0, its tables present), an empty database
/// (`Ok(false)`), or an unrelated SQLite file (an error naming some of its tables).
fn check_ours(conn: &Connection, path: &Path, version: i64) -> Result<bool, LabError> {
    let fail = |e: rusqlite::Error| LabError::store(path, format!("cannot read: {e}"));
    let mut st = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .map_err(fail)?;
    let tables: Vec<String> = st
        .query_map([], |r| r.get(0))
        .map_err(fail)?
        .collect::<Result<_, _>>()
        .map_err(fail)?;
    if version == 0 && tables.is_empty() {
        return Ok(false);
    }
    if version > 0 && CORE_TABLES.iter().all(|t| tables.iter().any(|x| x == t)) {
        return Ok(true);
    }
    let shown: Vec<&str> = tables.iter().take(3).map(String::as_str).collect();
    Err(LabError::not_a_store(
        path,
        format!(
            "is an SQLite database but not socklab's (user_version {version}; tables: {}{}): socklab leaves it untouched; name another file with `db` PATH",
            if shown.is_empty() { "none".to_string() } else { shown.join(", ") },
            if tables.len() > 3 { ", …" } else { "" }
        ),
    ))
}

/// A `file:` URI for `path` (for SQLite's read-only and immutable modes).
fn file_uri(path: &Path, query: &str) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for &b in abs.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

impl Store {
    /// Opens an existing database for reading only (`results`, `report`): nothing is written,
    /// so a store on a read-only mount (or one socklab may not write) can be listed. A store of
    /// an older schema is upgraded first (which writes). Refuses a file that is not socklab's.
    pub fn open_read_only(path: &Path) -> Result<Store, LabError> {
        use rusqlite::OpenFlags;
        check_regular(path)?;
        let fail = |e: &dyn std::fmt::Display| LabError::store(path, format!("cannot open: {e}"));
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let probe = |conn: &Connection| -> rusqlite::Result<i64> {
            conn.busy_timeout(std::time::Duration::from_secs(10))?;
            conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        };
        // A WAL store needs its -shm file; where it cannot be created (a read-only mount after
        // a clean close removed it), nobody can be writing: read the file as immutable.
        let (conn, version) = match Connection::open_with_flags(file_uri(path, "mode=ro"), flags)
            .and_then(|c| probe(&c).map(|v| (c, v)))
        {
            Ok(x) => x,
            Err(_) => {
                let c = Connection::open_with_flags(file_uri(path, "mode=ro&immutable=1"), flags)
                    .map_err(|e| fail(&e))?;
                let v = probe(&c).map_err(|e| fail(&e))?;
                (c, v)
            }
        };
        if version > SCHEMA_VERSION {
            return Err(LabError::store(
                path,
                format!("schema version {version} is newer than this socklab ({SCHEMA_VERSION}): upgrade socklab or use another `db`"),
            ));
        }
        if !check_ours(&conn, path, version)? {
            return Err(LabError::store(
                path,
                "is an empty database: it holds no experiments yet; run an experiment first",
            ));
        }
        if version < READABLE_AS_IS {
            drop(conn);
            return Store::open(path);
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            has_intervals: version >= 3,
        })
    }

    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, LabError> {
        let fail = |e: &dyn std::fmt::Display| {
            LabError::store(
                path,
                format!("cannot open: {e} (choose a writable file with `db` PATH)"),
            )
        };
        if path != Path::new(":memory:") {
            check_regular(path)?;
        }
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.is_dir() {
                return Err(fail(&format!(
                    "directory '{}' does not exist",
                    dir.display()
                )));
            }
        }
        let conn = Connection::open(path).map_err(|e| fail(&e))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| fail(&e))?;
        // Before anything is written (WAL mode included): never touch another program's file.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| fail(&e))?;
        if version <= SCHEMA_VERSION {
            check_ours(&conn, path, version)?;
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| fail(&e))?;
        if mode != "wal" && path != Path::new(":memory:") {
            return Err(fail(&format!("journal mode is {mode}, not wal")));
        }
        conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .map_err(|e| fail(&e))?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| fail(&e))?;
        if version > SCHEMA_VERSION {
            return Err(LabError::store(
                path,
                format!("schema version {version} is newer than this socklab ({SCHEMA_VERSION}): upgrade socklab or use another `db`"),
            ));
        }
        if version < SCHEMA_VERSION {
            conn.execute_batch(SCHEMA).map_err(|e| fail(&e))?;
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', ?1)",
                params![SCHEMA_VERSION.to_string()],
            )
            .map_err(|e| fail(&e))?;
            conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES('created_by', ?1)",
                params![format!("socklab {}", env!("CARGO_PKG_VERSION"))],
            )
            .map_err(|e| fail(&e))?;
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(|e| fail(&e))?;
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            has_intervals: true,
        })
    }

    /// Every interval of an experiment (warm-ups included, flagged), by repetition in run
    /// order, then in stored order (stream by stream, in time order). Empty for a store of
    /// schema 2 read as it is.
    pub fn intervals(&self, experiment: i64) -> Result<Vec<IntervalRow>, LabError> {
        if !self.has_intervals {
            return Ok(Vec::new());
        }
        crate::store_series::read(&self.conn, self.path(), experiment)
    }

    /// The database path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: impl std::fmt::Display) -> LabError {
        LabError::store(&self.path, e)
    }

    /// Records the host (deduplicated) and returns its id.
    pub fn host_id(&mut self, h: &HostFacts) -> Result<i64, LabError> {
        let version = env!("CARGO_PKG_VERSION");
        self.conn
            .execute(
                "INSERT OR IGNORE INTO hosts(hostname, kernel, cpu_model, cores, mem_mib, cc_default, cc_available, tcp_wmem, tcp_rmem, socklab_version)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![h.hostname, h.kernel, h.cpu_model, h.cores as i64, h.mem_mib as i64, h.cc_default, h.cc_available, h.tcp_wmem, h.tcp_rmem, version],
            )
            .map_err(|e| self.err(e))?;
        self.conn
            .query_row(
                "SELECT id FROM hosts WHERE hostname=?1 AND kernel=?2 AND cpu_model=?3 AND cores=?4 AND mem_mib=?5 AND cc_default=?6 AND cc_available=?7 AND tcp_wmem=?8 AND tcp_rmem=?9 AND socklab_version=?10",
                params![h.hostname, h.kernel, h.cpu_model, h.cores as i64, h.mem_mib as i64, h.cc_default, h.cc_available, h.tcp_wmem, h.tcp_rmem, version],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Stores a new experiment and its cells; returns the experiment id and the cell ids in plan
    /// order. Takes the plan's record (a `&Plan` converts into one).
    pub fn begin_experiment(
        &mut self,
        plan: impl Into<PlanRecord>,
        host: &HostFacts,
    ) -> Result<(i64, Vec<i64>), LabError> {
        let plan: PlanRecord = plan.into();
        let host_id = self.host_id(host)?;
        let path = self.path.clone();
        let err = |e: rusqlite::Error| LabError::store(&path, e);
        let tx = self.conn.transaction().map_err(err)?;
        tx.execute(
            "INSERT INTO experiments(name, description, command, created_at, status, host_id, reps, warmup, run_order)
             VALUES(?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8)",
            params![plan.name, plan.description, plan.command, now_rfc3339(), host_id, plan.reps as i64, plan.warmup as i64, plan.run_order],
        )
        .map_err(err)?;
        let exp = tx.last_insert_rowid();
        let mut ids = Vec::with_capacity(plan.cells.len());
        for c in &plan.cells {
            let config = serde_json::to_string(&c.config).unwrap_or_default();
            tx.execute(
                "INSERT INTO cells(experiment_id, idx, workload, label, config_json) VALUES(?1, ?2, ?3, ?4, ?5)",
                params![exp, c.index as i64, c.workload, c.label, config],
            )
            .map_err(err)?;
            ids.push(tx.last_insert_rowid());
        }
        tx.commit().map_err(err)?;
        Ok((exp, ids))
    }

    /// Commits one finished repetition (one transaction: all of it or nothing).
    pub fn record_sample(
        &mut self,
        cell_id: i64,
        rep: usize,
        warmup: bool,
        started_at: &str,
        wall_s: f64,
        sample: &Sample,
    ) -> Result<(), LabError> {
        let path = self.path.clone();
        let err =
            |e: rusqlite::Error| LabError::store(&path, format!("cannot record a result: {e}"));
        let tx = self.conn.transaction().map_err(err)?;
        tx.execute(
            "INSERT INTO samples(cell_id, rep, warmup, started_at, wall_s, extra_json) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
            params![cell_id, rep as i64, warmup, started_at, wall_s, sample.extra.to_string()],
        )
        .map_err(|e| match e.sqlite_error_code() {
            // Two processes ran the same repetition of one experiment (two `--resume` of the
            // same file at once): the first stored it, this one lost the race.
            Some(rusqlite::ErrorCode::ConstraintViolation) => LabError::store(
                &path,
                format!(
                    "{} {rep} of cell {cell_id} is already stored: another socklab process is running this experiment (two `resume` at once?); this one stops, the other keeps going: wait for it, then `resume` again if anything is missing",
                    if warmup { "warm-up" } else { "repetition" }
                ),
            ),
            _ => err(e),
        })?;
        let sid = tx.last_insert_rowid();
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO sample_metrics(sample_id, name, value) VALUES(?1, ?2, ?3)",
                )
                .map_err(err)?;
            for (name, value) in &sample.metrics {
                if value.is_finite() {
                    st.execute(params![sid, name, value]).map_err(err)?;
                }
            }
            let mut hs = tx
                .prepare_cached("INSERT INTO sample_histograms(sample_id, name, buckets_json) VALUES(?1, ?2, ?3)")
                .map_err(err)?;
            for (name, buckets) in &sample.histograms {
                hs.execute(params![
                    sid,
                    name,
                    serde_json::to_string(buckets).unwrap_or_default()
                ])
                .map_err(err)?;
            }
        }
        crate::store_series::insert(&tx, sid, &sample.intervals).map_err(err)?;
        tx.commit().map_err(err)
    }

    /// Records a fact about an experiment (replacing an earlier value).
    pub fn set_fact(&mut self, experiment: i64, key: &str, value: &str) -> Result<(), LabError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO experiment_facts(experiment_id, key, value) VALUES(?1, ?2, ?3)",
                params![experiment, key, value],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// The facts of an experiment.
    pub fn facts(&self, experiment: i64) -> Result<Vec<(String, String)>, LabError> {
        let mut st = self
            .conn
            .prepare("SELECT key, value FROM experiment_facts WHERE experiment_id=?1 ORDER BY key")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([experiment], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The newest experiment named `name` whose plan fingerprint is `fingerprint`.
    pub fn find_resumable(&self, name: &str, fingerprint: &str) -> Result<Option<i64>, LabError> {
        self.conn
            .query_row(
                "SELECT e.id FROM experiments e JOIN experiment_facts f ON f.experiment_id=e.id
                 WHERE e.name=?1 AND f.key='plan_fingerprint' AND f.value=?2 ORDER BY e.id DESC LIMIT 1",
                params![name, fingerprint],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The runs an experiment already holds: `(cell index, repetition, warm-up)`.
    pub fn done_runs(&self, experiment: i64) -> Result<Vec<(usize, usize, bool)>, LabError> {
        let mut st = self
            .conn
            .prepare("SELECT c.idx, s.rep, s.warmup FROM samples s JOIN cells c ON s.cell_id=c.id WHERE c.experiment_id=?1")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([experiment], |r| {
                Ok((
                    r.get::<_, i64>(0)? as usize,
                    r.get::<_, i64>(1)? as usize,
                    r.get::<_, bool>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Marks an experiment running again (resume), with possibly more repetitions; returns the
    /// cell ids in plan order.
    pub fn reopen_experiment(
        &mut self,
        id: i64,
        reps: usize,
        warmup: usize,
    ) -> Result<Vec<i64>, LabError> {
        self.conn
            .execute(
                "UPDATE experiments SET status='running', finished_at=NULL, reps=MAX(reps, ?2), warmup=MAX(warmup, ?3) WHERE id=?1",
                params![id, reps as i64, warmup as i64],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.cells(id)?.into_iter().map(|c| c.id).collect())
    }

    /// Marks an experiment ended with `status`.
    pub fn finish_experiment(&mut self, id: i64, status: &str) -> Result<(), LabError> {
        self.conn
            .execute(
                "UPDATE experiments SET status=?2, finished_at=?3 WHERE id=?1",
                params![id, status, now_rfc3339()],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    const EXPERIMENT_SELECT: &'static str = "SELECT e.id, e.name, e.description, e.command, e.created_at, e.finished_at, e.status, e.reps, e.warmup, e.run_order,
            (SELECT COUNT(*) FROM cells c WHERE c.experiment_id=e.id),
            (SELECT COUNT(*) FROM samples s JOIN cells c ON s.cell_id=c.id WHERE c.experiment_id=e.id AND s.warmup=0),
            e.host_id
         FROM experiments e";

    fn experiment_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExperimentRow> {
        Ok(ExperimentRow {
            id: r.get(0)?,
            name: r.get(1)?,
            description: r.get(2)?,
            command: r.get(3)?,
            created_at: r.get(4)?,
            finished_at: r.get(5)?,
            status: r.get(6)?,
            reps: r.get(7)?,
            warmup: r.get(8)?,
            run_order: r.get(9)?,
            cells: r.get(10)?,
            samples: r.get(11)?,
            host_id: r.get(12)?,
        })
    }

    /// Every experiment, oldest first.
    pub fn experiments(&self) -> Result<Vec<ExperimentRow>, LabError> {
        let mut st = self
            .conn
            .prepare(&format!("{} ORDER BY e.id", Self::EXPERIMENT_SELECT))
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], Self::experiment_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// One experiment; a missing id is an error that says which ids exist.
    pub fn experiment(&self, id: i64) -> Result<ExperimentRow, LabError> {
        self.conn
            .query_row(
                &format!("{} WHERE e.id=?1", Self::EXPERIMENT_SELECT),
                [id],
                Self::experiment_row,
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or_else(|| {
                let last = self.latest_experiment().ok().flatten();
                self.err(format!(
                    "no experiment {id}{}: see `socklab results list`",
                    last.map(|l| format!(" (ids run from 1 to {l})"))
                        .unwrap_or_default()
                ))
            })
    }

    /// The newest experiment id, if any.
    pub fn latest_experiment(&self) -> Result<Option<i64>, LabError> {
        self.conn
            .query_row("SELECT MAX(id) FROM experiments", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// The cells of an experiment in plan order.
    pub fn cells(&self, experiment: i64) -> Result<Vec<CellRow>, LabError> {
        let mut st = self
            .conn
            .prepare("SELECT id, idx, workload, label, config_json FROM cells WHERE experiment_id=?1 ORDER BY idx")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([experiment], |r| {
                let cfg: String = r.get(4)?;
                Ok(CellRow {
                    id: r.get(0)?,
                    idx: r.get(1)?,
                    workload: r.get(2)?,
                    label: r.get(3)?,
                    config: serde_json::from_str(&cfg).unwrap_or_default(),
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Every sample of an experiment (warm-ups included, flagged), in run order.
    pub fn samples(&self, experiment: i64) -> Result<Vec<SampleRow>, LabError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT s.id, s.cell_id, s.rep, s.warmup, s.started_at, s.wall_s, s.extra_json
                 FROM samples s JOIN cells c ON s.cell_id=c.id WHERE c.experiment_id=?1 ORDER BY s.id",
            )
            .map_err(|e| self.err(e))?;
        let mut rows: Vec<(i64, SampleRow)> = st
            .query_map([experiment], |r| {
                let extra: String = r.get(6)?;
                Ok((
                    r.get(0)?,
                    SampleRow {
                        cell_id: r.get(1)?,
                        rep: r.get(2)?,
                        warmup: r.get(3)?,
                        started_at: r.get(4)?,
                        wall_s: r.get(5)?,
                        metrics: BTreeMap::new(),
                        histograms: BTreeMap::new(),
                        extra: serde_json::from_str(&extra).unwrap_or(serde_json::Value::Null),
                    },
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))?;
        let mut st = self
            .conn
            .prepare(
                "SELECT m.sample_id, m.name, m.value FROM sample_metrics m
                 JOIN samples s ON m.sample_id=s.id JOIN cells c ON s.cell_id=c.id
                 WHERE c.experiment_id=?1",
            )
            .map_err(|e| self.err(e))?;
        let metrics = st
            .query_map([experiment], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, f64>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let pos: BTreeMap<i64, usize> = rows
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (*id, i))
            .collect();
        for m in metrics {
            let (sid, name, value) = m.map_err(|e| self.err(e))?;
            if let Some(&i) = pos.get(&sid) {
                rows[i].1.metrics.insert(name, value);
            }
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT h.sample_id, h.name, h.buckets_json FROM sample_histograms h
                 JOIN samples s ON h.sample_id=s.id JOIN cells c ON s.cell_id=c.id
                 WHERE c.experiment_id=?1",
            )
            .map_err(|e| self.err(e))?;
        let hists = st
            .query_map([experiment], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        for h in hists {
            let (sid, name, json) = h.map_err(|e| self.err(e))?;
            if let Some(&i) = pos.get(&sid) {
                rows[i]
                    .1
                    .histograms
                    .insert(name, serde_json::from_str(&json).unwrap_or_default());
            }
        }
        Ok(rows.into_iter().map(|(_, s)| s).collect())
    }

    /// The host facts of an experiment, as `(key, value)` pairs.
    pub fn host(&self, host_id: i64) -> Result<Vec<(String, String)>, LabError> {
        self.conn
            .query_row(
                "SELECT hostname, kernel, cpu_model, cores, mem_mib, cc_default, cc_available, tcp_wmem, tcp_rmem, socklab_version FROM hosts WHERE id=?1",
                [host_id],
                |r| {
                    let keys = ["hostname", "kernel", "cpu_model", "cores", "mem_mib", "cc_default", "cc_available", "tcp_wmem", "tcp_rmem", "socklab_version"];
                    let mut out = Vec::new();
                    for (i, k) in keys.iter().enumerate() {
                        let v: rusqlite::types::Value = r.get(i)?;
                        let s = match v {
                            rusqlite::types::Value::Integer(n) => n.to_string(),
                            rusqlite::types::Value::Text(t) => t,
                            rusqlite::types::Value::Real(f) => f.to_string(),
                            _ => String::new(),
                        };
                        out.push((k.to_string(), s));
                    }
                    Ok(out)
                },
            )
            .map_err(|e| self.err(e))
    }
}
