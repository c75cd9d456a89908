//! The `load` workload: one server design under one load (seed 002, Stevens' figure 27.1; and
//! HTTP keep-alive as wrk drives it). Each repetition starts a fresh `socklab serve` child, so
//! its CPU time (from `wait4`) belongs to that repetition alone; socklab's load generator
//! drives it; the server's own accounting (`STATS`: per-worker connections, fairness) comes
//! back typed in its [`ServerExit`].

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use socklab_net::load::{LoadConfig, LoadProtocol, LoadReport};
use socklab_net::server::{Design, Handler};
use socklab_units::{format_duration, format_size, parse_size};

use crate::child::ServerExit;
use crate::model::metric::{m, Better, Metric};
use crate::model::params::{parse_bool, parse_count, parse_usize, Key, Params};
use crate::model::sample::Sample;
use crate::model::stats::{CellStats, ExperimentStats};
use crate::resources::{on_thread_until, Resources, ThreadEnd};
use crate::table::{num, Table};
use crate::workload::key::{bounded, duration_in, parse_target, Target};
use crate::workload::{ReportTable, Spec};
use crate::LabError;

pub mod command;
mod designs;
mod run;
mod spec;
#[cfg(test)]
mod tests;
pub mod text;

pub use designs::{designs_table, DESIGNS_NOTE, DESIGNS_NOTE_NO_BASELINE};
use run::run_load;
pub use run::{load_config, sample, serve_role};
pub use spec::workers;
use spec::{parse_spec, print_spec};

/// How the load is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// UNP's `client.c`: `clients` processes, each `loops` times: connect, ask for `bytes`,
    /// read them, close.
    Stevens {
        /// Concurrent clients.
        clients: usize,
        /// Connections per client.
        loops: u64,
        /// Bytes asked per connection.
        bytes: usize,
    },
    /// `connections` kept busy for `duration` (closed loop), or the options' `rate`
    /// requests/s spread over them (open loop, latency from the intended send time).
    Requests {
        /// Concurrent connections.
        connections: usize,
        /// How long.
        duration: Duration,
        /// A new connection for every request (else keep-alive).
        new_connection: bool,
        /// Echo: bytes per request (0 for http).
        bytes: usize,
    },
}

/// One server design under one load.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// `self`: a `socklab serve` child per repetition; or a server somebody else started
    /// (nginx, a classic C server): then only client metrics are recorded.
    pub to: Target,
    /// The design of the self-started server.
    pub design: Design,
    /// Its workers (`None`: the number of cores).
    pub workers: Option<usize>,
    /// The protocol, on both sides.
    pub handler: Handler,
    /// HTTP body bytes.
    pub body: usize,
    /// How the load is offered.
    pub mode: LoadMode,
    /// Load generator threads.
    pub threads: usize,
    /// A request that takes longer fails (timeout).
    pub timeout: Duration,
    /// Bounds, rate and request details beyond the mode.
    pub options: LoadOptions,
}

/// `loops = unlimited`: a stevens client loops until `duration` or `requests` ends the run.
pub const UNLIMITED_LOOPS: u64 = u64::MAX;

/// What a load asks beyond its mode (everything a one-off `socklab load` can say): count
/// bounds, the open-loop rate, the HTTP request, the client's source addresses, and whether a
/// run that stops early keeps its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// Requests in all over every connection, then the run stops (`requests`).
    pub requests: Option<u64>,
    /// http/echo: requests per connection, then it stops (`conn_requests`).
    pub conn_requests: Option<u64>,
    /// stevens: a bound in time besides the loops (`duration`); `None`: the loops bound the
    /// run (capped at 10 minutes).
    pub stevens_duration: Option<Duration>,
    /// Open loop: requests per second in all (`rate`); `None`: closed loop.
    pub rate: Option<f64>,
    /// http: the path to GET (`path`).
    pub path: String,
    /// http: the `Host:` header (`host`); `None`: the target address.
    pub host: Option<String>,
    /// Client sockets bound to 127.0.0.1 ..= 127.0.0.N (`source_addrs`); `None`: auto (8 for
    /// a connection per request to IPv4 loopback, else 1).
    pub source_addrs: Option<u32>,
    /// A run that stops early (interrupted, ephemeral ports exhausted) is the sample, its
    /// `extra.report.aborted` saying why (`partial = keep`); otherwise the repetition fails.
    pub keep_partial: bool,
    /// Per-interval requests and latency every this long (`interval`); `None`: none.
    pub interval: Option<Duration>,
    /// http over TLS (`handler` = https; `to` HOST:PORT only).
    pub tls: bool,
    /// https: how the certificate is trusted (`tls_trust`); `None`: unverified, as wrk.
    pub tls_trust: Option<String>,
    /// https: resume sessions on new connections (`tls_resume`).
    pub tls_resume: bool,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            requests: None,
            conn_requests: None,
            stevens_duration: None,
            rate: None,
            path: "/".into(),
            host: None,
            source_addrs: None,
            keep_partial: false,
            interval: None,
            tls: false,
            tls_trust: None,
            tls_resume: false,
        }
    }
}

