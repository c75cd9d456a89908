//! The `serve` role: one server design's main loop, until SIGINT/SIGTERM; then the classic
//! servers' `user time = U, sys time = S` line and the per-worker counts (and, announcing, a
//! `STATS {json}` line).

use socklab_net::childline::ChildLine;
use socklab_net::server::{self, ServeConfig};
use socklab_sys::process::interrupt_flag;

use super::{out, server_started, RoleError, Say};

/// The fewest descriptors a server can run with.
pub const MIN_NOFILE: u64 = 16;

/// Why the descriptor limit was not set: each names the value (the caller names its key).
#[derive(Debug, thiserror::Error)]
pub enum NofileError {
    /// Below [`MIN_NOFILE`].
    #[error("{0} is too low to run a server: use at least {MIN_NOFILE}")]
    TooLow(u64),
    /// Above the hard limit.
    #[error("{n} is above the hard limit {hard}: use at most {hard} (or raise it as root)")]
    AboveHard {
        /// The limit asked for.
        n: u64,
        /// The hard limit.
        hard: u64,
    },
    /// The limits could not be read.
    #[error("{0}")]
    Read(std::io::Error),
    /// `setrlimit` refused it.
    #[error("{n}: setrlimit failed: {source}")]
    Set {
        /// The limit asked for.
        n: u64,
        /// Why.
        source: std::io::Error,
    },
}

/// Sets the soft RLIMIT_NOFILE (open descriptors) to `n` before serving, like `ulimit -n N`,
/// checked against the hard limit.
pub fn set_nofile(n: u64) -> Result<(), NofileError> {
    if n < MIN_NOFILE {
        return Err(NofileError::TooLow(n));
    }
    let (_, hard) = socklab_sys::procs::nofile_limit().map_err(NofileError::Read)?;
    if n > hard {
        return Err(NofileError::AboveHard { n, hard });
    }
    socklab_sys::procs::set_nofile_limit(n).map_err(|source| NofileError::Set { n, source })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_limit_too_low_or_above_the_hard_one_is_refused_naming_it() {
        let e = set_nofile(3).unwrap_err();
        assert_eq!(
            e.to_string(),
            "3 is too low to run a server: use at least 16"
        );
        let (_, hard) = socklab_sys::procs::nofile_limit().unwrap();
        if hard < u64::MAX {
            let e = set_nofile(hard + 1).unwrap_err();
            assert!(
                matches!(e, NofileError::AboveHard { n, .. } if n == hard + 1),
                "{e}"
            );
        }
    }
}
