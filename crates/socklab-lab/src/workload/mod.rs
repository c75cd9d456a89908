//! Workloads: what one cell of an experiment runs, one file each. A workload file holds its
//! spec (keys with typed defaults, parse and print), its `run` against the shared
//! [`Resources`], a pure mapping from its result to a [`Sample`], its metric table and primary
//! metric, and its own report tables. The Runner, the store, the statistics and the report
//! reach workloads only through this module.
//!
//! Adding a workload: a new file implementing [`Spec`], one line in [`workloads!`]'s list
//! below, and a suite TOML in `experiments/` (see `docs/architecture.md`).
//!
//! | workload | file | keys |
//! |---|---|---|
//! | `bulk` | [`bulk`] | [`bulk::KEYS`] and the link keys |
//! | `pingpong` | [`pingpong`] | [`pingpong::KEYS`] and the link keys |
//! | `states` | [`states`] | [`states::KEYS`] |
//! | `pipe`, `memcpy` | [`reference`] | [`reference::KEYS`] |
//! | `transfer` | [`transfer`] | [`transfer::KEYS`] and the link keys |
//! | `load` | [`load`] | [`load::KEYS`] |
//! | `udp` | [`udp`] | [`udp::KEYS`] and the link keys |
//! | `rrul` | [`rrul`] | [`rrul::KEYS`] and the link keys |

pub mod bulk;
pub mod judge;
pub mod key;
pub mod link;
pub mod link_metrics;
pub mod load;
pub mod pingpong;
pub mod reference;
pub mod rrul;
pub mod states;
pub mod transfer;
pub mod udp;
pub mod udp_search;

pub use key::{parse_target, Target};
pub use transfer::{check_tcp_cc, Proto};

use std::collections::BTreeMap;

use socklab_stats::Summary;

use crate::model::metric::{Better, Metric};
use crate::model::params::{Key, Params};
use crate::model::sample::Sample;
use crate::model::stats::ExperimentStats;
use crate::resources::Resources;
use crate::table::Table;
use crate::LabError;

/// How long one repetition of a cell takes, as far as its parameters say (`--dry-run` and the
/// notice before a long plan add these up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeBounds {
    /// It lasts at least this long (`None`: bounded by a count, or unknown).
    pub at_least: Option<std::time::Duration>,
    /// It ends within this (`None`: no bound known in advance).
    pub at_most: Option<std::time::Duration>,
    /// The upper bound is a timeout: the repetition may end much sooner.
    pub by_timeout: bool,
}

impl TimeBounds {
    /// A repetition that lasts exactly `d`, when known.
    pub fn exactly(d: Option<std::time::Duration>) -> TimeBounds {
        TimeBounds {
            at_least: d,
            at_most: d,
            by_timeout: false,
        }
    }
}

/// The duration that `key` holds in `p`, if it is one.
pub(crate) fn duration_of(p: &Params, key: &str) -> Option<std::time::Duration> {
    p.get(key)
        .and_then(|v| socklab_units::parse_duration(v).ok())
}

/// A table of the report that belongs to one workload (seed 004's per-file retransmissions,
/// seed 002's design table), with its caption.
#[derive(Debug, Clone)]
pub struct ReportTable {
    /// Its heading in the HTML report.
    pub title: &'static str,
    /// Its heading on screen (lower case, ends with a colon).
    pub text_heading: &'static str,
    /// Its CSS class in the HTML report.
    pub class: &'static str,
    /// One paragraph under the table (Markdown).
    pub note: &'static str,
    /// The table.
    pub table: Table,
}

