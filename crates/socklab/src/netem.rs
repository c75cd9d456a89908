//! `socklab netem`: emulated links from the command line.

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use socklab_net::link::check::{compare, probe, CheckConfig, CheckRow, Endpoints};
use socklab_net::link::ns::{self, Side};
use socklab_net::link::{Driver, EmulatedLink, LinkConfig, LinkReport};
use socklab_net::{LinkKeyError, NetError};
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
    }
}

/// The flag of a link key ([`socklab_net::link::KEYS`]).
fn flag_of(key: &str) -> &'static str {
    match key {
        "link" => "--link",
        "link_back" => "--link-back",
        "link_driver" => "--driver",
        "link_mtu" => "--mtu",
        "link_seed" => "--link-seed",
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

fn describe(link: &EmulatedLink) -> Result<String, Failure> {
    let n = link.namespaces()?;
    Ok(format!(
        "link {} <-> {} (driver {}): {}; client {}, server {}",
        n.name(Side::Client),
        n.name(Side::Server),
        link.driver(),
        link.pair().describe(),
        ns::CLIENT_ADDR,
        ns::SERVER_ADDR
    ))
}

/// The queue discipline's drops and marks, netem's ECN marks and the wait at the bottleneck,
/// when there was any (issue 19).
fn bottleneck_line(st: &socklab_net::link::Stats) -> Option<String> {
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
            "  {name}: {} packets in, {} dropped, {} duplicated, {} corrupted, {} reordered, {} queue-dropped, {} delivered; kernel drops {}; lag mean {:.1} us max {:.1} us, {} late; emulator CPU {:.3} s\n",
            st.packets_in,
            st.dropped,
            st.duplicated,
            st.corrupted,
            st.reordered,
            st.queue_dropped,
            st.delivered,
            d.kernel_drops,
            d.mean_lag_us(),
            d.max_lag_ns as f64 / 1000.0,
            d.late,
            d.cpu_ns as f64 / 1e9
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
    if let Some(why) = r.invalid_reason() {
        s += &format!("  INVALID: {why}\n");
    }
    s
}

pub fn netem(a: NetemArgs, dry: bool) -> Result<(), Failure> {
    match a.action {
        None => run_across(&a.link, a.server.as_deref(), &a.cmd, dry),
        Some(NetemCommand::Up { name, link }) => up(&name, &link, dry),
        Some(NetemCommand::Down { name }) => down(&name, dry),
        Some(NetemCommand::Exec { name, side, cmd }) => exec(&name, &side, &cmd, dry),
        Some(NetemCommand::List) if dry => {
            dryrun::print_checked("socklab netem list would list the sl- namespaces")
        }
        Some(NetemCommand::List) => list(),
        Some(NetemCommand::Check {
            link,
            packets,
            size,
        }) => check(&link, packets, size, dry),
        Some(NetemCommand::Cleanup { .. }) if dry => dryrun::print_checked(
            "socklab netem cleanup would remove the leftovers named sl- of dead runs",
        ),
        Some(NetemCommand::Cleanup { all }) => cleanup(all),
        Some(NetemCommand::Daemon { name, link }) => daemon(&name, &link),
    }
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
    let link = EmulatedLink::start(&cfg)?;
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
    let before = link.report();
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
    let report = link.report().since(&before);
    link.stop()?;
    eprint!(
        "socklab netem: emulator accounting\n{}",
        accounting(&report)
    );
    match status {
        None => Err(Failure::Interrupted(
            "interrupted; the link and its namespaces were removed".into(),
        )),
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(Failure::Exit(st.code().map_or(1, |c| c as u8))),
    }
}

fn up(name: &str, link_args: &LinkArgs, dry: bool) -> Result<(), Failure> {
    ns::check_name(name)?;
    let cfg = link_args.config(Some(name.to_string()))?;
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
    let link = EmulatedLink::start(&cfg)?;
    std::fs::write(ns::state_file(name, "pid"), std::process::id().to_string())?;
    std::fs::write(ns::state_file(name, "spec"), describe(&link)?)?;
    println!("READY {}", describe(&link)?);
    let _ = std::io::stdout().flush();
    while !interrupted() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = link.report();
    link.stop()?;
    println!("stopped; emulator accounting\n{}", accounting(&r));
    for ext in ["pid", "spec"] {
        let _ = std::fs::remove_file(ns::state_file(name, ext));
    }
    Ok(())
}

fn down(name: &str, dry: bool) -> Result<(), Failure> {
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

fn list() -> Result<(), Failure> {
    let mut s = String::new();
    for n in ns::list_namespaces() {
        let owner = ns::owner(&n);
        let alive = owner.is_some_and(ns::alive);
        let tag = ns::tag_of(&n).unwrap_or("");
        let spec = std::fs::read_to_string(ns::state_file(tag, "spec")).unwrap_or_default();
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
    if s.is_empty() {
        s = "no sl- namespaces\n".into();
    }
    out(&s)
}

fn cleanup(all: bool) -> Result<(), Failure> {
    let done = ns::cleanup(all)?;
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

fn print_rows(title: &str, rows: &[CheckRow]) -> String {
    let width = |f: fn(&CheckRow) -> &str, min: usize| {
        rows.iter().map(|r| f(r).len()).max().unwrap_or(0).max(min)
    };
    let w = width(|r| &r.what, 0);
    let wc = width(|r| &r.configured, 10);
    let wm = width(|r| &r.measured, 8);
    let mut s = format!(
        "{title}\n  {:w$}  {:wc$}  {:wm$}  verdict\n",
        "", "configured", "measured"
    );
    for r in rows {
        s += &format!(
            "  {:w$}  {:wc$}  {:wm$}  {}\n",
            r.what,
            r.configured,
            r.measured,
            match r.ok {
                Some(true) => "ok",
                Some(false) => "DIFFERS",
                None => "",
            }
        );
    }
    s
}

fn check(link_args: &LinkArgs, packets: u64, size: usize, dry: bool) -> Result<(), Failure> {
    if !(24..=8192).contains(&size) {
        return Err(usage(format!("--size {size}: use 24 to 8192 bytes")));
    }
    if packets == 0 || packets > 1_000_000 {
        return Err(usage(format!("--packets {packets}: use 1 to 1000000")));
    }
    let cfg = link_args.config(None)?;
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem check would build a link ({}) and send {packets} datagrams of {size} B each way",
            link_args.link.as_deref().unwrap_or("no impairment")
        ));
    }
    install_interrupt_flag()?;
    let ccfg = CheckConfig { packets, size };
    let stop = || interrupted();
    let mut text = String::new();
    let mut all_ok = true;
    if cfg.driver == Driver::UdpProxy {
        // Forward direction only: sender -> proxy -> receiver, all on loopback, no root.
        let mut link = EmulatedLink::start(&cfg)?;
        let pair = link.pair().clone();
        let free = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let target = free.local_addr()?;
        drop(free);
        let via = link.route(target)?;
        let ends = Endpoints {
            sender_ns: None,
            receiver_ns: None,
            receiver_bind: Ipv4Addr::LOCALHOST,
            receiver_port: target.port(),
            via: Some(via),
        };
        let r = probe(&ends, &pair.forward, &ccfg, &stop)?;
        let stats = link.stop()?;
        if interrupted() {
            return Err(Failure::Interrupted(
                "interrupted; the link was removed".into(),
            ));
        }
        let rows = compare(&pair.forward, &r);
        all_ok &= rows.iter().all(|r| r.ok != Some(false));
        text += &print_rows(
            &format!(
                "client -> server via udp-proxy ({}), {} datagrams of {size} B sent",
                pair.describe(),
                r.sent
            ),
            &rows,
        );
        let f = &stats.forward.stats;
        text += &format!(
            "  proxy: {} in, {} dropped, {} duplicated, {} corrupted, {} reordered, {} queue-dropped, {} delivered\n",
            f.packets_in, f.dropped, f.duplicated, f.corrupted, f.reordered, f.queue_dropped, f.delivered
        );
        if let Some(line) = bottleneck_line(f) {
            text += &format!("  proxy: {line}\n");
        }
    } else {
        let link = EmulatedLink::start(&cfg)?;
        eprintln!("socklab netem check: {}", describe(&link)?);
        let n = link.namespaces()?;
        for (title, from, to, spec) in [
            (
                "client -> server",
                Side::Client,
                Side::Server,
                &link.pair().forward,
            ),
            (
                "server -> client",
                Side::Server,
                Side::Client,
                &link.pair().backward,
            ),
        ] {
            let ends = Endpoints {
                sender_ns: Some(n.path(from)),
                receiver_ns: Some(n.path(to)),
                receiver_bind: to.addr(),
                receiver_port: 0,
                via: None,
            };
            let before = link.report();
            let r = probe(&ends, spec, &ccfg, &stop)?;
            if interrupted() {
                return Err(Failure::Interrupted(
                    "interrupted; the link was removed".into(),
                ));
            }
            let rows = compare(spec, &r);
            all_ok &= rows.iter().all(|r| r.ok != Some(false));
            text += &print_rows(
                &format!(
                    "{title} ({}), {} datagrams of {size} B sent",
                    socklab_net::link::spec_text(spec),
                    r.sent
                ),
                &rows,
            );
            let acc = link.report().since(&before);
            text += &accounting(&acc);
        }
        link.stop()?;
    }
    out(&text)?;
    if all_ok {
        Ok(())
    } else {
        Err(Failure::Run(
            "some measured values differ from the configured ones beyond the 99.9 % interval (see DIFFERS above)".into(),
        ))
    }
}
