//! The load generator of `socklab load`: a wrk2/ab-class client for the `stevens`, `echo` and
//! `http` protocols of [`crate::server::handler`] (and nginx).
//!
//! - [`LoadConfig`] says what to run: the protocol, how many connections, whether each request
//!   gets its own connection, how the run is bounded (requests, per-connection loops, duration)
//!   and whether it is closed loop (each connection sends its next request when the previous
//!   reply is in) or open loop (`rate`: requests leave on a fixed schedule and latency counts
//!   from the *intended* send time, as wrk2 does, so a stalled server cannot hide its stall —
//!   coordinated omission).
//! - [`run`] splits the connections over `threads` threads; each runs an epoll loop over
//!   non-blocking sockets with preformatted request bytes, a fixed buffer per connection and its
//!   own HDR histograms, merged at the end: no allocation per request.
//! - [`LoadReport`] is what ab and wrk2 print together: counts, failures by kind, rates,
//!   connect / first-byte / response summaries, HDR percentiles, and how late the generator
//!   itself was (so a user sees when the client is the bottleneck).
//!
//! The pure parts live in their own modules: [`http`] (the reply parser), [`schedule`] (the
//! open-loop send times), [`metrics`] (summaries of histograms). See `docs/load.md`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{NetError, ParseNameError};

mod engine;
pub mod http;
mod https;
pub mod merge;
pub mod metrics;
pub mod schedule;
pub mod series;
mod thread_out;

pub use engine::ECHO_MAX;
pub use merge::{merge, LoadHistograms, Part};
pub use metrics::{Percentiles, Timing};
pub use series::{LiveLoad, LoadInterval};

/// The application protocol the generator speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadProtocol {
    /// Request: ASCII decimal byte count and `\n`; reply: exactly that many bytes (UNP's
    /// `client.c`). The client closes first, after reading the whole reply.
    Stevens,
    /// `bytes` bytes out, the same bytes back.
    Echo,
    /// HTTP/1.1 `GET path` with `Host:`; keep-alive (or `Connection: close` with a connection
    /// per request). The reply's length comes from `Content-Length` (chunked replies are
    /// counted as bad replies).
    Http,
    /// `http` over TLS 1.3 (rustls): the handshake is part of the connect phase; trust as
    /// [`LoadConfig::tls_trust`] says.
    Https,
}

impl LoadProtocol {
    /// Every protocol.
    pub const ALL: [LoadProtocol; 4] = [
        LoadProtocol::Stevens,
        LoadProtocol::Echo,
        LoadProtocol::Http,
        LoadProtocol::Https,
    ];

    /// The protocol's name as written.
    pub fn name(self) -> &'static str {
        match self {
            LoadProtocol::Stevens => "stevens",
            LoadProtocol::Echo => "echo",
            LoadProtocol::Http => "http",
            LoadProtocol::Https => "https",
        }
    }
}

impl std::fmt::Display for LoadProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LoadProtocol {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<LoadProtocol, ParseNameError> {
        let t = s.trim().to_ascii_lowercase();
        LoadProtocol::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                ParseNameError::unknown("protocol", s, "use one of stevens, echo, http, https")
            })
    }
}