/// The keys of the load workload.
pub const KEYS: &[Key] = &[
    Key::new(
        "to",
        "self",
        "self (a fresh 'socklab serve' per repetition) or HOST:PORT of a running server",
    ),
    Key::new(
        "design",
        "epoll",
        "server design: iterative, fork, prefork-nolock, prefork-flock, prefork-mutex, prefork-fdpass, thread, prethread-mutex, prethread-handoff, prethread-accept, epoll, epoll-shared, epoll-exclusive, reuseport, uring, tokio",
    ).no_flag(),
    Key::new(
        "workers",
        "cores",
        "server workers (processes or threads) for the pool designs; cores = the number of CPUs",
    ).no_flag(),
    Key::new(
        "handler",
        "stevens",
        "protocol: stevens (count line, that many bytes back), echo, http, https (http over TLS 1.3, to HOST:PORT)",
    ).flag("protocol"),
    Key::new("body", "100", "http: response body bytes").no_flag(),
    Key::new(
        "clients",
        "10",
        "stevens: concurrent clients (the seed: 2 hosts x 5 children)",
    ),
    Key::new(
        "loops",
        "500",
        "stevens: connections per client; unlimited: until duration or requests ends the run",
    ),
    Key::new(
        "bytes",
        "4000",
        "stevens: bytes asked per connection; echo: bytes per request",
    ),
    Key::new(
        "connections",
        "32",
        "http/echo: concurrent connections",
    ),
    Key::new(
        "duration",
        "5s",
        "how long to load (stevens: only when given, besides the loops)",
    ),
    Key::new(
        "rate",
        "",
        "open loop at this many requests/s in all, e.g. 20000 or 0.5 (latency from the intended send time)",
    ),
    Key::new(
        "requests",
        "unlimited",
        "requests in all over every connection, then the run stops (duration still bounds it)",
    ),
    Key::new(
        "conn_requests",
        "unlimited",
        "http/echo: requests per connection, then it stops (`socklab load`: the loops count)",
    ).no_flag(),
    Key::new("path", "/", "http: the path to GET"),
    Key::new("host", "(the address)", "http: the Host header"),
    Key::new(
        "source_addrs",
        "auto",
        "bind client sockets to 127.0.0.1..N (IPv4 loopback targets); auto: 8 for a connection per request to IPv4 loopback, else 1",
    ),
    Key::new(
        "partial",
        "fail",
        "a run that stops early (interrupted, ephemeral ports exhausted): fail the repetition, or keep its figures as the sample (extra.report.aborted says why)",
    ).no_flag(),
    Key::new(
        "new_connection",
        "false",
        "http/echo: a new connection per request instead of keep-alive",
    ).flag("new-connection-per-request").switch(),
    Key::new("threads", "1", "load generator threads"),
    Key::new(
        "tls_trust",
        "unverified",
        "https: the server's certificate: unverified (as wrk), its SHA-256 fingerprint (as a TLS socklab serve prints it), or a PEM file of CA certificates",
    ),
    Key::new(
        "tls_resume",
        "false",
        "https: resume TLS sessions on new connections (as wrk does); false: a full handshake on every connection",
    ).switch(),
    Key::new(
        "interval",
        "",
        "per-interval req/s, errors and latency percentiles every this long (e.g. 1s), printed live and stored as the repetition's time series",
    ),
    Key::new("timeout", "5s", "a request slower than this fails"),
];

