//! `socklab netem`: emulated links from the command line.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use socklab_link::capture::{Capture, CaptureConfig};
use socklab_link::ns::{self, Side};
use socklab_link::{Driver, EmulatedLink, LinkConfig, LinkReport};
use socklab_link::{LinkError, LinkKeyError};
use socklab_net::NetError;
use socklab_sys::process::{
    child_dies_with_parent, dies_with_parent, install_interrupt_flag, interrupted, kill, Signal,
};

use crate::cli::{LinkArgs, NetemArgs, NetemCommand};
use crate::commands::{out, usage, Failure};
use crate::dryrun;

impl From<NetError> for Failure {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Invalid(m) => Failure::Usage(m),
            NetError::Interrupted => Failure::Interrupted("interrupted".into()),
            other => Failure::Run(other.to_string()),
        }
    }
}

impl From<LinkError> for Failure {
    fn from(e: LinkError) -> Self {
        match e {
            LinkError::Invalid(m) => Failure::Usage(m),
            other => Failure::Run(other.to_string()),
        }
    }
}

impl LinkArgs {
    /// The link configuration (`tag`: a lasting link's name), parsed by
    /// [`LinkConfig::from_keys`] like a workload's keys; errors name the flag.
    pub fn config(&self, tag: Option<String>) -> Result<LinkConfig, Failure> {
        let mtu = self.mtu.to_string();
        let seed = self.link_seed.to_string();
        let cfg = LinkConfig::from_keys(
            Some(self.link.as_deref().unwrap_or("")),
            self.link_back.as_deref(),
            Some(&self.driver),
            Some(&mtu),
            Some(&seed),
            Some(&self.link_valid),
        )
        .map_err(|e| match e {
            LinkKeyError::Value { key, value, reason } => usage(match key {
                "link_driver" => format!("--driver {reason}"),
                "link_mtu" => format!("--mtu {value}: {reason}"),
                k => format!("bad {} \"{value}\": {reason}", flag_of(k)),
            }),
            other => usage(other.to_string()),
        })?
        .expect("link is given");
        Ok(LinkConfig { tag, ..cfg })
    }

    /// `--capture` and its bounds, checked (`None` without `--capture`).
    pub fn capture_config(&self) -> Result<Option<CaptureConfig>, Failure> {
        let Some(path) = &self.capture else {
            return Ok(None);
        };
        if path.extension().and_then(|e| e.to_str()) != Some("pcapng") {
            return Err(usage(format!(
                "--capture {}: name the file FILE.pcapng (it is written as pcapng)",
                path.display()
            )));
        }
        if self.capture_snaplen < 20 {
            return Err(usage(format!(
                "--capture-snaplen {}: keep at least 20 bytes (an IP header); 65535 keeps whole packets",
                self.capture_snaplen
            )));
        }
        let limit = socklab_units::parse_size(&self.capture_limit)
            .map_err(|e| usage(format!("--capture-limit {}: {e}", self.capture_limit)))?;
        if limit < 128 * 1024 {
            return Err(usage(format!(
                "--capture-limit {}: give at least 128K",
                self.capture_limit
            )));
        }
        Ok(Some(CaptureConfig {
            path: path.clone(),
            snaplen: self.capture_snaplen,
            limit_bytes: limit,
        }))
    }

    /// [`LinkArgs::capture_config`] for a measuring command, whose link needs `--link`.
    pub fn workload_capture(&self) -> Result<Option<CaptureConfig>, Failure> {
        if self.capture.is_some() && self.link.is_none() {
            return Err(usage(
                "--capture records the emulated link's packets: add --link (--link none: the link without impairment)",
            ));
        }
        if self.capture.is_some() && !matches!(self.driver.trim(), "auto" | "tun") {
            return Err(usage(format!(
                "--capture records what socklab's own emulator does: use --driver tun (not {})",
                self.driver
            )));
        }
        self.capture_config()
    }

