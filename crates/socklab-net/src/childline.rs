//! The child line protocol: the lines a server started by the lab (`socklab sink`, `echo`,
//! `serve`, `transfer serve` with `--announce`) prints on stdout, in one place for the printer
//! and the reader.
//!
//! | line | when |
//! |---|---|
//! | `LISTENING <addr>` | first, once the server listens |
//! | `EFFECTIVE k=v k=v …` | once, the server-side socket options as the kernel reported them |
//! | `STATS {json}` | at exit, `socklab serve`'s [`ServeReport`] |
//! | `REPORT {json}` | per test a server measured (`socklab sink --udp`: a [`crate::udpbulk::TestReport`]) |
//! | `INTERVAL {json}` | `socklab sink --udp --interval`: each interval of a test as it closes, `{"test_id": …, "index": k, "interval": {…}}` (a [`crate::udpbulk::stats::Interval`]) |
//! | `USAGE user_us=… sys_us=… nvcsw=… nivcsw=… maxrss_kib=…` | at exit, a role started by a controller on another host (`--until-eof`): its own rusage, itself plus reaped children (where the controller cannot `wait4`) |

use std::fmt;
use std::net::SocketAddr;

use socklab_sys::usage::Usage;

use crate::server::ServeReport;

/// Prefix of the first line: the address the server listens on.
pub const LISTENING: &str = "LISTENING ";
/// Prefix of the effective server-side options line.
pub const EFFECTIVE: &str = "EFFECTIVE ";
/// Prefix of the rusage line of a remote role.
pub const USAGE: &str = "USAGE ";
/// Prefix of the serve report line.
pub use crate::server::report::STATS_PREFIX as STATS;
/// Prefix of a per-test report line.
pub const REPORT: &str = "REPORT ";
/// Prefix of a live interval line.
pub const INTERVAL: &str = "INTERVAL ";

/// One line of the protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildLine {
    /// `LISTENING <addr>`.
    Listening(SocketAddr),
    /// `EFFECTIVE k=v …`: the options as `(name, value)` pairs, in the order printed.
    Effective(Vec<(String, String)>),
    /// `STATS {json}`.
    Stats(Box<ServeReport>),
    /// `REPORT {json}`: one test's report, as JSON (the workload that asked reads its type).
    Report(serde_json::Value),
    /// `INTERVAL {json}`: one closed interval of a test, as JSON.
    Interval(serde_json::Value),
    /// `USAGE user_us=… sys_us=… nvcsw=… nivcsw=… maxrss_kib=…`.
    Usage(Usage),
}

impl ChildLine {
    /// Parses one line (without its newline); `None` for any other line, or a line of the
    /// protocol whose value does not parse.
    pub fn parse(line: &str) -> Option<ChildLine> {
        let line = line.trim_end();
        if let Some(a) = line.strip_prefix(LISTENING) {
            return a.trim().parse().ok().map(ChildLine::Listening);
        }
        if let Some(kv) = line.strip_prefix(EFFECTIVE) {
            let pairs = kv
                .split_whitespace()
                .map(|t| match t.split_once('=') {
                    Some((k, v)) => (k.to_string(), v.to_string()),
                    None => (t.to_string(), String::new()),
                })
                .collect();
            return Some(ChildLine::Effective(pairs));
        }
        if let Some(j) = line.strip_prefix(REPORT) {
            return serde_json::from_str(j).ok().map(ChildLine::Report);
        }
        if let Some(j) = line.strip_prefix(INTERVAL) {
            return serde_json::from_str(j).ok().map(ChildLine::Interval);
        }
        if let Some(kv) = line.strip_prefix(USAGE) {
            return parse_usage(kv).map(ChildLine::Usage);
        }
        if let Some(j) = line.strip_prefix(STATS) {
            return serde_json::from_str(j)
                .ok()
                .map(|r| ChildLine::Stats(Box::new(r)));
        }
        None
    }
}

impl fmt::Display for ChildLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildLine::Listening(a) => write!(f, "{LISTENING}{a}"),
            ChildLine::Effective(kv) => {
                f.write_str(EFFECTIVE)?;
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                Ok(())
            }
            ChildLine::Stats(r) => f.write_str(&r.stats_line()),
            ChildLine::Report(v) => write!(f, "{REPORT}{v}"),
            ChildLine::Interval(v) => write!(f, "{INTERVAL}{v}"),
            ChildLine::Usage(u) => write!(
                f,
                "{USAGE}user_us={} sys_us={} nvcsw={} nivcsw={} maxrss_kib={}",
                u.user.as_micros(),
                u.sys.as_micros(),
                u.nvcsw,
                u.nivcsw,
                u.maxrss_kib
            ),
        }
    }
}

