//! The `udp` workload (`socklab bulk --udp`): a paced UDP sender against the UDP receiver
//! socklab starts itself (`socklab sink --udp`, kept for the plan), optionally over an emulated
//! link. The receiver counts what arrived, was lost, duplicated and reordered (RFC 4737), the
//! interarrival jitter (RFC 3550) and the one-way delay (sender and receiver share this host's
//! clock); over a link the emulator's own counts are stored beside them (`link_fwd_*`). With
//! `rate = max`, short trials search the highest rate without loss, then one test of
//! `duration` runs at it. See `docs/bulk.md`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use socklab_net::udpbulk::search::FLOOR_BPS;
use socklab_net::udpbulk::stats::Interval as UdpInterval;
use socklab_net::udpbulk::wire::{HEADER_LEN, MAX_DATAGRAM};
use socklab_net::udpbulk::{
    End, Gso, RateSearch, SearchConfig, SendConfig, SendResult, TestReport, Trial,
};
use socklab_units::{format_bps, format_duration, format_size, parse_rate, Rate};

use crate::model::metric::Metric;
use crate::model::params::{Key, Params};
use crate::model::sample::Sample;
use crate::resources::{LinkRun, Resources, ServerKey, ServerRole};
use crate::series;
use crate::workload::bulk::iperf3 as bulk_iperf3;
use crate::workload::key::{bounded, duration_in, Target};
use crate::workload::link::{self, LinkParams};
use crate::workload::Spec;
use crate::LabError;

pub mod command;
pub mod iperf3;
mod metrics;

pub use metrics::METRICS;

/// The parameters of a UDP bulk test.
#[derive(Debug, Clone, PartialEq)]
pub struct UdpSpec {
    /// Offered rate, or the search.
    pub rate: Rate,
    /// Bytes of UDP payload per datagram.
    pub size: usize,
    /// How long to send (the final test of a search too).
    pub duration: Duration,
    /// UDP GSO at the sender.
    pub gso: Gso,
    /// The sender's `SO_SNDBUF`.
    pub sndbuf: usize,
    /// The receiver's `SO_RCVBUF`.
    pub rcvbuf: usize,
    /// The receiver's wait after the first FIN (`None`: from the link).
    pub drain: Option<Duration>,
    /// `rate = max`: each trial's length.
    pub trial: Duration,
    /// `rate = max`: most trials.
    pub trials: usize,
    /// `rate = max`: the lost fraction a passing trial may have.
    pub max_loss: f64,
    /// The emulated link, if any.
    pub link: Option<LinkParams>,
    /// The receiver's counts per interval of this length (`None`: no time series).
    pub interval: Option<Duration>,
    /// `to = iperf3://`: an unmodified `iperf3 -s` there instead of socklab's receiver.
    pub iperf3: Option<SocketAddr>,
    /// `direction = down` (iperf3 only): the server sends, socklab receives.
    pub reverse: bool,
}

/// `interval`.
pub const INTERVAL: Key = Key::new(
    "interval",
    "",
    "the receiver's counts every this long (10ms or more, e.g. 100ms): Gbit/s, datagrams, lost, loss %, duplicates, reordered and jitter per interval of arrival time, stored as the repetition's time series and printed when its test ends",
);

/// Shortest UDP interval (the receiver's own bound, `socklab sink --udp --interval`).
const MIN_UDP_INTERVAL: Duration = Duration::from_millis(10);

fn parse_udp_interval(s: &str) -> Result<Duration, String> {
    let d = crate::workload::key::parse_interval(s)?;
    if d < MIN_UDP_INTERVAL {
        return Err("the UDP receiver counts every 10ms or more".into());
    }
    Ok(d)
}

