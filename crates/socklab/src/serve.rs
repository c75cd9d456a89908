//! `socklab serve`: one of the server designs of UNP chapter 30 (and the modern ones), speaking
//! the Stevens protocol, echo, discard or HTTP, until SIGINT/SIGTERM; then the classic servers'
//! `user time = U, sys time = S` line and the per-worker counts.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use socklab_lab::roles::{self, Say};
use socklab_net::server::{self, Design, Handler, ServeConfig};
use socklab_net::sockopt::OptSet;
use socklab_net::{ParseNameError, SockOptError};
use socklab_units::{parse_duration, parse_size};

use crate::commands::{parse_bind, usage, Failure};

/// The idle timeout when `--idle-timeout` is not given.
pub const DEFAULT_IDLE_TIMEOUT: &str = "10s";

/// The help text after the options.
pub const AFTER_HELP: &str = concat!(
    "Examples:\n",
    "  socklab serve --design prefork-flock --workers 8 --port 8888\n",
    "  socklab serve --design thread --handler http --body 1K\n",
    "  socklab serve --design iterative --idle-timeout 100ms --announce\n",
    "\n",
    "Designs (UNP ch. 30): iterative, fork, prefork-nolock, prefork-flock, prefork-mutex, prefork-fdpass, thread, prethread-mutex, prethread-handoff, prethread-accept; modern: epoll, epoll-shared, epoll-exclusive, reuseport, uring, tokio.\nHandlers: stevens (a decimal count and a newline in, that many bytes out, several per connection), echo, discard, http (GET of a --body byte body, keep-alive).\n\nA connection that completes no request for --idle-timeout (default 10s; 'off' disables) is closed: the defence against idle and slow clients, the only one the iterative design has, and what frees a pool worker held by one. On SIGINT/SIGTERM it prints `user time = U, sys time = S` (itself plus reaped children), the connections per worker and Jain's fairness index, and with --announce a `STATS {json}` line.\n\nExit codes: 0 stopped by a signal; 1 the server failed; 2 bad parameter or a design not built in this binary."
);

/// `socklab serve` arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The server design (see below).
    #[arg(long, default_value = "prethread-accept", value_name = "NAME")]
    pub design: String,
    /// Worker processes or threads of the pool designs (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// The protocol: stevens, echo, discard or http.
    #[arg(long, default_value = "stevens")]
    pub handler: String,
    /// HTTP body size in bytes (K, M suffixes allowed).
    #[arg(long, default_value = "100", value_name = "SIZE")]
    pub body: String,
    /// Port to listen on (0: any free port).
    #[arg(long, short, default_value_t = 8888)]
    pub port: u16,
    /// Address to listen on (default: all, IPv4 and IPv6).
    #[arg(long, default_value = "::")]
    pub bind: String,
    /// listen() backlog.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub backlog: i32,
    /// Server-side socket options, e.g. nodelay+quickack.
    #[arg(long, default_value = "baseline", value_name = "SET")]
    pub opts: String,
    /// Close a connection that completes no request for this long ('off': never).
    #[arg(long, default_value = DEFAULT_IDLE_TIMEOUT, value_name = "DURATION")]
    pub idle_timeout: String,
    /// Set the soft RLIMIT_NOFILE (open descriptors) before serving, like `ulimit -n N`.
    #[arg(long, value_name = "N")]
    pub nofile: Option<u64>,
    /// Print `LISTENING <addr>` on stdout once listening, and `STATS {json}` at exit.
    #[arg(long)]
    pub announce: bool,
    /// Say nothing on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--idle-timeout`: a positive duration, or `off`/`none`.
fn parse_idle(text: &str) -> Result<Option<Duration>, Failure> {
    if matches!(text.trim().to_ascii_lowercase().as_str(), "off" | "none") {
        return Ok(None);
    }
    match parse_duration(text) {
        Ok(d) if d.is_zero() => Err(usage(format!(
            "--idle-timeout '{text}': give the clients some time, e.g. --idle-timeout 10s (or 'off')"
        ))),
        Ok(d) => Ok(Some(d)),
        Err(e) => Err(usage(format!("--idle-timeout {e}"))),
    }
}

/// `--nofile N`: the soft limit, checked against the hard one (the role's error, with its
/// flag).
fn set_nofile(n: u64) -> Result<(), Failure> {
    use roles::serve::NofileError;
    roles::serve::set_nofile(n).map_err(|e| match e {
        NofileError::Read(e) => Failure::from(e),
        e @ NofileError::Set { .. } => Failure::Run(format!("--nofile {e}")),
        e => usage(format!("--nofile {e}")),
    })
}

/// Checks the arguments and builds the configuration.
fn config(a: &ServeArgs) -> Result<ServeConfig, Failure> {
    let design: Design = a
        .design
        .parse()
        .map_err(|e: ParseNameError| usage(e.to_string()))?;
    let handler: Handler = a
        .handler
        .parse()
        .map_err(|e: ParseNameError| usage(e.to_string()))?;
    let body = parse_size(&a.body).map_err(|e| usage(format!("--body {e}")))? as usize;
    let opts: OptSet = a
        .opts
        .parse()
        .map_err(|e: SockOptError| usage(format!("--opts {e}")))?;
    opts.validate(false)
        .map_err(|e| usage(format!("--opts {e}")))?;
    if a.backlog < 1 {
        return Err(usage(format!(
            "--backlog {} is too small: use a positive queue length, e.g. 1024",
            a.backlog
        )));
    }
    let workers = a.workers.unwrap_or_else(socklab_sys::host::cores);
    // Checked here too (the server checks them when it starts), so --dry-run names them.
    if workers == 0 || workers > server::MAX_WORKERS {
        return Err(usage(format!(
            "--workers {workers} is out of range: use 1 to {}",
            server::MAX_WORKERS
        )));
    }
    if body > server::handler::HTTP_MAX_BODY {
        return Err(usage(format!(
            "--body {} is too large: use at most {} bytes",
            a.body,
            server::handler::HTTP_MAX_BODY
        )));
    }
    Ok(ServeConfig {
        bind: SocketAddr::new(parse_bind(&a.bind)?, a.port),
        design,
        workers,
        handler,
        body,
        backlog: a.backlog,
        opts,
        idle_timeout: parse_idle(&a.idle_timeout)?,
    })
}

/// Runs `socklab serve`.
pub fn serve(a: ServeArgs, dry: bool) -> Result<(), Failure> {
    let cfg = config(&a)?;
    if dry {
        return crate::dryrun::print_checked(&format!(
            "socklab serve would run {} ({}) on {}",
            cfg.design, cfg.handler, cfg.bind
        ));
    }
    if let Some(n) = a.nofile {
        set_nofile(n)?;
    }
    let say = Say {
        announce: a.announce,
        quiet: a.quiet,
    };
    Ok(roles::serve::run(&cfg, say)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_timeout_parses_durations_and_off() {
        assert_eq!(parse_idle("10s").unwrap(), Some(Duration::from_secs(10)));
        assert_eq!(parse_idle("off").unwrap(), None);
        assert!(parse_idle("0s").unwrap_err().message().contains("'0s'"));
        assert!(parse_idle("soon").is_err());
    }
}
