//! `socklab run`: an experiment file, run or resumed, its statistics and a note on noisy cells.

use std::path::PathBuf;

use super::{exe, open_store, stats_text, Printer, StatsFormat};
use crate::dryrun::{long_run_notice, plan_text};
use crate::file::ExperimentFile;
use crate::hosts::{trust, HostPlan};
use crate::live::LiveExecutor;
use crate::plan::Plan;
use crate::runner::{resume_plan, run_plan, Observer, Resume};
use crate::store::Store;
use crate::summary::experiment_stats;
use crate::LabError;

/// `socklab run`'s arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRun {
    /// The experiment file (TOML).
    pub file: PathBuf,
    /// Its `[quick]` settings.
    pub quick: bool,
    /// Measured repetitions per cell instead of the file's.
    pub reps: Option<usize>,
    /// Warm-up repetitions per cell instead of the file's.
    pub warmup: Option<usize>,
    /// Run only what the newest stored run of this file misses.
    pub resume: bool,
    /// Note the cells whose coefficient of variation exceeds this.
    pub noise_cv: f64,
    /// How to print the statistics.
    pub format: StatsFormat,
    /// The results database.
    pub db: PathBuf,
    /// Use the file's `[hosts]` ssh settings that make ssh run programs (`ssh_config`,
    /// `remote_socklab`): without it a run of a file that has them refuses
    /// ([`crate::hosts::trust`]).
    pub trust_ssh_config: bool,
}

impl FileRun {
    /// The experiment file, read and parsed.
    pub fn read(&self) -> Result<ExperimentFile, LabError> {
        let origin = self.file.display().to_string();
        let text = std::fs::read_to_string(&self.file)
            .map_err(|e| LabError::Plan(format!("cannot read experiment file '{origin}': {e}")))?;
        crate::file::parse(&text, &origin)
    }

    /// The plan of `file` (see [`FileRun::read`]), and its hosts with `cli` (the command
    /// line's) over them; checks the arguments. The file's ssh settings that run programs,
    /// untrusted, mark the hosts [`HostPlan::untrusted`]: the run refuses, a dry run says why.
    pub fn plan(
        &self,
        file: &ExperimentFile,
        cli: &HostPlan,
    ) -> Result<(Plan, HostPlan), LabError> {
        let mut hosts = file.hosts.overridden_by(cli);
        hosts.check()?;
        let origin = self.file.display().to_string();
        let (ssh, trusted) = (&file.hosts.ssh, self.trust_ssh_config);
        hosts.untrusted = trust::refusal(&origin, ssh, &cli.ssh, trusted);
        if hosts.untrusted.is_none() {
            hosts.ssh.check()?;
        }
        let mut plan = file.plan(self.quick, &super::command_line())?;
        plan.set_counts(self.reps, self.warmup)?;
        plan.retry_invalid = !self.format.keep_invalid;
        if !(self.noise_cv > 0.0 && self.noise_cv.is_finite()) {
            return Err(LabError::Plan(format!(
                "`noise_cv` {}: give a positive fraction, e.g. 0.10 for 10%",
                self.noise_cv
            )));
        }
        Ok((plan, hosts))
    }

    /// A dry run's text for `plan` on `hosts`: its cells and time, the ssh commands it would
    /// run and the files they read, and why the run would refuse them.
    pub fn dry_text(&self, plan: &Plan, hosts: &HostPlan) -> String {
        let mut s = plan_text(plan);
        s += &trust::dry_text(hosts);
        if let Some(why) = &hosts.untrusted {
            s += &format!("  the run refuses: {why}\n");
        }
        if self.resume {
            s += "  `resume`: only the repetitions missing from the newest stored run of this file run\n";
        }
        s
    }

    /// The command that continues this run (keys in backticks).
    pub fn resume_command(&self) -> String {
        format!(
            "socklab run {}{} `resume` `db` {}",
            self.file.display(),
            if self.quick { " `quick`" } else { "" },
            self.db.display()
        )
    }

    /// Runs (or resumes) `plan` on `hosts` into the database, then prints its statistics and
    /// notes the noisy cells.
    pub fn run(
        &self,
        plan: &Plan,
        hosts: HostPlan,
        observer: &mut dyn Observer,
        printer: &mut dyn Printer,
    ) -> Result<(), LabError> {
        // Before anything runs or is stored.
        if let Some(why) = &hosts.untrusted {
            return Err(LabError::Plan(why.clone()));
        }
        if !self.resume {
            if let Some(notice) = long_run_notice(plan) {
                printer.note(&notice);
            }
        }
        let mut store = open_store(&self.db)?;
        let host = socklab_sys::host::host_facts();
        let mut exec = LiveExecutor::with_hosts(exe()?, hosts);
        let stop = &socklab_sys::process::interrupted;
        let result = if self.resume {
            resume_plan(plan, &mut store, &host, &mut exec, observer, stop).map(|(r, s)| {
                printer.note(&match r {
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
                });
                s
            })
        } else {
            run_plan(plan, &mut store, &host, &mut exec, observer, stop)
        };
        let id = match result {
            Ok(s) => s.experiment,
            Err(e @ LabError::Interrupted { .. }) => {
                printer.note(&format!("continue with: {}", self.resume_command()));
                return Err(e);
            }
            Err(e @ LabError::Failed { experiment, .. }) => {
                super::print(
                    printer,
                    &stats_text(&store, experiment, self.format, false)?,
                )?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        super::print(printer, &stats_text(&store, id, self.format, false)?)?;
        if let Some(note) = self.noise_note(&store, id)? {
            printer.note(&note);
        }
        Ok(())
    }

    /// The cells of experiment `id` whose coefficient of variation exceeds `noise_cv`, with
    /// the command that adds repetitions; `None` when none does.
    pub fn noise_note(&self, store: &Store, id: i64) -> Result<Option<String>, LabError> {
        let cv = self.noise_cv;
        let st = experiment_stats(store, id)?;
        let noisy: Vec<String> = st
            .cells
            .iter()
            .filter_map(|c| {
                let v = c.metrics.get("gbps")?.cv?;
                (v > cv).then(|| format!("{} (cv {:.0}%)", c.cell.label, v * 100.0))
            })
            .collect();
        Ok((!noisy.is_empty()).then(|| {
            format!(
                "noisy: {} cell(s) vary by more than {:.0}%: {}\n  more repetitions narrow their intervals: {} `reps` {}",
                noisy.len(),
                cv * 100.0,
                noisy.join("; "),
                self.resume_command(),
                st.experiment.reps * 2
            )
        }))
    }
}
