//! `bulk --to iperf3://HOST[:PORT]` in the lab's vocabulary (issue 27 part 2): the target's
//! text, and the iperf3 server's own figures stored beside socklab's (`server_bytes`,
//! `server_cpu_pct`, …; its whole results message in the sample's facts). The client is
//! `socklab_net::bulk::iperf3`.

use serde_json::json;
use socklab_net::iperf3::proto::Results;

use crate::model::metric::{m, Better, Metric};
use crate::model::sample::Sample;
use crate::workload::key::{parse_target, Target};

/// iperf3's port, when `iperf3://HOST` names none.
pub const DEFAULT_PORT: u16 = 5201;

/// `server_bytes`.
pub const SERVER_BYTES: Metric = m(
    "server_bytes",
    "B",
    "server bytes",
    "to = iperf3://: the iperf3 server's own bytes, every stream (received on up streams, sent on down), from its results message",
    Better::Neither,
);

/// `server_cpu_pct`.
pub const SERVER_CPU_PCT: Metric = m(
    "server_cpu_pct",
    "%",
    "server cpu%",
    "to = iperf3://: the iperf3 server's CPU over the test, % of one CPU (its cpu_util_total; _user and _sys beside)",
    Better::Lower,
);

/// `to`: `self`, `HOST:PORT`, or `iperf3://HOST[:PORT]` (an unmodified `iperf3 -s`; port
/// 5201 by default). `Ok((true, _))` for iperf3.
pub fn parse_to(s: &str) -> Result<(bool, Target), String> {
    let Some(rest) = s.trim().strip_prefix("iperf3://") else {
        return parse_target(s).map(|t| (false, t));
    };
    let rest = rest.trim_end_matches('/');
    let self_msg = || {
        "iperf3:// needs a running `iperf3 -s`: write iperf3://HOST[:PORT], e.g. iperf3://127.0.0.1:5201".to_string()
    };
    if rest.is_empty() || rest == "self" {
        return Err(self_msg());
    }
    // A port is given when the text ends in :DIGITS (and is not a bare IPv6 address).
    let has_port = match rest.rsplit_once(':') {
        Some((host, port)) => {
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']'))
        }
        None => false,
    };
    let with_port = if has_port {
        rest.to_string()
    } else if rest.contains(':') && !rest.starts_with('[') {
        format!("[{rest}]:{DEFAULT_PORT}")
    } else {
        format!("{rest}:{DEFAULT_PORT}")
    };
    match parse_target(&with_port)? {
        Target::SelfSink => Err(self_msg()),
        t => Ok((true, t)),
    }
}

/// `to` as [`parse_to`] reads it back.
pub fn to_text(iperf3: bool, to: Target) -> String {
    if iperf3 {
        format!("iperf3://{to}")
    } else {
        to.to_string()
    }
}

/// Adds the server's figures (its results message `r`) to a sample.
pub fn add(s: &mut Sample, r: &Results) {
    let bytes: u64 = r.streams.iter().map(|s| s.bytes).sum();
    s.extend([
        ("server_bytes", bytes as f64),
        ("server_cpu_pct", r.cpu_util_total),
        ("server_user_pct", r.cpu_util_user),
        ("server_sys_pct", r.cpu_util_system),
    ]);
    if let Some(o) = s.extra.as_object_mut() {
        o.insert("iperf3_server".into(), json!(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iperf3_target_is_parsed_with_its_default_port_and_printed_back() {
        let a = |s: &str| Target::Addr(s.parse().unwrap());
        assert_eq!(
            parse_to("iperf3://127.0.0.1"),
            Ok((true, a("127.0.0.1:5201")))
        );
        assert_eq!(
            parse_to("iperf3://127.0.0.1:6000"),
            Ok((true, a("127.0.0.1:6000")))
        );
        assert_eq!(parse_to("iperf3://[::1]"), Ok((true, a("[::1]:5201"))));
        assert_eq!(parse_to("iperf3://::1"), Ok((true, a("[::1]:5201"))));
        assert_eq!(parse_to("iperf3://[::1]:7"), Ok((true, a("[::1]:7"))));
        assert_eq!(parse_to("127.0.0.1:6000"), Ok((false, a("127.0.0.1:6000"))));
        assert_eq!(parse_to("self"), Ok((false, Target::SelfSink)));
        let e = parse_to("iperf3://").unwrap_err();
        assert!(e.contains("iperf3://HOST[:PORT]"), "{e}");
        assert_eq!(
            to_text(true, a("127.0.0.1:5201")),
            "iperf3://127.0.0.1:5201"
        );
        let (i, t) = parse_to(&to_text(true, a("[::1]:5201"))).unwrap();
        assert_eq!((i, t), (true, a("[::1]:5201")));
    }
}
