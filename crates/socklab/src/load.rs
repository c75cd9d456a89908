//! `socklab load`: the load generator (wrk2/ab-class) against a stevens, echo or HTTP server.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use clap::Args;
use socklab_lab::params::Modes;
use socklab_lab::params::{Key, Params};
use socklab_lab::plan::{Group, Plan};
use socklab_lab::store::Store;
use socklab_lab::workload::{load, parse_target, Target, Workload};
use socklab_lab::LabError;
use socklab_net::load::{LoadProtocol, LoadReport, Timing};
use socklab_sys::process::install_interrupt_flag;
use socklab_units::format_duration;

use crate::cli::{merged, FlagTable, KeyFlags, SummaryFormat};
use crate::commands::{command_line, out, run_and_print, run_observed, usage, Failure};
use crate::flags;
use crate::progress::{LiveLines, OneRun};

/// A count-bounded run (--requests, --loops) without --duration is still capped at this.
const COUNT_RUN_CAP: Duration = Duration::from_secs(300);

/// `socklab load`'s key flags: the load workload's keys that a one-off run against a server
/// takes (the server's own keys, design and workers, have no flag here), with the command's
/// defaults.
#[derive(Debug, Clone)]
pub struct LoadFlags;

impl FlagTable for LoadFlags {
    const REPS: usize = 1;
    const WARMUP: usize = 0;
    const NAME: &'static str = "load";
    const DEFAULTS: &'static [(&'static str, &'static str)] = &[
        ("to", ""),
        ("handler", "stevens with --clients, http otherwise"),
        ("clients", ""),
        ("loops", ""),
        ("bytes", "100"),
        ("connections", "10"),
        ("requests", ""),
        (
            "duration",
            "10s when no --requests/--loops; otherwise a 5-minute cap",
        ),
        ("threads", "the number of CPUs"),
        ("source_addrs", "1"),
    ];
    fn keys() -> Vec<Key> {
        merged(&[(load::KEYS, Modes::ALL)])
    }
}

/// `socklab load` arguments.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The workload's keys as flags (--to is required), and the plan flags: --reps N repeats
    /// the run (mean, sd and 95% CI per metric; without it one run, printed like wrk/ab),
    /// --warmup (with --reps), --name.
    #[command(flatten)]
    pub keys: KeyFlags<LoadFlags>,
    /// Where the roles run: load generators on other hosts (--generators), over SSH.
    #[command(flatten)]
    pub hosts: crate::hosts::HostArgs,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the report as CSV (a header and one row).
    #[arg(long)]
    pub csv: bool,
    /// Keep the repetitions marked invalid (emu_valid = 0: the emulated link could not keep
    /// up) in the statistics, run once; by default each is re-run (at most 2 × reps attempts
    /// per cell), left out and counted, "n = 3 (+2 invalid, retried)".
    #[arg(long)]
    pub keep_invalid: bool,
    /// The results database (SQLite) the run is stored in.
    #[arg(long, value_name = "PATH", default_value = "socklab.db")]
    pub db: std::path::PathBuf,
}

/// The command's values, typed: its key flags as the one-off command reads them.
struct LoadValues {
    to: String,
    protocol: Option<String>,
    clients: Option<usize>,
    loops: Option<u64>,
    bytes: Option<String>,
    connections: Option<usize>,
    requests: Option<u64>,
    duration: Option<String>,
    rate: Option<String>,
    new_connection_per_request: bool,
    threads: Option<usize>,
    timeout: String,
    path: String,
    host: Option<String>,
    source_addrs: u32,
    interval: Option<String>,
    reps: Option<usize>,
    warmup: usize,
    order: String,
    name: String,
}

