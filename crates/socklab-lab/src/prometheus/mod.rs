//! `socklab results export --prometheus`: an experiment's statistics in Prometheus' text
//! exposition format (0.0.4), ready for node_exporter's textfile collector.
//!
//! Every figure is a gauge. A metric of the workloads' tables becomes the families
//! `socklab_<name>_<unit>` (the mean over the measured repetitions), `socklab_<name>_ci95_lo_<unit>`
//! and `socklab_<name>_ci95_hi_<unit>` (the interval the report draws; absent below two
//! repetitions), in its base unit: µs, ms and s in `seconds`, Gbit/s and Mbit/s in
//! `bytes_per_second` (Prometheus' base unit: bits are not one), % and fractions as a `ratio` (0..1), bytes in `bytes`, rates in
//! `per_second`; counts keep their name. Each cell has `socklab_cell_repetitions` (the
//! repetitions in the statistics) and `socklab_cell_invalid_repetitions` (those marked invalid
//! and left out). The statistics are separate families, not a `stat` label, since a sum or an
//! average across a label must mean something (Prometheus' naming guide).
//!
//! Labels: `experiment` (id), `experiment_name`, `workload`, `cell` (its label) and every
//! configuration key of the cell (`config_<key>` where a key has one of those names); a
//! per-stream metric (`gbps.s0`) is the family `socklab_per_stream_…` with a `stream` label, a
//! per-file one (`retx.<file>`) `socklab_per_file_…` with `file`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::stats::{CellStats, ExperimentStats};
use crate::store::Store;
use crate::summary::experiment_stats;
use crate::workload::metric;
use crate::LabError;

/// What every family's name starts with.
pub const PREFIX: &str = "socklab_";

/// The labels every series carries, in this order, before the configuration's.
const RESERVED: &[&str] = &[
    "experiment",
    "experiment_name",
    "workload",
    "cell",
    "stream",
    "file",
];

/// Abbreviated units that a name loses when its base unit is appended (Prometheus' linter
/// rejects `_s`, `_us`, `_ms`… in a name).
const ABBREVIATIONS: &[&str] = &["ns", "us", "ms", "s", "sec", "pct", "gbps", "mbps"];

/// Metrics whose names would meet in one family once their units are base units (pingpong's
/// `total_us` and transfer's `total_s`, both `total_seconds`), under a name each of their own.
/// A name that is its unit alone (bulk's `seconds`, `bytes`) gets a word to go before it.
const RENAMED: &[(&str, &str)] = &[
    ("total_us", "round_trips"),
    ("total_s", "transfer"),
    ("seconds", "end_to_end_seconds"),
    ("bytes", "sent_bytes"),
];

/// A socklab unit's Prometheus base unit: the suffix and the power of ten from the unit to
/// it (µs: `("seconds", -6)`); `None` for counts and unitless figures (they keep their value
/// and name). Rates of bits are in bytes per second, the base unit Prometheus' linter asks
/// for (a bit is an eighth of it: [`Family::convert`]).
pub fn base_unit(unit: &str) -> Option<(&'static str, i32)> {
    Some(match unit {
        "ns" => ("seconds", -9),
        "us" | "µs" => ("seconds", -6),
        "ms" => ("seconds", -3),
        "s" => ("seconds", 0),
        "Gbit/s" => (BYTES_PER_SECOND, 9),
        "Mbit/s" => (BYTES_PER_SECOND, 6),
        "bit/s" => (BYTES_PER_SECOND, 0),
        "%" => ("ratio", -2),
        "fraction" => ("ratio", 0),
        "B" => ("bytes", 0),
        "ns/B" => ("seconds_per_byte", -9),
        "1/s" | "req/s" | "conn/s" => ("per_second", 0),
        _ => return None,
    })
}

/// The unit of the rates socklab gives in bits per second.
const BYTES_PER_SECOND: &str = "bytes_per_second";

/// A metric as a Prometheus family: the name between [`PREFIX`] and the statistic (its unit
/// included where it has one), the factor to that unit, and the label a per-stream or per-file
/// metric adds (`("stream", "0")` for `gbps.s0`).
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The name without prefix or unit (`rtt`, `per_stream_throughput`).
    pub base: String,
    /// The unit suffix (`seconds`), if the name has one appended.
    pub unit: Option<&'static str>,
    /// The base unit of the values (`bytes` for `bytes_per_read`, which names it already).
    pub base_unit: Option<&'static str>,
    /// The power of ten from socklab's unit to it.
    pub scale: i32,
    /// The label of a per-stream or per-file metric, with its value.
    pub part: Option<(&'static str, String)>,
}

