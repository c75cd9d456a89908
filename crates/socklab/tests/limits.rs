//! Issue 16 items 11, 12 and 14: counts beyond their stated limits, a descriptor limit too low
//! for the run, and messages that say the true reason. Real processes, each bounded in time.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

/// Runs `cmd` (stdout and stderr captured) in `dir`; kills it if it has not exited after
/// `limit`. Returns (exit code, -1 if killed or signalled; stdout; stderr; whether it was
/// killed at the limit).
fn bounded(mut cmd: Command, dir: &Path, limit: Duration) -> (i32, String, String, bool) {
    let t0 = Instant::now();
    let mut child = cmd
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (o.join().unwrap(), e.join().unwrap());
    let code = status.and_then(|s| s.code()).unwrap_or(-1);
    (code, out, err, status.is_none())
}

fn socklab_in(dir: &Path, args: &[&str], limit: Duration) -> (i32, String, String, bool) {
    let mut cmd = Command::new(cargo_bin("socklab"));
    cmd.args(args);
    bounded(cmd, dir, limit)
}

/// Exit 2 within `limit`, one line on stderr containing every needle.
fn refused_quickly(dir: &Path, args: &[&str], needles: &[&str]) {
    // A bound on a hang only: the refusal comes before any of the work it refuses, so what
    // is asserted is the exit code and the line, never how long it took.
    let limit = Duration::from_secs(60);
    let (code, _, err, killed) = socklab_in(dir, args, limit);
    assert!(!killed, "{args:?} still running after {limit:?}");
    assert_eq!(code, 2, "exit code of {args:?}; stderr: {err}");
    assert_eq!(
        err.trim().lines().count(),
        1,
        "one line for {args:?}: {err}"
    );
    assert!(err.starts_with("socklab: error: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' not in: {err}");
    }
}

// ----------------------------------------------------------------------------------- item 11

#[test]
fn huge_repetition_counts_are_refused_with_the_limit_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Not --dry-run: the old code built the schedule and aborted ("memory allocation failed",
    // exit 134) before running anything.
    refused_quickly(
        d,
        &["bulk", "--reps", "99999999999"],
        &["--reps 99999999999", "at most 100000"],
    );
    refused_quickly(
        d,
        &["bulk", "--warmup", "4294967295"],
        &["--warmup 4294967295", "at most 10000"],
    );
    refused_quickly(
        d,
        &["pingpong", "--reps", "99999999999"],
        &["at most 100000"],
    );
    refused_quickly(
        d,
        &["transfer", "--warmup", "99999999999"],
        &["at most 10000"],
    );
    refused_quickly(
        d,
        &["load", "--to", "127.0.0.1:9", "--reps", "99999999999"],
        &["at most 100000"],
    );
    refused_quickly(
        d,
        &[
            "load",
            "--to",
            "127.0.0.1:9",
            "--connections",
            "99999999999",
        ],
        &["--connections 99999999999", "100000"],
    );
    let toml = d.join("huge.toml");
    std::fs::write(
        &toml,
        "name = \"x\"\nworkload = \"bulk\"\nreps = 99999999999\n",
    )
    .unwrap();
    refused_quickly(
        d,
        &["run", toml.to_str().unwrap()],
        &["huge.toml:3", "'reps' = 99999999999", "at most 100000"],
    );
    std::fs::write(
        &toml,
        "name = \"x\"\nworkload = \"bulk\"\nwarmup = 4294967295\n",
    )
    .unwrap();
    refused_quickly(
        d,
        &["run", toml.to_str().unwrap()],
        &["'warmup' = 4294967295", "at most 10000"],
    );
    // Overrides of a file's counts are checked the same way.
    std::fs::write(&toml, "name = \"x\"\nworkload = \"memcpy\"\n").unwrap();
    refused_quickly(
        d,
        &["run", toml.to_str().unwrap(), "--warmup", "4294967295"],
        &["--warmup 4294967295", "at most 10000"],
    );
    assert!(
        !d.join("socklab.db").exists(),
        "refused before the store is opened"
    );
}

