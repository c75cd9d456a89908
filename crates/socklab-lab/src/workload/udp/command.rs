//! `socklab bulk --udp`: the rules of bulk's UDP mode beside its keys (no `to` but an
//! `iperf3://` one, none of TCP bulk's other keys or flags), and its group of the `udp` workload. Errors name keys in backticks
//! (or the flag as written, for a preset); the binary writes them as its flags.

use crate::flags::{self, outside_mode, Given, Rules};
use crate::model::params::Modes;
use crate::plan::Group;
use crate::LabError;

fn usage(m: impl Into<String>) -> LabError {
    LabError::Plan(m.into())
}

/// TCP bulk's flags that are not keys, as bulk's command gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpFlags {
    /// `cross`: every combination of nbufs and bufsize.
    pub cross: bool,
    /// `reference`: pipe and memcpy rows.
    pub reference: bool,
}

/// The first of TCP bulk's flags given with `udp`: a key outside the UDP mode (by its
/// descriptor, as written), or TCP bulk's `cross` and `reference`.
fn tcp_only(given: &[Given], tcp: TcpFlags) -> Option<String> {
    outside_mode(given, Modes::UDP)
        .map(|g| g.flag.clone())
        .or_else(|| tcp.cross.then(|| "`cross`".to_string()))
        .or_else(|| tcp.reference.then(|| "`reference`".to_string()))
}

/// The keys of UDP bulk, when given without `udp` (keys outside the TCP mode).
pub fn check_tcp(given: &[Given]) -> Result<(), LabError> {
    match outside_mode(given, Modes::TCP) {
        Some(g) => Err(usage(format!(
            "{} is for UDP bulk: add `udp` (TCP bulk sends as fast as TCP lets it)",
            g.flag
        ))),
        None => Ok(()),
    }
}

/// `socklab bulk --udp`'s group of the `udp` workload: the keys given and the sweeps, once
/// none of TCP bulk's is among them.
pub fn bulk_group(given: &[Given], sweeps: &[String], tcp: TcpFlags) -> Result<Group, LabError> {
    let iperf3 = |v: &String| v.trim().starts_with("iperf3://");
    if let Some(g) = given
        .iter()
        .find(|g| g.key.name == "to" && !g.values.iter().all(iperf3))
    {
        return Err(usage(format!(
            "`udp` with `to` {}: UDP bulk starts its own receiver (socklab sink `udp`) and reads each test's counts from it; omit `to`, or give iperf3://HOST[:PORT] for an `iperf3 -s`",
            g.values.join(",")
        )));
    }
    // Only an iperf3 server sends over UDP (`direction` down, its -R).
    let iperf3_to = given.iter().any(|g| g.key.name == "to");
    if let Some(g) = given.iter().find(|g| g.key.name == "direction") {
        let down = |v: &String| matches!(v.trim(), "up" | "down" | "reverse");
        if !iperf3_to || !g.values.iter().all(down) {
            let f = &g.flag;
            return Err(usage(format!(
                "`udp` does not take {f}: UDP bulk is one paced sender here and the receiver socklab starts; {f} is TCP bulk's (drop `udp`), or an iperf3 server's with `to` iperf3://HOST (down only)"
            )));
        }
    }
    if let Some(flag) = tcp_only(given, tcp) {
        return Err(usage(match flag.trim_start_matches('-') {
            "reverse" | "bidir" | "streams" => format!(
                "`udp` does not take {flag}: UDP bulk is one paced sender here and the receiver socklab starts; {flag} is TCP bulk's (drop `udp`)"
            ),
            _ => format!(
                "`udp` does not take {flag} (TCP bulk's): UDP bulk sends `size`-byte datagrams at `rate`"
            ),
        }));
    }
    let rules = Rules {
        sweeps,
        ..Rules::default()
    };
    flags::group("udp", given, &rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Key;
    use crate::workload::{bulk, udp};

    fn key(keys: &[Key], name: &str, mode: Modes) -> Key {
        keys.iter()
            .find(|k| k.name == name)
            .expect("a key")
            .modes(mode)
    }

    #[test]
    fn tcp_keys_and_flags_are_refused_with_udp() {
        let streams = Given::new(key(bulk::KEYS, "streams", Modes::TCP), ["2"]);
        let e = bulk_group(&[streams], &[], TcpFlags::default()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("`udp` does not take --streams: UDP bulk is one paced sender"),
            "{e}"
        );
        let cross = TcpFlags {
            cross: true,
            ..TcpFlags::default()
        };
        let e = bulk_group(&[], &[], cross).unwrap_err().to_string();
        assert_eq!(
            e,
            "`udp` does not take `cross` (TCP bulk's): UDP bulk sends `size`-byte datagrams at `rate`"
        );
        let to = Given::new(key(bulk::KEYS, "to", Modes::TCP), ["127.0.0.1:9"]);
        let e = bulk_group(&[to], &[], TcpFlags::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("`udp` with `to` 127.0.0.1:9"),
            "{e}"
        );
        let to = Given::new(key(udp::KEYS, "to", Modes::UDP), ["iperf3://127.0.0.1"]);
        let g = bulk_group(&[to], &[], TcpFlags::default()).unwrap();
        assert_eq!(g.fixed.get("to"), Some("iperf3://127.0.0.1"));
    }

    #[test]
    fn udp_keys_need_udp_and_make_a_udp_group() {
        let rate = Given::new(key(udp::KEYS, "rate", Modes::UDP), ["10M"]);
        let e = check_tcp(std::slice::from_ref(&rate)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--rate is for UDP bulk: add `udp` (TCP bulk sends as fast as TCP lets it)"
        );
        let g = bulk_group(&[rate], &[], TcpFlags::default()).unwrap();
        assert_eq!(g.kind, "udp");
        assert_eq!(g.fixed.get("rate"), Some("10M"));
        assert!(check_tcp(&[]).is_ok());
    }
}
