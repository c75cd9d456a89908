//! A dry run and the time a plan will take: what a command would run, said before it runs.
//!
//! A plan knows its cells and repetitions; a cell's parameters bound its time when they hold a
//! `duration` (bulk, load, rrul with its `idle`: the run lasts that long) or a `timeout` (transfer: a repetition
//! that has not finished by then fails). Count-bounded runs (`iterations`, `count`,
//! `requests`) have no bound known in advance. The texts name keys in backticks (`` `timeout` ``);
//! the binary prints them as its flags.

use std::time::Duration;

use crate::plan::Plan;

/// A plan's time, from its cells' parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Runs (repetitions and warm-ups of every cell).
    pub runs: usize,
    /// The sum of the time-bounded runs' durations: the plan takes at least this long.
    pub at_least: Duration,
    /// The sum of every run's bound (duration or timeout); `None` when some run is bounded
    /// by a count only.
    pub at_most: Option<Duration>,
    /// True when some run's bound is a timeout (it may end much sooner).
    pub by_timeout: bool,
    /// True when a cell crosses an emulated link (where timeouts are reached).
    pub link: bool,
    /// Runs that may come on top of `runs`: the re-runs of repetitions marked invalid, at most
    /// `reps` per cell over an emulated link (its `2 × reps` attempts). Counted in `at_most`.
    pub retries: usize,
}

/// The plan's [`Estimate`].
pub fn estimate(plan: &Plan) -> Estimate {
    let per_cell = (plan.reps + plan.warmup) as u32;
    let mut e = Estimate {
        runs: plan.cells.len() * (plan.reps + plan.warmup),
        at_least: Duration::ZERO,
        at_most: Some(Duration::ZERO),
        by_timeout: false,
        link: false,
        retries: 0,
    };
    for cell in &plan.cells {
        let p = cell.workload.params();
        let over_link = p.get("link").is_some_and(|l| !l.is_empty() && l != "none");
        e.link |= over_link;
        // Only an emulated link marks a repetition invalid, and so re-runs it.
        let retries = if over_link && plan.retry_invalid {
            plan.reps as u32
        } else {
            0
        };
        e.retries += retries as usize;
        let b = cell.workload.time_bounds();
        e.by_timeout |= b.by_timeout;
        let (duration, bound) = (b.at_least, b.at_most);
        if let Some(d) = duration {
            e.at_least += d * per_cell;
        }
        e.at_most = match (e.at_most, bound) {
            (Some(sum), Some(b)) => Some(sum + b * (per_cell + retries)),
            _ => None,
        };
    }
    e
}