#[test]
fn a_matrix_is_refused_by_the_product_of_its_axes_before_it_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 3163 x 3163 = 10 004 569 cells: the old code expanded every one (minutes, gigabytes)
    // before counting.
    let list = |unit: &str| {
        (1..=3163)
            .map(|i| format!("\"{i}{unit}\""))
            .collect::<Vec<_>>()
            .join(",")
    };
    let toml = d.join("matrix.toml");
    std::fs::write(
        &toml,
        format!(
            "name = \"m\"\nworkload = \"memcpy\"\n[matrix]\nsize = [{}]\nbytes = [{}]\n",
            list(""),
            list("K")
        ),
    )
    .unwrap();
    refused_quickly(
        d,
        &["--dry-run", "run", toml.to_str().unwrap()],
        &["10004569 cells (3163 x 3163)", "at most 10000"],
    );
    // Cells x (repetitions + warm-up): 100 cells x 20001 runs each.
    std::fs::write(
        &toml,
        "name = \"m\"\nworkload = \"memcpy\"\nreps = 20000\n[matrix]\nsize = [1,2,3,4,5,6,7,8,9,10]\nbytes = [1,2,3,4,5,6,7,8,9,10]\n",
    )
    .unwrap();
    refused_quickly(
        d,
        &["run", toml.to_str().unwrap()],
        &[
            "100 cells x (20000 repetitions + 1 warm-up) = 2000100 runs",
            "at most 1000000",
        ],
    );
}

#[test]
fn every_count_flag_has_a_limit_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let big = "99999999999";
    for (args, needle) in [
        (vec!["bulk", "--iterations", big], "at most 1000000000"),
        (vec!["bulk", "--bytes", "2T"], "at most 1T"),
        (vec!["bulk", "--sndbuf", big], "use 1 to 1073741824"),
        (vec!["pingpong", "--count", big], "at most 1000000000"),
        (
            vec!["pingpong", "--udp", "--retries", "5000"],
            "at most 1000",
        ),
        (
            vec!["load", "--to", "127.0.0.1:9", "--requests", big],
            "at most 1000000000",
        ),
        (
            vec!["load", "--to", "127.0.0.1:9", "--loops", big],
            "at most 1000000000",
        ),
        (vec!["sink", "--read-size", big], "use 1 to 64M"),
        (vec!["serve", "--workers", big], "use 1 to 1024"),
        (vec!["serve", "--body", "1G"], "at most 67108864"),
    ] {
        // --dry-run: the old code accepted each of these and printed the plan (exit 0).
        let mut a = vec!["--dry-run"];
        a.extend(&args);
        refused_quickly(d, &a, &[big_or(&args), needle]);
    }
}

/// The value a refusal must name: the last argument.
fn big_or<'a>(args: &[&'a str]) -> &'a str {
    args.last().unwrap()
}

// ----------------------------------------------------------------------------------- item 12

/// A loopback listener that accepts connections and holds them, silent, until the test ends.
fn holding_listener() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        // Bounded: at most 2000 connections are held.
        while held.len() < 2000 {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => break,
            }
        }
    });
    addr
}

#[test]
fn load_says_when_the_descriptor_limit_cannot_cover_its_connections() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        socklab_sys::skip::skip(
            "load_says_when_the_descriptor_limit_cannot_cover_its_connections",
            "no prlimit",
            "no prlimit (util-linux)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let addr = holding_listener();
    // Soft and hard limit 64: socklab cannot raise it; 500 connections cannot be open at once.
    let mut cmd = Command::new("prlimit");
    cmd.args(["--nofile=64:64", "--"])
        .arg(cargo_bin("socklab"))
        .args([
            "load",
            "--to",
            &addr,
            "--protocol",
            "echo",
            "--connections",
            "500",
            "--duration",
            "1s",
            "--db",
            "l.db",
        ]);
    let (code, out, err, _) = bounded(cmd, dir.path(), Duration::from_secs(30));
    // The old code ran, counted thousands of connect failures and exited 0, saying nothing of
    // descriptors.
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    for n in ["--connections 500", "open descriptors", "64", "ulimit -n"] {
        assert!(err.contains(n), "'{n}' not in: {err}");
    }
}

