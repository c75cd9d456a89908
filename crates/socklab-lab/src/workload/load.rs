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
use socklab_net::units::{format_duration, format_size, parse_size};

use crate::child::ServerExit;
use crate::metric::{m, Better, Metric};
use crate::params::{parse_bool, parse_count, parse_usize, Key, Params};
use crate::resources::{on_thread_until, Resources, ThreadEnd};
use crate::sample::Sample;
use crate::summary::{CellStats, ExperimentStats};
use crate::table::{num, Table};
use crate::workload::key::{bounded, duration_in, parse_target, Target};
use crate::workload::{ReportTable, Spec};
use crate::LabError;

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
    ),
    Key::new(
        "workers",
        "cores",
        "server workers (processes or threads) for the pool designs; cores = the number of CPUs",
    ),
    Key::new(
        "handler",
        "stevens",
        "protocol: stevens (count line, that many bytes back), echo, http",
    ),
    Key::new("body", "100", "http: response body bytes"),
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
        "http/echo: requests per connection, then it stops (socklab load --loops)",
    ),
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
    ),
    Key::new(
        "new_connection",
        "false",
        "http/echo: a new connection per request instead of keep-alive",
    ),
    Key::new("threads", "1", "load generator threads"),
    Key::new("timeout", "5s", "a request slower than this fails"),
];

fn workers_value(s: &str) -> Result<Option<usize>, String> {
    match s.trim() {
        "cores" | "auto" => Ok(None),
        t => match parse_usize(t)? {
            n @ 1..=1024 => Ok(Some(n)),
            _ => Err("use 1 to 1024, or cores".into()),
        },
    }
}

/// `unlimited` or a count of at least 1.
fn count_or_unlimited(s: &str) -> Result<Option<u64>, String> {
    match s.trim() {
        "unlimited" => Ok(None),
        t => match parse_count(t)? {
            0 => Err("use at least 1, or unlimited".into()),
            n => Ok(Some(n)),
        },
    }
}

/// Requests per second: a positive number (`20000`, `20K`, `0.5`).
fn rate_value(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let r = match t.parse::<f64>() {
        Ok(r) => r,
        Err(_) => parse_size(t)
            .map_err(|_| "not a number: give requests per second, e.g. 20000 or 0.5".to_string())?
            as f64,
    };
    if !(r.is_finite() && r > 0.0) {
        return Err("use a positive number of requests per second, e.g. 20000".into());
    }
    if r > 1e8 {
        return Err("at most 100000000 requests per second".into());
    }
    Ok(r)
}

/// The text of a rate: whole numbers without a fraction.
fn format_rate(r: f64) -> String {
    if r.fract() == 0.0 {
        format!("{}", r as u64)
    } else {
        format!("{r}")
    }
}

/// Text without spaces or control characters (an HTTP path or host).
fn token(s: &str) -> bool {
    !s.is_empty() && !s.bytes().any(|b| b <= b' ' || b == 0x7f)
}

fn source_addrs_value(s: &str) -> Result<Option<u32>, String> {
    match s.trim() {
        "auto" => Ok(None),
        t => match parse_count(t)? {
            n @ 1..=65_536 => Ok(Some(n as u32)),
            _ => Err("use 1 to 65536 addresses of 127.0.0.0/8, or auto".into()),
        },
    }
}

/// The keys of each mode (`requests`, `path`, `host`, `source_addrs` and the server keys apply
/// to both).
const STEVENS_KEYS: &[&str] = &["clients", "loops", "duration", "rate"];
const REQUEST_KEYS: &[&str] = &[
    "connections",
    "duration",
    "rate",
    "new_connection",
    "conn_requests",
];

