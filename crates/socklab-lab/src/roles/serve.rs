//! The `serve` role: one server design's main loop, until SIGINT/SIGTERM; then the classic
//! servers' `user time = U, sys time = S` line and the per-worker counts (and, announcing, a
//! `STATS {json}` line).

use std::net::SocketAddr;
use std::time::Duration;

use socklab_net::childline::ChildLine;
use socklab_net::server::{self, Design, Handler, ServeConfig};
use socklab_net::sockopt::OptSet;
use socklab_units::{parse_duration, parse_size};

use socklab_sys::process::interrupt_flag;

use super::{out, parse_bind, server_started, RoleError, Say};

/// The idle timeout when `idle_timeout` is not given.
pub const DEFAULT_IDLE_TIMEOUT: &str = "10s";

/// `serve`'s arguments as given (text, unchecked); [`ServeArgs::config`] checks them.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// The server design's name.
    pub design: String,
    /// Workers of the pool designs (default: the number of cores).
    pub workers: Option<usize>,
    /// The protocol's name.
    pub handler: String,
    /// HTTP body size (a size as text).
    pub body: String,
    /// The port.
    pub port: u16,
    /// The address (text).
    pub bind: String,
    /// listen() backlog.
    pub backlog: i32,
    /// Server-side socket options (an option set as text).
    pub opts: String,
    /// The idle timeout (a duration, or `off`).
    pub idle_timeout: String,
    /// Serve TLS (`tls`), with a per-run certificate unless `tls_cert`/`tls_key` name PEM files.
    pub tls: super::serve_tls::TlsArgs,
}

impl ServeArgs {
    /// Checks the arguments (errors name the key) and builds the configuration.
    pub fn config(&self) -> Result<ServeConfig, RoleError> {
        self.config_and_fingerprint().map(|(c, _)| c)
    }

    /// [`ServeArgs::config`], with the TLS certificate's SHA-256 fingerprint when serving TLS.
    pub fn config_and_fingerprint(
        &self,
    ) -> Result<(ServeConfig, Option<socklab_tls::Fingerprint>), RoleError> {
        let usage = RoleError::Usage;
        let design: Design = self.design.parse().map_err(|e| usage(format!("{e}")))?;
        let handler: Handler = self.handler.parse().map_err(|e| usage(format!("{e}")))?;
        let body = parse_size(&self.body).map_err(|e| usage(format!("`body` {e}")))? as usize;
        let opts: OptSet = self
            .opts
            .parse()
            .map_err(|e| usage(format!("`opts` {e}")))?;
        opts.validate(false)
            .map_err(|e| usage(format!("`opts` {e}")))?;
        if self.backlog < 1 {
            return Err(usage(format!(
                "`backlog` {} is too small: use a positive queue length, e.g. 1024",
                self.backlog
            )));
        }
        let workers = self.workers.unwrap_or_else(socklab_sys::host::cores);
        // Checked here too (the server checks them when it starts), so a dry run names them.
        if workers == 0 || workers > server::MAX_WORKERS {
            return Err(usage(format!(
                "`workers` {workers} is out of range: use 1 to {}",
                server::MAX_WORKERS
            )));
        }
        if body > server::handler::HTTP_MAX_BODY {
            return Err(usage(format!(
                "`body` {} is too large: use at most {} bytes",
                self.body,
                server::handler::HTTP_MAX_BODY
            )));
        }
        let idle_timeout = parse_idle(&self.idle_timeout)?;
        let (tls, fingerprint) = match self.tls.config(design, idle_timeout)? {
            Some((c, f)) => (Some(c), Some(f)),
            None => (None, None),
        };
        Ok((
            ServeConfig {
                bind: SocketAddr::new(parse_bind(&self.bind)?, self.port),
                design,
                workers,
                handler,
                body,
                backlog: self.backlog,
                opts,
                idle_timeout,
                tls,
            },
            fingerprint,
        ))
    }
}

