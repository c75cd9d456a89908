//! The `load` workload: one server design under one load (seed 002, Stevens' figure 27.1; and
//! HTTP keep-alive as wrk drives it). Each repetition starts a fresh `socklab serve` child, so
//! its CPU time (from `wait4`) belongs to that repetition alone.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | see [`LOAD_KEYS`] | | |

use std::time::Duration;

use socklab_net::server::{Design, Handler};
use socklab_net::units::{format_duration, format_size, parse_duration, parse_size};

use crate::params::{parse_bool, parse_usize, Params};
use crate::workload::{parse_target, KeyDoc, Target};
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
pub const LOAD_KEYS: &[KeyDoc] = &[
    (
        "to",
        "self",
        "self (a fresh 'socklab serve' per repetition) or HOST:PORT of a running server",
    ),
    (
        "design",
        "epoll",
        "server design: iterative, fork, prefork-nolock, prefork-flock, prefork-mutex, prefork-fdpass, thread, prethread-mutex, prethread-handoff, prethread-accept, epoll, epoll-shared, epoll-exclusive, reuseport, uring, tokio",
    ),
    (
        "workers",
        "cores",
        "server workers (processes or threads) for the pool designs; cores = the number of CPUs",
    ),
    (
        "handler",
        "stevens",
        "protocol: stevens (count line, that many bytes back), echo, http",
    ),
    ("body", "100", "http: response body bytes"),
    (
        "clients",
        "10",
        "stevens: concurrent clients (the seed: 2 hosts x 5 children)",
    ),
    ("loops", "500", "stevens: connections per client"),
    (
        "bytes",
        "4000",
        "stevens: bytes asked per connection; echo: bytes per request",
    ),
    (
        "connections",
        "32",
        "http/echo: concurrent connections",
    ),
    ("duration", "5s", "http/echo: how long to load"),
    (
        "rate",
        "",
        "http/echo: open loop at this many requests/s in all (latency from the intended send time)",
    ),
    (
        "new_connection",
        "false",
        "http/echo: a new connection per request instead of keep-alive",
    ),
    ("threads", "1", "load generator threads"),
    ("timeout", "5s", "a request slower than this fails"),
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

fn bounded(lo: usize, hi: usize) -> impl Fn(&str) -> Result<usize, String> {
    move |s| match parse_usize(s)? {
        n if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("use {lo} to {hi}")),
    }
}

fn duration_in(lo: Duration, hi: Duration) -> impl Fn(&str) -> Result<Duration, String> {
    move |s| match parse_duration(s)? {
        d if d >= lo && d <= hi => Ok(d),
        _ => Err(format!(
            "use {} to {}",
            format_duration(lo),
            format_duration(hi)
        )),
    }
}

/// Parses the `load` workload.
pub fn from_params(p: &Params) -> Result<LoadSpec, LabError> {
    let handler = p.parse_or("handler", Handler::Stevens, |s| {
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
            clients: p.parse_or("clients", 10, bounded(1, 10_000))?,
            loops: p.parse_or("loops", 500, |s| {
                bounded(1, 10_000_000)(s).map(|n| n as u64)
            })?,
            bytes: p.parse_or(
                "bytes",
                4000,
                bounded(1, socklab_net::server::handler::STEVENS_MAX),
            )?,
        }
    } else {
        LoadMode::Requests {
            connections: p.parse_or("connections", 32, bounded(1, 100_000))?,
            duration: p.parse_or(
                "duration",
                Duration::from_secs(5),
                duration_in(Duration::from_millis(10), Duration::from_secs(24 * 3600)),
            )?,
            rate: p.parse_opt("rate", |s| match parse_size(s)? {
                0 => Err("must be at least 1 request/s".to_string()),
                r => Ok(r),
            })?,
            new_connection: p.parse_or("new_connection", false, parse_bool)?,
            bytes: if handler == Handler::Echo {
                p.parse_or("bytes", 64, bounded(1, 64 << 20))?
            } else {
                0
            },
        }
    };
    let spec = LoadSpec {
        to: p.parse_or("to", Target::SelfSink, parse_target)?,
        design: p.parse_or("design", Design::Epoll, |s| {
            s.parse::<Design>().map_err(|e| e.to_string())
        })?,
        workers: None,
        handler,
        body: p.parse_or(
            "body",
            socklab_net::server::handler::HTTP_DEFAULT_BODY,
            |s| match parse_size(s)? {
                n if n <= socklab_net::server::handler::HTTP_MAX_BODY as u64 => Ok(n as usize),
                _ => Err("use at most 64M".to_string()),
            },
        )?,
        mode,
        threads: p.parse_or("threads", 1, bounded(1, 256))?,
        timeout: p.parse_or(
            "timeout",
            Duration::from_secs(5),
            duration_in(Duration::from_millis(1), Duration::from_secs(3600)),
        )?,
    };
    let mut spec = spec;
    // Checked for every design; kept only for the pool designs (a matrix may give every design
    // the same workers).
    let workers = p.parse_or("workers", None, workers_value)?;
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
pub fn params(spec: &LoadSpec) -> Params {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<LoadSpec, LabError> {
        let mut p = Params::new();
        for (k, v) in pairs {
            p.set(k, *v);
        }
        from_params(&p)
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
        assert_eq!(from_params(&params(&s)).unwrap(), s);
        let h = parse(&[
            ("handler", "http"),
            ("design", "prefork-flock"),
            ("workers", "15"),
            ("rate", "20000"),
        ])
        .unwrap();
        assert_eq!(from_params(&params(&h)).unwrap(), h);
        assert_eq!(params(&h).get("workers"), Some("15"));
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
