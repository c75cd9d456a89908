//! The `sink --udp` role: the UDP bulk receiver's main loop, one `REPORT` line per test
//! (and `INTERVAL` lines when asked) for the lab that started it.

use std::net::SocketAddr;
use std::time::Duration;

use socklab_net::childline::ChildLine;
use socklab_net::udpbulk::{SinkConfig, TestReport, UdpSink};
use socklab_sys::process::interrupted;
use socklab_units::{format_size, parse_duration, parse_size};

use super::{out, print_server_cpu, server_started, RoleError, Say};

/// The receiver's configuration from its arguments: `rcvbuf` (1 to 1G bytes) and
/// `interval` (10 ms or more, or `off`). Errors name the key in backticks.
pub fn config(bind: SocketAddr, rcvbuf: &str, interval: &str) -> Result<SinkConfig, RoleError> {
    let usage = |m: String| RoleError::Usage(m);
    let rcvbuf = match parse_size(rcvbuf).map_err(|e| usage(format!("`rcvbuf` {e}")))? {
        n @ 1..=0x4000_0000 => n as usize,
        _ => {
            return Err(usage(format!(
                "`rcvbuf` {rcvbuf}: use 1 to 1G bytes, e.g. 4M"
            )))
        }
    };
    let interval = if interval.trim() == "off" {
        None
    } else {
        match parse_duration(interval).map_err(|e| usage(format!("`interval` {e}")))? {
            d if d >= Duration::from_millis(10) => Some(d),
            _ => {
                return Err(usage(format!(
                    "`interval` {interval}: use 10ms or more, or off"
                )))
            }
        }
    };
    Ok(SinkConfig {
        bind,
        rcvbuf,
        interval,
        ..SinkConfig::default()
    })
}

/// What a dry run says the receiver of `cfg` would do, after the command's name.
pub fn dry_line(cfg: &SinkConfig) -> String {
    format!(
        "would listen on {} (UDP, SO_RCVBUF {})",
        cfg.bind,
        format_size(cfg.rcvbuf as u64)
    )
}

/// One line per test for people: what arrived of what the FIN said was sent.
pub fn test_line(r: &TestReport) -> String {
    if let Some(why) = &r.refused {
        return format!("test {:016x}: {why}", r.test_id);
    }
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
    let foreign = if r.foreign > 0 {
        format!(", {} from other sources not counted", r.foreign)
    } else {
        String::new()
    };
    format!(
        "test {:016x}: {sent}, {} dup, {} reordered ({} early), jitter {:.1} us{owd}, {} kernel drops{foreign}, ended by {:?}",
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
                    eprintln!("{}", socklab_units::text::line(&test_line(&r)));
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
            "tests = {}, not ours = {}, late = {}, refused = {}, from other sources = {}",
            totals.tests, totals.malformed, totals.late, totals.refused, totals.foreign
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_are_checked_and_name_their_key() {
        let bind: SocketAddr = "127.0.0.1:5001".parse().unwrap();
        let c = config(bind, "4M", "off").unwrap();
        assert_eq!(c.rcvbuf, 4 << 20);
        assert_eq!(c.interval, None);
        assert_eq!(
            config(bind, "4M", "100ms").unwrap().interval,
            Some(Duration::from_millis(100))
        );
        let e = config(bind, "0", "1s").unwrap_err().to_string();
        assert_eq!(e, "`rcvbuf` 0: use 1 to 1G bytes, e.g. 4M");
        let e = config(bind, "4M", "1ms").unwrap_err().to_string();
        assert_eq!(e, "`interval` 1ms: use 10ms or more, or off");
        assert!(
            dry_line(&c).ends_with("(UDP, SO_RCVBUF 4M)"),
            "{}",
            dry_line(&c)
        );
    }
}
