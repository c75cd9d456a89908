//! A plan's progress in lines for people: what started, what is re-run, what finished (with
//! its result in a few words and the time left). The binary draws a bar or prints them.

use std::time::Instant;

use crate::plan::{Cell, Plan};
use crate::runner::Sample;
use crate::table::num;

/// Counts a plan's runs as they finish.
#[derive(Debug, Clone)]
pub struct Tally {
    name: String,
    total: usize,
    done: usize,
    t0: Instant,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            name: String::new(),
            total: 0,
            done: 0,
            t0: Instant::now(),
        }
    }
}

impl Tally {
    /// Plan `plan` starts as experiment `experiment`, `runs` runs in all; its line.
    pub fn start(plan: &Plan, experiment: i64, runs: usize) -> (Tally, String) {
        let tally = Tally {
            name: plan.name.clone(),
            total: runs,
            ..Tally::default()
        };
        let line = format!(
            "experiment {experiment} '{}': {} cells, {runs} runs",
            plan.name,
            plan.cells.len()
        );
        (tally, line)
    }

    /// The words of a run in progress (beside a bar).
    pub fn running(cell: &Cell, rep: usize, warmup: bool) -> String {
        format!(
            "{}{} rep {}",
            cell.label,
            if warmup { " (warm-up)" } else { "" },
            rep + 1
        )
    }

    /// A repetition of `cell` marked invalid is re-run as `rep`: one run more; its line.
    pub fn retry(&mut self, cell: &Cell, rep: usize) -> String {
        self.total += 1;
        format!(
            "{} | {}: a repetition was marked invalid (emu_valid = 0); running it again as rep {} (a cell gets at most 2 × reps attempts)",
            self.name,
            cell.label,
            rep + 1
        )
    }

    /// A run finished.
    pub fn done(&mut self) {
        self.done += 1;
    }

    /// The line of the run that finished last: the count, what ran, its result, the time left.
    pub fn done_line(&self, cell: &Cell, rep: usize, warmup: bool, sample: &Sample) -> String {
        let elapsed = self.t0.elapsed().as_secs_f64();
        let eta = elapsed / self.done.max(1) as f64 * self.total.saturating_sub(self.done) as f64;
        format!(
            "[{}/{}] {} | {}{} rep {}: {} (ETA {:.0}s)",
            self.done,
            self.total,
            self.name,
            cell.label,
            if warmup { " warm-up" } else { "" },
            rep + 1,
            describe_sample(sample),
            eta
        )
    }
}

/// A repetition's result in a few words, for its progress line: throughput (in Mbit/s below
/// 1 Gbit/s; over a link with its RTT and queueing delay), a round trip, the latency a load
/// added, a transfer's time, or whether it failed.
pub fn describe_sample(s: &Sample) -> String {
    if let Some(g) = s.get("gbps") {
        let sc = crate::scale::Scale::column("Gbit/s", [g]);
        let queue = s.get(crate::workload::link_metrics::QDELAY);
        match (s.get("rtt_us"), queue) {
            (Some(r), Some(q)) => format!(
                "{} {}, rtt {} ms, qdelay {} ms",
                sc.num(g),
                sc.unit,
                num(r / 1e3),
                num(q / 1e3)
            ),
            _ => format!("{} {}", sc.num(g), sc.unit),
        }
    } else if let Some(a) = s.get("added_p50_ms") {
        format!("added p50 {} ms", num(a))
    } else if let Some(t) = s.get("total_us") {
        format!(
            "{} us, p50 {} us",
            num(t),
            s.get("rtt_p50_us").map(num).unwrap_or_default()
        )
    } else if let Some(t) = s.get("total_s") {
        format!(
            "{} s, {} Mbit/s, retx {}",
            num(t),
            s.get("goodput_mbps").map(num).unwrap_or_default(),
            s.get("retx").map(num).unwrap_or_default()
        )
    } else if s.get("failed") == Some(1.0) {
        "failed".to_string()
    } else if let Some(r) = s.get("rebind_ok") {
        format!("rebind {}", if r > 0.0 { "ok" } else { "failed" })
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::plan::{Axis, Group, Order};

    #[test]
    fn the_lines_count_runs_and_retries() {
        let g =
            Group::new("bulk", Params::new()).axis(Axis::single("strategy", ["write", "writev"]));
        let plan = Plan::build("p", "", &[g], 2, 1, Order::Sequential, "").unwrap();
        let (mut t, line) = Tally::start(&plan, 3, 6);
        assert_eq!(line, "experiment 3 'p': 2 cells, 6 runs");
        let cell = &plan.cells[1];
        assert_eq!(
            Tally::running(cell, 0, true),
            format!("{} (warm-up) rep 1", cell.label)
        );
        assert!(t.retry(cell, 2).contains("running it again as rep 3"));
        t.done();
        let s = Sample {
            metrics: vec![("gbps".into(), 2.5)],
            extra: serde_json::Value::Null,
            histograms: Vec::new(),
            intervals: Vec::new(),
        };
        let done = t.done_line(cell, 0, false, &s);
        assert!(
            done.starts_with(&format!("[1/7] p | {} rep 1: 2.5", cell.label)),
            "{done}"
        );
        assert!(done.ends_with("s)"), "{done}");
    }
}
