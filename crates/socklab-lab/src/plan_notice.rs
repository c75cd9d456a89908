//! The line a measuring command prints before a plan that runs much longer than the duration
//! it asks for (issue 28 part 5): `bulk --duration 10s` is 5 repetitions and a warm-up by
//! default, a minute, where an iperf3 user expects ten seconds. The line says how long and
//! why, and names `once` (one repetition, no warm-up), which the binary prints as its flag.

use std::time::Duration;

use crate::dryrun::estimate;
use crate::plan::Plan;

/// `d` for people, to the second: `0.9 s`, `12 s`, `1 min 2 s`, `2 h 5 min`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        let t = format!("{s:.1}");
        return format!("{} s", t.strip_suffix(".0").unwrap_or(&t));
    }
    let s = s.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec} s"),
        (0, min, 0) => format!("{min} min"),
        (0, min, sec) => format!("{min} min {sec} s"),
        (h, 0, _) => format!("{h} h"),
        (h, min, _) => format!("{h} h {min} min"),
    }
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// The line printed before `plan` starts when its time-bounded runs add up to more than twice
/// the longest run it asks for (its `duration`): how many runs of how long, and the total;
/// `None` for a plan that takes about what it asks (one run, or runs bounded by counts).
pub fn notice(plan: &Plan) -> Option<String> {
    let runs: Vec<Duration> = plan
        .cells
        .iter()
        .filter_map(|c| c.workload.time_bounds().at_least)
        .collect();
    let longest = runs.iter().max().copied()?;
    let total = estimate(plan).at_least;
    if total <= 2 * longest {
        return None;
    }
    let per_cell = plan.reps + plan.warmup;
    let what = match plan.cells.len() {
        1 => count(per_cell, "repetition"),
        n => format!("{n} cells × {}", count(per_cell, "repetition")),
    };
    let of = if runs.iter().all(|d| *d == longest) {
        format!("of {}", human(longest))
    } else {
        format!("of up to {}", human(longest))
    };
    let once = match (per_cell > 1, plan.cells.len() > 1) {
        (false, _) => "",
        (true, false) => "; `once` runs one",
        (true, true) => "; `once` runs one per cell",
    };
    Some(format!(
        "socklab: this runs {what} {of} ({} + {} warm-up), at least {} in all{once}",
        plan.reps,
        plan.warmup,
        human(total)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::plan::{Axis, Group, Order};

    fn bulk(duration: &str, axis: Option<Axis>, reps: usize, warmup: usize) -> Plan {
        let mut g = Group::new("bulk", Params::new().with("duration", duration));
        g.axes.extend(axis);
        Plan::build("bulk", "", &[g], reps, warmup, Order::Interleaved, "").unwrap()
    }

    #[test]
    fn a_plan_over_twice_its_duration_says_how_long_and_why() {
        let n = notice(&bulk("10s", None, 5, 1)).expect("60 s for 10 s asked");
        assert_eq!(
            n,
            "socklab: this runs 6 repetitions of 10 s (5 + 1 warm-up), at least 1 min in all; `once` runs one"
        );
        let streams = Axis::single("bufsize", ["64K", "128K"]);
        let n = notice(&bulk("0.3s", Some(streams), 3, 0)).unwrap();
        assert_eq!(
            n,
            "socklab: this runs 2 cells × 3 repetitions of 0.3 s (3 + 0 warm-up), at least 1.8 s in all; `once` runs one per cell"
        );
        // Two runs of one cell: twice the duration, not more: nothing said.
        assert_eq!(notice(&bulk("10s", None, 1, 1)), None);
        assert_eq!(notice(&bulk("10s", None, 1, 0)), None);
        // Three cells of one run each: said, without `once` (it would change nothing).
        let three = Axis::single("bufsize", ["16K", "64K", "128K"]);
        let n = notice(&bulk("10s", Some(three), 1, 0)).unwrap();
        assert!(n.ends_with("at least 30 s in all"), "{n}");
        // Runs bounded by a count have no duration: nothing said.
        let g = Group::new("pingpong", Params::new());
        let p = Plan::build("p", "", &[g], 5, 1, Order::Interleaved, "").unwrap();
        assert_eq!(notice(&p), None);
    }

    #[test]
    fn durations_for_people() {
        let h = |s: f64| human(Duration::from_secs_f64(s));
        assert_eq!(h(0.9), "0.9 s");
        assert_eq!(h(3.0), "3 s");
        assert_eq!(h(12.4), "12 s");
        assert_eq!(h(62.0), "1 min 2 s");
        assert_eq!(h(120.0), "2 min");
        assert_eq!(h(7500.0), "2 h 5 min");
        assert_eq!(h(7200.0), "2 h");
    }
}
