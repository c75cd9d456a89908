//! Issue 28 parts 3 and 6: `socklab compare A B` as a CI gate, and `report --compare A,B`.
//! Real processes on loopback: a real slowdown (256-byte writes against 128 KiB) trips the gate,
//! a rerun of the same configuration does not; a pingpong over a link with more delay is
//! slower in latency (lower is better) and the reverse is faster; a saved baseline works as
//! A; bad input exits 2 with one line. No test asserts a throughput: only verdicts, exit codes
//! and what is printed.

mod common;

use common::{assert_usage_error, run};

/// Runs a measuring command into `db` and returns its stdout (it must succeed).
fn measure(db: &str, args: &[&str]) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--db", db]);
    let (code, out, err) = run(&all);
    assert_eq!(code, 0, "{all:?}: {err}");
    out
}

/// Measures one experiment per `(name, workload, fixed keys)` into `db` (ids 1, 2, … in
/// order), `reps` repetitions each, no warm-up, interleaved: in round k each experiment file
/// runs with `--resume --reps k` (its k-th repetition), so that a load which comes and goes
/// beside the test (other builds, `stress-ng`) falls on every experiment alike instead of on
/// whichever ran during it. The experiments are what `bulk`/`pingpong` with the same keys and
/// `--reps N --warmup 0` store.
fn interleaved(dir: &std::path::Path, db: &str, reps: usize, experiments: &[(&str, &str, &str)]) {
    let files: Vec<String> = experiments
        .iter()
        .map(|(name, workload, fixed)| {
            let f = dir.join(format!("{name}.toml"));
            let body = format!(
                "name = \"{name}\"\nworkload = \"{workload}\"\nreps = 1\nwarmup = 0\n[fixed]\n{fixed}\n"
            );
            std::fs::write(&f, body).unwrap();
            f.to_str().unwrap().to_string()
        })
        .collect();
    for k in 1..=reps {
        let reps = k.to_string();
        for f in &files {
            let mut args = vec!["run", f, "--reps", &reps];
            if k > 1 {
                args.push("--resume");
            }
            measure(db, &args);
        }
    }
}

/// The threshold: 256-byte writes move about 18× fewer bytes than 128 KiB writes here (B/A
/// about 0.055 on a quiet machine: 1.9 against 34.6 Gbit/s), and stay far slower under CPU
/// contention: both sides are CPU-bound and get the same share of the contended CPUs, so B/A
/// follows the CPU per byte, and the 256-byte side spends it on 512× more syscalls. A gate at
/// 60% trips when B/A is significantly under 0.4; a rerun of the same configuration,
/// interleaved with it, would need nearly all of its repetitions under A's and a mean under
/// 0.4 of A's. The measuring tests of this file take turns ([`turn`]) so that one does not
/// load the other.
///
/// Why not 2 KiB, the issue's example: it is about 3× slower (B/A 0.16–0.36), and in a CI run
/// with `stress-ng --cpu 2` beside it one 128 KiB repetition in eight lost most of its CPU,
/// which widened A's spread so far that Welch's p was 0.052 (Mann–Whitney's 0.007): compare
/// rightly said "same" at that n, and the gate passed. A test of the gate needs a slowdown
/// that no CPU hog can hide.
const GATE: &str = "60%";

