//! An experiment's headline figure: its primary metric for its one cell, or for several the
//! top cell's (called *best* only when [`ExperimentStats::best`] says it is significantly
//! better than every other cell, else *top mean*), with the 95% interval the tables print
//! ([`ci_cell`]: Student t, or log-t that never reaches below zero) and, over an emulated
//! link, the cell's RTT and queue wait. Read from the statistics the report computes
//! ([`crate::summary`]), or for `results list` from the repetitions' metrics alone ([`light`]).

pub mod light;
#[cfg(test)]
mod tests;

use crate::model::stats::ExperimentStats;
use crate::scale::Scale;
use crate::table::{ci_cell, num};
use crate::workload::metric;

/// How the headline cell stands among the cells of its workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// The workload has one measured cell.
    Only,
    /// The top cell, significantly better than every other ([`ExperimentStats::best`]).
    Best,
    /// The top mean, not significantly better than every other (or too few repetitions).
    TopMean,
}

impl Rank {
    /// The word printed (`best`, `top mean`; nothing for a lone cell).
    pub fn word(self) -> Option<&'static str> {
        match self {
            Rank::Only => None,
            Rank::Best => Some("best"),
            Rank::TopMean => Some("top mean"),
        }
    }
}

/// An experiment's headline figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// The primary metric.
    pub metric: &'static str,
    /// Its unit as printed (`Gbit/s`, `µs`).
    pub unit: String,
    /// The mean of the headline cell; `None` when no cell has a measured repetition.
    pub mean: Option<f64>,
    /// Its 95% interval as the tables print it (`±h`, `lo–hi`), `None` under two repetitions.
    pub ci: Option<String>,
    /// The headline cell's label (prefixed by its workload when the experiment mixes
    /// workloads), when the workload has several cells.
    pub cell: Option<String>,
    /// How that cell stands.
    pub rank: Rank,
    /// Its `n` as the tables print it (`5`, `3 (+2 invalid)`).
    pub n: String,
    /// Over an emulated link: the cell's mean RTT and queue wait (`RTT 101 ms`, `queue 4.2 ms`).
    pub link: Vec<String>,
}

impl Headline {
    /// The figure: `30.43 Gbit/s ±5.99`, `12.1 µs 11.0–13.5`, `30.43 Gbit/s` (no interval),
    /// `no measured repetition`.
    pub fn figure(&self) -> String {
        match (self.mean, &self.ci) {
            (None, _) => "no measured repetition".into(),
            (Some(m), Some(ci)) => format!("{} {} {ci}", num(m), self.unit),
            (Some(m), None) => format!("{} {}", num(m), self.unit),
        }
    }

    /// Where it comes from: `bufsize=128K, top mean, n=5; RTT 101 ms, queue 4.2 ms`.
    pub fn detail(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(c) = &self.cell {
            parts.push(c.clone());
        }
        if let Some(w) = self.rank.word() {
            parts.push(w.into());
        }
        if self.mean.is_some() {
            let n = format!("n={}", self.n);
            parts.push(if self.ci.is_none() {
                format!("{n}, no interval")
            } else {
                n
            });
        }
        parts.join(", ")
    }

    /// The figure with the link's RTT and queue wait: `0.09 Gbit/s ±0.01 (RTT 102 ms, queue
    /// 4.3 ms)`.
    pub fn figure_and_link(&self) -> String {
        if self.link.is_empty() {
            self.figure()
        } else {
            format!("{} ({})", self.figure(), self.link.join(", "))
        }
    }

    /// The one line: `30.43 Gbit/s ±5.99 (bufsize=128K, top mean, n=5)`, the link's RTT and
    /// queue wait after a `;`.
    pub fn text(&self) -> String {
        let mut d = self.detail();
        if !self.link.is_empty() {
            d = format!("{d}; {}", self.link.join(", "));
        }
        if d.is_empty() {
            self.figure()
        } else {
            format!("{} ({d})", self.figure())
        }
    }
}

/// A unit as the reports print it (`us` as `µs`).
fn shown_unit(unit: &str) -> String {
    if unit == "us" {
        "µs".into()
    } else {
        unit.to_string()
    }
}

/// A time in microseconds, in ms from 1 ms up.
fn micros(us: f64) -> String {
    if us.abs() >= 1000.0 {
        format!("{} ms", num(us / 1000.0))
    } else {
        format!("{} µs", num(us))
    }
}

/// The metrics of a cell over an emulated link shown beside its figure: mean TCP RTT, mean
/// queue wait at the forward bottleneck.
const LINK_METRICS: [(&str, &str); 2] = [("rtt_us", "RTT"), ("link_fwd_qdelay_mean_us", "queue")];

/// The headline figure of `st`: its primary metric in the top cell of its first workload.
pub fn headline(st: &ExperimentStats) -> Headline {
    let primary = st.primary();
    let unit = shown_unit(metric(primary).unit);
    let none = Headline {
        metric: primary,
        unit: unit.clone(),
        mean: None,
        ci: None,
        cell: None,
        rank: Rank::Only,
        n: "0".into(),
        link: Vec::new(),
    };
    let Some(first) = st.cells.first() else {
        return none;
    };
    let w = first.cell.workload.as_str();
    let Some(t) = st.top(primary, w) else {
        return none;
    };
    let c = &st.cells[t];
    let Some(s) = c.metrics.get(primary) else {
        return none;
    };
    // In the unit that suits the figure, as the tables scale a column (19.30 Mbit/s, not
    // 0.01930 Gbit/s).
    let scale = Scale::column(metric(primary).unit, [s.mean]);
    let s = &scale.summary(s);
    let unit = shown_unit(scale.unit);
    let several = st.cells.iter().filter(|c| c.cell.workload == w).count() > 1;
    let mixed = st.cells.iter().any(|c| c.cell.workload != w);
    // [`ExperimentStats::best`]'s rule, on one computation of the comparisons.
    let beaten = st.beaten(primary, w);
    let rank = if !several || beaten.is_empty() {
        Rank::Only
    } else if beaten.iter().all(|(_, significant)| *significant) {
        Rank::Best
    } else {
        Rank::TopMean
    };
    let cell = several.then(|| {
        // A mixed experiment's labels name their workload already (`bulk bufsize=16K`).
        if mixed && !c.cell.label.starts_with(w) {
            format!("{w} {}", c.cell.label)
        } else {
            c.cell.label.clone()
        }
    });
    let link = if c.cell.config.get("link").is_some() {
        LINK_METRICS
            .iter()
            .filter_map(|(m, what)| Some(format!("{what} {}", micros(c.metrics.get(*m)?.mean))))
            .collect()
    } else {
        Vec::new()
    };
    Headline {
        metric: primary,
        unit,
        mean: Some(s.mean),
        ci: (s.n >= 2).then(|| ci_cell(s)).filter(|c| c != "-"),
        cell,
        rank,
        n: c.n_text(st.keep_invalid),
        link,
    }
}
