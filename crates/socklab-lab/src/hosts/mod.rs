//! Beyond one machine: hosts reached over OpenSSH, and the roles the controller starts there.
//!
//! - [`transport`]: the [`Transport`] trait, [`Local`] (this machine) and the quoting of
//!   remote command lines;
//! - [`ssh`]: the SSH transport (the system's `ssh`, one multiplexed master per host);
//! - [`probe`]: `hosts check` — version, facts, clock offset, path RTT and MTU;
//! - [`install`]: `hosts install` — this binary copied to a host of the same architecture;
//! - [`trust`]: the settings of an experiment file that would make ssh run programs, used only
//!   when the command line trusts them, and what a dry run says ssh would run.
//!
//! [`HostPlan`] says which host runs which role of an experiment; [`Hosts`] holds the
//! connections of a running plan (made on first use, each host checked once, a lost host
//! connected again) and gives back their facts for the store.

pub mod client;
pub mod command;
pub mod generators;
pub mod install;
pub mod probe;
pub mod ssh;
pub mod transport;
pub mod trust;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use probe::{HostReport, VERSION};
pub use ssh::{Ssh, SshOptions};
pub use transport::{Local, Stop, Transport};

use crate::LabError;

/// The name of this machine where a host is expected.
pub const LOCAL: &str = "local";

/// Which host runs which role of an experiment (`--server-host`, `--client-host`, `[hosts]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPlan {
    /// The host of the server role (`None` or `local`: this machine).
    pub server: Option<String>,
    /// The address the clients reach the server at, when the SSH name resolves to another
    /// interface (`--server-addr`).
    pub server_addr: Option<IpAddr>,
    /// The host of the client role (bulk, pingpong, transfer; `None` or `local`: here).
    pub client: Option<String>,
    /// The hosts of the load generators (`--generators`; `local` is this machine); empty: the
    /// one generator runs here, in the controller.
    pub generators: Vec<String>,
    /// How to reach the hosts.
    pub ssh: SshOptions,
    /// Why no host may be reached: an experiment file's ssh settings the command line did not
    /// trust ([`trust::refusal`]); every connection refuses with it.
    pub untrusted: Option<String>,
}

impl HostPlan {
    /// Whether the server runs on another host.
    pub fn remote_server(&self) -> Option<&str> {
        self.server.as_deref().filter(|h| *h != LOCAL)
    }

    /// Whether the client runs on another host.
    pub fn remote_client(&self) -> Option<&str> {
        self.client.as_deref().filter(|h| *h != LOCAL)
    }

    /// Whether every role runs here.
    pub fn is_local(&self) -> bool {
        self.remote_server().is_none()
            && self.remote_client().is_none()
            && self.generators.is_empty()
    }

    /// `self`, with every value `over` sets taken from it (the command line over the file).
    pub fn overridden_by(&self, over: &HostPlan) -> HostPlan {
        HostPlan {
            server: over.server.clone().or_else(|| self.server.clone()),
            server_addr: over.server_addr.or(self.server_addr),
            client: over.client.clone().or_else(|| self.client.clone()),
            generators: if over.generators.is_empty() {
                self.generators.clone()
            } else {
                over.generators.clone()
            },
            ssh: SshOptions {
                config: over.ssh.config.clone().or_else(|| self.ssh.config.clone()),
                remote_socklab: over
                    .ssh
                    .remote_socklab
                    .clone()
                    .or_else(|| self.ssh.remote_socklab.clone()),
                no_multiplex: over.ssh.no_multiplex || self.ssh.no_multiplex,
            },
            untrusted: over.untrusted.clone().or_else(|| self.untrusted.clone()),
        }
    }

    /// Checks the plan's values (host names, an address without a host).
    pub fn check(&self) -> Result<(), LabError> {
        if self.remote_client().is_some() && !self.generators.is_empty() {
            return Err(LabError::Plan(
                "give a client host or generators, not both: the load workload's clients are its generators (`generators`)".into(),
            ));
        }
        if self.server_addr.is_some() && self.remote_server().is_none() {
            return Err(LabError::Plan(
                "`server_addr` applies to a server on another host: give `server_host` too".into(),
            ));
        }
        let mut seen = Vec::new();
        for g in &self.generators {
            if g.trim().is_empty() {
                return Err(LabError::Plan(
                    "`generators` has an empty name: give hosts separated by commas, e.g. lab1,lab3,local".into(),
                ));
            }
            if seen.contains(&g) {
                return Err(LabError::Plan(format!(
                    "`generators` names {g} twice: one generator per host (it runs as many connections and threads as its share needs)"
                )));
            }
            seen.push(g);
        }
        // Before anything is stored: a name ssh would misread fails here, not at the first
        // repetition (which left a `failed` experiment behind).
        let named = [
            ("server_host", self.remote_server()),
            ("client_host", self.remote_client()),
        ];
        let generators = self
            .generators
            .iter()
            .map(|g| ("generators", Some(g.as_str())));
        for (key, name) in named.into_iter().chain(generators) {
            match name.filter(|n| *n != LOCAL).map(ssh::check_name) {
                Some(Err(e)) => return Err(LabError::Plan(format!("`{key}` {e}"))),
                _ => continue,
            }
        }
        Ok(())
    }
}