/// One workload: its spec type, parsed from and printed to [`Params`], and how it runs.
pub trait Spec: Sized {
    /// Its name in experiment files, the store and the report.
    const KIND: &'static str;
    /// Its own keys (the link keys are added when [`Spec::LINKED`]).
    const KEYS: &'static [Key];
    /// Whether it runs over an emulated link (takes the link keys).
    const LINKED: bool = false;
    /// Keys of which at most one may be given (a quick variant that sets one replaces the
    /// others).
    const EXCLUSIVE: &'static [&'static str] = &[];
    /// The metrics it records.
    const METRICS: &'static [Metric];
    /// The metric it is judged by (tables, bars, "best").
    const PRIMARY: &'static str;
    /// The metrics shown as columns of the summary table (means), after the primary metric.
    const COLUMNS: &'static [&'static str] = &[];

    /// Parses the spec (missing keys take their defaults); keys are already checked.
    fn parse(p: &Params) -> Result<Self, LabError>;

    /// Every parameter with its effective value, in canonical text.
    fn params(&self) -> Params;

    /// Runs one repetition. `label` names the cell in errors; `stop()` turns true on Ctrl-C.
    fn run(
        &self,
        res: &mut Resources,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError>;

    /// The metric cells are judged by, given which metrics the experiment holds.
    fn primary(has: &dyn Fn(&str) -> bool) -> &'static str {
        let _ = has;
        Self::PRIMARY
    }

    /// Whether a cell with this configuration is the baseline others are compared with.
    fn is_baseline(config: &Params) -> bool {
        let _ = config;
        false
    }

    /// The configuration of the cell a cell with `config` is compared with instead of the
    /// baseline, when the experiment has it: its twin (bulk's TLS cell: the same cell in plain
    /// TCP). `None`: the baseline (or the best).
    fn twin(config: &Params) -> Option<Params> {
        let _ = config;
        None
    }

    /// The other keys a lone `key` needs to be checked on its own (experiment files check
    /// every key at its line): e.g. a key of one mode needs that mode.
    fn context(key: &str, value: &str) -> Params {
        let _ = (key, value);
        Params::new()
    }

    /// How long one repetition takes, as far as the parameters say (default: not known).
    fn time_bounds(&self) -> TimeBounds {
        TimeBounds::default()
    }

    /// Its own tables in the report.
    fn tables(st: &ExperimentStats) -> Vec<ReportTable> {
        let _ = st;
        Vec::new()
    }

    /// Why a cell with `config` did not get what it asked for, judged from its measured
    /// `metrics` (e.g. an option the kernel ignored), with how to enable it; `None` when it
    /// did. Such a cell is marked "not in effect" and is never the best.
    fn not_in_effect(config: &Params, metrics: &BTreeMap<String, Summary>) -> Option<String> {
        let _ = (config, metrics);
        None
    }
}

/// Which metrics an experiment holds (for [`Spec::primary`]).
pub type Has<'a> = &'a dyn Fn(&str) -> bool;

/// What the registry knows of one workload kind, without a value of it.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// Its name.
    pub name: &'static str,
    /// Its own keys.
    pub keys: &'static [Key],
    /// Whether it takes the link keys.
    pub linked: bool,
    /// Keys of which at most one may be given.
    pub exclusive: &'static [&'static str],
    /// Its metrics.
    pub metrics: &'static [Metric],
    /// Its columns in the summary table.
    pub columns: &'static [&'static str],
    primary: fn(Has<'_>) -> &'static str,
    is_baseline: fn(&Params) -> bool,
    twin: fn(&Params) -> Option<Params>,
    context: fn(&str, &str) -> Params,
    tables: fn(&ExperimentStats) -> Vec<ReportTable>,
    not_in_effect: NotInEffect,
}

/// [`Spec::not_in_effect`] as a function pointer.
type NotInEffect = fn(&Params, &BTreeMap<String, Summary>) -> Option<String>;

impl Kind {
    const fn of<S: Spec>() -> Kind {
        Kind {
            name: S::KIND,
            keys: S::KEYS,
            linked: S::LINKED,
            exclusive: S::EXCLUSIVE,
            metrics: S::METRICS,
            columns: S::COLUMNS,
            primary: S::primary,
            is_baseline: S::is_baseline,
            twin: S::twin,
            context: S::context,
            tables: S::tables,
            not_in_effect: S::not_in_effect,
        }
    }

