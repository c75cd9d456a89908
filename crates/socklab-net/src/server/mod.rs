//! The servers of `socklab serve`: every design of UNP's "Client/Server Design Alternatives"
//! plus the modern ones ([`Design`]), speaking one of the [`Handler`] protocols through the
//! shared sans-IO [`Session`], and accounting for their CPU time and per-worker work
//! ([`ServeReport`]).
//!
//! - [`design`] — the designs as data;
//! - [`handler`] — the protocols (stevens, echo, discard, http) as a state machine;
//! - [`report`] — CPU, per-worker counts, Jain's fairness;
//! - `classic` — the process and thread designs (iterative … prethread-accept);
//! - `event` — epoll, epoll-shared, epoll-exclusive, reuseport;
//! - `uring` — io_uring per core;
//! - `tokio_rt` — the tokio runtime design;
//! - `slab` — the event loops' connection slab and idle sweep.

mod classic;
pub mod design;
mod event;
pub mod handler;
pub mod report;
mod slab;
pub mod tls;
mod tokio_rt;
mod tokio_tls;
mod uring;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};

pub use design::Design;
pub use handler::{Handler, Replies, Session};
pub use report::{ServeReport, WorkerCount};

use crate::sockopt::OptSet;
use crate::NetError;

/// How `socklab serve` runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen (`[::]:port` listens dual-stack).
    pub bind: SocketAddr,
    /// The server design.
    pub design: Design,
    /// Worker processes or threads for the designs with a pool (defaults to the core count).
    pub workers: usize,
    /// The protocol.
    pub handler: Handler,
    /// HTTP body size in bytes.
    pub body: usize,
    /// `listen()` backlog.
    pub backlog: i32,
    /// Server-side socket options (listener and accepted sockets).
    pub opts: OptSet,
    /// Close a connection that completes no request (echo, discard: sends no byte) and takes
    /// no reply byte for this long (None: never). What frees a pool worker held by an idle or
    /// slow client; the iterative design's only defence. `socklab serve` defaults to 10 s.
    pub idle_timeout: Option<std::time::Duration>,
    /// Serve TLS (None: plain TCP). Only [`Design::carries_tls`].
    pub tls: Option<ServeTls>,
}

/// How a server speaks TLS.
#[derive(Debug, Clone)]
pub struct ServeTls {
    /// rustls' configuration (certificate, versions, ALPN).
    pub config: Arc<rustls::ServerConfig>,
    /// Log the first refused connections on stderr (one line each); they are always counted.
    pub log_refusals: bool,
}

/// Everything a design needs to run, checked and built once.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub cfg: &'a ServeConfig,
    pub replies: Arc<Replies>,
    pub stop: &'static AtomicBool,
    /// The TLS side, when serving TLS.
    pub tls: Option<Arc<tls::TlsCtx>>,
}

/// Runs the server until `stop` turns true (SIGINT/SIGTERM set it), then stops every worker,
/// reaps children, and returns the accounting. `on_listening` is called once with the bound
/// address, after `listen()` and before the first `accept()`.
pub fn serve(
    cfg: &ServeConfig,
    stop: &'static AtomicBool,
    on_listening: &mut dyn FnMut(SocketAddr),
) -> Result<ServeReport, NetError> {
    if cfg.workers == 0 || cfg.workers > MAX_WORKERS {
        return Err(NetError::Invalid(format!(
            "`workers` {} is out of range: use 1 to {MAX_WORKERS}",
            cfg.workers
        )));
    }
    if cfg.tls.is_some() && !cfg.design.carries_tls() {
        return Err(NetError::Invalid(design::tls_refusal(cfg.design)));
    }
    let ctx = Ctx {
        cfg,
        replies: Replies::new(cfg.handler, cfg.body)?,
        stop,
        tls: cfg
            .tls
            .clone()
            .map(|t| Arc::new(tls::TlsCtx::new(t.config, t.log_refusals))),
    };
    let mut report = match cfg.design {
        d if d.is_classic() => classic::serve(&ctx, on_listening),
        Design::Uring => uring::serve(&ctx, on_listening),
        Design::Tokio => tokio_rt::serve(&ctx, on_listening),
        _ => event::serve(&ctx, on_listening),
    }?;
    if let Some(t) = &ctx.tls {
        report.tls_refused = Some(t.refused.load(std::sync::atomic::Ordering::Relaxed));
    }
    Ok(report)
}

/// Largest `--workers`.
pub const MAX_WORKERS: usize = 1024;

/// Creates the listening socket of `cfg`: `SO_REUSEADDR` (and `SO_REUSEPORT` with `reuseport`),
/// the server-side options, dual-stack for `[::]` (falling back to IPv4 where the host has no
/// IPv6), `listen(backlog)`. Blocking; a design sets `O_NONBLOCK` itself where it wants it.
pub(crate) fn listener(cfg: &ServeConfig, reuseport: bool) -> Result<Socket, NetError> {
    match open_listener(cfg.bind, cfg, reuseport) {
        Err(NetError::Bind { source, .. })
            if cfg.bind.is_ipv6()
                && cfg.bind.ip().is_unspecified()
                && source.raw_os_error() == Some(socklab_sys::errno::EAFNOSUPPORT) =>
        {
            open_listener(
                SocketAddr::from(([0, 0, 0, 0], cfg.bind.port())),
                cfg,
                reuseport,
            )
        }
        other => other,
    }
}

fn open_listener(addr: SocketAddr, cfg: &ServeConfig, reuseport: bool) -> Result<Socket, NetError> {
    let err = |source: std::io::Error| NetError::bind(addr, source);
    let sock =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    if reuseport {
        sock.set_reuse_port(true).map_err(err)?;
    }
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        sock.set_only_v6(false).map_err(err)?;
    }
    cfg.opts.apply_listener(&sock)?;
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(cfg.backlog).map_err(err)?;
    Ok(sock)
}
