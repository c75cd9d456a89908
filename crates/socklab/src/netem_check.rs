//! `socklab netem check`: builds a link, probes each direction, prints configured against
//! measured (a table, or with `--json` one object: see docs/impairment.md).

use std::net::Ipv4Addr;

use socklab_net::link::capture::Capture;
use socklab_net::link::check::{compare, probe, CheckConfig, CheckRow, Endpoints};
use socklab_net::link::ns::Side;
use socklab_net::link::{Driver, EmulatedLink, LinkReport};
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
        "{title}\n  {:w$}  {:wc$}  {:wm$}  verdict\n",
        "", "configured", "measured"
    );
    for r in rows {
        s += &format!(
            "  {:w$}  {:wc$}  {:wm$}  {}\n",
            r.what,
            r.configured,
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

/// One probed direction, as text and as JSON.
struct Probed {
    text: String,
    json: serde_json::Value,
    ok: bool,
}

fn probed(
    title: &str,
    direction: &str,
    (spec, rows): (String, Vec<CheckRow>),
    r: &socklab_net::link::check::ProbeResult,
    size: usize,
    acc: &LinkReport,
) -> Probed {
    let ok = rows.iter().all(|r| r.ok != Some(false));
    let mut text = print_rows(
        &format!("{title} ({spec}), {} datagrams of {size} B sent", r.sent),
        &rows,
    );
    text += &accounting(acc);
    text += &format!(
        "  emulator CPU per packet: {:.0} ns\n",
        acc.cpu_ns_per_packet()
    );
    Probed {
        text,
        json: serde_json::json!({
            "direction": direction,
            "spec": spec,
            "ok": ok,
            "rows": rows.iter().map(CheckRow::to_json).collect::<Vec<_>>(),
            "probe": r.to_json(),
            "emulator": acc.to_json(),
        }),
        ok,
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
        if interrupted() {
            return Err(Failure::Interrupted(
                "interrupted; the link was removed".into(),
            ));
        }
        link_json = serde_json::json!({
            "driver": "udp-proxy",
            "offload": null,
            "link": socklab_net::link::spec_text(&pair.forward),
            "link_back": socklab_net::link::spec_text(&pair.backward),
            "mtu": cfg.mtu,
            "seed": cfg.seed,
        });
        dirs.push(probed(
            &format!("client -> server via udp-proxy ({})", pair.describe()),
            "client->server",
            (
                socklab_net::link::spec_text(&pair.forward),
                compare(&pair.forward, &r),
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
            "link": socklab_net::link::spec_text(&link.pair().forward),
            "link_back": socklab_net::link::spec_text(&link.pair().backward),
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
            if interrupted() {
                return Err(Failure::Interrupted(
                    "interrupted; the link was removed".into(),
                ));
            }
            let acc = link.mark(window.map(|_| 0)).since(&before);
            dirs.push(probed(
                title,
                direction,
                (socklab_net::link::spec_text(spec), compare(spec, &r)),
                &r,
                size,
                &acc,
            ));
        }
        link.stop()?;
    }
    let cap = close_capture(capture)?;
    let all_ok = dirs.iter().all(|d| d.ok);
    if json {
        out_json(&serde_json::json!({
            "link": link_json,
            "packets": packets,
            "size": size,
            "ok": all_ok,
            "directions": dirs.iter().map(|d| d.json.clone()).collect::<Vec<_>>(),
            "capture": cap,
        }))?;
    } else {
        out(&dirs.iter().map(|d| d.text.as_str()).collect::<String>())?;
    }
    if all_ok {
        Ok(())
    } else {
        Err(Failure::Run(
            "some measured values differ from the configured ones beyond the 99.9 % interval (see DIFFERS above)".into(),
        ))
    }
}
