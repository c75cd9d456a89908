//! Interval time series in the lab's vocabulary (`interval`, `omit`): the metrics an interval
//! carries, the mapping of the socket layer's intervals to [`Interval`]s, the summary of the
//! part of a run not omitted, and the live line of an interval (text or JSON).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use socklab_net::load::LoadInterval;
use socklab_net::series::TcpInterval;
use socklab_net::udpbulk::stats::Interval as UdpInterval;
use socklab_net::udpbulk::TestReport as UdpReport;

use crate::model::metric::{m, Better, Metric};
use crate::model::sample::{Direction, Interval, MetricName};
use crate::table::num;

/// A live consumer of intervals while a repetition runs (the command line prints them).
pub type LiveSink = Arc<dyn Fn(&Interval) + Send + Sync>;

/// The metrics an interval may carry: TCP streams (bulk), then load runs, then rrul.
pub const INTERVAL_METRICS: &[Metric] = &[
    m(
        "gbps",
        "Gbit/s",
        "Gbit/s",
        "throughput of the interval: bytes delivered (acknowledged) x 8 / its length",
        Better::Higher,
    ),
    m(
        "bytes",
        "B",
        "bytes",
        "bytes delivered (acknowledged by the receiver) in the interval",
        Better::Neither,
    ),
    m(
        "bytes_written",
        "B",
        "written",
        "bytes the sender wrote into the socket in the interval",
        Better::Neither,
    ),
    m(
        "retrans",
        "segments",
        "retrans",
        "segments retransmitted in the interval (TCP_INFO)",
        Better::Lower,
    ),
    m(
        "cwnd",
        "segments",
        "cwnd",
        "congestion window at the interval's end",
        Better::Neither,
    ),
    m(
        "srtt_us",
        "us",
        "srtt us",
        "smoothed RTT at the interval's end",
        Better::Lower,
    ),
    m(
        "rttvar_us",
        "us",
        "rttvar us",
        "RTT variance at the interval's end",
        Better::Lower,
    ),
    m(
        "ssthresh",
        "segments",
        "ssthresh",
        "slow-start threshold at the interval's end (absent before the first loss)",
        Better::Neither,
    ),
    m(
        "delivery_gbps",
        "Gbit/s",
        "dlv Gbit/s",
        "the kernel's latest delivery-rate sample (tcpi_delivery_rate)",
        Better::Higher,
    ),
    m(
        "pacing_gbps",
        "Gbit/s",
        "pacing",
        "pacing rate at the interval's end (absent when unlimited)",
        Better::Neither,
    ),
    m(
        "inflight_bytes",
        "B",
        "in flight",
        "bytes in flight at the interval's end (packets in flight x MSS)",
        Better::Neither,
    ),
    m(
        "notsent_bytes",
        "B",
        "not sent",
        "bytes written but not yet sent at the interval's end",
        Better::Neither,
    ),
    m(
        "busy_us",
        "us",
        "busy us",
        "time of the interval the connection was busy sending (jiffy resolution)",
        Better::Neither,
    ),
    m(
        "rwnd_limited_us",
        "us",
        "rwnd-lim us",
        "time of the interval limited by the receiver's window",
        Better::Lower,
    ),
    m(
        "sndbuf_limited_us",
        "us",
        "sndbuf-lim us",
        "time of the interval limited by the send buffer",
        Better::Lower,
    ),
    m(
        "rcv_rtt_us",
        "us",
        "rcv rtt us",
        "a down stream: the receiving socket's RTT estimate at the interval's end (tcpi_rcv_rtt)",
        Better::Lower,
    ),
    m(
        "rcv_space",
        "B",
        "rcv space",
        "a down stream: the receiving socket's space estimate at the interval's end (tcpi_rcv_space, what receive autotuning sizes the buffer by)",
        Better::Neither,
    ),
    m(
        "datagrams",
        "datagrams",
        "datagrams",
        "a datagram stream: distinct datagrams that arrived in the interval",
        Better::Neither,
    ),
    m(
        "lost",
        "datagrams",
        "lost",
        "a datagram stream: how far the highest number received advanced in the interval, less the distinct datagrams that arrived (negative when one counted lost earlier arrived late, as iperf3's; the intervals add up to the test's loss below its highest number)",
        Better::Lower,
    ),
    m(
        "loss_pct",
        "%",
        "loss %",
        "a datagram stream: lost / the datagrams the interval should have brought",
        Better::Lower,
    ),
    m(
        "duplicates",
        "datagrams",
        "dup",
        "a datagram stream: extra copies that arrived in the interval",
        Better::Lower,
    ),
    m(
        "reordered",
        "datagrams",
        "reordered",
        "a datagram stream: RFC 4737 reordered arrivals in the interval",
        Better::Lower,
    ),
    m(
        "jitter_us",
        "us",
        "jitter us",
        "a datagram stream: RFC 3550 interarrival jitter at the interval's end",
        Better::Lower,
    ),
    m(
        "req_per_s",
        "req/s",
        "req/s",
        "requests completed per second of the interval",
        Better::Higher,
    ),
    m(
        "requests",
        "requests",
        "requests",
        "requests completed in the interval",
        Better::Neither,
    ),
    m(
        "errors",
        "requests",
        "errors",
        "requests that failed in the interval",
        Better::Lower,
    ),
    m(
        "lat_mean_us",
        "us",
        "lat mean",
        "response time of the interval's requests, mean (open loop: from the intended send time)",
        Better::Lower,
    ),
    m(
        "lat_p50_us",
        "us",
        "p50 us",
        "response time, median",
        Better::Lower,
    ),
    m(
        "lat_p90_us",
        "us",
        "p90 us",
        "response time, 90th percentile",
        Better::Lower,
    ),
    m(
        "lat_p99_us",
        "us",
        "p99 us",
        "response time, 99th percentile",
        Better::Lower,
    ),
    m(
        "lat_p999_us",
        "us",
        "p99.9 us",
        "response time, 99.9th percentile",
        Better::Lower,
    ),
    m(
        "lat_max_us",
        "us",
        "max us",
        "response time, maximum",
        Better::Lower,
    ),
    m(
        "mbps",
        "Mbit/s",
        "Mbit/s",
        "rrul: throughput of one direction in the interval, every stream of it together (bytes delivered x 8 / the interval's length)",
        Better::Higher,
    ),
    m(
        "probe_tcp_rtt_us",
        "us",
        "tcp probe us",
        "rrul: mean RTT of the TCP probes sent in the interval",
        Better::Lower,
    ),
    m(
        "probe_udp_rtt_us",
        "us",
        "udp probe us",
        "rrul: mean RTT of the UDP probes sent in the interval and answered",
        Better::Lower,
    ),
];

