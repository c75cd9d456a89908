//! `--json-stream` (issue 28 part 4) through the real binary on loopback: stdout is read line
//! by line as it arrives; each line is one JSON event, in order: `start`, `interval`s and a
//! `repetition` per finished repetition (warm-ups flagged), then `end` holding what `results
//! show --json` prints; Ctrl-C ends the stream with `interrupted`. Short runs bounded in
//! repetitions and duration; the waits are hang guards, nothing is timed.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::http::http_server;
use common::{run, socklab, wait_bounded};
use serde_json::Value;

/// The hang guard of one line or one run.
const LIMIT: Duration = Duration::from_secs(120);

/// A running socklab whose stdout lines arrive on `lines` as they are written.
struct Streaming {
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Streaming {
    fn spawn(args: &[&str]) -> Streaming {
        let mut child = socklab()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut err, e) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            e.lock().unwrap().push_str(&s);
        });
        Streaming {
            child,
            lines,
            stderr,
        }
    }

    /// The next line, `None` at the end of stdout.
    fn next(&mut self) -> Option<Value> {
        match self.lines.recv_timeout(LIMIT) {
            Ok(l) => {
                Some(serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                panic!("no line for {LIMIT:?}; stderr: {}", self.err());
            }
        }
    }

    /// The lines up to the first `repetition`, and whether socklab was still running when it
    /// arrived.
    fn until_first_repetition(&mut self) -> (Vec<Value>, bool) {
        let mut got = Vec::new();
        while let Some(v) = self.next() {
            let rep = v["event"] == "repetition";
            got.push(v);
            if rep {
                let alive = self.child.try_wait().unwrap().is_none();
                return (got, alive);
            }
        }
        panic!("no repetition line: {got:?}; stderr: {}", self.err());
    }

    /// Every line left, and the exit code.
    fn finish(mut self) -> (Vec<Value>, i32, String) {
        let mut got = Vec::new();
        while let Some(v) = self.next() {
            got.push(v);
        }
        let st = wait_bounded(&mut self.child, LIMIT, "socklab --json-stream");
        // The stderr reader ends with the process.
        common::wait_until(LIMIT, || Arc::strong_count(&self.stderr) == 1);
        (got, st.code().unwrap_or(-1), self.err())
    }

    fn err(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

fn events(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|l| l["event"].as_str().unwrap()).collect()
}

/// Runs `args` (a measuring command given `--json-stream --reps 2 --warmup 1`) into a fresh
/// database and checks the stream: its first repetition line arrives while the run goes on,
/// the events come in order with the warm-up flagged, and `end` holds what `results show
/// --json` prints. Returns the lines.
fn stream_of(args: &[&str], intervals: bool) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--json-stream", "--reps", "2", "--warmup", "1", "--db", db]);
    let mut s = Streaming::spawn(&all);
    let (mut lines, alive) = s.until_first_repetition();
    assert!(
        alive,
        "the first repetition's line came only as socklab ended: {lines:?}"
    );
    let (rest, code, err) = s.finish();
    assert_eq!(code, 0, "{all:?}: {err}");
    lines.extend(rest);
    let ev = events(&lines);
    assert_eq!(ev.first(), Some(&"start"), "{ev:?}");
    assert_eq!(ev.last(), Some(&"end"), "{ev:?}");
    let middle = &ev[1..ev.len() - 1];
    assert!(
        middle
            .iter()
            .all(|e| ["interval", "repetition"].contains(e)),
        "{ev:?}"
    );
    assert_eq!(middle.iter().filter(|e| **e == "repetition").count(), 3);
    assert_eq!(middle.contains(&"interval"), intervals, "{ev:?}");
    if intervals {
        assert_eq!(
            ev[1], "interval",
            "intervals precede their repetition: {ev:?}"
        );
    }
    let start = &lines[0]["data"];
    assert_eq!(start["schema"], "socklab.json-stream/1");
    assert_eq!(
        (start["reps"].as_u64(), start["warmup"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(start["runs"], 3);
    let reps: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "repetition")
        .map(|l| &l["data"])
        .collect();
    let warm: Vec<bool> = reps
        .iter()
        .map(|r| r["warmup"].as_bool().unwrap())
        .collect();
    assert_eq!(warm, [true, false, false], "{reps:?}");
    for r in &reps {
        assert_eq!(r["valid"], true, "{r}");
        assert_eq!(r["experiment"], start["experiment"]);
        assert!(
            r["metrics"].as_object().is_some_and(|m| !m.is_empty()),
            "{r}"
        );
        assert!(r["config"].is_object(), "{r}");
    }
    let (c, shown, err) = run(&["results", "show", "--json", "--db", db]);
    assert_eq!(c, 0, "{err}");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(lines.last().unwrap()["data"], shown);
    lines
}

#[test]
fn bulk_streams_its_intervals_and_repetitions_as_they_happen() {
    let lines = stream_of(&["bulk", "--interval", "100ms", "--duration", "0.5s"], true);
    let i = lines.iter().find(|l| l["event"] == "interval").unwrap();
    assert!(i["data"]["gbps"].is_number(), "{i}");
    assert_eq!(
        i["data"]["warmup"], true,
        "the warm-up's intervals come first"
    );
}

#[test]
fn pingpong_streams_its_repetitions() {
    let lines = stream_of(&["pingpong", "--count", "20000"], false);
    let r = lines.iter().find(|l| l["event"] == "repetition").unwrap();
    assert!(r["data"]["metrics"]["rtt_p50_us"].is_number(), "{r}");
}

#[test]
fn load_streams_its_intervals_and_repetitions() {
    let addr = http_server().to_string();
    let args = [
        "load",
        "--to",
        &addr,
        "--connections",
        "2",
        "--threads",
        "1",
        "--duration",
        "0.5s",
        "--interval",
        "100ms",
    ];
    let lines = stream_of(&args, true);
    let r = lines.iter().find(|l| l["event"] == "repetition").unwrap();
    assert!(r["data"]["metrics"]["req_per_s"].is_number(), "{r}");
}

#[test]
fn ctrl_c_ends_the_stream_with_an_interrupted_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut s = Streaming::spawn(&[
        "bulk",
        "--json-stream",
        "--interval",
        "100ms",
        "--duration",
        "1s",
        "--reps",
        "5",
        "--warmup",
        "0",
        "--db",
        db.to_str().unwrap(),
    ]);
    let (mut lines, alive) = s.until_first_repetition();
    assert!(alive, "five 1 s repetitions still to go: {lines:?}");
    let kill = std::process::Command::new("kill")
        .args(["-INT", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let (rest, code, err) = s.finish();
    assert_eq!(code, 130, "{err}");
    lines.extend(rest);
    let ev = events(&lines);
    assert_eq!(ev.last(), Some(&"interrupted"), "{ev:?}");
    assert!(!ev.contains(&"end"), "{ev:?}");
    let d = &lines.last().unwrap()["data"];
    assert_eq!(d["experiment"], lines[0]["data"]["experiment"]);
    let measured = d["measured"].as_u64().unwrap();
    assert!((1..5).contains(&measured), "{d}");
    assert_eq!(
        ev.iter().filter(|e| **e == "repetition").count() as u64,
        measured,
        "a line per stored repetition: {ev:?}"
    );
    assert!(
        d["message"].as_str().unwrap().starts_with("interrupted"),
        "{d}"
    );
    assert_eq!(
        d["statistics"]["cells"][0]["n"].as_u64(),
        Some(measured),
        "{d}"
    );
}

#[test]
fn json_stream_conflicts_with_json_and_csv() {
    for other in ["--json", "--csv"] {
        let (c, _, err) = run(&["bulk", "--json-stream", other, "--dry-run"]);
        assert_eq!(c, 2, "{other}: {err}");
        assert!(err.contains("--json-stream"), "{err}");
    }
    // `results show` shares the output flags but streams nothing: a stored experiment.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let ping = ["pingpong", "--count", "10", "--reps", "1", "--warmup", "0"];
    let (c, _, err) = run(&[&ping[..], &["--db", db]].concat());
    assert_eq!(c, 0, "{err}");
    let (c, out, err) = run(&["results", "show", "--json-stream", "--db", db]);
    assert_eq!((c, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("use --json"), "{err}");
}

#[test]
fn an_experiment_file_streams_too() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    std::fs::write(
        &file,
        "name = \"m\"\nworkload = \"memcpy\"\nreps = 2\nwarmup = 0\n[fixed]\nbytes = \"1M\"\n[matrix]\nsize = [\"4K\", \"64K\"]\n",
    )
    .unwrap();
    let db = dir.path().join("r.db");
    let (file, db) = (file.to_str().unwrap(), db.to_str().unwrap());
    let s = Streaming::spawn(&["run", file, "--json-stream", "--db", db]);
    let (lines, code, err) = s.finish();
    assert_eq!(code, 0, "{err}");
    let ev = events(&lines);
    assert_eq!(
        ev,
        [
            "start",
            "repetition",
            "repetition",
            "repetition",
            "repetition",
            "end"
        ]
    );
    let (c, shown, err) = run(&["results", "show", "--json", "--db", db]);
    assert_eq!(c, 0, "{err}");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(lines[5]["data"], shown);
}

/// A repetition the emulated link marks invalid says so, and why, in its line (and in its
/// stored extra). The rule "at most 0.001 % of packets more than 1 µs late" is one no
/// emulator thread keeps (its lag is tens of µs), so the repetition is invalid. Root only.
#[test]
fn an_invalid_repetition_says_why() {
    if !common::root_or_skip("an_invalid_repetition_says_why") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let s = Streaming::spawn(&[
        "bulk",
        "--json-stream",
        "--link",
        "delay 1ms",
        "--link-valid",
        "0.001% 1us",
        "--duration",
        "0.3s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--keep-invalid",
        "--db",
        db.to_str().unwrap(),
    ]);
    let (lines, code, err) = s.finish();
    assert_eq!(code, 0, "{err}");
    let r = &lines.iter().find(|l| l["event"] == "repetition").unwrap()["data"];
    assert_eq!(r["valid"], false, "{r}");
    let why = r["invalid_reason"].as_str().unwrap();
    assert!(why.contains("late") && why.contains("1us"), "{why}");
    let (c, out, err) = run(&[
        "results",
        "export",
        "--format",
        "json",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(c, 0, "{err}");
    let runs: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(runs[0]["extra"]["invalid_reason"], why);
}

/// `lab --json-stream`: each suite's experiment streams from `start` to `end` on stdout,
/// and the tables and the report's line go to stderr.
#[test]
fn a_lab_streams_each_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let (db, out) = (dir.path().join("r.db"), dir.path().join("rep"));
    let s = Streaming::spawn(&[
        "lab",
        "--quick",
        "--suite",
        "states",
        "--json-stream",
        "--db",
        db.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let (lines, code, err) = s.finish();
    assert_eq!(code, 0, "{err}");
    let ev = events(&lines);
    assert_eq!(
        (ev.first(), ev.last()),
        (Some(&"start"), Some(&"end")),
        "{ev:?}"
    );
    assert_eq!(ev.iter().filter(|e| **e == "start").count(), 1, "{ev:?}");
    let runs = lines[0]["data"]["runs"].as_u64().unwrap();
    let reps = ev.iter().filter(|e| **e == "repetition").count() as u64;
    assert_eq!(reps, runs, "{ev:?}");
    assert!(
        err.contains("lab finished") && err.contains("report:"),
        "{err}"
    );
    assert!(out.join("index.html").exists());
}