/// Parses the `load` workload (keys already checked).
fn parse_spec(p: &Params) -> Result<LoadSpec, LabError> {
    let handler = p.value_in(KEYS, "handler", |s| {
        match s.parse::<Handler>().map_err(|e| e.to_string())? {
            Handler::Discard => {
                Err("discard sends no replies to measure: use stevens, echo or http".to_string())
            }
            h => Ok(h),
        }
    })?;
    let (own, other) = if handler == Handler::Stevens {
        (STEVENS_KEYS, REQUEST_KEYS)
    } else {
        (REQUEST_KEYS, STEVENS_KEYS)
    };
    if let Some(k) = other
        .iter()
        .find(|k| !own.contains(k) && p.get(k).is_some())
    {
        return Err(LabError::Plan(format!(
            "{k} does not apply to handler = {handler}: {} takes {}",
            handler,
            own.join(", ")
        )));
    }
    if handler == Handler::Http && p.get("bytes").is_some() {
        return Err(LabError::Plan(
            "bytes does not apply to handler = http: the reply size is body".into(),
        ));
    }
    if handler != Handler::Http {
        if let Some(k) = ["path", "host"].iter().find(|k| p.get(k).is_some()) {
            return Err(LabError::Plan(format!(
                "{k} does not apply to handler = {handler}: only http sends a request line and headers"
            )));
        }
    }
    let duration = |p: &Params| {
        p.value_in(
            KEYS,
            "duration",
            duration_in(Duration::from_millis(10), Duration::from_secs(24 * 3600)),
        )
    };
    let mut options = LoadOptions {
        requests: p.value_in(KEYS, "requests", count_or_unlimited)?,
        rate: p.parse_opt("rate", rate_value)?,
        path: p.value_in(KEYS, "path", |s| {
            if s.starts_with('/') && token(s) {
                Ok(s.to_string())
            } else {
                Err("give an absolute path without spaces, e.g. /index.html")
            }
        })?,
        host: p.parse_opt("host", |s| {
            if token(s) {
                Ok(s.to_string())
            } else {
                Err("give a host name without spaces, e.g. example.com")
            }
        })?,
        source_addrs: p.value_in(KEYS, "source_addrs", source_addrs_value)?,
        keep_partial: p.value_in(KEYS, "partial", |s| match s.trim() {
            "fail" => Ok(false),
            "keep" => Ok(true),
            _ => Err("use fail or keep"),
        })?,
        ..LoadOptions::default()
    };
    let mode = if handler == Handler::Stevens {
        if p.get("duration").is_some() {
            options.stevens_duration = Some(duration(p)?);
        }
        let loops = p.value_in(KEYS, "loops", |s| match s.trim() {
            "unlimited" => Ok(UNLIMITED_LOOPS),
            t => bounded(1, 10_000_000)(t).map(|n| n as u64),
        })?;
        if loops == UNLIMITED_LOOPS
            && options.stevens_duration.is_none()
            && options.requests.is_none()
        {
            return Err(LabError::Plan(
                "loops = unlimited needs another bound: give duration (e.g. 10s) or requests"
                    .into(),
            ));
        }
        LoadMode::Stevens {
            clients: p.value_in(KEYS, "clients", bounded(1, 10_000))?,
            loops,
            bytes: p.value_in(KEYS, "bytes", |s| match parse_usize(s)? {
                n @ 1..=socklab_net::server::handler::STEVENS_MAX => Ok(n),
                _ => Err(format!(
                    "a stevens request asks for 1..={} bytes (the classic servers' MAXN)",
                    socklab_net::server::handler::STEVENS_MAX
                )),
            })?,
        }
    } else {
        options.conn_requests = p.value_in(KEYS, "conn_requests", count_or_unlimited)?;
        LoadMode::Requests {
            connections: p.value_in(KEYS, "connections", bounded(1, 100_000))?,
            duration: duration(p)?,
            new_connection: p.value_in(KEYS, "new_connection", parse_bool)?,
            bytes: if handler == Handler::Echo {
                p.parse_or("bytes", 64, bounded(1, socklab_net::load::ECHO_MAX))?
            } else {
                0
            },
        }
    };
    let to = p.value_in(KEYS, "to", parse_target)?;
    if let (Some(n @ 2..), Target::Addr(a)) = (options.source_addrs, to) {
        if !matches!(a.ip(), std::net::IpAddr::V4(ip) if ip.is_loopback()) {
            return Err(LabError::Plan(format!(
                "source_addrs = {n} needs an IPv4 loopback target (127.0.0.0/8), not {a}: leave source_addrs out"
            )));
        }
    }
    let spec = LoadSpec {
        to,
        design: p.value_in(KEYS, "design", |s| {
            s.parse::<Design>().map_err(|e| e.to_string())
        })?,
        workers: None,
        handler,
        body: p.value_in(KEYS, "body", |s| match parse_size(s)? {
            n if n <= socklab_net::server::handler::HTTP_MAX_BODY as u64 => Ok(n as usize),
            _ => Err("use at most 64M".to_string()),
        })?,
        mode,
        threads: p.value_in(KEYS, "threads", bounded(1, 256))?,
        timeout: p.value_in(
            KEYS,
            "timeout",
            duration_in(Duration::from_millis(1), Duration::from_secs(3600)),
        )?,
        options,
    };
    let mut spec = spec;
    // Checked for every design; kept only for the pool designs (a matrix may give every design
    // the same workers).
    let workers = p.value_in(KEYS, "workers", workers_value)?;
    spec.workers = workers.filter(|_| spec.design.has_workers());
    if matches!(spec.to, Target::Addr(_)) {
        for k in ["design", "workers", "body"] {
            if p.get(k).is_some() {
                return Err(LabError::Plan(format!(
                    "{k} configures the self-started server: with to = HOST:PORT the server is yours; leave {k} out or set to = self"
                )));
            }
        }
    }
    Ok(spec)
}