impl Family {
    /// `x` in socklab's unit, in the family's: multiplied or divided by an exact power of
    /// ten, so 50 µs is 0.00005 s, not 0.000049999999999999996.
    pub fn convert(&self, x: f64) -> f64 {
        let p = 10f64.powi(self.scale.abs());
        let x = if self.scale < 0 { x / p } else { x * p };
        if self.base_unit == Some(BYTES_PER_SECOND) {
            x / 8.0
        } else {
            x
        }
    }

    /// The family's full name for statistic `stat` (`""`: the mean).
    pub fn name(&self, stat: &str) -> String {
        let mut n = format!("{PREFIX}{}", self.base);
        for w in [Some(stat), self.unit].into_iter().flatten() {
            if !w.is_empty() {
                n.push('_');
                n.push_str(w);
            }
        }
        n
    }
}

/// `name` with every character outside `[a-z0-9_]` an underscore, lower case, never empty
/// and never starting with a digit.
pub fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// The Prometheus family of socklab metric `name` with unit `unit` (see the module's text).
pub fn family(name: &str, unit: &str) -> Family {
    // A pattern entry of a table (`gbps.s<n>`, `retx.<file>`): the part after its prefix is
    // a label value, and the family is named after the label.
    let pattern = metric(name).name;
    let (name, part) = match pattern.strip_suffix('>').and_then(|p| p.rsplit_once('<')) {
        Some((prefix, placeholder)) if name.len() > prefix.len() && name.starts_with(prefix) => {
            let label = if placeholder == "n" { "stream" } else { "file" };
            let base = prefix.split('.').next().unwrap_or(prefix);
            (base, Some((label, name[prefix.len()..].to_string())))
        }
        _ => (name, None),
    };
    let base_unit = base_unit(unit);
    let name = RENAMED
        .iter()
        .find(|(from, _)| *from == name)
        .map_or(name, |(_, to)| to);
    let mut words: Vec<String> = sanitize(name)
        .split('_')
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect();
    if let Some((suffix, _)) = base_unit {
        if suffix == "per_second" && words.ends_with(&["per".to_string(), "s".to_string()]) {
            words.truncate(words.len() - 2);
        }
        // A rate named by its unit alone (`gbps`, `gbps_up`) is a throughput.
        let first_rate = words.first().is_some_and(|w| w == "gbps" || w == "mbps");
        words.retain(|w| !ABBREVIATIONS.contains(&w.as_str()));
        if first_rate {
            words.insert(0, "throughput".into());
        }
        // `bits` is no base unit (bytes are).
        words.retain(|w| w != "bits");
    }
    if let Some((label, _)) = &part {
        words.insert(0, format!("per_{label}"));
    }
    // A name that ends with its unit (`send_seconds`) has it as the suffix, after the
    // statistic (`send_ci95_lo_seconds`); one that says it elsewhere (`bytes_per_read`) keeps
    // the name as it is.
    let unit_words: Vec<String> = base_unit
        .map(|(u, _)| u.split('_').map(String::from).collect())
        .unwrap_or_default();
    if !unit_words.is_empty() && words.ends_with(&unit_words) {
        words.truncate(words.len() - unit_words.len());
    }
    let says_unit = unit_words.first().is_some_and(|u| words.contains(u));
    let unit_suffix = base_unit.map(|(s, _)| s).filter(|_| !says_unit);
    Family {
        base: if words.is_empty() {
            "value".into()
        } else {
            words.join("_")
        },
        unit: unit_suffix,
        base_unit: base_unit.map(|(s, _)| s),
        scale: base_unit.map_or(0, |(_, p)| p),
        part,
    }
}

/// A label value as the format writes it: `\` as `\\`, `"` as `\"`, a line feed as `\n`.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A HELP text as the format writes it: `\` as `\\`, a line feed as `\n` (quotes stay).
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value: Rust's shortest text that reads back to the same number (Go's parser
/// reads it), `NaN` and `±Inf` as the format spells them.
pub fn value(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{x}")
    }
}

/// One family being written: its help and its samples' lines.
#[derive(Default)]
struct Lines {
    help: String,
    samples: Vec<String>,
}

/// The families of an export by name (one `# HELP` and `# TYPE` each, their samples together).
#[derive(Default)]
struct Exposition {
    families: BTreeMap<String, Lines>,
    /// Which socklab metric each family came from (two metrics never share a family).
    source: BTreeMap<String, String>,
    /// Metrics left out because their family name was another metric's.
    clashes: Vec<String>,
}

