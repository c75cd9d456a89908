//! The `bulk` workload: TCP bulk throughput by write strategy and buffer size (seeds 000 and
//! 003), against a sink socklab starts itself (kept for the whole plan) or one somebody else
//! started, optionally over an emulated link; one stream or several (`streams`), the client
//! sending, the sink sending or both (`direction`), paced (`pacing_rate`) and pinned
//! (`affinity`, `server_affinity`). Per-stream figures are stored as metrics named
//! `<metric>.s<stream>` (`gbps.s0`, …) and shown in a table of their own. Socket options as
//! data (`opts`, pingpong's vocabulary, read back on both ends) are in [`opts`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use socklab_net::bulk::{BulkConfig, Flow, Limit};
use socklab_net::cpus::CpuList;
use socklab_net::series::{LiveTcp, Sampling, TcpInterval};
use socklab_net::Strategy;
use socklab_units::{format_bps, parse_rate, Rate};
use socklab_units::{format_duration, format_size, parse_duration, parse_size};

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{parse_bool, parse_count, Key, Params, Preset};
use crate::model::sample::Sample;
use crate::resources::{Resources, ServerKey, ServerRole};
use crate::series;
use crate::workload::key::{
    at_most, bounded, nonzero_usize, parse_interval, parse_omit, Target, MAX_BYTES, MAX_COUNT,
};
use crate::workload::link::{self, LinkParams};
use crate::workload::{ReportTable, Spec};
use crate::LabError;

pub mod iperf3;
pub mod opts;
mod sample;
mod streams;
pub mod tls;

pub use sample::sample;

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
    /// `to` is `iperf3://`: the client speaks iperf3 to an `iperf3 -s` ([`iperf3`]).
    pub iperf3: bool,
    /// The TLS keys as given (`None`: `tls` not given); the net layer's TLS is in `cfg`.
    pub tls: Option<tls::TlsKeys>,
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
    "sink address HOST:PORT, iperf3://HOST[:PORT] for an `iperf3 -s` (port 5201 by default), or self to start one on loopback",
);
/// `strategy`.
pub const STRATEGY: Key = Key::new(
    "strategy",
    "single",
    "write, writev, single, sendmsg, sendfile, splice, zerocopy",
)
.short('s')
.list();
/// `nbufs`.
pub const NBUFS: Key = Key::new("nbufs", "1", "buffers per round").list();
/// `bufsize`.
pub const BUFSIZE: Key = Key::new(
    "bufsize",
    "128K",
    "bytes per buffer (K = KiB = 1024, M = MiB; KB is refused: 1000 or 1024?)",
)
.size()
.list();
/// `duration`.
pub const DURATION: Key = Key::new("duration", "2s", "time to send").short('t');
/// `cc`.
pub const CC: Key = Key::new("cc", "cubic", "congestion control of the sending socket").list();
/// `read_size`.
pub const READ_SIZE: Key = Key::new("read_size", "128K", "bytes per read() at the sink").size();

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
    )
    .short('n'),
    DURATION,
    Key::new("bytes", "", "bytes to send, rounded up to whole rounds").size(),
    CC,
    Key::new("nodelay", "false", "TCP_NODELAY on the sender").switch(),
    Key::new(
        "sndbuf",
        "",
        "SO_SNDBUF of the sender (default: autotuning)",
    )
    .size(),
    READ_SIZE,
    Key::new(
        "verify",
        "false",
        "BLAKE3-hash the stream on both sides and compare",
    )
    .switch(),
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
    STREAMS,
    DIRECTION,
    Key::new(
        "pacing_rate",
        "",
        "SO_MAX_PACING_RATE of every sending socket, bits/s (K, M, G: decimal, as iperf3's fq-rate), read back; the sink's for down streams (default: unlimited)",
    )
    .list(),
    Key::new(
        "affinity",
        "",
        "CPUs of the client's stream threads (0, 0,2, 0-3): stream i runs on the list's (i mod length)-th, read back (default: not pinned)",
    ),
    Key::new(
        "server_affinity",
        "",
        "CPUs of the sink's stream threads, round-robin as affinity (a sink of socklab that speaks BULK/2)",
    ),
    opts::OPTS,
    tls::TLS,
    tls::TLS_VERSION,
    tls::TLS_TRUST,
];

