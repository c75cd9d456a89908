//! `socklab transfer`: the server, the client, and the measured experiment (both sides spawned
//! by the Runner, like `bulk` and `pingpong`).

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;

use serde_json::json;
use socklab_lab::flags::{self, Given, Rules};
use socklab_lab::params::Key;
use socklab_lab::plan::Plan;
use socklab_lab::store::Store;
use socklab_lab::table::{num, Table};
use socklab_lab::workload::{check_tcp_cc, parse_target, transfer, Proto, Target};
use socklab_net::transfer::tcp::{DEFAULT_MAX_SESSIONS, IDLE_TIMEOUT};
use socklab_net::transfer::{
    FileOutcome, ReceiveLimits, ServerSession, SessionLimits, SessionLog, TcpServeOptions,
    TransferReport,
};
use socklab_net::units::{format_duration, format_size, parse_duration, parse_size};
use socklab_sys::process::{install_interrupt_flag, interrupt_flag};

use crate::cli::{TransferArgs, TransferCommand, TransferSendArgs, TransferServeArgs};
use crate::commands::{
    command_line, list_axis, order_seed, out, parse_bind, parse_order, run_and_print,
    server_started, usage, Failure,
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
        .map_err(|e: socklab_net::ParseNameError| usage(format!("--proto '{s}': {e}")))
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

/// The receiving directory: created if missing; a file there is an error.
fn prepare_dir(dir: &Path) -> Result<(), Failure> {
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!(
            "--dir '{}' is a file, not a directory: name a directory (it is created if missing)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        usage(format!(
            "--dir '{}' cannot be created ({e}): name a directory you can write to",
            dir.display()
        ))
    })
}

