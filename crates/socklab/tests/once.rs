//! Issue 28 part 5: single runs as an iperf3 user expects. `--once` is `--reps 1 --warmup 0`
//! on every measuring command, and a plan that takes more than twice the duration asked says
//! so on stderr before it starts (the text is asserted, never the time). Loopback, short runs.

mod common;

use common::run;

/// The stored repetitions of the newest experiment in `db`: (measured, warm-ups).
fn stored(db: &str) -> (usize, usize) {
    let (code, out, err) = run(&["results", "export", "--format", "json", "--db", db]);
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    let warm = rows.iter().filter(|r| r["warmup"] == true).count();
    (rows.len() - warm, warm)
}

const NOTICE: &str = "socklab: this runs ";

#[test]
fn once_runs_one_repetition_and_no_warmup_and_says_nothing_of_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (code, out, err) = run(&["bulk", "--once", "--duration", "0.3s", "--db", db]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(stored(db), (1, 0));
    assert!(!err.contains(NOTICE), "{err}");
    assert!(out.contains("(done, 1 reps + 0 warm-up per cell"), "{out}");
}

#[test]
fn the_default_plan_says_how_long_it_takes_and_why_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    // The defaults: 5 repetitions and a warm-up of 0.3 s each.
    let (code, out, err) = run(&["bulk", "--duration", "0.3s", "--db", db]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(stored(db), (5, 1));
    let line = err
        .lines()
        .find(|l| l.starts_with(NOTICE))
        .unwrap_or_else(|| panic!("no notice in:\n{err}"));
    assert_eq!(
        line,
        "socklab: this runs 6 repetitions of 0.3 s (5 + 1 warm-up), at least 1.8 s in all; --once runs one"
    );
    // Before the first repetition's progress line.
    let first_rep = err.find("[1/6]").unwrap_or(usize::MAX);
    assert!(err.find(NOTICE).unwrap() < first_rep, "{err}");
    // Twice the duration (one repetition and a warm-up) is not worth a line.
    let (code, _, err) = run(&[
        "bulk",
        "--duration",
        "0.2s",
        "--reps",
        "1",
        "--warmup",
        "1",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains(NOTICE), "{err}");
}

#[test]
fn once_is_on_every_measuring_command_and_conflicts_with_reps_and_warmup() {
    for cmd in ["bulk", "pingpong", "load", "transfer", "rrul"] {
        let (code, out, err) = run(&[cmd, "--help"]);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert!(out.contains("--once"), "{cmd} --help:\n{out}");
        for other in [["--reps", "3"], ["--warmup", "2"]] {
            let (code, _, err) = run(&[cmd, "--once", other[0], other[1], "--dry-run"]);
            assert_eq!(code, 2, "{cmd} --once {other:?}: {err}");
            assert!(err.contains("--once") && err.contains(other[0]), "{err}");
        }
    }
    // A dry run of --once: one run per cell.
    let (code, out, err) = run(&["bulk", "--once", "--bufsize", "64K,128K", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("2 cells x (1 repetition + 0 warm-up) = 2 runs"),
        "{out}"
    );
    let (code, out, err) = run(&["pingpong", "--once", "--udp", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(1 repetition + 0 warm-up) = 1 run"), "{out}");
}
