//! The `sink --udp` role: the UDP bulk receiver's main loop, one `REPORT` line per test
//! (and `INTERVAL` lines when asked) for the lab that started it.

use socklab_net::childline::ChildLine;
use socklab_net::udpbulk::{SinkConfig, TestReport, UdpSink};
use socklab_sys::process::interrupted;
use socklab_units::format_size;

use super::{out, print_server_cpu, server_started, RoleError, Say};

/// One line per test for people: what arrived of what the FIN said was sent.
pub fn test_line(r: &TestReport) -> String {
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

/// Listens as `cfg` says and receives tests until SIGINT/SIGTERM; then (unless quiet) the CPU
/// time and its totals.
pub fn run(cfg: SinkConfig, say: Say) -> Result<(), RoleError> {
    let sink = UdpSink::bind(cfg).map_err(|e| RoleError::Run(e.to_string()))?;
    let addr = sink.local_addr()?;
    server_started(addr, say.announce)?;
    if !say.quiet {
        eprintln!(
            "socklab sink listening on {addr} (UDP, receive buffer {} granted; Ctrl-C stops)",
            format_size(sink.rcvbuf() as u64)
        );
    }
    let Say { quiet, announce } = say;
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
        .map_err(|e| RoleError::Run(e.to_string()))?;
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
