//! The commands over experiment files, suites and the store: `run`, `lab`, `report`, `results`.
//! The lab's [`session`] does the work; here its arguments are gathered and its text printed.

use socklab_lab::compare::CompareRun;
use socklab_lab::session::{self, FileRun, LabRun, Query, ReportRun};

use crate::cli::{CompareArgs, LabArgs, ReportArgs, ResultsCommand, RunArgs};
use crate::dryrun;
use crate::failure::{out, words, Failure, Terminal};
use crate::progress::Progress;

pub fn results(r: ResultsCommand, dry: bool) -> Result<(), Failure> {
    use ResultsCommand::*;
    let export = session::export_format;
    let (db, id, query) = match r {
        List { db } => (db, None, Query::List),
        Show { id, format, db } => (db, id, Query::Show(format.lab())),
        Series {
            id,
            format,
            csv,
            json,
            db,
        } => (db, id, Query::Series(export(&format, csv, json))),
        Export(a) => {
            let q = session::export_query(&a.format, a.csv, a.json, a.prometheus, a.all);
            (a.db, a.id, q)
        }
    };
    if dry {
        return dryrun::print_checked(&query.dry_text(&db.db));
    }
    let store = session::open_existing(&db.db)?;
    match query.text(&store, id)? {
        Some(text) => out(&text),
        None => Err(Failure::Run(format!(
            "'{}' holds no experiments yet: run `socklab bulk` or `socklab lab --quick` first",
            store.path().display()
        ))),
    }
}

pub fn run(a: RunArgs, dry: bool) -> Result<(), Failure> {
    let run = FileRun {
        file: a.file,
        quick: a.quick,
        reps: a.reps,
        warmup: a.warmup,
        resume: a.resume,
        noise_cv: a.noise_cv,
        format: a.format.lab(),
        db: a.db.db,
        trust_ssh_config: a.trust_ssh_config,
    };
    let (plan, hosts) = run.plan(&run.read()?, &a.hosts.plan()?)?;
    if dry {
        return out(&words(&run.dry_text(&plan, &hosts)));
    }
    Ok(run.run(&plan, hosts, &mut Progress::new(), &mut Terminal)?)
}

pub fn report(a: ReportArgs, dry: bool) -> Result<(), Failure> {
    let report = ReportRun {
        experiments: a.experiment,
        title: a.title,
        out: a.out,
        keep_invalid: a.keep_invalid,
        compare: a.compare,
        compare_ignore: a.compare_ignore,
    };
    if dry {
        return dryrun::print_checked(&report.dry_text(&a.db.db));
    }
    out(&report.write(&a.db.db)?)
}

/// `socklab compare`: the comparison, then exit 1 when its gate failed.
pub fn compare(a: CompareArgs, dry: bool) -> Result<(), Failure> {
    let run = CompareRun::new([a.a, a.b], a.ignore, a.metric, a.threshold);
    if dry {
        return dryrun::print_checked(&run.dry_text(&a.db.db));
    }
    let (text, failed) = run.output(&a.db.db, a.json)?;
    out(&if a.json { text } else { words(&text) })?;
    (!failed).then_some(()).ok_or(Failure::Exit(1))
}

pub fn lab(a: LabArgs, dry: bool) -> Result<(), Failure> {
    if a.list {
        return out(&session::suites_text());
    }
    let lab = LabRun {
        quick: a.quick,
        suites: a.suite,
        out: a.out,
        title: socklab_lab::roles::argv::shown::lab(a.quick),
        keep_invalid: a.keep_invalid,
        resume: a.resume,
        db: a.db.db,
        stream: a.json_stream,
    };
    let chosen = lab.suites()?;
    let hosts = a.hosts.plan()?;
    let plans = lab.plans(&chosen)?;
    if dry {
        return out(&words(&lab.dry_text(&plans)));
    }
    Ok(lab.run(&plans, &hosts, &mut Progress::new(), &mut Terminal)?)
}
