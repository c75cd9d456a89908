//! Issue 26 items 10 and 11, through the real binary: what is checked before anything is
//! stored (a bad `--server-host`, a `--to` where nothing listens), and what an interrupted
//! `run` or `lab` says and leaves (counts as the store holds them, the command that resumes,
//! `--resume` completing the rest without repeating a repetition). Loopback only; every wait
//! is bounded; no timing is asserted.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{run, socklab, wait_bounded};

/// A loopback port where nothing listens (bound, then closed).
fn dead_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Nothing stored: no database file, or one without experiments.
fn nothing_stored(db: &Path) -> bool {
    if !db.exists() {
        return true;
    }
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT COUNT(*) FROM experiments", [], |r| {
        r.get::<_, i64>(0)
    })
    .unwrap()
        == 0
}

#[test]
fn a_bad_server_host_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // The old code exited 2 here too, but only after it had stored a `failed` experiment.
    let (c, _, err) = run(&[
        "bulk",
        "--server-host",
        "bad host!",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("--server-host") && err.contains("'bad host!'"),
        "{err}"
    );
    assert!(nothing_stored(&db), "an experiment was stored");
}

#[test]
fn bulk_to_a_dead_port_stores_nothing_and_says_so_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let to = dead_port();
    // The old code ran every repetition (each failed), stored them, then said "refused".
    let (c, out, err) = run(&["bulk", "--to", &to, "--db", db.to_str().unwrap()]);
    assert_ne!(c, 0, "{out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("cannot connect to {to}")) && err.contains("Connection refused"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    assert!(nothing_stored(&db), "an experiment was stored");
}