    /// Every key, the link keys included.
    pub fn all_keys(&self) -> Vec<Key> {
        let link: &[Key] = if self.linked { link::KEYS } else { &[] };
        self.keys.iter().chain(link).copied().collect()
    }

    /// The metric its cells are judged by, given which metrics the experiment holds.
    pub fn primary(&self, has: &dyn Fn(&str) -> bool) -> &'static str {
        (self.primary)(has)
    }

    /// Whether a cell with `config` is its baseline.
    pub fn is_baseline(&self, config: &Params) -> bool {
        (self.is_baseline)(config)
    }

    /// The configuration of the twin a cell with `config` is compared with ([`Spec::twin`]).
    pub fn twin(&self, config: &Params) -> Option<Params> {
        (self.twin)(config)
    }

    /// The keys a lone `key = value` needs to be checked on its own.
    pub fn context(&self, key: &str, value: &str) -> Params {
        if link::KEYS[1..].iter().any(|k| k.name == key) {
            return Params::new().with("link", "none");
        }
        (self.context)(key, value)
    }

    /// Why a cell with `config` and `metrics` did not get what it asked for (see
    /// [`Spec::not_in_effect`]).
    pub fn not_in_effect(
        &self,
        config: &Params,
        metrics: &BTreeMap<String, Summary>,
    ) -> Option<String> {
        (self.not_in_effect)(config, metrics)
    }

    /// Its tables in the report of `st`.
    pub fn tables(&self, st: &ExperimentStats) -> Vec<ReportTable> {
        (self.tables)(st)
    }
}

/// Declares the closed set of workloads: the enum, its dispatch, and the registry. One line
/// per workload: `Variant => spec type`.
macro_rules! workloads {
    ($($variant:ident => $spec:ty),* $(,)?) => {
        /// What a cell runs.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Workload {
            $(
                #[doc = concat!("The `", stringify!($variant), "` workload.")]
                $variant($spec),
            )*
        }

        /// Every workload kind, in declaration order.
        pub const REGISTRY: &[Kind] = &[$(Kind::of::<$spec>()),*];

        impl Workload {
            fn parse_kind(kind: &str, p: &Params) -> Option<Result<Workload, LabError>> {
                $(
                    if kind == <$spec as Spec>::KIND {
                        return Some(<$spec as Spec>::parse(p).map(Workload::$variant));
                    }
                )*
                None
            }

            /// The workload's name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Workload::$variant(_) => <$spec as Spec>::KIND,)*
                }
            }

            /// Every parameter with its effective value, in canonical text.
            pub fn params(&self) -> Params {
                match self {
                    $(Workload::$variant(s) => s.params(),)*
                }
            }

            /// How long one repetition takes (see [`Spec::time_bounds`]).
            pub fn time_bounds(&self) -> TimeBounds {
                match self {
                    $(Workload::$variant(s) => Spec::time_bounds(s),)*
                }
            }

            /// Runs one repetition against the plan's shared resources.
            pub fn run(
                &self,
                res: &mut Resources,
                label: &str,
                stop: &dyn Fn() -> bool,
            ) -> Result<Sample, LabError> {
                match self {
                    $(Workload::$variant(s) => s.run(res, label, stop),)*
                }
            }
        }
    };
}

workloads! {
    Bulk => bulk::BulkSpec,
    Udp => udp::UdpSpec,
    PingPong => pingpong::PingSpec,
    States => states::StatesSpec,
    Pipe => reference::PipeSpec,
    Memcpy => reference::MemcpySpec,
    Transfer => transfer::TransferSpec,
    Load => load::LoadSpec,
    Rrul => rrul::RrulSpec,
}

/// The workload names.
pub fn kinds() -> Vec<&'static str> {
    REGISTRY.iter().map(|k| k.name).collect()
}

/// The workload kind `name`, if there is one.
pub fn kind(name: &str) -> Option<&'static Kind> {
    REGISTRY.iter().find(|k| k.name == name)
}

