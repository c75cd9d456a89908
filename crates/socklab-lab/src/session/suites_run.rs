//! `socklab lab`: the built-in suites, run one after the other, each experiment's table
//! printed as it ends, then one report of them all.

use std::path::PathBuf;

use super::{open_store, print, run_or_resume, Printer};
use crate::dryrun::{estimate, plan_text};
use crate::hosts::HostPlan;
use crate::output;
use crate::plan::Plan;
use crate::report::write_report;
use crate::runner::Observer;
use crate::store::Store;
use crate::suites::{self, Suite};
use crate::summary::{experiment_stats, experiment_stats_with};
use crate::table::Table;
use crate::LabError;

/// The suites, whether each can run here, and what each reproduces: a table.
pub fn suites_text() -> String {
    let mut t = Table::new(&["suite", "status", "reproduces"]);
    t.left = vec![true, true, true];
    for s in suites::SUITES {
        let status = match s.unavailable_reason() {
            None => "available".to_string(),
            Some(why) => format!("unavailable: {why}"),
        };
        t.row(vec![s.name.to_string(), status, s.reproduces.to_string()]);
    }
    t.to_text()
}

/// `socklab lab`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabRun {
    /// Short runs.
    pub quick: bool,
    /// The suites to run (none: every available one).
    pub suites: Vec<String>,
    /// The report's directory.
    pub out: PathBuf,
    /// The report's title (the command, as people type it).
    pub title: String,
    /// Keep invalid repetitions (run each once).
    pub keep_invalid: bool,
    /// Continue each suite's newest stored experiment: only the repetitions it misses run.
    pub resume: bool,
    /// The results database.
    pub db: PathBuf,
    /// Live JSON events of every experiment on stdout (`json_stream`); the tables and notes
    /// on stderr.
    pub stream: bool,
}

impl LabRun {
    /// The suites chosen: those named, else every one available here.
    pub fn suites(&self) -> Result<Vec<&'static Suite>, LabError> {
        if self.suites.is_empty() {
            return Ok(suites::SUITES.iter().filter(|s| s.available()).collect());
        }
        self.suites.iter().map(|n| suites::suite(n)).collect()
    }

    /// The plans of the suites `chosen`.
    pub fn plans(&self, chosen: &[&Suite]) -> Result<Vec<Plan>, LabError> {
        let mut plans = Vec::new();
        for s in chosen {
            plans.extend(s.plans(self.quick)?);
        }
        for p in &mut plans {
            p.retry_invalid = !self.keep_invalid;
        }
        Ok(plans)
    }

    /// A dry run's text: every plan, then the runs in all.
    pub fn dry_text(&self, plans: &[Plan]) -> String {
        let mut s: String = plans.iter().map(plan_text).collect();
        if self.resume {
            s += "  `resume`: only the repetitions missing from each suite's newest stored experiment run\n";
        }
        let total: usize = plans.iter().map(|p| estimate(p).runs).sum();
        s += &format!(
            "dry run: {} experiment{}, {total} runs in all; then a report in '{}'\n",
            plans.len(),
            if plans.len() == 1 { "" } else { "s" },
            self.out.display()
        );
        s
    }

    /// Runs (or with `resume` continues) `plans` into the database, printing each
    /// experiment's table as it ends (an experiment whose repetitions partly failed too, and
    /// the next runs), then writes the report of those that ran and says where. Interrupted,
    /// it says so (never "finished"), with what the store holds of the experiments so far
    /// (as `socklab results list` counts them) and the command that continues.
    pub fn run(
        &self,
        plans: &[Plan],
        hosts: &HostPlan,
        observer: &mut dyn Observer,
        printer: &mut dyn Printer,
    ) -> Result<(), LabError> {
        for plan in plans {
            super::reach_targets(plan, hosts)?;
        }
        let store = &mut open_store(&self.db)?;
        let t0 = std::time::Instant::now();
        let mut ids = Vec::new();
        let mut failure = None;
        let stream = self.stream.then(super::EventWriter::stdout);
        // With `json_stream` stdout holds the events alone: the text goes to stderr.
        let print = |p: &mut dyn Printer, text: &str| match stream {
            Some(_) => {
                p.err(text);
                Ok(())
            }
            None => print(p, text),
        };
        for plan in plans {
            // Suites store their time series; the live lines are for one-off commands.
            let go = |s: &mut Store, o: &mut dyn Observer, p: &mut dyn Printer| {
                run_or_resume(plan, s, hosts, None, self.resume, o, p)
            };
            let keep = self.keep_invalid;
            let ran = match &stream {
                Some(w) => super::stream::streamed(w, keep, store, observer, printer, go),
                None => go(store, observer, printer),
            };
            match ran {
                Ok(id) => {
                    ids.push(id);
                    let st = experiment_stats_with(store, id, self.keep_invalid)?;
                    print(printer, &format!("{}\n", output::human(&st)))?;
                }
                // The experiment ran to its end: report it and go on with the next.
                Err((Some(id), e @ LabError::Failed { .. })) => {
                    ids.push(id);
                    let st = experiment_stats(store, id)?;
                    print(printer, &format!("{}\n", output::human(&st)))?;
                    failure = Some(e);
                }
                Err((id, e)) => {
                    ids.extend(id);
                    failure = Some(e);
                    break;
                }
            }
        }
        if ids.is_empty() {
            return failure.map_or(Ok(()), Err);
        }
        let files = write_report(store, &ids, &self.title, &self.out, self.keep_invalid)?;
        let report = format!(
            "{} (also {} and {})",
            files.html.display(),
            files.markdown.display(),
            files.csv.display()
        );
        let secs = t0.elapsed().as_secs_f64();
        if matches!(failure, Some(LabError::Interrupted { .. })) {
            printer.note(&interrupted_text(store, &ids, secs, &report)?);
            printer.note(&format!("continue with: {}", super::resume_command()));
        } else {
            print(
                printer,
                &format!(
                    "lab {} in {secs:.0} s; results in {}; report: {report}\n",
                    if failure.is_some() {
                        "ended"
                    } else {
                        "finished"
                    },
                    store.path().display(),
                ),
            )?;
        }
        failure.map_or(Ok(()), Err)
    }
}

/// What an interrupted lab leaves: the measured repetitions (and warm-ups) the store holds of
/// its experiments `ids`, counted as `socklab results list` counts them, and its report.
fn interrupted_text(
    store: &Store,
    ids: &[i64],
    secs: f64,
    report: &str,
) -> Result<String, LabError> {
    let (mut measured, mut warmups) = (0, 0);
    for &id in ids {
        let runs = store.done_runs(id)?;
        let w = runs.iter().filter(|r| r.2).count();
        warmups += w;
        measured += runs.len() - w;
    }
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    Ok(format!(
        "lab interrupted after {secs:.0} s: {measured} measured repetitions stored in experiment{} {} of {}{}; report of them: {report}",
        if ids.len() == 1 { "" } else { "s" },
        list.join(", "),
        store.path().display(),
        if warmups > 0 {
            format!(
                " (and {warmups} warm-up{}, not in the statistics)",
                if warmups == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        },
    ))
}