/// `rate`.
pub const RATE: Key = Key::new(
    "rate",
    "1G",
    "offered rate, bits of UDP payload per second (K, M, G: decimal, as iperf3 -b), or max: the highest rate without loss, searched by trials",
)
.list();
/// `size`.
pub const SIZE: Key = Key::new(
    "size",
    "1472",
    "bytes of UDP payload per datagram, 48 to 65507 (1472 fills a 1500-byte MTU)",
)
.size()
.list();
/// `duration`.
pub const DURATION: Key = Key::new("duration", "2s", "time to send");
/// `gso`.
pub const GSO: Key = Key::new(
    "gso",
    "auto",
    "UDP GSO at the sender (64 datagrams per send): auto (where the path takes it), on, off (sendmmsg)",
)
.list();
/// `drain`.
pub const DRAIN: Key = Key::new(
    "drain",
    "auto",
    "how long the receiver waits for stragglers after the first FIN; auto: 100ms plus twice the link's longest delay",
)
.no_flag();
/// `rcvbuf`.
pub const RCVBUF: Key = Key::new(
    "rcvbuf",
    "4M",
    "SO_RCVBUF of the receiver (SO_RCVBUFFORCE as root, so beyond net.core.rmem_max)",
);
/// `trial`.
pub const TRIAL: Key = Key::new("trial", "1s", "rate = max: the length of each trial");

/// Largest send or receive buffer asked for: 1 GiB.
const MAX_BUF: usize = 1 << 30;
/// Most trials of a search.
const MAX_TRIALS: usize = 40;

/// The keys of the udp workload.
pub const KEYS: &[Key] = &[
    RATE,
    SIZE,
    DURATION,
    GSO,
    Key::new("sndbuf", "4M", "SO_SNDBUF of the sender").size(),
    RCVBUF,
    DRAIN,
    TRIAL,
    Key::new("trials", "14", "rate = max: most trials"),
    Key::new(
        "max_loss",
        "0%",
        "rate = max: the lost share of datagrams a passing trial may have",
    ),
    INTERVAL,
    Key {
        doc: "self: the receiver socklab starts; or iperf3://HOST[:PORT], an unmodified `iperf3 -s` (port 5201 by default)",
        ..crate::workload::bulk::TO
    },
    Key {
        doc: "up (the client sends) or, with to = iperf3://, down (the iperf3 server sends, its -R)",
        ..crate::workload::bulk::DIRECTION
    },
];

/// Parses a share such as `0%`, `0.5%` or `0.01`.
fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| "write a share such as 0%, 0.1% or 0.001".to_string())?;
    if !(0.0..1.0).contains(&v) {
        return Err("use 0% to below 100%".into());
    }
    Ok(v)
}

fn print_share(v: f64) -> String {
    format!("{}%", (v * 100.0 * 1e6).round() / 1e6)
}

fn parse_drain(s: &str) -> Result<Option<Duration>, String> {
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    duration_in(Duration::ZERO, Duration::from_secs(60))(s)
        .map(Some)
        .map_err(|e| format!("{e}, or auto"))
}