/// The `k=v …` fields of a `USAGE` line; `None` when one of the five is missing or bad.
fn parse_usage(kv: &str) -> Option<Usage> {
    let mut u = Usage::default();
    let mut seen = 0u8;
    for t in kv.split_whitespace() {
        let (k, v) = t.split_once('=')?;
        let n: u64 = v.parse().ok()?;
        let bit = match k {
            "user_us" => {
                u.user = std::time::Duration::from_micros(n);
                1
            }
            "sys_us" => {
                u.sys = std::time::Duration::from_micros(n);
                2
            }
            "nvcsw" => {
                u.nvcsw = n;
                4
            }
            "nivcsw" => {
                u.nivcsw = n;
                8
            }
            "maxrss_kib" => {
                u.maxrss_kib = n;
                16
            }
            _ => 0,
        };
        seen |= bit;
    }
    (seen == 31).then_some(u)
}

/// The rusage of this process and the children it reaped: what a role reports in its
/// `USAGE` line (what `wait4` would tell a parent on the same host).
pub fn own_usage() -> Usage {
    use socklab_sys::usage::{getrusage, Who};
    let (me, kids) = (getrusage(Who::Process), getrusage(Who::Children));
    Usage {
        user: me.user + kids.user,
        sys: me.sys + kids.sys,
        nvcsw: me.nvcsw + kids.nvcsw,
        nivcsw: me.nivcsw + kids.nivcsw,
        maxrss_kib: me.maxrss_kib.max(kids.maxrss_kib),
    }
}

/// The `k=v k=v` text of effective options (as stored with an experiment's facts).
pub fn effective_text(kv: &[(String, String)]) -> String {
    kv.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_print_and_parse_back() {
        let l = ChildLine::Listening("127.0.0.1:5001".parse().unwrap());
        assert_eq!(l.to_string(), "LISTENING 127.0.0.1:5001");
        assert_eq!(ChildLine::parse(&l.to_string()), Some(l));
        let e = ChildLine::Effective(vec![
            ("nodelay".into(), "1".into()),
            ("sndbuf".into(), "131072".into()),
        ]);
        assert_eq!(e.to_string(), "EFFECTIVE nodelay=1 sndbuf=131072");
        assert_eq!(
            ChildLine::parse("EFFECTIVE nodelay=1 sndbuf=131072\n"),
            Some(e)
        );
        let r = ServeReport::new(
            crate::server::Design::Epoll,
            crate::server::Handler::Http,
            &socklab_sys::usage::Usage::default(),
            vec![crate::server::report::WorkerCount {
                connections: 3,
                requests: 7,
            }],
            0,
            std::time::Duration::from_millis(1500),
        );
        let s = ChildLine::Stats(Box::new(r.clone()));
        assert_eq!(s.to_string(), r.stats_line());
        assert_eq!(ChildLine::parse(&s.to_string()), Some(s));
    }

    #[test]
    fn usage_lines_print_and_parse_back() {
        let u = Usage {
            user: std::time::Duration::from_micros(1_500_000),
            sys: std::time::Duration::from_micros(250),
            nvcsw: 7,
            nivcsw: 2,
            maxrss_kib: 4096,
        };
        let l = ChildLine::Usage(u);
        assert_eq!(
            l.to_string(),
            "USAGE user_us=1500000 sys_us=250 nvcsw=7 nivcsw=2 maxrss_kib=4096"
        );
        assert_eq!(ChildLine::parse(&l.to_string()), Some(l));
        assert_eq!(ChildLine::parse("USAGE user_us=1 sys_us=2"), None);
        assert_eq!(
            ChildLine::parse("USAGE user_us=x sys_us=2 nvcsw=1 nivcsw=1 maxrss_kib=1"),
            None
        );
        let own = own_usage();
        assert!(own.maxrss_kib > 0, "{own:?}");
    }

    #[test]
    fn other_lines_and_bad_values_are_not_protocol() {
        assert_eq!(ChildLine::parse("socklab sink listening"), None);
        assert_eq!(ChildLine::parse("LISTENING nowhere"), None);
        assert_eq!(ChildLine::parse("STATS {broken"), None);
        assert_eq!(ChildLine::parse("REPORT {broken"), None);
        let r = ChildLine::Report(serde_json::json!({"test_id": 7u64}));
        assert_eq!(r.to_string(), r#"REPORT {"test_id":7}"#);
        assert_eq!(ChildLine::parse(&r.to_string()), Some(r));
        assert_eq!(ChildLine::parse("INTERVAL {broken"), None);
        let i = ChildLine::Interval(serde_json::json!({"test_id": 7u64, "index": 2}));
        assert_eq!(i.to_string(), r#"INTERVAL {"index":2,"test_id":7}"#);
        assert_eq!(ChildLine::parse(&i.to_string()), Some(i));
    }
}
