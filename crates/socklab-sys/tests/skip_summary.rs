//! `scripts/test-summary`, the closing lines of `scripts/test`: skipped tests counted per
//! reason with their names, cargo's totals on the last line, and a skip under CI=true as root
//! a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-summary")
}

/// Runs the summary over `skips` and `cargo_output` with CI set to `ci`; (exit code, stdout).
fn summary(skips: &str, cargo_output: &str, ci: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let (s, t) = (dir.path().join("skips"), dir.path().join("test"));
    std::fs::write(&s, skips).unwrap();
    std::fs::write(&t, cargo_output).unwrap();
    let o = Command::new(script())
        .arg(&s)
        .arg(&t)
        .env("CI", ci)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

const CARGO: &str = "running 4 tests\n\
test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.92s\n\
test result: FAILED. 10 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.00s\n";

#[test]
fn skips_are_counted_per_reason_and_the_last_line_has_the_totals() {
    let skips = "not root\tlink::a\nno tshark\tcapture::b\nnot root\tlink::c\n";
    let (code, out) = summary(skips, CARGO, "");
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "scripts/test: 2 skipped: not root (link::a, link::c)",
            "scripts/test: 1 skipped: no tshark (capture::b)",
            "scripts/test: 1 ignored",
            "13 passed, 2 failed, 3 skipped",
        ]
    );
}

#[test]
fn without_skips_it_says_none_and_passes_even_in_ci() {
    let (code, out) = summary("", CARGO, "true");
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "scripts/test: 0 skipped: not root\nscripts/test: 1 ignored\n13 passed, 2 failed, 0 skipped\n"
    );
}

#[test]
fn a_skip_under_ci_as_root_fails_the_run() {
    let (code, out) = summary("no sshd\thosts::a\n", CARGO, "true");
    if socklab_sys::netns::is_root() {
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("skipped under CI=true as root"), "{out}");
    } else {
        assert_eq!(code, 0, "not root: counted, not fatal: {out}");
    }
    assert!(
        out.ends_with("scripts/test: 1 ignored\n13 passed, 2 failed, 1 skipped\n"),
        "{out}"
    );
    // Outside CI the same skip is only counted.
    assert_eq!(summary("no sshd\thosts::a\n", CARGO, "").0, 0);
}
