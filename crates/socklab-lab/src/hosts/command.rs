//! The host commands' work: `hosts check` and `hosts install` over the hosts named on the
//! command line, their table, the host flags of a measuring command as a [`HostPlan`], and the
//! internal roles' arguments. Errors name keys in backticks (the binary prints the flag).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use socklab_net::load::LoadConfig;

use super::{install, probe, HostPlan, HostReport, Local, Ssh, SshOptions, Transport, LOCAL};
use crate::model::params::Params;
use crate::roles::{parse_bind, RoleError};
use crate::table::Table;
use crate::LabError;

/// This socklab binary (the one copied to hosts, and run by a role).
pub fn this_exe() -> Result<PathBuf, LabError> {
    std::env::current_exe().map_err(|source| LabError::Io {
        context: "cannot find the socklab binary".into(),
        source,
    })
}

/// The transport of one host named on the command line (`local`: this machine).
pub fn connect(name: &str, ssh: &SshOptions) -> Result<Box<dyn Transport>, LabError> {
    if name == LOCAL {
        return Ok(Box::new(Local::new(
            std::env::current_exe().unwrap_or_else(|_| PathBuf::from("socklab")),
        )));
    }
    Ok(Box::new(Ssh::connect(name, ssh)?))
}

/// The end of a command over several hosts: `None` when every host passed, else the message
/// naming those that failed (`what`: "failed the check").
pub fn failed_hosts(failed: &[String], total: usize, what: &str) -> Option<String> {
    match failed.len() {
        0 => None,
        n => Some(format!(
            "{n} of {total} host(s) {what}: {}",
            failed.join(", ")
        )),
    }
}

/// What a dry run of `hosts check` says.
pub fn check_dry_run_text(hosts: &[String]) -> String {
    format!("socklab hosts check would connect to {}", hosts.join(", "))
}

/// `hosts check`: each host checked in turn (`on_error` hears each failure as it happens);
/// the text to print (the table, or the reports as JSON), and the failure's message if a host
/// failed.
pub fn check(
    hosts: &[String],
    ssh: &SshOptions,
    json: bool,
    mut on_error: impl FnMut(&LabError),
) -> (String, Option<String>) {
    let mut reports: Vec<HostReport> = Vec::new();
    let mut failed = Vec::new();
    for h in hosts {
        match connect(h, ssh).and_then(|t| probe::check(t.as_ref(), None)) {
            Ok(r) => reports.push(r),
            Err(e) => {
                on_error(&e);
                failed.push(h.clone());
            }
        }
    }
    let text = if json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&reports).unwrap_or_default()
        )
    } else if reports.is_empty() {
        String::new()
    } else {
        check_table(&reports).to_text()
    };
    (text, failed_hosts(&failed, hosts.len(), "failed the check"))
}

/// The reports of `hosts check` as a table.
pub fn check_table(reports: &[HostReport]) -> Table {
    let mut t = Table::new(&[
        "host",
        "socklab",
        "kernel",
        "cpu",
        "cores",
        "cc (default; available)",
        "addr",
        "mtu",
        "rtt ms",
        "clock offset",
    ]);
    t.left = vec![
        true, true, true, true, false, true, true, false, false, false,
    ];
    for r in reports {
        let f = &r.facts;
        t.row(vec![
            r.name.clone(),
            f.socklab_version.clone(),
            f.kernel.clone(),
            f.cpu_model.clone(),
            f.cores.to_string(),
            format!("{}; {}", f.cc_default, f.cc_available),
            r.addr.map_or("-".into(), |a| a.to_string()),
            r.mtu.map_or("-".into(), |m| m.to_string()),
            r.rtt_us
                .map_or("-".into(), |u| format!("{:.3}", u / 1000.0)),
            r.clock_text(),
        ]);
    }
    t
}

/// `hosts install`'s `dir`, checked: a directory; what a dry run says.
pub fn check_install(hosts: &[String], dir: &str) -> Result<String, LabError> {
    if dir.trim().is_empty() {
        return Err(LabError::Plan(
            "`dir` '': name a directory, e.g. ~/.local/bin".into(),
        ));
    }
    Ok(format!(
        "socklab hosts install would copy this binary to {dir}/socklab on {}",
        hosts.join(", ")
    ))
}

/// `hosts install`: this binary `exe` copied to each host in turn; `each` hears each host's
/// line to print (or its error) as it happens. The failure's message if a host failed.
pub fn install<E>(
    hosts: &[String],
    ssh: &SshOptions,
    exe: &Path,
    dir: &str,
    mut each: impl FnMut(Result<String, LabError>) -> Result<(), E>,
) -> Result<Option<String>, E> {
    let mut failed = Vec::new();
    for h in hosts {
        match connect(h, ssh).and_then(|t| install::install(t.as_ref(), exe, dir)) {
            Ok(said) => each(Ok(format!("{h}: installed {dir}/socklab ({said})\n")))?,
            Err(e) => {
                each(Err(e))?;
                failed.push(h.clone());
            }
        }
    }
    Ok(failed_hosts(&failed, hosts.len(), "not installed"))
}

