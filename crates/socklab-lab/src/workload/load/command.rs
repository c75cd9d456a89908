//! The one-off `socklab load`: its flags' own rules as the load workload's parameters
//! (`clients` or `connections`, `loops` by protocol, the one-off defaults), and the descriptor
//! limit a run of many connections needs. Errors name keys in backticks; the binary writes
//! them as its flags.

use std::net::IpAddr;
use std::time::Duration;

use socklab_net::load::LoadProtocol;
use socklab_units::format_duration;

use crate::flags::Given;
use crate::model::params::Params;
use crate::workload::key::{parse_target, Target};
use crate::workload::Workload;
use crate::LabError;

/// A count-bounded run (`requests`, `loops`) without `duration` is still capped at this.
const COUNT_RUN_CAP: Duration = Duration::from_secs(300);

/// Descriptors a run needs besides one per connection: stdio, the store and its journal,
/// the generator threads' epoll instances and timers, a self-started server's pipes.
const FD_MARGIN: u64 = 64;

/// What the one-off command runs: the workload's parameters, and what the command needs of
/// them beside the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct OneOff {
    /// The server as given (`to`).
    pub to: String,
    /// The `load` workload's parameters.
    pub params: Params,
    /// Connections (or stevens clients) open at once: the descriptors the run needs.
    pub connections: usize,
    /// Whether per-interval lines come before the report (`interval`).
    pub intervals: bool,
}

fn usage(m: impl Into<String>) -> LabError {
    LabError::Plan(m.into())
}

/// The values given for the keys, typed as the one-off command reads them.
struct Values<'a> {
    given: &'a [Given],
}

impl Values<'_> {
    fn text(&self, key: &str) -> Option<String> {
        self.given
            .iter()
            .find(|g| g.key.name == key)
            .and_then(|g| g.values.first())
            .cloned()
    }

    fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, LabError> {
        match self.text(key) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                usage(format!(
                    "`{key}` '{v}': give a whole number, e.g. `{key}` 10"
                ))
            }),
        }
    }
}

/// A workload error in the command's words: `` `bytes` 20000: ... `` for
/// `bytes = '20000': ...`.
fn in_words(e: LabError) -> LabError {
    match e {
        LabError::Param { key, value, reason } => {
            let value = if value.starts_with(|c: char| c.is_ascii_digit()) {
                value
            } else {
                format!("'{value}'")
            };
            usage(format!("`{key}` {value}: {reason}"))
        }
        other => other,
    }
}