/// The canonical parameters of `spec` (what the store and the report show).
fn print_spec(spec: &LoadSpec) -> Params {
    let o = &spec.options;
    let mut p = Params::new();
    p.set("to", spec.to.to_string());
    if spec.to == Target::SelfSink {
        p.set("design", spec.design.name());
        // Designs without a pool (iterative, fork, thread, epoll) have no worker count.
        if spec.design.has_workers() {
            p.set(
                "workers",
                spec.workers
                    .map_or_else(|| "cores".to_string(), |n| n.to_string()),
            );
        }
        if spec.handler == Handler::Http {
            p.set("body", format_size(spec.body as u64));
        }
    }
    p.set("handler", spec.handler.name());
    match spec.mode {
        LoadMode::Stevens {
            clients,
            loops,
            bytes,
        } => {
            p.set("clients", clients.to_string());
            p.set(
                "loops",
                if loops == UNLIMITED_LOOPS {
                    "unlimited".to_string()
                } else {
                    loops.to_string()
                },
            );
            p.set("bytes", bytes.to_string());
            if let Some(d) = o.stevens_duration {
                p.set("duration", format_duration(d));
            }
        }
        LoadMode::Requests {
            connections,
            duration,
            new_connection,
            bytes,
        } => {
            p.set("connections", connections.to_string());
            p.set("duration", format_duration(duration));
            p.set("new_connection", new_connection.to_string());
            if spec.handler == Handler::Echo {
                p.set("bytes", bytes.to_string());
            }
            if let Some(n) = o.conn_requests {
                p.set("conn_requests", n.to_string());
            }
        }
    }
    // The options are printed when they differ from their defaults, so experiments stored
    // before they existed keep their configuration text.
    if let Some(r) = o.rate {
        p.set("rate", format_rate(r));
    }
    if let Some(n) = o.requests {
        p.set("requests", n.to_string());
    }
    if spec.handler == Handler::Http {
        if o.path != "/" {
            p.set("path", o.path.clone());
        }
        if let Some(h) = &o.host {
            p.set("host", h.clone());
        }
    }
    if let Some(n) = o.source_addrs {
        p.set("source_addrs", n.to_string());
    }
    if o.keep_partial {
        p.set("partial", "keep");
    }
    p.set("threads", spec.threads.to_string());
    p.set("timeout", format_duration(spec.timeout));
    p
}

