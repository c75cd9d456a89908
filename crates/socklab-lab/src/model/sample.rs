//! What one repetition measured: metrics, facts, latency histograms, and the interval time
//! series of its streams. Workloads make samples; the Runner stores them.

use std::borrow::Cow;

pub use socklab_net::series::Direction;

/// A metric's name: a fixed name of a workload's metric table, or one made at run time (the
/// per-file retransmissions of a transfer, `retx.<file>`).
pub type MetricName = Cow<'static, str>;

/// What one repetition measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// `(metric name, value)` pairs; names are those of the workloads' metric tables.
    pub metrics: Vec<(MetricName, f64)>,
    /// Effective settings read back from the kernel and other facts (stored as JSON).
    pub extra: serde_json::Value,
    /// Latency distributions: `(name, [(value, count)…])` with values in the unit of the name
    /// (`rtt_ns`, `connect_ns`), as recorded by an HDR histogram.
    pub histograms: Vec<(&'static str, Vec<(u64, u64)>)>,
    /// The time series (`interval`): every interval of every stream, in time order per stream.
    pub intervals: Vec<Interval>,
}

/// One interval of one stream of a repetition (`--interval`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    /// Stream number (0 for a single stream).
    pub stream: u32,
    /// Which way its data flows, seen from the client.
    pub direction: Direction,
    /// Start, seconds since the start of the run.
    pub start_s: f64,
    /// End, seconds since the start of the run.
    pub end_s: f64,
    /// In the start the summary leaves out (`omit`).
    pub omitted: bool,
    /// `(metric name, value)` pairs, names from [`crate::series::INTERVAL_METRICS`].
    pub values: Vec<(MetricName, f64)>,
}

impl Interval {
    /// The value of a metric, if present.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

impl Sample {
    /// A sample of fixed-name metrics with `extra` facts and no histograms.
    pub fn new(
        metrics: impl IntoIterator<Item = (&'static str, f64)>,
        extra: serde_json::Value,
    ) -> Sample {
        Sample {
            metrics: metrics
                .into_iter()
                .map(|(n, v)| (Cow::Borrowed(n), v))
                .collect(),
            extra,
            histograms: Vec::new(),
            intervals: Vec::new(),
        }
    }

    /// Adds a metric.
    pub fn push(&mut self, name: impl Into<MetricName>, value: f64) {
        self.metrics.push((name.into(), value));
    }

    /// Adds fixed-name metrics.
    pub fn extend(&mut self, metrics: impl IntoIterator<Item = (&'static str, f64)>) {
        self.metrics
            .extend(metrics.into_iter().map(|(n, v)| (Cow::Borrowed(n), v)));
    }

    /// The value of a metric, if present.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_and_run_time_names_live_side_by_side() {
        let mut s = Sample::new([("gbps", 1.5)], serde_json::Value::Null);
        s.push(format!("retx.{}", "large-0"), 3.0);
        s.extend([("reads", 2.0)]);
        assert_eq!(s.get("gbps"), Some(1.5));
        assert_eq!(s.get("retx.large-0"), Some(3.0));
        assert_eq!(s.get("reads"), Some(2.0));
        assert_eq!(s.get("writes"), None);
    }
}
