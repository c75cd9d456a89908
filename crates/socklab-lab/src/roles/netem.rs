//! `netem`'s roles: a command run across an emulated link (with a server in the server
//! namespace), and the lasting link: its daemon, `up`, `down`, `exec`, `list`, `cleanup`.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use socklab_link::capture::{Capture, CaptureConfig};
use socklab_link::ns::{self, Side};
use socklab_link::{EmulatedLink, LinkConfig, LinkError, LinkReport};
use socklab_sys::process::{
    child_dies_with_parent, dies_with_parent, install_interrupt_flag, interrupted, kill, Signal,
};

use super::argv::{shown, Role, RoleArgs};
use super::RoleError;

/// A link error as `netem` reports it: a refused value is a usage error, anything else a
/// failed run.
impl From<LinkError> for RoleError {
    fn from(e: LinkError) -> Self {
        net(e)
    }
}

pub(super) fn net(e: LinkError) -> RoleError {
    match e {
        LinkError::Invalid(m) => RoleError::Usage(m),
        other => RoleError::Run(other.to_string()),
    }
}

/// Writes `s` to stdout at once.
fn out(s: &str) -> Result<(), RoleError> {
    Ok(super::out(s)?)
}

/// Pretty JSON and a newline on stdout.
fn out_json(v: &serde_json::Value) -> Result<(), RoleError> {
    out(&format!(
        "{}\n",
        serde_json::to_string_pretty(v).unwrap_or_default()
    ))
}

pub fn describe(link: &EmulatedLink) -> Result<String, LinkError> {
    let n = link.namespaces()?;
    Ok(format!(
        "link {} <-> {} (driver {}, seed {}): {}; client {}, server {}",
        n.name(Side::Client),
        n.name(Side::Server),
        link.driver(),
        link.seed(),
        link.pair().describe(),
        ns::CLIENT_ADDR,
        ns::SERVER_ADDR
    ))
}

/// The queue discipline's drops and marks, netem's ECN marks and the wait at the bottleneck,
/// when there was any (issue 19).
fn bottleneck_line(st: &socklab_link::Stats) -> Option<String> {
    (st.aqm_dropped + st.aqm_marked + st.loss_marked + st.queue_delay_sum_ns > 0).then(|| {
        format!(
            "aqm {} dropped, {} ECN-marked; loss ECN-marked {}; bottleneck wait mean {:.3} ms max {:.3} ms",
            st.aqm_dropped,
            st.aqm_marked,
            st.loss_marked,
            st.mean_queue_delay_ns() / 1e6,
            st.queue_delay_max_ns as f64 / 1e6
        )
    })
}

/// The emulator's accounting as a few lines for stderr.
pub fn accounting(r: &LinkReport) -> String {
    let mut s = String::new();
    for (name, d) in [
        ("client->server", &r.forward),
        ("server->client", &r.backward),
    ] {
        let st = &d.stats;
        s += &format!(
            "  {name}: {} packets in, {} dropped, {} duplicated, {} corrupted, {} reordered, {} queue-dropped, {} delivered; kernel drops {}; lag mean {:.1} us p50 {} p99 {} p99.9 {} max {:.1} us, {} late; emulator CPU {:.3} s (sched {}, spin {:.0} us)\n",
            st.packets_in,
            st.dropped,
            st.duplicated,
            st.corrupted,
            st.reordered,
            st.queue_dropped,
            st.delivered,
            d.kernel_drops,
            d.mean_lag_us(),
            d.lag_hist.quantile_us(0.5),
            d.lag_hist.quantile_us(0.99),
            d.lag_hist.quantile_us(0.999),
            d.max_lag_ns as f64 / 1000.0,
            d.late,
            d.cpu_ns as f64 / 1e9,
            d.sched.as_str(),
            d.spin_ns as f64 / 1000.0
        );
        if let Some(line) = bottleneck_line(st) {
            s += &format!("  {name}: {line}\n");
        }
        if d.write_errors > 0 {
            s += &format!(
                "  {name}: {} packets lost because writing them to the far TUN device failed\n",
                d.write_errors
            );
        }
    }
    match r.invalid_reason() {
        Some(why) => s += &format!("  INVALID: {why}\n"),
        None => s += &format!("  valid ({})\n", r.rule.describe()),
    }
    s
}

