//! The SSH transport: the system's OpenSSH client (so `~/.ssh/config`, agents, `ProxyJump` and
//! known-hosts work as users expect), one master connection per host (`ControlMaster`) that
//! every role and command of this controller multiplexes over, so a repetition costs a channel
//! (a few milliseconds), not a handshake.
//!
//! The master is a child of the controller that dies with it (`PR_SET_PDEATHSIG`): when the
//! controller ends, even by SIGKILL, the master closes the connection, every channel on it
//! closes, and each remote role sees the end of its stdin and stops (`--until-eof`). Nothing
//! outlives the controller on a remote host.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use socklab_sys::process::{child_dies_with_parent, kill, Signal};

use super::transport::{shell_quote, Stop, Transport};
use crate::roles::argv::RoleArgs;
use crate::LabError;

/// How to reach hosts, shared by every command that takes hosts (`--ssh-config`,
/// `--remote-socklab`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshOptions {
    /// `ssh -F FILE` (else OpenSSH's own defaults: `~/.ssh/config`, `/etc/ssh/ssh_config`).
    pub config: Option<PathBuf>,
    /// The socklab binary on the remote hosts (else `socklab` on the remote `PATH`, with
    /// `~/.local/bin` first, where `socklab hosts install` puts it).
    pub remote_socklab: Option<String>,
    /// No master connection: every command and role makes its own SSH connection (to measure
    /// what the master saves).
    pub no_multiplex: bool,
}

impl SshOptions {
    /// Checks that the configuration file, if one is given, is a file.
    pub fn check(&self) -> Result<(), LabError> {
        match &self.config {
            Some(f) if !f.is_file() => Err(LabError::Plan(format!(
                "`ssh_config` '{}': no such file; name an ssh_config(5) file, or drop the option to use ~/.ssh/config",
                f.display()
            ))),
            _ => Ok(()),
        }
    }
}

/// Seconds an unreachable host gets before the connection fails.
pub const CONNECT_TIMEOUT_S: u32 = 10;

/// One host reached over SSH.
#[derive(Debug)]
pub struct Ssh {
    name: String,
    opts: SshOptions,
    /// The directory of the master's control socket (private to this controller).
    control: Option<tempfile::TempDir>,
    master: Mutex<Option<Child>>,
}

impl Ssh {
    /// Connects to `name` (an SSH destination: a `Host` of the SSH configuration, `host`,
    /// `user@host`): starts the master connection and waits until it is up. The error is one
    /// line with what ssh said.
    pub fn connect(name: &str, opts: &SshOptions) -> Result<Ssh, LabError> {
        check_name(name)?;
        opts.check()?;
        let control = if opts.no_multiplex {
            None
        } else {
            remove_stale_control_dirs();
            Some(
                tempfile::Builder::new()
                    .prefix(&format!("{CONTROL_PREFIX}{}-", std::process::id()))
                    .tempdir()
                    .map_err(|e| {
                        LabError::Child(format!(
                            "cannot create a directory for the SSH control socket: {e}"
                        ))
                    })?,
            )
        };
        let me = Ssh {
            name: name.to_string(),
            opts: opts.clone(),
            control,
            master: Mutex::new(None),
        };
        me.ensure()?;
        Ok(me)
    }

    fn control_path(&self) -> Option<PathBuf> {
        self.control.as_ref().map(|d| d.path().join("m"))
    }

    /// The options every ssh invocation of this host carries.
    fn base(&self) -> Command {
        let mut c = Command::new("ssh");
        if let Some(f) = &self.opts.config {
            c.arg("-F").arg(f);
        }
        c.args(option_args());
        c
    }

    /// Makes sure the master connection is up (starting it again after a lost host).
    pub fn ensure(&self) -> Result<(), LabError> {
        let Some(path) = self.control_path() else {
            return Ok(());
        };
        let mut m = self
            .master
            .lock()
            .map_err(|_| LabError::Child("ssh master lock poisoned".into()))?;
        if let Some(c) = m.as_mut() {
            if matches!(c.try_wait(), Ok(None)) && path.exists() {
                return Ok(());
            }
            let _ = c.kill();
            let _ = c.wait();
            *m = None;
            let _ = std::fs::remove_file(&path);
        }
        let mut c = self.base();
        c.args(master_args(&path.display().to_string()))
            .arg(&self.name)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        child_dies_with_parent(&mut c);
        let mut child = c.spawn().map_err(|e| {
            self.unreachable(&format!(
                "cannot run ssh: {e} (install the OpenSSH client: apt-get install openssh-client)"
            ))
        })?;
        let t0 = Instant::now();
        let limit = Duration::from_secs(u64::from(CONNECT_TIMEOUT_S) + 20);
        loop {
            if path.exists() {
                break;
            }
            if let Ok(Some(_)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut s) = child.stderr.take() {
                    let _ = s.read_to_string(&mut err);
                }
                return Err(self.unreachable(&last_line(&err)));
            }
            if t0.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                return Err(self.unreachable(&format!("no connection after {} s", limit.as_secs())));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // Its stderr stays piped: nothing reads it, and a master says little after it is up.
        *m = Some(child);
        Ok(())
    }

