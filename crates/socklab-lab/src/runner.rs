//! The Runner: runs a [`Plan`] through an [`Executor`], committing every finished repetition
//! to the [`Store`] as it finishes, and telling an [`Observer`] how it goes.
//!
//! One code path for everything: `socklab bulk` builds a plan and hands it here, as suites do.

use std::collections::{BTreeSet, HashSet};
use std::time::Instant;

use socklab_sys::host::HostFacts;

use crate::clock::now_rfc3339;
use crate::model::stats::VALID_METRIC;
use crate::plan::{Cell, Order, Plan};
use crate::series::LiveSink;
use crate::store::Store;
use crate::store_runs::StoredRun;
use crate::LabError;

pub use crate::model::sample::Sample;

/// Runs cells. The live executor drives sockets; tests use a mock.
pub trait Executor {
    /// Runs one repetition of `cell`. `stop()` turns true on Ctrl-C; long runs poll it.
    fn run(&mut self, cell: &Cell, stop: &dyn Fn() -> bool) -> Result<Sample, LabError>;

    /// Runs repetition `rep` (a warm-up when `warmup`) of `cell`: what the Runner calls.
    /// Executors whose runs depend on the repetition (the emulated link's seed) override it.
    fn run_rep(
        &mut self,
        cell: &Cell,
        rep: usize,
        warmup: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        let _ = (rep, warmup);
        self.run(cell, stop)
    }

    /// Where the next repetition hands its intervals as they close (`None`: nowhere). Only
    /// executors that run workloads with a time series use it.
    fn set_live(&mut self, live: Option<LiveSink>) {
        let _ = live;
    }

    /// Called once after the last run (stop servers, collect their accounting). Returns facts
    /// to store with the experiment.
    fn finish(&mut self) -> Result<Vec<(String, String)>, LabError> {
        Ok(Vec::new())
    }
}

/// Progress events.
pub trait Observer {
    /// The plan starts: `runs` repetitions in all (warm-ups included).
    fn start(&mut self, _plan: &Plan, _experiment: i64, _runs: usize) {}
    /// A repetition starts.
    fn run_start(&mut self, _cell: &Cell, _rep: usize, _warmup: bool) {}
    /// Where the intervals of the repetition about to start go while it runs (printed live);
    /// `None`: they are only stored.
    fn live(&mut self, _cell: &Cell, _rep: usize, _warmup: bool) -> Option<LiveSink> {
        None
    }
    /// A measured repetition was marked invalid (`emu_valid = 0`) and repetition `rep` of
    /// `cell` runs in its place: one run more than announced at [`Observer::start`].
    fn retry(&mut self, _cell: &Cell, _rep: usize) {}
    /// A repetition finished and is stored.
    fn run_done(&mut self, _cell: &Cell, _rep: usize, _warmup: bool, _sample: &Sample) {}
    /// The plan ended (successfully or not).
    fn end(&mut self) {}
}

/// An observer that says nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {}

/// The outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSummary {
    /// Experiment id in the store.
    pub experiment: i64,
    /// Repetitions finished and stored (warm-ups and retries included).
    pub done: usize,
    /// Of those, attempts run because an earlier one was marked invalid.
    pub retried: usize,
}

/// Runs `plan`: records the experiment, runs the schedule, commits each finished repetition.
///
/// On a failed repetition the experiment is marked `failed` and the error returned; on
/// `stop()` it is marked `interrupted`. Either way every finished repetition stays stored.
///
/// A measured repetition marked invalid (`emu_valid = 0`) is re-run, with the plan's
/// [`Plan::retry_invalid`], until its cell has as many valid ones as the schedule has given
/// it so far, at most `2 × reps` attempts per cell: see [`execute`].
pub fn run_plan(
    plan: &Plan,
    store: &mut Store,
    host: &HostFacts,
    exec: &mut dyn Executor,
    obs: &mut dyn Observer,
    stop: &dyn Fn() -> bool,
) -> Result<RunSummary, LabError> {
    let (experiment, cell_ids) = store.begin_experiment(plan, host)?;
    store.set_fact(experiment, "plan_fingerprint", &plan.fingerprint())?;
    let mut ctx = Ctx::new(store, exec, obs, stop, experiment, &cell_ids);
    execute(plan, &mut ctx, &[])
}

/// What `--resume` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Continued experiment `experiment`, which already held `skipped` runs.
    Continued {
        /// Experiment id.
        experiment: i64,
        /// Runs already stored and skipped.
        skipped: usize,
    },
    /// No experiment with this name and these cells: started a new one.
    Fresh,
}