/// Closes a capture and says what it holds on stderr.
pub fn close_capture(c: Option<Capture>) -> Result<Option<serde_json::Value>, LinkError> {
    let Some(c) = c else { return Ok(None) };
    let s = c.finish()?;
    eprintln!("socklab netem: {}", s.describe());
    Ok(Some(serde_json::json!({
        "file": s.path.display().to_string(),
        "packets": s.packets,
        "not_captured_behind": s.behind,
        "not_captured_limit": s.over_limit,
        "bytes": s.bytes,
    })))
}

/// Waits until something in the process's namespace listens (TCP) or has a UDP socket
/// (read from /proc/PID/net, which shows the namespace of PID), at most `limit`. PID is `ip
/// netns exec`, which starts in our namespace: until it has entered `netns` (the same nsfs
/// inode), /proc/PID/net shows ours, whose listeners are not the server's.
fn wait_listening(pid: u32, netns: &std::path::Path, limit: Duration) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &std::path::Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    let target = ino(netns);
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if target.is_none() || ino(format!("/proc/{pid}/ns/net").as_ref()) != target {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let tcp_listen = ["tcp", "tcp6"].iter().any(|f| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
                t.lines()
                    .skip(1)
                    .any(|l| l.split_whitespace().nth(3) == Some("0A"))
            })
        });
        let udp = ["udp", "udp6"].iter().any(|f| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
                .is_ok_and(|t| t.lines().count() > 1)
        });
        if tcp_listen || udp {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn stop_child(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = kill(child.id(), Signal::Term);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// `netem -- CMD`: builds the link `cfg` (its packets into `capture`), starts `server` (a
/// shell command) in the server namespace and waits until it listens, runs `cmd` in the
/// client namespace, and prints the emulator's accounting (as JSON with `json`) on stderr.
/// Ends with `cmd`'s exit code.
pub fn run_across(
    cfg: &LinkConfig,
    capture: Option<Capture>,
    server: Option<&str>,
    cmd: &[String],
    json: bool,
) -> Result<(), RoleError> {
    let link =
        EmulatedLink::start_with(cfg, capture.as_ref().and_then(Capture::tap)).map_err(net)?;
    eprintln!("socklab netem: {}", describe(&link).map_err(net)?);
    let mut server_child = None;
    if let Some(s) = server {
        let mut c = link.namespaces().map_err(net)?.command(Side::Server, "sh");
        // The server's output goes to stderr: stdout belongs to the command (its JSON, say).
        let err = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned()?;
        c.args(["-c", s])
            .stdin(Stdio::null())
            .stdout(Stdio::from(err));
        child_dies_with_parent(&mut c);
        let mut child = c
            .spawn()
            .map_err(|e| RoleError::Run(format!("cannot start `server` '{s}': {e}")))?;
        let netns = link.namespaces().map_err(net)?.path(Side::Server);
        if !wait_listening(child.id(), &netns, Duration::from_secs(5)) {
            stop_child(&mut child);
            return Err(RoleError::Run(format!(
                "`server` '{s}' did not start listening within 5 s"
            )));
        }
        server_child = Some(child);
    }
    let mut c = link
        .namespaces()
        .map_err(net)?
        .command(Side::Client, &cmd[0]);
    c.args(&cmd[1..]);
    // CMD dies with us, even by SIGKILL: `ip netns exec` execs CMD in place, which keeps the
    // parent-death signal. It stays in our process group, so a terminal's Ctrl-C reaches it
    // as before.
    dies_with_parent(&mut c);
    // With a capture the command's run is its window 1, so its counts and its comments agree.
    let window = capture.as_ref().map(|c| c.window(&cmd.join(" ")));
    let before = link.mark(window);
    let mut child = c
        .spawn()
        .map_err(|e| RoleError::Run(format!("cannot start '{}': {e}", cmd.join(" "))))?;
    let status = loop {
        if interrupted() {
            stop_child(&mut child);
            break None;
        }
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(RoleError::Run(format!("waiting for the command: {e}"))),
        }
    };
    if let Some(mut s) = server_child {
        stop_child(&mut s);
    }
    let report = link.mark(window.map(|_| 0)).since(&before);
    link.stop().map_err(net)?;
    let cap = close_capture(capture).map_err(net)?;
    if json {
        let mut v = report.to_json();
        v["capture"] = cap.unwrap_or_default();
        eprintln!("{v}");
    } else {
        eprint!(
            "socklab netem: emulator accounting\n{}",
            accounting(&report)
        );
    }
    match status {
        None => Err(RoleError::Interrupted(
            "interrupted; the link and its namespaces were removed".into(),
        )),
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(RoleError::Exit(st.code().map_or(1, |c| c as u8))),
    }
}

/// `netem up`: starts the lasting link `name` (`cfg`, its packets into `capture`) in a
/// daemon of its own (`netem daemon`), waits until it is ready, and says how to use it.
pub fn up(
    name: &str,
    cfg: &LinkConfig,
    capture: Option<CaptureConfig>,
    json: bool,
) -> Result<(), RoleError> {
    ns::require_root("socklab netem up").map_err(net)?;
    if let Some(pid) = ns::read_pid_file(name).filter(|&p| ns::alive(p)) {
        return Err(RoleError::Run(format!(
            "the link {name} is already up (pid {pid}): 'socklab netem down {name}' first"
        )));
    }
    std::fs::create_dir_all(ns::STATE_DIR)?;
    let log = ns::state_file(name, "log");
    let logf = std::fs::File::create(&log)?;
    let exe = std::env::current_exe()?;
    // The daemon's capture file is opened from its own directory: the path goes absolute.
    let absolute = capture.as_ref().map(|c| CaptureConfig {
        path: std::path::absolute(&c.path).unwrap_or_else(|_| c.path.clone()),
        ..c.clone()
    });
    let daemon = RoleArgs::from(Role::NetemDaemon {
        name: name.to_string(),
        link: Box::new(cfg.clone()),
        capture: absolute,
    });
    let mut c = Command::new(exe);
    c.args(daemon.to_argv())
        .stdin(Stdio::null())
        .stdout(logf.try_clone()?)
        .stderr(logf)
        .process_group(0);
    let mut child = c.spawn()?;
    let t0 = Instant::now();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let last = text.lines().last().unwrap_or("no message").to_string();
            return Err(RoleError::Run(format!("the link did not come up: {last}")));
        }
        if std::fs::read_to_string(&log).is_ok_and(|t| t.contains("READY")) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            return Err(RoleError::Run(
                "the link did not come up within 15 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if json {
        return out_json(&serde_json::json!({
            "name": name,
            "pid": child.id(),
            "client_namespace": ns::ns_name(name, Side::Client),
            "server_namespace": ns::ns_name(name, Side::Server),
            "client": ns::CLIENT_ADDR.to_string(),
            "server": ns::SERVER_ADDR.to_string(),
            "capture": capture.map(|c| c.path.display().to_string()),
        }));
    }
    out(&format!(
        "{name}: up (pid {}): namespaces {} (client, {}) and {} (server, {})\n  run: socklab netem exec {name} server -- CMD   /   socklab netem exec {name} client -- CMD\n  stop: socklab netem down {name}\n",
        child.id(),
        ns::ns_name(name, Side::Client),
        ns::CLIENT_ADDR,
        ns::ns_name(name, Side::Server),
        ns::SERVER_ADDR
    ))
}

/// `netem daemon`: keeps the lasting link `name` until SIGINT/SIGTERM (`netem down`); says
/// `READY` once it is up, and its accounting at the end.
pub fn daemon(name: &str, cfg: &LinkConfig, capture: Option<Capture>) -> Result<(), RoleError> {
    install_interrupt_flag()?;
    let link =
        EmulatedLink::start_with(cfg, capture.as_ref().and_then(Capture::tap)).map_err(net)?;
    std::fs::write(ns::state_file(name, "pid"), std::process::id().to_string())?;
    std::fs::write(ns::state_file(name, "spec"), describe(&link).map_err(net)?)?;
    println!("READY {}", describe(&link).map_err(net)?);
    let _ = std::io::stdout().flush();
    while !interrupted() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = link.report();
    link.stop().map_err(net)?;
    close_capture(capture).map_err(net)?;
    println!("stopped; emulator accounting\n{}", accounting(&r));
    for ext in ["pid", "spec"] {
        let _ = std::fs::remove_file(ns::state_file(name, ext));
    }
    Ok(())
}

/// `netem down`: stops the lasting link `name` and removes its namespaces and files.
pub fn down(name: &str, json: bool) -> Result<(), RoleError> {
    ns::require_root("socklab netem down").map_err(net)?;
    let mut found = false;
    if let Some(pid) = ns::read_pid_file(name).filter(|&p| ns::alive(p)) {
        found = true;
        kill(pid, Signal::Term)?;
        let t0 = Instant::now();
        while ns::alive(pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for side in [Side::Client, Side::Server] {
        let n = ns::ns_name(name, side);
        if ns::exists(&n) {
            found = true;
            ns::remove_namespace(&n).map_err(net)?;
        }
    }
    for ext in ["pid", "spec", "log"] {
        let _ = std::fs::remove_file(ns::state_file(name, ext));
    }
    if !found {
        return Err(RoleError::Run(format!(
            "no link named {name} (see 'socklab netem list')"
        )));
    }
    if json {
        return out_json(&serde_json::json!({ "name": name, "down": true }));
    }
    out(&format!("{name}: down\n"))
}

/// `netem exec`: runs `cmd` in place of this process in the namespace of `side` of the
/// lasting link `name`.
pub fn exec(name: &str, side: Side, cmd: &[String]) -> Result<(), RoleError> {
    let n = ns::ns_name(name, side);
    if !ns::exists(&n) {
        return Err(RoleError::Run(format!(
            "no namespace {n}: start the link with '{}'",
            shown::netem_up(name)
        )));
    }
    let e = ns::command_in(&n, &cmd[0]).args(&cmd[1..]).exec();
    Err(RoleError::Run(format!("cannot run ip netns exec: {e}")))
}

/// `netem list`: the `sl-` namespaces, their owners and specs.
pub fn list(json: bool) -> Result<(), RoleError> {
    let mut s = String::new();
    let mut rows = Vec::new();
    for n in ns::list_namespaces() {
        let owner = ns::owner(&n);
        let alive = owner.is_some_and(ns::alive);
        let tag = ns::tag_of(&n).unwrap_or("");
        let spec = std::fs::read_to_string(ns::state_file(tag, "spec")).unwrap_or_default();
        rows.push(serde_json::json!({
            "namespace": n,
            "owner": owner,
            "running": alive,
            "spec": spec.trim(),
        }));
        s += &format!(
            "{n}\towner {}\t{}\t{}\n",
            owner.map_or("?".into(), |p| p.to_string()),
            if alive {
                "running"
            } else {
                "LEFTOVER (socklab netem cleanup)"
            },
            spec.trim()
        );
    }
    if json {
        return out_json(&serde_json::Value::Array(rows));
    }
    if s.is_empty() {
        s = "no sl- namespaces\n".into();
    }
    out(&s)
}

/// `netem cleanup`: removes the leftovers of dead runs (`all`: of live ones too).
pub fn cleanup(all: bool, json: bool) -> Result<(), RoleError> {
    let done = ns::cleanup(all).map_err(net)?;
    if json {
        return out_json(&serde_json::json!({
            "removed_namespaces": done.removed,
            "removed_interfaces": done.links,
            "removed_files": done.files,
            "kept": done.skipped,
        }));
    }
    let mut s = String::new();
    for n in &done.removed {
        s += &format!("removed namespace {n}\n");
    }
    for n in &done.links {
        s += &format!("removed interface {n}\n");
    }
    for n in &done.files {
        s += &format!("removed {n}\n");
    }
    for n in &done.skipped {
        s += &format!(
            "kept {n}: its socklab process still runs ({} removes it)\n",
            shown::netem_cleanup_all()
        );
    }
    if s.is_empty() {
        s = "nothing to clean\n".into();
    }
    out(&s)
}