/// The server's worker count for `spec` (cores when not given).
pub fn workers(spec: &LoadSpec) -> usize {
    spec.workers.unwrap_or_else(socklab_sys::host::cores)
}

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

    fn parse(p: &Params) -> Result<Self, LabError> {
        parse_spec(p)
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
            .map(|table| ReportTable {
                title: "Server designs",
                text_heading: "server designs (CPU per connection, minus the iterative baseline):",
                class: "designs",
                note: DESIGNS_NOTE,
                table,
            })
            .into_iter()
            .collect()
    }
}

/// The generator's configuration for `spec` against `to`.
pub fn load_config(spec: &LoadSpec, to: SocketAddr) -> LoadConfig {
    let protocol = match spec.handler {
        Handler::Stevens => LoadProtocol::Stevens,
        Handler::Echo => LoadProtocol::Echo,
        _ => LoadProtocol::Http,
    };
    let o = &spec.options;
    let mut c = LoadConfig::new(to, protocol);
    c.threads = spec.threads;
    c.timeout = spec.timeout;
    match spec.mode {
        LoadMode::Stevens {
            clients,
            loops,
            bytes,
        } => {
            c.connections = clients;
            c.loops = (loops != UNLIMITED_LOOPS).then_some(loops);
            c.bytes = bytes;
            c.new_connection_per_request = true;
            // A bound in time too: a design that stalls must not hang the suite.
            c.duration = Some(o.stevens_duration.unwrap_or(Duration::from_secs(600)));
        }
        LoadMode::Requests {
            connections,
            duration,
            new_connection,
            bytes,
        } => {
            c.connections = connections;
            c.duration = Some(duration);
            c.loops = o.conn_requests;
            c.new_connection_per_request = new_connection;
            if bytes > 0 {
                c.bytes = bytes;
            }
        }
    }
    c.rate = o.rate;
    c.requests = o.requests;
    c.path = o.path.clone();
    c.host = o.host.clone();
    c.source_addrs = match o.source_addrs {
        Some(n) => n,
        // Connection per request piles up TIME_WAIT on this side: spread the 4-tuples.
        None if to.ip().is_loopback() && to.is_ipv4() && c.new_connection_per_request => 8,
        None => 1,
    };
    c
}

/// The `socklab serve` arguments of `spec` (without the address, which the child announces).
pub fn serve_args(spec: &LoadSpec) -> Vec<String> {
    vec![
        "serve".into(),
        "--design".into(),
        spec.design.name().into(),
        "--handler".into(),
        spec.handler.name().into(),
        "--workers".into(),
        workers(spec).to_string(),
        "--body".into(),
        spec.body.to_string(),
    ]
}

/// Runs the generator on its own thread, `stop()` turned into its flag: `None` when stopped
/// (with `keep`: the report of the run up to the stop, if the generator returned it in time).
/// The generator bounds itself (duration, per-request timeout); 60 s past that it has failed.
fn generate(
    cfg: LoadConfig,
    stop: &dyn Fn() -> bool,
    keep: bool,
) -> Option<Result<LoadReport, socklab_net::NetError>> {
    let limit = cfg.duration.unwrap_or_default() + cfg.timeout + Duration::from_secs(60);
    let ended = on_thread_until(
        "load",
        move |flag| socklab_net::load::run(&cfg, flag),
        stop,
        limit,
        // The generator ends its loops within its poll interval.
        Duration::from_secs(10),
    );
    match ended {
        Ok(ThreadEnd::Done(r)) => Some(r),
        Ok(ThreadEnd::Stopped(Some(r @ Ok(_)))) if keep => Some(r),
        Ok(ThreadEnd::Stopped(_)) => None,
        Err(why) => Some(Err(socklab_net::NetError::Invalid(why))),
    }
}

