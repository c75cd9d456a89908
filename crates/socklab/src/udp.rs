//! `socklab sink --udp` (the UDP bulk receiver) and `socklab bulk --udp` (a plan of the `udp`
//! workload): argument checks and printing; the work is in `socklab_net::udpbulk` and
//! `socklab_lab::workload::udp`.

use std::net::SocketAddr;
use std::time::Duration;

use socklab_lab::flags::{self, outside_mode, Rules};
use socklab_lab::params::Modes;
use socklab_lab::plan::Plan;
use socklab_lab::roles::{self, Say};
use socklab_net::udpbulk::SinkConfig;
use socklab_units::{format_size, parse_duration, parse_size};

use crate::cli::{BulkArgs, SinkArgs};
use crate::commands::{command_line, order_seed, parse_bind, parse_order, usage, Failure};
use crate::dryrun;

/// `socklab sink --udp`.
pub fn sink(a: SinkArgs, dry: bool) -> Result<(), Failure> {
    let ip = parse_bind(&a.bind)?;
    let rcvbuf = match parse_size(&a.rcvbuf).map_err(|e| usage(format!("--rcvbuf {e}")))? {
        n @ 1..=0x4000_0000 => n as usize,
        _ => {
            return Err(usage(format!(
                "--rcvbuf {}: use 1 to 1G bytes, e.g. 4M",
                a.rcvbuf
            )))
        }
    };
    let interval = if a.interval.trim() == "off" {
        None
    } else {
        match parse_duration(&a.interval).map_err(|e| usage(format!("--interval {e}")))? {
            d if d >= Duration::from_millis(10) => Some(d),
            _ => {
                return Err(usage(format!(
                    "--interval {}: use 10ms or more, or off",
                    a.interval
                )))
            }
        }
    };
    let cfg = SinkConfig {
        bind: SocketAddr::new(ip, a.port),
        rcvbuf,
        interval,
        ..SinkConfig::default()
    };
    if dry {
        return dryrun::print_checked(&format!(
            "socklab sink --udp would listen on {} (UDP, SO_RCVBUF {})",
            cfg.bind,
            format_size(rcvbuf as u64)
        ));
    }
    let say = Say {
        announce: a.announce,
        quiet: a.quiet,
    };
    Ok(roles::udp_sink::run(cfg, say)?)
}

/// The first flag of TCP bulk given with `--udp`: a key outside the UDP mode (by its
/// descriptor), or TCP bulk's `--cross` and `--reference`.
fn tcp_only(a: &BulkArgs) -> Option<String> {
    outside_mode(&a.keys.given, Modes::UDP)
        .map(|g| g.flag.clone())
        .or_else(|| a.cross.then(|| "--cross".to_string()))
        .or_else(|| a.reference.then(|| "--reference".to_string()))
}

/// The flags of UDP bulk, when given without `--udp` (keys outside the TCP mode).
pub fn check_tcp(a: &BulkArgs) -> Result<(), Failure> {
    match outside_mode(&a.keys.given, Modes::TCP) {
        Some(g) => Err(usage(format!(
            "{} is for UDP bulk: add --udp (TCP bulk sends as fast as TCP lets it)",
            g.flag
        ))),
        None => Ok(()),
    }
}

/// `socklab bulk --udp`: a plan of the `udp` workload.
pub fn plan(a: &BulkArgs) -> Result<Plan, Failure> {
    if a.keys.value("to").is_some() {
        return Err(usage(
            "--udp with --to: UDP bulk starts its own receiver (socklab sink --udp) and reads each test's counts from it; omit --to",
        ));
    }
    if let Some(flag) = tcp_only(a) {
        return Err(usage(match flag.as_str() {
            "--reverse" | "--bidir" | "--streams" => format!(
                "--udp does not take {flag}: UDP bulk is one paced sender here and the receiver socklab starts; {flag} is TCP bulk's (drop --udp)"
            ),
            _ => format!(
                "--udp does not take {flag} (TCP bulk's): UDP bulk sends --size-byte datagrams at --rate"
            ),
        }));
    }
    let rules = Rules {
        sweeps: &a.sweep,
        ..Rules::default()
    };
    let mut group = flags::group("udp", &a.keys.given, &rules)?;
    a.link.add_to(&mut group);
    let k = &a.keys;
    Ok(Plan::build(
        &k.name,
        "",
        &[group],
        k.reps,
        k.warmup,
        parse_order(&k.order, order_seed(None)?)?,
        &command_line(),
    )?)
}