/// What to run. [`LoadConfig::validate`] checks it; [`run`] calls that first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadConfig {
    /// The server.
    pub to: SocketAddr,
    /// What to speak.
    pub protocol: LoadProtocol,
    /// Concurrent connections (stevens mode: the number of clients).
    pub connections: usize,
    /// A new connection for every request (stevens mode and ab without `-k`); otherwise
    /// connections are kept alive and reused.
    pub new_connection_per_request: bool,
    /// Stevens: reply bytes asked for (1..=16384); echo: bytes sent and read back. Ignored by
    /// http.
    pub bytes: usize,
    /// Requests per connection slot, then that slot stops (stevens' `nloops`); `None`: no limit.
    pub loops: Option<u64>,
    /// Requests in total over all connections; `None`: no limit.
    pub requests: Option<u64>,
    /// Wall-time bound of the run; `None`: no limit (then `loops` or `requests` must be set).
    pub duration: Option<Duration>,
    /// Open loop: total requests per second, spread evenly over the connections; `None`: closed
    /// loop.
    pub rate: Option<f64>,
    /// Worker threads, each with its own epoll loop and share of the connections.
    pub threads: usize,
    /// A request (connect included) not complete after this long fails as `timeout`.
    pub timeout: Duration,
    /// HTTP request path.
    pub path: String,
    /// HTTP `Host:` header; `None`: the target address.
    pub host: Option<String>,
    /// Bind client sockets round-robin to 127.0.0.1 ..= 127.0.0.N (loopback targets only), with
    /// `IP_BIND_ADDRESS_NO_PORT`, so the 4-tuple space grows N-fold; 1 (or 0): let the kernel
    /// choose.
    pub source_addrs: u32,
    /// Per-interval figures every this long (`--interval`); `None`: none.
    #[serde(default)]
    pub interval: Option<Duration>,
    /// https: how the server's certificate is checked: None (or `unverified`) accepts any, as
    /// wrk does; a SHA-256 fingerprint (64 hex digits) pins it; anything else is a PEM file of
    /// CA certificates.
    #[serde(default)]
    pub tls_trust: Option<String>,
    /// https: resume TLS sessions on new connections (rustls' in-memory cache, shared by the
    /// threads), as wrk does; false: a full handshake on every connection.
    #[serde(default)]
    pub tls_resume: bool,
}

impl LoadConfig {
    /// A closed-loop keep-alive run of `connections` connections against `to`, 10 s, one
    /// thread; change fields from there.
    pub fn new(to: SocketAddr, protocol: LoadProtocol) -> LoadConfig {
        LoadConfig {
            to,
            protocol,
            connections: 10,
            new_connection_per_request: protocol == LoadProtocol::Stevens,
            bytes: 100,
            loops: None,
            requests: None,
            duration: Some(Duration::from_secs(10)),
            rate: None,
            threads: 1,
            timeout: Duration::from_secs(5),
            path: "/".into(),
            host: None,
            source_addrs: 1,
            interval: None,
            tls_trust: None,
            tls_resume: false,
        }
    }

    /// Checks ranges and combinations; the error names the value and the fix.
    pub fn validate(&self) -> Result<(), NetError> {
        let bad = |m: String| Err(NetError::Invalid(m));
        if self.connections == 0 {
            return bad("`connections` 0: use at least 1 connection".into());
        }
        if self.threads == 0 {
            return bad("`threads` 0: use at least 1 thread".into());
        }
        if self.loops.is_none() && self.requests.is_none() && self.duration.is_none() {
            return bad(
                "the run has no bound: give `duration`, `requests` or `conn_requests`".into(),
            );
        }
        if self.loops == Some(0) || self.requests == Some(0) {
            return bad("`conn_requests`/`requests` 0: ask for at least 1 request".into());
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return bad("`duration` 0: give the run some time, e.g. `duration` 10s".into());
        }
        if self.timeout.is_zero() {
            return bad(
                "`timeout` 0: use a positive per-request timeout, e.g. `timeout` 5s".into(),
            );
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return bad(format!(
                    "`rate` {r}: use a positive number of requests per second"
                ));
            }
            if r > 1e8 {
                return bad(format!("`rate` {r}: at most 100000000 requests per second"));
            }
        }
        match self.protocol {
            LoadProtocol::Stevens
                if !(1..=crate::server::handler::STEVENS_MAX).contains(&self.bytes) =>
            {
                return bad(format!(
                    "`bytes` {}: a stevens request asks for 1..=16384 bytes (the classic servers' MAXN)",
                    self.bytes
                ));
            }
            LoadProtocol::Echo if !(1..=engine::ECHO_MAX).contains(&self.bytes) => {
                return bad(format!(
                    "`bytes` {}: an echo request is 1..={} bytes",
                    self.bytes,
                    engine::ECHO_MAX
                ));
            }
            LoadProtocol::Http | LoadProtocol::Https => {
                if self.protocol == LoadProtocol::Https {
                    https::check(self)?;
                }
                if !self.path.starts_with('/') || self.path.bytes().any(|b| b <= b' ' || b == 0x7f)
                {
                    return bad(format!(
                        "`path` '{}': give an absolute path without spaces, e.g. /index.html",
                        self.path
                    ));
                }
                if let Some(h) = &self.host {
                    if h.is_empty() || h.bytes().any(|b| b <= b' ' || b == 0x7f) {
                        return bad(format!("`host` '{h}': give a host name without spaces"));
                    }
                }
            }
            _ => {}
        }
        let sampling = crate::series::Sampling {
            interval: self.interval,
            omit: None,
        };
        if let Err(m) = sampling.check(self.duration) {
            return bad(m);
        }
        if self.source_addrs > 1 {
            if !matches!(self.to.ip(), IpAddr::V4(a) if a.is_loopback()) {
                return bad(format!(
                    "`source_addrs` {} needs an IPv4 loopback target (127.0.0.0/8), not {}: drop `source_addrs`",
                    self.source_addrs, self.to
                ));
            }
            if self.source_addrs > 65_536 {
                return bad(format!(
                    "`source_addrs` {}: at most 65536 addresses of 127.0.0.0/8",
                    self.source_addrs
                ));
            }
        }
        Ok(())
    }

    /// The source addresses client sockets bind to (empty: the kernel chooses).
    pub fn source_ips(&self) -> Vec<Ipv4Addr> {
        if self.source_addrs <= 1 {
            return Vec::new();
        }
        (1..=self.source_addrs)
            .map(|i| Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 0)) + i))
            .collect()
    }
}

