//! A command's session: runs a plan with the binary's observer and hands back what to print.
//! The binary parses flags and writes text; everything between (the plan from the flags, the
//! run, the statistics as text, the notes) is here. Text for people that names a key does so in
//! backticks (`` `timeout` ``): the binary spells it as its flag ([`Printer::note`]).

mod checks;
mod file_run;
mod live;
mod plans;
mod results;
mod stream;
mod suites_run;
mod tally;

pub use checks::{reach_targets, tcp_targets};
pub use file_run::FileRun;
pub use live::{LiveBuffer, LiveLines, LiveWrite, FLUSH_EVERY};
pub use plans::{bulk_group, bulk_plan, check_local_cpus, order_seed};
pub use results::{export_format, export_query, open_existing, Query, ReportRun};
pub use stream::{run_and_stream, EventWriter, Streamed};
pub use suites_run::{suites_text, LabRun};
pub use tally::{describe_sample, Tally};

/// The capture of an emulated link's packets that a measuring command may ask for.
pub use socklab_link::capture::CaptureConfig;

use std::path::{Path, PathBuf};

use socklab_sys::process::{install_interrupt_flag, interrupted};

pub use crate::columns::Columns;
use crate::dryrun::{keeping_invalid, long_run_notice};
use crate::hosts::HostPlan;
use crate::live::LiveExecutor;
use crate::output;
use crate::plan::Plan;
use crate::runner::{resume_plan, run_plan, Observer, Resume, RunSummary};
use crate::store::Store;
use crate::summary::experiment_stats_with;
use crate::LabError;

/// Where a session's text goes: the binary writes it.
pub trait Printer {
    /// Writes `text` to stdout as it is (tables, JSON, CSV).
    fn out(&mut self, text: &str) -> std::io::Result<()>;
    /// Writes `text` to stderr as it is.
    fn err(&mut self, text: &str);
    /// Writes a line for people to stderr; the keys it names in backticks are the binary's to
    /// spell as flags.
    fn note(&mut self, line: &str);
}

/// The context of a [`LabError::Io`] that the binary reports as the I/O error itself:
/// writing to stdout (a closed pipe included), installing the signal handler.
pub const IO_AS_IS: &str = "i/o";

/// Writes `text` through `p` to stdout.
pub(crate) fn print(p: &mut dyn Printer, text: &str) -> Result<(), LabError> {
    p.out(text).map_err(|source| LabError::Io {
        context: IO_AS_IS.into(),
        source,
    })
}

/// How a command prints an experiment's statistics: JSON, CSV or (neither) the human table
/// with `columns` (default: the workloads' own); `keep_invalid` keeps the repetitions marked
/// invalid in them (and re-runs none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsFormat {
    /// JSON on stdout.
    pub json: bool,
    /// CSV on stdout.
    pub csv: bool,
    /// Keep invalid repetitions.
    pub keep_invalid: bool,
    /// Live JSON events on stdout in place of the statistics (`json_stream`).
    pub stream: bool,
    /// The human table's columns (metric names).
    pub columns: Option<Columns>,
}

impl StatsFormat {
    /// A format from a command's flags.
    pub fn new(json: bool, csv: bool, keep_invalid: bool, columns: Option<Columns>) -> Self {
        StatsFormat {
            json,
            csv,
            keep_invalid,
            stream: false,
            columns,
        }
    }

    /// This format, with live JSON events in place of the statistics when `stream`.
    pub fn streaming(self, stream: bool) -> Self {
        StatsFormat { stream, ..self }
    }
}

/// This process's command line as one string (arguments with white space quoted): what an
/// experiment stores as its command.
pub fn command_line() -> String {
    quoted(std::env::args())
}

fn quoted(args: impl Iterator<Item = String>) -> String {
    args.map(|a| {
        if a.contains(char::is_whitespace) {
            format!("'{a}'")
        } else {
            a
        }
    })
    .collect::<Vec<_>>()
    .join(" ")
}

/// The socklab binary, to start the server roles with.
pub fn exe() -> Result<PathBuf, LabError> {
    std::env::current_exe().map_err(|e| {
        LabError::Child(format!(
            "cannot find the socklab binary to start the sink: {e}"
        ))
    })
}

/// Opens (or creates) the results database at `db` for a run, and from then on catches
/// Ctrl-C and SIGTERM (a run stops and keeps its finished repetitions).
pub fn open_store(db: &Path) -> Result<Store, LabError> {
    let store = Store::open(db)?;
    install_interrupt_flag().map_err(|source| LabError::Io {
        context: IO_AS_IS.into(),
        source,
    })?;
    Ok(store)
}

/// Whether a plan samples a time series (then JSON output is JSON lines: the intervals, and
/// the statistics as the last line).
pub fn has_series(plan: &Plan) -> bool {
    plan.cells
        .iter()
        .any(|c| c.workload.params().get("interval").is_some())
}

