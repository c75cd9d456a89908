//! What workloads share while a plan runs: server children kept across cells (keyed by a
//! typed [`ServerKey`]), the emulated link, a temporary directory and files generated once per
//! plan. A workload's `run` asks for these; [`Resources::finish`] releases them all and
//! returns their accounting as experiment facts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use socklab_link::capture::{Capture, CaptureConfig};
use socklab_link::{Driver, EmulatedLink, LinkConfig, LinkReport, Namespaces};
use socklab_transfer::workfiles::WorkFile;

use crate::child::ServerChild;
use crate::hosts::client::ClientHost;
use crate::hosts::{HostPlan, Hosts};
use crate::roles::argv::Role;
use crate::series::LiveSink;
use crate::LabError;

/// A server kept for the whole plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerRole {
    /// `socklab sink`, the bulk receiver.
    Sink,
    /// `socklab echo`, with its server-side options.
    Echo {
        /// Datagrams instead of TCP.
        udp: bool,
        /// Server-side options (`--opts` text).
        opts: String,
    },
    /// `socklab sink --udp`, the UDP bulk receiver: one `REPORT` line per test.
    UdpSink {
        /// Its receive buffer (`--rcvbuf` text).
        rcvbuf: String,
        /// Its counts per interval (`--interval` text), when a time series is asked for.
        interval: Option<String>,
    },
}

/// Which kept server: its role, and whether it runs inside the emulated link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerKey {
    /// What it is.
    pub role: ServerRole,
    /// In the link's server namespace (else on loopback).
    pub in_link: bool,
}

impl ServerKey {
    /// The role it runs.
    pub fn role(&self) -> Role {
        match &self.role {
            ServerRole::Sink => Role::Sink,
            ServerRole::Echo { udp, opts } => Role::Echo {
                udp: *udp,
                opts: opts.clone(),
            },
            ServerRole::UdpSink { rcvbuf, interval } => Role::UdpSink {
                rcvbuf: rcvbuf.clone(),
                interval: interval.clone(),
            },
        }
    }

    /// Its `socklab` arguments (the address options are added when it starts).
    pub fn args(&self) -> Vec<String> {
        self.role().to_argv()
    }

    /// The prefix of its facts in the store (`sink_`, `sink[link]_`, `echo[link udp opts]_`).
    pub fn fact_prefix(&self) -> String {
        match &self.role {
            ServerRole::Sink if self.in_link => "sink[link]_".into(),
            ServerRole::Sink => "sink_".into(),
            ServerRole::Echo { udp, opts } => format!(
                "echo[{}{}{opts}]_",
                if self.in_link { "link " } else { "" },
                if *udp { "udp " } else { "" }
            ),
            ServerRole::UdpSink { rcvbuf, interval } => format!(
                "udpsink[{}rcvbuf {rcvbuf}{}]_",
                if self.in_link { "link " } else { "" },
                interval
                    .as_ref()
                    .map_or(String::new(), |i| format!(" interval {i}"))
            ),
        }
    }
}

/// The emulated link's share of one repetition: its counts as metrics and its description.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkRun {
    /// The emulator's counts during the run (`link_*` metrics).
    pub metrics: Vec<(&'static str, f64)>,
    /// The impairments, as text.
    pub desc: Option<String>,
}

impl LinkRun {
    /// The run of a link from its report since the run started.
    pub fn from_report(r: &LinkReport, desc: String) -> LinkRun {
        static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let other = socklab_link::timing::SchedClass::Other;
        if (r.forward.sched == other || r.backward.sched == other)
            && !TOLD.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            eprintln!("socklab: note: the emulator's release threads run in the normal scheduling class (the kernel refused SCHED_FIFO, or SOCKLAB_EMU_LEVERS said nofifo): on a busy machine packets may leave late; stored as emu_sched_fifo = 0");
        }
        if let Some(w) = r.invalid_reason() {
            eprintln!("socklab: warning: this repetition is marked invalid (emu_valid = 0): {w}");
        }
        LinkRun {
            metrics: r.metrics(),
            desc: Some(desc),
        }
    }
}

