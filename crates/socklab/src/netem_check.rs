//! `socklab netem check`: builds a link, probes each direction, prints configured against
//! measured (a table, or with `--json` one object: see docs/impairment.md).

use std::net::Ipv4Addr;

use socklab_link::capture::Capture;
use std::time::{Duration, Instant};

use socklab_link::check::{compare_lagged, probe, CheckConfig, CheckRow, Endpoints};
use socklab_link::ns::Side;
use socklab_link::{Driver, EmulatedLink, LinkReport};
use socklab_sys::process::{install_interrupt_flag, interrupted};

use crate::cli::LinkArgs;
use crate::commands::{out, usage, Failure};
use crate::dryrun;
use crate::netem::{accounting, close_capture, describe, open_capture, out_json};

fn print_rows(title: &str, rows: &[CheckRow]) -> String {
    let width = |f: fn(&CheckRow) -> &str, min: usize| {
        rows.iter().map(|r| f(r).len()).max().unwrap_or(0).max(min)
    };
    let w = width(|r| &r.what, 0);
    let wc = width(|r| &r.configured, 10);
    let wm = width(|r| &r.measured, 8);
    let mut s = format!(
        "{title}\n  {:w$}  {:wc$}  {:5}  {:wm$}  verdict\n",
        "", "expected", "from", "measured"
    );
    for r in rows {
        s += &format!(
            "  {:w$}  {:wc$}  {:5}  {:wm$}  {}\n",
            r.what,
            r.configured,
            r.from,
            r.measured,
            match r.ok {
                Some(true) => "ok",
                Some(false) => "DIFFERS",
                None => "",
            }
        );
    }
    s
}

/// A direction's verdict: its rows agree, some differ, or the emulator fell behind and the
/// rows say nothing about the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Agrees,
    Differs,
    Invalid,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Differs => "differs",
            Verdict::Invalid => "invalid",
        }
    }
}

/// One probed direction, as text and as JSON.
struct Probed {
    text: String,
    json: serde_json::Value,
    verdict: Verdict,
}

/// Copies the model of `d` still holds (neither delivered nor dropped).
fn in_flight(d: &socklab_link::DirReport) -> u64 {
    let s = &d.stats;
    (s.packets_in + s.duplicated)
        .saturating_sub(s.dropped + s.queue_dropped + s.aqm_dropped + s.delivered)
}