/// The definition of interval metric `name` (a neutral one when unknown).
pub fn metric(name: &str) -> Metric {
    INTERVAL_METRICS
        .iter()
        .copied()
        .find(|m| m.name == name)
        .unwrap_or(crate::model::metric::m(
            "unknown",
            "",
            "?",
            "",
            Better::Neither,
        ))
}

/// Interval metric names in vocabulary order, then the unknown ones sorted.
pub fn ordered<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    let rank = |n: &str| {
        INTERVAL_METRICS
            .iter()
            .position(|m| m.name == n)
            .unwrap_or(usize::MAX)
    };
    names.sort_by_key(|n| rank(n));
    names.into_iter().map(String::from).collect()
}

/// A TCP stream's interval in the lab's vocabulary. A down stream is read at the client's
/// receiving socket: its bytes read and the receiver's estimates, none of the sender's fields
/// (the sink's socket has those).
pub fn tcp_interval(i: &TcpInterval) -> Interval {
    if i.direction == Direction::Down {
        let mut values: Vec<(MetricName, f64)> = vec![
            ("gbps".into(), i.gbps()),
            ("bytes".into(), i.delivered as f64),
        ];
        for (n, v) in [("rcv_rtt_us", i.rcv_rtt_us), ("rcv_space", i.rcv_space)] {
            if let Some(v) = v {
                values.push((n.into(), f64::from(v)));
            }
        }
        return Interval {
            stream: i.stream,
            direction: i.direction,
            start_s: i.start.as_secs_f64(),
            end_s: i.end.as_secs_f64(),
            omitted: i.omitted,
            values,
        };
    }
    let mut values: Vec<(MetricName, f64)> = vec![
        ("gbps".into(), i.gbps()),
        ("bytes".into(), i.delivered as f64),
        ("bytes_written".into(), i.written as f64),
        ("retrans".into(), f64::from(i.retrans)),
        ("cwnd".into(), f64::from(i.cwnd)),
        ("srtt_us".into(), f64::from(i.srtt_us)),
        ("rttvar_us".into(), f64::from(i.rttvar_us)),
        ("inflight_bytes".into(), i.inflight_bytes as f64),
        ("notsent_bytes".into(), f64::from(i.notsent_bytes)),
    ];
    let opt: [(&'static str, Option<f64>); 6] = [
        ("ssthresh", i.ssthresh.map(f64::from)),
        (
            "delivery_gbps",
            i.delivery_rate.map(|r| r as f64 * 8.0 / 1e9),
        ),
        ("pacing_gbps", i.pacing_rate.map(|r| r as f64 * 8.0 / 1e9)),
        ("busy_us", i.busy_us.map(|v| v as f64)),
        ("rwnd_limited_us", i.rwnd_limited_us.map(|v| v as f64)),
        ("sndbuf_limited_us", i.sndbuf_limited_us.map(|v| v as f64)),
    ];
    values.extend(
        opt.into_iter()
            .filter_map(|(n, v)| v.map(|v| (MetricName::from(n), v))),
    );
    Interval {
        stream: i.stream,
        direction: i.direction,
        start_s: i.start.as_secs_f64(),
        end_s: i.end.as_secs_f64(),
        omitted: i.omitted,
        values,
    }
}

/// A UDP test's intervals in the lab's vocabulary (stream 0, up), from the receiver's counts
/// per `interval` of arrival time: the time axis starts at the test's first arrival (the
/// receiver's clock), and the last interval ends at the last arrival. Gbit/s counts whole UDP
/// payloads of the distinct datagrams (the end-of-test markers in the last interval too).
pub fn udp_intervals(r: &UdpReport, interval: Duration) -> Vec<Interval> {
    let span = r.last_arrival_ns.saturating_sub(r.first_arrival_ns) as f64 / 1e9;
    let n = r.intervals.len();
    r.intervals
        .iter()
        .enumerate()
        .map(|(k, u)| udp_interval(k, u, interval, (k + 1 == n).then_some(span)))
        .collect()
}

/// Interval `k` of a UDP test (see [`udp_intervals`]); `last_arrival_s`: it is the test's last
/// and ends there (else it lasts the whole `interval`).
pub fn udp_interval(
    k: usize,
    u: &UdpInterval,
    interval: Duration,
    last_arrival_s: Option<f64>,
) -> Interval {
    let step = interval.as_secs_f64();
    let start_s = (k as u128 * interval.as_nanos()) as f64 / 1e9;
    let end_s = match last_arrival_s {
        Some(span) => span.clamp(start_s, start_s + step),
        None => start_s + step,
    };
    let c = &u.counts;
    let lost = u.expected as f64 - c.unique as f64;
    let mut values: Vec<(MetricName, f64)> = Vec::with_capacity(8);
    if end_s > start_s {
        values.push((
            "gbps".into(),
            c.bytes as f64 * 8.0 / (end_s - start_s) / 1e9,
        ));
    }
    values.extend(
        [
            ("bytes", c.bytes as f64),
            ("datagrams", c.unique as f64),
            ("lost", lost),
        ]
        .map(|(n, v)| (MetricName::from(n), v)),
    );
    if u.expected > 0 {
        values.push(("loss_pct".into(), 100.0 * lost / u.expected as f64));
    }
    values.extend(
        [
            ("duplicates", c.duplicates as f64),
            ("reordered", c.reordered as f64),
            ("jitter_us", u.jitter_ns / 1000.0),
        ]
        .map(|(n, v)| (MetricName::from(n), v)),
    );
    Interval {
        stream: 0,
        direction: Direction::Up,
        start_s,
        end_s,
        omitted: false,
        values,
    }
}

/// A load run's interval in the lab's vocabulary (stream 0; the requests go up).
pub fn load_interval(i: &LoadInterval) -> Interval {
    let mut values: Vec<(MetricName, f64)> = vec![
        ("req_per_s".into(), i.req_per_s()),
        ("requests".into(), i.completed as f64),
        ("errors".into(), i.errors as f64),
    ];
    if i.latency.count > 0 {
        let l = &i.latency;
        values.extend(
            [
                ("lat_mean_us", l.mean_us),
                ("lat_p50_us", l.percentiles.p50_us),
                ("lat_p90_us", l.percentiles.p90_us),
                ("lat_p99_us", l.percentiles.p99_us),
                ("lat_p999_us", l.percentiles.p99_9_us),
                ("lat_max_us", l.max_us),
            ]
            .map(|(n, v)| (MetricName::from(n), v)),
        );
    }
    Interval {
        stream: 0,
        direction: Direction::Up,
        start_s: i.start.as_secs_f64(),
        end_s: i.end.as_secs_f64(),
        omitted: false,
        values,
    }
}

/// The part of a run its summary covers when a start was omitted: `(bytes, seconds, omitted
/// seconds)` of the intervals not omitted, all streams together (their span, from the end of
/// the omitted start to the last interval's end). `None` when nothing was omitted or nothing
/// is left.
pub fn measured(intervals: &[Interval]) -> Option<(f64, f64, f64)> {
    if !intervals.iter().any(|i| i.omitted) {
        return None;
    }
    let kept = || intervals.iter().filter(|i| !i.omitted);
    let start = kept().map(|i| i.start_s).fold(f64::INFINITY, f64::min);
    let end = kept().map(|i| i.end_s).fold(f64::NEG_INFINITY, f64::max);
    let bytes: f64 = kept().filter_map(|i| i.get("bytes")).sum();
    (end > start).then_some((bytes, end - start, start))
}

/// The live line of an interval of cell `label`, repetition `rep`: iperf3's columns for a TCP
/// stream, wrk's for a load run.
pub fn live_line(label: &str, rep: usize, warmup: bool, i: &Interval) -> String {
    let head = format!(
        "{label}{} rep {}:",
        if warmup { " warm-up" } else { "" },
        rep + 1
    );
    let span = format!("{:>15}", format!("{:.2}-{:.2} s", i.start_s, i.end_s));
    let v = |n: &str| i.get(n).map(num).unwrap_or_else(|| "-".into());
    let body = if i.get("req_per_s").is_some() {
        format!(
            "{span} {:>10} req/s  p50 {} us  p99 {} us  errors {}",
            v("req_per_s"),
            v("lat_p50_us"),
            v("lat_p99_us"),
            v("errors")
        )
    } else {
        // A stream: its throughput, then whichever of these it carries (TCP: the window, the
        // RTT, retransmissions; a datagram stream: loss and jitter).
        let mut line = format!(
            "[{}] {:<4} {span} {:>8} Gbit/s",
            i.stream,
            i.direction.as_str(),
            v("gbps")
        );
        for (name, label, unit) in [
            ("cwnd", "cwnd", ""),
            ("srtt_us", "srtt", " us"),
            ("retrans", "retrans", ""),
            ("rcv_rtt_us", "rcv rtt", " us"),
            ("loss_pct", "loss", " %"),
            ("jitter_us", "jitter", " us"),
        ] {
            if let Some(x) = i.get(name) {
                line.push_str(&format!("  {label} {}{unit}", num(x)));
            }
        }
        line
    };
    format!(
        "{head} {body}{}",
        if i.omitted { "  (omitted)" } else { "" }
    )
}

/// The JSON line of an interval (`--json`): where it belongs, then its values.
pub fn live_json(
    experiment: i64,
    cell: usize,
    label: &str,
    rep: usize,
    warmup: bool,
    i: &Interval,
) -> serde_json::Value {
    let mut o = json!({
        "type": "interval",
        "experiment": experiment,
        "cell": cell,
        "label": label,
        "rep": rep,
        "warmup": warmup,
        "stream": i.stream,
        "direction": i.direction.as_str(),
        "start_s": i.start_s,
        "end_s": i.end_s,
        "omitted": i.omitted,
    });
    for (k, v) in &i.values {
        if v.is_finite() {
            o[k.as_ref()] = (*v).into();
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_net::udpbulk::stats::Counts;

    fn tcp(start: u64, end: u64, bytes: u64, omitted: bool) -> TcpInterval {
        TcpInterval {
            start: Duration::from_millis(start),
            end: Duration::from_millis(end),
            delivered: bytes,
            written: bytes,
            omitted,
            cwnd: 10,
            srtt_us: 50,
            busy_us: Some(100),
            ..TcpInterval::default()
        }
    }

    #[test]
    fn a_tcp_interval_maps_to_the_vocabulary() {
        let i = tcp_interval(&tcp(100, 200, 1_250_000, false));
        assert_eq!((i.start_s, i.end_s), (0.1, 0.2));
        assert!((i.get("gbps").unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(i.get("bytes"), Some(1_250_000.0));
        assert_eq!(i.get("cwnd"), Some(10.0));
        assert_eq!(i.get("busy_us"), Some(100.0));
        assert_eq!(i.get("ssthresh"), None, "absent before the first loss");
        assert_eq!(i.get("pacing_gbps"), None);
        for (n, _) in &i.values {
            assert_ne!(metric(n).name, "unknown", "{n} is in the vocabulary");
        }
    }

    #[test]
    fn the_measured_part_is_what_follows_the_omitted_start() {
        let ivs: Vec<Interval> = [
            tcp(0, 100, 1000, true),
            tcp(100, 200, 2000, true),
            tcp(200, 300, 4000, false),
            tcp(300, 350, 3000, false),
        ]
        .iter()
        .map(tcp_interval)
        .collect();
        let (bytes, secs, omitted) = measured(&ivs).unwrap();
        assert_eq!(bytes, 7000.0);
        assert!((secs - 0.15).abs() < 1e-12 && (omitted - 0.2).abs() < 1e-12);
        assert_eq!(measured(&ivs[2..]), None, "nothing omitted");
    }

    #[test]
    fn live_lines_read_like_iperf3_and_wrk() {
        let l = live_line(
            "strategy=write",
            0,
            false,
            &tcp_interval(&tcp(0, 100, 125_000_000, true)),
        );
        assert_eq!(
            l,
            "strategy=write rep 1: [0] up       0.00-0.10 s       10 Gbit/s  cwnd 10  srtt 50 us  retrans 0  (omitted)"
        );
        let li = LoadInterval {
            start: Duration::from_secs(1),
            end: Duration::from_secs(2),
            completed: 1500,
            errors: 2,
            latency: socklab_net::load::Timing {
                count: 1500,
                ..Default::default()
            },
        };
        let l = live_line("design=epoll", 1, true, &load_interval(&li));
        assert!(l.starts_with("design=epoll warm-up rep 2:"), "{l}");
        assert!(l.contains("1500 req/s") && l.contains("errors 2"), "{l}");
        let j = live_json(7, 0, "c", 0, false, &load_interval(&li));
        assert_eq!(j["type"], "interval");
        assert_eq!(j["requests"], 1500.0);
        assert_eq!(j["start_s"], 1.0);
    }

    #[test]
    fn metric_columns_follow_the_vocabulary() {
        assert_eq!(
            ordered(["zzz", "srtt_us", "gbps", "cwnd", "gbps"]),
            ["gbps", "cwnd", "srtt_us", "zzz"]
        );
    }

    #[test]
    fn udp_intervals_carry_loss_and_jitter_and_end_at_the_last_arrival() {
        let iv = |unique: u64, expected: u64, dup: u64, jitter_ns: f64| UdpInterval {
            start_ms: 0,
            counts: Counts {
                arrivals: unique + dup,
                unique,
                bytes: unique * 1000,
                duplicates: dup,
                ..Counts::default()
            },
            jitter_ns,
            expected,
        };
        let r: UdpReport = serde_json::from_value(serde_json::json!({
            "test_id": 1, "counts": Counts::default(), "jitter_ns": 0.0, "owd": null,
            "first_arrival_ns": 5_000_000_000u64, "last_arrival_ns": 5_250_000_000u64,
            "total": null, "fin_bytes": 0, "drain_ms": null, "ended": "drain", "malformed": 0,
            "kernel_drops": 0, "user_us": 0, "sys_us": 0,
            "intervals": [iv(90, 100, 2, 1500.0), iv(101, 100, 0, 800.0), iv(10, 10, 0, 700.0)],
        }))
        .unwrap();
        let out = udp_intervals(&r, Duration::from_millis(100));
        assert_eq!(
            out.iter().map(|i| (i.start_s, i.end_s)).collect::<Vec<_>>(),
            [(0.0, 0.1), (0.1, 0.2), (0.2, 0.25)],
            "back to back; the last ends at the last arrival"
        );
        assert_eq!(out[0].get("lost"), Some(10.0));
        assert_eq!(out[0].get("loss_pct"), Some(10.0));
        assert_eq!(out[0].get("duplicates"), Some(2.0));
        assert_eq!(out[0].get("jitter_us"), Some(1.5));
        assert_eq!(out[0].get("gbps"), Some(90.0 * 8000.0 / 0.1 / 1e9));
        // A late arrival gives one back: the losses add up to the test's.
        assert_eq!(out[1].get("lost"), Some(-1.0));
        assert_eq!(out.iter().filter_map(|i| i.get("lost")).sum::<f64>(), 9.0);
        assert!((out[2].get("gbps").unwrap() - 10.0 * 8000.0 / 0.05 / 1e9).abs() < 1e-12);
        assert!(out
            .iter()
            .all(|i| i.direction == Direction::Up && !i.omitted));
        assert!(out[0]
            .values
            .iter()
            .all(|(n, _)| metric(n).name != "unknown"));
    }
}