#[test]
fn load_to_a_dead_port_prints_no_latency_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let to = dead_port();
    // The old code hammered the port for the whole duration, then printed 0.0us percentiles.
    let (c, out, err) = run(&[
        "load",
        "--to",
        &to,
        "--duration",
        "2s",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_ne!(c, 0, "{out}{err}");
    assert!(!out.contains("Latency percentiles"), "{out}");
    assert!(!out.contains("0.0us"), "{out}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("Connection refused"), "{err}");
    assert!(nothing_stored(&db), "an experiment was stored");
}

/// The stderr lines of a child as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines() {
            let Ok(l) = l else { return };
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits (at most `limit`) for a line that `want` accepts; returns every line read so far.
fn wait_for_line(
    rx: &mpsc::Receiver<String>,
    want: impl Fn(&str) -> bool,
    limit: Duration,
) -> Vec<String> {
    let t0 = Instant::now();
    let mut seen = Vec::new();
    loop {
        let left = limit.saturating_sub(t0.elapsed());
        match rx.recv_timeout(left) {
            Ok(l) => {
                let hit = want(&l);
                seen.push(l);
                if hit {
                    return seen;
                }
            }
            Err(_) => panic!("no such line within {limit:?}; got:\n{}", seen.join("\n")),
        }
    }
}

fn sigint(child: &Child) {
    socklab_sys::process::kill(child.id(), socklab_sys::process::Signal::Int).unwrap();
}

/// Per experiment of `db`: (id, name, measured repetitions as `results list` shows them).
fn listed(db: &Path) -> Vec<(i64, String, u64)> {
    let (c, out, err) = run(&["results", "list", "--db", db.to_str().unwrap()]);
    assert_eq!(c, 0, "{err}");
    out.lines()
        .skip(1)
        .map(|row| {
            // id, created, name, status, cells, samples, command…
            let cols: Vec<&str> = row.split_whitespace().collect();
            (
                cols[0].parse().unwrap(),
                cols[2].to_string(),
                cols[5].parse().unwrap(),
            )
        })
        .collect()
}

/// Every stored run of `db` is there once: (samples, distinct (cell, rep, warm-up)) per
/// experiment.
fn runs_and_distinct(db: &Path) -> Vec<(i64, i64, i64)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare(
            "SELECT c.experiment_id, COUNT(*), COUNT(DISTINCT c.idx || '/' || s.rep || '/' || s.warmup)
             FROM samples s JOIN cells c ON s.cell_id = c.id GROUP BY c.experiment_id ORDER BY 1",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// The command after `continue with: `, run as printed (its words have no quotes here: the
/// paths are a temporary directory's); returns (exit code, stderr).
fn run_printed(err: &str) -> (i32, String) {
    let cmd = err
        .lines()
        .find_map(|l| l.strip_prefix("continue with: "))
        .unwrap_or_else(|| panic!("no resume command in: {err}"));
    assert!(cmd.contains("--resume"), "{cmd}");
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let mut child = Command::new(words[0])
        .args(&words[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("'{cmd}' does not run: {e}"));
    let mut text = String::new();
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = pipe.read_to_string(&mut text);
        text
    });
    let st = wait_bounded(&mut child, Duration::from_secs(300), "socklab");
    (st.code().unwrap_or(-1), reader.join().unwrap())
}

/// The number before `word` in `text` ("… 25 measured …").
fn number_before(text: &str, word: &str) -> u64 {
    let at = text
        .find(word)
        .unwrap_or_else(|| panic!("no '{word}' in: {text}"));
    text[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before '{word}' in: {text}"))
}

/// Item 11, for `socklab run`: the old message counted the warm-ups as finished
/// repetitions ("interrupted: 7 finished repetitions …" where `results list` showed 5) and
/// its `continue with` dropped the command's own flags.
#[test]
fn an_interrupted_run_counts_as_the_store_does_and_its_printed_command_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.toml");
    std::fs::write(
        &file,
        "name = \"x\"\nworkload = \"bulk\"\nreps = 5\nwarmup = 2\n[fixed]\nduration = \"100ms\"\n",
    )
    .unwrap();
    let db = dir.path().join("r.db");
    let mut child = socklab()
        .args(["run", file.to_str().unwrap(), "--reps", "12"])
        .args(["--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    // Two warm-ups and two measured repetitions stored, ten still to run.
    wait_for_line(&rx, |l| l.starts_with("[4/14]"), Duration::from_secs(120));
    sigint(&child);
    let st = wait_bounded(&mut child, Duration::from_secs(60), "socklab");
    let err: Vec<String> = rx.iter().collect();
    let err = err.join("\n");
    assert_eq!(st.code(), Some(130), "{err}");
    assert!(!err.contains("finished"), "{err}");
    let stored = listed(&db);
    assert_eq!(stored.len(), 1, "{stored:?}");
    let measured = stored[0].2;
    let line = err
        .lines()
        .find(|l| l.contains("interrupted: experiment 1 holds"))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(number_before(line, "measured"), measured, "{line}");
    assert!(line.contains("(and 2 warm-ups"), "{line}");
    // The printed command keeps `--reps 12`: resumed, the experiment gets its 12.
    let (code, rerr) = run_printed(&err);
    assert_eq!(code, 0, "{rerr}");
    assert!(rerr.contains("resumed experiment 1: "), "{rerr}");
    assert_eq!(listed(&db)[0].2, 12);
    let runs = runs_and_distinct(&db);
    assert_eq!(runs, vec![(1, 14, 14)], "every run once");
}

/// Item 11: interrupting `lab` printed "lab finished in 8 s …" and then "interrupted: 26
/// finished repetitions" (warm-ups included; `results list` showed 17), and there was no
/// `lab --resume`.
#[test]
fn an_interrupted_lab_says_so_counts_as_the_store_does_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lab.db");
    let out = dir.path().join("rep");
    let mut child = socklab()
        .args(["lab", "--quick", "--suite", "states,writev"])
        .args(["--db", db.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    // states done (20 runs); writev's 9 warm-ups and 3 measured repetitions stored.
    wait_for_line(
        &rx,
        |l| l.starts_with("[12/54] writev"),
        Duration::from_secs(180),
    );
    sigint(&child);
    let st = wait_bounded(&mut child, Duration::from_secs(60), "socklab");
    let err: Vec<String> = rx.iter().collect();
    let err = err.join("\n");
    assert_eq!(st.code(), Some(130), "{err}");
    assert!(!err.contains("finished"), "{err}");
    let stored = listed(&db);
    assert_eq!(stored.len(), 2, "{stored:?}");
    let total: u64 = stored.iter().map(|e| e.2).sum();
    let line = err
        .lines()
        .find(|l| l.starts_with("lab interrupted after"))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(number_before(line, "measured"), total, "{line}");
    let writev = err
        .lines()
        .find(|l| l.contains("interrupted: experiment 2 holds"))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(number_before(writev, "measured"), stored[1].2, "{writev}");

    let (code, rerr) = run_printed(&err);
    assert_eq!(code, 0, "{rerr}");
    assert!(
        rerr.contains("resumed experiment 1: 20 runs already stored, 0 run now"),
        "{rerr}"
    );
    assert!(rerr.contains("resumed experiment 2: "), "{rerr}");
    let after = listed(&db);
    let names: Vec<(&str, u64)> = after.iter().map(|e| (e.1.as_str(), e.2)).collect();
    assert_eq!(
        names,
        vec![("states", 20), ("writev", 45)],
        "no new experiment"
    );
    assert_eq!(
        runs_and_distinct(&db),
        vec![(1, 20, 20), (2, 54, 54)],
        "every run once"
    );
}
