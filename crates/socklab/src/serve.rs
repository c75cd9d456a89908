//! `socklab serve`: one of the server designs of UNP chapter 30 (and the modern ones), speaking
//! the Stevens protocol, echo, discard or HTTP, until SIGINT/SIGTERM; then the classic servers'
//! `user time = U, sys time = S` line and the per-worker counts.

use clap::Args;
use socklab_lab::roles::{self, Say};

use crate::failure::Failure;

/// The help text after the options.
pub const AFTER_HELP: &str = concat!(
    "Examples:\n",
    "  socklab serve --design prefork-flock --workers 8 --port 8888\n",
    "  socklab serve --design thread --handler http --body 1K\n",
    "  socklab serve --design iterative --idle-timeout 100ms --announce\n",
    "  socklab serve --design reuseport --handler http --tls --port 8443\n",
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
    #[arg(long, default_value = roles::serve::DEFAULT_IDLE_TIMEOUT, value_name = "DURATION")]
    pub idle_timeout: String,
    /// Serve TLS 1.3 (epoll designs, reuseport, tokio): a per-run self-signed certificate.
    #[arg(long)]
    pub tls: bool,
    /// A PEM certificate chain to serve instead (with --tls-key; implies --tls).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<String>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<String>,
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

/// Runs `socklab serve`: the role checks the arguments (its errors name keys, printed as flags).
pub fn serve(a: ServeArgs, dry: bool) -> Result<(), Failure> {
    let given = roles::serve::ServeArgs {
        design: a.design,
        workers: a.workers,
        handler: a.handler,
        body: a.body,
        port: a.port,
        bind: a.bind,
        backlog: a.backlog,
        opts: a.opts,
        idle_timeout: a.idle_timeout,
        tls: roles::serve_tls::TlsArgs {
            tls: a.tls,
            cert: a.tls_cert,
            key: a.tls_key,
        },
    };
    let say = Say::new(a.announce, a.quiet);
    crate::netem::dry_run(roles::serve::serve(&given, a.nofile, say, dry)?)
}