/// `hosts rep`'s `params`: a JSON object of key = text.
pub fn rep_params(text: &str) -> Result<Params, RoleError> {
    serde_json::from_str(text)
        .map_err(|e| RoleError::Usage(format!("`params`: not a parameter object: {e}")))
}

/// `hosts generate`'s `config`: a load generator's share (JSON).
pub fn generate_config(text: &str) -> Result<LoadConfig, RoleError> {
    serde_json::from_str(text)
        .map_err(|e| RoleError::Usage(format!("`config`: not a load configuration: {e}")))
}

/// `hosts probe`: the probe role on `bind` until its stdin ends.
pub fn probe(bind: &str) -> Result<(), RoleError> {
    let ip = parse_bind(bind)?;
    probe::serve_probe(ip).map_err(|e| RoleError::Run(format!("hosts probe: {e}")))
}

/// The host flags of a measuring command, as given.
#[derive(Debug, Clone, Default)]
pub struct HostFlags {
    /// The server role's host.
    pub server_host: Option<String>,
    /// The address clients reach the server host at (text).
    pub server_addr: Option<String>,
    /// The client role's host.
    pub client_host: Option<String>,
    /// Load generators' hosts.
    pub generators: Vec<String>,
    /// How to reach them.
    pub ssh: SshOptions,
}

impl HostFlags {
    /// The checked host plan.
    pub fn plan(&self) -> Result<HostPlan, LabError> {
        let server_addr: Option<IpAddr> = match &self.server_addr {
            Some(a) => Some(a.trim_matches(|c| c == '[' || c == ']').parse().map_err(|_| {
                LabError::Plan(format!(
                    "`server_addr` '{a}' is not an IP address: give the address the clients reach the server host at, e.g. 192.0.2.10"
                ))
            })?),
            None => None,
        };
        let plan = HostPlan {
            server: self.server_host.clone(),
            server_addr,
            client: self.client_host.clone(),
            generators: self
                .generators
                .iter()
                .map(|g| g.trim().to_string())
                .collect(),
            ssh: self.ssh.clone(),
            untrusted: None,
        };
        plan.check()?;
        plan.ssh.check()?;
        Ok(plan)
    }

    /// Refuses a server host beside a server somebody else started (`to`).
    pub fn check_to(&self, to: Option<&str>) -> Result<(), LabError> {
        match (&self.server_host, to) {
            (Some(h), Some(t)) if h != LOCAL => Err(LabError::Plan(format!(
                "`server_host` {h} starts the server there, `to` {t} names one already running: give one of them"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_flags_are_checked_naming_their_key() {
        let plan = |f: HostFlags| f.plan().map_err(|e| e.to_string());
        assert!(plan(HostFlags::default()).unwrap().is_local());
        let e = plan(HostFlags {
            server_host: Some("lab2".into()),
            server_addr: Some("nowhere".into()),
            ..HostFlags::default()
        })
        .unwrap_err();
        assert!(
            e.starts_with("`server_addr` 'nowhere' is not an IP address"),
            "{e}"
        );
        let e = plan(HostFlags {
            ssh: SshOptions {
                config: Some(PathBuf::from("/nonexistent/ssh_config")),
                ..SshOptions::default()
            },
            ..HostFlags::default()
        })
        .unwrap_err();
        assert!(e.starts_with("`ssh_config` '/nonexistent/ssh_config': no such file"));
        let remote = HostFlags {
            server_host: Some("lab2".into()),
            ..HostFlags::default()
        };
        assert!(remote.check_to(None).is_ok());
        assert!(remote
            .check_to(Some("192.0.2.1:7"))
            .unwrap_err()
            .to_string()
            .starts_with("`server_host` lab2 starts the server there, `to` 192.0.2.1:7"));
        // Issue 26 item 10: a name ssh would misread is refused with the plan, before a run.
        for (flags, key) in [
            (
                HostFlags {
                    server_host: Some("bad host!".into()),
                    ..HostFlags::default()
                },
                "`server_host` bad host name 'bad host!'",
            ),
            (
                HostFlags {
                    generators: vec!["local".into(), "-oProxyCommand=x".into()],
                    ..HostFlags::default()
                },
                "`generators` bad host name '-oProxyCommand=x'",
            ),
        ] {
            let e = plan(flags).unwrap_err();
            assert!(e.starts_with(key), "{e}");
        }
    }

    #[test]
    fn commands_over_hosts_name_those_that_failed() {
        assert_eq!(failed_hosts(&[], 2, "not installed"), None);
        assert_eq!(
            failed_hosts(&["b".into()], 2, "failed the check").unwrap(),
            "1 of 2 host(s) failed the check: b"
        );
        assert!(check_install(&["a".into()], " ").is_err());
        assert_eq!(
            check_install(&["a".into(), "b".into()], "~/bin").unwrap(),
            "socklab hosts install would copy this binary to ~/bin/socklab on a, b"
        );
        assert!(rep_params("{\"a\": \"1\"}").is_ok());
        assert!(rep_params("[")
            .unwrap_err()
            .to_string()
            .starts_with("`params`: not a parameter object"));
    }
}