/// One repetition of `spec`.
fn run_load(
    res: &mut Resources,
    label: &str,
    spec: &LoadSpec,
    stop: &dyn Fn() -> bool,
) -> Result<Sample, LabError> {
    let run_err = |source| LabError::run(label, source);
    let (server, to) = match spec.to {
        Target::SelfSink => {
            let args = serve_args(spec);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let s = res.spawn(&args, false)?;
            let a = s.addr();
            (Some(s), a)
        }
        Target::Addr(a) => (None, a),
    };
    let cfg = load_config(spec, to);
    let keep = spec.options.keep_partial;
    let Some(r) = generate(cfg, stop, keep) else {
        return Err(run_err(socklab_net::NetError::Interrupted));
    };
    let served = match server {
        Some(s) => Some(s.stop()?),
        None => None,
    };
    let r = r.map_err(run_err)?;
    match &r.aborted {
        Some(why) if !keep => return Err(run_err(socklab_net::NetError::Invalid(why.clone()))),
        _ => {}
    }
    if served.as_ref().is_some_and(|s| s.stats.is_none()) {
        eprintln!(
            "socklab: warning: the server of '{label}' printed no STATS line; per-worker counts are missing"
        );
    }
    Ok(sample(&r, to, served.as_ref()))
}

/// The sample of one load run against `to`, with the self-started server's exit if there was
/// one. The whole report is kept in `extra["report"]` (what `socklab load` prints from the
/// store).
pub fn sample(r: &LoadReport, to: SocketAddr, served: Option<&ServerExit>) -> Sample {
    let mut s = Sample::new(
        [
            ("req_per_s", r.requests_per_s),
            ("conn_per_s", r.connections_per_s),
            ("xfer_mbps", r.transfer_bytes_per_s * 8.0 / 1e6),
            ("errors", r.failed.total() as f64),
            ("connect_mean_us", r.connect.mean_us),
            ("first_byte_mean_us", r.first_byte.mean_us),
            ("gen_cpu_s", r.generator.cpu_user_s + r.generator.cpu_sys_s),
        ],
        json!({
            "to": to.to_string(),
            "completed": r.completed,
            "failed": r.failed,
            "connections_opened": r.connections_opened,
            "duration_s": r.duration_s,
            "generator_warnings": r.generator.warnings,
            "report": r,
        }),
    );
    // Open loop: latency from the intended send time (coordinated omission corrected).
    let lat = r.response_corrected.as_ref().unwrap_or(&r.response);
    s.extend([
        ("lat_mean_us", lat.mean_us),
        ("lat_p50_us", lat.percentiles.p50_us),
        ("lat_p90_us", lat.percentiles.p90_us),
        ("lat_p99_us", lat.percentiles.p99_us),
        ("lat_p999_us", lat.percentiles.p99_9_us),
        ("lat_max_us", lat.max_us),
    ]);
    if r.response_corrected.is_some() {
        s.extend([("lat_raw_p99_us", r.response.percentiles.p99_us)]);
    }
    let lag = r
        .generator
        .send_lag
        .as_ref()
        .unwrap_or(&r.generator.loop_busy);
    s.extend([("gen_lag_p99_us", lag.percentiles.p99_us)]);
    let Some(exit) = served else { return s };
    let usage = &exit.usage;
    let cpu = usage.cpu().as_secs_f64();
    // The server's own counts when it printed them, else the client's.
    let (conns, reqs) = exit
        .stats
        .as_ref()
        .map_or((r.connections_opened, r.completed), |st| {
            (st.connections(), st.requests())
        });
    s.extend([
        ("srv_cpu_s", cpu),
        ("srv_user_s", usage.user.as_secs_f64()),
        ("srv_sys_s", usage.sys.as_secs_f64()),
        ("srv_nvcsw", usage.nvcsw as f64),
        ("srv_nivcsw", usage.nivcsw as f64),
    ]);
    if conns > 0 {
        s.extend([("cpu_us_per_conn", cpu * 1e6 / conns as f64)]);
    }
    if reqs > 0 {
        s.extend([("cpu_us_per_req", cpu * 1e6 / reqs as f64)]);
    }
    if let Some(st) = &exit.stats {
        if let Some(j) = st.fairness() {
            s.extend([("fairness", j)]);
        }
        s.extra["server"] = json!({
            "design": st.design,
            "workers": st.workers.iter().map(|w| w.connections).collect::<Vec<_>>(),
            "requests": st.requests(),
            "connections": st.connections(),
            "accept_errors": st.accept_errors,
        });
    }
    s
}

