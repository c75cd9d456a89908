//! The `pingpong` workload: request/response round trips against an echo server (seed 001),
//! TCP or UDP, under socket options given as data; each option read back with `getsockopt`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use socklab_net::pingpong::{PingConfig, PingResult, Reply};
use socklab_net::sockopt::{OptSet, Side, SockOpt};
use socklab_stats::Summary;
use socklab_units::{format_duration, format_size, parse_duration};

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{parse_bool, Key, Params};
use crate::model::sample::Sample;
use crate::resources::{LinkRun, Resources, ServerKey, ServerRole};
use crate::workload::key::{at_most, nonzero_usize, parse_target, Target, MAX_COUNT};
use crate::workload::link::{self, LinkParams};
use crate::workload::Spec;
use crate::LabError;

/// The parameters of a request/response (ping-pong) test.
#[derive(Debug, Clone)]
pub struct PingSpec {
    /// The echo server (`self`: socklab starts one, with the server-side options).
    pub to: Target,
    /// Everything else (size, count, options, reply timeout, UDP retries).
    pub cfg: PingConfig,
    /// The emulated link between client and echo server, if any.
    pub link: Option<LinkParams>,
    /// `to` is `sockperf://`: the client speaks sockperf to a `sockperf sr`.
    pub sockperf: bool,
}

impl PartialEq for PingSpec {
    fn eq(&self, o: &Self) -> bool {
        self.params() == o.params()
    }
}

/// `size`.
pub const SIZE: Key = Key::new("size", "64", "bytes per message").size().list();
/// `count`.
pub const COUNT: Key =
    Key::new("count", "500", "round trips per repetition (the seed: 500)").short('n');
/// `opts`.
pub const OPTS: Key = Key::new(
    "opts",
    "baseline",
    "socket options: nodelay+quickack, server:sndbuf=64K, … (baseline: none)",
)
.list();

/// `timeout`.
pub const TIMEOUT: Key = Key::new(
    "timeout",
    "auto",
    "longest wait for one reply; auto: 5s over TCP, 200ms over UDP (each try, then sent again)",
);
/// What `timeout = auto` means over TCP: the longest wait for one reply (a slow reply within
/// it is a sample, e.g. TCP_CORK's ~200 ms timer).
pub const TCP_TIMEOUT: Duration = Duration::from_secs(5);
/// What `timeout = auto` means over UDP: the wait of one try before the message is sent again.
pub const UDP_TIMEOUT: Duration = Duration::from_millis(200);

/// A `timeout` value: `auto` (None: the protocol's default) or a duration.
fn parse_timeout(s: &str) -> Result<Option<Duration>, String> {
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    parse_duration(s)
        .map(Some)
        .map_err(|e| format!("{e}, or auto (5s over TCP, 200ms over UDP)"))
}
/// Most resends of one UDP message (`retries`).
const MAX_RETRIES: u32 = 1000;
/// `retries`.
pub const RETRIES: Key = Key::new(
    "retries",
    "3",
    "UDP: sends again before a message counts as lost",
);

/// `reply`.
pub const REPLY: Key = Key::new(
    "reply",
    "echo",
    "what the reply is: echo (the exact echo), any (the first read of at least one byte, a datagram over UDP) or BYTES (exactly that many)",
);

/// The keys of the ping-pong workload.
pub const KEYS: &[Key] = &[
    Key::new(
        "to",
        "self",
        "echo server HOST:PORT, sockperf://HOST:PORT for a `sockperf sr`, or self to start one on loopback",
    ),
    Key::new("udp", "false", "datagrams instead of a TCP connection").switch(),
    SIZE,
    COUNT,
    OPTS,
    TIMEOUT,
    RETRIES,
    REPLY,
    Key::new(
        "new_connection",
        "false",
        "TCP: a new connection per message (where fastopen matters)",
    )
    .flag("new-connection-per-message")
    .switch(),
];

