//! `socklab sink --udp` (the UDP bulk receiver) and `socklab bulk --udp` (a plan of the `udp`
//! workload): argument checks and printing; the work is in `socklab_net::udpbulk` and
//! `socklab_lab::workload::udp`.

use std::net::SocketAddr;
use std::time::Duration;

use socklab_lab::params::Params;
use socklab_lab::plan::{Axis, Group, Plan};
use socklab_lab::roles::{self, Say};
use socklab_lab::workload::bulk;
use socklab_net::udpbulk::SinkConfig;
use socklab_net::units::{format_size, parse_duration, parse_size};

use crate::cli::{BulkArgs, SinkArgs};
use crate::commands::{
    command_line, list_axis, parse_bind, parse_order, sweep_values, usage, Failure,
};
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

/// The flags of TCP bulk that UDP bulk does not take, when given (compared with their
/// defaults).
fn tcp_only(a: &BulkArgs) -> Option<&'static str> {
    let not_default = |v: &[String], d: &str| v.len() != 1 || v[0] != d;
    [
        (
            not_default(&a.strategy, bulk::STRATEGY.default),
            "--strategy",
        ),
        (not_default(&a.nbufs, bulk::NBUFS.default), "--nbufs"),
        (not_default(&a.bufsize, bulk::BUFSIZE.default), "--bufsize"),
        (a.cross, "--cross"),
        (a.iterations.is_some(), "--iterations"),
        (a.bytes.is_some(), "--bytes"),
        (not_default(&a.cc, bulk::CC.default), "--cc"),
        (not_default(&a.streams, bulk::STREAMS.default), "--streams"),
        (a.reverse, "--reverse"),
        (a.bidir, "--bidir"),
        (!a.pacing_rate.is_empty(), "--pacing-rate"),
        (a.affinity.is_some(), "--affinity"),
        (a.server_affinity.is_some(), "--server-affinity"),
        (a.nodelay, "--nodelay"),
        (a.read_size != bulk::READ_SIZE.default, "--read-size"),
        (a.verify, "--verify"),
        (a.reference, "--reference"),
        (a.omit.is_some(), "--omit"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// The flags of UDP bulk, when given without `--udp`.
pub fn check_tcp(a: &BulkArgs) -> Result<(), Failure> {
    let given = [
        (!a.rate.is_empty(), "--rate"),
        (!a.size.is_empty(), "--size"),
        (!a.gso.is_empty(), "--gso"),
        (a.rcvbuf.is_some(), "--rcvbuf"),
        (a.trial.is_some(), "--trial"),
        (a.trials.is_some(), "--trials"),
        (a.max_loss.is_some(), "--max-loss"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag));
    match given {
        Some(flag) => Err(usage(format!(
            "{flag} is for UDP bulk: add --udp (TCP bulk sends as fast as TCP lets it)"
        ))),
        None => Ok(()),
    }
}

/// `socklab bulk --udp`: a plan of the `udp` workload.
pub fn plan(a: &BulkArgs) -> Result<Plan, Failure> {
    if a.to.is_some() {
        return Err(usage(
            "--udp with --to: UDP bulk starts its own receiver (socklab sink --udp) and reads each test's counts from it; omit --to",
        ));
    }
    if let Some(flag) = tcp_only(a) {
        return Err(usage(match flag {
            "--reverse" | "--bidir" | "--streams" => format!(
                "--udp does not take {flag}: UDP bulk is one paced sender here and the receiver socklab starts; {flag} is TCP bulk's (drop --udp)"
            ),
            _ => format!(
                "--udp does not take {flag} (TCP bulk's): UDP bulk sends --size-byte datagrams at --rate"
            ),
        }));
    }
    let mut fixed = Params::new();
    if let Some(d) = &a.duration {
        fixed.set("duration", d.clone());
    }
    if let Some(s) = &a.sndbuf {
        fixed.set("sndbuf", s.clone());
    }
    if let Some(i) = &a.interval {
        fixed.set("interval", i.clone());
    }
    for (key, v) in [
        ("rcvbuf", &a.rcvbuf),
        ("trial", &a.trial),
        ("trials", &a.trials),
        ("max_loss", &a.max_loss),
    ] {
        if let Some(v) = v {
            fixed.set(key, v.clone());
        }
    }
    let mut axes: Vec<Axis> = Vec::new();
    for (key, vals) in [("rate", &a.rate), ("size", &a.size), ("gso", &a.gso)] {
        if !vals.is_empty() {
            list_axis(key, vals, &mut axes, &mut fixed);
        }
    }
    for s in &a.sweep {
        let (key, vals) = sweep_values(s)?;
        fixed.remove(&key);
        axes.retain(|x| !x.keys.contains(&key));
        axes.push(Axis::single(&key, vals));
    }
    let mut group = Group::new("udp", fixed);
    group.axes = axes;
    a.link.add_to(&mut group);
    Ok(Plan::build(
        &a.name,
        "",
        &[group],
        a.reps,
        a.warmup,
        parse_order(&a.order, a.seed)?,
        &command_line(),
    )?)
}