/// `streams`.
pub const STREAMS: Key = Key::new(
    "streams",
    "1",
    "streams per direction (iperf3 -P), each its own connection and thread, started together; gbps is their total",
)
.short('P')
.list();

/// `direction`.
pub const DIRECTION: Key = Key::new(
    "direction",
    "up",
    "up (the client sends), down (the sink sends, iperf3 -R) or bidir (both at once, streams each way, iperf3's bidir mode)",
)
.no_flag()
.presets(DIRECTIONS);

/// The flags that set `direction`.
const DIRECTIONS: &[Preset] = &[
    Preset::new(
        "reverse",
        "down",
        "The sink sends and the client reads (iperf3 -R): the same write strategies on the sink's side, the reads counted on the client",
    )
    .short('R'),
    Preset::new(
        "bidir",
        "bidir",
        "Both directions at once on separate connections, the given streams each way (iperf3's bidir mode), each direction with its own figures",
    ),
];

/// A `pacing_rate`: bits per second.
fn parse_pacing(s: &str) -> Result<u64, String> {
    match parse_rate(s).map_err(|e| e.replace(", or max", ""))? {
        Rate::Bps(b) => Ok(b),
        Rate::Max => Err("max is no pacing rate: give bits/s, e.g. 500M, or leave it unset".into()),
    }
}

/// A `streams` count (its bound is checked with the direction).
fn parse_streams(s: &str) -> Result<u32, String> {
    let n = crate::model::params::parse_count(s)?;
    u32::try_from(n).map_err(|_| {
        format!(
            "{n} streams: use 1 to {}",
            socklab_net::protocol::multi::MAX_STREAMS
        )
    })
}

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
    "end-to-end time: the start (READY; with several streams, all READY) to the last stream's receiver having read every byte",
    Better::Lower,
);

/// `bytes`.
pub const BYTES: Metric = m(
    "bytes",
    "B",
    "bytes",
    "bytes sent (every stream)",
    Better::Neither,
);

/// `writes`.
pub const WRITES: Metric = m(
    "writes",
    "calls",
    "writes",
    "send system calls issued by the sending ends (every stream; the sink's for down streams)",
    Better::Neither,
);

/// `reads`.
pub const READS: Metric = m(
    "reads",
    "calls",
    "reads",
    "read() calls at the receiving ends that returned data (every stream; the client's for down streams)",
    Better::Neither,
);

/// `rcv_user_s`.
pub const RCV_USER_S: Metric = m(
    "rcv_user_s",
    "s",
    "rcv usr",
    "receiver user CPU (every stream's receiving thread: the sink's for up streams, the client's for down)",
    Better::Lower,
);

/// `rcv_sys_s`.
pub const RCV_SYS_S: Metric = m(
    "rcv_sys_s",
    "s",
    "rcv sys",
    "receiver system CPU (every stream's receiving thread)",
    Better::Lower,
);

/// Prefix of the per-stream metrics (`gbps.s0`, `bytes.s1`, …): `<metric>.s<stream>`.
pub const PER_STREAM: &[&str] = &["gbps", "bytes", "retrans", "cwnd", "rtt_us"];

