//! Pairs of network namespaces (`sl-…-c`, `sl-…-s`), the commands that run inside them, and
//! the cleanup of everything named `sl-`.
//!
//! Namespaces are made and removed with iproute2's `ip netns`, so `ip netns exec` users see
//! them, and `/etc/netns/NAME/hosts` makes the names `client` and `server` resolve inside.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::LinkError;

/// The client namespace's address on the emulated link.
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The server namespace's address on the emulated link.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// Prefix length of the link's subnet.
pub const PREFIX: u8 = 24;
/// Every name socklab creates starts with this.
pub const PREFIX_NAME: &str = "sl-";
/// Where `ip netns` keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";
/// Per-namespace files that `ip netns exec` bind-mounts over `/etc`.
pub const ETC_NETNS_DIR: &str = "/etc/netns";
/// Where `socklab netem up` records the daemons of lasting links.
pub const STATE_DIR: &str = "/run/socklab";

/// Which end of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Where the measuring client runs.
    Client,
    /// Where the server runs.
    Server,
}

impl Side {
    /// `client` or `server`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }

    /// This side's address on the link.
    pub fn addr(self) -> Ipv4Addr {
        match self {
            Side::Client => CLIENT_ADDR,
            Side::Server => SERVER_ADDR,
        }
    }
}

impl std::str::FromStr for Side {
    type Err = crate::ParseNameError;
    fn from_str(s: &str) -> Result<Side, crate::ParseNameError> {
        match s.trim() {
            "client" | "c" => Ok(Side::Client),
            "server" | "s" => Ok(Side::Server),
            other => Err(crate::ParseNameError::unknown(
                "side",
                other,
                "use client or server",
            )),
        }
    }
}

/// Refuses to go on without root, naming the alternative.
pub fn require_root(what: &str) -> Result<(), LinkError> {
    if socklab_sys::netns::is_root() {
        Ok(())
    } else {
        Err(LinkError::Link(format!(
            "{what} needs root (network namespaces and TUN devices need CAP_NET_ADMIN): run it with sudo, or use `link_driver` udp-proxy (UDP only, no root)"
        )))
    }
}

/// Runs `ip ARGS…` and turns a failure into a one-line error with ip's own message.
pub fn ip(args: &[&str]) -> Result<String, LinkError> {
    run_tool("ip", args)
}

