//! The subcommands: turn checked arguments into plans, run them, print results.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use socklab_lab::flags::{self, Rules};
use socklab_lab::hosts::HostPlan;
use socklab_lab::live::LiveExecutor;
use socklab_lab::output;
use socklab_lab::params::Params;
use socklab_lab::plan::{Axis, Group, Plan};
use socklab_lab::roles::{self, RoleError, Say};
use socklab_lab::runner::{run_plan, Observer};
use socklab_lab::store::Store;
use socklab_lab::summary::experiment_stats_with;
use socklab_lab::workload::Workload;
use socklab_lab::LabError;
use socklab_link::capture::CaptureConfig;
use socklab_net::sink::SinkConfig;
use socklab_sys::process::{install_interrupt_flag, interrupted};
use socklab_units::{format_size, parse_duration, parse_size};

use crate::cli::{BulkArgs, EchoArgs, PingArgs, SinkArgs, SummaryFormat};
use crate::dryrun;
use crate::progress::{LiveLines, Progress};

pub use crate::labcmds::{lab, report, results, run};

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

pub fn usage(m: impl Into<String>) -> Failure {
    Failure::Usage(m.into())
}

pub fn out(s: &str) -> Result<(), Failure> {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())?;
    o.flush()?;
    Ok(())
}

pub(crate) fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------- sink

/// `--bind`: an IP address, brackets allowed for IPv6.
pub(crate) fn parse_bind(bind: &str) -> Result<std::net::IpAddr, Failure> {
    bind.trim_matches(|c| c == '[' || c == ']')
        .parse()
        .map_err(|_| {
            usage(format!(
                "--bind '{bind}' is not an IP address: use e.g. 127.0.0.1, ::1 or ::"
            ))
        })
}

/// `--idle-timeout`: a positive duration.
fn parse_idle_timeout(text: &str) -> Result<std::time::Duration, Failure> {
    let d = parse_duration(text).map_err(|e| usage(format!("--idle-timeout {e}")))?;
    if d.is_zero() {
        return Err(usage(
            "--idle-timeout 0s: give the clients some time, e.g. --idle-timeout 30s",
        ));
    }
    Ok(d)
}

pub fn sink(a: SinkArgs, dry: bool) -> Result<(), Failure> {
    if a.udp {
        return crate::udp::sink(a, dry);
    }
    let ip = parse_bind(&a.bind)?;
    let read_size = match parse_size(&a.read_size).map_err(|e| usage(format!("--read-size {e}")))? {
        n @ 1.. if n <= socklab_net::protocol::MAX_READ_SIZE as u64 => n as usize,
        _ => {
            return Err(usage(format!(
                "--read-size {}: use 1 to {}",
                a.read_size,
                format_size(socklab_net::protocol::MAX_READ_SIZE as u64)
            )))
        }
    };
    let idle_timeout = parse_idle_timeout(&a.idle_timeout)?;
    let cfg = SinkConfig {
        bind: SocketAddr::new(ip, a.port),
        read_size,
        idle_timeout,
        max_conns: a.max_conns,
        ..SinkConfig::default()
    };
    if dry {
        return dryrun::print_checked(&format!(
            "socklab sink would listen on {} (raw clients read {} bytes at a time)",
            cfg.bind,
            format_size(read_size as u64)
        ));
    }
    let say = Say {
        announce: a.announce,
        quiet: a.quiet,
    };
    Ok(roles::sink::run(cfg, say)?)
}

// ---------------------------------------------------------------------------------------- bulk

pub(crate) use socklab_lab::flags::parse_order;

/// The seed of `--order random`: bulk's `--seed` (the payload's too), else 1.
pub(crate) fn order_seed(text: Option<&str>) -> Result<u64, Failure> {
    match text {
        None => Ok(1),
        Some(t) => t
            .parse()
            .map_err(|_| usage(format!("--seed '{t}': give a whole number, e.g. --seed 1"))),
    }
}

