//! `socklab run`: an experiment file, run or resumed, its statistics and a note on noisy cells.

use std::io::Read;
use std::path::PathBuf;

use super::{open_store, run_or_resume, stats_text, Printer, StatsFormat};
use crate::dryrun::plan_text;
use crate::file::ExperimentFile;
use crate::hosts::{trust, HostPlan};
use crate::plan::Plan;
use crate::runner::Observer;
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

/// The largest experiment file read.
const MAX_FILE_BYTES: u64 = 16 << 20;

impl FileRun {
    /// The experiment file, read and parsed.
    pub fn read(&self) -> Result<ExperimentFile, LabError> {
        let origin = self.file.display().to_string();
        let bad = |why: String| LabError::Plan(format!("experiment file '{origin}': {why}"));
        // At most 16 MiB (`/dev/zero` ends too), and text: nothing of another file is quoted.
        let mut bytes = Vec::new();
        std::fs::File::open(&self.file)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| LabError::Plan(format!("cannot read experiment file '{origin}': {e}")))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(bad(
                "larger than 16 MiB: an experiment file is a TOML text".into()
            ));
        }
        let text = socklab_units::text::as_text(&bytes)
            .ok_or_else(|| bad("not a text file: give an experiment file (TOML)".into()))?;
        crate::file::parse(text, &origin)
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
        if let Some(c) = &self.format.columns {
            c.check(&crate::columns::known_for_plan(plan))?;
        }
        super::reach_targets(plan, &hosts)?;
        let mut store = open_store(&self.db)?;
        if self.format.stream {
            return self.run_streamed(plan, &hosts, &mut store, observer, printer);
        }
        let id = match run_or_resume(
            plan,
            &mut store,
            &hosts,
            None,
            self.resume,
            observer,
            printer,
        ) {
            Ok(id) => id,
            Err((_, e @ LabError::Interrupted { .. })) => {
                printer.note(&format!("continue with: {}", super::resume_command()));
                return Err(e);
            }
            Err((_, e @ LabError::Failed { experiment, .. })) => {
                super::print(
                    printer,
                    &stats_text(&store, experiment, self.format.clone(), false)?,
                )?;
                return Err(e);
            }
            Err((_, e)) => return Err(e),
        };
        super::print(
            printer,
            &stats_text(&store, id, self.format.clone(), false)?,
        )?;
        if let Some(note) = self.noise_note(&store, id)? {
            printer.note(&note);
        }
        Ok(())
    }

    /// [`FileRun::run`] with its events on stdout (`json_stream`), the notes on stderr.
    fn run_streamed(
        &self,
        plan: &Plan,
        hosts: &HostPlan,
        store: &mut Store,
        observer: &mut dyn Observer,
        printer: &mut dyn Printer,
    ) -> Result<(), LabError> {
        let out = super::EventWriter::stdout();
        let keep = self.format.keep_invalid;
        let id = super::stream::streamed(&out, keep, store, observer, printer, |s, o, p| {
            run_or_resume(plan, s, hosts, None, self.resume, o, p)
        })
        .map_err(|(_, e)| e)
        .inspect_err(|e| {
            if matches!(e, LabError::Interrupted { .. }) {
                printer.note(&format!("continue with: {}", super::resume_command()));
            }
        })?;
        if let Some(note) = self.noise_note(store, id)? {
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
