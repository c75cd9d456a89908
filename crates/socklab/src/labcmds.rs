//! The commands over experiment files, suites and the store: `run`, `lab`, `report`, `results`.

use socklab_lab::live::LiveExecutor;
use socklab_lab::output;
use socklab_lab::report::write_report;
use socklab_lab::runner::{resume_plan, run_plan, Resume};
use socklab_lab::store::Store;
use socklab_lab::summary::{experiment_stats, experiment_stats_with};
use socklab_lab::table::Table;
use socklab_lab::{series_export, suites, LabError};
use socklab_sys::process::{install_interrupt_flag, interrupted};

use crate::cli::{LabArgs, ReportArgs, ResultsCommand, RunArgs};
use crate::dryrun;
use crate::progress::{LiveLines, Progress};

use crate::commands::{command_line, exe, out, print_stats, run_one, usage, Failure};

fn resolve_id(store: &Store, id: Option<i64>) -> Result<i64, Failure> {
    match id {
        Some(i) => Ok(i),
        None => store.latest_experiment()?.ok_or_else(|| {
            Failure::Run(format!(
                "'{}' holds no experiments yet: run `socklab bulk` or `socklab lab --quick` first",
                store.path().display()
            ))
        }),
    }
}

/// `--format F`, or its shorthands `--csv` / `--json`.
fn export_format(format: &str, csv: bool, json: bool) -> String {
    if csv {
        "csv".to_string()
    } else if json {
        "json".to_string()
    } else {
        format.to_string()
    }
}

fn open_existing(db: &std::path::Path) -> Result<Store, Failure> {
    if !db.exists() {
        return Err(Failure::Run(format!("results database '{}' does not exist: run an experiment first, or name the file with --db PATH", db.display())));
    }
    Ok(Store::open_read_only(db)?)
}

pub fn results(r: ResultsCommand, dry: bool) -> Result<(), Failure> {
    if dry {
        let (what, db) = match &r {
            ResultsCommand::List { db } => ("list the experiments", db),
            ResultsCommand::Show { db, .. } => ("show an experiment's statistics", db),
            ResultsCommand::Export { db, .. } => ("export an experiment's repetitions", db),
            ResultsCommand::Series { db, .. } => ("export an experiment's time series", db),
        };
        return dryrun::print_checked(&format!(
            "socklab results would {what} from '{}'",
            db.db.display()
        ));
    }
    match r {
        ResultsCommand::List { db } => {
            let store = open_existing(&db.db)?;
            let mut t = Table::new(&[
                "id", "created", "name", "status", "cells", "samples", "command",
            ]);
            t.left = vec![false, true, true, true, false, false, true];
            for e in store.experiments()? {
                t.row(vec![
                    e.id.to_string(),
                    e.created_at,
                    e.name,
                    e.status,
                    e.cells.to_string(),
                    e.samples.to_string(),
                    e.command,
                ]);
            }
            out(&t.to_text())
        }
        ResultsCommand::Show { id, format, db } => {
            let store = open_existing(&db.db)?;
            let id = resolve_id(&store, id)?;
            print_stats(&store, id, &format, false)
        }
        ResultsCommand::Series {
            id,
            format,
            csv,
            json,
            db,
        } => {
            let store = open_existing(&db.db)?;
            let id = resolve_id(&store, id)?;
            match export_format(&format, csv, json).as_str() {
                "csv" => out(&series_export::series_csv(&store, id)?),
                "json" => out(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&series_export::series_json(&store, id)?)
                        .unwrap_or_default()
                )),
                other => Err(usage(format!("--format '{other}': choose csv or json"))),
            }
        }
        ResultsCommand::Export {
            id,
            format,
            csv,
            json,
            db,
        } => {
            let store = open_existing(&db.db)?;
            let id = resolve_id(&store, id)?;
            match export_format(&format, csv, json).as_str() {
                "csv" => out(&output::samples_csv(&store, &[id])?),
                "json" => out(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&output::samples_json(&store, id)?)
                        .unwrap_or_default()
                )),
                other => Err(usage(format!("--format '{other}': choose csv or json"))),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------- echo

