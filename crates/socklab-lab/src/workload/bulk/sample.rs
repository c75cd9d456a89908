//! The sample of one bulk run: its metrics, its facts, its per-stream figures, its time series.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use socklab_net::bulk::BulkResult;

use super::streams;
use crate::model::sample::Sample;
use crate::resources::LinkRun;
use crate::series;

/// The sample of one bulk run against `to`.
pub fn sample(r: &BulkResult, to: SocketAddr, link: LinkRun) -> Sample {
    let secs = |d: Duration| d.as_secs_f64();
    let snd_cpu = secs(r.sender_cpu.cpu());
    let rcv_cpu = secs(r.receiver_cpu.cpu());
    let received: u64 = r.streams.iter().map(|s| s.received).sum();
    let retrans: u64 = r
        .streams
        .iter()
        .map(|s| u64::from(s.tcp.total_retrans))
        .sum();
    let mut s = Sample::new(
        [
            ("gbps", r.gbps()),
            ("seconds", r.seconds),
            ("send_seconds", r.send_seconds),
            ("bytes", r.bytes as f64),
            ("writes", r.syscalls as f64),
            ("reads", r.reads as f64),
            (
                "bytes_per_read",
                if r.reads > 0 {
                    received as f64 / r.reads as f64
                } else {
                    0.0
                },
            ),
            ("snd_user_s", secs(r.sender_cpu.user)),
            ("snd_sys_s", secs(r.sender_cpu.sys)),
            ("snd_cpu_pct", 100.0 * snd_cpu / r.seconds.max(1e-9)),
            ("rcv_user_s", secs(r.receiver_cpu.user)),
            ("rcv_sys_s", secs(r.receiver_cpu.sys)),
            ("rcv_cpu_pct", 100.0 * rcv_cpu / r.seconds.max(1e-9)),
            ("retrans", retrans as f64),
            ("cwnd", r.tcp.snd_cwnd as f64),
            ("rtt_us", r.tcp.rtt_us as f64),
        ],
        json!({
            "link": link.desc,
            "to": to.to_string(),
            "cc": r.cc,
            "sndbuf": r.sndbuf,
            "rcvbuf": r.rcvbuf,
            "rounds": r.rounds,
            "mss": r.tcp.snd_mss,
            "min_rtt_us": r.tcp.min_rtt_us,
            "verified": r.verified,
        }),
    );
    streams::add(&mut s, r);
    s.intervals = r
        .series
        .intervals
        .iter()
        .map(series::tcp_interval)
        .collect();
    if !s.intervals.is_empty() {
        s.extend([("sampler_cpu_s", r.series.sampler_cpu.as_secs_f64())]);
    }
    // With omit, the summary is the part after the omitted start (from the intervals); the
    // end-to-end figure stays as gbps_all.
    if let Some((bytes, secs, omitted)) = series::measured(&s.intervals) {
        s.metrics.retain(|(n, _)| n != "gbps");
        s.extend([
            ("gbps", bytes * 8.0 / secs / 1e9),
            ("gbps_all", r.gbps()),
            ("omitted_s", omitted),
        ]);
    }
    if let Some(zc) = r.zerocopy {
        s.extend([
            ("zc_completions", zc.completed as f64),
            ("zc_copied", zc.copied as f64),
        ]);
    }
    s.extend(link.metrics);
    s
}
