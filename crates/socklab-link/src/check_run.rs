//! The core of `socklab netem check` (moved here from the binary, which keeps the printing of
//! rows): build the link, probe each direction ([`super::check::probe`]), wait until the model
//! holds no packet of the probe ([`settle`]), account the emulator's share, and judge each
//! direction and the whole check ([`Verdict`]). The udp-proxy driver is probed in the forward
//! direction only (sender → proxy → receiver, all on loopback, no root); the namespace drivers
//! in both.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::capture::Capture;
use crate::check::{compare_lagged, probe, CheckConfig, Endpoints};
use crate::check_row::{CheckRow, ProbeResult};
use crate::ns::Side;
use crate::{spec_text, DirReport, Driver, EmulatedLink, LinkConfig, LinkError, LinkReport};

/// A direction's verdict (or the whole check's): its rows agree, some differ, or the emulator
/// fell behind and the rows say nothing about the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every row agrees.
    Agrees,
    /// Some measured value differs from the expected one beyond its interval.
    Differs,
    /// The emulator fell behind its schedule: the rows say nothing.
    Invalid,
}

impl Verdict {
    /// `agrees`, `differs` or `invalid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Differs => "differs",
            Verdict::Invalid => "invalid",
        }
    }

    /// One direction's verdict from its rows and the emulator's accounting over the probe.
    pub fn of(rows: &[CheckRow], acc: &LinkReport) -> Verdict {
        let ok = rows.iter().all(|r| r.ok != Some(false));
        match (acc.invalid_reason(), ok) {
            (Some(_), _) => Verdict::Invalid,
            (None, true) => Verdict::Agrees,
            (None, false) => Verdict::Differs,
        }
    }

    /// The whole check's verdict: invalid if a direction is, else agrees if every one does.
    pub fn overall(dirs: &[Verdict]) -> Verdict {
        if dirs.contains(&Verdict::Invalid) {
            Verdict::Invalid
        } else if dirs.iter().all(|d| *d == Verdict::Agrees) {
            Verdict::Agrees
        } else {
            Verdict::Differs
        }
    }
}

/// One probed direction: what was configured, what the probe saw, the rows, and the
/// emulator's accounting over the probe.
#[derive(Debug, Clone)]
pub struct Direction {
    /// The title of its table (`client -> server`, or with the udp-proxy the pair described).
    pub title: String,
    /// `client->server` or `server->client`.
    pub direction: &'static str,
    /// The direction's spec as text (`none` without impairment).
    pub spec: String,
    /// Configured against measured.
    pub rows: Vec<CheckRow>,
    /// What the probe saw.
    pub probe: ProbeResult,
    /// The emulator's accounting over the probe.
    pub acc: LinkReport,
}

impl Direction {
    /// Its verdict ([`Verdict::of`]).
    pub fn verdict(&self) -> Verdict {
        Verdict::of(&self.rows, &self.acc)
    }

    /// `{"direction", "spec", "ok", "verdict", "rows", "probe", "emulator"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let verdict = self.verdict();
        serde_json::json!({
            "direction": self.direction,
            "spec": self.spec,
            "ok": verdict == Verdict::Agrees,
            "verdict": verdict.as_str(),
            "rows": self.rows.iter().map(CheckRow::to_json).collect::<Vec<_>>(),
            "probe": self.probe.to_json(),
            "emulator": self.acc.to_json(),
        })
    }
}

/// A finished check: the link as JSON (`driver`, `offload`, `link`, `link_back`, `mtu`,
/// `seed`) and each direction probed.
#[derive(Debug, Clone)]
pub struct CheckRun {
    /// The link that was checked.
    pub link: serde_json::Value,
    /// The directions, forward first.
    pub directions: Vec<Direction>,
}

impl CheckRun {
    /// The whole check's verdict ([`Verdict::overall`]).
    pub fn verdict(&self) -> Verdict {
        let v: Vec<Verdict> = self.directions.iter().map(Direction::verdict).collect();
        Verdict::overall(&v)
    }
}

/// Copies the model of `d` still holds (neither delivered nor dropped).
pub fn in_flight(d: &DirReport) -> u64 {
    let s = &d.stats;
    (s.packets_in + s.duplicated)
        .saturating_sub(s.dropped + s.queue_dropped + s.aqm_dropped + s.delivered)
}

