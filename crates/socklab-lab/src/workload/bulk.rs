//! The `bulk` workload: TCP bulk throughput by write strategy and buffer size (seeds 000 and
//! 003), against a sink socklab starts itself (kept for the whole plan) or one somebody else
//! started, optionally over an emulated link.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use socklab_net::bulk::{BulkConfig, BulkResult, Limit};
use socklab_net::series::{LiveTcp, Sampling, TcpInterval};
use socklab_net::units::{format_duration, format_size, parse_duration, parse_size};
use socklab_net::Strategy;

use crate::metric::{m, Better, Metric};
use crate::params::{parse_bool, parse_count, Key, Params};
use crate::resources::{LinkRun, Resources, ServerKey, ServerRole};
use crate::sample::Sample;
use crate::series;
use crate::workload::key::{
    at_most, bounded, nonzero_usize, parse_interval, parse_omit, parse_target, Target, MAX_BYTES,
    MAX_COUNT,
};
use crate::workload::link::{self, LinkParams};
use crate::workload::Spec;
use crate::LabError;

/// The parameters of a bulk-throughput test: the socket layer's configuration, and where to
/// send (the address in `cfg` is filled in when the run starts).
#[derive(Debug, Clone)]
pub struct BulkSpec {
    /// The sink.
    pub to: Target,
    /// Everything else (strategy, sizes, limit, options).
    pub cfg: BulkConfig,
    /// The emulated link between client and sink, if any.
    pub link: Option<LinkParams>,
}

impl PartialEq for BulkSpec {
    fn eq(&self, o: &Self) -> bool {
        // Compare through the canonical text, which covers every parameter.
        self.to == o.to && self.params() == o.params()
    }
}

/// `to`.
pub const TO: Key = Key::new(
    "to",
    "self",
    "sink address HOST:PORT, or self to start one on loopback",
);
/// `strategy`.
pub const STRATEGY: Key = Key::new(
    "strategy",
    "single",
    "write, writev, single, sendmsg, sendfile, splice, zerocopy",
);
/// `nbufs`.
pub const NBUFS: Key = Key::new("nbufs", "1", "buffers per round");
/// `bufsize`.
pub const BUFSIZE: Key = Key::new("bufsize", "128K", "bytes per buffer (K, M suffixes)");
/// `duration`.
pub const DURATION: Key = Key::new("duration", "2s", "time to send");
/// `cc`.
pub const CC: Key = Key::new("cc", "cubic", "congestion control of the sending socket");
/// `read_size`.
pub const READ_SIZE: Key = Key::new("read_size", "128K", "bytes per read() at the sink");

/// Largest `sndbuf` (1 GiB, as `--opts sndbuf=`): setsockopt takes an int.
const MAX_SNDBUF: usize = 1 << 30;

/// The keys of the bulk workload.
pub const KEYS: &[Key] = &[
    TO,
    STRATEGY,
    NBUFS,
    BUFSIZE,
    Key::new(
        "iterations",
        "",
        "rounds to send (one of iterations, duration, bytes)",
    ),
    DURATION,
    Key::new("bytes", "", "bytes to send, rounded up to whole rounds"),
    CC,
    Key::new("nodelay", "false", "TCP_NODELAY on the sender"),
    Key::new(
        "sndbuf",
        "",
        "SO_SNDBUF of the sender (default: autotuning)",
    ),
    READ_SIZE,
    Key::new(
        "verify",
        "false",
        "BLAKE3-hash the stream on both sides and compare",
    ),
    Key::new("seed", "1", "seed of the payload pattern"),
    TIMEOUT,
    Key::new(
        "interval",
        "",
        "sample every this long (e.g. 100ms): bytes, Gbit/s and TCP_INFO per interval, printed live and stored as the repetition's time series",
    ),
    Key::new(
        "omit",
        "",
        "leave the first this long out of the summary (iperf3 -O; needs duration): gbps covers the rest, the omitted intervals stay stored and flagged",
    ),
];

/// `timeout`.
pub const TIMEOUT: Key = Key::new(
    "timeout",
    "auto",
    "a repetition not done this long after the sink's READY is stored failed; auto: duration + 10s + twice the link's round trip (iterations, bytes: no bound, but a sink that accepts nothing for 30s fails it)",
);

/// A `timeout` value: `auto` (None) or a duration.
fn parse_timeout(s: &str) -> Result<Option<Duration>, String> {
    match s.trim() {
        "auto" => Ok(None),
        v => parse_duration(v).map(Some),
    }
}

/// `gbps`.
pub const GBPS: Metric = m(
    "gbps",
    "Gbit/s",
    "Gbit/s",
    "throughput, bytes x 8 / seconds",
    Better::Higher,
);