/// A remote server's host: its transport and the address its roles bind and clients reach.
pub type RemoteServer = (Arc<dyn Transport>, IpAddr);

/// A generator's host and its clock offset (host minus controller, nanoseconds).
pub type Generator = (Arc<dyn Transport>, i64);

/// One connected host and what its check found.
#[derive(Debug)]
struct Connected {
    role: &'static str,
    transport: Arc<dyn Transport>,
    report: HostReport,
}

/// The hosts of a running plan.
#[derive(Debug)]
pub struct Hosts {
    plan: HostPlan,
    exe: PathBuf,
    connected: Vec<Connected>,
}

impl Hosts {
    /// The hosts of `plan`; `exe` is this socklab binary (the local host's role).
    pub fn new(plan: HostPlan, exe: PathBuf) -> Hosts {
        Hosts {
            plan,
            exe,
            connected: Vec::new(),
        }
    }

    /// The plan.
    pub fn plan(&self) -> &HostPlan {
        &self.plan
    }

    /// The transport of `role`'s host `name`, connected and checked on first use (checked
    /// again after it was lost). The local host is checked too, for its facts.
    fn host(
        &mut self,
        role: &'static str,
        name: &str,
        addr: Option<IpAddr>,
    ) -> Result<(Arc<dyn Transport>, &HostReport), LabError> {
        let i = match self
            .connected
            .iter()
            .position(|c| c.role == role && c.report.name == name)
        {
            Some(i) => {
                // A lost master connection is made again here (or the error says why not).
                if self.connected[i].transport.stop() == Stop::CloseStdin {
                    self.connected[i].transport.shell("true")?;
                }
                i
            }
            None => self.connect(role, name, addr)?,
        };
        let c = &self.connected[i];
        Ok((c.transport.clone(), &c.report))
    }

    fn connect(
        &mut self,
        role: &'static str,
        name: &str,
        addr: Option<IpAddr>,
    ) -> Result<usize, LabError> {
        if let Some(why) = &self.plan.untrusted {
            return Err(LabError::Plan(why.clone()));
        }
        let transport: Arc<dyn Transport> = if name == LOCAL {
            Arc::new(Local::new(self.exe.clone()))
        } else {
            Arc::new(Ssh::connect(name, &self.plan.ssh)?)
        };
        let report = probe::check(transport.as_ref(), addr)?;
        self.connected.push(Connected {
            role,
            transport,
            report,
        });
        Ok(self.connected.len() - 1)
    }

    /// The server's host and the address it binds and the clients reach, when it is another
    /// host; `None` when the server runs here.
    pub fn server(&mut self) -> Result<Option<RemoteServer>, LabError> {
        let Some(name) = self.plan.remote_server().map(String::from) else {
            return Ok(None);
        };
        let addr = self.plan.server_addr;
        let (t, report) = self.host("server", &name, addr)?;
        let ip = report.addr.ok_or_else(|| LabError::Host {
            host: name.clone(),
            reason: "no address to reach it at (SSH did not say which address it reached): give `server_addr`".into(),
        })?;
        // The client's end: this machine, checked once for the report's facts.
        if self.plan.generators.is_empty()
            && self.plan.remote_client().is_none()
            && !self.connected.iter().any(|c| c.role == "client")
        {
            self.host("client", LOCAL, None)?;
        }
        Ok(Some((t, ip)))
    }

    /// The client's host when it is another host (connected and checked on first use).
    pub fn client(&mut self) -> Result<Option<Arc<dyn Transport>>, LabError> {
        let Some(name) = self.plan.remote_client().map(String::from) else {
            return Ok(None);
        };
        Ok(Some(self.host("client", &name, None)?.0))
    }

    /// The generators' hosts with their clock offsets (host minus controller, ns), connected
    /// and checked on first use; empty when the generator runs in the controller.
    pub fn generators(&mut self) -> Result<Vec<Generator>, LabError> {
        // The load workload's client is its generator: a client host alone is one generator.
        let names = match (self.plan.generators.is_empty(), self.plan.remote_client()) {
            (true, Some(c)) => vec![c.to_string()],
            _ => self.plan.generators.clone(),
        };
        let mut out = Vec::with_capacity(names.len());
        for n in &names {
            let (t, r) = self.host("generator", n, None)?;
            out.push((t, r.clock.map_or(0, |c| c.offset_ns)));
        }
        Ok(out)
    }

    /// Which host ran which role (for every sample), `None` when every role ran here.
    pub fn roles(&self) -> Option<serde_json::Value> {
        if self.plan.is_local() {
            return None;
        }
        let server = self.plan.remote_server().unwrap_or(LOCAL);
        let mut v = serde_json::json!({ "server": server });
        if self.plan.generators.is_empty() {
            v["client"] = self.plan.remote_client().unwrap_or(LOCAL).into();
        } else {
            v["generators"] = self.plan.generators.clone().into();
        }
        Some(v)
    }

    /// The facts of every host that took part, `host[ROLE NAME]_…`.
    pub fn facts(&self) -> Vec<(String, String)> {
        self.connected
            .iter()
            .flat_map(|c| c.report.facts(c.role))
            .collect()
    }

    /// Closes every connection (its roles end with it).
    pub fn close(&mut self) {
        self.connected.clear();
    }
}