/// `socklab bulk` (TCP): the keys given, nbufs and bufsize paired unless `--cross`, sweeps;
/// with `--reference`, pipe and memcpy rows at the same transfer sizes.
fn bulk_plan(a: &BulkArgs) -> Result<Plan, Failure> {
    let rules = Rules {
        sweeps: &a.sweep,
        pair: Some(("nbufs", "bufsize")),
        cross: a.cross,
    };
    let mut group = flags::group("bulk", &a.keys.given, &rules)?;
    a.link.add_to(&mut group);
    let order = parse_order(&a.keys.order, order_seed(a.keys.value("seed"))?)?;
    let k = &a.keys;
    let mut groups = vec![group];
    let plan = Plan::build(
        &k.name,
        "",
        &groups,
        k.reps,
        k.warmup,
        order,
        &command_line(),
    )?;
    if a.reference {
        let mut sizes: Vec<u64> = plan
            .cells
            .iter()
            .filter_map(|c| match &c.workload {
                Workload::Bulk(b) => Some((b.cfg.nbufs * b.cfg.bufsize) as u64),
                _ => None,
            })
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let sizes: Vec<String> = sizes.into_iter().map(format_size).collect();
        for kind in ["pipe", "memcpy"] {
            groups.push(
                Group::new(kind, Params::new().with("bytes", "512M"))
                    .axis(Axis::single("size", sizes.iter().cloned())),
            );
        }
        return Ok(Plan::build(
            &k.name,
            "",
            &groups,
            k.reps,
            k.warmup,
            order,
            &command_line(),
        )?);
    }
    Ok(plan)
}

pub(crate) fn exe() -> Result<PathBuf, Failure> {
    std::env::current_exe().map_err(|e| {
        Failure::Run(format!(
            "cannot find the socklab binary to start the sink: {e}"
        ))
    })
}

/// Runs one plan with progress, live interval lines in `format`'s style, and Ctrl-C handling;
/// returns the experiment id, or the failure (after which the finished repetitions are still
/// in the store).
pub(crate) fn run_one(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    live: LiveLines,
    capture: Option<&CaptureConfig>,
) -> Result<i64, (Option<i64>, Failure)> {
    run_observed(
        plan,
        store,
        hosts,
        capture,
        &mut Progress::new().with_live(live),
    )
}

/// Whether a plan samples a time series (then `--json` prints JSON lines: the intervals, and
/// the statistics as the last line).
pub(crate) fn has_series(plan: &Plan) -> bool {
    plan.cells
        .iter()
        .any(|c| c.workload.params().get("interval").is_some())
}

/// [`run_one`] with the caller's observer of the progress.
pub(crate) fn run_observed(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    capture: Option<&CaptureConfig>,
    progress: &mut dyn Observer,
) -> Result<i64, (Option<i64>, Failure)> {
    let host = socklab_sys::host::host_facts();
    let mut exec = LiveExecutor::with_hosts(exe().map_err(|f| (None, f))?, hosts.clone());
    if let Some(c) = capture {
        exec.set_capture(c.clone());
    }
    if let Some(notice) = dryrun::long_run_notice(plan) {
        eprintln!("{notice}");
    }
    match run_plan(plan, store, &host, &mut exec, progress, &interrupted) {
        Ok(s) => Ok(s.experiment),
        Err(e) => {
            let id = match &e {
                LabError::Interrupted { experiment, .. } | LabError::Failed { experiment, .. } => {
                    Some(*experiment)
                }
                _ => store.latest_experiment().ok().flatten(),
            };
            Err((id, e.into()))
        }
    }
}

pub fn bulk(a: BulkArgs, dry: bool) -> Result<(), Failure> {
    a.hosts.check_to(a.keys.value("to"))?;
    let hosts = a.hosts.plan()?;
    if a.hosts.client_host.is_none() {
        check_local_cpus("--affinity", a.keys.value("affinity"))?;
    }
    let plan = if a.udp {
        crate::udp::plan(&a)?
    } else {
        crate::udp::check_tcp(&a)?;
        bulk_plan(&a)?
    };
    let capture = a.link.workload_capture()?;
    if dry {
        return dryrun::print_plan(&dryrun::keeping_invalid(plan, a.format.keep_invalid));
    }
    let mut store = Store::open(&a.db.db)?;
    install_interrupt_flag()?;
    run_and_print(&plan, &mut store, &hosts, &a.format, capture.as_ref()).map(|_| ())
}

/// `--affinity` names CPUs this process may run on (checked here, where the client runs).
fn check_local_cpus(flag: &str, list: Option<&str>) -> Result<(), Failure> {
    let Some(text) = list else {
        return Ok(());
    };
    let list: socklab_net::cpus::CpuList = text
        .parse()
        .map_err(|e: String| usage(format!("{flag} {e}")))?;
    let allowed = socklab_sys::sched::thread_affinity().unwrap_or_default();
    if let Some(bad) = list.cpus().iter().find(|c| !allowed.contains(c)) {
        return Err(usage(format!(
            "{flag} {text}: CPU {bad} is not one this process may run on (here: {}); choose among those",
            socklab_net::cpus::CpuList::from_vec(allowed)
        )));
    }
    Ok(())
}

