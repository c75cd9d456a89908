//! `socklab hosts check|install`, the options every command that takes hosts shares
//! (`--ssh-config`, `--remote-socklab`), and the internal roles `hosts rep|generate|probe`
//! (their loops and `--until-eof` are in `socklab_lab::roles::remote`).

use clap::Subcommand;
use socklab_lab::hosts::command as cmd;
use socklab_lab::hosts::install;
use socklab_lab::roles;
use socklab_lab::LabError;

use crate::cli::SshArgs;
use crate::failure::{out, Failure};

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

fn say_error(e: &LabError) {
    eprintln!(
        "socklab: error: {}",
        crate::flags::in_flags(&e.to_string(), &[])
    );
}

/// The end of a command over several hosts: exit 1 naming those that failed.
fn ended(failed: Option<String>) -> Result<(), Failure> {
    failed.map_or(Ok(()), |m| Err(Failure::Run(m)))
}

pub fn hosts(c: HostsCommand, dry: bool) -> Result<(), Failure> {
    match c {
        HostsCommand::Check { hosts, ssh, json } => {
            if dry {
                return crate::dryrun::print_checked(&cmd::check_dry_run_text(&hosts));
            }
            let (text, failed) = cmd::check(&hosts, &ssh.options(), json, say_error);
            out(&text)?;
            ended(failed)
        }
        HostsCommand::Install { hosts, ssh, dir } => {
            let said = cmd::check_install(&hosts, &dir)?;
            if dry {
                return crate::dryrun::print_checked(&said);
            }
            let exe = cmd::this_exe()?;
            ended(cmd::install(
                &hosts,
                &ssh.options(),
                &exe,
                &dir,
                |r| match r {
                    Ok(line) => out(&line),
                    Err(e) => {
                        say_error(&e);
                        Ok(())
                    }
                },
            )?)
        }
        HostsCommand::Rep {
            kind,
            params,
            label,
        } => {
            let p = cmd::rep_params(&params)?;
            Ok(roles::remote::rep(cmd::this_exe()?, &kind, &p, &label)?)
        }
        HostsCommand::Generate { config, start_at } => {
            let cfg = cmd::generate_config(&config)?;
            Ok(roles::remote::generate(&cfg, start_at)?)
        }
        HostsCommand::Probe { bind } => Ok(cmd::probe(&bind)?),
    }
}