impl Exposition {
    fn add(&mut self, family: &str, from: &str, help: &str, labels: &str, v: f64) {
        match self.source.get(family) {
            Some(s) if s != from => {
                let note = format!("{from} (its name {family} is that of {s})");
                if !self.clashes.contains(&note) {
                    self.clashes.push(note);
                }
                return;
            }
            Some(_) => {}
            None => {
                self.source.insert(family.to_string(), from.to_string());
            }
        }
        let f = self.families.entry(family.to_string()).or_default();
        if f.help.is_empty() {
            f.help = escape_help(help);
        }
        f.samples.push(format!("{family}{{{labels}}} {}", value(v)));
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.clashes {
            let _ = writeln!(out, "# socklab: left out {c}");
        }
        for (name, f) in &self.families {
            let _ = writeln!(out, "# HELP {name} {}", f.help);
            let _ = writeln!(out, "# TYPE {name} gauge");
            for s in &f.samples {
                out.push_str(s);
                out.push('\n');
            }
        }
        out
    }
}

/// The labels of cell `c` of experiment `st` (and of a per-stream or per-file metric's part),
/// written `name="value",…`.
fn labels(st: &ExperimentStats, c: &CellStats, part: Option<&(&'static str, String)>) -> String {
    let mut pairs: Vec<(String, String)> = vec![
        ("experiment".into(), st.experiment.id.to_string()),
        ("experiment_name".into(), st.experiment.name.clone()),
        ("workload".into(), c.cell.workload.clone()),
        ("cell".into(), c.cell.label.clone()),
    ];
    if let Some((l, v)) = part {
        pairs.push(((*l).to_string(), v.clone()));
    }
    for (k, v) in &c.cell.config.0 {
        let mut name = sanitize(k);
        if RESERVED.contains(&name.as_str()) || name.starts_with("__") {
            name = format!("config_{}", name.trim_start_matches('_'));
        }
        if !pairs.iter().any(|(n, _)| *n == name) {
            pairs.push((name, v.clone()));
        }
    }
    pairs
        .iter()
        .map(|(n, v)| format!("{n}=\"{}\"", escape_label(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Adds experiment `st`'s families to `e`.
fn add_experiment(e: &mut Exposition, st: &ExperimentStats) {
    for c in &st.cells {
        let l = labels(st, c, None);
        e.add(
            "socklab_cell_repetitions",
            "n",
            "Measured repetitions of the cell in its statistics (warm-ups and invalid ones excluded).",
            &l,
            c.n as f64,
        );
        e.add(
            "socklab_cell_invalid_repetitions",
            "invalid",
            "Measured repetitions of the cell marked invalid (the emulated link could not keep up), left out of its statistics.",
            &l,
            c.invalid as f64,
        );
        for (name, s) in &c.metrics {
            let m = metric(name);
            let f = family(name, m.unit);
            let l = labels(st, c, f.part.as_ref());
            let unit = match f.base_unit {
                Some("per_second") => format!("per second (socklab shows {})", m.unit),
                Some(u) => format!("in {} (socklab shows {})", u.replace('_', " "), m.unit),
                None if m.unit.is_empty() => String::new(),
                None => format!("in {}", m.unit),
            };
            // Per-stream and per-file metrics share their table entry's family.
            let from = if m.name.ends_with('>') { m.name } else { name };
            let what = if m.name == "unknown" {
                format!("socklab metric {name}")
            } else {
                format!("{} ({from})", m.description.trim_end_matches('.'))
            };
            let help = |stat: &str| {
                let unit = if unit.is_empty() {
                    String::new()
                } else {
                    format!(", {unit}")
                };
                format!("{what}: {stat} over the measured repetitions{unit}.")
            };
            e.add(&f.name(""), from, &help("mean"), &l, f.convert(s.mean));
            if let Some((lo, hi)) = s.ci95() {
                let (lo_help, hi_help) = (
                    help("lower end of the 95% confidence interval of the mean"),
                    help("upper end of the 95% confidence interval of the mean"),
                );
                e.add(&f.name("ci95_lo"), from, &lo_help, &l, f.convert(lo));
                e.add(&f.name("ci95_hi"), from, &hi_help, &l, f.convert(hi));
            }
        }
    }
}

/// The exposition of experiments `stats`: each family once, its samples together.
pub fn exposition(stats: &[ExperimentStats]) -> String {
    let mut e = Exposition::default();
    for st in stats {
        add_experiment(&mut e, st);
    }
    e.text()
}

/// The exposition of experiments `ids` of `store`.
pub fn export(store: &Store, ids: &[i64]) -> Result<String, LabError> {
    let stats = ids
        .iter()
        .map(|&id| experiment_stats(store, id))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(exposition(&stats))
}

#[cfg(test)]
mod tests;
