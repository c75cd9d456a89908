//! A run's HDR histograms as data ([`LoadHistograms`], serialised as `(value, count)` buckets),
//! the report made from them, and the exact merge of several generators' runs ([`merge`]):
//! their histograms are added and the percentiles read from the sum (never averaged), their
//! counts summed; each generator's own warnings are kept, named, and a generator that fell
//! behind its share of the load is named.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::metrics::{histogram, Timing};
use super::{Failures, GeneratorStats, LoadConfig, LoadReport};

/// The histograms of a run (nanoseconds), as the engine recorded them.
#[derive(Debug, Clone)]
pub struct LoadHistograms {
    /// Connect times.
    pub connect: Histogram<u64>,
    /// First byte.
    pub first_byte: Histogram<u64>,
    /// Response times from the actual start.
    pub response: Histogram<u64>,
    /// Open loop: response times from the intended send time.
    pub corrected: Histogram<u64>,
    /// Open loop: send lag.
    pub send_lag: Histogram<u64>,
    /// Open loop: timer lag.
    pub timer_lag: Histogram<u64>,
    /// Event-loop busy time.
    pub loop_busy: Histogram<u64>,
}

impl Default for LoadHistograms {
    fn default() -> Self {
        LoadHistograms {
            connect: histogram(),
            first_byte: histogram(),
            response: histogram(),
            corrected: histogram(),
            send_lag: histogram(),
            timer_lag: histogram(),
            loop_busy: histogram(),
        }
    }
}

/// The names of the histograms, in the order of [`LoadHistograms::each`].
const NAMES: [&str; 7] = [
    "connect",
    "first_byte",
    "response",
    "corrected",
    "send_lag",
    "timer_lag",
    "loop_busy",
];

impl LoadHistograms {
    fn each(&self) -> [&Histogram<u64>; 7] {
        [
            &self.connect,
            &self.first_byte,
            &self.response,
            &self.corrected,
            &self.send_lag,
            &self.timer_lag,
            &self.loop_busy,
        ]
    }

    fn each_mut(&mut self) -> [&mut Histogram<u64>; 7] {
        [
            &mut self.connect,
            &mut self.first_byte,
            &mut self.response,
            &mut self.corrected,
            &mut self.send_lag,
            &mut self.timer_lag,
            &mut self.loop_busy,
        ]
    }

    /// Adds `o`'s counts into these (same bounds, auto-resizing: exact).
    pub fn add(&mut self, o: &LoadHistograms) {
        for (into, from) in self.each_mut().into_iter().zip(o.each()) {
            let _ = into.add(from);
        }
    }

    /// The histograms as `(value, count)` buckets, by name: every recorded bucket at its highest
    /// equivalent value, which records back into the same bucket ([`Self::from_buckets`]).
    pub fn buckets(&self) -> BTreeMap<String, Vec<(u64, u64)>> {
        NAMES
            .iter()
            .zip(self.each())
            .map(|(n, h)| {
                let b = h
                    .iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect();
                (n.to_string(), b)
            })
            .collect()
    }

    /// Histograms from [`Self::buckets`]; an error names a bad value.
    pub fn from_buckets(b: &BTreeMap<String, Vec<(u64, u64)>>) -> Result<LoadHistograms, String> {
        let mut h = LoadHistograms::default();
        for (n, into) in NAMES.iter().zip(h.each_mut()) {
            for &(v, c) in b.get(*n).map(Vec::as_slice).unwrap_or_default() {
                into.record_n(v, c)
                    .map_err(|e| format!("histogram {n}: value {v}: {e:?}"))?;
            }
        }
        Ok(h)
    }
}

/// The counts of a run.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Totals {
    pub completed: u64,
    pub failed: Failures,
    pub connections_opened: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
}