/// The metrics of the ping-pong workload.
pub const METRICS: &[Metric] = &[
    m(
        "total_us",
        "us",
        "total us",
        "time for all round trips of a repetition (seed 001's figure)",
        Better::Lower,
    ),
    m(
        "rtt_per_s",
        "1/s",
        "rtt/s",
        "round trips per second",
        Better::Higher,
    ),
    m(
        "rtt_mean_us",
        "us",
        "mean us",
        "mean round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p50_us",
        "us",
        "p50 us",
        "median round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p90_us",
        "us",
        "p90 us",
        "90th percentile round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p99_us",
        "us",
        "p99 us",
        "99th percentile round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p999_us",
        "us",
        "p99.9 us",
        "99.9th percentile round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_max_us",
        "us",
        "max us",
        "longest round trip",
        Better::Lower,
    ),
    m(
        "lost",
        "messages",
        "lost",
        "UDP messages given up after all retries",
        Better::Lower,
    ),
    m(
        "late",
        "replies",
        "late",
        "UDP replies that came after their try timed out",
        Better::Lower,
    ),
    m(
        "retries",
        "sends",
        "retries",
        "UDP messages sent again after a timeout",
        Better::Lower,
    ),
    m(
        "connects",
        "connections",
        "connects",
        "TCP connections made",
        Better::Neither,
    ),
    m(
        "connect_mean_us",
        "us",
        "connect us",
        "mean TCP connect time",
        Better::Lower,
    ),
    m(
        "tfo_active",
        "connections",
        "tfo act",
        "TCPFastOpenActive increase (TFO used by clients)",
        Better::Neither,
    ),
    m(
        "tfo_passive",
        "connections",
        "tfo pas",
        "TCPFastOpenPassive increase (TFO accepted by servers)",
        Better::Neither,
    ),
];