impl Spec for UdpSpec {
    const KIND: &'static str = "udp";
    const KEYS: &'static [Key] = KEYS;
    const LINKED: bool = true;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "gbps";
    const COLUMNS: &'static [&'static str] = &[
        "offered_gbps",
        "loss_pct",
        "jitter_us",
        "dgrams_dup",
        "dgrams_reordered",
        "owd_p50_us",
    ];

    fn tables(st: &crate::model::stats::ExperimentStats) -> Vec<crate::workload::ReportTable> {
        crate::workload::udp_search::tables(st)
    }

    /// With `rate = max`, cells are judged by the rate found.
    fn primary(has: &dyn Fn(&str) -> bool) -> &'static str {
        if has("max_gbps") {
            "max_gbps"
        } else {
            "gbps"
        }
    }

    fn parse(p: &Params) -> Result<Self, LabError> {
        let size = p.value(&SIZE, |s| {
            bounded(HEADER_LEN, MAX_DATAGRAM)(s).map_err(|e| {
                format!("{e} bytes of UDP payload (1472 fills a 1500-byte MTU; 65507 is IPv4's largest)")
            })
        })?;
        let link = link::parse(p)?;
        let (iperf3, target) = p.value(&crate::workload::bulk::TO, bulk_iperf3::parse_to)?;
        link::check_target(&link, &target, true)?;
        let iperf3 = match (iperf3, target) {
            (true, Target::Addr(a)) => Some(a),
            (_, Target::SelfSink) => None,
            (_, t) => return Err(LabError::Plan(format!(
                "`to` {t} with `udp`: UDP bulk starts its own receiver (socklab sink `udp`); omit `to`, or give iperf3://HOST[:PORT] for an `iperf3 -s`"
            ))),
        };
        let flow = p.value(&crate::workload::bulk::DIRECTION, |s| {
            s.parse::<socklab_net::bulk::Flow>()
        })?;
        let reverse = match flow {
            socklab_net::bulk::Flow::Up => false,
            socklab_net::bulk::Flow::Down if iperf3.is_some() => true,
            f => {
                return Err(LabError::Plan(format!(
                    "`direction` {} with `udp`: UDP bulk sends from the client{}; drop it",
                    f.as_str(),
                    if iperf3.is_some() {
                        " or, against iperf3://, from the server (down)"
                    } else {
                        " (down needs `to` iperf3://, whose server sends)"
                    }
                )))
            }
        };
        let spec = UdpSpec {
            rate: p.value(&RATE, parse_rate)?,
            size,
            duration: p.value(
                &DURATION,
                duration_in(Duration::from_millis(10), Duration::from_secs(24 * 3600)),
            )?,
            gso: p.value(&GSO, |s| s.parse::<Gso>())?,
            sndbuf: p.value_in(KEYS, "sndbuf", |s| {
                bounded(1, MAX_BUF)(s).map_err(|e| format!("{e} bytes"))
            })?,
            rcvbuf: p.value_in(KEYS, "rcvbuf", |s| {
                bounded(1, MAX_BUF)(s).map_err(|e| format!("{e} bytes"))
            })?,
            drain: p.value(&DRAIN, parse_drain)?,
            trial: p.value(
                &TRIAL,
                duration_in(Duration::from_millis(50), Duration::from_secs(60)),
            )?,
            trials: p.value_in(KEYS, "trials", bounded(1, MAX_TRIALS))?,
            max_loss: p.value_in(KEYS, "max_loss", parse_share)?,
            link,
            interval: p.parse_opt("interval", parse_udp_interval)?,
            iperf3,
            reverse,
        };
        if spec.iperf3.is_some() {
            iperf3::check(&spec)?;
        }
        Ok(spec)
    }

    fn time_bounds(&self) -> crate::workload::TimeBounds {
        let (lo, hi) = UdpSpec::time_bounds(self);
        crate::workload::TimeBounds {
            at_least: Some(lo),
            at_most: Some(hi),
            by_timeout: false,
        }
    }

    fn params(&self) -> Params {
        let mut p = Params::new();
        link::print(&mut p, &self.link);
        p.set("rate", self.rate.to_string());
        p.set("size", self.size.to_string());
        p.set("duration", format_duration(self.duration));
        p.set("gso", self.gso.as_str());
        p.set("sndbuf", format_size(self.sndbuf as u64));
        p.set("rcvbuf", format_size(self.rcvbuf as u64));
        p.set(
            "drain",
            self.drain.map_or("auto".to_string(), format_duration),
        );
        if let Some(i) = self.interval {
            p.set("interval", format_duration(i));
        }
        if let Some(a) = self.iperf3 {
            p.set("to", bulk_iperf3::to_text(true, Target::Addr(a)));
        }
        if self.reverse {
            p.set("direction", "down");
        }
        if self.rate == Rate::Max {
            p.set("trial", format_duration(self.trial));
            p.set("trials", self.trials.to_string());
            p.set("max_loss", print_share(self.max_loss));
        }
        p
    }

    fn run(
        &self,
        res: &mut Resources,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        if let Some(to) = self.iperf3 {
            return iperf3::run(self, to, label, stop);
        }
        let in_link = self.link.is_some();
        if let Some(l) = &self.link {
            res.link(l)?;
        }
        let key = ServerKey {
            role: ServerRole::UdpSink {
                rcvbuf: format_size(self.rcvbuf as u64),
                interval: self.interval.map(format_duration),
            },
            in_link,
        };
        let server = res.server(key.clone())?;
        let to = res.route(in_link, server)?;
        let res = &*res;
        // Only the test that becomes the sample prints its intervals live (not the trials).
        let test =
            |rate: u64, duration: Duration, live: bool| -> Result<(TestRun, LinkRun), LabError> {
                let (r, link_run) = res.in_client(in_link, || {
                    self.one_test(res, (&key, to), (rate, duration), live, stop)
                })?;
                Ok((r.map_err(|e| LabError::run(label, e))?, link_run))
            };
        if let Rate::Bps(rate) = self.rate {
            let (t, link_run) = test(rate, self.duration, true)?;
            return Ok(self.with_series(res, sample(&t, None, link_run), &t));
        }
        let mut search = RateSearch::new(SearchConfig {
            max_trials: self.trials,
            max_loss: self.max_loss,
            ..SearchConfig::default()
        });
        while let Some(rate) = search.next_rate() {
            if stop() {
                return Err(LabError::run(label, socklab_net::NetError::Interrupted));
            }
            let (t, _) = test(rate, self.trial, false)?;
            let sent = t.send.total();
            search.record(rate, t.send.bps(), sent, t.lost());
        }
        let Some(best) = search.best() else {
            return Err(LabError::run(
                label,
                socklab_net::NetError::Invalid(format!(
                    "rate = max: no trial down to {} was without loss (max_loss = {}); the path loses at any rate: allow some with max_loss, e.g. 1%, or give a rate",
                    format_bps(FLOOR_BPS),
                    print_share(self.max_loss)
                )),
            ));
        };
        let (t, link_run) = test(best, self.duration, true)?;
        Ok(self.with_series(res, sample(&t, Some((best, search.trials())), link_run), &t))
    }
}