/// Waits (at most `bound`, or until `stop`) until the link's model in direction `forward`
/// holds no packet: the probe's receiver stopped reading when the model said the last packet
/// would leave, and the accounting must not leave any of them to the next probe.
pub fn settle(link: &EmulatedLink, forward: bool, bound: Duration, stop: &dyn Fn() -> bool) {
    let end = Instant::now() + bound;
    while Instant::now() < end && !stop() {
        let r = link.report();
        if in_flight(if forward { &r.forward } else { &r.backward }) == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Builds the link of `cfg`, probes it with `ccfg` and removes it. `capture` (not with the
/// udp-proxy) records the probes; `started` is called once a namespace link is up (the binary
/// prints it). `Ok(None)`: `stop` said stop, and the link was removed.
pub fn run<E>(
    cfg: &LinkConfig,
    ccfg: &CheckConfig,
    capture: Option<&Capture>,
    stop: &(dyn Fn() -> bool + Sync),
    mut started: impl FnMut(&EmulatedLink) -> Result<(), E>,
) -> Result<Option<CheckRun>, E>
where
    E: From<LinkError> + From<std::io::Error>,
{
    let mut dirs = Vec::new();
    let link_json;
    if cfg.driver == Driver::UdpProxy {
        // Forward direction only: sender -> proxy -> receiver, all on loopback, no root.
        let mut link = EmulatedLink::start(cfg)?;
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
        let r = probe(&ends, &pair.forward, ccfg, stop)?;
        let stats = link.stop()?;
        let lag = stats.forward.mean_lag_us() * 1e3;
        if stop() {
            return Ok(None);
        }
        link_json = serde_json::json!({
            "driver": "udp-proxy",
            "offload": null,
            "link": spec_text(&pair.forward),
            "link_back": spec_text(&pair.backward),
            "mtu": cfg.mtu,
            "seed": cfg.seed,
        });
        dirs.push(Direction {
            title: format!("client -> server via udp-proxy ({})", pair.describe()),
            direction: "client->server",
            spec: spec_text(&pair.forward),
            rows: compare_lagged(&pair.forward, &r, lag),
            probe: r,
            acc: stats,
        });
    } else {
        let link = EmulatedLink::start_with(cfg, capture.and_then(Capture::tap))?;
        started(&link)?;
        link_json = serde_json::json!({
            "driver": link.driver().as_str(),
            "offload": link.offload().map(|o| o.as_str()),
            "link": spec_text(&link.pair().forward),
            "link_back": spec_text(&link.pair().backward),
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
            let window = capture.map(|c| c.window(&format!("netem check, {title} probe")));
            let before = link.mark(window);
            let r = probe(&ends, spec, ccfg, stop)?;
            settle(&link, from == Side::Client, Duration::from_secs(5), stop);
            if stop() {
                return Ok(None);
            }
            let acc = link.mark(window.map(|_| 0)).since(&before);
            let d = if from == Side::Client {
                &acc.forward
            } else {
                &acc.backward
            };
            let lag = d.mean_lag_us() * 1e3;
            dirs.push(Direction {
                title: title.to_string(),
                direction,
                spec: spec_text(spec),
                rows: compare_lagged(spec, &r, lag),
                probe: r,
                acc,
            });
        }
        link.stop()?;
    }
    Ok(Some(CheckRun {
        link: link_json,
        directions: dirs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_row::FROM_SPEC;

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

    #[test]
    fn a_direction_is_invalid_when_the_emulator_fell_behind_whatever_its_rows() {
        assert_eq!(Verdict::of(&[row(true)], &acc(0)), Verdict::Agrees);
        assert_eq!(Verdict::of(&[row(false)], &acc(0)), Verdict::Differs);
        assert_eq!(Verdict::of(&[row(false)], &acc(50)), Verdict::Invalid);
        assert_eq!(Verdict::of(&[row(true)], &acc(50)), Verdict::Invalid);
        // 1 % late is within the validity rule.
        assert_eq!(Verdict::of(&[row(true)], &acc(10)), Verdict::Agrees);
        let d = Direction {
            title: "client -> server".into(),
            direction: "client->server",
            spec: "loss 1%".into(),
            rows: vec![row(false)],
            probe: ProbeResult::default(),
            acc: acc(50),
        };
        assert_eq!(d.to_json()["verdict"], "invalid");
        assert_eq!(d.to_json()["ok"], false);
        assert_eq!(d.to_json()["direction"], "client->server");
    }

    #[test]
    fn the_whole_check_is_invalid_if_one_direction_is_and_agrees_only_if_all_do() {
        use Verdict::*;
        assert_eq!(Verdict::overall(&[Agrees, Agrees]), Agrees);
        assert_eq!(Verdict::overall(&[Agrees, Differs]), Differs);
        assert_eq!(Verdict::overall(&[Differs, Invalid]), Invalid);
        assert_eq!(Verdict::overall(&[]), Agrees);
    }

    #[test]
    fn in_flight_counts_what_the_model_still_holds() {
        let mut d = DirReport::default();
        d.stats.packets_in = 10;
        d.stats.duplicated = 2;
        d.stats.dropped = 3;
        d.stats.delivered = 5;
        assert_eq!(in_flight(&d), 4);
        d.stats.delivered = 20;
        assert_eq!(in_flight(&d), 0);
    }
}
