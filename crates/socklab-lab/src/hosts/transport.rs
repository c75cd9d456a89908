//! The [`Transport`] trait: how the controller starts a socklab role on a host. Two
//! implementations: [`Local`] (this machine: a re-exec of the socklab binary, today's server
//! child) and [`super::ssh::Ssh`] (another machine over the system's OpenSSH client, one
//! multiplexed master connection per host). A third (a `kubectl exec`-style transport) would be
//! one more implementation: see `docs/multi-host.md`.

use std::fmt;
use std::path::PathBuf;
use std::process::Command;

use crate::roles::argv::RoleArgs;
use crate::LabError;

/// How a role started by a transport is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM to the process, then `wait4` for its rusage (a child on this host).
    Signal,
    /// Close its stdin: the role (run with `--until-eof`) takes the SIGTERM path itself and
    /// reports its rusage in a `USAGE` line (a role on another host, where `wait4` is not
    /// available). Its SSH session ending closes the same stdin, so a role never outlives it.
    CloseStdin,
}

/// A host socklab can start roles on.
pub trait Transport: fmt::Debug + Send + Sync {
    /// The host's name as the user wrote it (`local` for this machine).
    fn name(&self) -> &str;

    /// A command that runs `socklab` as `role` on the host (its one typed command line). For
    /// [`Stop::CloseStdin`] transports the caller must pipe its stdin and keep it open while
    /// the role should run.
    fn socklab(&self, role: &RoleArgs) -> Result<Command, LabError>;

    /// A command that runs a shell command line on the host (`hosts install`, `uname -m`).
    fn shell(&self, line: &str) -> Result<Command, LabError>;

    /// How its roles are stopped.
    fn stop(&self) -> Stop;

    /// Whether it is this machine.
    fn is_local(&self) -> bool {
        self.stop() == Stop::Signal
    }
}

/// This machine: roles are children of the controller (the lab's server children of today).
#[derive(Debug, Clone)]
pub struct Local {
    exe: PathBuf,
}

impl Local {
    /// `exe` is the socklab binary to re-exec (normally `std::env::current_exe()`).
    pub fn new(exe: PathBuf) -> Local {
        Local { exe }
    }

    /// The binary.
    pub fn exe(&self) -> &std::path::Path {
        &self.exe
    }
}

impl Transport for Local {
    fn name(&self) -> &str {
        "local"
    }

    fn socklab(&self, role: &RoleArgs) -> Result<Command, LabError> {
        let mut c = Command::new(&self.exe);
        c.args(role.to_argv());
        Ok(c)
    }

    fn shell(&self, line: &str) -> Result<Command, LabError> {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", line]);
        Ok(c)
    }

    fn stop(&self) -> Stop {
        Stop::Signal
    }
}

/// `s` quoted for a POSIX shell (single quotes; a quote inside becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::argv::Role;

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        assert_eq!(shell_quote("sink"), "sink");
        assert_eq!(shell_quote("--bind=10.0.0.1"), "--bind=10.0.0.1");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME;rm"), "'$HOME;rm'");
        assert_eq!(shell_quote(r#"{"a":1}"#), r#"'{"a":1}'"#);
    }

    #[test]
    fn the_local_host_runs_the_binary_itself() {
        let l = Local::new(PathBuf::from("/bin/socklab"));
        let c = l.socklab(&RoleArgs::from(Role::Sink)).unwrap();
        assert_eq!(c.get_program(), "/bin/socklab");
        assert_eq!(c.get_args().collect::<Vec<_>>(), ["sink"]);
        assert!(l.is_local());
        assert_eq!(l.name(), "local");
    }
}