/// The report of a run of `cfg` from its counts, histograms and thread utilisation over `secs`
/// of wall time; `warnings` first, then the open loop's (timer lag, rate not achieved).
pub(super) fn report(
    cfg: &LoadConfig,
    t: &Totals,
    h: &LoadHistograms,
    util: Vec<f64>,
    secs: f64,
    aborted: Option<String>,
    mut warnings: Vec<String>,
) -> LoadReport {
    let secs = secs.max(1e-9);
    let open = cfg.rate.is_some();
    let timer_lag = Timing::from_ns(&h.timer_lag);
    if let Some(rate) = cfg.rate {
        let p99_ms = timer_lag.percentiles.p99_us / 1000.0;
        if timer_lag.count > 0 && p99_ms > 1.0 {
            warnings.push(format!(
                "the generator woke {p99_ms:.1} ms late (p99) for its own send times: it cannot keep the schedule (add `threads`, or lower `rate`)"
            ));
        }
        let achieved = t.completed as f64 / secs;
        if t.completed.saturating_add(t.failed.total()) > 0 && achieved < 0.9 * rate {
            warnings.push(format!(
                "achieved {achieved:.0} of the {rate:.0} requests/s asked for: the server (or the generator) did not keep up; the corrected latency shows the cost"
            ));
        }
    }
    LoadReport {
        config: cfg.clone(),
        duration_s: secs,
        completed: t.completed,
        failed: t.failed,
        connections_opened: t.connections_opened,
        requests_per_s: t.completed as f64 / secs,
        connections_per_s: t.connections_opened as f64 / secs,
        bytes_written: t.bytes_written,
        bytes_read: t.bytes_read,
        transfer_bytes_per_s: t.bytes_read as f64 / secs,
        connect: Timing::from_ns(&h.connect),
        first_byte: Timing::from_ns(&h.first_byte),
        response: Timing::from_ns(&h.response),
        response_corrected: open.then(|| Timing::from_ns(&h.corrected)),
        generator: GeneratorStats {
            send_lag: open.then(|| Timing::from_ns(&h.send_lag)),
            timer_lag: open.then_some(timer_lag),
            loop_busy: Timing::from_ns(&h.loop_busy),
            thread_utilisation: util,
            cpu_user_s: t.cpu_user_s,
            cpu_sys_s: t.cpu_sys_s,
            warnings,
        },
        aborted,
        tls: None,
        intervals: Vec::new(),
    }
}

/// One generator's run: its host, report and histograms.
#[derive(Debug, Clone)]
pub struct Part {
    /// The generator's host.
    pub name: String,
    /// Its report (of its share of the load).
    pub report: LoadReport,
    /// Its histograms.
    pub histograms: LoadHistograms,
}

impl Part {
    /// Why this generator fell behind its share of the load, if it did: an open-loop share
    /// not achieved (under 90%), or a generator thread busy over 90% of the time.
    pub fn behind(&self) -> Option<String> {
        let r = &self.report;
        if let Some(rate) = r.config.rate {
            if r.completed.saturating_add(r.failed.total()) > 0 && r.requests_per_s < 0.9 * rate {
                return Some(format!(
                    "achieved {:.0} of its {rate:.0} requests/s",
                    r.requests_per_s
                ));
            }
        }
        r.generator
            .thread_utilisation
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))))
            .filter(|&u| u > 0.9)
            .map(|u| format!("a generator thread was busy {:.0}% of the time", u * 100.0))
    }
}

