//! Issue 28 part 4: `socklab results export --prometheus` of real experiments (bulk and
//! pingpong, short) is what Debian's `promtool check metrics` accepts without a lint
//! complaint, and its values are the statistics `results show --json` prints, in base units.
//! Skipped (and said so) where /usr/bin/promtool is missing (scripts/test installs it).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::run;

const PROMTOOL: &str = "/usr/bin/promtool";

/// `promtool check metrics` of `text` (on its stdin): exit code and everything it printed.
fn promtool_check(text: &str) -> (i32, String) {
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), said)
}

/// The value of the one sample of `family` whose labels include every one of `labels`
/// (`name="value"`), read from the exposition `text`.
fn sample(text: &str, family: &str, labels: &[&str]) -> f64 {
    let found: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(found.len(), 1, "{family} {labels:?} in\n{text}");
    found[0]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn the_exposition_of_real_runs_passes_promtool_and_carries_the_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let short = ["--reps", "3", "--warmup", "0"];
    for cmd in [
        &["bulk", "--streams", "2", "--duration", "0.3s"][..],
        &["pingpong", "--count", "300"][..],
    ] {
        let mut args = cmd.to_vec();
        args.extend(short);
        args.extend(["--db", db]);
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {out}\n{err}");
    }
    let (code, text, err) = run(&["results", "export", "--all", "--prometheus", "--db", db]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("# TYPE socklab_throughput_bytes_per_second gauge"),
        "{text}"
    );
    if !std::path::Path::new(PROMTOOL).exists() {
        socklab_sys::skip::skip(
            "the_exposition_of_real_runs_passes_promtool_and_carries_the_statistics",
            "no promtool (Debian package prometheus)",
            PROMTOOL,
        );
        return;
    }
    let (code, said) = promtool_check(&text);
    assert_eq!(code, 0, "promtool: {said}\n{text}");
    assert_eq!(said.trim(), "", "promtool's complaints:\n{text}");
    // The values round-trip: the means and intervals `results show --json` prints, in base
    // units (Gbit/s in bytes per second, µs in seconds).
    for (id, metric, base, unit, to_base) in [
        ("1", "gbps", "throughput", "bytes_per_second", 1e9 / 8.0),
        ("1", "rtt_us", "rtt", "seconds", 1e-6),
        ("2", "total_us", "round_trips", "seconds", 1e-6),
    ] {
        let (code, show, err) = run(&["results", "show", id, "--json", "--db", db]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&show).unwrap();
        let s = &v["cells"][0]["metrics"][metric];
        let exp = format!("experiment=\"{id}\"");
        for (stat, key) in [
            ("", "mean"),
            ("ci95_lo_", "ci95_lo"),
            ("ci95_hi_", "ci95_hi"),
        ] {
            let name = format!("socklab_{base}_{stat}{unit}");
            let got = sample(&text, &name, &[&exp]);
            let want = s[key].as_f64().unwrap() * to_base;
            assert!(
                close(got, want),
                "{name}: {got} against {want} ({metric} {key})"
            );
        }
        let n = sample(&text, "socklab_cell_repetitions", &[&exp]);
        assert_eq!(n, v["cells"][0]["n"].as_f64().unwrap());
    }
    // The per-stream throughput: one family, a series per stream.
    for stream in ["0", "1"] {
        let label = format!("stream=\"{stream}\"");
        let got = sample(
            &text,
            "socklab_per_stream_throughput_bytes_per_second",
            &["experiment=\"1\"", &label],
        );
        assert!(got > 0.0, "stream {stream}: {got}");
    }
    // One experiment, the newest by default.
    let (code, newest, err) = run(&["results", "export", "--prometheus", "--db", db]);
    assert_eq!(code, 0, "{err}");
    assert!(newest.contains("experiment=\"2\"") && !newest.contains("experiment=\"1\""));
}

#[test]
fn prometheus_conflicts_with_the_other_formats_and_an_unknown_format_is_named() {
    let (code, _, err) = run(&["results", "export", "--prometheus", "--csv"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["results", "export", "3", "--all"]);
    assert_eq!(code, 2, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (code, out, err) = run(&[
        "bulk",
        "--duration",
        "0.1s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = run(&["results", "export", "--format", "yaml", "--db", db]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'yaml': choose csv, json or prometheus"),
        "{err}"
    );
}