fn session_line(s: &ServerSession) -> String {
    let ok = s.files.iter().filter(|f| f.ok).count();
    let secs = s.total_ns as f64 / 1e9;
    let mut l = format!(
        "session from {}: {ok}/{} files ok, {} written in {} s ({} Mbit/s)",
        s.peer,
        s.files.len(),
        format_size(s.bytes),
        num(secs),
        num(s.bytes as f64 * 8.0 / secs.max(1e-9) / 1e6)
    );
    if !s.cc.is_empty() {
        l.push_str(&format!(", cc {}", s.cc));
    }
    if let Some(e) = &s.error {
        l.push_str(&format!(", failed: {}", crate::flags::in_flags(e, &[])));
    }
    l
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
fn log_line(log: &SessionLog) -> String {
    let mut l = format!(
        "sessions = {} ({} failed, {} open at the stop): files {} ok, {} failed, {} written",
        log.sessions,
        log.failed,
        log.open_at_stop,
        log.files_ok,
        log.files_failed,
        format_size(log.bytes)
    );
    if log.refused + log.evicted + log.idle_closed > 0 {
        l.push_str(&format!(
            "; refused {} (server full), evicted {} and closed {} without progress",
            log.refused, log.evicted, log.idle_closed
        ));
    }
    if log.recent().len() as u64 != log.sessions {
        l.push_str(&format!("; the last {} shown", log.recent().len()));
    }
    l
}

fn serve(a: TransferServeArgs, dry: bool) -> Result<(), Failure> {
    let proto = parse_proto(&a.proto)?;
    let cc = tcp_cc(proto, a.tcp_cc.as_deref())?;
    let rudp_sessions = session_limits(proto, a.max_sessions_per_source)?;
    let ip = parse_bind(&a.bind)?;
    let mut limits = serve_limits(&a, proto)?;
    limits.tcp.cc = cc.clone();
    if dry {
        if a.dir.exists() && !a.dir.is_dir() {
            return Err(usage(format!(
                "--dir '{}' is a file, not a directory: name a directory (it is created if missing)",
                a.dir.display()
            )));
        }
        return crate::dryrun::print_checked(&format!(
            "socklab transfer serve would listen on {} ({}) and write into '{}'",
            SocketAddr::new(ip, a.port),
            proto.as_str(),
            a.dir.display()
        ));
    }
    prepare_dir(&a.dir)?;
    let _remove = a.remove_dir_at_exit.then(|| RemoveAtExit(a.dir.clone()));
    let run = |e: socklab_net::transfer::TransferError| Failure::Run(e.to_string());
    if let Some(age) = limits.partial_max_age {
        let r = socklab_net::transfer::reclaim_partials(&a.dir, age).map_err(run)?;
        if r.files > 0 && !a.quiet {
            eprintln!(
                "reclaimed {} partial file(s) ({} bytes) older than {} in '{}'",
                r.files,
                r.bytes,
                format_duration(age),
                a.dir.display()
            );
        }
    }
    let bind = SocketAddr::new(ip, a.port);
    let log = match proto {
        Proto::Tcp => {
            let listener =
                socklab_net::sink::listen(bind).map_err(|e| Failure::Run(e.to_string()))?;
            let addr = listener.local_addr()?;
            announce(addr, &a, proto, cc.as_deref())?;
            socklab_net::transfer::serve_tcp_with(
                listener,
                &a.dir,
                &limits.tcp,
                interrupt_flag(),
                a.once,
            )
            .map(SessionLog::from_sessions)
            .map_err(run)?
        }
        Proto::Rudp => {
            let socket = UdpSocket::bind(bind)
                .map_err(|e| Failure::Run(format!("cannot bind UDP {bind}: {e}")))?;
            let addr = socket.local_addr()?;
            announce(addr, &a, proto, None)?;
            socklab_net::transfer::serve_rudp_with(
                socket,
                &a.dir,
                &socklab_rudp::Config::default(),
                &limits.tcp.limits,
                &rudp_sessions,
                interrupt_flag(),
                a.once,
            )
            .map_err(run)?
        }
    };
    if !a.quiet {
        for s in log.recent() {
            eprintln!("{}", session_line(s));
        }
        eprintln!("{}", log_line(&log));
    }
    // With --once the first session to end decides (others were interrupted by its end).
    let first_error = log.recent().next().and_then(|s| s.error.clone());
    match first_error {
        Some(e) if a.once => Err(Failure::Run(format!("the transfer failed: {e}"))),
        _ => Ok(()),
    }
}

/// Removes a receiving directory when dropped (`--remove-dir-at-exit`).
struct RemoveAtExit(std::path::PathBuf);

impl Drop for RemoveAtExit {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn announce(
    addr: SocketAddr,
    a: &TransferServeArgs,
    proto: Proto,
    cc: Option<&str>,
) -> Result<(), Failure> {
    server_started(addr, a.announce)?;
    if !a.quiet {
        eprintln!(
            "socklab transfer serve listening on {addr} ({}{}) into '{}'; {}",
            proto.as_str(),
            cc.map(|c| format!(", cc {c}")).unwrap_or_default(),
            a.dir.display(),
            if a.once {
                "stops after one transfer"
            } else {
                "Ctrl-C stops"
            }
        );
    }
    Ok(())
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
    install_interrupt_flag()?;
    let run = |e: socklab_net::transfer::TransferError| Failure::Run(e.to_string());
    let r =
        socklab_net::transfer::send(proto, to, &a.files, cc.as_deref(), timeout).map_err(run)?;
    let (summary, extra) = match &r {
        TransferReport::Tcp(r) => (
            format!(
                "cc {}, retransmissions {} segments (tcpi_total_retrans), srtt {} us, min rtt {} us, segments out {}",
                r.cc, r.total_retrans, r.rtt_us, r.tcp.min_rtt_us, r.segs_out
            ),
            json!({
                "cc": r.cc, "total_retrans": r.total_retrans, "srtt_us": r.rtt_us,
                "min_rtt_us": r.tcp.min_rtt_us, "segs_out": r.segs_out,
            }),
        ),
        TransferReport::Rudp(r) => {
            let st = &r.stats;
            (
                format!(
                    "retransmitted packets {}, spurious losses {}, srtt {} us, min rtt {} us, packets sent {}, received {}",
                    st.retransmitted_packets,
                    st.spurious_losses,
                    num(st.srtt_ns as f64 / 1000.0),
                    num(st.min_rtt_ns as f64 / 1000.0),
                    st.packets_sent,
                    st.packets_received
                ),
                json!({
                    "retransmitted_packets": st.retransmitted_packets,
                    "spurious_losses": st.spurious_losses, "lost_packets": st.lost_packets,
                    "srtt_us": st.srtt_ns as f64 / 1000.0, "min_rtt_us": st.min_rtt_ns as f64 / 1000.0,
                    "packets_sent": st.packets_sent, "packets_received": st.packets_received,
                }),
            )
        }
    };
    let (files, per_file, total_ns, bytes) =
        (r.files(), r.per_file_retransmits(), r.total_ns(), r.bytes());
    let secs = total_ns as f64 / 1e9;
    let goodput = bytes as f64 * 8.0 / secs.max(1e-9) / 1e6;
    if a.json {
        let files: Vec<serde_json::Value> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                json!({"name": f.name, "size": f.size, "ok": f.ok, "retransmissions": per_file.get(i)})
            })
            .collect();
        let mut v = json!({
            "proto": proto.as_str(), "to": to.to_string(), "total_s": secs,
            "goodput_mbps": goodput, "bytes": bytes, "files": files,
        });
        if let (Some(v), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            v.extend(e.clone());
        }
        return out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ));
    }
    out(&file_table(files, per_file).to_text())?;
    out(&format!(
        "{} files, {} in {} s: goodput {} Mbit/s ({}); {summary}\n",
        files.len(),
        format_size(bytes),
        num(secs),
        num(goodput),
        proto.as_str()
    ))
}

fn file_table(files: &[FileOutcome], per_file: &[u64]) -> Table {
    let mut t = Table::new(&["file", "bytes", "ok", "retx"]);
    t.left = vec![true, false, true, false];
    for (i, f) in files.iter().enumerate() {
        t.row(vec![
            f.name.clone(),
            f.size.to_string(),
            if f.ok { "ok" } else { f.detail.as_str() }.to_string(),
            per_file
                .get(i)
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    t
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
