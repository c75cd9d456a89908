//! The `rrul` workload: latency under load, flent's RRUL made socklab's way. Over one path
//! (usually an emulated link with a rate and a queue limit), TCP and UDP ping-pong probes at
//! a fixed rate, first alone (`idle`), then beside `streams` TCP streams up and as many down
//! (`duration`, the `BULK/2` bidir test of `socklab bulk --bidir`); the latency the load
//! added (loaded − idle, p50 and p99), the throughput each way and the probes' loss. The sink
//! and both echo servers run on the link's server side, the client on its client side.

use std::time::Duration;

use serde_json::json;
use socklab_net::bulk::{BulkConfig, Flow, Limit};
use socklab_net::rrul::log::{added, mean_rtt_us, Phase, ProbeLog};
use socklab_net::rrul::{RrulConfig, RrulResult, MAX_PHASE};
use socklab_net::series::{Direction, Sampling, TcpInterval};
use socklab_units::{format_duration, parse_duration};

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{Key, Params};
use crate::model::sample::{Interval, MetricName, Sample};
use crate::model::stats::{CellStats, ExperimentStats};
use crate::resources::{LinkRun, Resources, ServerKey, ServerRole};
use crate::scale::Scale;
use crate::table::{num, Table};
use crate::workload::key::{duration_in, parse_interval, Target};
use crate::workload::link::{self, LinkParams};
use crate::workload::{ReportTable, Spec};
use crate::LabError;

pub mod command;

/// The parameters of a latency-under-load test.
#[derive(Debug, Clone)]
pub struct RrulSpec {
    /// The socket layer's configuration (the servers' addresses are filled in when it runs).
    pub cfg: RrulConfig,
    /// The emulated link, if any (else loopback).
    pub link: Option<LinkParams>,
}

impl PartialEq for RrulSpec {
    fn eq(&self, o: &Self) -> bool {
        self.params() == o.params()
    }
}

/// `idle`.
pub const IDLE: Key = Key::new(
    "idle",
    "2s",
    "the idle phase: probes alone, before the streams start",
);
/// `duration`.
pub const DURATION: Key = Key::new(
    "duration",
    "10s",
    "the loaded phase: the streams send this long (from their common start), probes beside them",
)
.short('t');
/// `probe_interval`.
pub const PROBE_INTERVAL: Key = Key::new(
    "probe_interval",
    "100ms",
    "time between probes of each kind (TCP and UDP), fixed rate from the start of the repetition",
);
/// `probe_timeout`.
pub const PROBE_TIMEOUT: Key = Key::new(
    "probe_timeout",
    "5s",
    "an answer later than this is late (a UDP probe: lost); the probes' answers are awaited this long after the last one",
);
/// `streams`.
pub const STREAMS: Key = Key::new(
    "streams",
    "4",
    "TCP streams each way in the loaded phase (flent's rrul: 4 up, 4 down)",
)
.short('P')
.list();
/// `cc`.
pub const CC: Key = Key::new(
    "cc",
    "cubic",
    "congestion control of every stream's sender and of the TCP probe connection (set and read back: this kernel's default is bbr)",
)
.list();
/// `interval`.
pub const INTERVAL: Key = Key::new(
    "interval",
    "200ms",
    "the time series' interval: throughput each way and the probes' mean RTT per interval (flent's step, 0.2 s)",
);

/// The keys of the rrul workload.
pub const KEYS: &[Key] = &[
    IDLE,
    DURATION,
    PROBE_INTERVAL,
    PROBE_TIMEOUT,
    STREAMS,
    CC,
    INTERVAL,
];

const fn ms(name: &'static str, short: &'static str, description: &'static str) -> Metric {
    m(name, "ms", short, description, Better::Lower)
}