impl LoadValues {
    fn of(a: &LoadArgs) -> Result<LoadValues, Failure> {
        let k = &a.keys;
        let text = |key: &str| k.value(key).map(str::to_string);
        fn number<T: std::str::FromStr>(
            k: &KeyFlags<LoadFlags>,
            key: &str,
        ) -> Result<Option<T>, Failure> {
            match k.value(key) {
                None => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| {
                    usage(format!(
                        "{} '{v}': give a whole number, e.g. {} 10",
                        crate::flags::flag(key, crate::flags::LOAD),
                        crate::flags::flag(key, crate::flags::LOAD)
                    ))
                }),
            }
        }
        if k.warmup != 0 && !k.reps_given {
            return Err(usage(
                "--warmup needs --reps: warm-up repetitions go with repeated runs (add --reps N)",
            ));
        }
        Ok(LoadValues {
            to: text("to").ok_or_else(|| {
                usage("--to is required: give the server as HOST:PORT, e.g. 127.0.0.1:8080")
            })?,
            protocol: text("handler"),
            clients: number(k, "clients")?,
            loops: number(k, "loops")?,
            bytes: text("bytes"),
            connections: number(k, "connections")?,
            requests: number(k, "requests")?,
            duration: text("duration"),
            rate: text("rate"),
            new_connection_per_request: k.value("new_connection").is_some(),
            threads: number(k, "threads")?,
            timeout: text("timeout").unwrap_or_else(|| "5s".into()),
            path: text("path").unwrap_or_else(|| "/".into()),
            host: text("host"),
            source_addrs: number(k, "source_addrs")?.unwrap_or(1),
            interval: text("interval"),
            reps: k.reps_given.then_some(k.reps),
            warmup: k.warmup,
            order: k.order.clone(),
            name: k.name.clone(),
        })
    }
}

/// The command's help epilogue.
pub const AFTER_HELP: &str = concat!(
    "Examples:\n",
    "  socklab load --to 127.0.0.1:8080 --connections 32 --duration 10s\n",
    "  socklab load --to 127.0.0.1:8080 --connections 32 --rate 20000 \\\n",
    "      --duration 30s                  # open loop (wrk2)\n",
    "  socklab load --to 127.0.0.1:9999 --clients 5 --loops 500 --bytes 4000\n",
    "  socklab load --to 127.0.0.1:7000 --protocol echo --bytes 64 \\\n",
    "      --requests 100000 --json\n",
    "  socklab load --to 127.0.0.1:8080 --new-connection-per-request \\\n",
    "      --source-addrs 8 --duration 10s\n",
    "  socklab load --to 127.0.0.1:8080 --connections 32 --duration 5s \\\n",
    "      --reps 10                        # repeated: mean and 95% CI\n",
    "  socklab load --to 127.0.0.1:8080 --duration 10s --interval 1s\n",
    "\n",
    "The first is closed loop over keep-alive HTTP (wrk), the third Stevens' client.c. Failures are counted by kind (connect, read, write, timeout, bad reply); requests in flight when the run ends are not counted. Open loop reports latency from the intended send time (corrected) and from the actual send (uncorrected). The generator's own lag and CPU are reported; a warning says when the client was the bottleneck. Every run is an experiment in --db (socklab results, socklab report). See docs/load.md.\n\nExit codes: 0 success; 1 no request completed, the run stopped early (ephemeral ports exhausted) or could not start; 2 bad argument; 130 interrupted (what was measured is printed)."
);

/// A workload error in the command's words: `--bytes 20000: ...` for `bytes = '20000': ...`.
fn in_flags(e: LabError) -> Failure {
    match e {
        LabError::Param { key, value, reason } => {
            let value = if value.starts_with(|c: char| c.is_ascii_digit()) {
                value
            } else {
                format!("'{value}'")
            };
            usage(format!(
                "{} {value}: {reason}",
                flags::flag(&key, flags::LOAD)
            ))
        }
        other => other.into(),
    }
}

