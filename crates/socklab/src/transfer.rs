//! `socklab transfer`: the server, the client, and the measured experiment (both sides spawned
//! by the Runner, like `bulk` and `pingpong`).

use std::net::SocketAddr;
use std::path::Path;

use socklab_lab::flags::{self, Given, Rules};
use socklab_lab::params::Key;
use socklab_lab::plan::Plan;
use socklab_lab::store::Store;

use socklab_lab::roles::{self, Say};
use socklab_lab::workload::{check_tcp_cc, parse_target, transfer, Proto, Target};
use socklab_sys::process::install_interrupt_flag;
use socklab_transfer::tcp::{DEFAULT_MAX_SESSIONS, IDLE_TIMEOUT};
use socklab_transfer::{ReceiveLimits, SessionLimits, TcpServeOptions};
use socklab_units::{parse_duration, parse_size};

use crate::cli::{TransferArgs, TransferCommand, TransferSendArgs, TransferServeArgs};
use crate::commands::{
    command_line, list_axis, order_seed, out, parse_bind, parse_order, run_and_print, usage,
    Failure,
};

pub fn transfer(a: TransferArgs, dry: bool) -> Result<(), Failure> {
    match a.action {
        Some(TransferCommand::Serve(s)) => serve(s, dry),
        Some(TransferCommand::Send(s)) => send(s, dry),
        None => experiment(a, dry),
    }
}

fn parse_proto(s: &str) -> Result<Proto, Failure> {
    s.parse()
        .map_err(|e: socklab_transfer::ParseProtoError| usage(format!("--proto '{s}': {e}")))
}

/// `--tcp-cc` of a single transfer: checked for tcp (default cubic: always set, since this
/// kernel's default may be another), refused for rudp.
fn tcp_cc(proto: Proto, cc: Option<&str>) -> Result<Option<String>, Failure> {
    match (proto, cc) {
        (Proto::Tcp, Some(c)) => check_tcp_cc(c)
            .map(Some)
            .map_err(|e| usage(format!("--tcp-cc '{c}': {e}"))),
        (Proto::Tcp, None) => Ok(Some("cubic".into())),
        (Proto::Rudp, Some(c)) => Err(usage(format!(
            "--tcp-cc '{c}' applies to --proto tcp: rudp has its own congestion control; leave it out"
        ))),
        (Proto::Rudp, None) => Ok(None),
    }
}

fn parse_timeout(text: &str) -> Result<std::time::Duration, Failure> {
    match parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(usage(format!(
            "--timeout '{text}': give the transfer some time, e.g. --timeout 60s"
        ))),
        Err(e) => Err(usage(format!("--timeout {e}"))),
    }
}

// --------------------------------------------------------------------------------------- serve

/// `--dir`: created if missing; a file there is an error (the role's, with its flag).
fn prepare_dir(dir: &Path) -> Result<(), Failure> {
    roles::transfer::prepare_dir(dir).map_err(|e| usage(format!("--dir {e}")))
}

/// Most sessions `--max-sessions` may allow (each is a thread).
const MAX_MAX_SESSIONS: u64 = 4096;

/// The checked `transfer serve` limits.
struct ServeLimits {
    tcp: TcpServeOptions,
    partial_max_age: Option<std::time::Duration>,
}

/// `--max-file-size SIZE|off`.
fn parse_max_file_size(text: &str) -> Result<Option<u64>, Failure> {
    if text.trim() == "off" {
        return Ok(None);
    }
    match parse_size(text) {
        Ok(0) => Err(usage(format!(
            "--max-file-size '{text}': give a positive size such as 64G, or off for no limit"
        ))),
        Ok(n) => Ok(Some(n)),
        Err(e) => Err(usage(format!("--max-file-size {e} (or off for no limit)"))),
    }
}

/// `--partial-max-age AGE|off`: a duration, or whole days as `7d`.
fn parse_partial_max_age(text: &str) -> Result<Option<std::time::Duration>, Failure> {
    let t = text.trim();
    if t == "off" {
        return Ok(None);
    }
    let bad = |why: String| usage(format!("--partial-max-age {why} (or off to keep them)"));
    let d = match t.strip_suffix('d').map(str::parse::<u64>) {
        Some(Ok(days)) if days <= 100_000 => std::time::Duration::from_secs(days * 86_400),
        Some(_) => {
            return Err(bad(format!(
                "'{text}': give whole days up to 100000, e.g. 7d"
            )))
        }
        None => parse_duration(t).map_err(bad)?,
    };
    if d.is_zero() {
        return Err(bad(format!(
            "'{text}' would remove the partial files of transfers still running: give e.g. 7d"
        )));
    }
    Ok(Some(d))
}

