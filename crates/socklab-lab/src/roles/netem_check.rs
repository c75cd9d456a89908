//! `socklab netem check`: builds a link, probes each direction, prints configured against
//! measured (a table, or with `json` one object: see docs/impairment.md). The probing and the
//! verdicts are `socklab_link::check_run`'s; this role checks its arguments (errors name their
//! keys), runs the check and prints.

use socklab_link::check::{CheckConfig, CheckRow};
use socklab_link::check_run::{self, Direction, Verdict};
use socklab_link::{Driver, EmulatedLink};
use socklab_sys::process::interrupted;

use super::netem::{accounting, close_capture, describe, net};
use super::netem_args::LinkFlags;
use super::{install_interrupt_flag, out, RoleError};

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

/// One probed direction, as text and as JSON.
struct Probed {
    text: String,
    json: serde_json::Value,
    verdict: Verdict,
}

/// A direction's table, accounting and verdict as text, beside its JSON.
fn shown(d: &Direction, size: usize) -> Probed {
    let verdict = d.verdict();
    let invalid = d.acc.invalid_reason();
    let mut text = print_rows(
        &format!(
            "{} ({}), {} datagrams of {size} B sent",
            d.title, d.spec, d.probe.sent
        ),
        &d.rows,
    );
    text += &accounting(&d.acc);
    text += &format!(
        "  emulator CPU per packet: {:.0} ns\n",
        d.acc.cpu_ns_per_packet()
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
        json: d.to_json(),
        verdict,
    }
}

/// `netem check` with `packets` datagrams of `size` bytes each way: on a dry run the line that
/// says what it would do (nothing built); else the table (or with `json` the object) printed,
/// and an error when a direction differs or the emulator fell behind.
pub fn check(
    flags: &LinkFlags,
    packets: u64,
    size: usize,
    json: bool,
    dry: bool,
) -> Result<Option<String>, RoleError> {
    if !(24..=8192).contains(&size) {
        return Err(RoleError::Usage(format!(
            "`size` {size}: use 24 to 8192 bytes"
        )));
    }
    if packets == 0 || packets > 1_000_000 {
        return Err(RoleError::Usage(format!(
            "`packets` {packets}: use 1 to 1000000"
        )));
    }
    let cfg = flags.config(None)?;
    if flags.capture_config()?.is_some() && cfg.driver == Driver::UdpProxy {
        return Err(RoleError::Usage(
            "`capture` records what socklab's own emulator does between namespaces: use `link_driver` tun (root)".into(),
        ));
    }
    if dry {
        return Ok(Some(format!(
            "socklab netem check would build a link ({}) and send {packets} datagrams of {size} B each way",
            flags.link.as_deref().unwrap_or("no impairment")
        )));
    }
    install_interrupt_flag()?;
    let ccfg = CheckConfig { packets, size };
    let stop = || interrupted();
    let capture = flags.open_capture("socklab netem check")?;
    let started = |link: &EmulatedLink| -> Result<(), RoleError> {
        eprintln!("socklab netem check: {}", describe(link).map_err(net)?);
        Ok(())
    };
    let Some(run) = check_run::run(&cfg, &ccfg, capture.as_ref(), &stop, started)? else {
        return Err(RoleError::Interrupted(
            "interrupted; the link was removed".into(),
        ));
    };
    let dirs: Vec<Probed> = run.directions.iter().map(|d| shown(d, size)).collect();
    let cap = close_capture(capture).map_err(net)?;
    let all_ok = dirs.iter().all(|d| d.verdict == Verdict::Agrees);
    let verdict = run.verdict();
    if json {
        let v = serde_json::json!({
            "link": run.link,
            "packets": packets,
            "size": size,
            "ok": all_ok,
            "verdict": verdict.as_str(),
            "directions": dirs.iter().map(|d| d.json.clone()).collect::<Vec<_>>(),
            "capture": cap,
        });
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ))?;
    } else {
        out(&dirs.iter().map(|d| d.text.as_str()).collect::<String>())?;
    }
    match verdict {
        Verdict::Agrees => Ok(None),
        Verdict::Invalid => Err(RoleError::Run(
            "invalid: the emulator fell behind its schedule during the probe, so the check cannot say whether the link agrees; run it again on a quieter machine (see INVALID above)".into(),
        )),
        Verdict::Differs => Err(RoleError::Run(
            "some measured values differ from the expected ones beyond their intervals (see DIFFERS above)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_link::check::{ProbeResult, FROM_SPEC};
    use socklab_link::{DirReport, LinkReport};

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
        let p = shown(
            &Direction {
                title: "client -> server".into(),
                direction: "client->server",
                spec: "loss 1%".into(),
                rows: vec![row(rows_ok)],
                probe: ProbeResult::default(),
                acc: acc(late),
            },
            200,
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