/// The server-design table (seed 002, Stevens' figure 27.1): per `load` cell with a
/// self-started server, the server's CPU time (mean and 95% CI), CPU per connection, the same
/// minus the `iterative` cell's (the book's way of removing the work every design does), and
/// requests/s, latency, Jain's fairness over the workers and context switches. `None` when the
/// experiment has no such cells.
pub fn designs_table(st: &ExperimentStats) -> Option<Table> {
    let cells: Vec<_> = st
        .cells
        .iter()
        .filter(|c| c.cell.workload == LoadSpec::KIND && c.metrics.contains_key("srv_cpu_s"))
        .collect();
    if cells.is_empty() {
        return None;
    }
    let mean = |c: &CellStats, m: &str| c.metrics.get(m).map(|s| s.mean);
    let base = cells
        .iter()
        .find(|c| c.cell.config.get("design") == Some("iterative"))
        .and_then(|c| mean(c, "cpu_us_per_conn"));
    let mut t = Table::new(&[
        "design",
        "workers",
        "n",
        "srv cpu s",
        "±95% CI",
        "cpu us/conn",
        "- iterative",
        "req/s",
        "p50 us",
        "p99 us",
        "Jain",
        "vol csw",
        "invol csw",
        "errors",
    ]);
    let f = |v: Option<f64>| v.map(num).unwrap_or_else(|| "-".into());
    for c in cells {
        let cpu = c.metrics.get("srv_cpu_s");
        let per = mean(c, "cpu_us_per_conn");
        t.row(vec![
            c.cell.config.get("design").unwrap_or("?").to_string(),
            c.cell.config.get("workers").unwrap_or("-").to_string(),
            c.n.to_string(),
            f(cpu.map(|s| s.mean)),
            cpu.and_then(|s| s.ci95_half)
                .map(|h| format!("±{}", num(h)))
                .unwrap_or_else(|| "-".into()),
            f(per),
            match (per, base) {
                (Some(p), Some(b)) => num(p - b),
                _ => "-".into(),
            },
            f(mean(c, "req_per_s")),
            f(mean(c, "lat_p50_us")),
            f(mean(c, "lat_p99_us")),
            mean(c, "fairness").map_or_else(|| "-".into(), |j| format!("{j:.3}")),
            f(mean(c, "srv_nvcsw")),
            f(mean(c, "srv_nivcsw")),
            f(mean(c, "errors")),
        ]);
    }
    Some(t)
}