/// The metrics of the bulk workload.
pub const METRICS: &[Metric] = &[
    GBPS,
    m(
        "gbps_up",
        "Gbit/s",
        "Gbit/s up",
        "direction = bidir: the up streams' bytes over their span",
        Better::Higher,
    ),
    m(
        "gbps_down",
        "Gbit/s",
        "Gbit/s down",
        "direction = bidir: the down streams' bytes over their span",
        Better::Higher,
    ),
    m(
        "fairness",
        "",
        "fairness",
        "several streams: Jain's index over the streams' Gbit/s, 1 = equal shares, 1/n = one stream takes all",
        Better::Higher,
    ),
    m(
        "gbps.s<n>",
        "Gbit/s",
        "Gbit/s",
        "several streams: this stream's bytes over its own time (start to its end)",
        Better::Higher,
    ),
    m(
        "bytes.s<n>",
        "B",
        "bytes",
        "several streams: this stream's bytes",
        Better::Neither,
    ),
    m(
        "retrans.s<n>",
        "segments",
        "retrans",
        "several streams: this stream's retransmitted segments (its sender's TCP_INFO)",
        Better::Lower,
    ),
    m(
        "cwnd.s<n>",
        "segments",
        "cwnd",
        "several streams: this stream's final congestion window",
        Better::Neither,
    ),
    m(
        "rtt_us.s<n>",
        "us",
        "rtt us",
        "several streams: this stream's final smoothed RTT (its sender's)",
        Better::Lower,
    ),
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
        "sender user CPU (every stream's sending thread: the client's for up streams, the sink's for down)",
        Better::Lower,
    ),
    m(
        "snd_sys_s",
        "s",
        "snd sys",
        "sender system CPU (every stream's sending thread)",
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
        "TCP segments retransmitted (TCP_INFO of every stream's sender)",
        Better::Lower,
    ),
    m(
        "cwnd",
        "segments",
        "cwnd",
        "final congestion window (TCP_INFO of stream 0's sender)",
        Better::Neither,
    ),
    m(
        "rtt_us",
        "us",
        "rtt us",
        "final smoothed RTT (TCP_INFO of stream 0's sender)",
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
    opts::OPTS_OFF,
    tls::HANDSHAKE_MS,
    tls::SND_CPU_PER_BYTE,
    tls::RCV_CPU_PER_BYTE,
    iperf3::SERVER_BYTES,
    iperf3::SERVER_CPU_PCT,
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
        "snd_cpu_ns_per_byte",
        "rcv_cpu_ns_per_byte",
        "tls_handshake_ms",
        "retrans",
        "fairness",
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
        let (iperf3, to) = p.value(&TO, iperf3::parse_to)?;
        let mut spec = BulkSpec {
            link,
            iperf3,
            to,
            tls: None,
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
                streams: p.value(&STREAMS, parse_streams)?,
                flow: p.value(&DIRECTION, |s| s.parse::<Flow>())?,
                pacing_rate: p.parse_opt("pacing_rate", parse_pacing)?,
                affinity: p.parse_opt("affinity", |s| s.parse::<CpuList>())?,
                server_affinity: p.parse_opt("server_affinity", |s| s.parse::<CpuList>())?,
                opts: None,
                tls: None,
            },
        };
        spec.cfg.opts = opts::parse(p, &spec.cfg)?;
        (spec.tls, spec.cfg.tls) = tls::parse(p, iperf3)?;
        // Check the combination now, before anything runs.
        link::check_target(&spec.link, &spec.to, false)?;
        let net = socklab_net::bulk::iperf3::check;
        (spec.cfg.validate())
            .and_then(|()| if iperf3 { net(&spec.cfg) } else { Ok(()) })
            .map_err(|e| LabError::Plan(e.to_string()))?;
        Ok(spec)
    }

    /// A bulk repetition lasts its `duration` (none with `iterations` or `bytes`).
    fn time_bounds(&self) -> crate::workload::TimeBounds {
        crate::workload::TimeBounds::exactly(crate::workload::duration_of(
            &self.params(),
            "duration",
        ))
    }

    fn params(&self) -> Params {
        let (b, mut p) = (&self.cfg, Params::new());
        link::print(&mut p, &self.link);
        p.set("to", iperf3::to_text(self.iperf3, self.to));
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
        // The keys of several streams and directions: printed only when not the default, so
        // a plan stored before them keeps its text.
        if b.streams != 1 {
            p.set("streams", b.streams.to_string());
        }
        if b.flow != Flow::Up {
            p.set("direction", b.flow.as_str());
        }
        if let Some(r) = b.pacing_rate {
            p.set("pacing_rate", format_bps(r));
        }
        if let Some(l) = &b.affinity {
            p.set("affinity", l.to_string());
        }
        if let Some(l) = &b.server_affinity {
            p.set("server_affinity", l.to_string());
        }
        opts::print(&mut p, b);
        tls::print(&mut p, &self.tls, &b.tls);
        p
    }

    /// With `opts`, the cell without options (`baseline`) is the one the others are compared
    /// with, as pingpong's.
    fn is_baseline(config: &Params) -> bool {
        match config.get("opts") {
            Some(_) => opts::is_baseline(config) && config.get("tls").is_none_or(|t| t == "off"),
            None => tls::is_baseline(config),
        }
    }

    fn twin(config: &Params) -> Option<Params> {
        tls::twin(config)
    }

    fn context(key: &str, _value: &str) -> Params {
        tls::context(key)
    }

    fn not_in_effect(
        config: &Params,
        metrics: &std::collections::BTreeMap<String, socklab_stats::Summary>,
    ) -> Option<String> {
        opts::not_in_effect(config, metrics)
    }

    fn tables(st: &crate::model::stats::ExperimentStats) -> Vec<ReportTable> {
        streams::table(st)
            .map(|table| ReportTable {
                title: "Streams",
                text_heading: "Gbit/s per stream (mean):",
                class: "per-stream",
                note: streams::NOTE,
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
            // The emulator's threads go to the CPUs the pinned endpoints leave free.
            let avoid: Vec<usize> = [&self.cfg.affinity, &self.cfg.server_affinity]
                .into_iter()
                .flatten()
                .flat_map(|l| l.cpus().iter().copied())
                .collect();
            res.place_link_away_from(&avoid)?;
        }
        let to = match self.to {
            Target::SelfSink => res.server(ServerKey {
                role: ServerRole::Sink,
                in_link,
            })?,
            Target::Addr(a) => a,
        };
        let self_sink = self.to == Target::SelfSink;
        let pin = tls::pin(&self.tls, &self.cfg.tls, self_sink, res, in_link, stop)?;
        // On a client host of its own, this very repetition runs there against `to`.
        let mut there = self.params();
        there.set("to", iperf3::to_text(self.iperf3, Target::Addr(to)));
        if let Some(fp) = pin {
            there.set("tls_trust", fp.to_string());
        }
        if let Some(s) = res.remote_client(Self::KIND, &there, in_link, label, stop)? {
            return Ok(s);
        }
        let live: Option<LiveTcp> = res.live().map(|sink| -> LiveTcp {
            Arc::new(move |i: &TcpInterval| sink(&series::tcp_interval(i)))
        });
        let (r, link_run) = res.in_client(in_link, || {
            let mut cfg = self.net_config(to);
            if let (Some(fp), Some(t)) = (pin, cfg.tls.as_mut()) {
                t.trust = socklab_tls::Trust::Pinned(fp);
            }
            match self.iperf3 {
                true => {
                    socklab_net::bulk::iperf3::run(&cfg, stop).map(|i| (i.result, Some(i.server)))
                }
                false => socklab_net::bulk::run_live(&cfg, stop, live).map(|r| (r, None)),
            }
        })?;
        let (r, theirs) = r.map_err(|e| match e {
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
        let mut s = sample(&r, to, link_run);
        if let Some(theirs) = &theirs {
            iperf3::add(&mut s, theirs);
        }
        if self.cfg.opts.is_some() {
            opts::add(&mut s, &r);
        }
        tls::add(&mut s, &r, &self.tls);
        Ok(s)
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

#[cfg(test)]
mod tests;