/// `d` for people: seconds up to two minutes, then minutes, then hours; rounded `up` (an
/// upper bound) or down (a lower bound), so the bound stays true.
pub fn human(d: Duration, up: bool) -> String {
    let s = d.as_secs_f64();
    let round = |x: f64| if up { x.ceil() } else { x.floor() };
    if s < 120.0 {
        format!("{} s", round(s) as u64)
    } else if s < 2.0 * 3600.0 {
        format!("{} min", round(s / 60.0) as u64)
    } else {
        format!("{:.1} h", round(s / 360.0) / 10.0)
    }
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// A plan runs "long" from this on: it says so before it starts.
pub const LONG: Duration = Duration::from_secs(180);

/// One line of the plan's time: at least, at most, and what bounds it.
pub fn time_line(e: &Estimate) -> String {
    let mut s = if e.at_least.is_zero() {
        "time: not known in advance".to_string()
    } else {
        format!(
            "time: at least {} (the runs' `duration`)",
            human(e.at_least, false)
        )
    };
    match e.at_most {
        Some(m) if e.by_timeout => {
            s += &format!(
                "; at most {} if every repetition ran to its `timeout`{}",
                human(m, true),
                if e.retries > 0 {
                    " and each over the link were marked invalid and re-run"
                } else {
                    ""
                }
            )
        }
        Some(_) => {}
        None if e.at_least.is_zero() => s += " (the runs are bounded by counts)",
        None => s += " plus the count-bounded runs",
    }
    s
}

/// The line printed before a long plan starts, if it is long: at least [`LONG`] of
/// time-bounded runs, or (across an emulated link, where repetitions do reach their timeouts)
/// more than three times that if every repetition timed out.
pub fn long_run_notice(plan: &Plan) -> Option<String> {
    let e = estimate(plan);
    let long =
        e.at_least >= LONG || (e.link && e.by_timeout && e.at_most.is_some_and(|m| m >= 3 * LONG));
    long.then(|| {
        format!(
            "socklab: '{}' is a long plan: {}, {}; {}. Progress below; Ctrl-C keeps the finished repetitions.",
            plan.name,
            count(plan.cells.len(), "cell"),
            count(e.runs, "run"),
            time_line(&e)
        )
    })
}

/// The dry run's report of a plan: its cells, runs and time, nothing measured.
pub fn plan_text(plan: &Plan) -> String {
    let e = estimate(plan);
    let mut s = format!(
        "dry run: experiment '{}': {} x ({} + {} warm-up) = {}; nothing measured\n",
        plan.name,
        count(plan.cells.len(), "cell"),
        count(plan.reps, "repetition"),
        plan.warmup,
        count(e.runs, "run")
    );
    for c in &plan.cells {
        s += &format!("  cell {}: {}\n", c.index + 1, c.label);
    }
    if e.retries > 0 {
        s += &format!(
            "  a repetition marked invalid (the emulated link could not keep up) is run again: up to {} more {} (2 × reps attempts per cell; `keep_invalid` runs each once)\n",
            e.retries,
            if e.retries == 1 { "run" } else { "runs" }
        );
    }
    s += &format!("  {}\n", time_line(&e));
    if let Some(notice) = long_run_notice(plan) {
        s += &format!("{notice}\n");
    }
    s
}

/// `plan` as a command with `keep_invalid` (`keep`) runs it: no re-runs of invalid
/// repetitions.
pub fn keeping_invalid(plan: Plan, keep: bool) -> Plan {
    Plan {
        retry_invalid: plan.retry_invalid && !keep,
        ..plan
    }
}

/// A dry run's line for a command without a plan (a server, a query): `what` it would do.
pub fn checked_text(what: &str) -> String {
    format!("dry run: {what}; arguments checked, nothing done\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::plan::{Axis, Group, Order};

    fn plan(kind: &str, fixed: Params, axis: Option<Axis>, reps: usize, warmup: usize) -> Plan {
        let mut g = Group::new(kind, fixed);
        g.axes.extend(axis);
        Plan::build("t", "", &[g], reps, warmup, Order::Interleaved, "").unwrap()
    }

    #[test]
    fn durations_bound_a_plan_from_below_and_timeouts_from_above() {
        let bulk = plan(
            "bulk",
            Params::new().with("duration", "5s"),
            Some(Axis::single("strategy", ["write", "writev"])),
            10,
            1,
        );
        let e = estimate(&bulk);
        assert_eq!(e.runs, 22);
        assert_eq!(e.at_least, Duration::from_secs(110));
        assert_eq!(e.at_most, Some(Duration::from_secs(110)));
        assert!(long_run_notice(&bulk).is_none(), "under 3 minutes");

        let counted = plan("bulk", Params::new().with("iterations", "100"), None, 3, 0);
        let e = estimate(&counted);
        assert_eq!((e.at_least, e.at_most), (Duration::ZERO, None));
        assert!(time_line(&e).contains("not known"), "{}", time_line(&e));

        // The lossy example as it was: 3 cells x 31 runs, each up to its 60 s timeout.
        let t = Params::new()
            .with("link", "rate 100mbit limit 2000 delay 50ms loss 10%")
            .with("link_back", "delay 50ms");
        let tcp = Group::new("transfer", t.clone().with("proto", "tcp"))
            .axis(Axis::single("tcp_cc", ["cubic", "bbr"]));
        let rudp = Group::new("transfer", t.with("proto", "rudp"));
        let lossy = Plan::build("x", "", &[tcp, rudp], 30, 1, Order::Interleaved, "").unwrap();
        let e = estimate(&lossy);
        // 93 runs, and up to 30 re-runs per cell of repetitions marked invalid.
        assert_eq!(e.retries, 90);
        assert_eq!(e.at_most, Some(Duration::from_secs(183 * 60)));
        let notice = long_run_notice(&lossy).expect("a long plan says so");
        assert!(notice.contains("at most 3.1 h"), "{notice}");
        assert!(notice.contains("93 runs"), "{notice}");
        assert!(
            plan_text(&lossy).contains("up to 90 more"),
            "{}",
            plan_text(&lossy)
        );
        // --keep-invalid re-runs nothing.
        let mut kept = lossy.clone();
        kept.retry_invalid = false;
        assert_eq!(estimate(&kept).at_most, Some(Duration::from_secs(93 * 60)));
        assert!(!plan_text(&kept).contains("more"), "{}", plan_text(&kept));
        // No link, no retries.
        assert_eq!(estimate(&bulk).retries, 0);
    }

    #[test]
    fn human_durations() {
        let h = |s: f64, up| human(Duration::from_secs_f64(s), up);
        assert_eq!(h(1.5, true), "2 s");
        assert_eq!(h(1.5, false), "1 s");
        assert_eq!(h(119.0, true), "119 s");
        assert_eq!(h(450.0, true), "8 min");
        assert_eq!(h(450.0, false), "7 min");
        assert_eq!(h(5.0 * 3600.0, true), "5.0 h");
        assert_eq!(h(5.01 * 3600.0, true), "5.1 h");
        assert_eq!(h(5.01 * 3600.0, false), "5.0 h");
    }
}