/// The shared resources of a running plan.
#[derive(Debug)]
pub struct Resources {
    exe: PathBuf,
    /// The hosts of the plan (the server on another host, over SSH).
    hosts: Hosts,
    servers: Vec<(ServerKey, ServerChild)>,
    /// The emulated link, kept across cells; rebuilt when the driver or
    /// MTU changes, re-specified when only the impairments change.
    link: Option<((Driver, u32), EmulatedLink)>,
    /// Facts of links already stopped.
    link_facts: Vec<(String, String)>,
    /// A temporary directory (created on first use, removed by `finish`).
    temp: Option<tempfile::TempDir>,
    /// Files generated so far, by their maker's key.
    files: Vec<(String, Vec<WorkFile>)>,
    /// The repetition running now: (cell index, repetition, warm-up).
    run: (usize, usize, bool),
    /// The emulator seed of the repetition running now, once it uses the link.
    run_seed: Option<u64>,
    /// Why the emulated link marked the repetition running now invalid (`emu_valid = 0`).
    invalid: std::sync::Mutex<Option<String>>,
    /// `--capture`: what to capture, and the file once a link started.
    capture_cfg: Option<CaptureConfig>,
    capture: Option<Capture>,
    /// Where the running repetition's intervals go live.
    live: LiveSlot,
}

/// A [`LiveSink`] slot (its own type only so that [`Resources`] stays `Debug`).
#[derive(Default)]
struct LiveSlot(Option<LiveSink>);

impl std::fmt::Debug for LiveSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "LiveSlot(on)"
        } else {
            "LiveSlot(off)"
        })
    }
}

