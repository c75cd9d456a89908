//! Hosts for the multi-host tests: network namespaces joined by a bridge, one for the
//! controller (`sl-<pid>-<n>-k`, 10.80.0.1) and one per host (`sl-<pid>-<n>-hI`, 10.80.0.(I+1)),
//! each host running Debian's OpenSSH sshd with a configuration, host key, client key and
//! known_hosts made for this test in a temporary directory. The controller reaches them through
//! an ssh_config file passed with `--ssh-config` (never `~/.ssh`). Everything is removed on
//! drop, panics included. Root only, and only where sshd is installed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

pub const SSHD: &str = "/usr/sbin/sshd";

/// A host of the test: its ssh alias, namespace and address.
#[derive(Debug, Clone)]
pub struct Host {
    pub alias: String,
    pub ns: String,
    pub addr: String,
}

#[derive(Debug)]
pub struct Lab {
    pub dir: tempfile::TempDir,
    pub ctl: String,
    pub hosts: Vec<Host>,
    sshd: Vec<Child>,
    /// The ssh_config file.
    pub config: PathBuf,
    /// The socklab binary under test (the hosts share the file system).
    pub bin: PathBuf,
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Lab {
    /// A controller and `n` hosts, or `None` without root (the skip is printed and counted).
    /// A missing sshd is a failure: as root the hosts tests run, against a real OpenSSH.
    pub fn new(test: &str, n: usize) -> Option<Lab> {
        if !socklab_sys::skip::root_or_skip(test) {
            return None;
        }
        assert!(
            Path::new(SSHD).exists(),
            "{test} needs Debian's OpenSSH server ({SSHD}): apt-get install openssh-server \
             openssh-client (scripts/test installs them)"
        );
        let tag = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::Builder::new()
            .prefix("sl-hosts-")
            .tempdir()
            .unwrap();
        let mut lab = Lab {
            ctl: format!("sl-{tag}-k"),
            hosts: (1..=n)
                .map(|i| Host {
                    alias: format!("h{i}"),
                    ns: format!("sl-{tag}-h{i}"),
                    addr: format!("10.80.0.{}", i + 1),
                })
                .collect(),
            sshd: Vec::new(),
            config: dir.path().join("ssh_config"),
            bin: assert_cmd::cargo::cargo_bin("socklab"),
            dir,
        };
        lab.build_network();
        lab.start_sshd();
        Some(lab)
    }

    fn build_network(&self) {
        ip(&["netns", "add", &self.ctl]);
        ip(&["-n", &self.ctl, "link", "set", "lo", "up"]);
        ip(&["-n", &self.ctl, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &self.ctl, "addr", "add", "10.80.0.1/24", "dev", "br0"]);
        ip(&["-n", &self.ctl, "link", "set", "br0", "up"]);
        for (i, h) in self.hosts.iter().enumerate() {
            let port = format!("p{}", i + 1);
            ip(&["netns", "add", &h.ns]);
            ip(&["-n", &h.ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n", &self.ctl, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", &h.ns,
            ]);
            ip(&["-n", &self.ctl, "link", "set", &port, "master", "br0", "up"]);
            ip(&[
                "-n",
                &h.ns,
                "addr",
                "add",
                &format!("{}/24", h.addr),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &h.ns, "link", "set", "eth0", "up"]);
        }
    }

    fn keygen(&self, name: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        let o = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "socklab-test", "-f"])
            .arg(&p)
            .output()
            .expect("ssh-keygen (apt-get install openssh-client)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        p
    }

