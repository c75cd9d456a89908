//! Parsers shared by several workloads' keys: where to send (`to`), bounded counts and
//! durations.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use socklab_units::{format_duration, parse_duration};

use crate::model::params::parse_usize;

/// Where a client sends: a server socklab starts itself, or one somebody else started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A server socklab starts itself as a child process on an ephemeral loopback port.
    SelfSink,
    /// A server somebody else started.
    Addr(SocketAddr),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::SelfSink => f.write_str("self"),
            Target::Addr(a) => write!(f, "{a}"),
        }
    }
}

/// Parses `self` or `host:port`.
pub fn parse_target(s: &str) -> Result<Target, String> {
    let t = s.trim();
    if t.is_empty() || t == "self" {
        return Ok(Target::SelfSink);
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(Target::Addr(a));
    }
    if !t.contains(':') {
        return Err("missing port: write HOST:PORT, e.g. 127.0.0.1:5001".into());
    }
    match t.to_socket_addrs() {
        Ok(mut it) => it
            .next()
            .map(Target::Addr)
            .ok_or_else(|| "the name resolves to no address".into()),
        Err(e) => Err(format!(
            "cannot resolve: {e}; write HOST:PORT, e.g. 127.0.0.1:5001"
        )),
    }
}

/// A size or count of at least 1.
pub fn nonzero_usize(s: &str) -> Result<usize, String> {
    match parse_usize(s)? {
        0 => Err("must be at least 1".into()),
        v => Ok(v),
    }
}

/// A count in `lo..=hi`.
pub fn bounded(lo: usize, hi: usize) -> impl Fn(&str) -> Result<usize, String> {
    move |s| match parse_usize(s)? {
        n if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("use {lo} to {hi}")),
    }
}

/// Most rounds, round trips or requests one run may be asked for (`iterations`, `count`,
/// `requests`, `conn_requests`): a guard against a typo, far beyond any useful run.
pub const MAX_COUNT: u64 = 1_000_000_000;
/// Most bytes one bulk run may be asked to send (`bytes`): 1 TiB.
pub const MAX_BYTES: u64 = 1 << 40;

/// A count (K/M/G suffixes allowed) of at most `hi`; a smaller bound is the caller's.
pub fn at_most(hi: u64) -> impl Fn(&str) -> Result<u64, String> {
    move |s| match crate::model::params::parse_count(s)? {
        n if n <= hi => Ok(n),
        _ => Err(format!("at most {hi}")),
    }
}

/// A duration in `lo..=hi`.
pub fn duration_in(lo: Duration, hi: Duration) -> impl Fn(&str) -> Result<Duration, String> {
    move |s| match parse_duration(s)? {
        d if d >= lo && d <= hi => Ok(d),
        _ => Err(format!(
            "use {} to {}",
            format_duration(lo),
            format_duration(hi)
        )),
    }
}

/// An `interval`: a duration of 1 ms or more.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = match s.trim() {
        "0" => Duration::ZERO,
        t => parse_duration(t)?,
    };
    if d.is_zero() {
        return Err("must be more than 0, e.g. 100ms (a line per interval)".into());
    }
    if d < socklab_net::series::MIN_INTERVAL {
        return Err("sample every 1ms or more".into());
    }
    Ok(d)
}

/// An `omit`: a duration (`0` omits nothing).
pub fn parse_omit(s: &str) -> Result<Option<Duration>, String> {
    let d = match s.trim() {
        "0" => Duration::ZERO,
        t => parse_duration(t)?,
    };
    Ok((!d.is_zero()).then_some(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_bounds() {
        assert_eq!(parse_target("self"), Ok(Target::SelfSink));
        assert_eq!(parse_target(""), Ok(Target::SelfSink));
        assert_eq!(
            parse_target("127.0.0.1:9").unwrap().to_string(),
            "127.0.0.1:9"
        );
        assert!(parse_target("localhost")
            .unwrap_err()
            .contains("missing port"));
        assert_eq!(nonzero_usize("0").unwrap_err(), "must be at least 1");
        assert_eq!(bounded(1, 3)("4").unwrap_err(), "use 1 to 3");
        assert_eq!(bounded(1, 3)("2K").unwrap_err(), "use 1 to 3");
        assert_eq!(at_most(3)("3"), Ok(3));
        assert_eq!(at_most(3)("4").unwrap_err(), "at most 3");
        let d = duration_in(Duration::from_millis(1), Duration::from_secs(2));
        assert_eq!(d("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(d("3s").unwrap_err(), "use 1ms to 2s");
        assert_eq!(parse_interval("100ms"), Ok(Duration::from_millis(100)));
        assert!(parse_interval("0")
            .unwrap_err()
            .starts_with("must be more than 0"));
        assert!(parse_interval("0s")
            .unwrap_err()
            .starts_with("must be more than 0"));
        assert!(parse_interval("10us").unwrap_err().contains("1ms or more"));
        assert_eq!(parse_omit("0"), Ok(None));
        assert_eq!(parse_omit("2s"), Ok(Some(Duration::from_secs(2))));
    }
}