#[test]
fn the_soft_descriptor_limit_is_raised_to_the_hard_one() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        socklab_sys::skip::skip(
            "the_soft_descriptor_limit_is_raised_to_the_hard_one",
            "no prlimit",
            "no prlimit (util-linux)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let addr = holding_listener();
    // Soft 64, hard 4096: 500 connections fit once the soft limit is raised. The listener
    // never answers, so every request times out: what matters is that no connect fails for
    // want of a descriptor.
    let mut cmd = Command::new("prlimit");
    cmd.args(["--nofile=64:4096", "--"])
        .arg(cargo_bin("socklab"))
        .args([
            "load",
            "--to",
            &addr,
            "--protocol",
            "echo",
            "--connections",
            "500",
            "--duration",
            "1s",
            "--timeout",
            "5s",
            "--json",
            "--db",
            "l.db",
        ]);
    let (_, out, err, _) = bounded(cmd, dir.path(), Duration::from_secs(30));
    let v: serde_json::Value = match serde_json::from_str(&out) {
        Ok(v) => v,
        Err(e) => panic!("JSON report expected ({e}); stdout: {out}\nstderr: {err}"),
    };
    assert_eq!(
        v["failed"]["connect"], 0,
        "connects failed (EMFILE under the soft limit 64?): {out}\nstderr: {err}"
    );
    // More connections open at once than the soft limit 64 allows (how many of the 500 a
    // loaded machine opens within the run does not matter).
    assert!(
        v["connections_opened"].as_u64().unwrap_or(0) > 64,
        "more than 64 connections opened: {out}"
    );
}

// ----------------------------------------------------------------------------------- item 14

#[test]
fn a_link_delay_no_connect_can_outlast_is_refused_for_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The old code built the link, waited 5 s for the connect and blamed a server "not
    // listening" ("... omit --to"), though no --to was given.
    for args in [
        &[
            "bulk",
            "--link",
            "delay 100000s",
            "--reps",
            "1",
            "--warmup",
            "0",
        ][..],
        &[
            "pingpong",
            "--link",
            "delay 20s",
            "--reps",
            "1",
            "--warmup",
            "0",
        ][..],
    ] {
        refused_quickly(
            d,
            args,
            &["a TCP handshake over this link takes at least", "30s"],
        );
        let (_, _, err, _) = socklab_in(d, args, Duration::from_secs(60));
        assert!(!err.contains("omit --to"), "{err}");
    }
    refused_quickly(
        d,
        &["bulk", "--link", "delay 1ms", "--link-back", "delay 40s"],
        &["link_back = 'delay 40s'"],
    );
}

#[test]
fn a_connect_lost_on_the_link_to_socklabs_own_sink_does_not_say_omit_to() {
    if !common::root_or_skip("a_connect_lost_on_the_link_to_socklabs_own_sink_does_not_say_omit_to")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err, _) = socklab_in(
        dir.path(),
        &[
            "bulk",
            "--link",
            "loss 100%",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--duration",
            "1s",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, 1, "{err}");
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("cannot connect over the emulated link to the sink socklab started"),
        "{err}"
    );
    assert!(!last.contains("omit --to"), "{err}");
}

#[test]
fn a_rate_too_large_says_so_and_names_the_largest() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &[
            "--dry-run",
            "netem",
            "check",
            "--link",
            "rate 99999999999999999999tbit",
        ][..],
        &[
            "--dry-run",
            "bulk",
            "--link",
            "rate 99999999999999999999tbit",
        ][..],
    ] {
        refused_quickly(
            dir.path(),
            args,
            &["99999999999999999999tbit", "too large", "1000tbit"],
        );
        let (_, _, err, _) = socklab_in(dir.path(), args, Duration::from_secs(60));
        assert!(!err.contains("positive"), "{err}");
    }
}