/// The `load` workload parameters of the command: everything `socklab load` can ask for, as
/// it always ran (a one-off: the default `--source-addrs 1`, and a run that stops early keeps
/// its figures; with `--reps` the flags of a single run are refused, as they always were).
fn workload_params(a: &LoadValues) -> Result<Params, Failure> {
    let to = match parse_target(&a.to) {
        Ok(Target::Addr(addr)) => addr,
        Ok(Target::SelfSink) => {
            return Err(usage(format!(
                "--to '{}': give the server as HOST:PORT, e.g. 127.0.0.1:8080",
                a.to
            )))
        }
        Err(e) => return Err(usage(format!("--to '{}': {e}", a.to))),
    };
    let protocol = match &a.protocol {
        Some(p) => p
            .parse::<LoadProtocol>()
            .map_err(|e| usage(format!("--protocol {e}")))?,
        None if a.clients.is_some() => LoadProtocol::Stevens,
        None => LoadProtocol::Http,
    };
    let (connections, new_connection) = match (a.clients, a.connections) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "--clients and --connections both given: --clients C is stevens mode (a connection per request); use one of them",
            ))
        }
        (Some(n), None) => (n, true),
        (None, n) => (n.unwrap_or(10), a.new_connection_per_request),
    };
    if a.reps.is_some() {
        let unsupported = [
            ("--requests", a.requests.is_some()),
            ("--path", a.path != "/"),
            ("--host", a.host.is_some()),
            ("--source-addrs", a.source_addrs != 1),
        ];
        if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
            return Err(usage(format!(
                "{flag} is not available with --reps (the load workload bounds runs by --duration or --loops): drop {flag}, or drop --reps for a single run"
            )));
        }
    }
    if a.source_addrs > 1 && !matches!(to.ip(), IpAddr::V4(ip) if ip.is_loopback()) {
        return Err(usage(format!(
            "--source-addrs {} needs an IPv4 loopback target (127.0.0.0/8), not {to}: drop --source-addrs",
            a.source_addrs
        )));
    }
    let mut p = Params::new();
    p.set("to", to.to_string());
    p.set("handler", protocol.name());
    p.set(
        "threads",
        a.threads
            .unwrap_or_else(|| socklab_sys::host::cores().min(256))
            .to_string(),
    );
    p.set("timeout", a.timeout.clone());
    let bytes = a.bytes.clone().unwrap_or_else(|| "100".into());
    match protocol {
        LoadProtocol::Stevens => {
            if !new_connection {
                return Err(usage(
                    "--protocol stevens without --clients keeps connections alive, which the load workload does not run: give --clients C (a connection per request, the book's client)",
                ));
            }
            p.set("clients", connections.to_string());
            p.set(
                "loops",
                a.loops
                    .map_or_else(|| "unlimited".into(), |l| l.to_string()),
            );
            p.set("bytes", bytes);
        }
        LoadProtocol::Echo | LoadProtocol::Http => {
            p.set("connections", connections.to_string());
            p.set("new_connection", new_connection.to_string());
            if let Some(l) = a.loops {
                p.set("conn_requests", l.to_string());
            }
            if protocol == LoadProtocol::Echo {
                p.set("bytes", bytes);
            } else {
                if a.path != "/" {
                    p.set("path", a.path.clone());
                }
                if let Some(h) = &a.host {
                    p.set("host", h.clone());
                }
            }
        }
    }
    let duration = match &a.duration {
        Some(d) => d.clone(),
        None if a.loops.is_some() || a.requests.is_some() => format_duration(COUNT_RUN_CAP),
        None => "10s".into(),
    };
    p.set("duration", duration);
    if let Some(r) = &a.rate {
        p.set("rate", r.clone());
    }
    if let Some(n) = a.requests {
        p.set("requests", n.to_string());
    }
    if let Some(i) = &a.interval {
        p.set("interval", i.clone());
    }
    if a.reps.is_none() {
        p.set("source_addrs", a.source_addrs.to_string());
        p.set("partial", "keep");
    }
    Workload::from_params("load", &p).map_err(in_flags)?;
    Ok(p)
}

/// The command as an experiment of one cell.
fn plan(a: &LoadValues, params: Params) -> Result<Plan, Failure> {
    Ok(Plan::build(
        &a.name,
        "",
        &[Group::new("load", params)],
        a.reps.unwrap_or(1),
        a.warmup,
        crate::commands::parse_order(&a.order, 1)?,
        &command_line(),
    )?)
}