/// The caption of [`designs_table`].
pub const DESIGNS_NOTE: &str = "Server designs (seed 002, Stevens' figure 27.1): server CPU time (user + system of the `socklab serve` process and its reaped children, from wait4) per repetition, CPU per connection, and the same minus the *iterative* server's (the book subtracts the iterative baseline: what is left is the cost of the design itself); requests/s and response-time percentiles from socklab's load generator; *Jain* is the fairness of connections across the workers (1 = even).";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<LoadSpec, LabError> {
        let mut p = Params::new();
        for (k, v) in pairs {
            p.set(k, *v);
        }
        parse_spec(&p)
    }

    #[test]
    fn defaults_are_the_seed_workload_and_round_trip() {
        let s = parse(&[]).unwrap();
        assert_eq!(
            s.mode,
            LoadMode::Stevens {
                clients: 10,
                loops: 500,
                bytes: 4000
            }
        );
        assert_eq!(s.design, Design::Epoll);
        assert_eq!(parse_spec(&print_spec(&s)).unwrap(), s);
        let h = parse(&[
            ("handler", "http"),
            ("design", "prefork-flock"),
            ("workers", "15"),
            ("rate", "20000"),
        ])
        .unwrap();
        assert_eq!(parse_spec(&print_spec(&h)).unwrap(), h);
        assert_eq!(print_spec(&h).get("workers"), Some("15"));
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        let e = parse(&[("design", "prefork-lock")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("prefork-lock") && e.contains("prefork-flock"),
            "{e}"
        );
        let e = parse(&[("handler", "discard")]).unwrap_err().to_string();
        assert!(e.contains("use stevens, echo or http"), "{e}");
        let e = parse(&[("connections", "5")]).unwrap_err().to_string();
        assert!(
            e.contains("connections does not apply to handler = stevens"),
            "{e}"
        );
        let e = parse(&[("handler", "http"), ("loops", "5")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("loops does not apply"), "{e}");
        let e = parse(&[("bytes", "16385")]).unwrap_err().to_string();
        assert!(e.contains("16384"), "{e}");
        let e = parse(&[("workers", "0")]).unwrap_err().to_string();
        assert!(e.contains("1 to 1024"), "{e}");
        let e = parse(&[("to", "127.0.0.1:80"), ("design", "fork")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("design configures the self-started server"),
            "{e}"
        );
    }

    #[test]
    fn the_one_off_keys_round_trip_into_the_generator_config() {
        let h = parse(&[
            ("to", "127.0.0.1:8080"),
            ("handler", "http"),
            ("connections", "4"),
            ("requests", "200"),
            ("conn_requests", "50"),
            ("path", "/index.html"),
            ("host", "example.com"),
            ("source_addrs", "4"),
            ("rate", "0.5"),
            ("partial", "keep"),
        ])
        .unwrap();
        let printed = print_spec(&h);
        assert_eq!(parse_spec(&printed).unwrap(), h);
        for (k, v) in [
            ("requests", "200"),
            ("conn_requests", "50"),
            ("path", "/index.html"),
            ("host", "example.com"),
            ("source_addrs", "4"),
            ("rate", "0.5"),
            ("partial", "keep"),
        ] {
            assert_eq!(printed.get(k), Some(v), "{k}");
        }
        let to: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let c = load_config(&h, to);
        assert_eq!(
            (c.requests, c.loops, c.rate, c.source_addrs),
            (Some(200), Some(50), Some(0.5), 4)
        );
        assert_eq!(
            (c.path.as_str(), c.host.as_deref()),
            ("/index.html", Some("example.com"))
        );
        assert!(h.options.keep_partial);

        // Stevens bounded by time: unlimited loops, a duration and a rate.
        let s = parse(&[
            ("clients", "5"),
            ("loops", "unlimited"),
            ("duration", "3s"),
            ("rate", "20K"),
        ])
        .unwrap();
        assert_eq!(
            s.mode,
            LoadMode::Stevens {
                clients: 5,
                loops: UNLIMITED_LOOPS,
                bytes: 4000
            }
        );
        let printed = print_spec(&s);
        assert_eq!(printed.get("loops"), Some("unlimited"));
        assert_eq!(printed.get("duration"), Some("3s"));
        assert_eq!(printed.get("rate"), Some("20480"));
        assert_eq!(parse_spec(&printed).unwrap(), s);
        let c = load_config(&s, to);
        assert_eq!(c.loops, None);
        assert_eq!(c.duration, Some(Duration::from_secs(3)));
        assert_eq!(c.rate, Some(20480.0));
        assert!(c.validate().is_ok());
        // Stevens with requests and unlimited loops is bounded too.
        assert!(parse(&[("loops", "unlimited"), ("requests", "100")]).is_ok());
    }

    #[test]
    fn source_addrs_auto_spreads_a_connection_per_request_on_loopback_only() {
        let lo: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let v6: SocketAddr = "[::1]:9".parse().unwrap();
        let stevens = parse(&[]).unwrap();
        assert_eq!(stevens.options.source_addrs, None);
        assert_eq!(print_spec(&stevens).get("source_addrs"), None);
        assert_eq!(load_config(&stevens, lo).source_addrs, 8);
        assert_eq!(load_config(&stevens, v6).source_addrs, 1);
        let keep_alive = parse(&[("handler", "http")]).unwrap();
        assert_eq!(load_config(&keep_alive, lo).source_addrs, 1);
        let one = parse(&[("source_addrs", "1")]).unwrap();
        assert_eq!(load_config(&one, lo).source_addrs, 1);
        let auto = parse(&[("source_addrs", "auto")]).unwrap();
        assert_eq!(auto, stevens);
    }

    #[test]
    fn the_one_off_keys_refuse_bad_values_naming_the_fix() {
        let err = |pairs: &[(&str, &str)]| parse(pairs).unwrap_err().to_string();
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: &[Case] = &[
            (
                &[("loops", "unlimited")],
                &["loops = unlimited needs another bound", "duration"],
            ),
            (&[("loops", "0")], &["loops = '0'", "1 to 10000000"]),
            (&[("requests", "0")], &["requests = '0'", "unlimited"]),
            (&[("requests", "many")], &["requests = 'many'"]),
            (
                &[("handler", "echo"), ("conn_requests", "0")],
                &["conn_requests = '0'", "at least 1"],
            ),
            (
                &[("conn_requests", "5")],
                &["conn_requests does not apply to handler = stevens"],
            ),
            (
                &[("handler", "http"), ("path", "index.html")],
                &["path = 'index.html'", "/index.html"],
            ),
            (
                &[("handler", "http"), ("host", "a b")],
                &["host = 'a b'", "without spaces"],
            ),
            (
                &[("handler", "echo"), ("path", "/x")],
                &["path does not apply to handler = echo"],
            ),
            (
                &[("source_addrs", "0")],
                &["source_addrs = '0'", "1 to 65536"],
            ),
            (
                &[("to", "10.0.0.1:80"), ("source_addrs", "4")],
                &["source_addrs = 4 needs an IPv4 loopback target"],
            ),
            (&[("rate", "fast")], &["rate = 'fast'", "not a number"]),
            (&[("rate", "0")], &["rate = '0'", "positive"]),
            (&[("rate", "1e9")], &["at most 100000000"]),
            (
                &[("partial", "maybe")],
                &["partial = 'maybe'", "fail or keep"],
            ),
        ];
        for (pairs, needles) in cases {
            let e = err(pairs);
            for n in *needles {
                assert!(e.contains(n), "{pairs:?}: '{n}' not in: {e}");
            }
        }
    }

    #[test]
    fn the_sample_keeps_the_whole_report() {
        use socklab_net::load::{Failures, GeneratorStats, Timing};
        let to: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let t = Timing {
            count: 3,
            mean_us: 12.5,
            percentiles: socklab_net::load::Percentiles {
                p99_us: 40.25,
                ..Default::default()
            },
            ..Timing::default()
        };
        let r = LoadReport {
            config: LoadConfig::new(to, LoadProtocol::Http),
            duration_s: 1.5,
            completed: 3,
            failed: Failures {
                timeout: 1,
                ..Failures::default()
            },
            connections_opened: 1,
            requests_per_s: 2.0,
            connections_per_s: 0.5,
            bytes_written: 100,
            bytes_read: 420,
            transfer_bytes_per_s: 280.0,
            connect: t,
            first_byte: t,
            response: t,
            response_corrected: None,
            generator: GeneratorStats {
                send_lag: None,
                timer_lag: None,
                loop_busy: t,
                thread_utilisation: vec![0.25],
                cpu_user_s: 0.01,
                cpu_sys_s: 0.02,
                warnings: vec!["w".into()],
            },
            aborted: Some("interrupted".into()),
        };
        let s = sample(&r, to, None);
        let back: LoadReport = serde_json::from_value(s.extra["report"].clone()).unwrap();
        assert_eq!(back, r);
        assert_eq!(s.get("errors"), Some(1.0));
        assert_eq!(s.get("lat_p99_us"), Some(40.25));
    }
}