    /// Whether the master connection is up (always true without one).
    pub fn is_up(&self) -> bool {
        let Some(path) = self.control_path() else {
            return true;
        };
        let Ok(mut m) = self.master.lock() else {
            return false;
        };
        m.as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)) && path.exists())
    }

    fn unreachable(&self, why: &str) -> LabError {
        LabError::Host {
            host: self.name.clone(),
            reason: format!(
                "cannot connect over SSH: {why} (check 'ssh{} {} true')",
                self.opts
                    .config
                    .as_ref()
                    .map(|f| format!(" -F {}", f.display()))
                    .unwrap_or_default(),
                self.name
            ),
        }
    }

    /// `ssh … host -- LINE` over the master (no tty: the remote's stdin is our pipe).
    fn session(&self, line: &str) -> Command {
        let mut c = self.base();
        if let Some(p) = self.control_path() {
            c.args(channel_args(&p.display().to_string()));
        }
        c.arg("-T").arg(&self.name).arg("--").arg(line);
        c
    }

    /// The remote command line that runs `socklab ARGS…`.
    pub fn socklab_line(&self, args: &[String]) -> String {
        socklab_line(&self.opts, args)
    }
}

impl Transport for Ssh {
    fn name(&self) -> &str {
        &self.name
    }

    fn socklab(&self, role: &RoleArgs) -> Result<Command, LabError> {
        self.ensure()?;
        Ok(self.session(&self.socklab_line(&role.to_argv())))
    }

    fn shell(&self, line: &str) -> Result<Command, LabError> {
        self.ensure()?;
        Ok(self.session(line))
    }

    fn stop(&self) -> Stop {
        Stop::CloseStdin
    }
}

impl Drop for Ssh {
    fn drop(&mut self) {
        if let Ok(mut m) = self.master.lock() {
            if let Some(mut c) = m.take() {
                let _ = kill(c.id(), Signal::Term);
                let t0 = Instant::now();
                while matches!(c.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The options every ssh socklab runs carries, after `-F FILE` if a configuration file is
/// given (then ssh reads that file only, not `~/.ssh/config` nor `/etc/ssh/ssh_config`): batch
/// mode, and the timeouts that notice a lost host.
pub fn option_args() -> Vec<String> {
    let mut v = Vec::new();
    for o in [
        "BatchMode=yes".to_string(),
        format!("ConnectTimeout={CONNECT_TIMEOUT_S}"),
        // A host lost mid-run is noticed within about 6 s, not at TCP's timeout.
        "ServerAliveInterval=2".into(),
        "ServerAliveCountMax=3".into(),
        "LogLevel=ERROR".into(),
    ] {
        v.extend(["-o".to_string(), o]);
    }
    v
}

/// The options of the master connection over control socket `path` (then `-N HOST`).
pub fn master_args(path: &str) -> Vec<String> {
    let control = format!("ControlPath={path}");
    let args = ["-o", control.as_str(), "-o", "ControlMaster=yes"];
    let mut v: Vec<String> = args.map(String::from).to_vec();
    v.extend(["-o", "ControlPersist=no", "-N"].map(String::from));
    v
}

/// The options of a channel over the master at `path` (then `-T HOST -- LINE`).
pub fn channel_args(path: &str) -> Vec<String> {
    let control = format!("ControlPath={path}");
    ["-o", control.as_str(), "-o", "ControlMaster=no"]
        .map(String::from)
        .to_vec()
}

/// The remote command line that runs `socklab ARGS…` with `opts`' remote binary.
pub fn socklab_line(opts: &SshOptions, args: &[String]) -> String {
    let mut line = match &opts.remote_socklab {
        Some(p) => format!("exec {}", shell_quote(p)),
        None => "PATH=\"$HOME/.local/bin:$PATH\" exec socklab".to_string(),
    };
    for a in args {
        line.push(' ');
        line.push_str(&shell_quote(a));
    }
    line
}

/// The control socket directories are `socklab-ssh-<pid>-…` in the temporary directory.
const CONTROL_PREFIX: &str = "socklab-ssh-";

/// Removes the control socket directories of controllers that are gone (killed before they
/// could remove their own): only names of socklab's form whose process no longer exists.
fn remove_stale_control_dirs() {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(CONTROL_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The last non-empty line of ssh's stderr (its error), or a generic one.
pub fn last_line(err: &str) -> String {
    err.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("ssh ended without saying why")
        .to_string()
}

/// Refuses host names that ssh would read as options or that carry shell syntax.
pub(crate) fn check_name(name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@:[]%".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(LabError::Plan(format!(
            "bad host name '{name}': give an SSH destination (a Host of your ssh config, host or user@host), or local"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_that_ssh_would_misread_are_refused() {
        for bad in ["", "-oProxyCommand=x", "a b", "h;rm", "$(x)"] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains("bad host name"), "{bad}: {e}");
        }
        for good in ["lab2", "root@10.0.0.2", "h.example.org", "[::1]"] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn the_remote_line_finds_an_installed_socklab_or_the_given_one() {
        let ssh = |remote: Option<&str>| Ssh {
            name: "h".into(),
            opts: SshOptions {
                remote_socklab: remote.map(String::from),
                ..SshOptions::default()
            },
            control: None,
            master: Mutex::new(None),
        };
        let args = ["sink".to_string(), "--opts".into(), "a b".into()];
        assert_eq!(
            ssh(None).socklab_line(&args),
            "PATH=\"$HOME/.local/bin:$PATH\" exec socklab sink --opts 'a b'"
        );
        assert_eq!(
            ssh(Some("/opt/my socklab")).socklab_line(&args[..1]),
            "exec '/opt/my socklab' sink"
        );
    }

    #[test]
    fn the_last_line_of_ssh_is_its_error() {
        assert_eq!(
            last_line("Warning: x\nssh: connect to host 10.0.0.9 port 22: No route to host\n\n"),
            "ssh: connect to host 10.0.0.9 port 22: No route to host"
        );
        assert_eq!(last_line(""), "ssh ended without saying why");
    }
}
