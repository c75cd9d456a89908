//! Issue 16 item 13: the store opens only socklab's own files, writes nothing when read, and
//! says in one line why a concurrent `--resume` lost; docs/store.md states the code's schema.

use std::path::Path;

use socklab_lab::model::params::Params;
use socklab_lab::model::sample::Sample;
use socklab_lab::plan::{Group, Order, Plan};
use socklab_lab::store::{Store, SCHEMA_VERSION};
use socklab_lab::LabError;

fn plan() -> Plan {
    let g = Group::new("memcpy", Params::new().with("bytes", "1M"));
    Plan::build("guard", "", &[g], 2, 0, Order::Sequential, "test").unwrap()
}

/// A store at `path` holding one finished experiment of two repetitions.
fn make_store(path: &Path) {
    let mut store = Store::open(path).unwrap();
    let (id, cells) = store
        .begin_experiment(&plan(), &socklab_sys::host::host_facts())
        .unwrap();
    for rep in 0..2 {
        let s = Sample::new([("gbps", 1.0 + rep as f64)], serde_json::Value::Null);
        store
            .record_sample(cells[0], rep, false, "2025-01-01T00:00:01Z", 1.0, &s)
            .unwrap();
    }
    store.finish_experiment(id, "done").unwrap();
}

#[test]
fn docs_store_md_states_the_schema_version_of_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/store.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let stated: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with('#') && l.contains("Schema (version "))
        .collect();
    assert_eq!(stated.len(), 1, "one schema heading in docs/store.md");
    let want = format!("Schema (version {SCHEMA_VERSION},");
    assert!(
        stated[0].contains(&want),
        "docs/store.md says '{}', the code writes schema {SCHEMA_VERSION}",
        stated[0]
    );
    // Every table of the schema is documented.
    for table in [
        "meta",
        "hosts",
        "experiments",
        "experiment_facts",
        "cells",
        "samples",
        "sample_metrics",
        "sample_histograms",
        "sample_intervals",
    ] {
        assert!(doc.contains(&format!("`{table}(")), "{table} missing");
    }
}

#[test]
fn an_unrelated_sqlite_file_is_refused_and_left_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE people(name TEXT); INSERT INTO people VALUES('ada');")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    for e in [
        Store::open(&path).unwrap_err(),
        Store::open_read_only(&path).unwrap_err(),
    ] {
        let m = e.to_string();
        assert!(matches!(e, LabError::NotAStore { .. }), "{m}");
        assert!(m.contains("not socklab's") && m.contains("people"), "{m}");
        assert!(!m.contains('\n'), "one line: {m}");
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is untouched"
    );
    let c = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1, "no socklab table was added");
}

#[test]
fn a_path_that_is_not_a_regular_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for e in [
        Store::open(dir.path()).unwrap_err(),
        Store::open_read_only(dir.path()).unwrap_err(),
    ] {
        assert!(matches!(e, LabError::NotAStore { .. }), "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created in it"
    );
}

#[test]
fn reading_a_store_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    make_store(&path);
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(dir.path()),
        ["s.db"],
        "a clean close leaves the file alone"
    );
    let before = std::fs::read(&path).unwrap();
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.experiments().unwrap().len(), 1);
    assert_eq!(store.samples(1).unwrap().len(), 2);
    // A reader cannot write: the connection itself is read-only.
    let id = store.latest_experiment().unwrap();
    assert_eq!(id, Some(1));
    drop(store);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the database is unchanged"
    );
}

#[test]
fn a_losing_concurrent_resume_is_told_why_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut a = Store::open(&path).unwrap();
    let (_, cells) = a
        .begin_experiment(&plan(), &socklab_sys::host::host_facts())
        .unwrap();
    // Two processes resuming the same experiment run the same missing repetition; the first
    // to commit wins.
    let mut b = Store::open(&path).unwrap();
    let s = Sample::new([("gbps", 1.0)], serde_json::Value::Null);
    a.record_sample(cells[0], 1, false, "2025-01-01T00:00:01Z", 1.0, &s)
        .unwrap();
    let e = b
        .record_sample(cells[0], 1, false, "2025-01-01T00:00:02Z", 1.0, &s)
        .unwrap_err()
        .to_string();
    assert!(!e.contains("UNIQUE constraint"), "raw SQLite error: {e}");
    assert!(
        e.contains("repetition 1")
            && e.contains("already stored")
            && e.contains("another socklab process"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
}

/// Issue 17 item 5: a store of schema 2 (before the time series) is read as it is when opened
/// read-only (nothing written, no intervals), and upgraded in place to schema 3 when opened
/// for writing, its experiments intact and intervals recordable.
#[test]
fn a_version_2_store_is_read_as_it_is_and_upgraded_when_written() {
    use socklab_lab::model::sample::{Direction, Interval};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.db");
    make_store(&path);
    // Make it exactly what schema 2 wrote: no sample_intervals, version 2.
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "DROP TABLE sample_intervals; PRAGMA user_version = 2;
             UPDATE meta SET value = '2' WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let version = |p: &Path| -> i64 {
        rusqlite::Connection::open(p)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&path), 2);
    let before = std::fs::read(&path).unwrap();
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.samples(1).unwrap().len(), 2);
    assert!(store.intervals(1).unwrap().is_empty());
    drop(store);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "reading wrote nothing"
    );
    // Opened for writing: upgraded, old rows kept, a repetition with intervals stored.
    let mut store = Store::open(&path).unwrap();
    assert_eq!(version(&path), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 3);
    assert_eq!(store.samples(1).unwrap().len(), 2);
    let cell = store.cells(1).unwrap()[0].id;
    let mut s = Sample::new([("gbps", 3.0)], serde_json::Value::Null);
    s.intervals = vec![Interval {
        stream: 0,
        direction: Direction::Up,
        start_s: 0.0,
        end_s: 0.5,
        omitted: false,
        values: vec![("gbps".into(), 3.0)],
    }];
    store
        .record_sample(cell, 2, false, "2025-01-01T00:00:02Z", 1.0, &s)
        .unwrap();
    let rows = store.intervals(1).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].rep, rows[0].get("gbps")), (2, Some(3.0)));
    drop(store);
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.intervals(1).unwrap().len(), 1, "read back read-only");
}