impl Spec for PingSpec {
    const KIND: &'static str = "pingpong";
    const KEYS: &'static [Key] = KEYS;
    const LINKED: bool = true;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "total_us";
    const COLUMNS: &'static [&'static str] = &[
        "rtt_per_s",
        "rtt_p50_us",
        "rtt_p99_us",
        "rtt_p999_us",
        "lost",
        "late",
        "connects",
        "tfo_active",
    ];

    /// The cell without options is the baseline (seed 001 compares every option with it).
    fn is_baseline(config: &Params) -> bool {
        config.get("opts") == Some("baseline")
    }

    /// `fastopen` asked for, but the kernel used TCP Fast Open on no connection of any
    /// repetition (`tfo_active` mean 0): the server side was not enabled.
    fn not_in_effect(config: &Params, metrics: &BTreeMap<String, Summary>) -> Option<String> {
        let opts: OptSet = config.get("opts")?.parse().ok()?;
        let asked = opts.0.iter().any(|o| o.opt == SockOpt::FastOpen);
        let used = metrics.get("tfo_active")?.mean;
        (asked && used == 0.0).then(|| {
            "fastopen was asked for but TCP Fast Open was used on no connection (tfo_active = 0 \
             in every repetition): the kernel must allow it on both the client and the server \
             side, net.ipv4.tcp_fastopen = 3 (enable with sysctl -w net.ipv4.tcp_fastopen=3)"
                .to_string()
        })
    }

    fn parse(p: &Params) -> Result<Self, LabError> {
        let (sockperf, to) = p.value_in(KEYS, "to", parse_to)?;
        let udp = p.value_in(KEYS, "udp", parse_bool)?;
        let timeout = p.value(&TIMEOUT, parse_timeout)?.unwrap_or(if udp {
            UDP_TIMEOUT
        } else {
            TCP_TIMEOUT
        });
        let cfg = PingConfig {
            to: SocketAddr::from(([127, 0, 0, 1], 0)),
            udp,
            size: p.value(&SIZE, nonzero_usize)?,
            count: p.value(&COUNT, at_most(MAX_COUNT))?,
            opts: p.value(&OPTS, |s| s.parse::<OptSet>())?,
            timeout,
            retries: p.value_in(KEYS, "retries", |s| match s.trim().parse::<u32>() {
                Ok(n) if n <= MAX_RETRIES => Ok(n),
                Ok(_) => Err(format!("at most {MAX_RETRIES}")),
                Err(_) if s.trim().bytes().all(|b| b.is_ascii_digit()) => {
                    Err(format!("at most {MAX_RETRIES}"))
                }
                Err(_) => Err("a whole number, e.g. 3".to_string()),
            })?,
            reply: p.value(&REPLY, |s| s.parse::<Reply>())?,
            new_connection_per_message: p.value_in(KEYS, "new_connection", parse_bool)?,
            connect_timeout: Duration::from_secs(5),
        };
        cfg.validate().map_err(|e| LabError::Plan(e.to_string()))?;
        if sockperf {
            socklab_net::sockperf::client::validate(&cfg)
                .map_err(|e| LabError::Plan(e.to_string()))?;
        }
        cfg.opts
            .validate(cfg.udp)
            .map_err(|e| LabError::Plan(e.to_string()))?;
        if matches!(to, Target::Addr(_)) && cfg.opts.0.iter().any(|o| o.side != Side::Client) {
            return Err(LabError::Plan(format!(
                "opts '{}' set server-side options, which only a self-started echo server can apply: omit `to`, or prefix them client:",
                cfg.opts
            )));
        }
        let link = link::parse(p)?;
        link::check_target(&link, &to, cfg.udp)?;
        let mut cfg = cfg;
        if !cfg.udp {
            cfg.connect_timeout = link::connect_timeout(p, &link, cfg.connect_timeout)?;
        }
        Ok(PingSpec {
            to,
            cfg,
            link,
            sockperf,
        })
    }

    fn params(&self) -> Params {
        let (cfg, mut p) = (&self.cfg, Params::new());
        link::print(&mut p, &self.link);
        p.set("to", to_text(self.sockperf, self.to));
        p.set("udp", cfg.udp.to_string());
        p.set("size", format_size(cfg.size as u64));
        p.set("count", cfg.count.to_string());
        p.set("opts", cfg.opts.to_string());
        p.set("timeout", format_duration(cfg.timeout));
        p.set("reply", cfg.reply.to_string());
        if cfg.udp {
            p.set("retries", cfg.retries.to_string());
        } else {
            p.set("new_connection", cfg.new_connection_per_message.to_string());
        }
        p
    }

    fn run(
        &self,
        res: &mut Resources,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        let run_err = |source| LabError::run(label, source);
        let mut cfg = self.cfg.clone();
        let in_link = self.link.is_some();
        if let Some(l) = &self.link {
            res.link(l)?;
        }
        let server = match self.to {
            Target::SelfSink => res.server(ServerKey {
                role: ServerRole::Echo {
                    udp: cfg.udp,
                    opts: cfg.opts.to_string(),
                },
                in_link,
            })?,
            Target::Addr(a) => a,
        };
        // The address the client uses: the server's, or a relay's in front of it (udp-proxy).
        cfg.to = res.route(in_link, server)?;
        // On a client host of its own, this very repetition runs there against `cfg.to`.
        let mut there = self.params();
        there.set("to", to_text(self.sockperf, Target::Addr(cfg.to)));
        // There only the client's side of the options applies (the server here has the rest).
        let client_side = socklab_net::sockopt::OptSet(
            cfg.opts
                .0
                .iter()
                .filter(|o| o.side != Side::Server)
                .map(|o| socklab_net::sockopt::OptSpec {
                    side: Side::Client,
                    ..o.clone()
                })
                .collect(),
        );
        there.set("opts", client_side.to_string());
        if let Some(s) = res.remote_client(Self::KIND, &there, in_link, label, stop)? {
            return Ok(s);
        }
        let tfo0 = socklab_net::sockopt::tfo_counters();
        let (r, link_run) = res.in_client(in_link, || match self.sockperf {
            true => socklab_net::sockperf::client::run(&cfg, stop),
            false => socklab_net::pingpong::run(&cfg, stop),
        })?;
        let r = r.map_err(run_err)?;
        let tfo1 = socklab_net::sockopt::tfo_counters();
        let tfo = |name: &str| tfo(name, &tfo0, &tfo1);
        Ok(sample(
            &r,
            &cfg,
            (tfo("TCPFastOpenActive"), tfo("TCPFastOpenPassive")),
            link_run,
        ))
    }
}

