//! What a measuring command checks before it stores anything: the servers its plan names
//! (`to`) are reached once, so that a dead address is one line and an empty store rather than
//! an experiment of failed repetitions (or a load that hammers a closed port for its whole
//! duration).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::hosts::HostPlan;
use crate::plan::Plan;
use crate::workload::{Target, Workload};
use crate::LabError;

/// How long the probe waits for a handshake: far beyond any reachable server's, short enough
/// that a host that drops SYNs is told at once rather than after the plan's first timeouts.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// The TCP servers `plan` sends to that somebody else started (`to` = HOST:PORT), each once,
/// with what to start there; empty when its clients do not run here (a client host or load
/// generators: they reach the server from there) or every server is socklab's own.
pub fn tcp_targets(plan: &Plan, hosts: &HostPlan) -> Vec<(SocketAddr, &'static str)> {
    if hosts.remote_client().is_some() || !hosts.generators.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(SocketAddr, &'static str)> = Vec::new();
    for cell in &plan.cells {
        let found = match &cell.workload {
            // iperf3 3.12's `-s` logs the probe as a client that sent no parameters and
            // serves the next test (`-s -1` exits on it: see docs/interop.md).
            Workload::Bulk(b) if b.iperf3 => {
                addr(&b.to).map(|a| (a, "start `iperf3 -s` there (or `socklab sink`)"))
            }
            Workload::Udp(u) => u.iperf3.map(|a| (a, "start `iperf3 -s` there")),
            Workload::Bulk(b) => addr(&b.to).map(|a| {
                (
                    a,
                    "start `socklab sink` there, or omit `to` and socklab starts one",
                )
            }),
            Workload::PingPong(p) if !p.cfg.udp && p.sockperf => addr(&p.to).map(|a| {
                (
                    a,
                    "start `sockperf sr` there, in TCP mode (`to` is sockperf://)",
                )
            }),
            Workload::PingPong(p) if !p.cfg.udp => addr(&p.to).map(|a| {
                (
                    a,
                    "start `socklab echo` there, or omit `to` and socklab starts one",
                )
            }),
            Workload::Load(l) => addr(&l.to).map(|a| (a, "start the server there first")),
            _ => None,
        };
        if let Some(t) = found.filter(|t| !out.iter().any(|o| o.0 == t.0)) {
            out.push(t);
        }
    }
    out
}

fn addr(t: &Target) -> Option<SocketAddr> {
    match t {
        Target::Addr(a) => Some(*a),
        Target::SelfSink => None,
    }
}

/// Connects once to each server of [`tcp_targets`] and closes again; the first that is not
/// there (refused, unreachable, no answer) is the error, nothing stored yet. Any other failure
/// is this machine's (e.g. no local port left) and the run goes on to meet it and say why.
pub fn reach_targets(plan: &Plan, hosts: &HostPlan) -> Result<(), LabError> {
    use std::io::ErrorKind as K;
    for (addr, hint) in tcp_targets(plan, hosts) {
        match TcpStream::connect_timeout(&addr, REACH_TIMEOUT) {
            Err(source)
                if matches!(
                    source.kind(),
                    K::ConnectionRefused | K::TimedOut | K::HostUnreachable | K::NetworkUnreachable
                ) =>
            {
                return Err(LabError::Unreachable { addr, source, hint })
            }
            _ => {}
        }
    }
    Ok(())
}
