//! Where the roles of a measuring command run (`--server-host`, `--client-host`,
//! `--generators`) and how SSH reaches the hosts.

use std::path::PathBuf;

use clap::Args;
use socklab_lab::hosts::command::HostFlags;
use socklab_lab::hosts::{HostPlan, SshOptions};

use crate::failure::Failure;

#[derive(Debug, Args, Clone, Default)]
pub struct SshArgs {
    /// An ssh_config(5) file for every ssh socklab runs (ssh -F FILE; default ~/.ssh/config).
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
    /// The flags as the lab takes them.
    fn flags(&self) -> HostFlags {
        HostFlags {
            server_host: self.server_host.clone(),
            server_addr: self.server_addr.clone(),
            client_host: self.client_host.clone(),
            generators: self.generators.clone(),
            ssh: self.ssh.options(),
        }
    }

    /// The checked host plan.
    pub fn plan(&self) -> Result<HostPlan, Failure> {
        Ok(self.flags().plan()?)
    }

    /// Refuses a server host beside a server somebody else started (`--to`).
    pub fn check_to(&self, to: Option<&str>) -> Result<(), Failure> {
        Ok(self.flags().check_to(to)?)
    }
}
