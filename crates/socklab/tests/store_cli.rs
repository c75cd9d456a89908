//! Issue 16 item 13: `results` and `report` read a store without writing (a read-only mount);
//! `--db` refuses another program's SQLite file and what is not a regular file.

mod common;

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use common::{root_or_skip, run};

/// A store in `dir` holding one finished experiment (a tiny memcpy, well under a second).
fn make_store(dir: &Path) -> std::path::PathBuf {
    let toml = dir.join("m.toml");
    std::fs::write(
        &toml,
        "name = \"tiny\"\nworkload = \"memcpy\"\nreps = 2\nwarmup = 0\n[fixed]\nbytes = \"1M\"\n",
    )
    .unwrap();
    let db = dir.join("s.db");
    let (code, _, err) = run(&["run", toml.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    db
}

#[test]
fn results_and_report_read_a_store_on_a_read_only_mount() {
    if !root_or_skip("results_and_report_read_a_store_on_a_read_only_mount") {
        return;
    }
    if Command::new("unshare").arg("--version").output().is_err() {
        socklab_sys::skip::skip(
            "results_and_report_read_a_store_on_a_read_only_mount",
            "no unshare",
            "no unshare (util-linux)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let db = make_store(&ro);
    for f in std::fs::read_dir(&ro).unwrap() {
        let f = f.unwrap().path();
        if f != db {
            std::fs::remove_file(f).unwrap();
        }
    }
    let out = dir.path().join("report");
    // A private mount namespace: the read-only bind mount vanishes with the shell.
    let script = format!(
        "mount --bind '{ro}' '{ro}' && mount -o remount,bind,ro '{ro}' || exit 77\n\
         if touch '{ro}/probe' 2>/dev/null; then exit 78; fi\n\
         '{bin}' results list --db '{db}' || exit 11\n\
         '{bin}' results show --db '{db}' >/dev/null || exit 12\n\
         '{bin}' results export --db '{db}' >/dev/null || exit 13\n\
         '{bin}' report --db '{db}' --out '{out}' >/dev/null || exit 14\n",
        ro = ro.display(),
        db = db.display(),
        out = out.display(),
        bin = cargo_bin("socklab").display()
    );
    let o = Command::new("timeout")
        .args([
            "60",
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    match o.status.code() {
        Some(77) | Some(78) => {
            socklab_sys::skip::skip(
                "results_and_report_read_a_store_on_a_read_only_mount",
                "no read-only bind mount",
                &format!("no read-only bind mount here: {stderr}"),
            );
        }
        Some(0) => {
            assert!(stdout.contains("tiny"), "the experiment is listed: {stdout}");
            assert!(out.join("index.html").is_file(), "the report was written");
        }
        c => panic!("exit {c:?} (11 list, 12 show, 13 export, 14 report)\nstdout: {stdout}\nstderr: {stderr}"),
    }
}

#[test]
fn results_refuses_an_unrelated_sqlite_file_and_leaves_it_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = make_store(dir.path());
    // Another program's SQLite database.
    let foreign = dir.path().join("foreign.db");
    {
        let c = rusqlite::Connection::open(&foreign).unwrap();
        c.execute_batch("CREATE TABLE people(name TEXT); INSERT INTO people VALUES('ada');")
            .unwrap();
    }
    let before = std::fs::read(&foreign).unwrap();
    for sub in [&["results", "list"][..], &["report"][..]] {
        let mut args = sub.to_vec();
        args.extend(["--db", foreign.to_str().unwrap()]);
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains("not socklab's"), "{err}");
    }
    assert_eq!(
        std::fs::read(&foreign).unwrap(),
        before,
        "foreign.db untouched"
    );
    let c = rusqlite::Connection::open(&foreign).unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "no table added to foreign.db");
    // socklab's own store still lists.
    let (code, out, err) = run(&["results", "list", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tiny"));
}

#[test]
fn a_db_that_is_not_a_regular_file_is_refused_and_nothing_is_left_beside_it() {
    let journal = Path::new("/dev/null-journal");
    let preexisting = journal.exists();
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("m.toml");
    std::fs::write(
        &toml,
        "name = \"t\"\nworkload = \"memcpy\"\nreps = 1\nwarmup = 0\n[fixed]\nbytes = \"1M\"\n",
    )
    .unwrap();
    for args in [
        vec!["results", "list", "--db", "/dev/null"],
        vec![
            "report",
            "--db",
            "/dev/null",
            "--out",
            dir.path().to_str().unwrap(),
        ],
        vec!["run", toml.to_str().unwrap(), "--db", "/dev/null"],
        vec![
            "run",
            toml.to_str().unwrap(),
            "--db",
            dir.path().to_str().unwrap(),
        ],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
    if preexisting {
        eprintln!("note: /dev/null-journal existed before this test; not checked");
    } else {
        assert!(!journal.exists(), "socklab left /dev/null-journal");
    }
}

/// Issue 28 part 2: `results list` shows each experiment's headline figure: the top cell's
/// mean with its 95% interval, called "top mean" (3 repetitions can name no best), read from
/// the store as the report reads it.
#[test]
fn results_list_shows_each_experiments_headline_figure() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("m.toml");
    std::fs::write(
        &toml,
        "name = \"sizes\"\nworkload = \"memcpy\"\nreps = 3\nwarmup = 0\n[fixed]\nbytes = \"1M\"\n[matrix]\nsize = [\"64\", \"64K\"]\n",
    )
    .unwrap();
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    let (code, _, err) = run(&["run", toml.to_str().unwrap(), "--db", db]);
    assert_eq!(code, 0, "{err}");
    let (code, list, err) = run(&["results", "list", "--db", db]);
    assert_eq!(code, 0, "{err}");
    let mut lines = list.lines();
    let header = lines.next().unwrap();
    assert!(header.contains(" headline "), "{list}");
    let row = lines.next().unwrap();
    let at = row.find(" Gbit/s ").unwrap_or_else(|| panic!("{list}"));
    // The figure is a number, then its interval (`±h` or `lo–hi`), then where it comes from.
    let figure: String = row[..at].split_whitespace().last().unwrap().to_string();
    assert!(figure.parse::<f64>().is_ok_and(|g| g > 0.0), "{row}");
    let rest = &row[at + " Gbit/s ".len()..];
    assert!(rest.starts_with('±') || rest.contains('–'), "{row}");
    assert!(
        rest.contains("(size=64, top mean, n=3)") || rest.contains("(size=64K, top mean, n=3)"),
        "{row}"
    );
}