/// The `load` workload parameters of the one-off command: everything `socklab load` can ask
/// for, as it always ran (the default `source_addrs` 1, and a run that stops early keeps its
/// figures; with `reps` the keys of a single run are refused). `reps` is `None` when not
/// given; `warmup` the warm-up repetitions asked for.
pub fn one_off(given: &[Given], reps: Option<usize>, warmup: usize) -> Result<OneOff, LabError> {
    let v = Values { given };
    if warmup != 0 && reps.is_none() {
        return Err(usage(
            "`warmup` needs `reps`: warm-up repetitions go with repeated runs (add `reps` N)",
        ));
    }
    let to_text = v.text("to").ok_or_else(|| {
        usage("`to` is required: give the server as HOST:PORT, e.g. 127.0.0.1:8080")
    })?;
    let clients: Option<usize> = v.number("clients")?;
    let loops: Option<u64> = v.number("loops")?;
    let conns: Option<usize> = v.number("connections")?;
    let requests: Option<u64> = v.number("requests")?;
    let threads: Option<usize> = v.number("threads")?;
    let timeout = v.text("timeout").unwrap_or_else(|| "5s".into());
    let path = v.text("path").unwrap_or_else(|| "/".into());
    let host = v.text("host");
    let source_addrs: u32 = v.number("source_addrs")?.unwrap_or(1);
    let interval = v.text("interval");

    let to = match parse_target(&to_text) {
        Ok(Target::Addr(addr)) => addr,
        Ok(Target::SelfSink) => {
            return Err(usage(format!(
                "`to` '{to_text}': give the server as HOST:PORT, e.g. 127.0.0.1:8080"
            )))
        }
        Err(e) => return Err(usage(format!("`to` '{to_text}': {e}"))),
    };
    let protocol = match v.text("handler") {
        Some(p) => p
            .parse::<LoadProtocol>()
            .map_err(|e| usage(format!("`handler` {e}")))?,
        None if clients.is_some() => LoadProtocol::Stevens,
        None => LoadProtocol::Http,
    };
    let (connections, new_connection) = match (clients, conns) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "`clients` and `connections` both given: `clients` C is stevens mode (a connection per request); use one of them",
            ))
        }
        (Some(n), None) => (n, true),
        (None, n) => (n.unwrap_or(10), v.text("new_connection").is_some()),
    };
    if reps.is_some() {
        let unsupported = [
            ("requests", requests.is_some()),
            ("path", path != "/"),
            ("host", host.is_some()),
            ("source_addrs", source_addrs != 1),
        ];
        if let Some((key, _)) = unsupported.iter().find(|(_, given)| *given) {
            return Err(usage(format!(
                "`{key}` is not available with `reps` (the load workload bounds runs by `duration` or `loops`): drop `{key}`, or drop `reps` for a single run"
            )));
        }
    }
    if source_addrs > 1 && !matches!(to.ip(), IpAddr::V4(ip) if ip.is_loopback()) {
        return Err(usage(format!(
            "`source_addrs` {source_addrs} needs an IPv4 loopback target (127.0.0.0/8), not {to}: drop `source_addrs`"
        )));
    }
    let mut p = Params::new();
    p.set("to", to.to_string());
    p.set("handler", protocol.name());
    p.set(
        "threads",
        threads
            .unwrap_or_else(|| socklab_sys::host::cores().min(256))
            .to_string(),
    );
    p.set("timeout", timeout);
    let bytes = v.text("bytes").unwrap_or_else(|| "100".into());
    match protocol {
        LoadProtocol::Stevens => {
            if !new_connection {
                return Err(usage(
                    "`handler` stevens without `clients` keeps connections alive, which the load workload does not run: give `clients` C (a connection per request, the book's client)",
                ));
            }
            p.set("clients", connections.to_string());
            p.set(
                "loops",
                loops.map_or_else(|| "unlimited".into(), |l| l.to_string()),
            );
            p.set("bytes", bytes);
        }
        LoadProtocol::Echo | LoadProtocol::Http | LoadProtocol::Https => {
            p.set("connections", connections.to_string());
            p.set("new_connection", new_connection.to_string());
            if let Some(l) = loops {
                p.set("conn_requests", l.to_string());
            }
            if protocol == LoadProtocol::Echo {
                p.set("bytes", bytes);
            } else {
                if path != "/" {
                    p.set("path", path);
                }
                if let Some(h) = host {
                    p.set("host", h);
                }
            }
        }
    }
    let duration = match v.text("duration") {
        Some(d) => d,
        None if loops.is_some() || requests.is_some() => format_duration(COUNT_RUN_CAP),
        None => "10s".into(),
    };
    p.set("duration", duration);
    if let Some(r) = v.text("rate") {
        p.set("rate", r);
    }
    if let Some(n) = requests {
        p.set("requests", n.to_string());
    }
    if let Some(i) = &interval {
        p.set("interval", i.clone());
    }
    if let Some(t) = v.text("tls_trust") {
        p.set("tls_trust", t);
    }
    if v.text("tls_resume").is_some() {
        p.set("tls_resume", "true");
    }
    if reps.is_none() {
        p.set("source_addrs", source_addrs.to_string());
        p.set("partial", "keep");
    }
    Workload::from_params("load", &p).map_err(in_words)?;
    Ok(OneOff {
        to: to_text,
        params: p,
        connections: clients.or(conns).unwrap_or(10),
        intervals: interval.is_some(),
    })
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (as a shell's `ulimit -n $(ulimit -Hn)`)
/// and refuses, in one line, a run whose `connections` cannot all be open at once: each would
/// otherwise fail its connect with EMFILE, counted as a connect failure of the server.
pub fn ensure_descriptors(connections: usize) -> Result<(), LabError> {
    use socklab_sys::procs::{nofile_limit, set_nofile_limit};
    let (mut soft, hard) = nofile_limit().map_err(|source| LabError::Io {
        context: "the descriptor limit (RLIMIT_NOFILE)".into(),
        source,
    })?;
    if soft < hard && set_nofile_limit(hard).is_ok() {
        soft = hard;
    }
    descriptors_fit(connections, soft, hard)
}

/// Whether `connections` fit under the soft limit `soft` (hard limit `hard`).
fn descriptors_fit(connections: usize, soft: u64, hard: u64) -> Result<(), LabError> {
    let need = connections as u64 + FD_MARGIN;
    if soft >= need {
        return Ok(());
    }
    let fit = soft.saturating_sub(FD_MARGIN);
    let instead = if fit > 0 {
        format!(", or run at most {fit} connections")
    } else {
        String::new()
    };
    Err(usage(format!(
        "`connections` {connections} needs {need} open descriptors (one per connection, {FD_MARGIN} for socklab) but this process may open only {soft} (hard limit {hard}): raise it (ulimit -n {need}, above the hard limit as root){instead}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Key;
    use crate::workload::load::KEYS;

    fn key(name: &str) -> Key {
        *KEYS.iter().find(|k| k.name == name).expect("a load key")
    }

    fn given(pairs: &[(&str, &str)]) -> Vec<Given> {
        pairs
            .iter()
            .map(|(k, v)| Given::new(key(k), [*v]))
            .collect()
    }

    fn err(pairs: &[(&str, &str)], reps: Option<usize>) -> String {
        one_off(&given(pairs), reps, 0).unwrap_err().to_string()
    }

    #[test]
    fn clients_mean_stevens_and_connections_mean_http_with_one_off_defaults() {
        let o = one_off(&given(&[("to", "127.0.0.1:9"), ("clients", "5")]), None, 0).unwrap();
        assert_eq!(o.params.get("handler"), Some("stevens"));
        assert_eq!(o.params.get("clients"), Some("5"));
        assert_eq!(o.params.get("loops"), Some("unlimited"));
        assert_eq!(o.params.get("bytes"), Some("100"));
        assert_eq!(o.params.get("duration"), Some("10s"));
        assert_eq!(o.params.get("partial"), Some("keep"));
        assert_eq!(o.connections, 5);
        let o = one_off(&given(&[("to", "127.0.0.1:9"), ("loops", "3")]), None, 0).unwrap();
        assert_eq!(o.params.get("handler"), Some("http"));
        assert_eq!(o.params.get("connections"), Some("10"));
        assert_eq!(o.params.get("conn_requests"), Some("3"));
        assert_eq!(o.params.get("duration"), Some("300s"));
        assert_eq!(o.connections, 10);
        assert!(!o.intervals);
    }

    #[test]
    fn the_command_rules_name_keys() {
        let both = [
            ("to", "127.0.0.1:9"),
            ("clients", "2"),
            ("connections", "3"),
        ];
        assert!(err(&both, None).starts_with("`clients` and `connections` both given"));
        assert_eq!(
            err(&[("to", "127.0.0.1:9"), ("threads", "x")], None),
            "`threads` 'x': give a whole number, e.g. `threads` 10"
        );
        assert!(err(&[("to", "self")], None).starts_with("`to` 'self': give the server"));
        let reps = err(&[("to", "127.0.0.1:9"), ("requests", "5")], Some(3));
        assert!(
            reps.starts_with("`requests` is not available with `reps`"),
            "{reps}"
        );
        let src = err(&[("to", "10.0.0.1:9"), ("source_addrs", "4")], None);
        assert!(
            src.starts_with("`source_addrs` 4 needs an IPv4 loopback"),
            "{src}"
        );
        let e = one_off(&given(&[("to", "127.0.0.1:9")]), None, 1).unwrap_err();
        assert!(e.to_string().starts_with("`warmup` needs `reps`"));
        assert!(one_off(&[], None, 0)
            .unwrap_err()
            .to_string()
            .starts_with("`to` is required"));
    }

    #[test]
    fn a_run_that_does_not_fit_the_descriptor_limit_says_how_many_would() {
        assert!(descriptors_fit(100, 1024, 4096).is_ok());
        let e = descriptors_fit(2000, 1024, 1024).unwrap_err().to_string();
        assert!(
            e.starts_with("`connections` 2000 needs 2064 open descriptors"),
            "{e}"
        );
        assert!(e.ends_with("or run at most 960 connections"), "{e}");
        let e = descriptors_fit(10, 20, 20).unwrap_err().to_string();
        assert!(e.ends_with("above the hard limit as root)"), "{e}");
    }
}
