//! What a metric is: name, unit, header, meaning and preferred direction. Each workload keeps
//! its own table (`METRICS` in its file); the workload registry looks a name up in all of
//! them. The names are the column names of every export.

/// Which direction is better for a metric (for verdicts and "best" marks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Larger values are better (throughput).
    Higher,
    /// Smaller values are better (time, CPU).
    Lower,
    /// A count or fact with no preferred direction.
    Neither,
}

/// A metric's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// Column name.
    pub name: &'static str,
    /// Unit as printed.
    pub unit: &'static str,
    /// Short header for tables.
    pub short: &'static str,
    /// One line of description.
    pub description: &'static str,
    /// Preferred direction.
    pub better: Better,
    /// The metric is itself a difference of two measurements (added latency: loaded −
    /// idle): it can be near zero or negative, so comparisons are differences in its unit,
    /// never percentages.
    pub difference: bool,
}

impl Metric {
    /// This metric, marked as a difference of two measurements (see [`Metric::difference`]).
    pub const fn as_difference(self) -> Metric {
        Metric {
            difference: true,
            ..self
        }
    }
}

pub const fn m(
    name: &'static str,
    unit: &'static str,
    short: &'static str,
    description: &'static str,
    better: Better,
) -> Metric {
    Metric {
        name,
        unit,
        short,
        description,
        better,
        difference: false,
    }
}