/// One test as the lab saw it: the sender's account and the receiver's report (`None`: no
/// report came, nothing of the test arrived or the receiver failed).
#[derive(Debug, Clone, PartialEq)]
pub struct TestRun {
    /// The sender's account.
    pub send: SendResult,
    /// The receiver's.
    pub report: Option<TestReport>,
    /// Intervals already printed live while the test ran (the first ones).
    pub printed_live: usize,
}

impl TestRun {
    /// Datagrams sent that never arrived.
    pub fn lost(&self) -> u64 {
        let got = self.report.as_ref().map_or(0, |r| r.counts.unique);
        self.send.total().saturating_sub(got)
    }
}

/// How long the receiver waits for stragglers over `link` (`drain = auto`): 100 ms plus twice
/// the forward direction's longest delay (jitter at 4σ, a full queue at its rate).
pub fn auto_drain(link: &Option<LinkParams>, size: usize) -> Duration {
    let base = Duration::from_millis(100);
    let Some(l) = link else { return base };
    let f = &l.pair.forward;
    let delay = f.delay_ns.saturating_add(f.jitter_ns.saturating_mul(4));
    let queue = f.rate_bps.map_or(0, |r| {
        let bits = (size as u128 + 28) * 8 * f.limit as u128;
        u64::try_from(bits * 1_000_000_000 / u128::from(r.max(1))).unwrap_or(u64::MAX)
    });
    (base + Duration::from_nanos(delay.saturating_add(queue).saturating_mul(2)))
        .min(Duration::from_secs(60))
}

/// How long a test waits for the receiver's report after the sender is done: the drain, the
/// receiver's idle time (2 s, for a test whose FINs were all lost), and slack.
fn report_wait(drain: Duration) -> Duration {
    drain + Duration::from_secs(5)
}

impl UdpSpec {
    /// How long one repetition takes: at least its sending time (the trials' too), at most
    /// that plus each test's wait for the receiver's report.
    pub fn time_bounds(&self) -> (Duration, Duration) {
        if self.iperf3.is_some() {
            return iperf3::time_bounds(self.duration);
        }
        let drain = self
            .drain
            .unwrap_or_else(|| auto_drain(&self.link, self.size));
        let per_test = |d: Duration| (d, d + report_wait(drain) + Duration::from_millis(50));
        let (mut lo, mut hi) = per_test(self.duration);
        if self.rate == Rate::Max {
            let (tl, th) = per_test(self.trial);
            lo += tl;
            hi += th * self.trials as u32;
        }
        (lo, hi)
    }

    /// `s` with the receiver's intervals as its time series (with `interval`); those not
    /// printed live while the test ran (the last, and any a late line missed) are handed to
    /// the live printer now.
    fn with_series(&self, res: &Resources, mut s: Sample, t: &TestRun) -> Sample {
        if let (Some(iv), Some(r)) = (self.interval, &t.report) {
            s.intervals = series::udp_intervals(r, iv);
            if let Some(live) = res.live() {
                s.intervals
                    .iter()
                    .skip(t.printed_live)
                    .for_each(|i| live(i));
            }
        }
        s
    }

