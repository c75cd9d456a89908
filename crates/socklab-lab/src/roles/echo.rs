//! The `echo` role: the pingpong server's main loop.

use std::net::SocketAddr;

use socklab_net::childline::ChildLine;
use socklab_net::echo::{EchoConfig, EchoEvent, EchoServer};
use socklab_net::sockopt::OptSet;
use socklab_sys::process::interrupted;

use super::checks::{idle_timeout, parse_bind};
use super::{out, print_server_cpu, server_started, RoleError, Say};

/// The echo server's configuration from its command line: `bind` an IP address, `opts` the
/// server-side socket options (TCP-only ones refused with `udp`), `idle_timeout` positive.
/// Errors name the key and the fix.
pub fn config(
    bind: &str,
    port: u16,
    udp: bool,
    opts: &str,
    idle: &str,
) -> Result<EchoConfig, RoleError> {
    let ip = parse_bind(bind)?;
    let bad = |e: &dyn std::fmt::Display| RoleError::Usage(format!("`opts` {e}"));
    let opts: OptSet = opts.parse().map_err(|e| bad(&e))?;
    opts.validate(udp).map_err(|e| bad(&e))?;
    Ok(EchoConfig {
        bind: SocketAddr::new(ip, port),
        udp,
        opts,
        idle_timeout: idle_timeout(idle)?,
        max_message: 64 * 1024,
    })
}

/// What the echo server would do, for a dry run.
pub fn dry_text(cfg: &EchoConfig) -> String {
    format!(
        "socklab echo would listen on {} ({})",
        cfg.bind,
        if cfg.udp { "UDP" } else { "TCP" }
    )
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_config_from_its_flags() {
        let cfg = config("127.0.0.1", 7000, true, "baseline", "30s").unwrap();
        assert!(cfg.udp);
        assert_eq!(
            dry_text(&cfg),
            "socklab echo would listen on 127.0.0.1:7000 (UDP)"
        );
        let e = config("::", 0, true, "nodelay", "30s")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("`opts` option nodelay applies to TCP only"),
            "{e}"
        );
        let e = config("::", 0, false, "nonsense", "30s")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("`opts` "), "{e}");
    }
}