/// Failed requests by kind. Each failed request counts once, under the first thing that went
/// wrong.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failures {
    /// `connect()` failed (refused, unreachable, ...).
    pub connect: u64,
    /// A read failed, or the server closed before the whole reply was in.
    pub read: u64,
    /// A write failed (reset, broken pipe).
    pub write: u64,
    /// Not complete within `timeout`.
    pub timeout: u64,
    /// The reply broke the protocol: an HTTP status outside 2xx, an unparsable head, no
    /// `Content-Length`, a stevens/echo reply longer than asked.
    pub bad_reply: u64,
}

impl Failures {
    /// All failed requests.
    pub fn total(&self) -> u64 {
        // Saturating: a generator on another host reports these (any number it printed).
        [self.read, self.write, self.timeout, self.bad_reply]
            .into_iter()
            .fold(self.connect, u64::saturating_add)
    }

    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &Failures) {
        self.connect = self.connect.saturating_add(o.connect);
        self.read = self.read.saturating_add(o.read);
        self.write = self.write.saturating_add(o.write);
        self.timeout = self.timeout.saturating_add(o.timeout);
        self.bad_reply = self.bad_reply.saturating_add(o.bad_reply);
    }
}

/// How late the generator itself was, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorStats {
    /// Open loop: actual send time minus intended send time, per request (microseconds). It
    /// includes waiting for a connection still busy with its previous request (the server's
    /// doing); `None` in closed loop.
    pub send_lag: Option<Timing>,
    /// Open loop: how late the generator woke for requests whose connection was idle, waiting
    /// for the send time (microseconds) — the generator's own timer lag; `None` in closed loop.
    pub timer_lag: Option<Timing>,
    /// Time each event-loop iteration spent working between two `epoll_wait` calls
    /// (microseconds): long iterations delay every connection of that thread.
    pub loop_busy: Timing,
    /// Per thread: CPU time (user + system) over the thread's wall time, 0..1. Near 1 the
    /// generator thread is saturated and the figures measure the client, not the server.
    pub thread_utilisation: Vec<f64>,
    /// User CPU seconds of the generator threads together (`RUSAGE_THREAD`).
    pub cpu_user_s: f64,
    /// System CPU seconds of the generator threads together.
    pub cpu_sys_s: f64,
    /// Human-readable warnings: the generator was the bottleneck, or lagged its schedule.
    pub warnings: Vec<String>,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The configuration it ran with.
    pub config: LoadConfig,
    /// Wall time from the first request to the end of the run, seconds.
    pub duration_s: f64,
    /// Requests whose whole reply arrived and was well formed.
    pub completed: u64,
    /// Requests that failed, by kind.
    pub failed: Failures,
    /// Connections established.
    pub connections_opened: u64,
    /// Completed requests per second.
    pub requests_per_s: f64,
    /// Connections established per second.
    pub connections_per_s: f64,
    /// Request bytes written.
    pub bytes_written: u64,
    /// Reply bytes read (heads included for http).
    pub bytes_read: u64,
    /// Reply bytes read per second.
    pub transfer_bytes_per_s: f64,
    /// Connect time of each established connection (microseconds).
    pub connect: Timing,
    /// From the first byte of the request written to the first reply byte read (microseconds).
    pub first_byte: Timing,
    /// Response time of completed requests, uncorrected (microseconds): from the request's
    /// actual start (its connect when it opens a connection, else its first write) to its last
    /// reply byte. With its HDR percentiles.
    pub response: Timing,
    /// Open loop only: response time from the *intended* send time (coordinated-omission
    /// corrected, as wrk2's latency), microseconds.
    pub response_corrected: Option<Timing>,
    /// The generator's own lag and CPU.
    pub generator: GeneratorStats,
    /// Why the run stopped early, if it did (ephemeral ports exhausted, interrupted); the
    /// figures above cover what ran until then.
    pub aborted: Option<String>,
    /// https: what the handshakes negotiated and how the certificate was trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSummary>,
    /// Per-interval figures (`interval`), in time order; not part of the JSON report (the
    /// store keeps them as the sample's intervals).
    #[serde(skip)]
    pub intervals: Vec<LoadInterval>,
}