/// Continues the newest stored experiment with the same name and cells as `plan`, running only
/// the repetitions it does not hold yet (none is run twice), and the retries its invalid ones
/// still call for; starts a new one if there is none.
pub fn resume_plan(
    plan: &Plan,
    store: &mut Store,
    host: &HostFacts,
    exec: &mut dyn Executor,
    obs: &mut dyn Observer,
    stop: &dyn Fn() -> bool,
) -> Result<(Resume, RunSummary), LabError> {
    let Some(experiment) = store.find_resumable(&plan.name, &plan.fingerprint())? else {
        return Ok((Resume::Fresh, run_plan(plan, store, host, exec, obs, stop)?));
    };
    let stored = store.stored_runs(experiment)?;
    let cell_ids = store.reopen_experiment(experiment, plan.reps, plan.warmup)?;
    if cell_ids.len() != plan.cells.len() {
        return Err(LabError::Plan(format!(
            "experiment {experiment} has {} cells, the plan {}: run without `resume`",
            cell_ids.len(),
            plan.cells.len()
        )));
    }
    let mut ctx = Ctx::new(store, exec, obs, stop, experiment, &cell_ids);
    let s = execute(plan, &mut ctx, &stored)?;
    Ok((
        Resume::Continued {
            experiment,
            skipped: stored.len(),
        },
        s,
    ))
}

/// One cell's measured attempts so far (stored before and run now).
#[derive(Debug, Clone, Default)]
struct Tally {
    /// Measured attempts, invalid ones included.
    attempts: usize,
    /// Of those, not marked invalid.
    valid: usize,
    /// Their repetition numbers.
    reps: BTreeSet<usize>,
}

impl Tally {
    fn add(&mut self, rep: usize, invalid: bool) {
        self.attempts += 1;
        self.valid += usize::from(!invalid);
        self.reps.insert(rep);
    }

    /// The number of the next retry: the smallest not used from `reps` on (the planned
    /// repetitions are `0..reps`), so it gets its own emulator seed.
    fn next_rep(&self, reps: usize) -> usize {
        (reps..).find(|r| !self.reps.contains(r)).unwrap_or(reps)
    }
}

/// What a run works with, and what it has done.
struct Ctx<'a> {
    store: &'a mut Store,
    exec: &'a mut dyn Executor,
    obs: &'a mut dyn Observer,
    stop: &'a dyn Fn() -> bool,
    experiment: i64,
    cell_ids: &'a [i64],
    /// Runs finished and stored now.
    done: usize,
    /// Of those, retries.
    retried: usize,
    /// The reasons of the repetitions that failed (stored with `failed = 1`).
    failed: Vec<String>,
}

impl<'a> Ctx<'a> {
    /// Nothing run yet.
    fn new(
        store: &'a mut Store,
        exec: &'a mut dyn Executor,
        obs: &'a mut dyn Observer,
        stop: &'a dyn Fn() -> bool,
        experiment: i64,
        cell_ids: &'a [i64],
    ) -> Ctx<'a> {
        Ctx {
            store,
            exec,
            obs,
            stop,
            experiment,
            cell_ids,
            done: 0,
            retried: 0,
            failed: Vec::new(),
        }
    }
}

