//! The measuring and server subcommands: checked arguments go to the lab, its text comes
//! back to print; [`Failure`] says how a command ended.

use socklab_lab::flags;
use socklab_lab::hosts::HostPlan;
use socklab_lab::plan::Plan;
use socklab_lab::roles::{self, Say};
use socklab_lab::runner::Observer;
use socklab_lab::session::{self, CaptureConfig, StatsFormat};
use socklab_lab::store::Store;

use crate::cli::{BulkArgs, EchoArgs, PingArgs, SinkArgs, SummaryFormat};
use crate::dryrun;
use crate::failure::{Failure, Terminal};
use crate::progress::{LiveLines, Progress};

pub(crate) use socklab_lab::session::order_seed;

impl SummaryFormat {
    /// The lab's words for it.
    pub(crate) fn lab(&self) -> StatsFormat {
        StatsFormat::new(self.json, self.csv, self.keep_invalid, self.columns.clone())
            .streaming(self.json_stream)
    }
}

pub fn sink(a: SinkArgs, dry: bool) -> Result<(), Failure> {
    if a.udp {
        return crate::udp::sink(a, dry);
    }
    let cfg = roles::sink::config(&a.bind, a.port, &a.read_size, &a.idle_timeout, a.max_conns)?;
    if dry {
        return dryrun::print_checked(&roles::sink::dry_text(&cfg));
    }
    Ok(roles::sink::run(cfg, Say::new(a.announce, a.quiet), a.db)?)
}

pub fn echo(a: EchoArgs, dry: bool) -> Result<(), Failure> {
    let cfg = roles::echo::config(&a.bind, a.port, a.udp, &a.opts, &a.idle_timeout)?;
    if dry {
        return dryrun::print_checked(&roles::echo::dry_text(&cfg));
    }
    Ok(roles::echo::run(cfg, Say::new(a.announce, a.quiet))?)
}

pub fn bulk(a: BulkArgs, dry: bool) -> Result<(), Failure> {
    a.hosts.check_to(a.keys.value("to"))?;
    let hosts = a.hosts.plan()?;
    if a.hosts.client_host.is_none() {
        session::check_local_cpus("affinity", a.keys.value("affinity"))?;
    }
    let plan = if a.udp {
        crate::udp::plan(&a)?
    } else {
        crate::udp::check_tcp(&a)?;
        let mut group = session::bulk_group(&a.keys.given, &a.sweep, a.cross)?;
        a.link.add_to(&mut group);
        let seed = order_seed(a.keys.value("seed"))?;
        session::bulk_plan(group, &a.keys.plan_flags(seed), a.reference)?
    };
    let capture = a.link.workload_capture()?;
    measure(plan, &a.format, &a.db.db, &hosts, capture.as_ref(), dry)
}

pub fn pingpong(a: PingArgs, dry: bool) -> Result<(), Failure> {
    a.hosts.check_to(a.keys.value("to"))?;
    let hosts = a.hosts.plan()?;
    let mut group = flags::group("pingpong", &a.keys.given, &Default::default())?;
    a.link.add_to(&mut group);
    let plan = a.keys.plan_flags(a.seed).plan(&[group])?;
    let capture = a.link.workload_capture()?;
    measure(plan, &a.format, &a.db.db, &hosts, capture.as_ref(), dry)
}

/// A one-off command's plan: printed (`dry`), or run into the database at `db` and its
/// statistics printed.
fn measure(
    plan: Plan,
    format: &SummaryFormat,
    db: &std::path::Path,
    hosts: &HostPlan,
    capture: Option<&CaptureConfig>,
    dry: bool,
) -> Result<(), Failure> {
    if dry {
        return dryrun::print_plan(&dryrun::keeping_invalid(plan, format.keep_invalid));
    }
    session::reach_targets(&plan, hosts)?;
    let mut store = session::open_store(db)?;
    run_and_print(&plan, &mut store, hosts, format, capture).map(|_| ())
}

/// Runs a plan with `progress` observing it; returns the experiment id, or the failure and
/// the experiment it left (whose finished repetitions are stored).
pub(crate) fn run_observed(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    capture: Option<&CaptureConfig>,
    progress: &mut dyn Observer,
) -> Result<i64, (Option<i64>, Failure)> {
    session::run(plan, store, hosts, capture, progress, &mut Terminal)
        .map_err(|(i, e)| (i, e.into()))
}

/// Runs a one-off command's plan with progress and live lines in `format`'s style, and prints
/// its statistics; an interrupted run prints what it finished on stderr.
pub(crate) fn run_and_print(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    format: &SummaryFormat,
    capture: Option<&CaptureConfig>,
) -> Result<i64, Failure> {
    let mut p = Progress::new().with_live(LiveLines::for_format(format.json, format.csv));
    let (f, t) = (format.lab(), &mut Terminal);
    let r = session::run_and_report(plan, store, hosts, capture, f, &mut p, t);
    Ok(r?)
}
