//! The subcommands: turn checked arguments into plans, run them, print results.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use socklab_lab::hosts::HostPlan;
use socklab_lab::live::LiveExecutor;
use socklab_lab::output;
use socklab_lab::params::Params;
use socklab_lab::plan::{Axis, Group, Order, Plan};
use socklab_lab::roles::{self, RoleError, Say};
use socklab_lab::runner::{run_plan, Observer};
use socklab_lab::store::Store;
use socklab_lab::summary::experiment_stats_with;
use socklab_lab::workload::Workload;
use socklab_lab::LabError;
use socklab_net::link::capture::CaptureConfig;
use socklab_net::sink::SinkConfig;
use socklab_net::units::{format_size, parse_duration, parse_size};
use socklab_sys::process::{install_interrupt_flag, interrupted};

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

/// Keys whose values are byte sizes (printed with K/M/G).
const SIZE_KEYS: &[&str] = &["bufsize", "sndbuf", "read_size", "size", "bytes"];

/// Expands `KEY=FROM..TO[:xF|:+S]` into values.
pub(crate) fn sweep_values(spec: &str) -> Result<(String, Vec<String>), Failure> {
    let bad = |why: &str| {
        usage(format!(
            "--sweep '{spec}': {why}; write KEY=FROM..TO, e.g. bufsize=1K..512K, nbufs=10..100:+10"
        ))
    };
    let (key, range) = spec.split_once('=').ok_or_else(|| bad("missing '='"))?;
    let key = socklab_lab::params::normalize_key(key);
    let (range, step) = match range.split_once(':') {
        Some((r, s)) => (r, Some(s)),
        None => (range, None),
    };
    let (from, to) = range.split_once("..").ok_or_else(|| bad("missing '..'"))?;
    let from = parse_size(from).map_err(|e| bad(&e))?;
    let to = parse_size(to).map_err(|e| bad(&e))?;
    if from == 0 || to < from {
        return Err(bad(
            "the range must start at 1 or more and not run backwards",
        ));
    }
    let mut vals = Vec::new();
    let mut v = from;
    while v <= to {
        vals.push(v);
        if vals.len() > 1000 {
            return Err(bad("more than 1000 values"));
        }
        v = match step {
            None => v.saturating_mul(2),
            Some(s) if s.starts_with('x') => {
                let f: u64 = s[1..].parse().map_err(|_| bad("bad factor"))?;
                if f < 2 {
                    return Err(bad("the factor must be 2 or more"));
                }
                v.saturating_mul(f)
            }
            Some(s) if s.starts_with('+') => {
                let d = parse_size(&s[1..]).map_err(|e| bad(&e))?;
                if d == 0 {
                    return Err(bad("the step must be 1 or more"));
                }
                v.saturating_add(d)
            }
            Some(_) => return Err(bad("the step is :xFACTOR or :+STEP")),
        };
        if v == u64::MAX {
            break;
        }
    }
    let is_size = SIZE_KEYS.contains(&key.as_str());
    let text = |n: u64| {
        if is_size {
            format_size(n)
        } else {
            n.to_string()
        }
    };
    let vals = vals.into_iter().map(text).collect();
    Ok((key, vals))
}

pub(crate) fn parse_order(s: &str, seed: u64) -> Result<Order, Failure> {
    match s {
        "interleaved" => Ok(Order::Interleaved),
        "random" => Ok(Order::Random(seed)),
        "sequential" => Ok(Order::Sequential),
        _ => Err(usage(format!(
            "--order '{s}': choose interleaved, random or sequential"
        ))),
    }
}

/// A command-line list as experiment data: one value is a fixed parameter, several an axis.
pub(crate) fn list_axis(key: &str, vals: &[String], axes: &mut Vec<Axis>, fixed: &mut Params) {
    if vals.len() == 1 {
        fixed.set(key, vals[0].clone());
    } else {
        axes.push(Axis::single(key, vals.iter().cloned()));
    }
}