/// The run of `cfg` (the whole load) from its generators' parts: histograms added, counts and
/// CPU summed, the wall time the longest part's; each part's warnings kept with its name
/// first, and a part that fell behind named.
pub fn merge(cfg: &LoadConfig, parts: &[Part]) -> (LoadReport, LoadHistograms) {
    let mut h = LoadHistograms::default();
    let mut t = Totals::default();
    let mut util = Vec::new();
    let mut secs: f64 = 0.0;
    let mut warnings = Vec::new();
    let mut aborted = None;
    for p in parts {
        let r = &p.report;
        h.add(&p.histograms);
        // Saturating: the parts come from other hosts' result lines.
        t.completed = t.completed.saturating_add(r.completed);
        t.failed.add(&r.failed);
        t.connections_opened = t.connections_opened.saturating_add(r.connections_opened);
        t.bytes_written = t.bytes_written.saturating_add(r.bytes_written);
        t.bytes_read = t.bytes_read.saturating_add(r.bytes_read);
        t.cpu_user_s += r.generator.cpu_user_s;
        t.cpu_sys_s += r.generator.cpu_sys_s;
        util.extend(&r.generator.thread_utilisation);
        secs = secs.max(r.duration_s);
        if let Some(why) = p.behind() {
            warnings.push(format!(
                "generator {} fell behind: {why}; the merged figures include its shortfall",
                p.name
            ));
        }
        for w in &r.generator.warnings {
            warnings.push(format!("generator {}: {w}", p.name));
        }
        if aborted.is_none() {
            aborted = r
                .aborted
                .as_ref()
                .map(|a| format!("generator {}: {a}", p.name));
        }
    }
    let r = report(cfg, &t, &h, util, secs, aborted, warnings);
    (r, h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::metrics::record;
    use crate::load::LoadProtocol;

    fn part(name: &str, values_us: &[u64], rate: Option<f64>, secs: f64) -> Part {
        let mut h = LoadHistograms::default();
        for &v in values_us {
            record(&mut h.response, v * 1000);
            record(&mut h.connect, 50_000);
        }
        let mut cfg = LoadConfig::new("127.0.0.1:1".parse().unwrap(), LoadProtocol::Echo);
        cfg.rate = rate;
        let t = Totals {
            completed: values_us.len() as u64,
            connections_opened: values_us.len() as u64,
            cpu_user_s: 0.5,
            ..Totals::default()
        };
        Part {
            name: name.into(),
            report: report(&cfg, &t, &h, vec![0.2], secs, None, vec![]),
            histograms: h,
        }
    }

    /// Counts a generator sent (any number it printed) add up without overflowing.
    #[test]
    fn huge_counts_from_generators_saturate() {
        let mut a = part("a", &[1, 2], Some(100.0), 1.0);
        a.report.completed = u64::MAX;
        a.report.failed.connect = u64::MAX;
        a.report.failed.bad_reply = 7;
        a.report.bytes_read = u64::MAX - 1;
        let cfg = a.report.config.clone();
        let (m, _) = merge(&cfg, &[a.clone(), a]);
        assert_eq!(m.completed, u64::MAX);
        assert_eq!(m.failed.connect, u64::MAX);
        assert_eq!(m.failed.bad_reply, 14);
        assert_eq!(m.failed.total(), u64::MAX);
        assert_eq!(m.bytes_read, u64::MAX);
    }

    /// Percentiles of the merge are those of one histogram holding every value: not the
    /// average of the generators' percentiles.
    #[test]
    fn merged_percentiles_are_those_of_all_values_together() {
        let fast: Vec<u64> = (1..=900).collect();
        let slow: Vec<u64> = (1..=100).map(|i| 10_000 + i).collect();
        let a = part("a", &fast, None, 2.0);
        let b = part("b", &slow, None, 1.5);
        let cfg = LoadConfig::new("127.0.0.1:1".parse().unwrap(), LoadProtocol::Echo);
        let (m, h) = merge(&cfg, &[a.clone(), b.clone()]);
        let mut one = histogram();
        for &v in fast.iter().chain(&slow) {
            record(&mut one, v * 1000);
        }
        assert_eq!(h.response, one);
        assert_eq!(m.response, Timing::from_ns(&one));
        let averaged =
            (a.report.response.percentiles.p99_us + b.report.response.percentiles.p99_us) / 2.0;
        assert!(
            (m.response.percentiles.p99_us - averaged).abs() > 1000.0,
            "{m:?}"
        );
        assert_eq!(m.completed, 1000);
        assert_eq!(m.connect.count, 1000);
        assert!((m.generator.cpu_user_s - 1.0).abs() < 1e-9);
        assert_eq!(m.duration_s, 2.0);
        assert_eq!(m.requests_per_s, 500.0);
        assert_eq!(m.generator.thread_utilisation, [0.2, 0.2]);
        assert!(
            m.generator.warnings.is_empty(),
            "{:?}",
            m.generator.warnings
        );
    }

    #[test]
    fn buckets_round_trip_exactly() {
        let p = part("a", &[1, 2, 3, 1000, 123_456], Some(10.0), 1.0);
        let back = LoadHistograms::from_buckets(&p.histograms.buckets()).unwrap();
        assert_eq!(back.response, p.histograms.response);
        assert_eq!(back.connect, p.histograms.connect);
        let json = serde_json::to_string(&p.histograms.buckets()).unwrap();
        let again: BTreeMap<String, Vec<(u64, u64)>> = serde_json::from_str(&json).unwrap();
        assert_eq!(
            LoadHistograms::from_buckets(&again).unwrap().response,
            p.histograms.response
        );
    }

    #[test]
    fn a_generator_that_falls_behind_is_named() {
        // Asked for 1000 req/s, did 50 in 1 s.
        let slow = part("lab3", &[5; 50], Some(1000.0), 1.0);
        let fine = part("lab1", &[5; 1000], Some(1000.0), 1.0);
        assert!(fine.behind().is_none());
        let mut cfg = LoadConfig::new("127.0.0.1:1".parse().unwrap(), LoadProtocol::Echo);
        cfg.rate = Some(2000.0);
        let (m, _) = merge(&cfg, &[fine, slow]);
        let w = m.generator.warnings.join("\n");
        assert!(
            w.contains("generator lab3 fell behind: achieved 50 of its 1000 requests/s"),
            "{w}"
        );
        assert!(!w.contains("generator lab1 fell behind"), "{w}");
    }
}