/// `seconds`.
pub const SECONDS: Metric = m(
    "seconds",
    "s",
    "time s",
    "end-to-end time (sink READY to RESULT)",
    Better::Lower,
);

/// `bytes`.
pub const BYTES: Metric = m("bytes", "B", "bytes", "bytes sent", Better::Neither);

/// `writes`.
pub const WRITES: Metric = m(
    "writes",
    "calls",
    "writes",
    "send system calls issued by the sender",
    Better::Neither,
);

/// `reads`.
pub const READS: Metric = m(
    "reads",
    "calls",
    "reads",
    "read() calls at the receiver that returned data",
    Better::Neither,
);

/// `rcv_user_s`.
pub const RCV_USER_S: Metric = m(
    "rcv_user_s",
    "s",
    "rcv usr",
    "receiver user CPU",
    Better::Lower,
);

/// `rcv_sys_s`.
pub const RCV_SYS_S: Metric = m(
    "rcv_sys_s",
    "s",
    "rcv sys",
    "receiver system CPU",
    Better::Lower,
);

/// The metrics of the bulk workload.
pub const METRICS: &[Metric] = &[
    GBPS,
    SECONDS,
    m(
        "send_seconds",
        "s",
        "send s",
        "time until the last send call returned",
        Better::Lower,
    ),
    BYTES,
    WRITES,
    READS,
    m(
        "bytes_per_read",
        "B",
        "B/read",
        "bytes per receiver read()",
        Better::Neither,
    ),
    m(
        "snd_user_s",
        "s",
        "snd usr",
        "sender user CPU",
        Better::Lower,
    ),
    m(
        "snd_sys_s",
        "s",
        "snd sys",
        "sender system CPU",
        Better::Lower,
    ),
    m(
        "snd_cpu_pct",
        "%",
        "snd cpu%",
        "sender CPU / elapsed",
        Better::Lower,
    ),
    RCV_USER_S,
    RCV_SYS_S,
    m(
        "rcv_cpu_pct",
        "%",
        "rcv cpu%",
        "receiver CPU / elapsed",
        Better::Lower,
    ),
    m(
        "retrans",
        "segments",
        "retrans",
        "TCP segments retransmitted (TCP_INFO)",
        Better::Lower,
    ),
    m(
        "cwnd",
        "segments",
        "cwnd",
        "final congestion window (TCP_INFO)",
        Better::Neither,
    ),
    m(
        "rtt_us",
        "us",
        "rtt us",
        "final smoothed RTT (TCP_INFO)",
        Better::Lower,
    ),
    m(
        "gbps_all",
        "Gbit/s",
        "Gbit/s all",
        "with omit: end-to-end throughput including the omitted start",
        Better::Higher,
    ),
    m(
        "omitted_s",
        "s",
        "omitted s",
        "with omit: the start left out of gbps (to the omit reading)",
        Better::Neither,
    ),
    m(
        "sampler_cpu_s",
        "s",
        "sampler cpu",
        "with interval or omit: CPU of the thread that sampled the time series",
        Better::Lower,
    ),
    m(
        "zc_completions",
        "sends",
        "zc done",
        "MSG_ZEROCOPY sends completed",
        Better::Neither,
    ),
    m(
        "zc_copied",
        "sends",
        "zc copied",
        "MSG_ZEROCOPY sends the kernel copied anyway",
        Better::Neither,
    ),
];

