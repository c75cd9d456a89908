//! The measuring and server subcommands: checked arguments go to the lab, its text comes
//! back to print; [`Failure`] says how a command ended.

use std::io::Write;

use socklab_lab::flags;
use socklab_lab::hosts::HostPlan;
use socklab_lab::plan::Plan;
use socklab_lab::roles::{self, RoleError, Say};
use socklab_lab::runner::Observer;
use socklab_lab::session::{self, CaptureConfig, PlanHead, Printer, StatsFormat};
use socklab_lab::store::Store;
use socklab_lab::LabError;

use crate::cli::{BulkArgs, EchoArgs, KeyFlags, PingArgs, SinkArgs, SummaryFormat};
use crate::dryrun;
use crate::progress::{LiveLines, Progress};

pub use crate::labcmds::{lab, report, results, run};
pub(crate) use socklab_lab::flags::parse_order;
pub(crate) use socklab_lab::roles::checks::parse_bind;
pub(crate) use socklab_lab::session::{command_line, order_seed};

/// Why a command failed, and with which exit code.
#[derive(Debug)]
pub enum Failure {
    /// Bad command line or parameter (exit 2).
    Usage(String),
    /// A run or I/O failed (exit 1).
    Run(String),
    /// An experiment ran to its end but some repetitions failed; they are stored (exit 1).
    Partial(String),
    /// Interrupted (exit 130).
    Interrupted(String),
    /// stdout closed (e.g. `| head`): not an error.
    BrokenPipe,
    /// Exit with this code, saying nothing (a wrapped command's own exit code).
    Exit(u8),
}

impl Failure {
    pub fn message(&self) -> String {
        match self {
            Failure::Usage(m) | Failure::Run(m) | Failure::Partial(m) | Failure::Interrupted(m) => {
                m.clone()
            }
            Failure::BrokenPipe | Failure::Exit(_) => String::new(),
        }
    }
    pub fn code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Run(_) | Failure::Partial(_) => 1,
            Failure::Interrupted(_) => 130,
            Failure::BrokenPipe => 0,
            Failure::Exit(c) => *c,
        }
    }
}

impl From<LabError> for Failure {
    fn from(e: LabError) -> Self {
        let msg = e.to_string();
        match e {
            LabError::Param { .. }
            | LabError::UnknownKey { .. }
            | LabError::Plan(_)
            | LabError::NotAStore { .. } => Failure::Usage(msg),
            LabError::Interrupted { .. } => Failure::Interrupted(msg),
            LabError::Failed { .. } => Failure::Partial(msg),
            LabError::Io { context, source } if context == session::IO_AS_IS => source.into(),
            _ => Failure::Run(msg),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Run(e.to_string())
        }
    }
}

impl From<RoleError> for Failure {
    fn from(e: RoleError) -> Self {
        match e {
            RoleError::Usage(m) => Failure::Usage(m),
            RoleError::Run(m) => Failure::Run(m),
            RoleError::BrokenPipe => Failure::BrokenPipe,
            RoleError::Interrupted(m) => Failure::Interrupted(m),
            RoleError::Exit(c) => Failure::Exit(c),
        }
    }
}

pub fn out(s: &str) -> Result<(), Failure> {
    Ok(Terminal.out(s)?)
}

/// A library's text for people in this command's words: its keys as flags.
pub(crate) fn words(s: &str) -> String {
    crate::flags::in_flags(s, &[])
}

/// Where the lab's text goes: stdout and stderr, its notes in flags.
pub(crate) struct Terminal;

impl Printer for Terminal {
    fn out(&mut self, text: &str) -> std::io::Result<()> {
        let mut o = std::io::stdout().lock();
        o.write_all(text.as_bytes())?;
        o.flush()
    }
    fn err(&mut self, text: &str) {
        eprint!("{text}");
    }
    fn note(&mut self, line: &str) {
        eprintln!("{}", words(line));
    }
}

impl SummaryFormat {
    /// The lab's words for it.
    pub(crate) fn lab(&self) -> StatsFormat {
        StatsFormat {
            json: self.json,
            csv: self.csv,
            keep_invalid: self.keep_invalid,
        }
    }
}

/// The plan flags of a measuring command, `seed` seeding a random order.
fn head<T>(k: &KeyFlags<T>, seed: u64) -> PlanHead {
    PlanHead {
        name: k.name.clone(),
        reps: k.reps,
        warmup: k.warmup,
        order: k.order.clone(),
        seed,
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
    let say = Say {
        announce: a.announce,
        quiet: a.quiet,
    };
    Ok(roles::sink::run(cfg, say)?)
}

pub fn echo(a: EchoArgs, dry: bool) -> Result<(), Failure> {
    let cfg = roles::echo::config(&a.bind, a.port, a.udp, &a.opts, &a.idle_timeout)?;
    if dry {
        return dryrun::print_checked(&roles::echo::dry_text(&cfg));
    }
    let say = Say {
        announce: a.announce,
        quiet: a.quiet,
    };
    Ok(roles::echo::run(cfg, say)?)
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
        session::bulk_plan(group, &head(&a.keys, seed), a.reference)?
    };
    let capture = a.link.workload_capture()?;
    measure(plan, &a.format, &a.db.db, &hosts, capture.as_ref(), dry)
}

pub fn pingpong(a: PingArgs, dry: bool) -> Result<(), Failure> {
    a.hosts.check_to(a.keys.value("to"))?;
    let hosts = a.hosts.plan()?;
    let mut group = flags::group("pingpong", &a.keys.given, &Default::default())?;
    a.link.add_to(&mut group);
    let plan = head(&a.keys, a.seed).plan(&[group])?;
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
    let live = LiveLines::for_format(format.json, format.csv);
    let mut progress = Progress::new().with_live(live);
    let f = format.lab();
    Ok(session::run_and_report(
        plan,
        store,
        hosts,
        capture,
        f,
        &mut progress,
        &mut Terminal,
    )?)
}
