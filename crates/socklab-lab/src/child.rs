//! Server children: a re-exec of the socklab binary as a server (`sink`, `echo`, `serve`,
//! `transfer serve`), on an ephemeral loopback port or inside an emulated link's server
//! namespace, or the same role on another host through a [`Transport`]. Its stdout speaks
//! [`socklab_net::childline`]; when it ends, its exit status, accounting (`wait4` here, the
//! role's own `USAGE` line on another host) and what it printed come back as one typed
//! [`ServerExit`].

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use socklab_link::{Namespaces, Side, SERVER_ADDR};
use socklab_net::childline::{effective_text, ChildLine};
use socklab_net::server::ServeReport;
use socklab_sys::process::{child_dies_with_parent, kill, Signal};
use socklab_sys::usage::{try_wait4, wait4, ExitStatus, Usage};

use crate::hosts::transport::{Stop, Transport};
use crate::roles::argv::{Listen, Role, RoleArgs};
use crate::LabError;

/// What a server child printed after its first line, kept by its stdout reader.
#[derive(Debug, Default)]
struct Printed {
    effective: Option<Vec<(String, String)>>,
    stats: Option<ServeReport>,
    /// `REPORT` lines not yet taken by [`ServerChild::wait_report`].
    reports: Vec<serde_json::Value>,
    /// `INTERVAL` lines not yet taken by [`IntervalFeed::take`].
    intervals: Vec<serde_json::Value>,
    /// Its stdout closed (it ended).
    closed: bool,
    usage: Option<Usage>,
}

/// A role on another host: its name, and the stdin whose closing stops it.
#[derive(Debug)]
struct Remote {
    host: String,
    stdin: Option<ChildStdin>,
    /// The last line it printed on stderr (its error, when it failed).
    last_err: Arc<Mutex<String>>,
}

/// [`Printed`] with a condition variable that wakes whoever waits for a report.
type Shared = Arc<(Mutex<Printed>, Condvar)>;

/// How long a server child may take to name its certificate after its port.
pub const CERTIFICATE_WAIT: Duration = Duration::from_secs(10);

/// The SHA-256 a server child named under `key` in a `REPORT` line after its port, as
/// [`ServerChild::wait_report`] or [`ServerChild::peek_report`] found that line within
/// [`CERTIFICATE_WAIT`] (`None`: it did not); `who` names the server in the errors.
pub fn named_certificate(
    line: Option<serde_json::Value>,
    key: &str,
    who: &str,
) -> Result<socklab_tls::Fingerprint, LabError> {
    let v = line.ok_or_else(|| {
        LabError::Child(format!(
            "{who} did not name its certificate within {} s",
            CERTIFICATE_WAIT.as_secs()
        ))
    })?;
    socklab_tls::Fingerprint::parse(v[key].as_str().unwrap_or_default())
        .map_err(|e| LabError::Child(format!("the certificate {who} named: {e}")))
}

/// Most `REPORT` lines kept for [`ServerChild::wait_report`] (the oldest go first).
const MAX_REPORTS: usize = 1024;
/// Most `INTERVAL` lines kept for [`IntervalFeed::take`] (the oldest go first).
const MAX_INTERVAL_LINES: usize = 4096;

/// The `INTERVAL` lines of a server child, as they are printed (`socklab sink --udp
/// --interval`).
#[derive(Debug, Clone)]
pub struct IntervalFeed(Shared);

impl IntervalFeed {
    /// Takes the lines that `pick` accepts printed so far, in the order printed.
    pub fn take(&self, pick: &dyn Fn(&serde_json::Value) -> bool) -> Vec<serde_json::Value> {
        let Ok(mut p) = self.0 .0.lock() else {
            return Vec::new();
        };
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut p.intervals)
            .into_iter()
            .partition(|v| pick(v));
        p.intervals = kept;
        taken
    }
}

/// How a server child ended: status, CPU accounting (itself and the children it reaped, from
/// `wait4`), and what it reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerExit {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its CPU accounting.
    pub usage: Usage,
    /// The server-side socket options as the kernel reported them (`EFFECTIVE`).
    pub effective: Option<Vec<(String, String)>>,
    /// `socklab serve`'s own accounting (`STATS`).
    pub stats: Option<ServeReport>,
}