    /// Adds the link keys to a workload group: one value fixed, a comma-separated list as an
    /// axis (`--link "loss 0%,loss 5%,loss 10%"`).
    pub fn add_to(&self, group: &mut socklab_lab::plan::Group) {
        let Some(link) = &self.link else { return };
        let vals: Vec<String> = link.split(',').map(|v| v.trim().to_string()).collect();
        if vals.len() == 1 {
            group.fixed.set("link", vals[0].clone());
        } else {
            group
                .axes
                .push(socklab_lab::plan::Axis::single("link", vals));
        }
        if let Some(b) = &self.link_back {
            group.fixed.set("link_back", b.clone());
        }
        group.fixed.set("link_driver", self.driver.clone());
        group.fixed.set("link_mtu", self.mtu.to_string());
        group.fixed.set("link_seed", self.link_seed.to_string());
        group.fixed.set("link_valid", self.link_valid.clone());
    }
}

/// The flag of a link key ([`socklab_link::KEYS`]).
fn flag_of(key: &str) -> &'static str {
    match key {
        "link" => "--link",
        "link_back" => "--link-back",
        "link_driver" => "--driver",
        "link_mtu" => "--mtu",
        "link_seed" => "--link-seed",
        "link_valid" => "--link-valid",
        other => unreachable!("not a link key: {other}"),
    }
}

/// `cfg` as flags for a child socklab, printed by [`LinkConfig::to_keys`] (the one printer)
/// and read back by [`LinkArgs::config`] (the one parser).
fn link_flags(cfg: &LinkConfig) -> Vec<String> {
    cfg.to_keys()
        .into_iter()
        .flat_map(|(k, v)| [flag_of(k).to_string(), v])
        .collect()
}