/// The report of the one run of experiment `id`, as the store holds it.
/// Each generator's own figures (`--generators`), as lines under the merged report.
fn generator_lines(store: &Store, id: i64) -> Result<String, Failure> {
    let Some(sample) = store.samples(id)?.into_iter().find(|s| !s.warmup) else {
        return Ok(String::new());
    };
    let Some(gens) = sample.extra["generators"].as_array().cloned() else {
        return Ok(String::new());
    };
    let mut t = socklab_lab::table::Table::new(&[
        "generator",
        "connections",
        "completed",
        "failed",
        "req/s",
        "p50 us",
        "p99 us",
        "behind",
    ]);
    t.left = vec![true, false, false, false, false, false, false, true];
    let n = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.0}"));
    for g in &gens {
        t.row(vec![
            g["host"].as_str().unwrap_or("?").to_string(),
            n(&g["connections"]),
            n(&g["completed"]),
            n(&g["failed"]),
            n(&g["req_per_s"]),
            n(&g["lat_p50_us"]),
            n(&g["lat_p99_us"]),
            g["behind"].as_str().unwrap_or("no").to_string(),
        ]);
    }
    Ok(format!(
        "\nEach generator (the figures above are their merge: histograms added, counts summed):\n{}\n",
        t.to_text()
    ))
}

fn stored_report(store: &Store, id: i64) -> Result<LoadReport, Failure> {
    let missing = |why: String| {
        Failure::Run(format!(
            "experiment {id} in '{}' holds no load report ({why})",
            store.path().display()
        ))
    };
    let sample = store
        .samples(id)?
        .into_iter()
        .find(|s| !s.warmup)
        .ok_or_else(|| missing("no repetition".into()))?;
    serde_json::from_value(sample.extra["report"].clone()).map_err(|e| missing(e.to_string()))
}

/// Descriptors a run needs besides one per connection: stdio, the store and its journal,
/// the generator threads' epoll instances and timers, a self-started server's pipes.
const FD_MARGIN: u64 = 64;

/// Raises the soft RLIMIT_NOFILE to the hard limit (as a shell's `ulimit -n $(ulimit -Hn)`)
/// and refuses, in one line, a run whose `connections` cannot all be open at once: each would
/// otherwise fail its connect with EMFILE, counted as a connect failure of the server.
fn ensure_descriptors(connections: usize) -> Result<(), Failure> {
    use socklab_sys::procs::{nofile_limit, set_nofile_limit};
    let need = connections as u64 + FD_MARGIN;
    let (mut soft, hard) = nofile_limit()?;
    if soft < hard && set_nofile_limit(hard).is_ok() {
        soft = hard;
    }
    if soft >= need {
        return Ok(());
    }
    let fit = soft.saturating_sub(FD_MARGIN);
    let instead = if fit > 0 {
        format!(", or run at most {fit} connections")
    } else {
        String::new()
    };
    Err(usage(format!(
        "--connections {connections} needs {need} open descriptors (one per connection, {FD_MARGIN} for socklab) but this process may open only {soft} (hard limit {hard}): raise it (ulimit -n {need}, above the hard limit as root){instead}"
    )))
}

pub fn load(args: LoadArgs, dry: bool) -> Result<(), Failure> {
    let a = LoadValues::of(&args)?;
    let params = workload_params(&a)?;
    args.hosts.check_to(Some(&a.to))?;
    let hosts = args.hosts.plan()?;
    let plan = plan(&a, params)?;
    if dry {
        return crate::dryrun::print_plan(&crate::dryrun::keeping_invalid(plan, args.keep_invalid));
    }
    ensure_descriptors(a.clients.or(a.connections).unwrap_or(10))?;
    let mut store = Store::open(&args.db)?;
    install_interrupt_flag()?;
    if a.reps.is_some() {
        let format = SummaryFormat {
            json: args.json,
            csv: args.csv,
            keep_invalid: args.keep_invalid,
        };
        return run_and_print(&plan, &mut store, &hosts, &format, None).map(|_| ());
    }
    // One repetition, no warm-up, through the Runner into the store; printed from the store.
    let live = LiveLines::for_format(args.json, args.csv);
    let mut observer = OneRun::new(!args.json && !args.csv).with_live(live);
    let plan = Plan {
        retry_invalid: !args.keep_invalid,
        ..plan
    };
    let id = run_observed(&plan, &mut store, &hosts, None, &mut observer).map_err(|(_, f)| f)?;
    let r = stored_report(&store, id)?;
    let gens = generator_lines(&store, id)?;
    let text = if args.json {
        // After the intervals' JSON lines, the report is one more line.
        let mut s = if a.interval.is_some() {
            serde_json::to_string(&r)
        } else {
            serde_json::to_string_pretty(&r)
        }
        .map_err(|e| Failure::Run(e.to_string()))?;
        s.push('\n');
        s
    } else if args.csv {
        csv(&r)
    } else {
        format!(
            "{}{gens}stored as experiment {id} in {}\n",
            summary(&r),
            store.path().display()
        )
    };
    match r.aborted.as_deref() {
        None => {}
        Some("interrupted") => store.finish_experiment(id, "interrupted")?,
        Some(_) => store.finish_experiment(id, "failed")?,
    }
    out(&text)?;
    match r.aborted.as_deref() {
        None if r.completed == 0 && r.failed.total() > 0 => Err(Failure::Run(format!(
            "no request completed ({} failed: connect {}, read {}, write {}, timeout {}, bad reply {}): is a {} server listening at {}?",
            r.failed.total(),
            r.failed.connect,
            r.failed.read,
            r.failed.write,
            r.failed.timeout,
            r.failed.bad_reply,
            r.config.protocol,
            r.config.to
        ))),
        None => Ok(()),
        Some("interrupted") => Err(Failure::Interrupted(
            "interrupted: the figures above cover the run until Ctrl-C".into(),
        )),
        Some(why) => Err(Failure::Run(why.to_string())),
    }
}

