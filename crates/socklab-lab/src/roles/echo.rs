//! The `echo` role: the pingpong server's main loop.

use socklab_net::childline::ChildLine;
use socklab_net::echo::{EchoConfig, EchoEvent, EchoServer};
use socklab_sys::process::interrupted;

use super::{out, print_server_cpu, server_started, RoleError, Say};

/// Listens as `cfg` says and echoes until SIGINT/SIGTERM; announcing, it prints the
/// server-side options as the kernel reported them once (`EFFECTIVE`); then (unless quiet)
/// the CPU time and its counts.
pub fn run(cfg: EchoConfig, say: Say) -> Result<(), RoleError> {
    let udp = cfg.udp;
    let server = EchoServer::bind(cfg).map_err(|e| RoleError::Run(e.to_string()))?;
    let addr = server.local_addr()?;
    server_started(addr, say.announce)?;
    if !say.quiet {
        eprintln!(
            "socklab echo listening on {addr} ({}; Ctrl-C stops)",
            if udp { "UDP" } else { "TCP" }
        );
    }
    let Say { quiet, announce } = say;
    let mut told = false;
    let stats = server
        .serve(&interrupted, &mut |ev| {
            if !quiet {
                eprintln!("{}", ev.line());
            }
            // For the runner: the server-side options as the kernel reported them.
            if let EchoEvent::Closed { effective, .. } = ev {
                if announce && !told && !effective.is_empty() {
                    told = true;
                    let line = ChildLine::Effective(effective.clone());
                    let _ = out(&format!("{line}\n"));
                }
            }
        })
        .map_err(|e| RoleError::Run(e.to_string()))?;
    if !quiet {
        print_server_cpu();
        eprintln!(
            "connections = {}, messages = {}, bytes = {}",
            stats.connections, stats.messages, stats.bytes
        );
    }
    Ok(())
}