impl Spec for BulkSpec {
    const KIND: &'static str = "bulk";
    const KEYS: &'static [Key] = KEYS;
    const LINKED: bool = true;
    const EXCLUSIVE: &'static [&'static str] = &["iterations", "duration", "bytes"];
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "gbps";
    const COLUMNS: &'static [&'static str] = &[
        "writes",
        "reads",
        "bytes_per_read",
        "snd_cpu_pct",
        "rcv_cpu_pct",
        "retrans",
    ];

    fn parse(p: &Params) -> Result<Self, LabError> {
        let limits = Self::EXCLUSIVE
            .iter()
            .filter(|k| p.get(k).is_some())
            .count();
        if limits > 1 {
            return Err(LabError::Plan(
                "give only one of iterations, duration and bytes".into(),
            ));
        }
        let limit = if let Some(n) = p.parse_opt("iterations", at_most(MAX_COUNT))? {
            Limit::Iterations(n)
        } else if let Some(b) = p.parse_opt("bytes", |s| match parse_size(s)? {
            b if b <= MAX_BYTES => Ok(b),
            _ => Err(format!("at most {}", format_size(MAX_BYTES))),
        })? {
            Limit::Bytes(b)
        } else {
            Limit::Duration(p.value(&DURATION, parse_duration)?)
        };
        let link = link::parse(p)?;
        let connect_timeout = link::connect_timeout(p, &link, Duration::from_secs(5))?;
        let timeout = p.value(&TIMEOUT, parse_timeout)?;
        // Without a timeout, a duration-limited test may run past its duration by a grace
        // that covers the link's round trips (the sink still reads what the buffers hold).
        let grace = link::connect_timeout(p, &link, socklab_net::bulk::GRACE)?;
        let spec = BulkSpec {
            link,
            to: p.value(&TO, parse_target)?,
            cfg: BulkConfig {
                to: SocketAddr::from(([127, 0, 0, 1], 0)),
                strategy: p.value(&STRATEGY, |s| s.parse::<Strategy>())?,
                nbufs: p.value(&NBUFS, nonzero_usize)?,
                bufsize: p.value(&BUFSIZE, nonzero_usize)?,
                limit,
                cc: p.value(&CC, |s| Ok::<_, String>(s.trim().to_string()))?,
                nodelay: p.value_in(KEYS, "nodelay", parse_bool)?,
                sndbuf: p.parse_opt("sndbuf", bounded(1, MAX_SNDBUF))?,
                read_size: p.value(&READ_SIZE, nonzero_usize)?,
                verify: p.value_in(KEYS, "verify", parse_bool)?,
                seed: p.value_in(KEYS, "seed", parse_count)?,
                connect_timeout,
                timeout,
                grace,
                sampling: Sampling {
                    interval: p.parse_opt("interval", parse_interval)?,
                    omit: p.parse_opt("omit", parse_omit)?.flatten(),
                },
            },
        };
        // Check the combination now, before anything runs.
        link::check_target(&spec.link, &spec.to, false)?;
        spec.cfg
            .validate()
            .map_err(|e| LabError::Plan(e.to_string()))?;
        Ok(spec)
    }

    fn params(&self) -> Params {
        let (b, mut p) = (&self.cfg, Params::new());
        link::print(&mut p, &self.link);
        p.set("to", self.to.to_string());
        p.set("strategy", b.strategy.as_str());
        p.set("nbufs", b.nbufs.to_string());
        p.set("bufsize", format_size(b.bufsize as u64));
        match b.limit {
            Limit::Iterations(n) => p.set("iterations", n.to_string()),
            Limit::Duration(d) => p.set("duration", format_duration(d)),
            Limit::Bytes(n) => p.set("bytes", format_size(n)),
        };
        p.set("cc", b.cc.clone());
        p.set("nodelay", b.nodelay.to_string());
        if let Some(s) = b.sndbuf {
            p.set("sndbuf", format_size(s as u64));
        }
        p.set("read_size", format_size(b.read_size as u64));
        p.set("verify", b.verify.to_string());
        p.set("seed", b.seed.to_string());
        // Printed only when given, so plans stored before the key existed keep their text.
        if let Some(t) = b.timeout {
            p.set("timeout", format_duration(t));
        }
        // Printed only when given, so experiments stored before they existed keep their text.
        if let Some(i) = b.sampling.interval {
            p.set("interval", format_duration(i));
        }
        if let Some(o) = b.sampling.omit {
            p.set("omit", format_duration(o));
        }
        p
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
        let to = match self.to {
            Target::SelfSink => res.server(ServerKey {
                role: ServerRole::Sink,
                in_link,
            })?,
            Target::Addr(a) => a,
        };
        // On a client host of its own, this very repetition runs there against `to`.
        let mut there = self.params();
        there.set("to", to.to_string());
        if let Some(s) = res.remote_client(Self::KIND, &there, in_link, label, stop)? {
            return Ok(s);
        }
        let live: Option<LiveTcp> = res.live().map(|sink| -> LiveTcp {
            Arc::new(move |i: &TcpInterval| sink(&series::tcp_interval(i)))
        });
        let (r, link_run) = res.in_client(in_link, || {
            socklab_net::bulk::run_live(&self.net_config(to), stop, live)
        })?;
        let r = r.map_err(|e| match e {
            // The sink socklab started is listening: a connect that fails reached it not (the
            // link's loss or delay); "omit --to" would be no advice.
            socklab_net::NetError::Connect { addr, source } if self.to == Target::SelfSink => {
                let context = if in_link {
                    format!(
                        "cannot connect over the emulated link to the sink socklab started at {addr} (waited {}; the link's loss or delay outlasted it)",
                        format_duration(self.cfg.connect_timeout)
                    )
                } else {
                    format!("cannot connect to the sink socklab started at {addr}")
                };
                LabError::run(label, socklab_net::NetError::Io { context, source })
            }
            other => LabError::run(label, other),
        })?;
        if r.verified == Some(false) {
            return Err(LabError::run(
                label,
                socklab_net::NetError::Protocol {
                    peer: to.to_string(),
                    detail: "the stream hash at the sink differs from what was sent".into(),
                },
            ));
        }
        Ok(sample(&r, to, link_run))
    }
}