pub(crate) fn describe(link: &EmulatedLink) -> Result<String, Failure> {
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

pub fn netem(a: NetemArgs, dry: bool) -> Result<(), Failure> {
    match a.action {
        None => run_across(&a.link, a.server.as_deref(), &a.cmd, a.json, dry),
        Some(NetemCommand::Up { name, link, json }) => up(&name, &link, json, dry),
        Some(NetemCommand::Down { name, json }) => down(&name, json, dry),
        Some(NetemCommand::Exec { name, side, cmd }) => exec(&name, &side, &cmd, dry),
        Some(NetemCommand::List { .. }) if dry => {
            dryrun::print_checked("socklab netem list would list the sl- namespaces")
        }
        Some(NetemCommand::List { json }) => list(json),
        Some(NetemCommand::Check {
            link,
            packets,
            size,
            json,
        }) => crate::netem_check::check(&link, packets, size, json, dry),
        Some(NetemCommand::Cleanup { .. }) if dry => dryrun::print_checked(
            "socklab netem cleanup would remove the leftovers named sl- of dead runs",
        ),
        Some(NetemCommand::Cleanup { all, json }) => cleanup(all, json),
        Some(NetemCommand::Daemon { name, link }) => daemon(&name, &link),
    }
}

/// Pretty JSON and a newline on stdout.
pub(crate) fn out_json(v: &serde_json::Value) -> Result<(), Failure> {
    out(&format!(
        "{}\n",
        serde_json::to_string_pretty(v).unwrap_or_default()
    ))
}

/// `--capture` of a netem command: the capture (its window 0 labelled `label`) and a tap for
/// the link; `None` without `--capture`. Only the tun driver can capture.
pub(crate) fn open_capture(link_args: &LinkArgs, label: &str) -> Result<Option<Capture>, Failure> {
    let Some(cfg) = link_args.capture_config()? else {
        return Ok(None);
    };
    Ok(Some(Capture::create(&cfg, label)?))
}

/// Closes a capture and says what it holds on stderr.
pub(crate) fn close_capture(c: Option<Capture>) -> Result<Option<serde_json::Value>, Failure> {
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

/// The program `cmd` names, found as `sh` would find it (a path, or a name in `PATH`).
fn find_program(cmd: &str) -> Option<std::path::PathBuf> {
    let runnable = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.contains('/') {
        let p = std::path::PathBuf::from(cmd);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| runnable(p))
}

/// The command to run across a link must exist before a link is built for it.
fn check_program(cmd: &str) -> Result<(), Failure> {
    if find_program(cmd).is_some() {
        return Ok(());
    }
    let hint = match cmd {
        "ping" => " (Debian: apt install iputils-ping)",
        "nc" => " (Debian: apt install netcat-openbsd)",
        "iperf3" => " (Debian: apt install iperf3)",
        _ => "",
    };
    Err(usage(format!(
        "'{cmd}' is not installed (not found in PATH){hint}: install it, or run a command that is, e.g. -- socklab pingpong --to server:7000 with --server 'socklab echo --port 7000'"
    )))
}

/// Waits until something in the process's namespace listens (TCP) or has a UDP socket
/// (read from /proc/PID/net, which shows the namespace of PID), at most `limit`.
fn wait_listening(pid: u32, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
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

fn run_across(
    link_args: &LinkArgs,
    server: Option<&str>,
    cmd: &[String],
    json: bool,
    dry: bool,
) -> Result<(), Failure> {
    if cmd.is_empty() {
        return Err(usage(
            "give the command to run after --, e.g. socklab netem --link \"loss 5%\" --server 'socklab echo --port 7000' -- socklab pingpong --to server:7000; or use 'socklab netem up' for a lasting link",
        ));
    }
    let cfg = link_args.config(None)?;
    if cfg.driver == Driver::UdpProxy {
        return Err(usage("--driver udp-proxy makes no namespaces to run a command in: use it with a UDP workload (socklab pingpong --udp --link … --driver udp-proxy), or use --driver tun"));
    }
    check_program(&cmd[0])?;
    link_args.capture_config()?;
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem would build a link ({}){} and run '{}' in the client namespace",
            link_args.link.as_deref().unwrap_or("no impairment"),
            server
                .map(|s| format!(", start '{s}' in the server namespace"))
                .unwrap_or_default(),
            cmd.join(" ")
        ));
    }
    install_interrupt_flag()?;
    let capture = open_capture(link_args, &format!("socklab netem -- {}", cmd.join(" ")))?;
    let link = EmulatedLink::start_with(&cfg, capture.as_ref().and_then(Capture::tap))?;
    eprintln!("socklab netem: {}", describe(&link)?);
    let mut server_child = None;
    if let Some(s) = server {
        let mut c = link.namespaces()?.command(Side::Server, "sh");
        // The server's output goes to stderr: stdout belongs to the command (its JSON, say).
        let err = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned()?;
        c.args(["-c", s])
            .stdin(Stdio::null())
            .stdout(Stdio::from(err));
        child_dies_with_parent(&mut c);
        let mut child = c
            .spawn()
            .map_err(|e| Failure::Run(format!("cannot start --server '{s}': {e}")))?;
        if !wait_listening(child.id(), Duration::from_secs(5)) {
            stop_child(&mut child);
            return Err(Failure::Run(format!(
                "--server '{s}' did not start listening within 5 s"
            )));
        }
        server_child = Some(child);
    }
    let mut c = link.namespaces()?.command(Side::Client, &cmd[0]);
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
        .map_err(|e| Failure::Run(format!("cannot start '{}': {e}", cmd.join(" "))))?;
    let status = loop {
        if interrupted() {
            stop_child(&mut child);
            break None;
        }
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(Failure::Run(format!("waiting for the command: {e}"))),
        }
    };
    if let Some(mut s) = server_child {
        stop_child(&mut s);
    }
    let report = link.mark(window.map(|_| 0)).since(&before);
    link.stop()?;
    let cap = close_capture(capture)?;
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
        None => Err(Failure::Interrupted(
            "interrupted; the link and its namespaces were removed".into(),
        )),
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(Failure::Exit(st.code().map_or(1, |c| c as u8))),
    }
}