/// Runs the schedule, skipping the runs `stored` already holds.
///
/// Retries: the measured runs fall into groups, a round of every cell (interleaved and random
/// order) or one cell's repetitions (sequential). At the end of each group, every cell of it
/// with fewer valid repetitions than the schedule has given it so far (stored ones counted)
/// is run again, in the group's order, until it has them or has used its `2 × reps` attempts
/// (the planned runs still ahead keep their place among them). A retry is repetition `reps`,
/// `reps + 1`, … (its own emulator seed), stored with `"retry": true` in its extra; the
/// invalid attempt stays stored. A resumed run counts what is stored, so it neither loses nor
/// repeats an attempt.
fn execute(plan: &Plan, ctx: &mut Ctx<'_>, stored: &[StoredRun]) -> Result<RunSummary, LabError> {
    let skip: HashSet<(usize, usize, bool)> =
        stored.iter().map(|r| (r.cell, r.rep, r.warmup)).collect();
    let mut tally = vec![Tally::default(); plan.cells.len()];
    for r in stored.iter().filter(|r| !r.warmup) {
        if let Some(t) = tally.get_mut(r.cell) {
            t.add(r.rep, r.invalid);
        }
    }
    let schedule = plan.schedule();
    let pending = schedule.iter().filter(|r| !skip.contains(r)).count();
    ctx.obs.start(plan, ctx.experiment, pending);
    let retry_fact = if plan.retry_invalid {
        "on: up to 2 × reps attempts per cell"
    } else {
        "off (`keep_invalid`)"
    };
    let mut outcome = ctx
        .store
        .set_fact(ctx.experiment, "retry_invalid", retry_fact);
    let group_of = |&(c, r, _): &(usize, usize, bool)| match plan.order {
        Order::Sequential => c,
        Order::Interleaved | Order::Random(_) => r,
    };
    let max_attempts = 2 * plan.reps;
    // Per cell: the measured runs of the schedule reached so far, and those still to run.
    let mut planned = vec![0usize; plan.cells.len()];
    let mut ahead = vec![0usize; plan.cells.len()];
    for &(c, _, _) in schedule.iter().filter(|r| !r.2 && !skip.contains(r)) {
        ahead[c] += 1;
    }
    let mut group: Vec<usize> = Vec::new();
    'runs: for (i, &(ci, rep, warmup)) in schedule.iter().enumerate() {
        if outcome.is_err() {
            break;
        }
        if !skip.contains(&(ci, rep, warmup)) {
            match attempt(plan, ctx, ci, rep, warmup, false) {
                Ok(invalid) if !warmup => {
                    tally[ci].add(rep, invalid);
                    ahead[ci] -= 1;
                }
                Ok(_) => {}
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if warmup {
            continue;
        }
        planned[ci] += 1;
        if !group.contains(&ci) {
            group.push(ci);
        }
        let next = schedule.get(i + 1);
        if next.is_some_and(|n| group_of(n) == group_of(&(ci, rep, warmup))) {
            continue;
        }
        // The cells of the group that still lack valid repetitions, while they have attempts
        // left (the runs still ahead keep their place within the 2 × reps).
        let due = |tally: &[Tally]| -> Vec<usize> {
            group
                .iter()
                .copied()
                .filter(|&c| {
                    tally[c].valid < planned[c] && tally[c].attempts + ahead[c] < max_attempts
                })
                .collect()
        };
        let mut retry = if plan.retry_invalid {
            due(&tally)
        } else {
            Vec::new()
        };
        while !retry.is_empty() {
            for c in retry {
                let r = tally[c].next_rep(plan.reps);
                ctx.obs.retry(&plan.cells[c], r);
                match attempt(plan, ctx, c, r, false, true) {
                    Ok(invalid) => tally[c].add(r, invalid),
                    Err(e) => {
                        outcome = Err(e);
                        break 'runs;
                    }
                }
            }
            retry = due(&tally);
        }
        group.clear();
    }
    finish(ctx, outcome)
}

/// Runs and stores one attempt; returns whether it was marked invalid. An error ends the run
/// (interrupted, or the store failed); a repetition's own failure is stored and counted.
fn attempt(
    plan: &Plan,
    ctx: &mut Ctx<'_>,
    ci: usize,
    rep: usize,
    warmup: bool,
    retry: bool,
) -> Result<bool, LabError> {
    let experiment = ctx.experiment;
    if (ctx.stop)() {
        return Err(interrupted(experiment));
    }
    let cell = &plan.cells[ci];
    ctx.obs.run_start(cell, rep, warmup);
    let started = now_rfc3339();
    let t0 = Instant::now();
    ctx.exec.set_live(ctx.obs.live(cell, rep, warmup));
    let result = ctx.exec.run_rep(cell, rep, warmup, ctx.stop);
    ctx.exec.set_live(None);
    let mut sample = match result {
        Ok(s) => s,
        // A repetition that failed while it was being stopped (a call cut short by the
        // signal) was interrupted: it is not a measured failure.
        Err(LabError::Run { .. }) if (ctx.stop)() => return Err(interrupted(experiment)),
        // A repetition's own failure is a result: stored with its reason, the rest goes on.
        Err(LabError::Run {
            cell: label,
            source,
        }) if !matches!(source, socklab_net::NetError::Interrupted) => {
            let why = format!("{label}: {source}");
            ctx.failed.push(why.clone());
            failed_sample(&why)
        }
        Err(
            LabError::Run {
                source: socklab_net::NetError::Interrupted,
                ..
            }
            | LabError::Interrupted { .. },
        ) => return Err(interrupted(experiment)),
        Err(other) => return Err(other),
    };
    if retry {
        mark_retry(&mut sample);
    }
    let wall = t0.elapsed().as_secs_f64();
    ctx.store
        .record_sample(ctx.cell_ids[ci], rep, warmup, &started, wall, &sample)?;
    ctx.done += 1;
    ctx.retried += usize::from(retry);
    ctx.obs.run_done(cell, rep, warmup, &sample);
    Ok(sample.get(VALID_METRIC) == Some(0.0))
}

/// The interruption of `experiment`; [`finish`] counts what the store holds of it.
fn interrupted(experiment: i64) -> LabError {
    LabError::Interrupted {
        experiment,
        measured: 0,
        warmups: 0,
    }
}

/// The interruption of `experiment` with the store's counts: measured repetitions (as
/// `socklab results list` shows them) and warm-ups, earlier runs' (resumed) included.
fn interrupted_as_stored(store: &Store, experiment: i64) -> Result<LabError, LabError> {
    let runs = store.done_runs(experiment)?;
    let warmups = runs.iter().filter(|r| r.2).count();
    Ok(LabError::Interrupted {
        experiment,
        measured: runs.len() - warmups,
        warmups,
    })
}

/// Names a retry in its stored extra (`"retry": true`).
fn mark_retry(sample: &mut Sample) {
    match &mut sample.extra {
        serde_json::Value::Object(m) => {
            m.insert("retry".into(), true.into());
        }
        serde_json::Value::Null => sample.extra = serde_json::json!({ "retry": true }),
        other => {
            let value = other.take();
            sample.extra = serde_json::json!({ "retry": true, "value": value });
        }
    }
}

/// Stops the servers, stores their facts and the experiment's status.
fn finish(ctx: &mut Ctx<'_>, outcome: Result<(), LabError>) -> Result<RunSummary, LabError> {
    let experiment = ctx.experiment;
    let facts = ctx.exec.finish();
    ctx.obs.end();
    if let Ok(facts) = &facts {
        for (k, v) in facts {
            ctx.store.set_fact(experiment, k, v)?;
        }
    }
    if outcome.is_ok() && !ctx.failed.is_empty() {
        ctx.store.finish_experiment(experiment, "done")?;
        facts?;
        return Err(LabError::Failed {
            experiment,
            failed: ctx.failed.len(),
            first: ctx.failed.swap_remove(0),
        });
    }
    let status = match &outcome {
        Ok(()) => "done",
        Err(LabError::Interrupted { .. }) => "interrupted",
        Err(_) => "failed",
    };
    ctx.store.finish_experiment(experiment, status)?;
    if status == "interrupted" {
        return Err(interrupted_as_stored(ctx.store, experiment)?);
    }
    outcome?;
    facts?;
    Ok(RunSummary {
        experiment,
        done: ctx.done,
        retried: ctx.retried,
    })
}

/// The sample of a repetition that failed: `failed = 1` and the reason.
pub fn failed_sample(why: &str) -> Sample {
    Sample::new([("failed", 1.0)], serde_json::json!({ "error": why }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::plan::{Axis, Group, Order};
    use std::cell::Cell as StdCell;

    /// Returns `gbps = 10 × cell index + rep`, and fails on demand.
    struct Mock {
        calls: Vec<(usize, String)>,
        fail_at: Option<usize>,
        finished: bool,
    }

    impl Mock {
        fn new(fail_at: Option<usize>) -> Mock {
            Mock {
                calls: vec![],
                fail_at,
                finished: false,
            }
        }
    }

    impl Executor for Mock {
        fn run(&mut self, cell: &Cell, _stop: &dyn Fn() -> bool) -> Result<Sample, LabError> {
            let n = self.calls.len();
            self.calls.push((cell.index, cell.label.clone()));
            if self.fail_at == Some(n) {
                return Err(LabError::Child("mock failure".into()));
            }
            Ok(Sample {
                metrics: vec![
                    ("gbps".into(), 10.0 * cell.index as f64 + n as f64),
                    ("reads".into(), 3.0),
                ],
                extra: serde_json::json!({"n": n}),
                histograms: vec![("rtt_ns", vec![(1000, 3), (2000 + n as u64, 1)])],
                intervals: Vec::new(),
            })
        }
        fn finish(&mut self) -> Result<Vec<(String, String)>, LabError> {
            self.finished = true;
            Ok(vec![("sink_exit".into(), "0".into())])
        }
    }

    fn plan() -> Plan {
        let g = Group::new("bulk", Params::new().with("iterations", "1"))
            .axis(Axis::single("strategy", ["write", "writev", "single"]));
        Plan::build("t", "", &[g], 3, 1, Order::Interleaved, "cmd").unwrap()
    }

    fn host() -> HostFacts {
        socklab_sys::host::host_facts()
    }

    #[test]
    fn runs_interleaved_and_stores_every_sample() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut m = Mock::new(None);
        let s = run_plan(&plan(), &mut store, &host(), &mut m, &mut Silent, &|| false).unwrap();
        assert_eq!(s.done, 12);
        assert!(m.finished);
        let order: Vec<usize> = m.calls.iter().map(|c| c.0).collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
        let e = store.experiment(s.experiment).unwrap();
        assert_eq!((e.status.as_str(), e.cells, e.samples), ("done", 3, 9));
        let samples = store.samples(s.experiment).unwrap();
        assert_eq!(samples.len(), 12);
        assert_eq!(samples.iter().filter(|s| s.warmup).count(), 3);
        assert_eq!(samples[4].metrics["gbps"], 14.0);
        assert_eq!(samples[4].extra["n"], 4);
        assert_eq!(samples[4].histograms["rtt_ns"], vec![(1000, 3), (2004, 1)]);
        let facts = store.facts(s.experiment).unwrap();
        assert!(
            facts.contains(&("sink_exit".to_string(), "0".to_string())),
            "{facts:?}"
        );
        assert!(facts.iter().any(|(k, _)| k == "plan_fingerprint"));
    }

    #[test]
    fn a_failure_keeps_what_finished_and_marks_the_experiment() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut m = Mock::new(Some(5));
        let e = run_plan(&plan(), &mut store, &host(), &mut m, &mut Silent, &|| false).unwrap_err();
        assert!(e.to_string().contains("mock failure"));
        assert!(m.finished, "servers are stopped after a failure too");
        let id = store.latest_experiment().unwrap().unwrap();
        assert_eq!(store.experiment(id).unwrap().status, "failed");
        assert_eq!(store.samples(id).unwrap().len(), 5);
    }

    #[test]
    fn resume_runs_exactly_the_missing_repetitions() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut m = Mock::new(None);
        let count = StdCell::new(0);
        let stop = || {
            count.set(count.get() + 1);
            count.get() > 7
        };
        assert!(run_plan(&plan(), &mut store, &host(), &mut m, &mut Silent, &stop).is_err());
        let mut m2 = Mock::new(None);
        let (r, s) = resume_plan(&plan(), &mut store, &host(), &mut m2, &mut Silent, &|| {
            false
        })
        .unwrap();
        assert_eq!(
            r,
            Resume::Continued {
                experiment: s.experiment,
                skipped: 7
            }
        );
        assert_eq!(m2.calls.len(), 12 - 7, "only the missing runs");
        let runs = store.done_runs(s.experiment).unwrap();
        let unique: HashSet<_> = runs.iter().collect();
        assert_eq!(
            (runs.len(), unique.len()),
            (12, 12),
            "none twice, none lost"
        );
        assert_eq!(store.experiment(s.experiment).unwrap().status, "done");
        // Nothing left: a second resume runs nothing. More repetitions: runs just those.
        let mut m3 = Mock::new(None);
        resume_plan(&plan(), &mut store, &host(), &mut m3, &mut Silent, &|| {
            false
        })
        .unwrap();
        assert!(m3.calls.is_empty());
        let mut more = plan();
        more.reps = 5;
        resume_plan(&more, &mut store, &host(), &mut m3, &mut Silent, &|| false).unwrap();
        assert_eq!(m3.calls.len(), 6, "two more repetitions of three cells");
        assert_eq!(store.experiment(s.experiment).unwrap().reps, 5);
        // A plan with other cells is not resumed into this experiment.
        let other = Plan::build(
            "t",
            "",
            &[Group::new("bulk", Params::new().with("iterations", "2"))],
            1,
            0,
            Order::Interleaved,
            "",
        )
        .unwrap();
        let (r, _) =
            resume_plan(&other, &mut store, &host(), &mut m3, &mut Silent, &|| false).unwrap();
        assert_eq!(r, Resume::Fresh);
    }

    /// Fails with a run error (the repetition's own failure) on call `n`.
    struct FailsOnce(usize, usize);

    impl Executor for FailsOnce {
        fn run(&mut self, cell: &Cell, _stop: &dyn Fn() -> bool) -> Result<Sample, LabError> {
            self.1 += 1;
            if self.1 == self.0 {
                return Err(LabError::run(
                    &cell.label,
                    socklab_net::NetError::Invalid("no reply within 200ms".into()),
                ));
            }
            Ok(Sample::new(
                [("gbps", 1.0), ("failed", 0.0)],
                serde_json::json!({}),
            ))
        }
    }

    #[test]
    fn a_failed_repetition_is_stored_failed_and_the_other_cells_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut e = FailsOnce(2, 0);
        let err =
            run_plan(&plan(), &mut store, &host(), &mut e, &mut Silent, &|| false).unwrap_err();
        assert_eq!(e.1, 12, "every repetition ran");
        let LabError::Failed {
            experiment,
            failed,
            first,
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!(*failed, 1);
        assert!(
            first.contains("strategy=writev") && first.contains("no reply within 200ms"),
            "{first}"
        );
        assert!(err.to_string().contains("stored with failed = 1"), "{err}");
        let samples = store.samples(*experiment).unwrap();
        assert_eq!(samples.len(), 12);
        let bad: Vec<_> = samples
            .iter()
            .filter(|s| s.metrics.get("failed") == Some(&1.0))
            .collect();
        assert_eq!(bad.len(), 1);
        assert!(bad[0].extra["error"].as_str().unwrap().contains("no reply"));
        assert_eq!(store.experiment(*experiment).unwrap().status, "done");
    }

    /// Fails every repetition with a run error and raises `stop` during the third: a call cut
    /// short by Ctrl-C, not a measured failure.
    struct FailsWhenStopped<'a>(&'a StdCell<bool>, usize);

    impl Executor for FailsWhenStopped<'_> {
        fn run(&mut self, cell: &Cell, _stop: &dyn Fn() -> bool) -> Result<Sample, LabError> {
            self.1 += 1;
            if self.1 == 3 {
                self.0.set(true);
                return Err(LabError::run(
                    &cell.label,
                    socklab_net::NetError::io(
                        "sending",
                        std::io::Error::from(std::io::ErrorKind::Interrupted),
                    ),
                ));
            }
            Ok(Sample::new([("gbps", 1.0)], serde_json::json!({})))
        }
    }

    #[test]
    fn a_repetition_that_fails_as_it_is_stopped_is_not_stored_failed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let stopped = StdCell::new(false);
        let mut e = FailsWhenStopped(&stopped, 0);
        let err = run_plan(&plan(), &mut store, &host(), &mut e, &mut Silent, &|| {
            stopped.get()
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                LabError::Interrupted {
                    measured: 0,
                    warmups: 2,
                    ..
                }
            ),
            "{err}"
        );
        let id = store.latest_experiment().unwrap().unwrap();
        assert_eq!(store.experiment(id).unwrap().status, "interrupted");
        let samples = store.samples(id).unwrap();
        assert_eq!(samples.len(), 2);
        assert!(samples.iter().all(|s| !s.metrics.contains_key("failed")));
    }

    #[test]
    fn stop_interrupts_between_repetitions() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut m = Mock::new(None);
        let count = StdCell::new(0);
        let stop = || {
            count.set(count.get() + 1);
            count.get() > 4
        };
        let e = run_plan(&plan(), &mut store, &host(), &mut m, &mut Silent, &stop).unwrap_err();
        // Three warm-ups (one per cell, interleaved) and one measured repetition: counted apart.
        assert!(
            matches!(
                e,
                LabError::Interrupted {
                    measured: 1,
                    warmups: 3,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "interrupted: experiment {} holds 1 measured repetition (and 3 warm-ups, not in the statistics)",
                store.latest_experiment().unwrap().unwrap()
            )
        );
        let id = store.latest_experiment().unwrap().unwrap();
        assert_eq!(store.experiment(id).unwrap().status, "interrupted");
        assert_eq!(store.samples(id).unwrap().len(), 4);
    }

    /// Marks chosen repetitions invalid (`emu_valid = 0`), by cell and repetition so that a
    /// resumed run sees the same ones; records every `(cell, rep)` it is asked to run.
    struct Flaky {
        invalid: HashSet<(usize, usize)>,
        /// Cells whose every repetition is invalid.
        hopeless: HashSet<usize>,
        calls: Vec<(usize, usize, bool)>,
    }

    impl Flaky {
        fn new(invalid: &[(usize, usize)], hopeless: &[usize]) -> Flaky {
            Flaky {
                invalid: invalid.iter().copied().collect(),
                hopeless: hopeless.iter().copied().collect(),
                calls: Vec::new(),
            }
        }

        fn measured(&self) -> Vec<(usize, usize)> {
            self.calls
                .iter()
                .filter(|c| !c.2)
                .map(|c| (c.0, c.1))
                .collect()
        }
    }

    impl Executor for Flaky {
        fn run(&mut self, _cell: &Cell, _stop: &dyn Fn() -> bool) -> Result<Sample, LabError> {
            unreachable!("the Runner calls run_rep")
        }
        fn run_rep(
            &mut self,
            cell: &Cell,
            rep: usize,
            warmup: bool,
            _stop: &dyn Fn() -> bool,
        ) -> Result<Sample, LabError> {
            self.calls.push((cell.index, rep, warmup));
            let bad =
                self.hopeless.contains(&cell.index) || self.invalid.contains(&(cell.index, rep));
            Ok(Sample::new(
                [
                    ("gbps", 1.0 + rep as f64),
                    ("emu_valid", if bad { 0.0 } else { 1.0 }),
                ],
                serde_json::json!({ "seed": crate::resources::run_seed(7, cell.index, rep, warmup) }),
            ))
        }
    }

    /// Per cell: (valid, invalid, attempts, retried) as the statistics read them.
    fn counts(store: &Store, id: i64) -> Vec<(usize, usize, usize, usize)> {
        crate::summary::experiment_stats(store, id)
            .unwrap()
            .cells
            .iter()
            .map(|c| (c.n, c.invalid, c.attempts, c.retried))
            .collect()
    }

    #[test]
    fn an_invalid_repetition_is_retried_until_the_cell_has_its_n_valid_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        // Cell 1's first repetition and its first retry are invalid, and cell 0's first
        // (its warm-up too: a warm-up is not retried).
        let mut e = Flaky::new(&[(1, 0), (1, 3), (0, 0)], &[]);
        let mut obs = Retries::default();
        let s = run_plan(&plan(), &mut store, &host(), &mut e, &mut obs, &|| false).unwrap();
        assert_eq!(
            e.calls.iter().filter(|c| c.2).count(),
            3,
            "warm-ups once each"
        );
        // Round 0 (cells 0 1 2), then cells 0 and 1 again until each has one valid, in the
        // round's order, then rounds 1 and 2.
        assert_eq!(
            e.measured(),
            [
                (0, 0),
                (1, 0),
                (2, 0),
                (0, 3),
                (1, 3),
                (1, 4),
                (0, 1),
                (1, 1),
                (2, 1),
                (0, 2),
                (1, 2),
                (2, 2)
            ]
        );
        assert_eq!((s.done, s.retried), (3 + 12, 3));
        assert_eq!(obs.0, [(1, 3), (0, 3), (1, 4)].len());
        assert_eq!(
            counts(&store, s.experiment),
            [(3, 1, 4, 1), (3, 2, 5, 2), (3, 0, 3, 0)]
        );
        // Every attempt is stored, the invalid ones too, and each retry says so.
        let samples = store.samples(s.experiment).unwrap();
        assert_eq!(samples.len(), 15);
        let retries: Vec<_> = samples
            .iter()
            .filter(|x| x.extra["retry"] == true)
            .collect();
        assert_eq!(retries.len(), 3);
        assert!(retries.iter().all(|x| x.rep >= 3));
        let st = crate::summary::experiment_stats(&store, s.experiment).unwrap();
        assert_eq!(st.cells[1].n_text(false), "3 (+2 invalid, retried)");
        assert_eq!(st.cells[2].n_text(false), "3");
        let md = crate::output::markdown_report(&store, &[s.experiment], "t").unwrap();
        assert!(md.contains("| 3 (+2 invalid, retried) |"), "{md}");
        let html = crate::html::html_report(&store, &[s.experiment], "t").unwrap();
        assert!(html.contains("3 (+2 invalid, retried)"));
        let json = crate::output::to_json(&st);
        assert_eq!(json["cells"][1]["retried"], 2);
        assert_eq!(json["cells"][1]["attempts"], 5);
        assert_eq!(json["cells"][1]["retries_exhausted"], false);
        let facts = store.facts(s.experiment).unwrap();
        assert!(facts
            .iter()
            .any(|(k, v)| k == "retry_invalid" && v.starts_with("on")));
    }

    /// Counts the retries the observer was told of.
    #[derive(Default)]
    struct Retries(usize);

    impl Observer for Retries {
        fn retry(&mut self, _cell: &Cell, _rep: usize) {
            self.0 += 1;
        }
    }

    #[test]
    fn a_retry_runs_with_its_own_seed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut e = Flaky::new(&[(1, 0)], &[]);
        let s = run_plan(&plan(), &mut store, &host(), &mut e, &mut Silent, &|| false).unwrap();
        let seeds: Vec<u64> = store
            .samples(s.experiment)
            .unwrap()
            .iter()
            .map(|x| x.extra["seed"].as_u64().unwrap())
            .collect();
        let unique: HashSet<_> = seeds.iter().collect();
        assert_eq!(unique.len(), seeds.len(), "every attempt its own seed");
        assert_ne!(
            crate::resources::run_seed(7, 1, 0, false),
            crate::resources::run_seed(7, 1, 3, false)
        );
    }

    #[test]
    fn a_cell_that_stays_invalid_stops_at_2n_attempts_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut e = Flaky::new(&[], &[2]);
        let s = run_plan(&plan(), &mut store, &host(), &mut e, &mut Silent, &|| false).unwrap();
        let cell2: Vec<usize> = e
            .measured()
            .iter()
            .filter(|c| c.0 == 2)
            .map(|c| c.1)
            .collect();
        // Round 0 uses the retries the planned runs ahead leave room for; rounds 1 and 2 run.
        assert_eq!(cell2, [0, 3, 4, 5, 1, 2]);
        assert_eq!(
            counts(&store, s.experiment),
            [(3, 0, 3, 0), (3, 0, 3, 0), (0, 6, 6, 3)]
        );
        let st = crate::summary::experiment_stats(&store, s.experiment).unwrap();
        assert!(st.cells[2].retries_exhausted());
        assert_eq!(
            st.cells[2].n_text(false),
            "0 (+6 invalid, 3 retried; short of 3 after 6 attempts)"
        );
        assert_eq!(
            crate::output::to_json(&st)["cells"][2]["retries_exhausted"],
            true
        );
    }

    #[test]
    fn sequential_order_retries_within_the_cells_block() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut p = plan();
        p.order = Order::Sequential;
        let mut e = Flaky::new(&[(0, 1)], &[]);
        run_plan(&p, &mut store, &host(), &mut e, &mut Silent, &|| false).unwrap();
        assert_eq!(
            e.measured(),
            [
                (0, 0),
                (0, 1),
                (0, 2),
                (0, 3),
                (1, 0),
                (1, 1),
                (1, 2),
                (2, 0),
                (2, 1),
                (2, 2)
            ]
        );
    }

    #[test]
    fn keep_invalid_runs_each_repetition_once_and_counts_the_invalid_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("r.db")).unwrap();
        let mut p = plan();
        p.retry_invalid = false;
        let mut e = Flaky::new(&[(1, 0)], &[2]);
        let s = run_plan(&p, &mut store, &host(), &mut e, &mut Silent, &|| false).unwrap();
        assert_eq!((s.done, s.retried), (12, 0));
        assert_eq!(
            counts(&store, s.experiment),
            [(3, 0, 3, 0), (2, 1, 3, 0), (0, 3, 3, 0)]
        );
        let st = crate::summary::experiment_stats_with(&store, s.experiment, true).unwrap();
        assert_eq!(st.cells[1].n_text(true), "3 (incl. 1 invalid)");
        let facts = store.facts(s.experiment).unwrap();
        assert!(facts
            .iter()
            .any(|(k, v)| k == "retry_invalid" && v.starts_with("off")));
    }

    /// Interrupted after any number of runs and resumed, an experiment with invalid
    /// repetitions ends exactly as one that ran without a break: the same attempts in the same
    /// order, each stored once, every cell with its n valid ones.
    #[test]
    fn an_interrupted_run_resumes_its_retries_where_it_stopped() {
        let invalid = [(1, 0), (1, 3), (0, 2), (2, 1)];
        let whole = {
            let dir = tempfile::tempdir().unwrap();
            let mut store = Store::open(&dir.path().join("r.db")).unwrap();
            let mut e = Flaky::new(&invalid, &[]);
            let s = run_plan(&plan(), &mut store, &host(), &mut e, &mut Silent, &|| false).unwrap();
            assert_eq!(
                counts(&store, s.experiment),
                [(3, 1, 4, 1), (3, 2, 5, 2), (3, 1, 4, 1)]
            );
            e.calls
        };
        for k in 0..whole.len() {
            let dir = tempfile::tempdir().unwrap();
            let mut store = Store::open(&dir.path().join("r.db")).unwrap();
            let mut first = Flaky::new(&invalid, &[]);
            let seen = StdCell::new(0);
            let stop = || {
                seen.set(seen.get() + 1);
                seen.get() > k
            };
            let e =
                run_plan(&plan(), &mut store, &host(), &mut first, &mut Silent, &stop).unwrap_err();
            assert!(matches!(e, LabError::Interrupted { .. }), "{e}");
            let mut rest = Flaky::new(&invalid, &[]);
            let (r, s) = resume_plan(
                &plan(),
                &mut store,
                &host(),
                &mut rest,
                &mut Silent,
                &|| false,
            )
            .unwrap();
            assert!(matches!(r, Resume::Continued { skipped, .. } if skipped == k));
            let mut both = first.calls.clone();
            both.extend(rest.calls);
            assert_eq!(both, whole, "interrupted after {k} runs");
            assert_eq!(
                counts(&store, s.experiment),
                [(3, 1, 4, 1), (3, 2, 5, 2), (3, 1, 4, 1)],
                "interrupted after {k} runs"
            );
        }
    }
}