impl ServerExit {
    /// The exit as experiment facts (`wait4_user_s`, `wait4_sys_s`, `wait4_nvcsw`,
    /// `wait4_nivcsw`, `exit`, and `effective_opts` / `serve_stats` when printed).
    pub fn facts(&self) -> Vec<(String, String)> {
        let mut facts = vec![
            (
                "wait4_user_s".into(),
                format!("{:.6}", self.usage.user.as_secs_f64()),
            ),
            (
                "wait4_sys_s".into(),
                format!("{:.6}", self.usage.sys.as_secs_f64()),
            ),
            ("wait4_nvcsw".into(), self.usage.nvcsw.to_string()),
            ("wait4_nivcsw".into(), self.usage.nivcsw.to_string()),
            ("exit".into(), format!("{:?}", self.status)),
        ];
        if let Some(e) = &self.effective {
            facts.push(("effective_opts".into(), effective_text(e)));
        }
        if let Some(s) = &self.stats {
            facts.push((
                "serve_stats".into(),
                serde_json::to_string(s).unwrap_or_default(),
            ));
        }
        facts
    }
}

/// A server child process.
#[derive(Debug)]
pub struct ServerChild {
    child: Option<Child>,
    addr: SocketAddr,
    printed: Shared,
    reader: Option<std::thread::JoinHandle<()>>,
    remote: Option<Remote>,
}

impl ServerChild {
    /// Starts `exe <args> --bind 127.0.0.1 --port 0 --announce --quiet` (with `ns`: inside
    /// the server namespace of an emulated link, on the link's server address) and waits (at
    /// most 10 s) for the address it announces.
    pub fn spawn(exe: &Path, args: &[&str], ns: Option<&Namespaces>) -> Result<Self, LabError> {
        let (mut cmd, bind) = match ns {
            Some(n) => (
                n.command(Side::Server, &exe.to_string_lossy()),
                IpAddr::V4(SERVER_ADDR),
            ),
            None => (Command::new(exe), IpAddr::V4(Ipv4Addr::LOCALHOST)),
        };
        cmd.args(args)
            .args(Listen::announced(bind).to_argv())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        let what = format!("'{} {}'", exe.display(), args.join(" "));
        Self::start(cmd, &what, None)
    }

    /// Starts `role` on the host of `t`, listening on `bind` (an address of that host the
    /// clients reach), and waits (at most 10 s plus the connection) for the address it
    /// announces. On another host the role runs with `--until-eof`: closing its stdin (or its
    /// SSH session ending) stops it, and it reports its own rusage.
    pub fn spawn_on(t: &dyn Transport, role: &Role, bind: IpAddr) -> Result<Self, LabError> {
        let remote = t.stop() == Stop::CloseStdin;
        let full = RoleArgs {
            role: role.clone(),
            listen: Some(Listen::announced(bind)),
            until_eof: remote,
        };
        let mut cmd = t.socklab(&full)?;
        let what = format!("'socklab {}' on {}", role.to_argv().join(" "), t.name());
        if !remote {
            cmd.stdin(Stdio::null()).stderr(Stdio::inherit());
            return Self::start(cmd, &what, None);
        }
        cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
        Self::start(cmd, &what, Some(t.name()))
    }