/// Held while a test measures, so the tests of this file do not run beside each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_small_write_slowdown_trips_the_gate_and_a_rerun_of_the_same_configuration_does_not() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let db = db.to_str().unwrap();
    // 1: A, 2: B (256-byte writes), 3: a rerun of A.
    // Eight repetitions of 0.5 s a side: with `stress-ng --cpu 2` and other builds beside it,
    // a repetition now and then loses most of its CPU; at five of 0.3 s a side such slow
    // repetitions of A (below B's) left Welch and Mann–Whitney short of p < 0.05 in some tries
    // here, at eight of 0.5 s in none.
    interleaved(
        dir.path(),
        db,
        8,
        &[
            ("a", "bulk", "bufsize = \"128K\"\nduration = \"0.5s\""),
            ("b", "bulk", "bufsize = \"256\"\nduration = \"0.5s\""),
            ("c", "bulk", "bufsize = \"128K\"\nduration = \"0.5s\""),
        ],
    );

    // Slower beyond the threshold: exit 1, the verdict and the gate's line last.
    let gate = |a: &str, b: &str, ignore: &str| {
        let mut args = vec!["compare", a, b, "--threshold", GATE, "--db", db];
        if !ignore.is_empty() {
            args.extend(["--ignore", ignore]);
        }
        run(&args)
    };
    let (code, out, err) = gate("1", "2", "bufsize");
    assert_eq!(code, 1, "{out}{err}");
    let gbps = out.lines().find(|l| l.starts_with("gbps ")).unwrap();
    assert!(gbps.contains("slower") && gbps.contains("FAIL"), "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("gate: FAIL") && last.contains("gbps"),
        "{out}"
    );

    // The same configuration again: exit 0.
    let (code, out, err) = gate("1", "3", "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.lines().last().unwrap().starts_with("gate: pass"),
        "{out}"
    );

    // Without a threshold there is no gate: exit 0 whatever the verdicts.
    let (code, out, _) = run(&["compare", "1", "2", "--ignore", "bufsize", "--db", db]);
    assert_eq!(code, 0);
    assert!(
        out.lines().last().unwrap().starts_with("gate: none"),
        "{out}"
    );

    // Baselines: `results export --json` (every repetition) and the statistics JSON of
    // `results show --json` (what `bulk --json` prints, with each metric's values) of A.
    let mut bases = Vec::new();
    for (name, cmd) in [("export.json", "export"), ("stats.json", "show")] {
        let (code, text, err) = run(&["results", cmd, "1", "--json", "--db", db]);
        assert_eq!(code, 0, "{err}");
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        bases.push(path.to_str().unwrap().to_string());
    }
    for base in &bases {
        let (code, out, err) = gate(base, "2", "bufsize");
        assert_eq!(code, 1, "{base}: {out}{err}");
        assert!(out.starts_with(&format!("A: '{base}'")), "{out}");
        // The baseline against the rerun of its own configuration passes.
        let (code, out, err) = gate(base, "3", "");
        assert_eq!(code, 0, "{base}: {out}{err}");
    }

    // --json: one object with the verdict and the gate.
    let (code, out, _) = run(&[
        "compare",
        "1",
        "2",
        "--ignore",
        "bufsize",
        "--metric",
        "gbps",
        "--threshold",
        GATE,
        "--json",
        "--db",
        db,
    ]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["gate"]["outcome"], "fail");
    let gbps = &v["cells"][0]["metrics"][0];
    assert_eq!(
        (&gbps["metric"], &gbps["verdict"]),
        (&"gbps".into(), &"slower".into())
    );
    assert!(
        gbps["ratio_interval"]["lo"].as_f64().unwrap() >= 0.0,
        "{out}"
    );

    // report --compare: the comparison as a section of both reports; --compare-ignore pairs
    // the 128K cell with the 256-byte one as compare's --ignore does.
    let rep = dir.path().join("rep");
    let (code, _, err) = run(&[
        "report",
        "--compare",
        "1,2",
        "--compare-ignore",
        "bufsize",
        "--out",
        rep.to_str().unwrap(),
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(rep.join("index.html")).unwrap();
    let md = std::fs::read_to_string(rep.join("report.md")).unwrap();
    assert!(html.contains("<section id=\"compare\">"), "{html}");
    assert!(html.contains("<td>gbps</td><td>higher</td>"), "{html}");
    assert!(html.contains("slower"), "{html}");
    assert!(html.find("id=\"compare\"").unwrap() < html.find("<footer>").unwrap());
    assert!(md.contains("## Comparison: experiment 1 in"), "{md}");
    assert!(md.contains("| gbps | higher |"), "{md}");
    assert!(md.contains("gate: none"), "{md}");
}

#[test]
fn a_longer_link_delay_is_slower_in_latency_and_the_reverse_is_faster() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let db = db.to_str().unwrap();
    // UDP round trips through socklab's user-space link emulator (the udp-proxy driver: no
    // root) with 1 ms and 3 ms of delay each way: the median round trip triples (B/A 3.02
    // [2.78, 3.28] here), with little spread between repetitions. A gate at 60% trips at 1.6:
    // contention beside the test would have to add over a millisecond to A's round trips alone.
    // (Plain commands, one after the other: an experiment file refuses `link_driver =
    // "udp-proxy"` beside `udp = true`, so these two are not interleaved; the delay, not the
    // CPU, sets their round trips.)
    for delay in ["delay 1ms", "delay 3ms"] {
        let mut args = vec![
            "pingpong",
            "--udp",
            "--driver",
            "udp-proxy",
            "--link",
            delay,
        ];
        args.extend(["--count", "50", "--reps", "5", "--warmup", "0"]);
        measure(db, &args);
    }
    let args = |a: &'static str, b: &'static str| {
        run(&[
            "compare",
            a,
            b,
            "--ignore",
            "link",
            "--metric",
            "rtt_p50_us",
            "--threshold",
            GATE,
            "--db",
            db,
        ])
    };
    let (code, out, err) = args("1", "2");
    assert_eq!(code, 1, "{out}{err}");
    let row = out.lines().find(|l| l.starts_with("rtt_p50_us")).unwrap();
    assert!(row.contains("lower") && row.contains("slower"), "{out}");
    let (code, out, err) = args("2", "1");
    assert_eq!(code, 0, "{out}{err}");
    let row = out.lines().find(|l| l.starts_with("rtt_p50_us")).unwrap();
    assert!(row.contains("faster"), "{out}");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_it() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let db = db.to_str().unwrap();
    let mut one = vec!["bulk", "--bufsize", "64K", "--duration", "0.1s"];
    one.extend(["--reps", "2", "--warmup", "0"]);
    measure(db, &one);
    let mut two = one.clone();
    two[2] = "32K";
    two.push("--json");
    let stats = measure(db, &two);
    let file = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    };
    // What `bulk --json` printed is a baseline (its metrics carry their values); with two
    // repetitions a side there is no verdict, and it says how many would give one.
    let base = file("base.json", &stats);
    let (code, out, err) = run(&["compare", &base, "1", "--ignore", "bufsize", "--db", db]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cannot tell at this n"), "{out}");
    let not_json = file("notes.json", "hello");
    let old = file(
        "old.json",
        r#"{"schema":"socklab.experiment/1","cells":[{"label":"bulk","workload":"bulk","config":{},"metrics":{"gbps":{"mean":1.0}}}]}"#,
    );
    let missing = dir.path().join("none.json");
    let missing = missing.to_str().unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["1", "9"], vec!["no experiment 9", "1, 2"]),
        (vec!["1", missing], vec!["none.json", "no such file"]),
        (vec![&not_json, "1"], vec!["notes.json", "not socklab JSON"]),
        (vec![&old, "1"], vec!["values", "socklab results export"]),
        (
            vec!["1", "2"],
            vec!["no common cells", "bufsize (64K vs 32K)", "--ignore"],
        ),
        (
            vec!["1", "2", "--ignore", "bufsise"],
            vec!["bufsise", "bufsize"],
        ),
        (
            vec!["1", "2", "--ignore", "bufsize", "--metric", "gbsp"],
            vec!["gbsp", "gbps"],
        ),
        (
            vec!["1", "1", "--threshold", "5"],
            vec!["--threshold '5'", "5%"],
        ),
        (
            vec!["1", "1", "--threshold", "-3%"],
            vec!["--threshold '-3%'"],
        ),
    ];
    for (args, needles) in cases {
        let mut all = vec!["compare"];
        all.extend(args);
        all.extend(["--db", db]);
        assert_usage_error(&all, &needles);
    }
    let out = dir.path().join("rep");
    assert_usage_error(
        &[
            "report",
            "--compare",
            "1,9",
            "--out",
            out.to_str().unwrap(),
            "--db",
            db,
        ],
        &["no experiment 9"],
    );
    assert!(!out.exists(), "nothing written on bad input");
}