/// The metrics of the rrul workload.
pub const METRICS: &[Metric] = &[
    ms(
        "added_p50_ms",
        "added p50",
        "latency the load added: median TCP probe RTT loaded − idle (the primary metric)",
    ).as_difference(),
    ms(
        "added_p99_ms",
        "added p99",
        "latency the load added: 99th percentile TCP probe RTT loaded − idle",
    ).as_difference(),
    ms(
        "idle_tcp_p50_ms",
        "idle p50",
        "median RTT of the TCP probes of the idle phase",
    ),
    ms(
        "idle_tcp_p99_ms",
        "idle p99",
        "99th percentile RTT of the TCP probes of the idle phase",
    ),
    ms(
        "loaded_tcp_p50_ms",
        "loaded p50",
        "median RTT of the TCP probes of the loaded phase",
    ),
    ms(
        "loaded_tcp_p99_ms",
        "loaded p99",
        "99th percentile RTT of the TCP probes of the loaded phase",
    ),
    ms(
        "added_udp_p50_ms",
        "udp added p50",
        "latency the load added: median UDP probe RTT loaded − idle",
    ).as_difference(),
    ms(
        "added_udp_p99_ms",
        "udp added p99",
        "latency the load added: 99th percentile UDP probe RTT loaded − idle",
    ).as_difference(),
    ms(
        "idle_udp_p50_ms",
        "udp idle p50",
        "median RTT of the UDP probes of the idle phase answered within probe_timeout",
    ),
    ms(
        "idle_udp_p99_ms",
        "udp idle p99",
        "99th percentile RTT of the UDP probes of the idle phase answered within probe_timeout",
    ),
    ms(
        "loaded_udp_p50_ms",
        "udp loaded p50",
        "median RTT of the UDP probes of the loaded phase answered within probe_timeout",
    ),
    ms(
        "loaded_udp_p99_ms",
        "udp loaded p99",
        "99th percentile RTT of the UDP probes of the loaded phase answered within probe_timeout",
    ),
    m(
        "up_mbps",
        "Mbit/s",
        "up Mbit/s",
        "loaded phase: the up streams' bytes over their span (client to server)",
        Better::Higher,
    ),
    m(
        "down_mbps",
        "Mbit/s",
        "down Mbit/s",
        "loaded phase: the down streams' bytes over their span (server to client)",
        Better::Higher,
    ),
    m(
        "total_mbps",
        "Mbit/s",
        "total Mbit/s",
        "loaded phase: up + down",
        Better::Higher,
    ),
    m(
        "udp_loss_idle_pct",
        "%",
        "udp loss idle",
        "UDP probes of the idle phase not answered within probe_timeout",
        Better::Lower,
    ),
    m(
        "udp_loss_loaded_pct",
        "%",
        "udp loss loaded",
        "UDP probes of the loaded phase not answered within probe_timeout",
        Better::Lower,
    ),
    m(
        "tcp_late",
        "probes",
        "tcp late",
        "TCP probes (both phases) answered later than probe_timeout (their RTT still counts)",
        Better::Lower,
    ),
    m(
        "tcp_missing",
        "probes",
        "tcp missing",
        "TCP probes (both phases) never answered within probe_timeout of the last one",
        Better::Lower,
    ),
    m(
        "probes_tcp",
        "probes",
        "tcp probes",
        "TCP probes sent in the idle and loaded phases",
        Better::Neither,
    ),
    m(
        "probes_udp",
        "probes",
        "udp probes",
        "UDP probes sent in the idle and loaded phases",
        Better::Neither,
    ),
    m(
        "probes_skipped",
        "slots",
        "skipped",
        "probe slots passed without a probe (the prober woke too late for them; 0 when the schedule held)",
        Better::Lower,
    ),
    m(
        "stream_retrans",
        "segments",
        "retrans",
        "segments the streams' senders retransmitted (TCP_INFO, both directions)",
        Better::Neither,
    ),
];