impl BulkSpec {
    /// The socket-layer configuration for a sink at `to`.
    pub fn net_config(&self, to: SocketAddr) -> BulkConfig {
        BulkConfig {
            to,
            ..self.cfg.clone()
        }
    }
}

/// The sample of one bulk run against `to`.
pub fn sample(r: &BulkResult, to: SocketAddr, link: LinkRun) -> Sample {
    let secs = |d: Duration| d.as_secs_f64();
    let snd_cpu = secs(r.sender_cpu.cpu());
    let rcv_cpu = (r.sink.user_us + r.sink.sys_us) as f64 / 1e6;
    let mut s = Sample::new(
        [
            ("gbps", r.gbps()),
            ("seconds", r.seconds),
            ("send_seconds", r.send_seconds),
            ("bytes", r.bytes as f64),
            ("writes", r.syscalls as f64),
            ("reads", r.sink.reads as f64),
            (
                "bytes_per_read",
                if r.sink.reads > 0 {
                    r.sink.bytes as f64 / r.sink.reads as f64
                } else {
                    0.0
                },
            ),
            ("snd_user_s", secs(r.sender_cpu.user)),
            ("snd_sys_s", secs(r.sender_cpu.sys)),
            ("snd_cpu_pct", 100.0 * snd_cpu / r.seconds.max(1e-9)),
            ("rcv_user_s", r.sink.user_us as f64 / 1e6),
            ("rcv_sys_s", r.sink.sys_us as f64 / 1e6),
            ("rcv_cpu_pct", 100.0 * rcv_cpu / r.seconds.max(1e-9)),
            ("retrans", r.tcp.total_retrans as f64),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    #[test]
    fn bulk_parses_with_defaults_and_prints_back_the_same_text() {
        let p = Params::new()
            .with("strategy", "writev")
            .with("nbufs", "100")
            .with("bufsize", "15")
            .with("iterations", "20000");
        let w = Workload::from_params("bulk", &p).unwrap();
        let full = w.params();
        assert_eq!(full.get("cc"), Some("cubic"));
        assert_eq!(full.get("to"), Some("self"));
        assert_eq!(full.get("iterations"), Some("20000"));
        assert_eq!(full.get("duration"), None);
        assert_eq!(Workload::from_params("bulk", &full).unwrap(), w);
    }

    #[test]
    fn bad_bulk_params_name_the_key_and_the_fix() {
        let e = |p: Params| Workload::from_params("bulk", &p).unwrap_err().to_string();
        assert!(
            e(Params::new().with("bufsize", "0")).starts_with("bufsize = '0': must be at least 1")
        );
        assert!(
            e(Params::new().with("strategy", "writeev")).contains("choose one of write, writev")
        );
        assert!(e(Params::new().with("nbuf", "3")).contains("unknown parameter 'nbuf'"));
        assert!(e(Params::new()
            .with("nbufs", "2000")
            .with("strategy", "writev"))
        .contains("IOV_MAX"));
        assert!(
            e(Params::new().with("iterations", "1").with("duration", "1s")).contains("only one of")
        );
        assert!(e(Params::new().with("to", "localhost")).contains("missing port"));
        assert!(Workload::from_params("bulkk", &Params::new())
            .unwrap_err()
            .to_string()
            .contains("unknown workload 'bulkk'"));
    }

    #[test]
    fn timeout_is_auto_by_default_and_printed_only_when_given() {
        let spec = |p: Params| BulkSpec::parse(&p);
        let auto = spec(Params::new()).unwrap();
        assert_eq!(auto.cfg.timeout, None);
        assert_eq!(auto.cfg.grace, socklab_net::bulk::GRACE);
        assert_eq!(
            auto.cfg.deadline(),
            Some(Duration::from_secs(2) + socklab_net::bulk::GRACE)
        );
        assert_eq!(
            auto.params().get("timeout"),
            None,
            "old plans keep their text"
        );
        // Over a link the grace covers its round trips too.
        let linked = spec(Params::new().with("link", "delay 50ms")).unwrap();
        assert_eq!(
            linked.cfg.grace,
            socklab_net::bulk::GRACE + Duration::from_millis(200)
        );
        let given = spec(Params::new().with("timeout", "5s")).unwrap();
        assert_eq!(given.cfg.deadline(), Some(Duration::from_secs(5)));
        assert_eq!(given.params().get("timeout"), Some("5s"));
        assert_eq!(BulkSpec::parse(&given.params()).unwrap(), given);
        // A count-limited test has no deadline unless one is given.
        let counted = spec(Params::new().with("iterations", "10")).unwrap();
        assert_eq!(counted.cfg.deadline(), None);
        let e = spec(Params::new().with("duration", "3s").with("timeout", "2s"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--timeout 2s is not longer than --duration 3s"),
            "{e}"
        );
        let e = spec(Params::new().with("timeout", "soon"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("timeout = 'soon'"), "{e}");
    }

    #[test]
    fn a_result_maps_to_its_metrics() {
        let r = BulkResult {
            bytes: 1_000_000_000,
            rounds: 7630,
            syscalls: 7630,
            seconds: 0.5,
            send_seconds: 0.49,
            sink: socklab_net::protocol::SinkResult {
                bytes: 1_000_000_000,
                reads: 4000,
                user_us: 100_000,
                sys_us: 150_000,
                ..Default::default()
            },
            sender_cpu: Default::default(),
            tcp: Default::default(),
            cc: "cubic".into(),
            sndbuf: 0,
            rcvbuf: 0,
            zerocopy: None,
            verified: Some(true),
            series: Default::default(),
        };
        let s = sample(&r, "127.0.0.1:9".parse().unwrap(), LinkRun::default());
        assert_eq!(s.get("gbps"), Some(16.0));
        assert!(s.intervals.is_empty() && s.get("gbps_all").is_none());
        assert_eq!(s.get("bytes_per_read"), Some(250_000.0));
        assert_eq!(s.get("rcv_cpu_pct"), Some(50.0));
        assert_eq!(s.get("writes"), Some(7630.0));
        assert_eq!(s.get("zc_completions"), None);
        assert_eq!(s.extra["verified"], true);
        assert_eq!(s.extra["link"], serde_json::Value::Null);
        // Omitted start (issue 17 item 5): gbps covers what follows it; the end-to-end figure
        // is gbps_all; the intervals are the sample's.
        let iv = |a: u64, b: u64, bytes: u64, omitted: bool| TcpInterval {
            start: Duration::from_millis(a),
            end: Duration::from_millis(b),
            delivered: bytes,
            omitted,
            ..TcpInterval::default()
        };
        let r = BulkResult {
            series: socklab_net::series::SeriesOutput {
                intervals: vec![
                    iv(0, 200, 100_000_000, true),
                    iv(200, 400, 400_000_000, false),
                    iv(400, 500, 500_000_000, false),
                ],
                sampler_cpu: Duration::from_millis(3),
            },
            ..r
        };
        let s = sample(&r, "127.0.0.1:9".parse().unwrap(), LinkRun::default());
        assert_eq!(s.intervals.len(), 3);
        assert!((s.get("gbps").unwrap() - 900e6 * 8.0 / 0.3 / 1e9).abs() < 1e-9);
        assert_eq!(s.get("gbps_all"), Some(16.0));
        assert_eq!(s.get("omitted_s"), Some(0.2));
        assert_eq!(s.get("sampler_cpu_s"), Some(0.003));
        assert_eq!(s.metrics.iter().filter(|(n, _)| n == "gbps").count(), 1);
    }

    #[test]
    fn interval_and_omit_parse_print_and_refuse_bad_values() {
        let p = Params::new()
            .with("interval", "100ms")
            .with("omit", "2s")
            .with("duration", "10s");
        let w = Workload::from_params("bulk", &p).unwrap();
        let full = w.params();
        assert_eq!(
            (full.get("interval"), full.get("omit")),
            (Some("100ms"), Some("2s"))
        );
        assert_eq!(Workload::from_params("bulk", &full).unwrap(), w);
        assert_eq!(
            Workload::from_params("bulk", &Params::new())
                .unwrap()
                .params()
                .get("interval"),
            None,
            "unset keys are not printed"
        );
        let e = |p: Params| Workload::from_params("bulk", &p).unwrap_err().to_string();
        assert!(e(Params::new().with("interval", "0"))
            .starts_with("interval = '0': must be more than 0"));
        let m = e(Params::new().with("omit", "2s"));
        assert!(
            m.contains("--omit 2s is not shorter than --duration 2s"),
            "{m}"
        );
        let m = e(Params::new().with("omit", "1s").with("iterations", "10"));
        assert!(m.contains("needs a run bounded by --duration"), "{m}");
    }
}
