//! `socklab hosts check|install`, the options every command that takes hosts shares
//! (`--ssh-config`, `--remote-socklab`), and the internal roles `hosts rep|generate|probe`
//! (their loops and `--until-eof` are in `socklab_lab::roles::remote`).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use socklab_lab::hosts::{
    install, probe, HostPlan, HostReport, Local, Ssh, SshOptions, Transport, LOCAL,
};
use socklab_lab::roles;
use socklab_lab::table::Table;

use crate::commands::{out, usage, Failure};

#[derive(Debug, Subcommand)]
pub enum HostsCommand {
    /// Check hosts: reachable over SSH, the same socklab version, kernel, CPU, congestion
    /// controls, path MTU and RTT, and the clock offset to this machine.
    #[command(after_help = concat!(
        "Examples:\n",
        "  socklab hosts check lab1 lab2\n",
        "  socklab hosts check lab2 --ssh-config ./lab_ssh_config --json\n",
        "\n",
        "Hosts are SSH destinations as ssh(1) takes them (a Host of ~/.ssh/config, host, user@host) or 'local'. socklab runs the system's ssh with BatchMode (keys or an agent, no password prompts), one master connection per host for everything it starts there. The clock offset is an NTP-style four-timestamp exchange over that connection (offset ± half the round trip); RTT and MTU come from TCP connects to the host directly, not through SSH.\n\nExit codes: 0 every host passed; 1 a host failed (one line each); 2 bad argument."
    ))]
    Check {
        /// The hosts.
        #[arg(required = true, value_name = "HOST")]
        hosts: Vec<String>,
        #[command(flatten)]
        ssh: SshArgs,
        /// Print the reports as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy this socklab binary to hosts of the same architecture (to ~/.local/bin there).
    #[command(after_help = concat!(
        "Examples:\n",
        "  socklab hosts install lab2\n",
        "  socklab hosts install lab1 lab2 --dir /opt/socklab/bin\n",
        "\n",
        "The copy goes through the SSH connection under a temporary name and is renamed into place. Roles find it there: socklab runs `socklab` on the remote PATH with ~/.local/bin first (--remote-socklab names another binary).\n\nExit codes: 0 installed everywhere; 1 a host failed; 2 bad argument."
    ))]
    Install {
        /// The hosts.
        #[arg(required = true, value_name = "HOST")]
        hosts: Vec<String>,
        #[command(flatten)]
        ssh: SshArgs,
        /// The directory on the hosts (`~` is the remote home).
        #[arg(long, default_value = install::DEFAULT_DIR, value_name = "DIR")]
        dir: String,
    },
    /// (internal) The client role: one repetition of a workload against a server's address.
    #[command(hide = true)]
    Rep {
        /// The workload.
        #[arg(long)]
        kind: String,
        /// Its parameters (JSON object of key = text).
        #[arg(long)]
        params: String,
        /// The cell's label (for errors).
        #[arg(long, default_value = "")]
        label: String,
    },
    /// (internal) A load generator role: its share of the load, from an agreed start.
    #[command(hide = true)]
    Generate {
        /// Its share of the load (a LoadConfig, JSON).
        #[arg(long)]
        config: String,
        /// When to start, nanoseconds since the epoch by this host's clock.
        #[arg(long, allow_hyphen_values = true)]
        start_at: i128,
    },
    /// (internal) The probe role `hosts check` starts on a host.
    #[command(hide = true)]
    Probe {
        /// The address its port listens on.
        #[arg(long, default_value = "::")]
        bind: String,
    },
}

/// How to reach hosts: on every command that takes hosts.
#[derive(Debug, Args, Clone, Default)]
pub struct SshArgs {
    /// An ssh_config(5) file for every ssh socklab runs (ssh -F FILE); default: ssh's own
    /// (~/.ssh/config).
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// The socklab binary on the remote hosts (default: socklab on the remote PATH, with
    /// ~/.local/bin first).
    #[arg(long, value_name = "PATH")]
    pub remote_socklab: Option<String>,
    /// Connect anew for every role instead of one master connection per host (to measure what
    /// the master saves).
    #[arg(long, hide = true)]
    pub no_multiplex: bool,
}

impl SshArgs {
    pub fn options(&self) -> SshOptions {
        SshOptions {
            config: self.ssh_config.clone(),
            remote_socklab: self.remote_socklab.clone(),
            no_multiplex: self.no_multiplex,
        }
    }
}

fn exe() -> Result<PathBuf, Failure> {
    std::env::current_exe()
        .map_err(|e| Failure::Run(format!("cannot find the socklab binary: {e}")))
}

/// The transport of one host named on the command line.
fn connect(name: &str, ssh: &SshOptions) -> Result<Box<dyn Transport>, socklab_lab::LabError> {
    if name == LOCAL {
        return Ok(Box::new(Local::new(
            std::env::current_exe().unwrap_or_else(|_| PathBuf::from("socklab")),
        )));
    }
    Ok(Box::new(Ssh::connect(name, ssh)?))
}