/// Runs a tool (`ip`, `tc`) and returns its stdout, or an error naming the command and stderr.
pub fn run_tool(tool: &str, args: &[&str]) -> Result<String, LinkError> {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            LinkError::Link(format!(
                "cannot run '{tool}': {e} (install iproute2: apt-get install iproute2)"
            ))
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LinkError::Link(format!(
            "'{tool} {}' failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The sysctls socklab sets in both namespaces of a link (recorded with every experiment that
/// uses one): TCP keeps no per-destination metrics between connections; TCP asks for ECN
/// (RFC 3168; Linux's default only accepts it), so that a spec with `ecn` marks TCP's data
/// packets instead of dropping them. Without `ecn` in the spec nothing marks, and an
/// ECN-capable packet is dropped like any other.
pub const SYSCTLS: &[(&str, &str)] = &[
    ("net.ipv4.tcp_no_metrics_save", "1"),
    ("net.ipv4.tcp_ecn", "1"),
];

/// A fresh tag for this process: `<pid>-<n>`, so concurrent links (tests, threads) never clash
/// and `cleanup` can tell whose namespaces they are.
pub fn fresh_tag() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Checks a user-given link name (`netem up --name`): a letter, then letters, digits and
/// dashes, at most 20 characters.
pub fn check_name(name: &str) -> Result<(), LinkError> {
    let ok = !name.is_empty()
        && name.len() <= 20
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(LinkError::Invalid(format!(
            "bad link name '{name}': use a lower-case letter then letters, digits or '-', at most 20 characters, e.g. lab1"
        )))
    }
}

/// A pair of namespaces joined by an emulated link. Dropping it removes both namespaces, the
/// processes still inside them and their `/etc/netns` files (unless [`Namespaces::keep`]).
#[derive(Debug)]
pub struct Namespaces {
    tag: String,
    keep: bool,
    removed: bool,
}

impl Namespaces {
    /// Creates `sl-<tag>-c` and `sl-<tag>-s` with loopback up and a hosts file naming
    /// `client` and `server`. On any failure, what was created is removed again.
    pub fn create(tag: &str) -> Result<Namespaces, LinkError> {
        require_root("an emulated link (`link_driver` tun or netem)")?;
        // Checked before `me` exists: its Drop must never remove namespaces it did not make.
        for side in [Side::Client, Side::Server] {
            let name = ns_name(tag, side);
            if exists(&name) {
                return Err(LinkError::Link(format!(
                    "the namespace {name} already exists: remove it with 'socklab netem down {tag}' or 'socklab netem cleanup'"
                )));
            }
        }
        let me = Namespaces {
            tag: tag.to_string(),
            keep: false,
            removed: false,
        };
        for side in [Side::Client, Side::Server] {
            let name = me.name(side);
            ip(&["netns", "add", &name])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
            let dir = Path::new(ETC_NETNS_DIR).join(&name);
            std::fs::create_dir_all(&dir)
                .and_then(|()| {
                    std::fs::write(
                        dir.join("hosts"),
                        format!(
                            "127.0.0.1\tlocalhost\n::1\tlocalhost\n{CLIENT_ADDR}\tclient\n{SERVER_ADDR}\tserver\n"
                        ),
                    )
                })
                .map_err(|e| {
                    LinkError::Link(format!("cannot write {}/hosts: {e}", dir.display()))
                })?;
            me.set_sysctls(side)?;
        }
        Ok(me)
    }

    /// Every connection across the link starts from the same kernel state: the namespace's
    /// TCP does not remember a destination's RTT, ssthresh and cwnd from one connection to
    /// the next (`net.ipv4.tcp_no_metrics_save = 1`), so a lossy repetition cannot slow down
    /// the clean one after it. See [`SYSCTLS`].
    fn set_sysctls(&self, side: Side) -> Result<(), LinkError> {
        let guard = self.enter(side)?;
        let r = SYSCTLS.iter().try_for_each(|(k, v)| {
            let path = format!("/proc/sys/{}", k.replace('.', "/"));
            std::fs::write(&path, v).map_err(|e| {
                LinkError::Link(format!("cannot set {k} = {v} in {}: {e}", self.name(side)))
            })
        });
        drop(guard);
        r
    }

    /// The tag (`<pid>-<n>` or a user's name).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// `sl-<tag>-c` or `sl-<tag>-s`.
    pub fn name(&self, side: Side) -> String {
        ns_name(&self.tag, side)
    }

    /// `/run/netns/<name>`.
    pub fn path(&self, side: Side) -> PathBuf {
        Path::new(NETNS_DIR).join(self.name(side))
    }

    /// Moves the calling thread into a side's namespace until the guard drops.
    pub fn enter(&self, side: Side) -> Result<socklab_sys::netns::NetnsGuard, LinkError> {
        socklab_sys::netns::enter(&self.path(side)).map_err(|e| {
            LinkError::Link(format!(
                "cannot enter the namespace {}: {e}",
                self.name(side)
            ))
        })
    }

    /// A command that runs `program args…` inside a side's namespace (`ip netns exec`, so the
    /// namespace's hosts file applies).
    pub fn command(&self, side: Side, program: &str) -> Command {
        command_in(&self.name(side), program)
    }

    /// Leaves the namespaces in place when dropped (a lasting link).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Removes both namespaces now (processes inside are killed first).
    pub fn remove(&mut self) -> Result<(), LinkError> {
        self.removed = true;
        let mut first_err = None;
        for side in [Side::Client, Side::Server] {
            if let Err(e) = remove_namespace(&self.name(side)) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        if !self.keep && !self.removed {
            if let Err(e) = self.remove() {
                eprintln!("socklab: {e} (run 'socklab netem cleanup')");
            }
        }
    }
}

/// A command that runs `program` inside namespace `name` (`ip netns exec`).
pub fn command_in(name: &str, program: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", name, program]);
    c
}

/// Whether the named namespace exists.
pub fn exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

/// `sl-<tag>-c` / `sl-<tag>-s`.
pub fn ns_name(tag: &str, side: Side) -> String {
    format!(
        "{PREFIX_NAME}{tag}-{}",
        match side {
            Side::Client => 'c',
            Side::Server => 's',
        }
    )
}

/// Kills what runs inside namespace `name`, deletes it and its `/etc/netns` directory. Refuses
/// names without the `sl-` prefix.
pub fn remove_namespace(name: &str) -> Result<(), LinkError> {
    if !name.starts_with(PREFIX_NAME) || name.contains('/') || name.contains("..") {
        return Err(LinkError::Link(format!(
            "refusing to remove '{name}': socklab only removes what it named sl-…"
        )));
    }
    if exists(name) {
        if let Ok(pids) = ip(&["netns", "pids", name]) {
            for pid in pids
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
            {
                if pid != std::process::id() {
                    let _ = socklab_sys::process::kill(pid, socklab_sys::process::Signal::Kill);
                }
            }
        }
        ip(&["netns", "del", name])?;
    }
    let etc = Path::new(ETC_NETNS_DIR).join(name);
    if etc.exists() {
        std::fs::remove_dir_all(&etc)
            .map_err(|e| LinkError::Link(format!("cannot remove {}: {e}", etc.display())))?;
    }
    Ok(())
}

/// Names under `dir` that start with `sl-`.
fn sl_entries(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(PREFIX_NAME))
        .collect();
    v.sort();
    v
}

/// Every namespace named `sl-…` that exists now.
pub fn list_namespaces() -> Vec<String> {
    sl_entries(NETNS_DIR)
}

/// The process that owns a namespace: the pid in `sl-<pid>-<n>-c`, or the daemon recorded in
/// `/run/socklab/<name>.pid` for a named link.
pub fn owner(ns: &str) -> Option<u32> {
    let tag = tag_of(ns)?;
    if let Some(pid) = tag.split('-').next().and_then(|p| p.parse::<u32>().ok()) {
        return Some(pid);
    }
    read_pid_file(tag)
}

/// The tag of a namespace name: `lab1` of `sl-lab1-c`, `123-4` of `sl-123-4-s` (names without
/// a side suffix, like the netem probe's, are their own tag).
pub fn tag_of(ns: &str) -> Option<&str> {
    let rest = ns.strip_prefix(PREFIX_NAME)?;
    Some(
        rest.strip_suffix("-c")
            .or_else(|| rest.strip_suffix("-s"))
            .unwrap_or(rest),
    )
}

/// `/run/socklab/<name>.<ext>`: a lasting link's pid file, log and spec.
pub fn state_file(name: &str, ext: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.{ext}"))
}

/// The daemon pid of a named link, if recorded.
pub fn read_pid_file(name: &str) -> Option<u32> {
    std::fs::read_to_string(state_file(name, "pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether a process with this pid exists.
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// What [`cleanup`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cleanup {
    /// Namespaces removed.
    pub removed: Vec<String>,
    /// Namespaces left because their owner still runs (use `all`).
    pub skipped: Vec<String>,
    /// Interfaces removed from the current namespace.
    pub links: Vec<String>,
    /// Other leftovers removed (hosts files, pid files).
    pub files: Vec<String>,
}

/// Removes everything named `sl-…`: namespaces whose owner is gone (with `all`, also those of
/// running socklab processes, whose daemons are stopped first), their `/etc/netns` files,
/// stale pid files, and `sl-` interfaces in the current namespace. Never touches other names.
pub fn cleanup(all: bool) -> Result<Cleanup, LinkError> {
    require_root("socklab netem cleanup")?;
    let mut done = Cleanup::default();
    let me = std::process::id();
    for ns in list_namespaces() {
        // Live owners clean up after themselves (this process's own links included: their
        // guards remove them); `all` stops other owners first.
        if let Some(pid) = owner(&ns).filter(|&p| alive(p)) {
            if !all || pid == me {
                done.skipped.push(ns);
                continue;
            }
            let _ = socklab_sys::process::kill(pid, socklab_sys::process::Signal::Term);
        }
        remove_namespace(&ns)?;
        done.removed.push(ns);
    }
    for name in sl_entries(ETC_NETNS_DIR) {
        if !exists(&name) {
            remove_namespace(&name)?;
            done.files.push(format!("{ETC_NETNS_DIR}/{name}"));
        }
    }
    for f in std::fs::read_dir(STATE_DIR).into_iter().flatten().flatten() {
        let p = f.path();
        let Some(stem) = p.file_stem().and_then(|s| s.to_str()).map(str::to_string) else {
            continue;
        };
        if p.extension().is_some_and(|e| e == "pid")
            && read_pid_file(&stem).is_none_or(|pid| !alive(pid))
        {
            let _ = std::fs::remove_file(&p);
            done.files.push(p.display().to_string());
        }
    }
    if let Ok(out) = ip(&["-o", "link", "show"]) {
        for line in out.lines() {
            // "7: sl-veth@if6: <…>": the name is the second field, up to '@' or ':'.
            let Some(name) = line.split(": ").nth(1) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or(name);
            if name.starts_with(PREFIX_NAME) {
                ip(&["link", "del", name])?;
                done.links.push(name.to_string());
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_owners() {
        assert_eq!(ns_name("123-4", Side::Client), "sl-123-4-c");
        assert_eq!(ns_name("lab1", Side::Server), "sl-lab1-s");
        assert_eq!(owner("sl-123-4-c"), Some(123));
        assert_eq!(owner("sl-77-0-s"), Some(77));
        assert_eq!(owner("sl-nosuchlink-c"), None);
        assert_eq!(owner("other"), None);
    }

    #[test]
    fn link_names_are_checked() {
        check_name("lab1").unwrap();
        check_name("a-b-9").unwrap();
        for bad in ["", "1lab", "Lab", "a/b", "a..b", "averyveryverylongname1"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_sl_names_are_ever_removed() {
        for bad in ["eth0", "netns1", "sl-../x", "sl-a/b"] {
            let e = remove_namespace(bad).unwrap_err().to_string();
            assert!(e.contains("only removes"), "{e}");
        }
    }

    #[test]
    fn sides_parse() {
        assert_eq!("server".parse::<Side>().unwrap(), Side::Server);
        assert_eq!("c".parse::<Side>().unwrap(), Side::Client);
        assert!("middle"
            .parse::<Side>()
            .unwrap_err()
            .to_string()
            .contains("client or server"));
    }
}