/// `to`: `self`, `HOST:PORT`, or `sockperf://HOST:PORT` (an unmodified `sockperf sr`).
fn parse_to(s: &str) -> Result<(bool, Target), String> {
    match s.trim().strip_prefix("sockperf://") {
        None => parse_target(s).map(|t| (false, t)),
        Some(rest) => match parse_target(rest)? {
            Target::SelfSink => Err("sockperf:// needs a running `sockperf sr`: write sockperf://HOST:PORT, e.g. sockperf://127.0.0.1:11111".into()),
            t => Ok((true, t)),
        },
    }
}

/// `to` as [`parse_to`] reads it back.
fn to_text(sockperf: bool, to: Target) -> String {
    if sockperf {
        format!("sockperf://{to}")
    } else {
        to.to_string()
    }
}

fn tfo(name: &str, before: &[(String, u64)], after: &[(String, u64)]) -> f64 {
    let get = |v: &[(String, u64)]| v.iter().find(|(k, _)| k == name).map_or(0, |(_, n)| *n);
    get(after).saturating_sub(get(before)) as f64
}

/// The `(value, count)` buckets of an HDR histogram.
pub fn hist_buckets(h: &hdrhistogram::Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// The sample of one ping-pong run of `cfg`; `tfo` is the growth of the kernel's
/// `(TCPFastOpenActive, TCPFastOpenPassive)` counters during it.
pub fn sample(r: &PingResult, cfg: &PingConfig, tfo: (f64, f64), link: LinkRun) -> Sample {
    let us = |ns: u64| ns as f64 / 1000.0;
    let h = &r.rtt_ns;
    let effective: serde_json::Map<String, serde_json::Value> = r
        .effective
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let mut s = Sample::new(
        [
            ("total_us", us(r.total_ns)),
            (
                "rtt_per_s",
                if r.total_ns > 0 {
                    r.completed as f64 / (r.total_ns as f64 / 1e9)
                } else {
                    0.0
                },
            ),
            ("rtt_mean_us", h.mean() / 1000.0),
            ("rtt_p50_us", us(h.value_at_quantile(0.5))),
            ("rtt_p90_us", us(h.value_at_quantile(0.9))),
            ("rtt_p99_us", us(h.value_at_quantile(0.99))),
            ("rtt_p999_us", us(h.value_at_quantile(0.999))),
            ("rtt_max_us", us(h.max())),
            ("connects", r.connects as f64),
            ("tfo_active", tfo.0),
            ("tfo_passive", tfo.1),
        ],
        json!({ "to": cfg.to.to_string(), "completed": r.completed, "client_opts": effective, "link": link.desc }),
    );
    if cfg.udp {
        s.extend([
            ("lost", r.lost as f64),
            ("late", r.late as f64),
            ("retries", r.retries_sent as f64),
        ]);
    }
    if !r.connect_ns.is_empty() {
        s.extend([("connect_mean_us", r.connect_ns.mean() / 1000.0)]);
    }
    s.extend(link.metrics);
    s.histograms = vec![
        ("rtt_ns", hist_buckets(&r.rtt_ns)),
        ("connect_ns", hist_buckets(&r.connect_ns)),
    ];
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_result_maps_to_its_metrics_and_histograms() {
        let mut rtt = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        for v in [10_000u64, 20_000, 30_000, 40_000] {
            rtt.record(v).unwrap();
        }
        let r = PingResult {
            rtt_ns: rtt,
            total_ns: 2_000_000,
            completed: 4,
            lost: 1,
            late: 2,
            retries_sent: 3,
            connects: 0,
            connect_ns: hdrhistogram::Histogram::new(3).unwrap(),
            effective: vec![("rcvbuf".into(), "4096".into())],
        };
        let mut cfg = PingSpec::parse(&Params::new().with("udp", "true"))
            .unwrap()
            .cfg;
        cfg.to = "127.0.0.1:7".parse().unwrap();
        let s = sample(
            &r,
            &cfg,
            (0.0, 0.0),
            LinkRun {
                metrics: vec![("link_fwd_dropped", 5.0)],
                desc: Some("loss 5%".into()),
            },
        );
        assert_eq!(s.get("total_us"), Some(2000.0));
        assert_eq!(s.get("rtt_per_s"), Some(2000.0));
        // HDR buckets: the mean is within the histogram's 3 significant digits.
        assert!((s.get("rtt_mean_us").unwrap() - 25.0).abs() < 0.05);
        assert_eq!(s.get("lost"), Some(1.0));
        assert_eq!(s.get("retries"), Some(3.0));
        assert_eq!(s.get("connect_mean_us"), None, "no TCP connects");
        assert_eq!(s.get("link_fwd_dropped"), Some(5.0));
        assert_eq!(s.extra["client_opts"]["rcvbuf"], "4096");
        assert_eq!(s.extra["link"], "loss 5%");
        assert_eq!(s.histograms[0].0, "rtt_ns");
        assert_eq!(s.histograms[0].1.iter().map(|b| b.1).sum::<u64>(), 4);
    }

    #[test]
    fn timeout_is_the_longest_wait_for_a_reply_with_a_default_per_protocol() {
        let parse = |kv: &[(&str, &str)]| {
            let mut p = Params::new();
            for (k, v) in kv {
                p.set(k, *v);
            }
            PingSpec::parse(&p).unwrap()
        };
        let tcp = parse(&[]);
        assert_eq!(tcp.cfg.timeout, TCP_TIMEOUT);
        assert_eq!(
            tcp.params().get("timeout"),
            Some("5s"),
            "printed for TCP too"
        );
        assert_eq!(parse(&[("udp", "true")]).cfg.timeout, UDP_TIMEOUT);
        assert_eq!(parse(&[("timeout", "auto")]).cfg.timeout, TCP_TIMEOUT);
        let two = parse(&[("timeout", "2s")]);
        assert_eq!(two.cfg.timeout, Duration::from_secs(2));
        assert_eq!(PingSpec::parse(&two.params()).unwrap(), two);
        let e = PingSpec::parse(&Params::new().with("timeout", "soon"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("timeout") && e.contains("auto"), "{e}");
    }

    #[test]
    fn reply_is_parsed_and_printed_canonically() {
        let spec = |v: &str| PingSpec::parse(&Params::new().with("reply", v));
        assert_eq!(
            PingSpec::parse(&Params::new()).unwrap().cfg.reply,
            Reply::Echo
        );
        for (v, r, printed) in [
            ("any", Reply::Any, "any"),
            ("5", Reply::Bytes(5), "5"),
            ("2048", Reply::Bytes(2048), "2K"),
            ("echo", Reply::Echo, "echo"),
        ] {
            let s = spec(v).unwrap();
            assert_eq!(s.cfg.reply, r);
            assert_eq!(s.params().get("reply"), Some(printed));
            assert_eq!(PingSpec::parse(&s.params()).unwrap(), s);
        }
        let e = spec("pong").unwrap_err().to_string();
        assert!(e.contains("reply") && e.contains("any"), "{e}");
    }

    #[test]
    fn a_sockperf_target_is_parsed_printed_and_checked() {
        let spec = |to: &str, extra: &[(&str, &str)]| {
            let mut p = Params::new().with("to", to);
            for (k, v) in extra {
                p = p.with(k, *v);
            }
            PingSpec::parse(&p)
        };
        let s = spec("sockperf://127.0.0.1:11111", &[]).unwrap();
        assert!(s.sockperf);
        assert_eq!(s.to, Target::Addr("127.0.0.1:11111".parse().unwrap()));
        assert_eq!(s.params().get("to"), Some("sockperf://127.0.0.1:11111"));
        assert_eq!(PingSpec::parse(&s.params()).unwrap(), s);
        assert!(!spec("127.0.0.1:11111", &[]).unwrap().sockperf);
        let e = spec("sockperf://self", &[]).unwrap_err().to_string();
        assert!(e.contains("sockperf://HOST:PORT"), "{e}");
        let e = spec("sockperf://127.0.0.1:1", &[("size", "13")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`size` 13") && e.contains("14 to"), "{e}");
        let e = spec("sockperf://127.0.0.1:1", &[("reply", "any")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`reply` any"), "{e}");
    }
}