/// Runs the load described by `cfg` until its bound (or `stop` becomes true) and reports.
///
/// Errors: an invalid configuration, or a failure to set up (threads, epoll). Ephemeral-port
/// exhaustion mid-run is not an error: the run stops and [`LoadReport::aborted`] says why and
/// what to do.
pub fn run(cfg: &LoadConfig, stop: &AtomicBool) -> Result<LoadReport, NetError> {
    run_live(cfg, stop, None)
}

/// [`run`], handing each interval (`cfg.interval`) to `live` as it closes.
pub fn run_live(
    cfg: &LoadConfig,
    stop: &AtomicBool,
    live: Option<LiveLoad>,
) -> Result<LoadReport, NetError> {
    run_live_with_histograms(cfg, stop, live).map(|(r, _)| r)
}

/// [`run`], with the run's HDR histograms (what a generator on another host sends its
/// controller, which merges several generators' histograms exactly: [`merge`]).
pub fn run_with_histograms(
    cfg: &LoadConfig,
    stop: &AtomicBool,
) -> Result<(LoadReport, LoadHistograms), NetError> {
    run_live_with_histograms(cfg, stop, None)
}

/// [`run_live`], with the run's HDR histograms.
pub fn run_live_with_histograms(
    cfg: &LoadConfig,
    stop: &AtomicBool,
    live: Option<LiveLoad>,
) -> Result<(LoadReport, LoadHistograms), NetError> {
    cfg.validate()?;
    if cfg.protocol == LoadProtocol::Https {
        return https::run(cfg, stop);
    }
    engine::run(cfg, stop, live)
}

/// What an https run's handshakes agreed on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsSummary {
    /// The protocol version of the first completed handshake ("1.3").
    pub version: String,
    /// Its cipher suite.
    pub cipher: String,
    /// How the server's certificate was checked (unverified, pinned, CA file).
    pub trust: String,
    /// Session resumption (`tls_resume`): off by default, so every new connection pays a full
    /// handshake (the TLS CRR case measures the handshake's whole cost); on, as wrk does.
    pub resumption: bool,
    /// Connections whose handshake resumed a session.
    #[serde(default)]
    pub resumed: u64,
}