/// What a dry run of `serve` says.
pub fn dry_run_text(cfg: &ServeConfig) -> String {
    format!(
        "socklab serve would run {} ({}{}) on {}",
        cfg.design,
        cfg.handler,
        if cfg.tls.is_some() { " over TLS" } else { "" },
        cfg.bind
    )
}

/// `serve`: the arguments checked, the descriptor limit set (`nofile`), then [`run`]; on a
/// dry run, the line to print.
pub fn serve(
    args: &ServeArgs,
    nofile: Option<u64>,
    say: Say,
    dry: bool,
) -> Result<Option<String>, RoleError> {
    let (mut cfg, fingerprint) = args.config_and_fingerprint()?;
    if let Some(t) = cfg.tls.as_mut() {
        t.log_refusals = !say.quiet;
    }
    if dry {
        return Ok(Some(dry_run_text(&cfg)));
    }
    if let Some(n) = nofile {
        set_nofile_checked(n)?;
    }
    if let (Some(fp), false) = (fingerprint, say.quiet) {
        eprintln!("socklab serve: TLS certificate SHA-256 fingerprint {fp}");
    }
    run(&cfg, say)?;
    Ok(None)
}

/// `idle_timeout`: a positive duration, or `off`/`none`.
pub fn parse_idle(text: &str) -> Result<Option<Duration>, RoleError> {
    if matches!(text.trim().to_ascii_lowercase().as_str(), "off" | "none") {
        return Ok(None);
    }
    match parse_duration(text) {
        Ok(d) if d.is_zero() => Err(RoleError::Usage(format!(
            "`idle_timeout` '{text}': give the clients some time, e.g. `idle_timeout` 10s (or 'off')"
        ))),
        Ok(d) => Ok(Some(d)),
        Err(e) => Err(RoleError::Usage(format!("`idle_timeout` {e}"))),
    }
}

/// `nofile`: [`set_nofile`], its error naming the key (a refused `setrlimit` is a failed run).
pub fn set_nofile_checked(n: u64) -> Result<(), RoleError> {
    set_nofile(n).map_err(|e| match e {
        NofileError::Read(e) => RoleError::from(e),
        e @ NofileError::Set { .. } => RoleError::Run(format!("`nofile` {e}")),
        e => RoleError::Usage(format!("`nofile` {e}")),
    })
}

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

    #[test]
    fn idle_timeout_parses_durations_and_off() {
        assert_eq!(parse_idle("10s").unwrap(), Some(Duration::from_secs(10)));
        assert_eq!(parse_idle("off").unwrap(), None);
        assert!(parse_idle("0s").unwrap_err().to_string().contains("'0s'"));
        assert!(parse_idle("soon").is_err());
    }

    fn args() -> ServeArgs {
        ServeArgs {
            design: "iterative".into(),
            workers: Some(2),
            handler: "stevens".into(),
            body: "100".into(),
            port: 0,
            bind: "::".into(),
            backlog: 1024,
            opts: "baseline".into(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT.into(),
            tls: Default::default(),
        }
    }

    #[test]
    fn bad_serve_arguments_name_their_key() {
        assert!(args().config().is_ok());
        let e = |a: ServeArgs| a.config().unwrap_err().to_string();
        assert!(e(ServeArgs {
            backlog: 0,
            ..args()
        })
        .starts_with("`backlog` 0 is too small"));
        assert!(e(ServeArgs {
            workers: Some(0),
            ..args()
        })
        .starts_with("`workers` 0 is out"));
        assert!(e(ServeArgs {
            bind: "x".into(),
            ..args()
        })
        .starts_with("`bind` 'x' is not"));
        assert!(e(ServeArgs {
            body: "1G".into(),
            ..args()
        })
        .starts_with("`body` 1G is too large"));
        assert!(e(ServeArgs {
            opts: "bogus".into(),
            ..args()
        })
        .starts_with("`opts` "));
    }

    #[test]
    fn a_dry_run_checks_and_says_what_it_would_run() {
        let said = serve(&args(), Some(3), Say::default(), true).unwrap();
        assert_eq!(
            said.as_deref(),
            Some("socklab serve would run iterative (stevens) on [::]:0")
        );
    }
}