fn unknown_kind(name: &str) -> LabError {
    LabError::Plan(format!(
        "unknown workload '{name}': choose one of {}",
        kinds().join(", ")
    ))
}

impl Workload {
    /// Parses a workload of `kind` from its parameters (missing keys take their defaults).
    pub fn from_params(kind: &str, p: &Params) -> Result<Workload, LabError> {
        let k = self::kind(kind).ok_or_else(|| unknown_kind(kind))?;
        let keys = k.all_keys();
        for name in p.0.keys() {
            if !keys.iter().any(|key| key.name == name) {
                return Err(LabError::UnknownKey {
                    key: name.clone(),
                    workload: kind.to_string(),
                    valid: keys.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
                });
            }
        }
        Workload::parse_kind(kind, p).unwrap_or_else(|| Err(unknown_kind(kind)))
    }

    /// The keys of `kind` (the link keys included); none for an unknown kind.
    pub fn keys(kind: &str) -> Vec<Key> {
        self::kind(kind).map(Kind::all_keys).unwrap_or_default()
    }
}

/// Looks a metric up by name in every workload's table, then the link's (the first definition
/// wins); a table entry named `prefix<…>` (`retx.<file>`, `gbps.s<n>`) stands for every
/// `prefix…` name; unknown names get a neutral definition.
pub fn metric(name: &str) -> Metric {
    let all = || {
        let link = link_metrics::METRICS.iter().copied();
        REGISTRY
            .iter()
            .flat_map(|k| k.metrics.iter().copied())
            .chain(link)
    };
    all()
        .find(|m| m.name == name)
        .or_else(|| {
            all().find(|m| {
                m.name
                    .strip_suffix('>')
                    .and_then(|n| n.rfind('<').map(|i| &m.name[..i]))
                    .is_some_and(|prefix| name.len() > prefix.len() && name.starts_with(prefix))
            })
        })
        .unwrap_or(crate::model::metric::m(
            "unknown",
            "",
            "?",
            "",
            Better::Neither,
        ))
}

/// Every workload's keys as Markdown tables (key, default, meaning): `docs/keys.md`.
pub fn keys_markdown() -> String {
    let mut out = String::from(
        "# Workload keys\n\nGenerated from the key descriptors in `crates/socklab-lab/src/workload/` \
         (regenerate: run the test `crates/socklab-lab/tests/keys_doc.rs` with `UPDATE_DOCS=1`). Every key \
         can be fixed or varied in an experiment file; a missing key takes its default.\n\n\
         Sizes are binary, as iperf3's: `128K` (or `128KiB`) is 131072 bytes, `1M` (`1MiB`) 1048576, \
         likewise `G` and `T`. `KB`, `MB`, `GB` and `TB` are refused, since they mean 1000 to some \
         and 1024 to others: the error says what to write (`128K` for KiB, or `128000`). Rates \
         (`rate`, `pacing_rate`) are decimal bits per second: `100M` is 10^8 bit/s.\n",
    );
    for k in REGISTRY {
        out.push_str(&format!(
            "\n## `{}`\n\n| key | default | meaning |\n|---|---|---|\n",
            k.name
        ));
        for key in k.all_keys() {
            let default = if key.default.is_empty() {
                "(unset)".to_string()
            } else {
                format!("`{}`", key.default)
            };
            out.push_str(&format!(
                "| `{}` | {default} | {} |\n",
                key.name,
                key.doc.replace('|', "\\|")
            ));
        }
    }
    out
}

/// The summary table's metric columns: every workload's, in registry order, each once.
pub fn table_columns() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in REGISTRY.iter().flat_map(|k| k.columns) {
        if !out.contains(c) {
            out.push(c);
        }
    }
    out
}

/// The report tables of every workload in `st`.
pub fn report_tables(st: &ExperimentStats) -> Vec<ReportTable> {
    REGISTRY.iter().flat_map(|k| k.tables(st)).collect()
}

#[cfg(test)]
mod tests;
