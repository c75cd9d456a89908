//! The Runner: runs a [`Plan`] through an [`Executor`], committing every finished repetition
//! to the [`Store`] as it finishes, and telling an [`Observer`] how it goes.
//!
//! One code path for everything: `socklab bulk` builds a plan and hands it here, as suites do.

use std::collections::HashSet;
use std::time::Instant;

use socklab_sys::host::HostFacts;

use crate::clock::now_rfc3339;
use crate::plan::{Cell, Plan};
use crate::series::LiveSink;
use crate::store::Store;
use crate::LabError;

pub use crate::sample::Sample;

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
    /// Repetitions finished and stored (warm-ups included).
    pub done: usize,
}

/// Runs `plan`: records the experiment, runs the schedule, commits each finished repetition.
///
/// On a failed repetition the experiment is marked `failed` and the error returned; on
/// `stop()` it is marked `interrupted`. Either way every finished repetition stays stored.
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
    execute(
        plan,
        store,
        exec,
        obs,
        stop,
        experiment,
        &cell_ids,
        &HashSet::new(),
    )
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
/// the repetitions it does not hold yet (none is run twice); starts a new one if there is none.
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
    let done: HashSet<(usize, usize, bool)> = store.done_runs(experiment)?.into_iter().collect();
    let cell_ids = store.reopen_experiment(experiment, plan.reps, plan.warmup)?;
    if cell_ids.len() != plan.cells.len() {
        return Err(LabError::Plan(format!(
            "experiment {experiment} has {} cells, the plan {}: run without --resume",
            cell_ids.len(),
            plan.cells.len()
        )));
    }
    let skipped = done.len();
    let s = execute(plan, store, exec, obs, stop, experiment, &cell_ids, &done)?;
    Ok((
        Resume::Continued {
            experiment,
            skipped,
        },
        s,
    ))
}

#[allow(clippy::too_many_arguments)]
fn execute(
    plan: &Plan,
    store: &mut Store,
    exec: &mut dyn Executor,
    obs: &mut dyn Observer,
    stop: &dyn Fn() -> bool,
    experiment: i64,
    cell_ids: &[i64],
    skip: &HashSet<(usize, usize, bool)>,
) -> Result<RunSummary, LabError> {
    let schedule: Vec<(usize, usize, bool)> = plan
        .schedule()
        .into_iter()
        .filter(|r| !skip.contains(r))
        .collect();
    obs.start(plan, experiment, schedule.len());
    let mut done = 0;
    let mut failed: Vec<String> = Vec::new();
    let mut outcome: Result<(), LabError> = Ok(());
    for &(ci, rep, warmup) in &schedule {
        if stop() {
            outcome = Err(LabError::Interrupted { experiment, done });
            break;
        }
        let cell = &plan.cells[ci];
        obs.run_start(cell, rep, warmup);
        let started = now_rfc3339();
        let t0 = Instant::now();
        exec.set_live(obs.live(cell, rep, warmup));
        let result = exec.run_rep(cell, rep, warmup, stop);
        exec.set_live(None);
        let result = match result {
            // A repetition that failed while it was being stopped (a call cut short by the
            // signal) was interrupted: it is not a measured failure.
            Err(LabError::Run { .. }) if stop() => Err(LabError::Interrupted { experiment, done }),
            // A repetition's own failure is a result: stored with its reason, the rest goes on.
            Err(LabError::Run {
                cell: label,
                source,
            }) if !matches!(source, socklab_net::NetError::Interrupted) => {
                let why = format!("{label}: {source}");
                failed.push(why.clone());
                Ok(failed_sample(&why))
            }
            other => other,
        };
        match result {
            Ok(sample) => {
                let wall = t0.elapsed().as_secs_f64();
                if let Err(e) =
                    store.record_sample(cell_ids[ci], rep, warmup, &started, wall, &sample)
                {
                    outcome = Err(e);
                    break;
                }
                done += 1;
                obs.run_done(cell, rep, warmup, &sample);
            }
            Err(e) => {
                outcome = Err(match e {
                    LabError::Run {
                        source: socklab_net::NetError::Interrupted,
                        ..
                    }
                    | LabError::Interrupted { .. } => LabError::Interrupted { experiment, done },
                    other => other,
                });
                break;
            }
        }
    }
    let facts = exec.finish();
    obs.end();
    if let Ok(facts) = &facts {
        for (k, v) in facts {
            store.set_fact(experiment, k, v)?;
        }
    }
    if outcome.is_ok() && !failed.is_empty() {
        store.finish_experiment(experiment, "done")?;
        facts?;
        return Err(LabError::Failed {
            experiment,
            failed: failed.len(),
            first: failed.swap_remove(0),
        });
    }
    let status = match &outcome {
        Ok(()) => "done",
        Err(LabError::Interrupted { .. }) => "interrupted",
        Err(_) => "failed",
    };
    store.finish_experiment(experiment, status)?;
    outcome?;
    facts?;
    Ok(RunSummary { experiment, done })
}

/// The sample of a repetition that failed: `failed = 1` and the reason.
pub fn failed_sample(why: &str) -> Sample {
    Sample::new([("failed", 1.0)], serde_json::json!({ "error": why }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;
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
            matches!(err, LabError::Interrupted { done: 2, .. }),
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
        assert!(matches!(e, LabError::Interrupted { done: 4, .. }), "{e}");
        let id = store.latest_experiment().unwrap().unwrap();
        assert_eq!(store.experiment(id).unwrap().status, "interrupted");
        assert_eq!(store.samples(id).unwrap().len(), 4);
    }
}
