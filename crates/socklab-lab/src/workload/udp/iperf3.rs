//! `bulk --udp --to iperf3://HOST[:PORT]` (issue 27 part 2): UDP bulk against an unmodified
//! `iperf3 -s`. The client is `socklab_net::udpbulk::iperf3`; this file checks what an iperf3
//! server can carry and makes the sample: the loss and jitter of the receiving side as iperf3
//! counts them (the server's up, socklab's own down), socklab's rate, and the server's own
//! figures stored beside (`server_packets`, `server_lost`, `server_jitter_us`,
//! `server_cpu_pct`, …; its whole results message in the sample's facts).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use socklab_net::udpbulk::iperf3::{self as net, UdpConfig, UdpRun};
use socklab_net::udpbulk::Gso;
use socklab_units::Rate;

use super::UdpSpec;
use crate::model::sample::Sample;
use crate::LabError;

/// What an iperf3 server cannot be asked over UDP, each refused in one line naming the key.
pub fn check(spec: &UdpSpec) -> Result<(), LabError> {
    let bad = |m: &str| Err(LabError::Plan(m.to_string()));
    if spec.rate == Rate::Max {
        return bad("`rate` max with iperf3://: the search needs socklab's own receiver (its report per trial); give a rate, e.g. 100M");
    }
    if spec.gso == Gso::On {
        return bad("`gso` on with iperf3://: the client stamps each datagram with iperf3's header and sends them with sendmmsg; use `gso` auto or off");
    }
    if spec.interval.is_some() {
        return bad("`interval` with iperf3:// is not supported: the time series is socklab's own receiver's; drop `interval`");
    }
    if spec.drain.is_some() {
        return bad("`drain` with iperf3://: the iperf3 server stops counting at TEST_END, it takes no drain; drop `drain`");
    }
    if spec.size > net::MAX_LEN {
        return bad("`size` with iperf3://: iperf3's UDP datagrams are at most 65507 bytes");
    }
    Ok(())
}

/// One test against the iperf3 server at `to`, as a sample.
pub fn run(
    spec: &UdpSpec,
    to: SocketAddr,
    label: &str,
    stop: &dyn Fn() -> bool,
) -> Result<Sample, LabError> {
    let Rate::Bps(rate) = spec.rate else {
        return Err(LabError::Plan("`rate` max with iperf3://".into()));
    };
    let cfg = UdpConfig {
        to,
        rate_bps: rate,
        size: spec.size,
        duration: spec.duration,
        reverse: spec.reverse,
        sndbuf: Some(spec.sndbuf),
        rcvbuf: Some(spec.rcvbuf),
    };
    let r = net::run(&cfg, stop).map_err(|e| LabError::run(label, e))?;
    Ok(sample(&cfg, &r))
}