fn serve_limits(a: &TransferServeArgs, proto: Proto) -> Result<ServeLimits, Failure> {
    let tcp_only = |flag: &str, given: bool| {
        if given && proto == Proto::Rudp {
            Err(usage(format!(
                "{flag} applies to --proto tcp (rudp has its own session table and idle timeout): leave it out"
            )))
        } else {
            Ok(())
        }
    };
    tcp_only("--max-sessions", a.max_sessions.is_some())?;
    tcp_only("--idle-timeout", a.idle_timeout.is_some())?;
    let max_sessions = match a.max_sessions {
        None => DEFAULT_MAX_SESSIONS,
        Some(n) if (1..=MAX_MAX_SESSIONS).contains(&n) => n as usize,
        Some(n) => {
            return Err(usage(format!(
                "--max-sessions {n}: give 1 to {MAX_MAX_SESSIONS} (each session is a thread)"
            )))
        }
    };
    let idle_timeout = match &a.idle_timeout {
        None => IDLE_TIMEOUT,
        Some(t) => match parse_duration(t) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                return Err(usage(format!(
                    "--idle-timeout '{t}': give the client some time, e.g. --idle-timeout 30s"
                )))
            }
            Err(e) => return Err(usage(format!("--idle-timeout {e}"))),
        },
    };
    let limits = ReceiveLimits {
        max_file_size: parse_max_file_size(&a.max_file_size)?,
        ..ReceiveLimits::default()
    };
    Ok(ServeLimits {
        tcp: TcpServeOptions {
            cc: None,
            max_sessions,
            idle_timeout,
            limits,
        },
        partial_max_age: parse_partial_max_age(&a.partial_max_age)?,
    })
}

/// The rudp session limits from `--max-sessions-per-source` (refused for tcp).
fn session_limits(proto: Proto, per_source: Option<usize>) -> Result<SessionLimits, Failure> {
    let mut limits = SessionLimits::default();
    match (proto, per_source) {
        (_, None) => {}
        (Proto::Tcp, Some(n)) => {
            return Err(usage(format!(
                "--max-sessions-per-source {n} applies to --proto rudp; leave it out for tcp"
            )))
        }
        (Proto::Rudp, Some(n)) if n == 0 || n > limits.max_sessions => {
            return Err(usage(format!(
                "--max-sessions-per-source {n}: give 1 to {} (the server's session table)",
                limits.max_sessions
            )))
        }
        (Proto::Rudp, Some(n)) => limits.max_per_source = n,
    }
    Ok(limits)
}

/// The summary line of a server's sessions, printed at its end after the last few sessions.
fn serve(a: TransferServeArgs, dry: bool) -> Result<(), Failure> {
    let proto = parse_proto(&a.proto)?;
    let cc = tcp_cc(proto, a.tcp_cc.as_deref())?;
    let rudp_sessions = session_limits(proto, a.max_sessions_per_source)?;
    let ip = parse_bind(&a.bind)?;
    let mut limits = serve_limits(&a, proto)?;
    limits.tcp.cc = cc.clone();
    if dry {
        if a.dir.exists() && !a.dir.is_dir() {
            let e = roles::transfer::DirError::IsAFile(a.dir.clone());
            return Err(usage(format!("--dir {e}")));
        }
        return crate::dryrun::print_checked(&format!(
            "socklab transfer serve would listen on {} ({}) and write into '{}'",
            SocketAddr::new(ip, a.port),
            proto.as_str(),
            a.dir.display()
        ));
    }
    prepare_dir(&a.dir)?;
    let cfg = roles::transfer::ServeConfig {
        proto,
        bind: SocketAddr::new(ip, a.port),
        dir: a.dir.clone(),
        tcp: limits.tcp,
        rudp_sessions,
        partial_max_age: limits.partial_max_age,
        once: a.once,
        remove_dir_at_exit: a.remove_dir_at_exit,
        words: |m| crate::flags::in_flags(m, &[]),
    };
    let say = Say {
        announce: a.announce,
        quiet: a.quiet,
    };
    Ok(roles::transfer::serve(&cfg, say)?)
}

