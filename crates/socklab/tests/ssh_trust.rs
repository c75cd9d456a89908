//! Issue 26 item 5: experiment files are data, not code. A file's `[hosts] ssh_config` names
//! an ssh_config whose `ProxyCommand` runs as the user; it is used only with
//! `--trust-ssh-config`. The ProxyCommand here touches a marker file and exits, so whether ssh
//! read the file is seen without any host: the marker exists exactly when it did. The last
//! test runs a trusted file's config against a real sshd host (root only, see `hosts_support`).

mod hosts_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct Case {
    dir: tempfile::TempDir,
    exp: PathBuf,
    config: PathBuf,
    marker: PathBuf,
    db: PathBuf,
}

fn case() -> Case {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let config = dir.path().join("evil_config");
    std::fs::write(
        &config,
        format!("Host *\n  ProxyCommand touch {}\n", marker.display()),
    )
    .unwrap();
    let exp = dir.path().join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"trust\"\nworkload = \"bulk\"\nreps = 1\nwarmup = 0\n[fixed]\niterations = 10\n[hosts]\nserver = \"sl-nohost\"\nssh_config = \"{}\"\n",
            config.display()
        ),
    )
    .unwrap();
    let db = dir.path().join("r.db");
    Case {
        dir,
        exp,
        config,
        marker,
        db,
    }
}

/// `socklab ARGS…` with the case's database: (exit code, stdout, stderr).
fn socklab(c: &Case, args: &[&str]) -> (i32, String, String) {
    let o = assert_cmd::Command::cargo_bin("socklab")
        .unwrap()
        .args(args)
        .arg("--db")
        .arg(&c.db)
        .current_dir(c.dir.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_files_ssh_config_is_refused_without_the_flag() {
    let c = case();
    let (code, out, err) = socklab(&c, &["run", s(&c.exp)]);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(out, "");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "socklab: error: {}: [hosts] ssh_config = '{}' makes ssh read options this file chose (a ProxyCommand or LocalCommand there runs as you): use it only with --trust-ssh-config, or give your own --ssh-config (--dry-run shows the ssh commands)",
            c.exp.display(),
            c.config.display()
        )
    );
    assert!(!c.marker.exists(), "the ProxyCommand ran");
    assert!(!c.db.exists(), "something was stored");
}

#[test]
fn the_dry_run_shows_the_ssh_commands_and_the_config_they_read() {
    let c = case();
    let (code, out, err) = socklab(&c, &["--dry-run", "run", s(&c.exp)]);
    assert_eq!(code, 0, "{out}{err}");
    let cfg = c.config.display();
    assert!(
        out.contains(&format!(
            "  ssh reads {cfg} only (ssh -F: not ~/.ssh/config nor /etc/ssh/ssh_config)\n"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "  ssh to sl-nohost, once: ssh -F {cfg} -o BatchMode=yes -o ConnectTimeout=10"
        )),
        "{out}"
    );
    assert!(out.contains(" -N sl-nohost\n"), "{out}");
    assert!(
        out.contains(" -T sl-nohost -- 'PATH=\"$HOME/.local/bin:$PATH\" exec socklab ROLE …'\n"),
        "{out}"
    );
    assert!(
        out.contains("  the run refuses: ") && out.contains("use it only with --trust-ssh-config"),
        "{out}"
    );
    assert!(!c.marker.exists(), "the ProxyCommand ran");
    assert!(!c.db.exists(), "something was stored");
    // Trusted, the dry run says the same commands and no refusal.
    let (code, out, _) = socklab(&c, &["--dry-run", "run", s(&c.exp), "--trust-ssh-config"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("ssh -F {cfg} ")), "{out}");
    assert!(!out.contains("refuses"), "{out}");
    assert!(!c.marker.exists(), "a dry run ran ssh");
}

#[test]
fn with_the_flag_the_files_ssh_config_is_used() {
    if !Command::new("ssh")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        socklab_sys::skip::skip(
            "with_the_flag_the_files_ssh_config_is_used",
            "no ssh",
            "needs the OpenSSH client: apt-get install openssh-client",
        );
        return;
    }
    let c = case();
    let (code, out, err) = socklab(&c, &["run", s(&c.exp), "--trust-ssh-config"]);
    // ssh read the file: its ProxyCommand ran (and, a proxy that exits, reached no host).
    assert!(
        c.marker.exists(),
        "ssh did not read the file's config: {out}{err}"
    );
    assert_eq!(code, 1, "{out}{err}");
    // The host's failure names the file ssh read (ssh's own words vary by version).
    assert!(
        err.contains("host sl-nohost: cannot connect over SSH: "),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "(check 'ssh -F {} sl-nohost true')",
            c.config.display()
        )),
        "{err}"
    );
}

/// A trusted file's ssh_config reaches a real host: the file names the test's config, and the
/// run with `--trust-ssh-config` measures there; without it, it refuses and stores nothing.
#[test]
fn a_trusted_files_ssh_config_reaches_a_real_host() {
    let Some(lab) = hosts_support::Lab::new("a_trusted_files_ssh_config_reaches_a_real_host", 1)
    else {
        return;
    };
    let file = lab.dir.path().join("remote.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"remote\"\nworkload = \"pingpong\"\nreps = 1\nwarmup = 0\n[fixed]\ncount = 20\n[hosts]\nserver = \"h1\"\nssh_config = \"{}\"\n",
            lab.config.display()
        ),
    )
    .unwrap();
    let db = lab.dir.path().join("r.db");
    let run = |trust: bool| {
        let mut c = lab.in_ctl(&lab.bin);
        c.arg("run").arg(&file).arg("--db").arg(&db);
        c.arg("--remote-socklab").arg(&lab.bin);
        if trust {
            c.arg("--trust-ssh-config");
        }
        let o = c.stdin(std::process::Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (o.status.code().unwrap_or(-1), err)
    };
    let (code, err) = run(false);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("use it only with --trust-ssh-config"), "{err}");
    assert!(!db.exists(), "something was stored");
    let (code, err) = run(true);
    assert_eq!(code, 0, "{err}");
    let o = lab
        .in_ctl(&lab.bin)
        .args(["results", "export", "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["extra"]["hosts"]["server"], "h1", "{}", rows[0]);
}