/// The emulator seed of one repetition: drawn from the link's seed, the cell and the
/// repetition (SplitMix64 of each in turn), so repetitions are independent of each other and
/// the same command run again repeats the same sequence.
pub fn run_seed(link_seed: u64, cell: usize, rep: usize, warmup: bool) -> u64 {
    fn mix(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    [cell as u64, rep as u64, u64::from(warmup)]
        .iter()
        .fold(mix(link_seed), |h, &x| mix(h ^ x))
}

impl Resources {
    /// `exe` is the socklab binary to re-exec for servers (normally `std::env::current_exe()`).
    pub fn new(exe: PathBuf) -> Resources {
        Resources::with_hosts(exe, HostPlan::default())
    }

    /// Resources whose server role runs where `hosts` says.
    pub fn with_hosts(exe: PathBuf, hosts: HostPlan) -> Resources {
        Resources {
            hosts: Hosts::new(hosts, exe.clone()),
            exe,
            servers: Vec::new(),
            link: None,
            link_facts: Vec::new(),
            temp: None,
            files: Vec::new(),
            run: (0, 0, false),
            run_seed: None,
            invalid: std::sync::Mutex::default(),
            live: LiveSlot::default(),
            capture_cfg: None,
            capture: None,
        }
    }

    /// Records every packet of the emulated link into a pcapng file (`--capture`): one file
    /// for the plan, one capture window (an interface per direction) per repetition, packets
    /// outside the repetitions' client phase in window 0; the size cap bounds the whole file.
    pub fn set_capture(&mut self, cfg: CaptureConfig) {
        self.capture_cfg = Some(cfg);
    }

    /// A repetition starts: repetition `rep` (a warm-up when `warmup`) of cell `cell`.
    pub fn begin(&mut self, cell: usize, rep: usize, warmup: bool) {
        self.run = (cell, rep, warmup);
        self.run_seed = None;
        self.take_invalid_reason();
    }

    /// Where the next repetition hands its intervals as they close (`None`: nowhere).
    pub fn set_live(&mut self, live: Option<LiveSink>) {
        self.live = LiveSlot(live);
    }

    /// Where the running repetition hands its intervals as they close, if anywhere.
    pub fn live(&self) -> Option<LiveSink> {
        self.live.0.clone()
    }

    /// Why the emulated link marked the repetition invalid (`emu_valid = 0`), if it did.
    pub fn take_invalid_reason(&mut self) -> Option<String> {
        let slot = self.invalid.get_mut().unwrap_or_else(|e| e.into_inner());
        slot.take()
    }

    /// The emulator seed the repetition ran with, if it used the link.
    pub fn take_run_seed(&mut self) -> Option<u64> {
        self.run_seed.take()
    }

    /// The server side of the link, when a server runs `in_link` and the link has one (a
    /// namespace; `None` on loopback, as behind udp-proxy's relay).
    fn ns(&self, in_link: bool) -> Option<&Namespaces> {
        self.link
            .as_ref()
            .filter(|_| in_link)
            .and_then(|(_, l)| l.server_namespace())
    }

    /// The address a client uses for `server`: with `in_link`, the link's route to it (the
    /// server's own address across namespaces, a relay in front of it with udp-proxy).
    pub fn route(&mut self, in_link: bool, server: SocketAddr) -> Result<SocketAddr, LabError> {
        match self.link.as_mut().filter(|_| in_link) {
            Some((_, l)) => Ok(l.route(server)?),
            None => Ok(server),
        }
    }

    /// The address of the kept server `key`, started on first use (and again when the one
    /// started before has ended: its host or SSH session was lost).
    pub fn server(&mut self, key: ServerKey) -> Result<SocketAddr, LabError> {
        if let Some(i) = self.servers.iter().position(|(k, _)| *k == key) {
            if self.servers[i].1.alive() {
                return Ok(self.servers[i].1.addr());
            }
            self.servers.remove(i);
        }
        let child = self.spawn(&key.role(), key.in_link)?;
        let addr = child.addr();
        self.servers.push((key, child));
        Ok(addr)
    }

    /// Waits up to `wait` for a `REPORT` line of the kept server `key` that `pick` accepts
    /// (see [`ServerChild::wait_report`]); `None` when none came, the server is not running,
    /// or `stop()` turned true.
    pub fn server_report(
        &self,
        key: &ServerKey,
        wait: Duration,
        pick: &dyn Fn(&serde_json::Value) -> bool,
        stop: &dyn Fn() -> bool,
    ) -> Option<serde_json::Value> {
        self.kept(key)?.wait_report(wait, pick, stop)
    }

    /// [`Self::server_report`], leaving the line for the next repetition to read too.
    pub fn server_fact(
        &self,
        key: &ServerKey,
        wait: Duration,
        pick: &dyn Fn(&serde_json::Value) -> bool,
        stop: &dyn Fn() -> bool,
    ) -> Option<serde_json::Value> {
        self.kept(key)?.peek_report(wait, pick, stop)
    }

    /// The kept server `key`, if it was started.
    fn kept(&self, key: &ServerKey) -> Option<&ServerChild> {
        self.servers.iter().find(|(k, _)| k == key).map(|(_, c)| c)
    }

    /// The `INTERVAL` lines of kept server `key` as they are printed (see
    /// [`crate::child::IntervalFeed`]); `None` when there is no such server.
    pub fn server_intervals(&self, key: &ServerKey) -> Option<crate::child::IntervalFeed> {
        self.servers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, c)| c.interval_feed())
    }

    /// Starts a server for one repetition (`socklab <role>`): on the server host, or here (in
    /// the link's server namespace when `in_link`); the caller stops it.
    pub fn spawn(&mut self, role: &Role, in_link: bool) -> Result<ServerChild, LabError> {
        match self.hosts.server()? {
            Some(_) if in_link => Err(LabError::Plan(
                "an emulated link (`link`) runs between two namespaces of this machine: it does not reach a `server_host`; drop one of them".into(),
            )),
            Some((t, bind)) => ServerChild::spawn_on(t.as_ref(), role, bind),
            None => {
                let args = role.to_argv();
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                ServerChild::spawn(&self.exe, &args, self.ns(in_link))
            }
        }
    }

    /// A kept server on another host that ended during the repetition (its SSH session or host
    /// was lost): forgotten (the next repetition starts another), and the repetition fails.
    pub fn lost_server(&mut self) -> Option<LabError> {
        let i = self
            .servers
            .iter_mut()
            .position(|(_, c)| c.host().is_some() && !c.alive())?;
        let (key, c) = self.servers.remove(i);
        Some(LabError::Host {
            host: c.host().unwrap_or_default().to_string(),
            reason: format!(
                "the {} role ended during this repetition: its SSH session or the host was lost",
                key.role().name()
            ),
        })
    }

    /// [`Self::lost_server`], giving a remote server that is ending up to `grace` to be seen
    /// ended; at once `None` when no kept server runs on another host.
    pub fn lost_server_within(&mut self, grace: Duration) -> Option<LabError> {
        let until = std::time::Instant::now() + grace;
        loop {
            if let Some(e) = self.lost_server() {
                return Some(e);
            }
            if !self.servers.iter().any(|(_, c)| c.host().is_some())
                || std::time::Instant::now() >= until
            {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server role runs on another host (connecting to it on first use).
    pub fn remote_server(&mut self) -> Result<bool, LabError> {
        Ok(self.hosts.server()?.is_some())
    }

    /// The client's host, when that is another host.
    pub fn client_host(&self) -> Option<&str> {
        self.hosts.plan().remote_client()
    }

    /// Runs the client side of a repetition on the client host, when that is another host:
    /// the workload `kind` with `params` (whose `to` is the server's address) runs there and
    /// its sample comes back; `None` when the client runs here.
    pub fn remote_client(
        &mut self,
        kind: &str,
        params: &crate::model::params::Params,
        in_link: bool,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<crate::model::sample::Sample>, LabError> {
        let Some(t) = self.hosts.client()? else {
            return Ok(None);
        };
        if in_link {
            return Err(LabError::Plan(
                "an emulated link (`link`) runs between two namespaces of this machine: it does not reach a `client_host`; drop one of them".into(),
            ));
        }
        if let Some(to) = params.get("to") {
            if to.starts_with("127.") || to.starts_with("[::1]") {
                return Err(LabError::Plan(format!(
                    "the server listens on {to} (loopback of this machine): the client host cannot reach it; give `server_host` too"
                )));
            }
        }
        t.as_ref().run_rep(kind, params, label, stop).map(Some)
    }

    /// The load generators' hosts and clock offsets (empty: the generator runs here).
    pub fn generators(&mut self) -> Result<Vec<crate::hosts::Generator>, LabError> {
        self.hosts.generators()
    }

    /// Which host ran which role, when a role ran on another host.
    pub fn host_roles(&self) -> Option<serde_json::Value> {
        self.hosts.roles()
    }

    /// Makes the namespace link match `cfg` (start, rebuild or re-specify it). Servers inside
    /// a rebuilt link die with its namespaces, so they are forgotten.
    /// The models restart from this repetition's own seed ([`run_seed`]).
    pub fn link(&mut self, cfg: &LinkConfig) -> Result<(), LabError> {
        let (cell, rep, warmup) = self.run;
        let seed = run_seed(cfg.seed, cell, rep, warmup);
        self.run_seed = Some(seed);
        let key = (cfg.driver, cfg.mtu);
        if let Some((k, link)) = &mut self.link {
            if *k == key || (cfg.driver == Driver::Auto && link.driver() == k.0) {
                link.set_rule(cfg.valid);
                return Ok(link.respecify(&cfg.pair, seed)?);
            }
        }
        self.stop_link()?;
        if let (Some(c), None) = (&self.capture_cfg, &self.capture) {
            self.capture = Some(Capture::create(c, "outside the repetitions' client phase")?);
        }
        let link = EmulatedLink::start_with(
            &LinkConfig {
                seed,
                ..cfg.clone()
            },
            self.capture.as_ref().and_then(Capture::tap),
        )?;
        self.link = Some((key, link));
        Ok(())
    }

    /// Places the link's release threads on the CPUs the measured endpoints do not use
    /// (`avoid`: their pinned CPUs), where the machine has a core to spare; an empty `avoid`
    /// lets them run anywhere. The placement is kept as the fact `link_emulator_cpus`.
    pub fn place_link_away_from(&mut self, avoid: &[usize]) -> Result<(), LabError> {
        let Some((_, link)) = &self.link else {
            return Ok(());
        };
        let placed = link.place_away_from(avoid)?;
        if !avoid.is_empty() {
            let text = match placed {
                Some(cpus) => cpus
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                None => "anywhere (no core to spare beside the endpoints' CPUs)".into(),
            };
            self.link_facts.retain(|(k, _)| k != "link_emulator_cpus");
            self.link_facts.push(("link_emulator_cpus".into(), text));
        }
        Ok(())
    }

    fn stop_link(&mut self) -> Result<(), LabError> {
        // Servers inside the link's namespaces go with them.
        self.servers.retain(|(k, _)| !k.in_link);
        if let Some((_, link)) = self.link.take() {
            let driver = link.driver();
            let offload = link.offload();
            let r = link.stop()?;
            self.link_facts
                .push(("link_driver".into(), driver.to_string()));
            if driver.uses_namespaces() {
                let set: Vec<String> = socklab_link::ns::SYSCTLS
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                self.link_facts.push(("link_sysctls".into(), set.join(" ")));
            }
            self.link_facts.push((
                "link_emulator_cpu_s".into(),
                format!("{:.3}", (r.forward.cpu_ns + r.backward.cpu_ns) as f64 / 1e9),
            ));
            self.link_facts.push((
                "link_emulator_cpu_ns_per_packet".into(),
                format!("{:.0}", r.cpu_ns_per_packet()),
            ));
            if let Some(o) = offload {
                self.link_facts
                    .push(("link_tun_offload".into(), o.as_str().to_string()));
            }
        }
        Ok(())
    }

    /// Runs `f` with the calling thread in the link's client namespace (if `in_link`), and
    /// returns its result with the link's share of the run.
    pub fn in_client<T>(
        &self,
        in_link: bool,
        f: impl FnOnce() -> T,
    ) -> Result<(T, LinkRun), LabError> {
        let Some((_, link)) = self.link.as_ref().filter(|_| in_link) else {
            return Ok((f(), LinkRun::default()));
        };
        // With a capture, this repetition's client phase is a capture window whose counts are
        // taken at the instants the window opens and closes (exactly its packets).
        let window = self.capture.as_ref().map(|c| {
            let (cell, rep, warmup) = self.run;
            c.window(&format!(
                "cell {} {} {}: link = {}",
                cell + 1,
                if warmup { "warm-up" } else { "rep" },
                rep + 1,
                link.describe()
            ))
        });
        let before = link.mark(window);
        let guard = link.enter_client()?;
        let out = f();
        drop(guard);
        let after = link.mark(window.map(|_| 0));
        let report = after.since(&before);
        if let Some(why) = report.invalid_reason() {
            *self.invalid.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        }
        Ok((out, LinkRun::from_report(&report, link.describe())))
    }

    /// The plan's temporary directory (created on first use, removed by `finish`).
    pub fn temp_dir(&mut self) -> Result<PathBuf, LabError> {
        if self.temp.is_none() {
            let d = tempfile::Builder::new()
                .prefix("socklab-transfer-")
                .tempdir()
                .map_err(|e| {
                    LabError::Child(format!("cannot create a temporary directory: {e}"))
                })?;
            self.temp = Some(d);
        }
        Ok(self
            .temp
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default())
    }

    /// The files made by `make` in a fresh directory of their own under [`Self::temp_dir`],
    /// once per plan for each `key`; kept until `finish`.
    pub fn files(
        &mut self,
        key: &str,
        make: impl FnOnce(&Path) -> Result<Vec<WorkFile>, LabError>,
    ) -> Result<Vec<WorkFile>, LabError> {
        if let Some((_, f)) = self.files.iter().find(|(k, _)| k == key) {
            return Ok(f.clone());
        }
        let dir = self.temp_dir()?.join(format!("src-{}", self.files.len()));
        std::fs::create_dir(&dir)
            .map_err(|e| LabError::Child(format!("cannot create '{}': {e}", dir.display())))?;
        let files = make(&dir)?;
        self.files.push((key.to_string(), files.clone()));
        Ok(files)
    }

    /// Stops every kept server and the link, removes the temporary directory; returns the
    /// servers' and the link's accounting as facts.
    pub fn finish(&mut self) -> Result<Vec<(String, String)>, LabError> {
        let mut facts = Vec::new();
        // Sinks first, then echo servers (the order facts were always stored in).
        self.servers
            .sort_by_key(|(k, _)| !matches!(k.role, ServerRole::Sink));
        for (key, child) in self.servers.drain(..) {
            let prefix = key.fact_prefix();
            facts.extend(
                child
                    .stop()?
                    .facts()
                    .into_iter()
                    .map(|(k, v)| (format!("{prefix}{k}"), v)),
            );
        }
        self.stop_link()?;
        facts.append(&mut self.link_facts);
        if let Some(c) = self.capture.take() {
            let s = c.finish()?;
            eprintln!("socklab: {}", s.describe());
            facts.push(("capture_file".into(), s.path.display().to_string()));
            facts.push(("capture_packets".into(), s.packets.to_string()));
            facts.push((
                "capture_not_captured".into(),
                (s.behind + s.over_limit).to_string(),
            ));
        }
        facts.extend(self.hosts.facts());
        self.hosts.close();
        self.files.clear();
        if let Some(d) = self.temp.take() {
            let path = d.path().display().to_string();
            d.close()
                .map_err(|e| LabError::Child(format!("cannot remove '{path}': {e}")))?;
        }
        Ok(facts)
    }
}

/// How a thread run by [`on_thread_until`] ended.
#[derive(Debug)]
pub enum ThreadEnd<T> {
    /// `f` returned by itself.
    Done(T),
    /// `stop()` turned true: the flag was raised, and this is what `f` returned within the
    /// grace time, if it did.
    Stopped(Option<T>),
}

/// Runs `f` on a thread of its own (which inherits the calling thread's network namespace) and
/// waits for it, checking `stop()` every 100 ms. When stopped it raises the flag `f` was given,
/// waits up to `grace` for `f` to return, and returns `None` (a thread still running is left to
/// end by its own bounds). A thread that has not returned after `limit` is an error.
pub fn on_thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce(&AtomicBool) -> T + Send + 'static,
    stop: &dyn Fn() -> bool,
    limit: Duration,
    grace: Duration,
) -> Option<Result<T, String>> {
    match on_thread_until(name, f, stop, limit, grace) {
        Ok(ThreadEnd::Done(t)) => Some(Ok(t)),
        Ok(ThreadEnd::Stopped(_)) => None,
        Err(e) => Some(Err(e)),
    }
}

/// [`on_thread`], keeping what a stopped `f` returned within `grace` (a load generator's
/// figures up to Ctrl-C).
pub fn on_thread_until<T: Send + 'static>(
    name: &str,
    f: impl FnOnce(&AtomicBool) -> T + Send + 'static,
    stop: &dyn Fn() -> bool,
    limit: Duration,
    grace: Duration,
) -> Result<ThreadEnd<T>, String> {
    let flag = Arc::new(AtomicBool::new(false));
    let f_flag = flag.clone();
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(f(&f_flag));
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start the {name} thread: {e}"));
    }
    let t0 = std::time::Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => return Ok(ThreadEnd::Done(r)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!("the {name} thread ended without a result"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) if stop() => {
                flag.store(true, Ordering::Relaxed);
                return Ok(ThreadEnd::Stopped(rx.recv_timeout(grace).ok()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) if t0.elapsed() > limit => {
                return Err(format!(
                    "the {name} thread did not return within {}",
                    socklab_units::format_duration(limit)
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_repetition_has_its_own_reproducible_seed() {
        let a = run_seed(1, 0, 0, false);
        assert_eq!(a, run_seed(1, 0, 0, false), "the same run, the same seed");
        let mut all = vec![a];
        for (seed, cell, rep, warmup) in [
            (1, 0, 1, false),
            (1, 1, 0, false),
            (1, 0, 0, true),
            (2, 0, 0, false),
            (1, 0, 2, false),
        ] {
            all.push(run_seed(seed, cell, rep, warmup));
        }
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), all.len(), "{all:?}");
    }

    #[test]
    fn server_keys_name_their_arguments_and_facts() {
        let sink = ServerKey {
            role: ServerRole::Sink,
            in_link: false,
        };
        assert_eq!(sink.args(), ["sink"]);
        assert_eq!(sink.fact_prefix(), "sink_");
        let echo = ServerKey {
            role: ServerRole::Echo {
                udp: true,
                opts: "nodelay".into(),
            },
            in_link: true,
        };
        assert_eq!(echo.args(), ["echo", "--opts", "nodelay", "--udp"]);
        assert_eq!(echo.fact_prefix(), "echo[link udp nodelay]_");
        let udp = ServerKey {
            role: ServerRole::UdpSink {
                rcvbuf: "4M".into(),
                interval: None,
            },
            in_link: false,
        };
        assert_eq!(udp.args(), ["sink", "--udp", "--rcvbuf", "4M"]);
        assert_eq!(udp.fact_prefix(), "udpsink[rcvbuf 4M]_");
        let series = ServerKey {
            role: ServerRole::UdpSink {
                rcvbuf: "4M".into(),
                interval: Some("100ms".into()),
            },
            in_link: true,
        };
        assert_eq!(
            series.args(),
            ["sink", "--udp", "--rcvbuf", "4M", "--interval", "100ms"]
        );
        assert_eq!(
            series.fact_prefix(),
            "udpsink[link rcvbuf 4M interval 100ms]_"
        );
    }

    #[test]
    fn on_thread_returns_stops_and_bounds() {
        let r = on_thread(
            "t",
            |_| 7,
            &|| false,
            Duration::from_secs(5),
            Duration::ZERO,
        );
        assert_eq!(r, Some(Ok(7)));
        let stopped = on_thread(
            "t",
            |flag| {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            },
            &|| true,
            Duration::from_secs(5),
            Duration::from_secs(1),
        );
        assert_eq!(stopped, None);
        let late = on_thread(
            "slow",
            |_| std::thread::sleep(Duration::from_millis(400)),
            &|| false,
            Duration::from_millis(150),
            Duration::ZERO,
        );
        assert!(matches!(late, Some(Err(e)) if e.contains("slow thread did not return")));
    }

    #[test]
    fn files_are_made_once_per_key_and_removed_at_finish() {
        let mut r = Resources::new(PathBuf::from("/nonexistent"));
        let mut made = 0;
        let mut make = |d: &Path| {
            made += 1;
            let path = d.join("f");
            std::fs::write(&path, b"x").unwrap();
            Ok(vec![WorkFile {
                name: "f".into(),
                path,
                size: 1,
                hash: Default::default(),
            }])
        };
        let a = r.files("k", &mut make).unwrap();
        let b = r.files("k", &mut make).unwrap();
        assert_eq!((made, a.len(), b.len()), (1, 1, 1));
        let dir = r.temp_dir().unwrap();
        assert!(dir.exists());
        assert!(r.finish().unwrap().is_empty());
        assert!(!dir.exists());
    }
}