    fn start_sshd(&mut self) {
        let d = self.dir.path().to_path_buf();
        let host_key = self.keygen("host_key");
        let id = self.keygen("id");
        let other = self.keygen("other_id");
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).unwrap();
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        let mut known = String::new();
        let mut cfg = String::new();
        let common = format!(
            "  User root\n  UserKnownHostsFile {k}\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  IdentitiesOnly yes\n  BatchMode yes\n",
            k = d.join("known_hosts").display()
        );
        // Privilege separation directory of Debian's sshd.
        std::fs::create_dir_all("/run/sshd").unwrap();
        for h in &self.hosts {
            known.push_str(&format!("{} {}", h.addr, host_pub));
            cfg.push_str(&format!(
                "Host {}\n  HostName {}\n  IdentityFile {}\n{common}",
                h.alias,
                h.addr,
                id.display()
            ));
            let conf = d.join(format!("sshd_{}", h.alias));
            std::fs::write(
                &conf,
                format!(
                    "Port 22\nListenAddress {}\nHostKey {}\nAuthorizedKeysFile {}\nPidFile {}\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nMaxSessions 100\nMaxStartups 100\n",
                    h.addr,
                    host_key.display(),
                    d.join("authorized_keys").display(),
                    d.join(format!("sshd_{}.pid", h.alias)).display()
                ),
            )
            .unwrap();
            let log = std::fs::File::create(d.join(format!("sshd_{}.log", h.alias))).unwrap();
            let child = Command::new("ip")
                .args(["netns", "exec", &h.ns, SSHD, "-D", "-e", "-f"])
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            self.sshd.push(child);
        }
        // Aliases for the faults: an address nobody has, and a key the hosts do not know.
        cfg.push_str(&format!(
            "Host nowhere\n  HostName 10.80.0.99\n  ConnectTimeout 3\n  IdentityFile {}\n{common}",
            id.display()
        ));
        cfg.push_str(&format!(
            "Host wrongkey\n  HostName 10.80.0.2\n  IdentityFile {}\n{common}",
            other.display()
        ));
        std::fs::write(d.join("known_hosts"), known).unwrap();
        std::fs::write(&self.config, cfg).unwrap();
        // Wait until every sshd accepts connections.
        for h in &self.hosts {
            let t0 = Instant::now();
            loop {
                let ok = self
                    .in_ctl("ssh")
                    .arg("-F")
                    .arg(&self.config)
                    .args([&h.alias, "true"])
                    .stdin(Stdio::null())
                    .output()
                    .is_ok_and(|o| o.status.success());
                if ok {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "sshd on {} did not come up: {}",
                    h.alias,
                    self.sshd_log(&h.alias)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn sshd_log(&self, alias: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("sshd_{alias}.log")))
            .unwrap_or_default()
    }

    /// A command run in the controller's namespace.
    pub fn in_ctl(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ctl]).arg(program);
        c
    }

    /// socklab in the controller's namespace, with the test's ssh config and the binary under
    /// test as the remote socklab.
    pub fn socklab(&self, args: &[&str]) -> Command {
        let mut c = self.in_ctl(&self.bin);
        c.args(args)
            .arg("--ssh-config")
            .arg(&self.config)
            .arg("--remote-socklab")
            .arg(&self.bin);
        c
    }

    /// Runs socklab (as [`Lab::socklab`]) and returns (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let o = self.socklab(args).stdin(Stdio::null()).output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Processes running in a host's namespace (sshd's own listener included).
    pub fn pids_in(&self, host: usize) -> Vec<u32> {
        let o = Command::new("ip")
            .args(["netns", "pids", &self.hosts[host].ns])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// The command lines of the socklab processes in a host's namespace.
    pub fn socklab_in(&self, host: usize) -> Vec<String> {
        self.pids_in(host)
            .into_iter()
            .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains("socklab") && !c.contains("sshd"))
            .collect()
    }

    /// Kills the sshd session processes of a host (its listener stays): the controller's SSH
    /// connection dies as a lost host's would.
    pub fn kill_sessions(&self, host: usize) {
        let listener = self.sshd[host].id();
        for p in self.pids_in(host) {
            if p == listener {
                continue;
            }
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmd).starts_with("sshd") {
                let _ = Command::new("kill")
                    .args(["-KILL", &p.to_string()])
                    .status();
            }
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.sshd {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self
            .hosts
            .iter()
            .map(|h| h.ns.clone())
            .chain([self.ctl.clone()])
        {
            // Everything still inside goes first (remote roles, sessions).
            if let Ok(o) = Command::new("ip").args(["netns", "pids", &ns]).output() {
                for p in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-KILL", p]).status();
                }
            }
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}
