//! `socklab hosts check|install` against real sshd hosts in network namespaces (see
//! `hosts_support`). Root only; they skip with a message elsewhere.

mod hosts_support;

use std::time::{Duration, Instant};

use hosts_support::Lab;

fn one_line_error(err: &str) -> String {
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("socklab: error:"))
        .collect();
    assert!(!lines.is_empty(), "no error line in: {err}");
    lines[0].to_string()
}

#[test]
fn check_reports_version_facts_path_and_clock_offset() {
    let Some(lab) = Lab::new("check_reports_version_facts_path_and_clock_offset", 1) else {
        return;
    };
    let (code, out, err) = lab.run(&["hosts", "check", "h1", "local", "--json"]);
    assert_eq!(code, 0, "{err}\n{}", lab.sshd_log("h1"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let h1 = &v[0];
    assert_eq!(h1["name"], "h1");
    assert_eq!(h1["facts"]["socklab_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(h1["facts"]["ssh_addr"], "10.80.0.2");
    assert_eq!(h1["addr"], "10.80.0.2");
    // The veth path: a TCP connect straight to the host, not through SSH.
    assert_eq!(h1["mtu"], 1500, "{h1}");
    assert!(h1["rtt_us"].as_f64().unwrap() > 0.0, "{h1}");
    // One kernel clock on both sides, so t1 <= t2 <= t3 <= t4 in every exchange and the
    // offset θ = ((t2 - t1) - (t4 - t3)) / 2 is within its own bound δ / 2 exactly, however
    // slow the round trip (no figure: the bound is the exchange's own).
    let off = h1["clock"]["offset_ns"].as_i64().unwrap();
    let errb = h1["clock"]["error_ns"].as_u64().unwrap();
    assert!(off.unsigned_abs() <= errb, "{h1}");
    assert!(h1["facts"]["cc_available"]
        .as_str()
        .unwrap()
        .contains("cubic"));
    // The local host takes the same path, without an address to measure.
    assert_eq!(v[1]["name"], "local");
    assert!(v[1]["addr"].is_null());
    // The table form names the host and the offset.
    let (code, out, err) = lab.run(&["hosts", "check", "h1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("h1") && out.contains(" ms ± "), "{out}");
    // No role is left on the host.
    assert!(lab.socklab_in(0).is_empty(), "{:?}", lab.socklab_in(0));
}

#[test]
fn a_version_mismatch_names_both_versions_and_the_fix() {
    let Some(lab) = Lab::new("a_version_mismatch_names_both_versions_and_the_fix", 1) else {
        return;
    };
    let fake = lab.dir.path().join("old-socklab");
    std::fs::write(&fake, "#!/bin/sh\necho socklab 0.0.1\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = lab
        .in_ctl(&lab.bin)
        .args(["hosts", "check", "h1", "--ssh-config"])
        .arg(&lab.config)
        .arg("--remote-socklab")
        .arg(&fake)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let line = one_line_error(&err);
    for needle in [
        "host h1",
        "socklab 0.0.1",
        env!("CARGO_PKG_VERSION"),
        "socklab hosts install h1",
    ] {
        assert!(line.contains(needle), "'{needle}' not in: {line}");
    }
    // A binary that is not there at all: the same fix.
    let o = lab
        .in_ctl(&lab.bin)
        .args(["hosts", "check", "h1", "--ssh-config"])
        .arg(&lab.config)
        .args(["--remote-socklab", "/nonexistent/socklab"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let line = one_line_error(&err);
    assert!(line.contains("cannot run socklab there"), "{line}");
    assert!(line.contains("socklab hosts install h1"), "{line}");
}

#[test]
fn unreachable_hosts_and_refused_keys_are_one_line_errors() {
    let Some(lab) = Lab::new("unreachable_hosts_and_refused_keys_are_one_line_errors", 1) else {
        return;
    };
    let t0 = Instant::now();
    let (code, _, err) = lab.run(&["hosts", "check", "nowhere"]);
    assert_eq!(code, 1, "{err}");
    let line = one_line_error(&err);
    assert!(
        line.contains("host nowhere: cannot connect over SSH"),
        "{line}"
    );
    assert!(line.contains("10.80.0.99"), "{line}");
    // Bounded by socklab's SSH connect timeout, not by TCP's own two minutes of SYN retries
    // (127 s on Linux); the margin below that is for a loaded machine.
    assert!(
        t0.elapsed() < Duration::from_secs(90),
        "bounded: {:?}",
        t0.elapsed()
    );
    let (code, _, err) = lab.run(&["hosts", "check", "wrongkey"]);
    assert_eq!(code, 1, "{err}");
    let line = one_line_error(&err);
    assert!(line.contains("Permission denied"), "{line}");
    // A good host beside a bad one is still checked.
    let (code, out, err) = lab.run(&["hosts", "check", "nowhere", "h1"]);
    assert_eq!(code, 1);
    assert!(out.contains("h1"), "{out}");
    assert!(
        err.contains("1 of 2 host(s) failed the check: nowhere"),
        "{err}"
    );
}

#[test]
fn install_copies_this_binary_and_the_host_then_checks() {
    let Some(lab) = Lab::new("install_copies_this_binary_and_the_host_then_checks", 1) else {
        return;
    };
    // The hosts share this file system: install into a directory of the test, never into the
    // real ~/.local/bin.
    let into = lab.dir.path().join("remote home/bin");
    let (code, out, err) = lab.run(&["hosts", "install", "h1", "--dir", into.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("socklab {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    let installed = into.join("socklab");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(&lab.bin).unwrap()
    );
    let o = lab
        .in_ctl(&lab.bin)
        .args(["hosts", "check", "h1", "--ssh-config"])
        .arg(&lab.config)
        .arg("--remote-socklab")
        .arg(&installed)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A login shell that prints before the role (a chatty ~/.bashrc, here a wrapper script) does
/// not break the line protocol: the protocol's lines are looked for.
#[test]
fn a_chatty_login_shell_does_not_confuse_the_roles() {
    let Some(lab) = Lab::new("a_chatty_login_shell_does_not_confuse_the_roles", 1) else {
        return;
    };
    let chatty = lab.dir.path().join("chatty-socklab");
    std::fs::write(
        &chatty,
        format!(
            "#!/bin/sh\necho 'Welcome to lab1: socklab 0.0.0 is not this'\nexec {} \"$@\"\n",
            lab.bin.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&chatty, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let db = lab.dir.path().join("r.db");
    for args in [
        vec!["hosts", "check", "h1"],
        vec![
            "bulk",
            "--server-host",
            "h1",
            "--duration",
            "200ms",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--db",
            db.to_str().unwrap(),
        ],
    ] {
        let o = lab
            .in_ctl(&lab.bin)
            .args(&args)
            .arg("--ssh-config")
            .arg(&lab.config)
            .arg("--remote-socklab")
            .arg(&chatty)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
