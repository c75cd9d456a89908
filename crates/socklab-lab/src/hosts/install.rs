//! `socklab hosts install`: this very binary copied to a host over its transport (no second
//! download, no build there), after checking the host has the same architecture. The copy goes
//! to a temporary name in the directory and is renamed into place, so a role running the old
//! binary keeps running and a half-copied file is never executed.

use std::fs::File;
use std::path::Path;
use std::process::Stdio;

use super::transport::{shell_quote, Transport};
use crate::roles::argv::shown;
use crate::LabError;

/// Where `hosts install` puts the binary by default (on the remote `PATH` socklab uses).
pub const DEFAULT_DIR: &str = "~/.local/bin";

/// The remote shell form of a directory: a leading `~/` becomes `"$HOME"/`.
pub fn dir_word(dir: &str) -> String {
    match dir.strip_prefix("~/") {
        Some(rest) => format!("\"$HOME\"/{}", shell_quote(rest)),
        None if dir == "~" => "\"$HOME\"".into(),
        None => shell_quote(dir),
    }
}

/// The remote command line that stores stdin as `DIR/socklab`.
pub fn install_line(dir: &str) -> String {
    let d = dir_word(dir);
    let version = shown::version(&format!("{d}/socklab"));
    format!(
        "set -e; mkdir -p {d}; t={d}/.socklab.$$; cat > \"$t\"; chmod 755 \"$t\"; mv -f \"$t\" {d}/socklab; {version}"
    )
}

fn host_err(t: &dyn Transport, reason: String) -> LabError {
    LabError::Host {
        host: t.name().to_string(),
        reason,
    }
}

/// Copies `exe` to `DIR/socklab` on the host of `t`; returns what the installed binary says
/// of its version.
pub fn install(t: &dyn Transport, exe: &Path, dir: &str) -> Result<String, LabError> {
    let arch = t
        .shell("uname -m")?
        .stdin(Stdio::null())
        .output()
        .map_err(|e| host_err(t, format!("cannot run ssh: {e}")))?;
    if !arch.status.success() {
        return Err(host_err(
            t,
            format!(
                "cannot ask its architecture: {}",
                super::ssh::last_line(&String::from_utf8_lossy(&arch.stderr))
            ),
        ));
    }
    let theirs = String::from_utf8_lossy(&arch.stdout).trim().to_string();
    let ours = std::env::consts::ARCH;
    if theirs != ours {
        return Err(host_err(
            t,
            format!("is {theirs}, this binary {ours}: build socklab for {theirs} and copy it there, or give `remote_socklab` PATH"),
        ));
    }
    let file = File::open(exe)
        .map_err(|e| LabError::Child(format!("cannot read '{}': {e}", exe.display())))?;
    let out = t
        .shell(&install_line(dir))?
        .stdin(Stdio::from(file))
        .output()
        .map_err(|e| host_err(t, format!("cannot run ssh: {e}")))?;
    if !out.status.success() {
        return Err(host_err(
            t,
            format!(
                "cannot install into {dir}: {}",
                super::ssh::last_line(&String::from_utf8_lossy(&out.stderr))
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::Local;

    #[test]
    fn the_directory_is_quoted_with_home_expanded_remotely() {
        assert_eq!(dir_word("~/.local/bin"), "\"$HOME\"/.local/bin");
        assert_eq!(dir_word("/opt/sl bin"), "'/opt/sl bin'");
        assert_eq!(dir_word("~"), "\"$HOME\"");
    }

    /// The local transport installs through the same shell line: the copy is executable, runs,
    /// and leaves no temporary file.
    #[test]
    fn install_copies_an_executable_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("fake");
        std::fs::write(&src, "#!/bin/sh\necho socklab 9.9.9\n").unwrap();
        let into = dir.path().join("bin dir");
        let l = Local::new(src.clone());
        let said = install(&l, &src, into.to_str().unwrap()).unwrap();
        assert_eq!(said, "socklab 9.9.9");
        let names: Vec<_> = std::fs::read_dir(&into)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["socklab"]);
        let e = install(&l, &dir.path().join("missing"), "/tmp").unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
