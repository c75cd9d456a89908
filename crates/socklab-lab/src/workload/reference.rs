//! The reference workloads `pipe` and `memcpy` (seed 000's rows): pipe bandwidth between two
//! threads, and memory copy bandwidth, the ceilings a socket is measured against.

use socklab_net::reference::{self, RefResult};
use socklab_net::units::{format_size, parse_size};

use crate::metric::{m, Better, Metric};
use crate::params::{Key, Params};
use crate::resources::Resources;
use crate::sample::Sample;
use crate::workload::bulk::{BYTES, GBPS, READS, SECONDS, WRITES};
use crate::workload::key::nonzero_usize;
use crate::workload::Spec;
use crate::LabError;

/// Parameters of a reference measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct RefSpec {
    /// Transfer size per operation.
    pub size: usize,
    /// Total bytes.
    pub bytes: u64,
}

/// Pipe bandwidth between two threads.
#[derive(Debug, Clone, PartialEq)]
pub struct PipeSpec(pub RefSpec);

/// Memory copy bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct MemcpySpec(pub RefSpec);

/// The keys of the reference workloads.
pub const KEYS: &[Key] = &[
    Key::new("size", "128K", "bytes per operation"),
    Key::new("bytes", "1G", "total bytes to move"),
];

/// The metrics of the reference workloads.
pub const METRICS: &[Metric] = &[
    GBPS,
    SECONDS,
    BYTES,
    WRITES,
    READS,
    m(
        "cpu_s",
        "s",
        "cpu s",
        "process CPU (user + system)",
        Better::Lower,
    ),
];

impl RefSpec {
    fn parse(p: &Params) -> Result<Self, LabError> {
        Ok(RefSpec {
            size: p.value_in(KEYS, "size", nonzero_usize)?,
            bytes: p.value_in(KEYS, "bytes", |s| match parse_size(s)? {
                0 => Err("must be at least 1".to_string()),
                v => Ok(v),
            })?,
        })
    }

    fn params(&self) -> Params {
        Params::new()
            .with("size", format_size(self.size as u64))
            .with("bytes", format_size(self.bytes))
    }
}

impl Spec for PipeSpec {
    const KIND: &'static str = "pipe";
    const KEYS: &'static [Key] = KEYS;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "gbps";
    const COLUMNS: &'static [&'static str] = &["writes", "reads"];

    fn parse(p: &Params) -> Result<Self, LabError> {
        RefSpec::parse(p).map(PipeSpec)
    }

    fn params(&self) -> Params {
        self.0.params()
    }

    fn run(
        &self,
        _res: &mut Resources,
        label: &str,
        _stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        let r = reference::pipe_bandwidth(self.0.size, self.0.bytes)
            .map_err(|e| LabError::run(label, socklab_net::NetError::io("pipe reference", e)))?;
        Ok(sample(&r))
    }
}

impl Spec for MemcpySpec {
    const KIND: &'static str = "memcpy";
    const KEYS: &'static [Key] = KEYS;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "gbps";
    const COLUMNS: &'static [&'static str] = &["writes", "reads"];

    fn parse(p: &Params) -> Result<Self, LabError> {
        RefSpec::parse(p).map(MemcpySpec)
    }

    fn params(&self) -> Params {
        self.0.params()
    }

    fn run(
        &self,
        _res: &mut Resources,
        _label: &str,
        _stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        Ok(sample(&reference::memcpy_bandwidth(
            self.0.size,
            self.0.bytes,
        )))
    }
}

/// The sample of one reference run.
pub fn sample(r: &RefResult) -> Sample {
    let mut s = Sample::new(
        [
            ("gbps", r.gbps()),
            ("seconds", r.seconds),
            ("bytes", r.bytes as f64),
            ("writes", r.ops as f64),
            ("cpu_s", r.cpu.cpu().as_secs_f64()),
        ],
        serde_json::Value::Null,
    );
    if r.reads > 0 {
        s.extend([("reads", r.reads as f64)]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_appear_only_when_there_were_reads() {
        let r = RefResult {
            bytes: 1 << 30,
            seconds: 0.5,
            ops: 8192,
            reads: 0,
            cpu: Default::default(),
        };
        let s = sample(&r);
        assert!((s.get("gbps").unwrap() - 17.179869184).abs() < 1e-9);
        assert_eq!(s.get("writes"), Some(8192.0));
        assert_eq!(s.get("reads"), None);
        assert_eq!(sample(&RefResult { reads: 9, ..r }).get("reads"), Some(9.0));
    }
}