fn us(x: f64) -> String {
    if x >= 100_000.0 {
        format!("{:.1}ms", x / 1000.0)
    } else if x >= 1000.0 {
        format!("{:.2}ms", x / 1000.0)
    } else {
        format!("{x:.1}us")
    }
}

fn bytes_h(x: f64) -> String {
    for (d, s) in [(1e9, "GB"), (1e6, "MB"), (1e3, "KB")] {
        if x >= d {
            return format!("{:.2} {s}", x / d);
        }
    }
    format!("{x:.0} B")
}

fn timing_row(s: &mut String, name: &str, t: &Timing) {
    if t.count == 0 {
        let _ = writeln!(s, "  {name:<12} {:>10}", "-");
        return;
    }
    let _ = writeln!(
        s,
        "  {name:<12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        us(t.min_us),
        us(t.mean_us),
        us(t.sd_us),
        us(t.median_us),
        us(t.max_us)
    );
}

/// The wrk/ab-like human summary.
pub fn summary(r: &LoadReport) -> String {
    let c = &r.config;
    let mut s = String::new();
    let mode = match c.rate {
        Some(rate) => format!("open loop at {rate} req/s"),
        None => "closed loop".into(),
    };
    let conns = if c.new_connection_per_request {
        "a new connection per request"
    } else {
        "keep-alive"
    };
    let _ = writeln!(
        s,
        "socklab load: {} to {}, {} connections ({conns}), {} thread(s), {mode}, {:.2} s",
        c.protocol,
        c.to,
        c.connections,
        c.threads.min(c.connections),
        r.duration_s
    );
    let f = &r.failed;
    let _ = writeln!(
        s,
        "  Complete requests:  {}\n  Failed requests:    {} (connect {}, read {}, write {}, timeout {}, bad reply {})",
        r.completed,
        f.total(),
        f.connect,
        f.read,
        f.write,
        f.timeout,
        f.bad_reply
    );
    let _ = writeln!(
        s,
        "  Requests/s:         {:.1}\n  Connections/s:      {:.1} ({} opened)\n  Transfer rate:      {}/s read ({} read, {} written)",
        r.requests_per_s,
        r.connections_per_s,
        r.connections_opened,
        bytes_h(r.transfer_bytes_per_s),
        bytes_h(r.bytes_read as f64),
        bytes_h(r.bytes_written as f64)
    );
    let _ = writeln!(
        s,
        "\n  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "Times", "min", "mean", "[+/-sd]", "median", "max"
    );
    timing_row(&mut s, "Connect", &r.connect);
    timing_row(&mut s, "First byte", &r.first_byte);
    timing_row(&mut s, "Response", &r.response);
    if let Some(t) = &r.response_corrected {
        timing_row(&mut s, "Corrected", t);
    }
    let _ = write!(s, "\n  Latency percentiles");
    for (label, _) in r.response.percentiles.rows() {
        let _ = write!(s, " {label:>9}");
    }
    s.push('\n');
    let mut pct = |name: &str, t: &Timing| {
        let _ = write!(s, "  {name:<19}");
        for (_, v) in t.percentiles.rows() {
            let _ = write!(s, " {:>9}", us(v));
        }
        s.push('\n');
    };
    match &r.response_corrected {
        Some(t) => {
            pct("corrected", t);
            pct("uncorrected", &r.response);
        }
        None => pct("response", &r.response),
    }
    let g = &r.generator;
    let util: Vec<String> = g
        .thread_utilisation
        .iter()
        .map(|u| format!("{:.0}%", u * 100.0))
        .collect();
    let _ = writeln!(
        s,
        "\n  Generator: cpu user {:.2} s, sys {:.2} s; threads busy {}; event-loop work p99 {}, max {}",
        g.cpu_user_s,
        g.cpu_sys_s,
        util.join(" "),
        us(g.loop_busy.percentiles.p99_us),
        us(g.loop_busy.max_us)
    );
    if let (Some(send), Some(timer)) = (&g.send_lag, &g.timer_lag) {
        let _ = writeln!(
            s,
            "  Send lag (actual - intended): p50 {}, p99 {}, max {}; timer lag p99 {}",
            us(send.percentiles.p50_us),
            us(send.percentiles.p99_us),
            us(send.max_us),
            us(timer.percentiles.p99_us)
        );
    }
    for w in &g.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    if let Some(a) = &r.aborted {
        let _ = writeln!(s, "  stopped early: {a}");
    }
    s
}