fn up(name: &str, link_args: &LinkArgs, json: bool, dry: bool) -> Result<(), Failure> {
    ns::check_name(name)?;
    let cfg = link_args.config(Some(name.to_string()))?;
    let capture = link_args.capture_config()?;
    if cfg.driver == Driver::UdpProxy {
        return Err(usage("a lasting link needs --driver tun, netem or auto"));
    }
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem up would start the link {name} (namespaces {} and {})",
            ns::ns_name(name, Side::Client),
            ns::ns_name(name, Side::Server)
        ));
    }
    ns::require_root("socklab netem up")?;
    if let Some(pid) = ns::read_pid_file(name).filter(|&p| ns::alive(p)) {
        return Err(Failure::Run(format!(
            "the link {name} is already up (pid {pid}): 'socklab netem down {name}' first"
        )));
    }
    std::fs::create_dir_all(ns::STATE_DIR)?;
    let log = ns::state_file(name, "log");
    let logf = std::fs::File::create(&log)?;
    let exe = std::env::current_exe()?;
    let mut c = Command::new(exe);
    c.args(["netem", "daemon", "--name", name])
        .args(link_flags(&cfg))
        .args(capture.iter().flat_map(|c| {
            [
                "--capture".to_string(),
                std::path::absolute(&c.path)
                    .unwrap_or_else(|_| c.path.clone())
                    .display()
                    .to_string(),
                "--capture-snaplen".to_string(),
                c.snaplen.to_string(),
                "--capture-limit".to_string(),
                c.limit_bytes.to_string(),
            ]
        }))
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
            return Err(Failure::Run(format!("the link did not come up: {last}")));
        }
        if std::fs::read_to_string(&log).is_ok_and(|t| t.contains("READY")) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            return Err(Failure::Run("the link did not come up within 15 s".into()));
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

fn daemon(name: &str, link_args: &LinkArgs) -> Result<(), Failure> {
    install_interrupt_flag()?;
    let cfg = link_args.config(Some(name.to_string()))?;
    let capture = open_capture(link_args, &format!("lasting link {name}"))?;
    let link = EmulatedLink::start_with(&cfg, capture.as_ref().and_then(Capture::tap))?;
    std::fs::write(ns::state_file(name, "pid"), std::process::id().to_string())?;
    std::fs::write(ns::state_file(name, "spec"), describe(&link)?)?;
    println!("READY {}", describe(&link)?);
    let _ = std::io::stdout().flush();
    while !interrupted() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = link.report();
    link.stop()?;
    close_capture(capture)?;
    println!("stopped; emulator accounting\n{}", accounting(&r));
    for ext in ["pid", "spec"] {
        let _ = std::fs::remove_file(ns::state_file(name, ext));
    }
    Ok(())
}

fn down(name: &str, json: bool, dry: bool) -> Result<(), Failure> {
    ns::check_name(name)?;
    if dry {
        return dryrun::print_checked(&format!("socklab netem down would remove the link {name}"));
    }
    ns::require_root("socklab netem down")?;
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
            ns::remove_namespace(&n)?;
        }
    }
    for ext in ["pid", "spec", "log"] {
        let _ = std::fs::remove_file(ns::state_file(name, ext));
    }
    if !found {
        return Err(Failure::Run(format!(
            "no link named {name} (see 'socklab netem list')"
        )));
    }
    if json {
        return out_json(&serde_json::json!({ "name": name, "down": true }));
    }
    out(&format!("{name}: down\n"))
}

fn exec(name: &str, side: &str, cmd: &[String], dry: bool) -> Result<(), Failure> {
    ns::check_name(name)?;
    let side = side.parse::<Side>().map_err(|e| usage(e.to_string()))?;
    let n = ns::ns_name(name, side);
    check_program(&cmd[0])?;
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem exec would run '{}' in {n}",
            cmd.join(" ")
        ));
    }
    if !ns::exists(&n) {
        return Err(Failure::Run(format!(
            "no namespace {n}: start the link with 'socklab netem up --name {name} --link …'"
        )));
    }
    let e = ns::command_in(&n, &cmd[0]).args(&cmd[1..]).exec();
    Err(Failure::Run(format!("cannot run ip netns exec: {e}")))
}

fn list(json: bool) -> Result<(), Failure> {
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

fn cleanup(all: bool, json: bool) -> Result<(), Failure> {
    let done = ns::cleanup(all)?;
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
        s += &format!("kept {n}: its socklab process still runs (--all removes it)\n");
    }
    if s.is_empty() {
        s = "nothing to clean\n".into();
    }
    out(&s)
}