/// Prints the cells whose coefficient of variation exceeds `cv`, with the command that adds
/// repetitions.
fn noise_check(store: &Store, id: i64, cv: f64, resume_cmd: &str) -> Result<(), Failure> {
    let st = experiment_stats(store, id)?;
    let noisy: Vec<String> = st
        .cells
        .iter()
        .filter_map(|c| {
            let v = c.metrics.get("gbps")?.cv?;
            (v > cv).then(|| format!("{} (cv {:.0}%)", c.cell.label, v * 100.0))
        })
        .collect();
    if !noisy.is_empty() {
        eprintln!(
            "noisy: {} cell(s) vary by more than {:.0}%: {}\n  more repetitions narrow their intervals: {resume_cmd} --reps {}",
            noisy.len(),
            cv * 100.0,
            noisy.join("; "),
            st.experiment.reps * 2
        );
    }
    Ok(())
}

pub fn run(a: RunArgs, dry: bool) -> Result<(), Failure> {
    let origin = a.file.display().to_string();
    let text = std::fs::read_to_string(&a.file)
        .map_err(|e| usage(format!("cannot read experiment file '{origin}': {e}")))?;
    let file = socklab_lab::file::parse(&text, &origin)?;
    let hosts = file.hosts.overridden_by(&a.hosts.plan()?);
    hosts.check()?;
    let mut plan = file.plan(a.quick, &command_line())?;
    plan.set_counts(a.reps, a.warmup)?;
    plan.retry_invalid = !a.format.keep_invalid;
    if !(a.noise_cv > 0.0 && a.noise_cv.is_finite()) {
        return Err(usage(format!(
            "--noise-cv {}: give a positive fraction, e.g. 0.10 for 10%",
            a.noise_cv
        )));
    }
    if dry {
        dryrun::print_plan(&plan)?;
        if a.resume {
            out("  --resume: only the repetitions missing from the newest stored run of this file run\n")?;
        }
        return Ok(());
    }
    if !a.resume {
        if let Some(notice) = dryrun::long_run_notice(&plan) {
            eprintln!("{notice}");
        }
    }
    let mut store = Store::open(&a.db.db)?;
    install_interrupt_flag()?;
    let host = socklab_sys::host::host_facts();
    let mut exec = LiveExecutor::with_hosts(exe()?, hosts);
    let mut progress = Progress::new();
    let result = if a.resume {
        resume_plan(
            &plan,
            &mut store,
            &host,
            &mut exec,
            &mut progress,
            &interrupted,
        )
        .map(|(r, s)| {
            match r {
                Resume::Continued {
                    experiment,
                    skipped,
                } => eprintln!(
                    "resumed experiment {experiment}: {skipped} runs already stored, {} run now",
                    s.done
                ),
                Resume::Fresh => eprintln!(
                    "nothing to resume for '{}' with these cells: started experiment {}",
                    plan.name, s.experiment
                ),
            }
            s
        })
    } else {
        run_plan(
            &plan,
            &mut store,
            &host,
            &mut exec,
            &mut progress,
            &interrupted,
        )
    };
    let resume_cmd = format!(
        "socklab run {origin}{} --resume --db {}",
        if a.quick { " --quick" } else { "" },
        a.db.db.display()
    );
    let id = match result {
        Ok(s) => s.experiment,
        Err(e @ LabError::Interrupted { .. }) => {
            eprintln!("continue with: {resume_cmd}");
            return Err(e.into());
        }
        Err(e @ LabError::Failed { experiment, .. }) => {
            print_stats(&store, experiment, &a.format, false)?;
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    print_stats(&store, id, &a.format, false)?;
    noise_check(&store, id, a.noise_cv, &resume_cmd)
}

// -------------------------------------------------------------------------------------- report

pub fn report(a: ReportArgs, dry: bool) -> Result<(), Failure> {
    if dry {
        return dryrun::print_checked(&format!(
            "socklab report would read {} from '{}' and write index.html, report.md and results.csv into '{}'",
            if a.experiment.is_empty() {
                "every experiment".to_string()
            } else {
                format!("experiments {:?}", a.experiment)
            },
            a.db.db.display(),
            a.out.display()
        ));
    }
    let store = open_existing(&a.db.db)?;
    let ids = if a.experiment.is_empty() {
        store.experiments()?.into_iter().map(|e| e.id).collect()
    } else {
        for &id in &a.experiment {
            store.experiment(id)?;
        }
        a.experiment.clone()
    };
    let files = write_report(&store, &ids, &a.title, &a.out, a.keep_invalid)?;
    out(&format!(
        "report: {} (also {} and {})\n",
        files.html.display(),
        files.markdown.display(),
        files.csv.display()
    ))
}

// ----------------------------------------------------------------------------------------- lab

pub fn lab(a: LabArgs, dry: bool) -> Result<(), Failure> {
    if a.list {
        let mut t = Table::new(&["suite", "status", "reproduces"]);
        t.left = vec![true, true, true];
        for s in suites::SUITES {
            let status = match s.unavailable_reason() {
                None => "available".to_string(),
                Some(why) => format!("unavailable: {why}"),
            };
            t.row(vec![s.name.to_string(), status, s.reproduces.to_string()]);
        }
        return out(&t.to_text());
    }
    let chosen: Vec<&suites::Suite> = if a.suite.is_empty() {
        suites::SUITES.iter().filter(|s| s.available()).collect()
    } else {
        a.suite
            .iter()
            .map(|n| suites::suite(n))
            .collect::<Result<_, _>>()?
    };
    let hosts = a.hosts.plan()?;
    let mut plans = Vec::new();
    for s in &chosen {
        plans.extend(s.plans(a.quick)?);
    }
    plans
        .iter_mut()
        .for_each(|p| p.retry_invalid = !a.keep_invalid);
    if dry {
        for plan in &plans {
            dryrun::print_plan(plan)?;
        }
        let total: usize = plans.iter().map(|p| dryrun::estimate(p).runs).sum();
        return out(&format!(
            "dry run: {} experiment{}, {total} runs in all; then a report in '{}'\n",
            plans.len(),
            if plans.len() == 1 { "" } else { "s" },
            a.out.display()
        ));
    }
    let mut store = Store::open(&a.db.db)?;
    install_interrupt_flag()?;
    let t0 = std::time::Instant::now();
    let mut ids = Vec::new();
    let mut failure = None;
    for plan in &plans {
        // Suites store their time series; the lines are for one-off commands.
        match run_one(plan, &mut store, &hosts, LiveLines::Off, None) {
            Ok(id) => {
                ids.push(id);
                out(&output::human(&experiment_stats_with(
                    &store,
                    id,
                    a.keep_invalid,
                )?))?;
                out("\n")?;
            }
            // The experiment ran to its end: report it and go on with the next.
            Err((Some(id), f @ Failure::Partial(_))) => {
                ids.push(id);
                out(&output::human(&experiment_stats(&store, id)?))?;
                out("\n")?;
                failure = Some(f);
            }
            Err((id, f)) => {
                ids.extend(id);
                failure = Some(f);
                break;
            }
        }
    }
    if !ids.is_empty() {
        let title = if a.quick {
            "socklab lab --quick"
        } else {
            "socklab lab"
        };
        let files = write_report(&store, &ids, title, &a.out, a.keep_invalid)?;
        out(&format!(
            "lab finished in {:.0} s; results in {}; report: {} (also {} and {})\n",
            t0.elapsed().as_secs_f64(),
            store.path().display(),
            files.html.display(),
            files.markdown.display(),
            files.csv.display()
        ))?;
    }
    match failure {
        Some(f) => Err(f),
        None => Ok(()),
    }
}
