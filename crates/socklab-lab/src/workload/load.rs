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
use crate::params::{parse_bool, parse_usize, Key, Params};
use crate::resources::{on_thread, Resources};
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
    /// `connections` kept busy for `duration` (closed loop), or `rate` requests/s spread
    /// over them (open loop, latency from the intended send time).
    Requests {
        /// Concurrent connections.
        connections: usize,
        /// How long.
        duration: Duration,
        /// Open loop: requests per second in all.
        rate: Option<u64>,
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
    Key::new("loops", "500", "stevens: connections per client"),
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
    Key::new("duration", "5s", "http/echo: how long to load"),
    Key::new(
        "rate",
        "",
        "http/echo: open loop at this many requests/s in all (latency from the intended send time)",
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
    let stevens_keys = ["clients", "loops"];
    let request_keys = ["connections", "duration", "rate", "new_connection"];
    let (own, other): (&[&str], &[&str]) = if handler == Handler::Stevens {
        (&stevens_keys, &request_keys)
    } else {
        (&request_keys, &stevens_keys)
    };
    if let Some(k) = other.iter().find(|k| p.get(k).is_some()) {
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
    let mode = if handler == Handler::Stevens {
        LoadMode::Stevens {
            clients: p.value_in(KEYS, "clients", bounded(1, 10_000))?,
            loops: p.value_in(KEYS, "loops", |s| {
                bounded(1, 10_000_000)(s).map(|n| n as u64)
            })?,
            bytes: p.value_in(
                KEYS,
                "bytes",
                bounded(1, socklab_net::server::handler::STEVENS_MAX),
            )?,
        }
    } else {
        LoadMode::Requests {
            connections: p.value_in(KEYS, "connections", bounded(1, 100_000))?,
            duration: p.value_in(
                KEYS,
                "duration",
                duration_in(Duration::from_millis(10), Duration::from_secs(24 * 3600)),
            )?,
            rate: p.parse_opt("rate", |s| match parse_size(s)? {
                0 => Err("must be at least 1 request/s".to_string()),
                r => Ok(r),
            })?,
            new_connection: p.value_in(KEYS, "new_connection", parse_bool)?,
            bytes: if handler == Handler::Echo {
                p.parse_or("bytes", 64, bounded(1, 64 << 20))?
            } else {
                0
            },
        }
    };
    let spec = LoadSpec {
        to: p.value_in(KEYS, "to", parse_target)?,
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
            p.set("loops", loops.to_string());
            p.set("bytes", bytes.to_string());
        }
        LoadMode::Requests {
            connections,
            duration,
            rate,
            new_connection,
            bytes,
        } => {
            p.set("connections", connections.to_string());
            p.set("duration", format_duration(duration));
            if let Some(r) = rate {
                p.set("rate", r.to_string());
            }
            p.set("new_connection", new_connection.to_string());
            if spec.handler == Handler::Echo {
                p.set("bytes", bytes.to_string());
            }
        }
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
    /// takes clients and loops).
    fn context(key: &str, _value: &str) -> Params {
        match key {
            "connections" | "duration" | "rate" | "new_connection" => {
                Params::new().with("handler", "http")
            }
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
            c.loops = Some(loops);
            c.bytes = bytes;
            c.new_connection_per_request = true;
            // A bound in time too: a design that stalls must not hang the suite.
            c.duration = Some(Duration::from_secs(600));
        }
        LoadMode::Requests {
            connections,
            duration,
            rate,
            new_connection,
            bytes,
        } => {
            c.connections = connections;
            c.duration = Some(duration);
            c.rate = rate.map(|r| r as f64);
            c.new_connection_per_request = new_connection;
            if bytes > 0 {
                c.bytes = bytes;
            }
        }
    }
    if to.ip().is_loopback() && to.is_ipv4() && c.new_connection_per_request {
        // Connection per request piles up TIME_WAIT on this side: spread the 4-tuples.
        c.source_addrs = 8;
    }
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

/// Runs the generator on its own thread, `stop()` turned into its flag: `None` when stopped.
/// The generator bounds itself (duration, per-request timeout); 60 s past that it has failed.
fn generate(
    cfg: LoadConfig,
    stop: &dyn Fn() -> bool,
) -> Option<Result<LoadReport, socklab_net::NetError>> {
    let limit = cfg.duration.unwrap_or_default() + cfg.timeout + Duration::from_secs(60);
    on_thread(
        "load",
        move |flag| socklab_net::load::run(&cfg, flag),
        stop,
        limit,
        // The generator ends its loops within its poll interval.
        Duration::from_secs(10),
    )
    .map(|r| r.unwrap_or_else(|why| Err(socklab_net::NetError::Invalid(why))))
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
    let Some(r) = generate(cfg, stop) else {
        return Err(run_err(socklab_net::NetError::Interrupted));
    };
    let served = match server {
        Some(s) => Some(s.stop()?),
        None => None,
    };
    let r = r.map_err(run_err)?;
    if let Some(why) = &r.aborted {
        return Err(run_err(socklab_net::NetError::Invalid(why.clone())));
    }
    if served.as_ref().is_some_and(|s| s.stats.is_none()) {
        eprintln!(
            "socklab: warning: the server of '{label}' printed no STATS line; per-worker counts are missing"
        );
    }
    Ok(sample(&r, to, served.as_ref()))
}

/// The sample of one load run against `to`, with the self-started server's exit if there was
/// one.
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
}