    fn start(mut cmd: Command, what: &str, host: Option<&str>) -> Result<Self, LabError> {
        cmd.stdout(Stdio::piped());
        child_dies_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| LabError::Child(format!("cannot start the server {what}: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| LabError::Child("server child has no stdout".into()))?;
        let remote = host.map(|h| {
            let last_err = Arc::new(Mutex::new(String::new()));
            if let Some(err) = child.stderr.take() {
                let (slot, name) = (last_err.clone(), h.to_string());
                std::thread::spawn(move || {
                    for l in BufReader::new(err).lines().map_while(Result::ok) {
                        if l.trim().is_empty() {
                            continue;
                        }
                        eprintln!("[{name}] {l}");
                        if let Ok(mut s) = slot.lock() {
                            *s = l;
                        }
                    }
                });
            }
            Remote {
                host: h.to_string(),
                stdin: child.stdin.take(),
                last_err,
            }
        });
        let (tx, rx) = mpsc::channel();
        let printed: Shared = Arc::new((Mutex::new(Printed::default()), Condvar::new()));
        let slot = printed.clone();
        // A login shell on another host may print before the role does (a chatty ~/.bashrc):
        // there the first line of the protocol is looked for, not the first line.
        let skip_chatter = remote.is_some();
        let reader = std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = if skip_chatter {
                lines
                    .by_ref()
                    .map_while(Result::ok)
                    .find(|l| l.starts_with(socklab_net::childline::LISTENING))
                    .unwrap_or_default()
            } else {
                lines.next().and_then(Result::ok).unwrap_or_default()
            };
            let _ = tx.send(first);
            // Later lines until the child exits.
            for l in lines.map_while(Result::ok) {
                let Ok(mut p) = slot.0.lock() else { break };
                match ChildLine::parse(&l) {
                    Some(ChildLine::Effective(kv)) => p.effective = Some(kv),
                    Some(ChildLine::Stats(r)) => p.stats = Some(*r),
                    Some(ChildLine::Report(v)) => {
                        if p.reports.len() == MAX_REPORTS {
                            p.reports.remove(0);
                        }
                        p.reports.push(v);
                        slot.1.notify_all();
                    }
                    Some(ChildLine::Interval(v)) => {
                        // Taken as the test goes; a reader that never takes them keeps the
                        // newest (the report carries every interval anyway).
                        if p.intervals.len() == MAX_INTERVAL_LINES {
                            p.intervals.remove(0);
                        }
                        p.intervals.push(v);
                    }
                    Some(ChildLine::Usage(u)) => p.usage = Some(u),
                    _ => {}
                }
            }
            if let Ok(mut p) = slot.0.lock() {
                p.closed = true;
            }
            slot.1.notify_all();
        });
        let mut me = ServerChild {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            printed,
            reader: Some(reader),
            remote,
        };
        // Over SSH the channel opens first (a master connection makes that quick).
        let wait = Duration::from_secs(if me.remote.is_some() { 20 } else { 10 });
        let line = match rx.recv_timeout(wait) {
            Ok(l) => l,
            Err(_) => {
                return Err(me.fault(&format!(
                    "the server {what} did not announce its port within {} s",
                    wait.as_secs()
                )))
            }
        };
        me.addr = match ChildLine::parse(&line) {
            Some(ChildLine::Listening(a)) => a,
            _ if line.is_empty() => {
                return Err(me.fault(&format!("the server {what} ended before it listened")))
            }
            _ => {
                return Err(LabError::Child(format!(
                    "the sink child announced '{}', not an address",
                    line.trim()
                )))
            }
        };
        Ok(me)
    }

    /// An error of a role that failed: on another host, a host fault with the role's last
    /// words on stderr (its own one-line error).
    fn fault(&mut self, what: &str) -> LabError {
        let Some(r) = &self.remote else {
            return LabError::Child(what.to_string());
        };
        // Its stderr reader may still be delivering the last line.
        std::thread::sleep(Duration::from_millis(100));
        let last = r.last_err.lock().map(|s| s.clone()).unwrap_or_default();
        LabError::Host {
            host: r.host.clone(),
            reason: if last.is_empty() {
                what.to_string()
            } else {
                format!("{what}: {}", last.trim_start_matches("socklab: error: "))
            },
        }
    }

    /// The host it runs on, when that is another host.
    pub fn host(&self) -> Option<&str> {
        self.remote.as_ref().map(|r| r.host.as_str())
    }

