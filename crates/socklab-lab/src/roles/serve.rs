//! The `serve` role: one server design's main loop, until SIGINT/SIGTERM; then the classic
//! servers' `user time = U, sys time = S` line and the per-worker counts (and, announcing, a
//! `STATS {json}` line).

use socklab_net::childline::ChildLine;
use socklab_net::server::{self, ServeConfig};
use socklab_sys::process::interrupt_flag;

use super::{out, server_started, RoleError, Say};

/// Serves as `cfg` says until SIGINT/SIGTERM, then prints its report on stdout.
pub fn run(cfg: &ServeConfig, say: Say) -> Result<(), RoleError> {
    let mut started: Result<(), RoleError> = Ok(());
    let report = server::serve(cfg, interrupt_flag(), &mut |addr| {
        started = server_started(addr, say.announce);
        if !say.quiet {
            eprintln!(
                "socklab serve: {} listening on {addr} ({}, {} workers; Ctrl-C stops)",
                cfg.design,
                cfg.handler,
                if cfg.design.has_workers() {
                    cfg.workers
                } else {
                    1
                }
            );
        }
    })?;
    started?;
    out(&report.human())?;
    if say.announce {
        out(&format!("{}\n", ChildLine::Stats(Box::new(report))))?;
    }
    Ok(())
}
