//! Tests that cannot run here: every one is counted, and where every test must run it fails.
//!
//! A test whose prerequisite is missing (root, a tool) calls [`root_or_skip`] or [`skip`] and
//! returns. The skip is printed (`SKIP test: why`) and appended to the file named by
//! [`SKIP_LOG`] when that is set (`scripts/test` sets it and closes its summary with the count,
//! `N skipped: not root` and which tests). Under `CI=true` as root nothing may be missing
//! (`scripts/test` installs every tool the tests call), so there a skip panics: a test that
//! quietly stopped running is a failure.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable naming the file skips are appended to, one `reason<TAB>test` line
/// each.
pub const SKIP_LOG: &str = "SOCKLAB_SKIP_LOG";

/// The reason of a test skipped without root.
pub const NOT_ROOT: &str = "not root";

/// True as root; otherwise the test `test` is skipped ([`NOT_ROOT`]) and this returns false.
pub fn root_or_skip(test: &str) -> bool {
    if crate::netns::is_root() {
        return true;
    }
    skip(
        test,
        NOT_ROOT,
        "needs root (network namespaces and TUN devices)",
    );
    false
}

/// Skips the test (or part of a test) `test` for `reason` (short: `not root`, `no unshare`),
/// `detail` saying what is missing and how to get it. Panics under `CI=true` as root, and
/// when the skip cannot be recorded.
pub fn skip(test: &str, reason: &str, detail: &str) {
    let must_run = std::env::var("CI").is_ok_and(|v| v == "true") && crate::netns::is_root();
    let log = std::env::var_os(SKIP_LOG).map(PathBuf::from);
    if let Err(e) = record(log.as_deref(), must_run, test, reason, detail) {
        panic!("{e}");
    }
}

/// What [`skip`] does, its environment given: an error when the test must run (`must_run`)
/// or the line cannot be appended to `log`.
pub fn record(
    log: Option<&Path>,
    must_run: bool,
    test: &str,
    reason: &str,
    detail: &str,
) -> Result<(), String> {
    if must_run {
        return Err(format!(
            "{test} cannot run here ({reason}: {detail}), and under CI=true as root every test \
             must run: install what it needs (scripts/test does)"
        ));
    }
    eprintln!("SKIP {test}: {detail}");
    let Some(path) = log else {
        return Ok(());
    };
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!("{}\t{}\n", clean(reason), clean(test));
    // One write of one short line in append mode: lines of tests running at the same time in
    // several processes do not interleave.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| {
            format!(
                "cannot record the skip of {test} in {} ({SKIP_LOG}): {e}",
                path.display()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_appended_to_the_log_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        record(Some(&log), false, "a::one", NOT_ROOT, "needs root").unwrap();
        record(
            Some(&log),
            false,
            "b\ttwo",
            "no tshark",
            "apt-get install tshark",
        )
        .unwrap();
        record(None, false, "c", NOT_ROOT, "needs root").unwrap();
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "not root\ta::one\nno tshark\tb two\n"
        );
    }

    #[test]
    fn a_skip_where_every_test_must_run_is_an_error_and_not_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        let e = record(
            Some(&log),
            true,
            "a::one",
            "no sshd",
            "apt-get install openssh-server",
        )
        .unwrap_err();
        assert!(
            e.contains("a::one") && e.contains("no sshd") && e.contains("CI=true"),
            "{e}"
        );
        assert!(!log.exists());
        let e = record(Some(&dir.path().join("no/such/dir")), false, "t", "r", "d").unwrap_err();
        assert!(e.contains(SKIP_LOG), "{e}");
    }
}