impl Spec for RrulSpec {
    const KIND: &'static str = "rrul";
    const KEYS: &'static [Key] = KEYS;
    const LINKED: bool = true;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "added_p50_ms";
    const COLUMNS: &'static [&'static str] = &[
        "idle_tcp_p50_ms",
        "loaded_tcp_p50_ms",
        "added_p99_ms",
        "up_mbps",
        "down_mbps",
        "udp_loss_loaded_pct",
    ];

    fn parse(p: &Params) -> Result<Self, LabError> {
        let phase = duration_in(Duration::ZERO, MAX_PHASE);
        let link = link::parse(p)?;
        link::check_target(&link, &Target::SelfSink, false)?;
        let duration = p.value(&DURATION, |s| match phase(s)? {
            d if d.is_zero() => Err("the loaded phase needs some time, e.g. 10s".to_string()),
            d => Ok(d),
        })?;
        let probe_interval = p.value(&PROBE_INTERVAL, |s| match parse_duration(s)? {
            d if d.is_zero() => Err("probes need time between them, e.g. 100ms".to_string()),
            d if d < Duration::from_millis(1) => Err("use 1ms or more, e.g. 100ms".to_string()),
            d => Ok(d),
        })?;
        let probe_timeout = p.value(&PROBE_TIMEOUT, |s| match parse_duration(s)? {
            d if d.is_zero() || d > Duration::from_secs(60) => {
                Err("use more than 0 and at most 60s, e.g. 5s".to_string())
            }
            d => Ok(d),
        })?;
        let max_streams = socklab_net::protocol::multi::MAX_STREAMS / 2;
        let streams = p.value(&STREAMS, |s| match s.trim().parse::<u32>() {
            Ok(n) if (1..=max_streams).contains(&n) => Ok(n),
            _ => Err(format!(
                "use 1 to {max_streams} streams each way, e.g. 4 (flent's rrul)"
            )),
        })?;
        let cc = p.value(&CC, |s| Ok::<_, String>(s.trim().to_string()))?;
        let interval = p.value(&INTERVAL, parse_interval)?;
        let connect_timeout = link::connect_timeout(p, &link, Duration::from_secs(5))?;
        let grace = link::connect_timeout(p, &link, socklab_net::bulk::GRACE)?;
        let any = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let cfg = RrulConfig {
            bulk: BulkConfig {
                streams,
                flow: Flow::Bidir,
                limit: Limit::Duration(duration),
                cc,
                connect_timeout,
                grace,
                sampling: Sampling {
                    interval: Some(interval),
                    omit: None,
                },
                ..BulkConfig::new(any)
            },
            idle: p.value(&IDLE, phase)?,
            probe_interval,
            probe_timeout,
            ..RrulConfig::new(any, any, any)
        };
        cfg.validate().map_err(|e| LabError::Plan(e.to_string()))?;
        Ok(RrulSpec { cfg, link })
    }

    /// The idle phase, then the loaded one.
    fn time_bounds(&self) -> crate::workload::TimeBounds {
        let p = self.params();
        let d = crate::workload::duration_of(&p, "idle")
            .zip(crate::workload::duration_of(&p, "duration"));
        crate::workload::TimeBounds::exactly(d.map(|(i, d)| i + d))
    }

    fn params(&self) -> Params {
        let (c, mut p) = (&self.cfg, Params::new());
        link::print(&mut p, &self.link);
        p.set("idle", format_duration(c.idle));
        p.set("duration", format_duration(c.duration()));
        p.set("probe_interval", format_duration(c.probe_interval));
        p.set("probe_timeout", format_duration(c.probe_timeout));
        p.set("streams", c.bulk.streams.to_string());
        p.set("cc", c.bulk.cc.clone());
        if let Some(i) = c.bulk.sampling.interval {
            p.set("interval", format_duration(i));
        }
        p
    }

    fn tables(st: &ExperimentStats) -> Vec<ReportTable> {
        table(st)
            .map(|table| ReportTable {
                title: "Latency under load",
                text_heading: "latency under load (means over the repetitions):",
                class: "rrul",
                note: NOTE,
                table,
            })
            .into_iter()
            .collect()
    }

    fn run(
        &self,
        res: &mut Resources,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        let in_link = self.link.is_some();
        if let Some(l) = &self.link {
            res.link(l)?;
        }
        let sink = res.server(ServerKey {
            role: ServerRole::Sink,
            in_link,
        })?;
        // The echo server answers at once: TCP_NODELAY on its side too, or Nagle would hold
        // an answer while the one before is unacknowledged (the probes are pipelined).
        let tcp_echo = res.server(ServerKey {
            role: ServerRole::Echo {
                udp: false,
                opts: "nodelay".into(),
            },
            in_link,
        })?;
        let udp_echo = res.server(ServerKey {
            role: ServerRole::Echo {
                udp: true,
                opts: "baseline".into(),
            },
            in_link,
        })?;
        let mut cfg = self.cfg.clone();
        cfg.bulk.to = res.route(in_link, sink)?;
        cfg.tcp_echo = res.route(in_link, tcp_echo)?;
        cfg.udp_echo = res.route(in_link, udp_echo)?;
        let (r, link_run) = res.in_client(in_link, || socklab_net::rrul::run(&cfg, stop))?;
        let r = r.map_err(|e| LabError::run(label, e))?;
        Ok(sample(&r, &cfg, link_run))
    }
}