/// Runs a one-off command's plan and prints its statistics; an interrupted run prints what it
/// finished on stderr.
pub(crate) fn run_and_print(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    format: &SummaryFormat,
    capture: Option<&CaptureConfig>,
) -> Result<i64, Failure> {
    let lines = has_series(plan);
    let live = LiveLines::for_format(format.json, format.csv);
    let plan = &dryrun::keeping_invalid(plan.clone(), format.keep_invalid); // none re-run
    let id = match run_one(plan, store, hosts, live, capture) {
        Ok(id) => id,
        Err((Some(id), f @ Failure::Interrupted(_))) => {
            eprint!(
                "{}",
                output::human(&experiment_stats_with(store, id, format.keep_invalid)?)
            );
            return Err(f);
        }
        // Every repetition ran; the failed ones are in the table (failed = 1).
        Err((Some(id), f @ Failure::Partial(_))) => {
            print_stats(store, id, format, lines)?;
            return Err(f);
        }
        Err((_, f)) => return Err(f),
    };
    print_stats(store, id, format, lines)?;
    if !format.json && !format.csv {
        out(&format!(
            "stored as experiment {id} in {}\n",
            store.path().display()
        ))?;
    }
    Ok(id)
}

/// Prints an experiment's statistics as JSON (on one line when `one_line`: the last of a
/// stream of JSON lines), CSV or the human table.
pub(crate) fn print_stats(
    store: &Store,
    id: i64,
    format: &SummaryFormat,
    one_line: bool,
) -> Result<(), Failure> {
    let st = experiment_stats_with(store, id, format.keep_invalid)?;
    if format.json {
        let json = output::to_json(&st);
        out(&format!(
            "{}\n",
            if one_line {
                serde_json::to_string(&json)
            } else {
                serde_json::to_string_pretty(&json)
            }
            .unwrap_or_default()
        ))
    } else if format.csv {
        out(&output::summary_csv(&st))
    } else {
        out(&output::human(&st))
    }
}

// ------------------------------------------------------------------------------------- results

pub fn echo(a: EchoArgs, dry: bool) -> Result<(), Failure> {
    let ip = parse_bind(&a.bind)?;
    let opts: socklab_net::sockopt::OptSet = a
        .opts
        .parse()
        .map_err(|e: socklab_net::SockOptError| usage(format!("--opts {e}")))?;
    opts.validate(a.udp)
        .map_err(|e| usage(format!("--opts {e}")))?;
    let idle_timeout = parse_idle_timeout(&a.idle_timeout)?;
    let cfg = socklab_net::echo::EchoConfig {
        bind: SocketAddr::new(ip, a.port),
        udp: a.udp,
        opts,
        idle_timeout,
        max_message: 64 * 1024,
    };
    if dry {
        return dryrun::print_checked(&format!(
            "socklab echo would listen on {} ({})",
            cfg.bind,
            if a.udp { "UDP" } else { "TCP" }
        ));
    }
    let say = Say {
        announce: a.announce,
        quiet: a.quiet,
    };
    Ok(roles::echo::run(cfg, say)?)
}

// ------------------------------------------------------------------------------------ pingpong

pub fn pingpong(a: PingArgs, dry: bool) -> Result<(), Failure> {
    a.hosts.check_to(a.keys.value("to"))?;
    let hosts = a.hosts.plan()?;
    let mut group = flags::group("pingpong", &a.keys.given, &Rules::default())?;
    a.link.add_to(&mut group);
    let k = &a.keys;
    let order = parse_order(&k.order, a.seed)?;
    let plan = Plan::build(
        &k.name,
        "",
        &[group],
        k.reps,
        k.warmup,
        order,
        &command_line(),
    )?;
    let capture = a.link.workload_capture()?;
    if dry {
        return dryrun::print_plan(&dryrun::keeping_invalid(plan, a.format.keep_invalid));
    }
    let mut store = Store::open(&a.db.db)?;
    install_interrupt_flag()?;
    run_and_print(&plan, &mut store, &hosts, &a.format, capture.as_ref()).map(|_| ())
}

// ----------------------------------------------------------------------------------------- run
