//! The reference workloads `pipe` and `memcpy` (seed 000's rows): pipe bandwidth between two
//! threads, and memory copy bandwidth, the ceilings a socket is measured against.

use std::sync::OnceLock;

use socklab_net::reference::{self, RefResult};
use socklab_units::{format_size, parse_size};

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{Key, Params};
use crate::model::sample::Sample;
use crate::model::stats::ExperimentStats;
use crate::resources::Resources;
use crate::roles::argv::shown;
use crate::table::{num, Table};
use crate::workload::bulk::{BYTES, GBPS, READS, SECONDS, WRITES};
use crate::workload::key::nonzero_usize;
use crate::workload::{ReportTable, Spec};
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
    Key::new("size", "128K", "bytes per operation").size(),
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

/// The metrics of `memcpy`: those of the references, and the cache level that held the copy.
pub const MEMCPY_METRICS: &[Metric] = &[
    GBPS,
    SECONDS,
    BYTES,
    WRITES,
    m(
        "cpu_s",
        "s",
        "cpu s",
        "process CPU (user + system)",
        Better::Lower,
    ),
    m(
        "copy_level",
        "",
        "held in",
        "the smallest CPU data cache level (sysfs of the measuring host) that holds one copy's source + destination (2 × size) in at most half of it; 0 = none, main memory",
        Better::Neither,
    ),
];

impl Spec for MemcpySpec {
    const KIND: &'static str = "memcpy";
    const KEYS: &'static [Key] = KEYS;
    const METRICS: &'static [Metric] = MEMCPY_METRICS;
    const PRIMARY: &'static str = "gbps";
    const COLUMNS: &'static [&'static str] = &["writes"];

    /// What each memcpy figure measures: the cache level its working set lives in.
    fn tables(st: &ExperimentStats) -> Vec<ReportTable> {
        memcpy_table(st)
            .map(|table| ReportTable {
                title: "What each memcpy figure measures",
                text_heading: "memcpy: where each copy ran (source + destination = 2 × size):",
                class: "memcpy",
                note: memcpy_note(),
                table,
            })
            .into_iter()
            .collect()
    }

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
        let mut s = sample(&reference::memcpy_bandwidth(self.0.size, self.0.bytes));
        let caches = reference::data_caches();
        if let Some(level) = reference::holding_level(&caches, 2 * self.0.size as u64) {
            s.extend([("copy_level", f64::from(level))]);
        }
        Ok(s)
    }
}

/// The caption of [`memcpy_table`].
pub fn memcpy_note() -> &'static str {
    static NOTE: OnceLock<String> = OnceLock::new();
    NOTE.get_or_init(|| {
        let reference = shown::bulk_reference();
        format!("Every memcpy cell is measured the same way (one thread copies `size` bytes from one buffer to another, each copy a real memcpy call, until `bytes` are copied), but the figure is the bandwidth of wherever source and destination live: a few hundred Gbit/s when 2 × size fits in L1 or L2, tens of Gbit/s once it spills to L3 or main memory. So memcpy figures at different sizes measure different things: `{reference}` copies at the bulk run's transfer size (nbufs × bufsize, 128 KiB by default), the `memcpy.toml` experiment at 4 B to 64 KiB. Compare a socket with memcpy only at the same size and level; a memcpy below TCP over loopback means its working set lived in a slower level than the socket's buffers.")
    })
}

/// The memcpy table: per memcpy cell, its size, mean Gbit/s, working set (2 × size) and the
/// cache level that held it on the measuring host (`copy_level`). `None` without memcpy cells.
pub fn memcpy_table(st: &ExperimentStats) -> Option<Table> {
    let cells: Vec<_> = st
        .cells
        .iter()
        .filter(|c| c.cell.workload == MemcpySpec::KIND && c.metrics.contains_key("gbps"))
        .collect();
    if cells.is_empty() {
        return None;
    }
    let mut t = Table::new(&["config", "n", "Gbit/s", "working set", "held in"]);
    for c in cells {
        let size = c.cell.config.get("size").and_then(|v| parse_size(v).ok());
        let level = c.metrics.get("copy_level").map(|s| s.median);
        let held = match level {
            Some(l) if l >= 1.0 => format!("L{l:.0} cache"),
            Some(_) => "main memory (beyond every cache)".to_string(),
            None => "not recorded".to_string(),
        };
        t.row(vec![
            c.cell.label.clone(),
            c.n_text(st.keep_invalid),
            num(c.metrics["gbps"].mean),
            size.map_or_else(|| "-".into(), |s| format_size(2 * s)),
            held,
        ]);
    }
    Some(t)
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
