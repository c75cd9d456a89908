//! `socklab sink --udp` (the UDP bulk receiver) and `socklab bulk --udp` (a plan of the `udp`
//! workload): argument checks and printing; the work is in `socklab_net::udpbulk` and
//! `socklab_lab::workload::udp`.

use std::net::SocketAddr;
use std::time::Duration;

use socklab_lab::flags::{self, outside_mode, Rules};
use socklab_lab::params::Modes;
use socklab_lab::plan::Plan;
use socklab_net::childline::ChildLine;
use socklab_net::udpbulk::{SinkConfig, TestReport, UdpSink};
use socklab_net::units::{format_size, parse_duration, parse_size};
use socklab_sys::process::interrupted;

use crate::cli::{BulkArgs, SinkArgs};
use crate::commands::{
    command_line, order_seed, out, parse_bind, parse_order, print_server_cpu, server_started,
    usage, Failure,
};
use crate::dryrun;

/// One line per test for people: what arrived of what the FIN said was sent.
fn test_line(r: &TestReport) -> String {
    let c = &r.counts;
    let sent = match r.total {
        Some(t) => {
            let lost = r.lost(t);
            format!(
                "{}/{t} datagrams ({lost} lost, {:.3} %)",
                c.unique,
                100.0 * lost as f64 / t.max(1) as f64
            )
        }
        None => format!("{} datagrams (no FIN arrived: loss unknown here)", c.unique),
    };
    let owd = r
        .owd
        .map(|o| {
            format!(
                ", one-way delay p50 {:.1} us p99 {:.1} us",
                o.p50_ns as f64 / 1e3,
                o.p99_ns as f64 / 1e3
            )
        })
        .unwrap_or_default();
    format!(
        "test {:016x}: {sent}, {} dup, {} reordered ({} early), jitter {:.1} us{owd}, {} kernel drops, ended by {:?}",
        r.test_id,
        c.duplicates,
        c.reordered,
        c.early,
        r.jitter_ns / 1e3,
        r.kernel_drops,
        r.ended
    )
}

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
    let sink = UdpSink::bind(cfg).map_err(|e| Failure::Run(e.to_string()))?;
    let addr = sink.local_addr()?;
    server_started(addr, a.announce)?;
    if !a.quiet {
        eprintln!(
            "socklab sink listening on {addr} (UDP, receive buffer {} granted; Ctrl-C stops)",
            format_size(sink.rcvbuf() as u64)
        );
    }
    let (quiet, announce) = (a.quiet, a.announce);
    // The first failed write to stdout (the lab reading it went away) ends the printing.
    let printed = std::cell::RefCell::new(Ok(()));
    let print = |line: ChildLine| {
        let mut p = printed.borrow_mut();
        if announce && p.is_ok() {
            *p = out(&format!("{line}\n"));
        }
    };
    let totals = sink
        .serve_live(
            &interrupted,
            &mut |r| {
                if !quiet {
                    eprintln!("{}", test_line(&r));
                }
                print(ChildLine::Report(
                    serde_json::to_value(&r).unwrap_or_default(),
                ));
            },
            &mut |id, k, i| {
                print(ChildLine::Interval(serde_json::json!({
                    "test_id": id,
                    "index": k,
                    "interval": i,
                })));
            },
        )
        .map_err(|e| Failure::Run(e.to_string()))?;
    printed.into_inner()?;
    if !quiet {
        print_server_cpu();
        eprintln!(
            "tests = {}, not ours = {}, late = {}, refused = {}",
            totals.tests, totals.malformed, totals.late, totals.refused
        );
    }
    Ok(())
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