/// The statistics of a probe log's two phases.
fn phases(log: &ProbeLog, r: &RrulResult, bound: Duration, late_counts: bool) -> (Phase, Phase) {
    (
        log.phase(r.idle.0, r.idle.1, bound, late_counts),
        log.phase(r.loaded.0, r.loaded.1, bound, late_counts),
    )
}

/// The sample of one rrul repetition of `cfg`.
pub fn sample(r: &RrulResult, cfg: &RrulConfig, link: LinkRun) -> Sample {
    let bound = cfg.probe_timeout;
    let (ti, tl) = phases(&r.tcp, r, bound, true);
    let (ui, ul) = phases(&r.udp, r, bound, false);
    let mbps = |d| r.bulk.gbps_of(d).unwrap_or(0.0) * 1e3;
    let (up, down) = (mbps(Direction::Up), mbps(Direction::Down));
    let mut s = Sample::new(
        [
            ("up_mbps", up),
            ("down_mbps", down),
            ("total_mbps", up + down),
            ("tcp_late", (ti.late + tl.late) as f64),
            ("tcp_missing", (ti.missing + tl.missing) as f64),
            ("probes_tcp", (ti.sent + tl.sent) as f64),
            ("probes_udp", (ui.sent + ul.sent) as f64),
            ("probes_skipped", (r.tcp.skipped + r.udp.skipped) as f64),
            (
                "stream_retrans",
                r.bulk
                    .streams
                    .iter()
                    .map(|s| f64::from(s.tcp.total_retrans))
                    .sum(),
            ),
        ],
        json!({
            "link": link.desc,
            "cc": r.bulk.cc,
            "probe_cc": r.probe_cc,
            "streams": r.bulk.streams.iter().map(|s| json!({
                "stream": s.index,
                "direction": s.direction.as_str(),
                "cc": s.cc,
                "bytes": s.bytes,
                "retrans": s.tcp.total_retrans,
            })).collect::<Vec<_>>(),
            "idle_s": [r.idle.0.as_secs_f64(), r.idle.1.as_secs_f64()],
            "loaded_s": [r.loaded.0.as_secs_f64(), r.loaded.1.as_secs_f64()],
            "strays": r.tcp.strays + r.udp.strays,
        }),
    );
    let opt: [(&'static str, Option<f64>); 14] = [
        ("idle_tcp_p50_ms", ti.quantile_ms(0.5)),
        ("idle_tcp_p99_ms", ti.quantile_ms(0.99)),
        ("loaded_tcp_p50_ms", tl.quantile_ms(0.5)),
        ("loaded_tcp_p99_ms", tl.quantile_ms(0.99)),
        (
            "added_p50_ms",
            added(ti.quantile_ms(0.5), tl.quantile_ms(0.5)),
        ),
        (
            "added_p99_ms",
            added(ti.quantile_ms(0.99), tl.quantile_ms(0.99)),
        ),
        ("idle_udp_p50_ms", ui.quantile_ms(0.5)),
        ("idle_udp_p99_ms", ui.quantile_ms(0.99)),
        ("loaded_udp_p50_ms", ul.quantile_ms(0.5)),
        ("loaded_udp_p99_ms", ul.quantile_ms(0.99)),
        (
            "added_udp_p50_ms",
            added(ui.quantile_ms(0.5), ul.quantile_ms(0.5)),
        ),
        (
            "added_udp_p99_ms",
            added(ui.quantile_ms(0.99), ul.quantile_ms(0.99)),
        ),
        ("udp_loss_idle_pct", ui.lost_pct(false)),
        ("udp_loss_loaded_pct", ul.lost_pct(false)),
    ];
    s.extend(opt.into_iter().filter_map(|(n, v)| v.map(|v| (n, v))));
    s.intervals = series(r, cfg);
    s.extend(link.metrics);
    s
}

/// The time series on the repetition's clock: per interval the throughput of each direction
/// (every stream of it together; zero over the idle phase) and, on the up rows, the mean RTT
/// of the probes sent in the interval.
pub fn series(r: &RrulResult, cfg: &RrulConfig) -> Vec<Interval> {
    let step = cfg.bulk.sampling.interval.unwrap_or(cfg.probe_interval);
    let off = r.bulk_offset;
    let mut spans: Vec<(Duration, Duration, [u64; 2])> = Vec::new();
    // The idle phase and the streams' connect: nothing sent.
    let mut t = Duration::ZERO;
    while t < off {
        let e = (t + step).min(off);
        spans.push((t, e, [0, 0]));
        t = e;
    }
    // The loaded phase: the k-th interval of every stream (they are read together).
    let per_stream = |d: Direction| -> Vec<Vec<&TcpInterval>> {
        let mut by: std::collections::BTreeMap<u32, Vec<&TcpInterval>> = Default::default();
        for i in r.bulk.series.intervals.iter().filter(|i| i.direction == d) {
            by.entry(i.stream).or_default().push(i);
        }
        by.into_values().collect()
    };
    let (ups, downs) = (per_stream(Direction::Up), per_stream(Direction::Down));
    let n = ups.iter().chain(&downs).map(Vec::len).max().unwrap_or(0);
    for k in 0..n {
        let at = |v: &Vec<Vec<&TcpInterval>>| -> Vec<TcpInterval> {
            v.iter().filter_map(|s| s.get(k).map(|i| **i)).collect()
        };
        let (u, d) = (at(&ups), at(&downs));
        let all = || u.iter().chain(&d);
        let Some(start) = all().map(|i| i.start).min() else {
            continue;
        };
        let end = all().map(|i| i.end).max().unwrap_or(start);
        let bytes = |v: &[TcpInterval]| v.iter().map(|i| i.delivered).sum::<u64>();
        spans.push((off + start, off + end, [bytes(&u), bytes(&d)]));
    }
    let mut out = Vec::with_capacity(spans.len() * 2);
    for (a, b, bytes) in spans {
        let secs = (b - a).as_secs_f64();
        for (dir, by) in [(Direction::Up, bytes[0]), (Direction::Down, bytes[1])] {
            let mut values: Vec<(MetricName, f64)> = vec![
                (
                    "mbps".into(),
                    if secs > 0.0 {
                        by as f64 * 8.0 / secs / 1e6
                    } else {
                        0.0
                    },
                ),
                ("bytes".into(), by as f64),
            ];
            if dir == Direction::Up {
                for (name, log) in [("probe_tcp_rtt_us", &r.tcp), ("probe_udp_rtt_us", &r.udp)] {
                    if let Some(v) = mean_rtt_us(log, a, b) {
                        values.push((name.into(), v));
                    }
                }
            }
            out.push(Interval {
                stream: 0,
                direction: dir,
                start_s: a.as_secs_f64(),
                end_s: b.as_secs_f64(),
                omitted: false,
                values,
            });
        }
    }
    out
}

/// The report's table: idle, loaded and added latency of both probes, throughput each way
/// and the UDP probes' loss, per cell.
pub fn table(st: &ExperimentStats) -> Option<Table> {
    let cells: Vec<&CellStats> = st
        .cells
        .iter()
        .filter(|c| c.metrics.contains_key("up_mbps"))
        .collect();
    if cells.is_empty() {
        return None;
    }
    let cols: [(&str, &str); 10] = [
        ("idle_tcp_p50_ms", "tcp idle p50"),
        ("loaded_tcp_p50_ms", "tcp loaded p50"),
        ("added_p50_ms", "added p50"),
        ("added_p99_ms", "added p99"),
        ("idle_udp_p50_ms", "udp idle p50"),
        ("loaded_udp_p50_ms", "udp loaded p50"),
        ("added_udp_p50_ms", "udp added p50"),
        ("up_mbps", "up Mbit/s"),
        ("down_mbps", "down Mbit/s"),
        ("udp_loss_loaded_pct", "udp loss %"),
    ];
    // Latencies in ms, throughput in the one unit that suits each column (Scale).
    let scales: Vec<Scale> = cols
        .iter()
        .map(|(k, _)| {
            let means = cells.iter().filter_map(|c| c.metrics.get(*k));
            Scale::column(crate::workload::metric(k).unit, means.map(|s| s.mean))
        })
        .collect();
    let mut headers = vec!["config".to_string(), "n".to_string()];
    for ((k, h), s) in cols.iter().zip(&scales) {
        headers.push(s.header(h, crate::workload::metric(k).unit));
    }
    let mut t = Table::from_headers(headers);
    for c in cells {
        let mut row = vec![c.cell.label.clone(), c.n_text(st.keep_invalid)];
        for ((k, _), sc) in cols.iter().zip(&scales) {
            row.push(match c.metrics.get(*k) {
                Some(s) if k.starts_with("added") => added_cell(s),
                Some(s) => sc.num(s.mean),
                None => "-".into(),
            });
        }
        t.row(row);
    }
    Some(t)
}

/// An added latency (loaded − idle) as the table shows it: the mean, and where it is
/// negative (the loaded percentile came out below the idle one), what that means: within the
/// repetitions' noise when the 95% interval reaches 0 or above, else the loaded phase was
/// faster; a load cannot take latency away, so a negative value is never read as a gain.
pub fn added_cell(s: &socklab_stats::Summary) -> String {
    if s.mean >= 0.0 {
        return num(s.mean);
    }
    match s.ci95() {
        Some((lo, hi)) if hi >= 0.0 => format!(
            "{} (≈ 0: within the noise, CI {} to {})",
            num(s.mean),
            num(lo),
            num(hi)
        ),
        Some((lo, hi)) => format!(
            "{} (loaded below idle, CI {} to {})",
            num(s.mean),
            num(lo),
            num(hi)
        ),
        None => format!("{} (≈ 0: loaded below idle, one repetition)", num(s.mean)),
    }
}

/// The caption of [`table`].
pub const NOTE: &str = "Latency in ms: the probes' round trips (one TCP connection with TCP_NODELAY, one UDP socket, a 64-byte ping-pong each at a fixed rate) alone (*idle*) and beside the streams up and down (*loaded*), per percentile; *added* is loaded − idle, the delay the load's queue put on everything else crossing the bottleneck (the TCP probes' median is the primary metric); a negative added value (the loaded percentile below the idle one) means the load added nothing measurable, and the cell says whether its 95% interval reaches 0 (*within the noise*); cells are compared by the difference in ms, never by percent of a value near zero. *up* and *down* are the loaded phase's throughput each way, *udp loss* the UDP probes of the loaded phase not answered within probe_timeout. Means over the measured repetitions; with fewer than 5 repetitions no comparison is judged.";

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_net::bulk::{BulkResult, StreamStats};
    use socklab_net::series::SeriesOutput;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn log(from: u64, n: u64, rtt: impl Fn(u64) -> Option<u64>) -> ProbeLog {
        let mut l = ProbeLog::default();
        for k in 0..n {
            let at = ms(from + 100 * k);
            let s = l.sent(at);
            if let Some(r) = rtt(k) {
                l.answered(s, at + ms(r));
            }
        }
        l
    }

    fn stream(index: u32, direction: Direction, bytes: u64) -> StreamStats {
        StreamStats {
            index,
            direction,
            bytes,
            received: bytes,
            seconds: 1.0,
            ..StreamStats::default()
        }
    }

    fn iv(stream: u32, direction: Direction, a: u64, b: u64, bytes: u64) -> TcpInterval {
        TcpInterval {
            stream,
            direction,
            start: ms(a),
            end: ms(b),
            delivered: bytes,
            ..TcpInterval::default()
        }
    }

    /// A made-up repetition: idle 0-1 s with 10 ms probes, the streams from 1.2 s for 1 s with
    /// 200 ms TCP probes and 300 ms UDP ones (one lost); 2.5 MB up, 1.25 MB down.
    fn result() -> RrulResult {
        let mut tcp = log(0, 10, |_| Some(10));
        let mut udp = log(0, 10, |_| Some(11));
        for k in 0..10 {
            let at = ms(1200 + 100 * k);
            let s = tcp.sent(at);
            tcp.answered(s, at + ms(200));
            let s = udp.sent(at);
            if k != 3 {
                udp.answered(s, at + ms(300));
            }
        }
        let bulk = BulkResult {
            series: SeriesOutput {
                intervals: vec![
                    iv(0, Direction::Up, 0, 500, 500_000),
                    iv(1, Direction::Up, 0, 500, 500_000),
                    iv(2, Direction::Down, 0, 500, 250_000),
                    iv(0, Direction::Up, 500, 1000, 750_000),
                    iv(1, Direction::Up, 500, 1000, 750_000),
                    iv(2, Direction::Down, 500, 1000, 1_000_000),
                ],
                sampler_cpu: Duration::ZERO,
            },
            ..BulkResult::from_streams(
                vec![
                    stream(0, Direction::Up, 1_250_000),
                    stream(1, Direction::Up, 1_250_000),
                    stream(2, Direction::Down, 1_250_000),
                ],
                SeriesOutput::default(),
            )
        };
        RrulResult {
            tcp,
            udp,
            bulk,
            idle: (Duration::ZERO, ms(1000)),
            loaded: (ms(1200), ms(2200)),
            bulk_offset: ms(1200),
            probe_cc: "cubic".into(),
            elapsed: ms(2500),
        }
    }

    #[test]
    fn a_result_maps_to_idle_loaded_added_throughput_and_loss() {
        let spec = RrulSpec::parse(&Params::new()).unwrap();
        let s = sample(&result(), &spec.cfg, LinkRun::default());
        assert_eq!(s.get("idle_tcp_p50_ms"), Some(10.0));
        assert_eq!(s.get("loaded_tcp_p50_ms"), Some(200.0));
        assert_eq!(s.get("added_p50_ms"), Some(190.0));
        assert_eq!(s.get("added_p99_ms"), Some(190.0));
        assert_eq!(s.get("added_udp_p50_ms"), Some(289.0));
        assert_eq!(s.get("udp_loss_idle_pct"), Some(0.0));
        assert_eq!(s.get("udp_loss_loaded_pct"), Some(10.0));
        assert_eq!(s.get("tcp_missing"), Some(0.0));
        assert_eq!(s.get("probes_tcp"), Some(20.0));
        // 2.5 MB up over 1 s, 1.25 MB down.
        assert_eq!(s.get("up_mbps"), Some(20.0));
        assert_eq!(s.get("down_mbps"), Some(10.0));
        assert_eq!(s.get("total_mbps"), Some(30.0));
        for (n, _) in &s.metrics {
            assert_ne!(crate::workload::metric(n).name, "unknown", "{n}");
        }
    }

    #[test]
    fn the_series_runs_from_the_idle_phase_through_the_load_each_direction_summed() {
        let spec = RrulSpec::parse(&Params::new()).unwrap();
        let ivs = series(&result(), &spec.cfg);
        let ups: Vec<&Interval> = ivs
            .iter()
            .filter(|i| i.direction == Direction::Up)
            .collect();
        // The idle phase and the connect (0-1.2 s) in 200 ms steps, then the two intervals.
        assert_eq!(ups.len(), 6 + 2);
        assert_eq!((ups[0].start_s, ups[0].end_s), (0.0, 0.2));
        assert_eq!(ups[0].get("mbps"), Some(0.0));
        assert_eq!(ups[0].get("probe_tcp_rtt_us"), Some(10_000.0));
        assert_eq!(ups[6].start_s, 1.2);
        // 1 MB up in 0.5 s: 16 Mbit/s; the probes sent in 1.2-1.7 s took 200 ms.
        assert!((ups[6].get("mbps").unwrap() - 16.0).abs() < 1e-9);
        assert_eq!(ups[6].get("probe_tcp_rtt_us"), Some(200_000.0));
        let down = ivs
            .iter()
            .filter(|i| i.direction == Direction::Down)
            .nth(7)
            .unwrap();
        assert!((down.get("mbps").unwrap() - 16.0).abs() < 1e-9);
        assert_eq!(
            down.get("probe_tcp_rtt_us"),
            None,
            "the probes are on up rows"
        );
        // The intervals cover the repetition without gaps.
        for w in ups.windows(2) {
            assert!((w[0].end_s - w[1].start_s).abs() < 1e-12);
        }
    }

    #[test]
    fn keys_parse_print_and_refuse_bad_values() {
        let spec = RrulSpec::parse(&Params::new()).unwrap();
        assert_eq!(spec.cfg.bulk.streams, 4);
        assert_eq!(spec.cfg.bulk.cc, "cubic");
        assert_eq!(spec.cfg.bulk.flow, Flow::Bidir);
        assert_eq!(RrulSpec::parse(&spec.params()).unwrap(), spec);
        for (k, v, want) in [
            (
                "streams",
                "0",
                "streams = '0': use 1 to 64 streams each way",
            ),
            ("probe_interval", "0", "probe_interval = '0'"),
            (
                "duration",
                "0s",
                "duration = '0s': the loaded phase needs some time",
            ),
        ] {
            let e = RrulSpec::parse(&Params::new().with(k, v))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{e}");
        }
        let e = RrulSpec::parse(
            &Params::new()
                .with("link", "rate 20mbit")
                .with("link_driver", "udp-proxy"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("udp-proxy relays UDP only"), "{e}");
    }
}