// ---------------------------------------------------------------------------------------- send

fn send(a: TransferSendArgs, dry: bool) -> Result<(), Failure> {
    let proto = parse_proto(&a.proto)?;
    let cc = tcp_cc(proto, a.tcp_cc.as_deref())?;
    let to = match parse_target(&a.to) {
        Ok(Target::Addr(addr)) => addr,
        Ok(Target::SelfSink) => {
            return Err(usage(format!(
                "--to '{}': give the server as HOST:PORT, e.g. 127.0.0.1:9000",
                a.to
            )))
        }
        Err(e) => return Err(usage(format!("--to '{}': {e}", a.to))),
    };
    let timeout = parse_timeout(&a.timeout)?;
    for f in &a.files {
        if !f.is_file() {
            return Err(usage(format!(
                "'{}' {}: name the files to send",
                f.display(),
                if f.exists() {
                    "is not a regular file"
                } else {
                    "does not exist"
                }
            )));
        }
    }
    if dry {
        return crate::dryrun::print_checked(&format!(
            "socklab transfer send would send {} file(s) to {to} over {}",
            a.files.len(),
            proto.as_str()
        ));
    }
    let cfg = roles::transfer::SendConfig {
        proto,
        to,
        files: a.files.clone(),
        cc,
        timeout,
        json: a.json,
    };
    out(&roles::transfer::send(&cfg)?)
}

// ---------------------------------------------------------------------------------- experiment

/// The plan of `socklab transfer`: the keys given, one group per protocol (`tcp_cc` varies
/// for tcp only: rudp records n/a).
fn transfer_plan(a: &TransferArgs) -> Result<Plan, Failure> {
    let k = &a.keys;
    let split = ["proto", "tcp_cc"];
    let rest: Vec<Given> = k
        .given
        .iter()
        .filter(|g| !split.contains(&g.key.name))
        .cloned()
        .collect();
    let base = flags::group("transfer", &rest, &Rules::default())?;
    let listed = |key: &Key| match k.values(key.name) {
        Some(v) => v.to_vec(),
        None => key.default.split(',').map(str::to_string).collect(),
    };
    let mut protos: Vec<String> = Vec::new();
    for p in listed(&transfer::PROTO) {
        if !protos.contains(&p) {
            protos.push(p);
        }
    }
    let mut groups = Vec::new();
    for p in protos {
        let mut g = base.clone();
        g.fixed.set("proto", p.as_str());
        if p.trim() == "tcp" {
            list_axis(
                "tcp_cc",
                &listed(&transfer::TCP_CC),
                &mut g.axes,
                &mut g.fixed,
            );
        }
        a.link.add_to(&mut g);
        groups.push(g);
    }
    let order = parse_order(&k.order, order_seed(k.value("seed"))?)?;
    Ok(Plan::build(
        &k.name,
        "",
        &groups,
        k.reps,
        k.warmup,
        order,
        &command_line(),
    )?)
}

fn experiment(a: TransferArgs, dry: bool) -> Result<(), Failure> {
    let hosts = a.hosts.plan()?;
    let plan = transfer_plan(&a)?;
    let capture = a.link.workload_capture()?;
    if dry {
        return crate::dryrun::print_plan(&crate::dryrun::keeping_invalid(
            plan,
            a.format.keep_invalid,
        ));
    }
    let mut store = Store::open(&a.db.db)?;
    install_interrupt_flag()?;
    let id = run_and_print(&plan, &mut store, &hosts, &a.format, capture.as_ref())?;
    failed_repetitions(&store, id)
}

/// A repetition that failed is stored with `failed = 1` and its reason; the command still
/// exits 1 so scripts notice.
fn failed_repetitions(store: &Store, id: i64) -> Result<(), Failure> {
    let samples = store.samples(id)?;
    let failed = samples
        .iter()
        .filter(|s| s.metrics.get("failed").copied() == Some(1.0))
        .count();
    if failed == 0 {
        return Ok(());
    }
    Err(Failure::Run(format!(
        "{failed} of {} repetitions failed (stored with failed = 1; the reasons: socklab results export {id} --json --db {})",
        samples.len(),
        store.path().display()
    )))
}