/// The sample of one test.
pub fn sample(cfg: &UdpConfig, r: &UdpRun) -> Sample {
    let (server_bytes, server_packets, server_lost) = r.server_totals();
    let size = cfg.size as f64;
    let span = r.span.max(1e-9);
    let pct = |a: u64, b: u64| {
        if b > 0 {
            100.0 * a as f64 / b as f64
        } else {
            0.0
        }
    };
    let s = &r.side;
    let mut m: Vec<(&'static str, f64)> = Vec::new();
    if cfg.reverse {
        // socklab receives: its own counts, iperf3's way.
        let c = &s.recv;
        let got = c.packets.saturating_sub(c.lost);
        m.extend([
            ("gbps", got as f64 * size * 8.0 / span / 1e9),
            ("offered_gbps", server_bytes as f64 * 8.0 / span / 1e9),
            ("dgrams_received", got as f64),
            ("dgrams_lost", c.lost as f64),
            ("loss_pct", pct(c.lost, c.packets)),
            ("dgrams_out_of_order", c.out_of_order as f64),
            ("jitter_us", c.jitter * 1e6),
            ("rcv_cpu_pct", 100.0 * s.cpu.cpu().as_secs_f64() / span),
        ]);
    } else {
        // The server receives: its counts, socklab's sends.
        let secs = s.seconds.max(1e-9);
        let got = server_packets.saturating_sub(server_lost);
        m.extend([
            ("gbps", got as f64 * size * 8.0 / secs / 1e9),
            ("offered_gbps", s.sent_bytes as f64 * 8.0 / secs / 1e9),
            ("dgrams_sent", s.sent as f64),
            ("dgrams_received", got as f64),
            ("dgrams_lost", server_lost as f64),
            ("loss_pct", pct(server_lost, server_packets)),
            ("dgrams_tail", s.sent.saturating_sub(server_packets) as f64),
            ("jitter_us", r.server_jitter() * 1e6),
            ("send_calls", s.calls as f64),
            ("send_errors", s.errors as f64),
            ("gso", 0.0),
            ("snd_cpu_pct", 100.0 * s.cpu.cpu().as_secs_f64() / secs),
        ]);
    }
    m.extend([
        ("server_packets", server_packets as f64),
        ("server_lost", server_lost as f64),
        ("server_jitter_us", r.server_jitter() * 1e6),
        ("server_bytes", server_bytes as f64),
        ("server_cpu_pct", r.server.cpu_util_total),
        ("server_user_pct", r.server.cpu_util_user),
        ("server_sys_pct", r.server.cpu_util_system),
    ]);
    Sample::new(
        m,
        json!({
            "iperf3": true,
            "direction": if cfg.reverse { "down" } else { "up" },
            "span_s": r.span,
            "short_datagrams": s.recv.short,
            "iperf3_server": r.server,
        }),
    )
}

/// How long one test may take: its duration, at most that plus each step's wait.
pub fn time_bounds(duration: Duration) -> (Duration, Duration) {
    (
        duration,
        duration + socklab_net::iperf3::client::STEP_WAIT * 3,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_net::iperf3::proto::{Results, StreamResult};
    use socklab_net::iperf3::udp_client::{Header, RecvCounts};
    use socklab_net::udpbulk::iperf3::Side;

    fn server(packets: i64, errors: i64, jitter: f64) -> Results {
        Results {
            cpu_util_total: 2.5,
            cpu_util_user: 1.0,
            cpu_util_system: 1.5,
            sender_has_retransmits: -1,
            congestion_used: None,
            server_output_text: None,
            streams: vec![StreamResult {
                id: 1,
                bytes: packets as u64 * 1000,
                retransmits: -1,
                jitter,
                errors,
                packets,
                start_time: 0.0,
                end_time: 1.0,
            }],
        }
    }

    fn cfg(reverse: bool) -> UdpConfig {
        UdpConfig {
            to: SocketAddr::from(([127, 0, 0, 1], 5201)),
            rate_bps: 8_000_000,
            size: 1000,
            duration: Duration::from_secs(1),
            reverse,
            sndbuf: None,
            rcvbuf: None,
        }
    }

    fn get(s: &Sample, k: &str) -> f64 {
        s.metrics
            .iter()
            .find(|(n, _)| n == k)
            .unwrap_or_else(|| panic!("no {k}"))
            .1
    }

    #[test]
    fn up_takes_the_servers_loss_and_jitter_and_keeps_its_figures_beside() {
        let side = Side {
            sent: 1000,
            sent_bytes: 1_000_000,
            seconds: 1.0,
            ..Side::default()
        };
        let r = UdpRun {
            side,
            span: 1.0,
            cpu: Default::default(),
            server: server(998, 10, 0.000_05),
        };
        let s = sample(&cfg(false), &r);
        assert_eq!(get(&s, "dgrams_sent"), 1000.0);
        assert_eq!(get(&s, "server_packets"), 998.0);
        assert_eq!(get(&s, "dgrams_lost"), 10.0);
        assert_eq!(get(&s, "dgrams_received"), 988.0);
        assert_eq!(get(&s, "dgrams_tail"), 2.0);
        assert!((get(&s, "loss_pct") - 100.0 * 10.0 / 998.0).abs() < 1e-9);
        assert!((get(&s, "jitter_us") - 50.0).abs() < 1e-9);
        assert_eq!(get(&s, "server_cpu_pct"), 2.5);
        assert!((get(&s, "offered_gbps") - 0.008).abs() < 1e-12);
    }

    #[test]
    fn down_takes_socklabs_own_counts() {
        let mut recv = RecvCounts::default();
        let mut d = vec![0u8; 1000];
        for n in [1u64, 2, 4] {
            Header::at(Duration::from_millis(n), n).write(&mut d, false);
            recv.datagram(false, &d, n as f64 / 1000.0);
        }
        let r = UdpRun {
            side: Side {
                recv,
                ..Side::default()
            },
            span: 1.0,
            cpu: Default::default(),
            server: server(5, 0, 0.0),
        };
        let s = sample(&cfg(true), &r);
        assert_eq!(get(&s, "dgrams_received"), 3.0);
        assert_eq!(get(&s, "dgrams_lost"), 1.0);
        assert_eq!(get(&s, "loss_pct"), 25.0);
        assert_eq!(get(&s, "server_packets"), 5.0);
        assert!(s.metrics.iter().all(|(n, _)| n != "dgrams_sent"));
    }
}