/// Waits (at most `bound`) until the link's model in direction `forward` holds no packet: the
/// probe's receiver stopped reading when the model said the last packet would leave, and the
/// accounting must not leave any of them to the next probe.
fn settle(link: &EmulatedLink, forward: bool, bound: Duration) {
    let end = Instant::now() + bound;
    while Instant::now() < end && !interrupted() {
        let r = link.report();
        if in_flight(if forward { &r.forward } else { &r.backward }) == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn probed(
    title: &str,
    direction: &str,
    (spec, rows): (String, Vec<CheckRow>),
    r: &socklab_link::check::ProbeResult,
    size: usize,
    acc: &LinkReport,
) -> Probed {
    let ok = rows.iter().all(|r| r.ok != Some(false));
    let invalid = acc.invalid_reason();
    let verdict = match (&invalid, ok) {
        (Some(_), _) => Verdict::Invalid,
        (None, true) => Verdict::Agrees,
        (None, false) => Verdict::Differs,
    };
    let mut text = print_rows(
        &format!("{title} ({spec}), {} datagrams of {size} B sent", r.sent),
        &rows,
    );
    text += &accounting(acc);
    text += &format!(
        "  emulator CPU per packet: {:.0} ns\n",
        acc.cpu_ns_per_packet()
    );
    text += &format!(
        "  verdict: {}\n",
        if invalid.is_some() {
            "INVALID: the emulator fell behind its schedule (above), so the rows say nothing about the spec; run it on a quieter machine"
        } else {
            verdict.as_str()
        }
    );
    Probed {
        text,
        json: serde_json::json!({
            "direction": direction,
            "spec": spec,
            "ok": verdict == Verdict::Agrees,
            "verdict": verdict.as_str(),
            "rows": rows.iter().map(CheckRow::to_json).collect::<Vec<_>>(),
            "probe": r.to_json(),
            "emulator": acc.to_json(),
        }),
        verdict,
    }
}

pub fn check(
    link_args: &LinkArgs,
    packets: u64,
    size: usize,
    json: bool,
    dry: bool,
) -> Result<(), Failure> {
    if !(24..=8192).contains(&size) {
        return Err(usage(format!("--size {size}: use 24 to 8192 bytes")));
    }
    if packets == 0 || packets > 1_000_000 {
        return Err(usage(format!("--packets {packets}: use 1 to 1000000")));
    }
    let cfg = link_args.config(None)?;
    if link_args.capture_config()?.is_some() && cfg.driver == Driver::UdpProxy {
        return Err(usage(
            "--capture records what socklab's own emulator does between namespaces: use --driver tun (root)",
        ));
    }
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem check would build a link ({}) and send {packets} datagrams of {size} B each way",
            link_args.link.as_deref().unwrap_or("no impairment")
        ));
    }
    install_interrupt_flag()?;
    let ccfg = CheckConfig { packets, size };
    let stop = || interrupted();
    let capture = open_capture(link_args, "socklab netem check")?;
    let mut dirs = Vec::new();
    let link_json;
    if cfg.driver == Driver::UdpProxy {
        // Forward direction only: sender -> proxy -> receiver, all on loopback, no root.
        let mut link = EmulatedLink::start(&cfg)?;
        let pair = link.pair().clone();
        let free = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let target = free.local_addr()?;
        drop(free);
        let via = link.route(target)?;
        let ends = Endpoints {
            sender_ns: None,
            receiver_ns: None,
            receiver_bind: Ipv4Addr::LOCALHOST,
            receiver_port: target.port(),
            via: Some(via),
        };
        let r = probe(&ends, &pair.forward, &ccfg, &stop)?;
        let stats = link.stop()?;
        let lag = stats.forward.mean_lag_us() * 1e3;
        if interrupted() {
            return Err(Failure::Interrupted(
                "interrupted; the link was removed".into(),
            ));
        }
        link_json = serde_json::json!({
            "driver": "udp-proxy",
            "offload": null,
            "link": socklab_link::spec_text(&pair.forward),
            "link_back": socklab_link::spec_text(&pair.backward),
            "mtu": cfg.mtu,
            "seed": cfg.seed,
        });
        dirs.push(probed(
            &format!("client -> server via udp-proxy ({})", pair.describe()),
            "client->server",
            (
                socklab_link::spec_text(&pair.forward),
                compare_lagged(&pair.forward, &r, lag),
            ),
            &r,
            size,
            &stats,
        ));
    } else {
        let link = EmulatedLink::start_with(&cfg, capture.as_ref().and_then(Capture::tap))?;
        eprintln!("socklab netem check: {}", describe(&link)?);
        link_json = serde_json::json!({
            "driver": link.driver().as_str(),
            "offload": link.offload().map(|o| o.as_str()),
            "link": socklab_link::spec_text(&link.pair().forward),
            "link_back": socklab_link::spec_text(&link.pair().backward),
            "mtu": cfg.mtu,
            "seed": cfg.seed,
        });
        let n = link.namespaces()?;
        for (title, direction, from, to, spec) in [
            (
                "client -> server",
                "client->server",
                Side::Client,
                Side::Server,
                &link.pair().forward,
            ),
            (
                "server -> client",
                "server->client",
                Side::Server,
                Side::Client,
                &link.pair().backward,
            ),
        ] {
            let ends = Endpoints {
                sender_ns: Some(n.path(from)),
                receiver_ns: Some(n.path(to)),
                receiver_bind: to.addr(),
                receiver_port: 0,
                via: None,
            };
            let window = capture
                .as_ref()
                .map(|c| c.window(&format!("netem check, {title} probe")));
            let before = link.mark(window);
            let r = probe(&ends, spec, &ccfg, &stop)?;
            settle(&link, from == Side::Client, Duration::from_secs(5));
            if interrupted() {
                return Err(Failure::Interrupted(
                    "interrupted; the link was removed".into(),
                ));
            }
            let acc = link.mark(window.map(|_| 0)).since(&before);
            let d = if from == Side::Client {
                &acc.forward
            } else {
                &acc.backward
            };
            let lag = d.mean_lag_us() * 1e3;
            dirs.push(probed(
                title,
                direction,
                (socklab_link::spec_text(spec), compare_lagged(spec, &r, lag)),
                &r,
                size,
                &acc,
            ));
        }
        link.stop()?;
    }
    let cap = close_capture(capture)?;
    let all_ok = dirs.iter().all(|d| d.verdict == Verdict::Agrees);
    let verdict = if dirs.iter().any(|d| d.verdict == Verdict::Invalid) {
        Verdict::Invalid
    } else if all_ok {
        Verdict::Agrees
    } else {
        Verdict::Differs
    };
    if json {
        out_json(&serde_json::json!({
            "link": link_json,
            "packets": packets,
            "size": size,
            "ok": all_ok,
            "verdict": verdict.as_str(),
            "directions": dirs.iter().map(|d| d.json.clone()).collect::<Vec<_>>(),
            "capture": cap,
        }))?;
    } else {
        out(&dirs.iter().map(|d| d.text.as_str()).collect::<String>())?;
    }
    match verdict {
        Verdict::Agrees => Ok(()),
        Verdict::Invalid => Err(Failure::Run(
            "invalid: the emulator fell behind its schedule during the probe, so the check cannot say whether the link agrees; run it again on a quieter machine (see INVALID above)".into(),
        )),
        Verdict::Differs => Err(Failure::Run(
            "some measured values differ from the expected ones beyond their intervals (see DIFFERS above)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_link::check::{ProbeResult, FROM_SPEC};
    use socklab_link::DirReport;

    fn row(ok: bool) -> CheckRow {
        CheckRow {
            what: "lost".into(),
            configured: "0.00 %".into(),
            measured: "1.00 %".into(),
            ok: Some(ok),
            from: FROM_SPEC,
        }
    }

    fn acc(late: u64) -> LinkReport {
        let mut forward = DirReport {
            late,
            ..Default::default()
        };
        forward.stats.delivered = 1000;
        LinkReport {
            forward,
            ..Default::default()
        }
    }

    fn verdict(rows_ok: bool, late: u64) -> (Verdict, Probed) {
        let p = probed(
            "client -> server",
            "client->server",
            ("loss 1%".into(), vec![row(rows_ok)]),
            &ProbeResult::default(),
            200,
            &acc(late),
        );
        (p.verdict, p)
    }

    #[test]
    fn an_emulator_that_fell_behind_makes_the_direction_invalid_not_different() {
        assert_eq!(verdict(true, 0).0, Verdict::Agrees);
        assert_eq!(verdict(false, 0).0, Verdict::Differs);
        // 5 % of packets late: whatever the rows say, the run says nothing about the spec.
        let (v, p) = verdict(false, 50);
        assert_eq!(v, Verdict::Invalid);
        assert_eq!(p.json["verdict"], "invalid");
        assert_eq!(p.json["ok"], false);
        assert!(p.text.contains("verdict: INVALID"), "{}", p.text);
        assert_eq!(verdict(true, 50).0, Verdict::Invalid);
        // 1 % is within the validity rule.
        assert_eq!(verdict(true, 10).0, Verdict::Agrees);
    }
}