pub fn hosts(c: HostsCommand, dry: bool) -> Result<(), Failure> {
    match c {
        HostsCommand::Check { hosts, ssh, json } => {
            if dry {
                return crate::dryrun::print_checked(&format!(
                    "socklab hosts check would connect to {}",
                    hosts.join(", ")
                ));
            }
            let opts = ssh.options();
            let mut reports: Vec<HostReport> = Vec::new();
            let mut failed = Vec::new();
            for h in &hosts {
                match connect(h, &opts).and_then(|t| probe::check(t.as_ref(), None)) {
                    Ok(r) => reports.push(r),
                    Err(e) => {
                        eprintln!(
                            "socklab: error: {}",
                            crate::flags::in_flags(&e.to_string(), &[])
                        );
                        failed.push(h.clone());
                    }
                }
            }
            if json {
                out(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&reports).unwrap_or_default()
                ))?;
            } else if !reports.is_empty() {
                out(&check_table(&reports).to_text())?;
            }
            match failed.len() {
                0 => Ok(()),
                n => Err(Failure::Run(format!(
                    "{n} of {} host(s) failed the check: {}",
                    hosts.len(),
                    failed.join(", ")
                ))),
            }
        }
        HostsCommand::Install { hosts, ssh, dir } => {
            if dir.trim().is_empty() {
                return Err(usage("--dir '': name a directory, e.g. ~/.local/bin"));
            }
            if dry {
                return crate::dryrun::print_checked(&format!(
                    "socklab hosts install would copy this binary to {dir}/socklab on {}",
                    hosts.join(", ")
                ));
            }
            let exe = exe()?;
            let opts = ssh.options();
            let mut failed = Vec::new();
            for h in &hosts {
                match connect(h, &opts).and_then(|t| install::install(t.as_ref(), &exe, &dir)) {
                    Ok(said) => out(&format!("{h}: installed {dir}/socklab ({said})\n"))?,
                    Err(e) => {
                        eprintln!(
                            "socklab: error: {}",
                            crate::flags::in_flags(&e.to_string(), &[])
                        );
                        failed.push(h.clone());
                    }
                }
            }
            match failed.len() {
                0 => Ok(()),
                n => Err(Failure::Run(format!(
                    "{n} of {} host(s) not installed: {}",
                    hosts.len(),
                    failed.join(", ")
                ))),
            }
        }
        HostsCommand::Rep {
            kind,
            params,
            label,
        } => {
            let p: socklab_lab::params::Params = serde_json::from_str(&params)
                .map_err(|e| usage(format!("--params: not a parameter object: {e}")))?;
            roles::remote::rep(exe()?, &kind, &p, &label).map_err(Failure::from)
        }
        HostsCommand::Generate { config, start_at } => {
            let cfg: socklab_net::load::LoadConfig = serde_json::from_str(&config)
                .map_err(|e| usage(format!("--config: not a load configuration: {e}")))?;
            Ok(roles::remote::generate(&cfg, start_at)?)
        }
        HostsCommand::Probe { bind } => {
            let ip = crate::commands::parse_bind(&bind)?;
            probe::serve_probe(ip).map_err(|e| Failure::Run(format!("hosts probe: {e}")))
        }
    }
}

fn check_table(reports: &[HostReport]) -> Table {
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

/// Where the roles of a measuring command run: on every command that takes hosts.
#[derive(Debug, Args, Clone, Default)]
pub struct HostArgs {
    /// Run the server role on this host over SSH (`local`: here), fresh where the workload
    /// starts one per repetition; the measurement traffic goes straight to it, not through SSH.
    #[arg(long, value_name = "HOST")]
    pub server_host: Option<String>,
    /// The address clients reach the server host at, when its SSH name resolves to another
    /// interface (the server binds it there).
    #[arg(long, value_name = "IP", requires = "server_host")]
    pub server_addr: Option<String>,
    /// Run the client role on this host over SSH (bulk, pingpong; the one load generator of
    /// load): the controller can be a third machine.
    #[arg(long, value_name = "HOST")]
    pub client_host: Option<String>,
    /// Load generators on these hosts (`local`: here), comma-separated: the connections (and
    /// the open-loop rate) are split over them, they start together, and their HDR histograms
    /// are merged exactly.
    #[arg(long, value_delimiter = ',', value_name = "HOST,…")]
    pub generators: Vec<String>,
    #[command(flatten)]
    pub ssh: SshArgs,
}

impl HostArgs {
    /// The checked host plan.
    pub fn plan(&self) -> Result<HostPlan, Failure> {
        let server_addr = match &self.server_addr {
            Some(a) => Some(a.trim_matches(|c| c == '[' || c == ']').parse().map_err(|_| {
                usage(format!(
                    "--server-addr '{a}' is not an IP address: give the address the clients reach the server host at, e.g. 192.0.2.10"
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
            ssh: self.ssh.options(),
        };
        plan.check()?;
        if let Some(f) = &plan.ssh.config {
            if !f.is_file() {
                return Err(usage(format!(
                    "--ssh-config '{}': no such file; name an ssh_config(5) file, or drop the option to use ~/.ssh/config",
                    f.display()
                )));
            }
        }
        Ok(plan)
    }

    /// Refuses a server host beside a server somebody else started (`--to`).
    pub fn check_to(&self, to: Option<&str>) -> Result<(), Failure> {
        match (&self.server_host, to) {
            (Some(h), Some(t)) if h != LOCAL => Err(usage(format!(
                "--server-host {h} starts the server there, --to {t} names one already running: give one of them"
            ))),
            _ => Ok(()),
        }
    }
}