/// An experiment's statistics as JSON (on one line when `one_line`: the last of a stream of
/// JSON lines), CSV or the human table.
pub fn stats_text(
    store: &Store,
    id: i64,
    format: StatsFormat,
    one_line: bool,
) -> Result<String, LabError> {
    let st = experiment_stats_with(store, id, format.keep_invalid)?;
    Ok(if format.json {
        let json = output::to_json(&st);
        let text = if one_line {
            serde_json::to_string(&json)
        } else {
            serde_json::to_string_pretty(&json)
        };
        format!("{}\n", text.unwrap_or_default())
    } else if format.csv {
        output::summary_csv(&st)
    } else if let Some(c) = &format.columns {
        c.check(&crate::columns::known_for_stats(&st))?;
        output::human_with(&st, Some(c))
    } else {
        output::human(&st)
    })
}

/// Runs `plan` on this host (and `hosts`), its repetitions stored as they finish, `observer`
/// told how it goes, a long plan's notice first (and a measuring command's note of a plan
/// much longer than its duration, [`crate::plan_notice`]); returns the experiment id, or the
/// error and the experiment it left (whose finished repetitions are stored).
pub fn run(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    capture: Option<&CaptureConfig>,
    observer: &mut dyn Observer,
    printer: &mut dyn Printer,
) -> Result<i64, (Option<i64>, LabError)> {
    if let Some(line) = crate::plan_notice::notice(plan) {
        printer.note(&line);
    }
    run_or_resume(plan, store, hosts, capture, false, observer, printer)
}

/// [`run`], or with `resume` the newest stored experiment of `plan` continued (only the
/// repetitions it misses run, and a note says so). Its caller has reached the servers the
/// plan names ([`reach_targets`]) before it opened the store.
pub(crate) fn run_or_resume(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    capture: Option<&CaptureConfig>,
    resume: bool,
    observer: &mut dyn Observer,
    printer: &mut dyn Printer,
) -> Result<i64, (Option<i64>, LabError)> {
    let host = socklab_sys::host::host_facts();
    let mut exec = LiveExecutor::with_hosts(exe().map_err(|e| (None, e))?, hosts.clone());
    if let Some(c) = capture {
        exec.set_capture(c.clone());
    }
    let result = if resume {
        resume_plan(plan, store, &host, &mut exec, observer, &interrupted).map(|(r, s)| {
            printer.note(&resume_note(plan, r, s));
            s
        })
    } else {
        if let Some(notice) = long_run_notice(plan) {
            printer.note(&notice);
        }
        run_plan(plan, store, &host, &mut exec, observer, &interrupted)
    };
    match result {
        Ok(s) => Ok(s.experiment),
        Err(e) => {
            let id = match &e {
                LabError::Interrupted { experiment, .. } | LabError::Failed { experiment, .. } => {
                    Some(*experiment)
                }
                _ => store.latest_experiment().ok().flatten(),
            };
            Err((id, e))
        }
    }
}

/// What a resumed run of `plan` did: continued an experiment (how many runs it held, how
/// many ran now), or started one.
pub(crate) fn resume_note(plan: &Plan, r: Resume, s: RunSummary) -> String {
    match r {
        Resume::Continued {
            experiment,
            skipped,
        } => format!(
            "resumed experiment {experiment}: {skipped} runs already stored, {} run now",
            s.done
        ),
        Resume::Fresh => format!(
            "nothing to resume for '{}' with these cells: started experiment {}",
            plan.name, s.experiment
        ),
    }
}

/// The command that continues this process's interrupted run: its own command line, with
/// `resume` added unless it is there (every other argument as given, quoted for a shell).
pub fn resume_command() -> String {
    let words = crate::roles::argv::shown::resumed(std::env::args());
    let quoted: Vec<String> = words
        .iter()
        .map(|w| crate::hosts::transport::shell_quote(w))
        .collect();
    quoted.join(" ")
}

/// Runs a one-off command's plan ([`run`]) and prints its statistics as `format` says, then
/// (for people) where they are stored. An interrupted run prints what it finished on stderr;
/// a run whose repetitions partly failed prints its statistics; both then return the error.
/// With `format.stream` the run's events go to stdout instead ([`run_and_stream`]).
pub fn run_and_report(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    capture: Option<&CaptureConfig>,
    format: StatsFormat,
    observer: &mut dyn Observer,
    printer: &mut dyn Printer,
) -> Result<i64, LabError> {
    if format.stream {
        let keep = format.keep_invalid;
        return run_and_stream(plan, store, hosts, capture, keep, observer, printer);
    }
    let lines = has_series(plan);
    if let Some(c) = &format.columns {
        c.check(&crate::columns::known_for_plan(plan))?; // before it runs
    }
    let plan = &keeping_invalid(plan.clone(), format.keep_invalid); // none re-run
    match run(plan, store, hosts, capture, observer, printer) {
        Ok(id) => {
            print(printer, &stats_text(store, id, format.clone(), lines)?)?;
            if !format.json && !format.csv {
                let path = store.path().display();
                print(printer, &format!("stored as experiment {id} in {path}\n"))?;
            }
            Ok(id)
        }
        Err((Some(id), e @ LabError::Interrupted { .. })) => {
            let st = experiment_stats_with(store, id, format.keep_invalid)?;
            printer.err(&output::human(&st));
            Err(e)
        }
        // Every repetition ran; the failed ones are in the table (failed = 1).
        Err((Some(id), e @ LabError::Failed { .. })) => {
            print(printer, &stats_text(store, id, format.clone(), lines)?)?;
            Err(e)
        }
        Err((_, e)) => Err(e),
    }
}

#[cfg(test)]
pub(crate) mod tests;