/// The metrics of the load workload.
pub const METRICS: &[Metric] = &[
    m(
        "srv_cpu_s",
        "s",
        "srv cpu s",
        "server CPU (user + system) of the serve process and its reaped children, from wait4",
        Better::Lower,
    ),
    m(
        "srv_user_s",
        "s",
        "srv usr",
        "server user CPU (process and reaped children)",
        Better::Lower,
    ),
    m(
        "srv_sys_s",
        "s",
        "srv sys",
        "server system CPU (process and reaped children)",
        Better::Lower,
    ),
    m(
        "cpu_us_per_conn",
        "us",
        "cpu us/conn",
        "server CPU per connection served (Stevens' figure)",
        Better::Lower,
    ),
    m(
        "cpu_us_per_req",
        "us",
        "cpu us/req",
        "server CPU per request answered (the Stevens workload: one request per connection)",
        Better::Lower,
    ),
    m(
        "req_per_s",
        "req/s",
        "req/s",
        "requests completed per second of load",
        Better::Higher,
    ),
    m(
        "conn_per_s",
        "conn/s",
        "conn/s",
        "connections opened per second of load",
        Better::Higher,
    ),
    m(
        "xfer_mbps",
        "Mbit/s",
        "Mbit/s",
        "bytes read by the load generator x 8 / seconds",
        Better::Higher,
    ),
    m(
        "lat_mean_us",
        "us",
        "lat mean",
        "response time, mean (open loop: from the intended send time)",
        Better::Lower,
    ),
    m(
        "lat_p50_us",
        "us",
        "p50 us",
        "response time, median (open loop: from the intended send time)",
        Better::Lower,
    ),
    m(
        "lat_p90_us",
        "us",
        "p90 us",
        "response time, 90th percentile",
        Better::Lower,
    ),
    m(
        "lat_p99_us",
        "us",
        "p99 us",
        "response time, 99th percentile",
        Better::Lower,
    ),
    m(
        "lat_p999_us",
        "us",
        "p99.9 us",
        "response time, 99.9th percentile",
        Better::Lower,
    ),
    m(
        "lat_max_us",
        "us",
        "max us",
        "response time, maximum",
        Better::Lower,
    ),
    m(
        "lat_raw_p99_us",
        "us",
        "raw p99",
        "open loop: response time from the actual send, 99th percentile (not corrected for coordinated omission)",
        Better::Lower,
    ),
    m(
        "connect_mean_us",
        "us",
        "connect us",
        "connect() to established, mean",
        Better::Lower,
    ),
    m(
        "first_byte_mean_us",
        "us",
        "1st byte us",
        "request sent to the reply's first byte, mean",
        Better::Lower,
    ),
    m(
        "errors",
        "requests",
        "errors",
        "requests that failed (connect, read, write, timeout, bad reply)",
        Better::Lower,
    ),
    m(
        "fairness",
        "index",
        "Jain",
        "Jain's fairness index of the connections per server worker (1: even; 1/n: one did all)",
        Better::Higher,
    ),
    m(
        "srv_nvcsw",
        "switches",
        "vol csw",
        "server voluntary context switches (process and reaped children)",
        Better::Lower,
    ),
    m(
        "srv_nivcsw",
        "switches",
        "invol csw",
        "server involuntary context switches",
        Better::Lower,
    ),
    m(
        "gen_cpu_s",
        "s",
        "gen cpu s",
        "the load generator's own CPU (user + system)",
        Better::Lower,
    ),
    m(
        "gen_lag_p99_us",
        "us",
        "gen lag p99",
        "scheduling lag of the load generator (open loop: actual - intended send time; closed loop: event-loop turn time), 99th percentile: large means the client is the bottleneck",
        Better::Lower,
    ),
];

impl Spec for LoadSpec {
    const KIND: &'static str = "load";
    const KEYS: &'static [Key] = KEYS;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "cpu_us_per_req";
    const COLUMNS: &'static [&'static str] = &[
        "req_per_s",
        "lat_p50_us",
        "lat_p99_us",
        "srv_cpu_s",
        "fairness",
        "errors",
    ];

    fn parse(p: &Params) -> Result<Self, LabError> {
        parse_spec(p)
    }

    /// A run bounded by a count ends at its count, its duration only caps it.
    fn time_bounds(&self) -> crate::workload::TimeBounds {
        let p = self.params();
        let counted = |k: &str| p.get(k).is_some_and(|v| v != "unlimited");
        let d = crate::workload::duration_of(&p, "duration");
        if counted("requests") || counted("conn_requests") || counted("loops") {
            crate::workload::TimeBounds {
                at_least: None,
                at_most: d,
                by_timeout: false,
            }
        } else {
            crate::workload::TimeBounds::exactly(d)
        }
    }

    fn params(&self) -> Params {
        print_spec(self)
    }

    fn run(
        &self,
        res: &mut Resources,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        if stop() {
            return Err(LabError::run(label, socklab_net::NetError::Interrupted));
        }
        run_load(res, label, self, stop)
    }

    /// A load against somebody else's server has no server CPU: it is judged by requests/s.
    fn primary(has: &dyn Fn(&str) -> bool) -> &'static str {
        if has(Self::PRIMARY) {
            Self::PRIMARY
        } else {
            "req_per_s"
        }
    }

    /// The iterative server is the book's baseline.
    fn is_baseline(config: &Params) -> bool {
        config.get("design") == Some("iterative")
    }

    /// The keys of the request modes need a handler that has them (stevens, the default,
    /// takes clients and loops); path and host need http.
    fn context(key: &str, _value: &str) -> Params {
        match key {
            "connections" | "duration" | "rate" | "new_connection" | "conn_requests" | "path"
            | "host" => Params::new().with("handler", "http"),
            _ => Params::new(),
        }
    }

    fn tables(st: &ExperimentStats) -> Vec<ReportTable> {
        designs_table(st)
            .map(|table| {
                // "minus the iterative baseline" only over a table that has that column.
                let minus = table.headers.iter().any(|h| h == "- iterative");
                ReportTable {
                    title: "Server designs",
                    text_heading: if minus {
                        "server designs (CPU per connection, minus the iterative baseline):"
                    } else {
                        "server designs (CPU per connection; no iterative cell, so no baseline subtracted):"
                    },
                    class: "designs",
                    note: if minus {
                        DESIGNS_NOTE
                    } else {
                        DESIGNS_NOTE_NO_BASELINE
                    },
                    table,
                }
            })
            .into_iter()
            .collect()
    }
}
