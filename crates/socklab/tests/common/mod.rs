//! Helpers shared by the CLI test files (each file is its own crate and uses some of them).
#![allow(dead_code)]

pub mod http;
pub mod iperf3;
pub mod procfs;
pub mod strace;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};

use assert_cmd::cargo::CommandCargoExt;

pub fn socklab() -> Command {
    Command::cargo_bin("socklab").unwrap()
}

/// Runs socklab with `args` and returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let o = socklab().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// True as root; otherwise the skip is printed and counted (`socklab_sys::skip`) and the test
/// returns and passes.
pub fn root_or_skip(test: &str) -> bool {
    socklab_sys::skip::root_or_skip(test)
}

/// Starts a socklab server with `args` (which include `--announce`) and returns it with the
/// address of its `LISTENING <addr>` line.
pub fn spawn_announced(args: &[&str]) -> (Child, String) {
    let mut cmd = socklab();
    cmd.args(args).stderr(Stdio::piped());
    announced(cmd)
}

/// Spawns `cmd` (a socklab server given `--announce`) with its stdout piped and returns it with
/// the address of its `LISTENING <addr>` line.
pub fn announced(mut cmd: Command) -> (Child, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("LISTENING ")
        .unwrap_or_else(|| panic!("announce line: {line:?}"))
        .to_string();
    (child, addr)
}

/// Polls `cond` every 10 ms until it holds (`true`) or `limit` has passed (`false`): a guard
/// against a hang while waiting for an event, not a measurement.
pub fn wait_until(limit: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        if cond() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Asserts exit code 2 and a one-line error containing every needle.
pub fn assert_usage_error(args: &[&str], needles: &[&str]) {
    let (c, _, err) = run(args);
    assert_eq!(c, 2, "exit code of {args:?}; stderr: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' not in: {err}");
    }
}

/// Stops a server child with SIGINT, checks it exited cleanly, and returns its stderr.
pub fn interrupt_and_log(mut child: Child) -> String {
    socklab_sys::process::kill(child.id(), socklab_sys::process::Signal::Int).unwrap();
    assert!(child.wait().unwrap().success());
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    log
}

/// Waits for `child` to exit (a hang guard of `limit`); kills it and fails the test past that.
pub fn wait_bounded(child: &mut Child, limit: std::time::Duration, what: &str) -> ExitStatus {
    let mut status = None;
    if !wait_until(limit, || {
        status = child.try_wait().unwrap();
        status.is_some()
    }) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: still running after {limit:?}");
    }
    status.unwrap()
}