    /// Whether the role still runs (a role whose host or session was lost has ended; it is
    /// reaped here).
    pub fn alive(&mut self) -> bool {
        let Some(c) = &self.child else { return false };
        if matches!(try_wait4(c.id()), Ok(None)) {
            return true;
        }
        self.child = None;
        false
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits up to `wait` for a `REPORT` line that `pick` accepts and takes it; `None` when
    /// none came in time, the child ended without one, or `stop()` turned true (checked every
    /// 100 ms).
    pub fn wait_report(
        &self,
        wait: Duration,
        pick: &dyn Fn(&serde_json::Value) -> bool,
        stop: &dyn Fn() -> bool,
    ) -> Option<serde_json::Value> {
        self.report(wait, pick, stop, true)
    }

    /// [`Self::wait_report`], leaving the line for later calls (a fact of a kept server, such
    /// as the sink's certificate, asked by every repetition).
    pub fn peek_report(
        &self,
        wait: Duration,
        pick: &dyn Fn(&serde_json::Value) -> bool,
        stop: &dyn Fn() -> bool,
    ) -> Option<serde_json::Value> {
        self.report(wait, pick, stop, false)
    }

    fn report(
        &self,
        wait: Duration,
        pick: &dyn Fn(&serde_json::Value) -> bool,
        stop: &dyn Fn() -> bool,
        take: bool,
    ) -> Option<serde_json::Value> {
        let (lock, cv) = &*self.printed;
        let deadline = Instant::now() + wait;
        let mut p = lock.lock().ok()?;
        loop {
            if let Some(i) = p.reports.iter().position(pick) {
                return Some(match take {
                    true => p.reports.remove(i),
                    false => p.reports[i].clone(),
                });
            }
            let now = Instant::now();
            if p.closed || now >= deadline || stop() {
                return None;
            }
            let slice = (deadline - now).min(Duration::from_millis(100));
            p = cv.wait_timeout(p, slice).ok()?.0;
        }
    }

    /// A handle on its `INTERVAL` lines that another thread may hold while this one waits
    /// (see [`IntervalFeed::take`]).
    pub fn interval_feed(&self) -> IntervalFeed {
        IntervalFeed(self.printed.clone())
    }

    /// Stops it (SIGTERM here, its stdin closed on another host): an error if it had already
    /// ended by itself.
    pub fn stop(mut self) -> Result<ServerExit, LabError> {
        let pid = self.take_pid()?;
        if let Ok(Some((st, _))) = try_wait4(pid) {
            return Err(match &self.remote {
                Some(r) => LabError::Host {
                    host: r.host.clone(),
                    reason: format!("the server role ended early ({st:?}): its SSH session or the host was lost"),
                },
                None => LabError::Child(format!("the server child ended early ({st:?})")),
            });
        }
        let (status, usage) = self.terminate(pid)?;
        self.reaped(status, usage)
    }

    /// Waits up to `grace` for a server that ends by itself (`--once`), then stops it
    /// (SIGTERM).
    pub fn finish(mut self, grace: Duration) -> Result<ServerExit, LabError> {
        let pid = self.take_pid()?;
        let t0 = Instant::now();
        let (status, usage) = loop {
            if let Some(r) = try_wait4(pid).map_err(wait4_error)? {
                break r;
            }
            if t0.elapsed() >= grace {
                break self.terminate(pid)?;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.reaped(status, usage)
    }

    /// Stops the role: SIGTERM and `wait4` here; on another host its stdin closes (the role
    /// takes the SIGTERM path itself) and the SSH client is reaped when the role has ended
    /// (killed after 10 s, which closes the session: the role then dies with it).
    fn terminate(&mut self, pid: u32) -> Result<(ExitStatus, Usage), LabError> {
        let Some(r) = &mut self.remote else {
            return terminate(pid);
        };
        drop(r.stdin.take());
        let t0 = Instant::now();
        loop {
            if let Some(done) = try_wait4(pid).map_err(wait4_error)? {
                return Ok(done);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = kill(pid, Signal::Kill);
                return wait4(pid).map_err(wait4_error);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The child's pid, taken: from here on the caller reaps it.
    fn take_pid(&mut self) -> Result<u32, LabError> {
        self.child
            .take()
            .map(|c| c.id())
            .ok_or_else(|| LabError::Child("server child already stopped".into()))
    }

    /// The exit of a reaped child (its stdout reader has every line by now). A role on
    /// another host must have reported its rusage (`USAGE`).
    fn reaped(&mut self, status: ExitStatus, usage: Usage) -> Result<ServerExit, LabError> {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let printed = match self.printed.0.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => Printed::default(),
        };
        let usage = match (&self.remote, printed.usage) {
            (None, _) => usage,
            (Some(_), Some(u)) => u,
            (Some(r), None) => {
                return Err(LabError::Host {
                    host: r.host.clone(),
                    reason: format!(
                        "the server role ended ({status:?}) without reporting its CPU time (USAGE): its SSH session or the host was lost"
                    ),
                })
            }
        };
        Ok(ServerExit {
            status,
            usage,
            effective: printed.effective,
            stats: printed.stats,
        })
    }
}

fn wait4_error(e: std::io::Error) -> LabError {
    LabError::Child(format!("wait4 on the server child: {e}"))
}

/// SIGTERM, then `wait4`: the child's exit status and CPU accounting.
fn terminate(pid: u32) -> Result<(ExitStatus, Usage), LabError> {
    kill(pid, Signal::Term)
        .map_err(|e| LabError::Child(format!("cannot stop the server child: {e}")))?;
    wait4(pid).map_err(wait4_error)
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Some(c) = self.child.take() {
            let _ = kill(c.id(), Signal::Kill);
            let _ = wait4(c.id());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_waited_for_picked_by_content_and_the_wait_is_bounded() {
        let script = r#"echo LISTENING 127.0.0.1:9; echo 'REPORT {"test_id":5}'; echo 'REPORT {"test_id":6}'; sleep 1"#;
        let child = ServerChild::spawn(Path::new("/bin/sh"), &["-c", script], None).unwrap();
        assert_eq!(child.addr().port(), 9);
        let id = |n: u64| move |v: &serde_json::Value| v["test_id"] == n;
        let never = || false;
        let six = child.wait_report(Duration::from_secs(5), &id(6), &never);
        assert_eq!(six, Some(serde_json::json!({"test_id": 6})));
        assert!(child
            .wait_report(Duration::from_secs(5), &id(5), &never)
            .is_some());
        assert!(
            child
                .wait_report(Duration::from_secs(5), &id(5), &never)
                .is_none(),
            "taken once; the child ended"
        );
        // stop() ends a wait that nothing else would: a child alive for an hour, a report
        // that never comes, a wait of an hour; the channel's bound is on a hang only.
        // (`exec`: the kill on drop reaches the sleep itself, which would otherwise outlive
        // the test holding its stderr, and with it the pipe of scripts/test, for an hour.)
        let alive = ServerChild::spawn(
            Path::new("/bin/sh"),
            &["-c", "echo LISTENING 127.0.0.1:9; exec sleep 3600"],
            None,
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let asked = std::cell::Cell::new(0u32);
            let stop = || {
                asked.set(asked.get() + 1);
                true
            };
            let got = alive.wait_report(Duration::from_secs(3600), &id(7), &stop);
            // Killed and reaped before the test can end.
            drop(alive);
            let _ = tx.send((got, asked.get()));
        });
        let (got, asked) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("stop() did not end the wait");
        assert_eq!(got, None);
        assert!(asked > 0, "stop() was never asked");
    }

    #[test]
    fn an_exit_becomes_the_facts_the_store_keeps() {
        let exit = ServerExit {
            status: ExitStatus::Code(0),
            usage: Usage {
                user: Duration::from_millis(1500),
                sys: Duration::from_micros(250),
                nvcsw: 7,
                nivcsw: 2,
                ..Usage::default()
            },
            effective: Some(vec![("nodelay".into(), "1".into())]),
            stats: None,
        };
        let f = exit.facts();
        let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("wait4_user_s"), Some("1.500000"));
        assert_eq!(get("wait4_sys_s"), Some("0.000250"));
        assert_eq!(get("wait4_nvcsw"), Some("7"));
        assert_eq!(get("exit"), Some("Code(0)"));
        assert_eq!(get("effective_opts"), Some("nodelay=1"));
        assert_eq!(get("serve_stats"), None);
    }
}