fn bulk_plan(a: &BulkArgs) -> Result<Plan, Failure> {
    let mut fixed = Params::new();
    if let Some(to) = &a.to {
        fixed.set("to", to.clone());
    }
    if let Some(n) = &a.iterations {
        fixed.set("iterations", n.clone());
    }
    if let Some(d) = &a.duration {
        fixed.set("duration", d.clone());
    }
    if let Some(b) = &a.bytes {
        fixed.set("bytes", b.clone());
    }
    if let Some(t) = &a.timeout {
        fixed.set("timeout", t.clone());
    }
    fixed.set("nodelay", a.nodelay.to_string());
    if let Some(s) = &a.sndbuf {
        fixed.set("sndbuf", s.clone());
    }
    fixed.set("read_size", a.read_size.clone());
    fixed.set("verify", a.verify.to_string());
    fixed.set("seed", a.seed.to_string());
    if let Some(i) = &a.interval {
        fixed.set("interval", i.clone());
    }
    if let Some(o) = &a.omit {
        fixed.set("omit", o.clone());
    }
    if a.reverse {
        fixed.set("direction", "down");
    }
    if a.bidir {
        fixed.set("direction", "bidir");
    }
    if let Some(c) = &a.affinity {
        fixed.set("affinity", c.clone());
    }
    if let Some(c) = &a.server_affinity {
        fixed.set("server_affinity", c.clone());
    }

    let mut sweeps = Vec::new();
    for s in &a.sweep {
        sweeps.push(sweep_values(s)?);
    }
    let swept = |k: &str| sweeps.iter().any(|(key, _)| key == k);
    let mut axes = Vec::new();
    list_axis("strategy", &a.strategy, &mut axes, &mut fixed);
    list_axis("cc", &a.cc, &mut axes, &mut fixed);
    list_axis("streams", &a.streams, &mut axes, &mut fixed);
    if !a.pacing_rate.is_empty() {
        list_axis("pacing_rate", &a.pacing_rate, &mut axes, &mut fixed);
    }
    let (nb, bs) = (!swept("nbufs"), !swept("bufsize"));
    if nb && bs && a.nbufs.len() > 1 && a.bufsize.len() > 1 && !a.cross {
        axes.push(
            Axis::zipped(&["nbufs", "bufsize"], &[a.nbufs.clone(), a.bufsize.clone()]).map_err(
                |e| {
                    usage(format!(
                        "--nbufs/--bufsize: {e} (or --cross for every combination)"
                    ))
                },
            )?,
        );
    } else {
        if nb {
            list_axis("nbufs", &a.nbufs, &mut axes, &mut fixed);
        }
        if bs {
            list_axis("bufsize", &a.bufsize, &mut axes, &mut fixed);
        }
    }
    for (key, vals) in sweeps {
        fixed.remove(&key);
        axes.push(Axis::single(&key, vals));
    }
    let mut group = Group::new("bulk", fixed);
    group.axes = axes;
    a.link.add_to(&mut group);
    let order = parse_order(&a.order, a.seed)?;
    let mut groups = vec![group];
    let plan = Plan::build(
        &a.name,
        "",
        &groups,
        a.reps,
        a.warmup,
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
            &a.name,
            "",
            &groups,
            a.reps,
            a.warmup,
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
    a.hosts.check_to(a.to.as_deref())?;
    let hosts = a.hosts.plan()?;
    if a.hosts.client_host.is_none() {
        check_local_cpus("--affinity", a.affinity.as_deref())?;
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
    a.hosts.check_to(a.to.as_deref())?;
    let hosts = a.hosts.plan()?;
    let mut fixed = Params::new();
    if let Some(to) = &a.to {
        fixed.set("to", to.clone());
    }
    fixed.set("udp", a.udp.to_string());
    fixed.set("count", a.count.clone());
    fixed.set("timeout", a.timeout.clone());
    fixed.set("reply", a.reply.clone());
    if a.udp {
        fixed.set("retries", a.retries.clone());
    } else {
        fixed.set("new_connection", a.new_connection_per_message.to_string());
    }
    let mut group = Group::new("pingpong", fixed);
    for (key, vals) in [("opts", &a.opts), ("size", &a.size)] {
        if vals.len() == 1 {
            group.fixed.set(key, vals[0].clone());
        } else {
            group.axes.push(Axis::single(key, vals.iter().cloned()));
        }
    }
    a.link.add_to(&mut group);
    let order = parse_order(&a.order, a.seed)?;
    let plan = Plan::build(
        &a.name,
        "",
        &[group],
        a.reps,
        a.warmup,
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