/// A CSV header and one row: the figures most tables want (the JSON has everything).
pub fn csv(r: &LoadReport) -> String {
    let c = &r.config;
    let mut head: Vec<String> = [
        "protocol",
        "to",
        "connections",
        "new_connection_per_request",
        "threads",
        "rate",
        "duration_s",
        "completed",
        "failed",
        "failed_connect",
        "failed_read",
        "failed_write",
        "failed_timeout",
        "failed_bad_reply",
        "connections_opened",
        "requests_per_s",
        "connections_per_s",
        "transfer_bytes_per_s",
        "bytes_read",
        "bytes_written",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let f = &r.failed;
    let mut row: Vec<String> = vec![
        c.protocol.to_string(),
        c.to.to_string(),
        c.connections.to_string(),
        c.new_connection_per_request.to_string(),
        c.threads.min(c.connections).to_string(),
        c.rate.map_or(String::new(), |x| x.to_string()),
        format!("{:.6}", r.duration_s),
        r.completed.to_string(),
        f.total().to_string(),
        f.connect.to_string(),
        f.read.to_string(),
        f.write.to_string(),
        f.timeout.to_string(),
        f.bad_reply.to_string(),
        r.connections_opened.to_string(),
        format!("{:.3}", r.requests_per_s),
        format!("{:.3}", r.connections_per_s),
        format!("{:.3}", r.transfer_bytes_per_s),
        r.bytes_read.to_string(),
        r.bytes_written.to_string(),
    ];
    let mut timing = |name: &str, t: Option<&Timing>| {
        let d = Timing::default();
        let t = t.unwrap_or(&d);
        let p = &t.percentiles;
        for (k, v) in [
            ("min", t.min_us),
            ("mean", t.mean_us),
            ("sd", t.sd_us),
            ("median", t.median_us),
            ("max", t.max_us),
            ("p50", p.p50_us),
            ("p75", p.p75_us),
            ("p90", p.p90_us),
            ("p99", p.p99_us),
            ("p99_9", p.p99_9_us),
            ("p99_99", p.p99_99_us),
        ] {
            head.push(format!("{name}_{k}_us"));
            row.push(format!("{v:.3}"));
        }
    };
    timing("connect", Some(&r.connect));
    timing("first_byte", Some(&r.first_byte));
    timing("response", Some(&r.response));
    timing("corrected", r.response_corrected.as_ref());
    let g = &r.generator;
    head.extend(["cpu_user_s", "cpu_sys_s", "aborted"].map(String::from));
    row.push(format!("{:.6}", g.cpu_user_s));
    row.push(format!("{:.6}", g.cpu_sys_s));
    row.push(
        r.aborted
            .as_deref()
            .map_or(String::new(), |a| format!("\"{}\"", a.replace('"', "\"\""))),
    );
    format!("{}\n{}\n", head.join(","), row.join(","))
}