    /// Prints the intervals of test `id` live as the receiver closes them (its `INTERVAL`
    /// lines), every 50 ms until `done`; returns how many it printed, which are the first
    /// ones, in order.
    fn print_live(
        &self,
        feed: &crate::child::IntervalFeed,
        live: &crate::series::LiveSink,
        id: u64,
        interval: Duration,
        done: &AtomicBool,
    ) -> usize {
        let mut next = 0usize;
        loop {
            let finished = done.load(Ordering::Acquire);
            let mine = |v: &serde_json::Value| {
                v.get("test_id").and_then(serde_json::Value::as_u64) == Some(id)
            };
            for v in feed.take(&mine) {
                let k = v.get("index").and_then(serde_json::Value::as_u64);
                let i = v
                    .get("interval")
                    .cloned()
                    .and_then(|i| serde_json::from_value::<UdpInterval>(i).ok());
                // In order, none skipped: a gap leaves the rest to the report.
                if let (Some(k), Some(i)) = (k, i) {
                    if k as usize == next {
                        live(&series::udp_interval(next, &i, interval, None));
                        next += 1;
                    }
                }
            }
            if finished {
                return next;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One test at `rate` for `duration` against the receiver `key` reached at `to`; `live`:
    /// its intervals are printed as they close.
    fn one_test(
        &self,
        res: &Resources,
        (key, to): (&ServerKey, SocketAddr),
        (rate, duration): (u64, Duration),
        live: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<TestRun, socklab_net::NetError> {
        let mut cfg = SendConfig::new(to, rate, self.size, duration);
        cfg.gso = self.gso;
        cfg.sndbuf = Some(self.sndbuf);
        cfg.drain = self
            .drain
            .unwrap_or_else(|| auto_drain(&self.link, self.size));
        let id = cfg.test_id;
        // With a time series and a live printer, the receiver's intervals are printed as it
        // closes them, beside the sender.
        let printer = match (live, self.interval, res.live(), res.server_intervals(key)) {
            (true, Some(iv), Some(sink), Some(feed)) => Some((iv, sink, feed)),
            _ => None,
        };
        let done = AtomicBool::new(false);
        let (send, printed_live) = std::thread::scope(|sc| {
            let printing = printer
                .as_ref()
                .map(|(iv, sink, feed)| sc.spawn(|| self.print_live(feed, sink, id, *iv, &done)));
            let send = socklab_net::udpbulk::send(&cfg, stop);
            done.store(true, Ordering::Release);
            let printed = printing.map_or(0, |h| h.join().unwrap_or(0));
            (send, printed)
        });
        let send = send?;
        let report = res
            .server_report(
                key,
                report_wait(cfg.drain),
                &|v| v.get("test_id").and_then(serde_json::Value::as_u64) == Some(id),
                stop,
            )
            .map(serde_json::from_value::<TestReport>)
            .transpose()
            .map_err(|e| socklab_net::NetError::Protocol {
                peer: "the UDP receiver".into(),
                detail: format!("its REPORT line does not parse: {e}"),
            })?;
        if report.is_none() && stop() {
            return Err(socklab_net::NetError::Interrupted);
        }
        check_report(id, report.as_ref(), live)?;
        Ok(TestRun {
            send,
            report,
            printed_live,
        })
    }
}

/// A test the receiver refused (too many tests open: another sender squatting it) fails, as
/// does the test that becomes the sample (`sample`) when no report came: a measurement of
/// nothing is no measurement (issue 26 item 3). A trial of `rate = max` without a report
/// counts as all lost (a warning).
pub fn check_report(
    id: u64,
    report: Option<&TestReport>,
    sample: bool,
) -> Result<(), socklab_net::NetError> {
    let invalid = socklab_net::NetError::Invalid;
    match report {
        Some(r) if r.ended == End::Refused => Err(invalid(format!(
            "test {id:016x}: {}; nothing was measured (another sender held the receiver's tests)",
            r.refused.as_deref().unwrap_or("the UDP receiver refused the test")
        ))),
        Some(_) => Ok(()),
        None if sample => Err(invalid(format!(
            "test {id:016x}: no report from the UDP receiver: nothing of it arrived, not even its end markers (a path that loses everything), or the receiver failed"
        ))),
        None => {
            eprintln!(
                "socklab: warning: no report from the UDP receiver for trial {id:016x}: nothing of it arrived (counted as all lost), or the receiver failed"
            );
            Ok(())
        }
    }
}

/// The sample of one UDP test; with `rate = max`, the rate found and the search's trials.
pub fn sample(t: &TestRun, search: Option<(u64, &[Trial])>, link: LinkRun) -> Sample {
    let s = &t.send;
    let secs = s.seconds.max(1e-9);
    let sent = s.total();
    let lost = t.lost();
    let us = |ns: f64| ns / 1000.0;
    let mut m: Vec<(&'static str, f64)> = vec![
        ("offered_gbps", s.bps() / 1e9),
        ("dgrams_sent", sent as f64),
        ("dgrams_lost", lost as f64),
        (
            "loss_pct",
            if sent > 0 {
                100.0 * lost as f64 / sent as f64
            } else {
                0.0
            },
        ),
        ("send_calls", s.calls as f64),
        ("send_errors", s.errors as f64),
        ("gso", f64::from(u8::from(s.gso))),
        ("snd_cpu_pct", 100.0 * s.cpu.cpu().as_secs_f64() / secs),
    ];
    let r = t.report.as_ref();
    let c = r.map(|r| r.counts).unwrap_or_default();
    m.extend([
        (
            "gbps",
            c.bytes.saturating_sub(r.map_or(0, |r| r.fin_bytes)) as f64 * 8.0 / secs / 1e9,
        ),
        ("dgrams_received", c.unique as f64),
        ("dgrams_dup", c.duplicates as f64),
        ("dgrams_reordered", c.reordered as f64),
        ("dgrams_early", c.early as f64),
        ("reorder_extent_max", c.extent_max as f64),
    ]);
    if let Some(r) = r {
        m.extend([
            ("jitter_us", us(r.jitter_ns)),
            ("rcv_kernel_drops", r.kernel_drops as f64),
            (
                "rcv_cpu_pct",
                100.0 * (r.user_us + r.sys_us) as f64 / 1e6 / secs,
            ),
        ]);
        if let Some(o) = &r.owd {
            m.extend([
                ("owd_min_us", us(o.min_ns as f64)),
                ("owd_mean_us", us(o.mean_ns)),
                ("owd_p50_us", us(o.p50_ns as f64)),
                ("owd_p99_us", us(o.p99_ns as f64)),
                ("owd_max_us", us(o.max_ns as f64)),
            ]);
        }
    }
    if let Some((best, trials)) = search {
        m.extend([
            ("max_gbps", best as f64 / 1e9),
            ("trials", trials.len() as f64),
        ]);
        // The loss of the trial that passed at the rate found (the search's criterion).
        if let Some(tr) = trials
            .iter()
            .rev()
            .find(|tr| tr.rate_bps == best && tr.passed && tr.sent > 0)
        {
            m.push(("trial_loss_pct", 100.0 * tr.lost as f64 / tr.sent as f64));
        }
    }
    let mut sample = Sample::new(
        m,
        json!({
            "link": link.desc,
            "test_id": format!("{:016x}", s.test_id),
            "rate_bps": search.map(|(b, _)| b),
            "sndbuf": s.sndbuf,
            "gso_note": s.gso_note,
            "fins_sent": s.fins,
            "receiver_report": r.is_some(),
            "receiver_end": r.map(|r| r.ended),
            "fin_total": r.and_then(|r| r.total),
            "too_old": c.too_old,
            "extent_capped": c.extent_capped,
            "owd_negative": r.and_then(|r| r.owd.map(|o| o.negative)),
            "malformed": r.map(|r| r.malformed),
            "foreign": r.map(|r| r.foreign),
            "intervals": r.map(|r| &r.intervals),
            "trials": search.map(|(_, t)| t),
        }),
    );
    sample.extend(link.metrics);
    sample
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;
    use socklab_net::udpbulk::stats::{Counts, Owd};
    use socklab_sys::usage::Usage;

    fn send_result() -> SendResult {
        SendResult {
            test_id: 0xab,
            datagrams: 995,
            fins: 5,
            bytes: 995 * 1000,
            calls: 100,
            errors: 1,
            seconds: 0.5,
            gso: true,
            gso_note: None,
            sndbuf: 1 << 20,
            cpu: Usage {
                user: Duration::from_millis(50),
                sys: Duration::from_millis(50),
                ..Usage::default()
            },
        }
    }

    fn report() -> TestReport {
        TestReport {
            test_id: 0xab,
            counts: Counts {
                arrivals: 985,
                unique: 980,
                bytes: 980 * 1000,
                duplicates: 5,
                reordered: 30,
                early: 3,
                extent_max: 12,
                extent_sum: 100,
                ..Counts::default()
            },
            jitter_ns: 1500.0,
            owd: Some(Owd {
                min_ns: 10_000,
                mean_ns: 12_000.0,
                p50_ns: 11_000,
                p90_ns: 13_000,
                p99_ns: 15_000,
                max_ns: 20_000,
                negative: 0,
            }),
            first_arrival_ns: 1,
            last_arrival_ns: 2,
            total: Some(1000),
            fin_bytes: 5000,
            drain_ms: Some(100),
            ended: End::Drain,
            malformed: 0,
            kernel_drops: 4,
            user_us: 100_000,
            sys_us: 150_000,
            intervals: Vec::new(),
            foreign: 0,
            refused: None,
        }
    }

    #[test]
    fn a_result_maps_to_its_metrics_with_the_links_counts_beside() {
        let t = TestRun {
            send: send_result(),
            report: Some(report()),
            printed_live: 0,
        };
        let link = LinkRun {
            metrics: vec![("link_fwd_dropped", 20.0)],
            desc: Some("loss 2%".into()),
        };
        let s = sample(&t, None, link);
        assert_eq!(s.get("dgrams_sent"), Some(1000.0));
        assert_eq!(s.get("dgrams_lost"), Some(20.0));
        assert_eq!(s.get("loss_pct"), Some(2.0));
        assert_eq!(s.get("link_fwd_dropped"), Some(20.0));
        assert_eq!(s.get("offered_gbps"), Some(995.0 * 8000.0 / 0.5 / 1e9));
        // The data that arrived: the 5 FINs of 1000 bytes are not data.
        assert_eq!(s.get("gbps"), Some(975.0 * 8000.0 / 0.5 / 1e9));
        assert_eq!(s.get("dgrams_dup"), Some(5.0));
        assert_eq!(s.get("dgrams_early"), Some(3.0));
        assert_eq!(s.get("jitter_us"), Some(1.5));
        assert_eq!(s.get("owd_p99_us"), Some(15.0));
        assert_eq!(s.get("rcv_cpu_pct"), Some(50.0));
        assert_eq!(s.get("snd_cpu_pct"), Some(20.0));
        assert_eq!(s.get("gso"), Some(1.0));
        assert_eq!(s.get("max_gbps"), None);
        assert_eq!(s.extra["link"], "loss 2%");
        assert_eq!(s.extra["test_id"], "00000000000000ab");
        assert_eq!(s.extra["receiver_end"], "drain");
    }

    #[test]
    fn a_test_without_a_report_lost_everything_and_a_search_records_its_trials() {
        let t = TestRun {
            send: send_result(),
            report: None,
            printed_live: 0,
        };
        let trials = [Trial {
            rate_bps: 1_000_000_000,
            sent_bps: 1e9,
            sent: 100,
            lost: 0,
            passed: true,
        }];
        let s = sample(&t, Some((1_000_000_000, &trials)), LinkRun::default());
        assert_eq!(s.get("dgrams_lost"), Some(1000.0));
        assert_eq!(s.get("loss_pct"), Some(100.0));
        assert_eq!(s.get("gbps"), Some(0.0));
        assert_eq!(s.get("jitter_us"), None, "no report, no jitter");
        assert_eq!(s.get("max_gbps"), Some(1.0));
        assert_eq!(s.get("trials"), Some(1.0));
        assert_eq!(s.extra["receiver_report"], false);
        assert_eq!(s.extra["trials"][0]["rate_bps"], 1_000_000_000u64);
    }

    #[test]
    fn a_refused_test_or_a_sample_without_a_report_fails_with_the_reason() {
        let mut refused = report();
        refused.ended = End::Refused;
        refused.refused = Some("the UDP receiver refused the test: 16 tests were open".into());
        for sample in [true, false] {
            let e = check_report(0xab, Some(&refused), sample)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("test 00000000000000ab: the UDP receiver refused the test: 16"),
                "{e}"
            );
        }
        let e = check_report(0xab, None, true).unwrap_err().to_string();
        assert!(e.contains("no report from the UDP receiver"), "{e}");
        assert!(
            check_report(0xab, None, false).is_ok(),
            "a trial counts as all lost"
        );
        assert!(check_report(0xab, Some(&report()), true).is_ok());
    }

    #[test]
    fn udp_parses_with_defaults_and_prints_back_the_same_text() {
        let w = Workload::from_params("udp", &Params::new().with("rate", "100M")).unwrap();
        let full = w.params();
        assert_eq!(full.get("rate"), Some("100M"));
        assert_eq!(full.get("size"), Some("1472"));
        assert_eq!(full.get("gso"), Some("auto"));
        assert_eq!(full.get("trial"), None, "search keys only with rate = max");
        assert_eq!(Workload::from_params("udp", &full).unwrap(), w);
        let max = Workload::from_params(
            "udp",
            &Params::new().with("rate", "max").with("max_loss", "0.1%"),
        )
        .unwrap();
        let full = max.params();
        assert_eq!(full.get("max_loss"), Some("0.1%"));
        assert_eq!(full.get("trials"), Some("14"));
        assert_eq!(Workload::from_params("udp", &full).unwrap(), max);
    }

    #[test]
    fn an_iperf3_target_and_reverse_parse_and_print_back_and_the_rest_is_refused() {
        let p = Params::new()
            .with("rate", "20M")
            .with("to", "iperf3://127.0.0.1:6000")
            .with("direction", "down");
        let w = Workload::from_params("udp", &p).unwrap();
        let full = w.params();
        assert_eq!(full.get("to"), Some("iperf3://127.0.0.1:6000"));
        assert_eq!(full.get("direction"), Some("down"));
        assert_eq!(Workload::from_params("udp", &full).unwrap(), w);
        let plain = Workload::from_params("udp", &Params::new())
            .unwrap()
            .params();
        assert_eq!((plain.get("to"), plain.get("direction")), (None, None));
        let e = |p: Params| Workload::from_params("udp", &p).unwrap_err().to_string();
        let r = e(Params::new().with("direction", "down"));
        assert!(r.starts_with("`direction` down with `udp`"), "{r}");
        let r = e(Params::new()
            .with("to", "iperf3://127.0.0.1")
            .with("direction", "bidir"));
        assert!(r.starts_with("`direction` bidir with `udp`"), "{r}");
        let r = e(Params::new().with("to", "127.0.0.1:9"));
        assert!(r.contains("give iperf3://HOST[:PORT]"), "{r}");
        let r = e(Params::new()
            .with("to", "iperf3://127.0.0.1")
            .with("rate", "max"));
        assert!(r.starts_with("`rate` max with iperf3://"), "{r}");
        let r = e(Params::new()
            .with("to", "iperf3://127.0.0.1")
            .with("drain", "1s"));
        assert!(r.starts_with("`drain` with iperf3://"), "{r}");
    }

    #[test]
    fn bad_udp_params_name_the_key_and_the_fix() {
        let e = |p: Params| Workload::from_params("udp", &p).unwrap_err().to_string();
        let r = e(Params::new().with("rate", "0"));
        assert!(r.starts_with("rate = '0'") && r.contains("1K to 1T"), "{r}");
        let s = e(Params::new().with("size", "70000"));
        assert!(
            s.starts_with("size = '70000'") && s.contains("48 to 65507"),
            "{s}"
        );
        assert!(e(Params::new().with("size", "20")).contains("48 to 65507"));
        assert!(e(Params::new().with("gso", "maybe")).contains("auto, on or off"));
        assert!(e(Params::new().with("max_loss", "100%")).contains("below 100%"));
        assert!(e(Params::new().with("trials", "0")).contains("use 1 to 40"));
        assert!(e(Params::new().with("drain", "soon")).contains("or auto"));
        assert!(e(Params::new().with("strategy", "writev")).contains("unknown parameter"));
    }

    #[test]
    fn the_drain_covers_the_links_longest_delay() {
        assert_eq!(auto_drain(&None, 1472), Duration::from_millis(100));
        let l = link::parse(&Params::new().with("link", "delay 10ms 2ms")).unwrap();
        // 100 ms + 2 × (10 ms + 4 × 2 ms).
        assert_eq!(auto_drain(&l, 1472), Duration::from_millis(136));
        let l = link::parse(&Params::new().with("link", "rate 100mbit limit 100")).unwrap();
        // A full queue of 100 × 1500 bytes at 100 Mbit/s: 12 ms, twice.
        assert_eq!(auto_drain(&l, 1472), Duration::from_millis(124));
    }
}
