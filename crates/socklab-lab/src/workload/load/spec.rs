//! The load workload's keys: parsing them into a [`LoadSpec`] and printing it back.

use super::*;
use crate::workload::key::MAX_COUNT;

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
            n if n > MAX_COUNT => Err(format!("use at most {MAX_COUNT}, or unlimited")),
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

/// `tls_trust`: `unverified`, a SHA-256 fingerprint, or a PEM file that exists
/// ([`socklab_tls::Trust::parse`]), kept as text.
fn tls_trust_value(s: &str) -> Result<String, String> {
    let t = s.trim();
    socklab_tls::Trust::parse(t).map(|_| t.to_string())
}

/// Parses the `load` workload (keys already checked).
pub(super) fn parse_spec(p: &Params) -> Result<LoadSpec, LabError> {
    let tls = p.get("handler").is_some_and(|h| h.trim() == "https");
    let handler = p.value_in(KEYS, "handler", |s| {
        let s = if s.trim() == "https" { "http" } else { s };
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
        interval: p.parse_opt("interval", crate::workload::key::parse_interval)?,
        tls,
        // `unverified` is the default: the same as leaving the key out.
        tls_trust: p
            .parse_opt("tls_trust", tls_trust_value)?
            .filter(|t| !matches!(t.as_str(), "unverified" | "none")),
        tls_resume: p.get("tls_resume").is_some() && p.value_in(KEYS, "tls_resume", parse_bool)?,
        ..LoadOptions::default()
    };
    if tls && options.interval.is_some() {
        return Err(LabError::Plan(
            "`interval` is not available with https yet: leave `interval` out".into(),
        ));
    }
    if (options.tls_trust.is_some() || options.tls_resume) && !tls {
        return Err(LabError::Plan(
            "`tls_trust` and `tls_resume` apply to https only: leave them out or use https".into(),
        ));
    }
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
    let bound = match mode {
        LoadMode::Stevens { .. } => options.stevens_duration.unwrap_or(Duration::from_secs(600)),
        LoadMode::Requests { duration, .. } => duration,
    };
    socklab_net::series::Sampling {
        interval: options.interval,
        omit: None,
    }
    .check(Some(bound))
    .map_err(LabError::Plan)?;
    let to = p.value_in(KEYS, "to", parse_target)?;
    if tls && to == Target::SelfSink {
        return Err(LabError::Plan(
            "handler = https needs to = HOST:PORT of a TLS server (e.g. socklab serve with `tls`): the self-started server is plain".into(),
        ));
    }
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
pub(super) fn print_spec(spec: &LoadSpec) -> Params {
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
    p.set("handler", if o.tls { "https" } else { spec.handler.name() });
    if let Some(t) = &o.tls_trust {
        p.set("tls_trust", t.clone());
    }
    if o.tls_resume {
        p.set("tls_resume", "true");
    }
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
    if let Some(i) = o.interval {
        p.set("interval", format_duration(i));
    }
    p.set("threads", spec.threads.to_string());
    p.set("timeout", format_duration(spec.timeout));
    p
}

/// The server's worker count for `spec` (cores when not given).
pub fn workers(spec: &LoadSpec) -> usize {
    spec.workers.unwrap_or_else(socklab_sys::host::cores)
}
