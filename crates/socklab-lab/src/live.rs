//! The live executor: runs cells against real sockets. For `to = self` it starts a sink as a
//! child process (a re-exec of the socklab binary on an ephemeral loopback port), keeps it for
//! the whole plan, stops it at the end and reads its CPU time from `wait4`'s rusage. A
//! transfer starts a fresh `transfer serve --once` child per repetition instead (the server
//! keeps what it received, so a kept server would let the next repetition resume), into a new
//! temporary directory.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use serde_json::json;
use socklab_net::reference;
use socklab_sys::process::{child_dies_with_parent, kill, Signal};
use socklab_sys::usage::{try_wait4, wait4};

use socklab_net::link::{Driver, EmulatedLink, LinkConfig, Namespaces, Side, SERVER_ADDR};

use crate::plan::Cell;
use crate::runner::{Executor, Sample};
use crate::workload::{FileSet, LinkParams, Target, TransferSpec, Workload};
use crate::LabError;
use socklab_net::transfer::workfiles::{self, WorkFile};
use socklab_net::transfer::TransferReport;

/// A server child process (`socklab sink` or `socklab echo`, re-executed).
#[derive(Debug)]
pub struct ServerChild {
    child: Option<Child>,
    addr: SocketAddr,
    /// The `EFFECTIVE k=v …` line a server prints once it has applied its options.
    effective: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// The `STATS {json}` line `socklab serve` prints when it stops.
    stats: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// The line a sink started with `--announce` prints first on stdout.
pub const ANNOUNCE_PREFIX: &str = "LISTENING ";

use socklab_net::server::report::STATS_PREFIX;

impl ServerChild {
    /// Starts `exe sink --bind 127.0.0.1 --port 0 --announce --quiet` and waits (at most 10 s)
    /// for the address it announces.
    pub fn spawn(exe: &PathBuf) -> Result<ServerChild, LabError> {
        Self::spawn_server(exe, &["sink"])
    }

    /// Starts `exe <args> --bind 127.0.0.1 --port 0 --announce --quiet` (a server subcommand)
    /// and waits (at most 10 s) for the address it announces.
    pub fn spawn_server(exe: &PathBuf, args: &[&str]) -> Result<ServerChild, LabError> {
        Self::spawn_server_in(exe, args, None)
    }

    /// Like [`ServerChild::spawn_server`]; with `ns`, inside the server namespace of an
    /// emulated link, listening on the link's server address.
    pub fn spawn_server_in(
        exe: &PathBuf,
        args: &[&str],
        ns: Option<&Namespaces>,
    ) -> Result<ServerChild, LabError> {
        let (mut cmd, bind) = match ns {
            Some(n) => (
                n.command(Side::Server, &exe.to_string_lossy()),
                SERVER_ADDR.to_string(),
            ),
            None => (Command::new(exe), "127.0.0.1".to_string()),
        };
        cmd.args(args)
            .args([
                "--bind",
                bind.as_str(),
                "--port",
                "0",
                "--announce",
                "--quiet",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        child_dies_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| {
            LabError::Child(format!(
                "cannot start the server '{} {}': {e}",
                exe.display(),
                args.join(" ")
            ))
        })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| LabError::Child("server child has no stdout".into()))?;
        let (tx, rx) = mpsc::channel();
        let effective = std::sync::Arc::new(std::sync::Mutex::new(None));
        let eff = effective.clone();
        let stats = std::sync::Arc::new(std::sync::Mutex::new(None));
        let st = stats.clone();
        let reader = std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next().and_then(Result::ok).unwrap_or_default();
            let _ = tx.send(first);
            // Later lines until the child exits: the effective server-side options.
            for l in lines.map_while(Result::ok) {
                let (slot, prefix) = if l.starts_with("EFFECTIVE ") {
                    (&eff, "EFFECTIVE ")
                } else if l.starts_with(STATS_PREFIX) {
                    (&st, STATS_PREFIX)
                } else {
                    continue;
                };
                if let (Ok(mut g), Some(v)) = (slot.lock(), l.strip_prefix(prefix)) {
                    *g = Some(v.to_string());
                }
            }
        });
        let mut me = ServerChild {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            effective,
            stats,
            reader: Some(reader),
        };
        let line = rx.recv_timeout(Duration::from_secs(10)).map_err(|_| {
            LabError::Child("the server child did not announce its port within 10 s".into())
        })?;
        me.addr = line
            .trim()
            .strip_prefix(ANNOUNCE_PREFIX)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| {
                LabError::Child(format!(
                    "the sink child announced '{}', not an address",
                    line.trim()
                ))
            })?;
        Ok(me)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it (SIGTERM) and returns its `wait4` accounting as facts.
    pub fn stop(self) -> Result<Vec<(String, String)>, LabError> {
        self.stop_with_usage().map(|(facts, _)| facts)
    }

    /// Like [`ServerChild::stop`], also returning the child's CPU accounting from `wait4`
    /// (itself plus the children it reaped).
    pub fn stop_with_usage(
        mut self,
    ) -> Result<(Vec<(String, String)>, socklab_sys::usage::Usage), LabError> {
        let pid = self.take_pid()?;
        if let Ok(Some((st, _))) = try_wait4(pid) {
            return Err(LabError::Child(format!(
                "the server child ended early ({st:?})"
            )));
        }
        let (status, usage) = terminate(pid)?;
        Ok((self.reaped(status, &usage), usage))
    }

    /// The child's pid, taken: from here on the caller reaps it.
    fn take_pid(&mut self) -> Result<u32, LabError> {
        self.child
            .take()
            .map(|c| c.id())
            .ok_or_else(|| LabError::Child("server child already stopped".into()))
    }

    /// Waits up to `grace` for a server that ends by itself (`--once`), then stops it
    /// (SIGTERM); returns its facts and its CPU accounting.
    pub fn finish(
        mut self,
        grace: Duration,
    ) -> Result<(Vec<(String, String)>, socklab_sys::usage::Usage), LabError> {
        let pid = self.take_pid()?;
        let t0 = std::time::Instant::now();
        let (status, usage) = loop {
            if let Some(r) = try_wait4(pid).map_err(wait4_error)? {
                break r;
            }
            if t0.elapsed() >= grace {
                break terminate(pid)?;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let facts = self.reaped(status, &usage);
        Ok((facts, usage))
    }

    /// The facts of a reaped child (its stdout reader has every line by now).
    fn reaped(
        &mut self,
        status: socklab_sys::usage::ExitStatus,
        usage: &socklab_sys::usage::Usage,
    ) -> Vec<(String, String)> {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let mut facts = vec![
            (
                "wait4_user_s".into(),
                format!("{:.6}", usage.user.as_secs_f64()),
            ),
            (
                "wait4_sys_s".into(),
                format!("{:.6}", usage.sys.as_secs_f64()),
            ),
            ("wait4_nvcsw".into(), usage.nvcsw.to_string()),
            ("wait4_nivcsw".into(), usage.nivcsw.to_string()),
            ("exit".into(), format!("{status:?}")),
        ];
        if let Some(e) = self.effective.lock().ok().and_then(|g| g.clone()) {
            facts.push(("effective_opts".into(), e));
        }
        if let Some(e) = self.stats.lock().ok().and_then(|g| g.clone()) {
            facts.push(("serve_stats".into(), e));
        }
        facts
    }
}

fn wait4_error(e: std::io::Error) -> LabError {
    LabError::Child(format!("wait4 on the server child: {e}"))
}

/// SIGTERM, then `wait4`: the child's exit status and CPU accounting.
fn terminate(
    pid: u32,
) -> Result<(socklab_sys::usage::ExitStatus, socklab_sys::usage::Usage), LabError> {
    kill(pid, Signal::Term)
        .map_err(|e| LabError::Child(format!("cannot stop the server child: {e}")))?;
    wait4(pid).map_err(wait4_error)
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Some(c) = self.child.take() {
            let _ = kill(c.id(), Signal::Kill);
            let _ = wait4(c.id());
        }
    }
}

/// Runs `f` on a thread of its own (which inherits the calling thread's network namespace) and
/// waits for it, checking `stop()` every 100 ms. When stopped it raises the flag `f` was given,
/// waits up to `grace` for `f` to return, and returns `None` (a thread still running is left to
/// end by its own bounds). A thread that has not returned after `limit` is an error.
pub(crate) fn on_thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce(&AtomicBool) -> T + Send + 'static,
    stop: &dyn Fn() -> bool,
    limit: Duration,
    grace: Duration,
) -> Option<Result<T, String>> {
    let flag = Arc::new(AtomicBool::new(false));
    let f_flag = flag.clone();
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(f(&f_flag));
        });
    if let Err(e) = spawned {
        return Some(Err(format!("cannot start the {name} thread: {e}")));
    }
    let t0 = std::time::Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => return Some(Ok(r)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Some(Err(format!("the {name} thread ended without a result")))
            }
            Err(mpsc::RecvTimeoutError::Timeout) if stop() => {
                flag.store(true, Ordering::Relaxed);
                let _ = rx.recv_timeout(grace);
                return None;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if t0.elapsed() > limit => {
                return Some(Err(format!(
                    "the {name} thread did not return within {}",
                    socklab_net::units::format_duration(limit)
                )))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Runs the client of `spec` against `to` on its own thread ([`on_thread`]): `None` when
/// stopped. The client always ends by its timeout; one that has not returned 30 s after it
/// counts as failed.
fn transfer_client(
    spec: &TransferSpec,
    to: SocketAddr,
    paths: Vec<PathBuf>,
    stop: &dyn Fn() -> bool,
) -> Option<Result<TransferReport, String>> {
    let (proto, cc, timeout) = (spec.proto, spec.tcp_cc.clone(), spec.timeout);
    on_thread(
        "transfer-client",
        move |_| socklab_net::transfer::send(proto, to, &paths, cc.as_deref(), timeout),
        stop,
        timeout + Duration::from_secs(30),
        Duration::ZERO,
    )
    .map(|r| r.and_then(|r| r.map_err(|e| format!("the transfer failed: {e}"))))
}

/// A closure's result, the link's metrics for its run, and the link's description.
type InClient<T> = (T, Vec<(&'static str, f64)>, Option<String>);

/// Runs cells for real.
#[derive(Debug)]
pub struct LiveExecutor {
    exe: PathBuf,
    /// Sinks: on loopback (`false`) and in the link's server namespace (`true`).
    sinks: Vec<(bool, ServerChild)>,
    /// Echo servers by (in the link's namespace, udp, server options).
    echoes: Vec<((bool, bool, String), ServerChild)>,
    /// The emulated link (namespace drivers), kept across cells; rebuilt when the driver or
    /// MTU changes, re-specified when only the impairments change.
    link: Option<((Driver, u32), EmulatedLink)>,
    /// Emulated-link facts of links already stopped.
    link_facts: Vec<(String, String)>,
    /// Transfer workloads: the directory of their source files and the receivers' directories
    /// (removed with the executor), and the files generated so far by (file set, seed).
    transfer_dir: Option<tempfile::TempDir>,
    transfer_files: Vec<((FileSet, u64), Vec<WorkFile>)>,
}

impl LiveExecutor {
    /// `exe` is the socklab binary to re-exec for servers (normally `std::env::current_exe()`).
    pub fn new(exe: PathBuf) -> LiveExecutor {
        LiveExecutor {
            exe,
            sinks: Vec::new(),
            echoes: Vec::new(),
            link: None,
            link_facts: Vec::new(),
            transfer_dir: None,
            transfer_files: Vec::new(),
        }
    }

    fn ns(&self, in_link: bool) -> Option<&Namespaces> {
        if in_link {
            self.link.as_ref().map(|(_, l)| l.namespaces())
        } else {
            None
        }
    }

    fn sink_addr(&mut self, in_link: bool) -> Result<SocketAddr, LabError> {
        if let Some((_, c)) = self.sinks.iter().find(|(k, _)| *k == in_link) {
            return Ok(c.addr());
        }
        let child = ServerChild::spawn_server_in(&self.exe, &["sink"], self.ns(in_link))?;
        let addr = child.addr();
        self.sinks.push((in_link, child));
        Ok(addr)
    }

    fn echo_addr(
        &mut self,
        in_link: bool,
        udp: bool,
        opts: &socklab_net::sockopt::OptSet,
    ) -> Result<SocketAddr, LabError> {
        let key = (in_link, udp, opts.to_string());
        if let Some((_, c)) = self.echoes.iter().find(|(k, _)| *k == key) {
            return Ok(c.addr());
        }
        let mut args = vec!["echo", "--opts", key.2.as_str()];
        if udp {
            args.push("--udp");
        }
        let child = ServerChild::spawn_server_in(&self.exe, &args, self.ns(in_link))?;
        let addr = child.addr();
        self.echoes.push((key, child));
        Ok(addr)
    }

    /// Makes the namespace link match `l` (start, rebuild or re-specify it). Servers inside a
    /// rebuilt link die with its namespaces, so they are forgotten.
    fn ensure_link(&mut self, l: &LinkParams) -> Result<(), LabError> {
        let key = (l.driver, l.mtu);
        if let Some((k, link)) = &mut self.link {
            if *k == key || (l.driver == Driver::Auto && link.driver() == k.0) {
                return link
                    .set(&l.pair)
                    .map_err(|e| LabError::Child(e.to_string()));
            }
        }
        self.stop_link()?;
        let link = EmulatedLink::start(&LinkConfig {
            tag: None,
            driver: l.driver,
            pair: l.pair.clone(),
            seed: l.seed,
            mtu: l.mtu,
        })
        .map_err(|e| LabError::Child(e.to_string()))?;
        self.link = Some((key, link));
        Ok(())
    }

    fn stop_link(&mut self) -> Result<(), LabError> {
        // Servers inside the link's namespaces go with them.
        self.sinks.retain(|(k, _)| !*k);
        self.echoes.retain(|(k, _)| !k.0);
        if let Some((_, link)) = self.link.take() {
            let driver = link.driver();
            let r = link.stop().map_err(|e| LabError::Child(e.to_string()))?;
            self.link_facts
                .push(("link_driver".into(), driver.to_string()));
            self.link_facts.push((
                "link_emulator_cpu_s".into(),
                format!("{:.3}", (r.forward.cpu_ns + r.backward.cpu_ns) as f64 / 1e9),
            ));
        }
        Ok(())
    }

    /// The work directory of transfers (created on first use).
    fn transfer_dir(&mut self) -> Result<PathBuf, LabError> {
        if self.transfer_dir.is_none() {
            let d = tempfile::Builder::new()
                .prefix("socklab-transfer-")
                .tempdir()
                .map_err(|e| {
                    LabError::Child(format!("cannot create a temporary directory: {e}"))
                })?;
            self.transfer_dir = Some(d);
        }
        Ok(self
            .transfer_dir
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default())
    }

    /// The files of `spec`, generated on first use (once per plan) and kept until `finish`.
    fn transfer_files(&mut self, spec: &TransferSpec) -> Result<Vec<WorkFile>, LabError> {
        let key = (spec.files.clone(), spec.seed);
        if let Some((_, f)) = self.transfer_files.iter().find(|(k, _)| *k == key) {
            return Ok(f.clone());
        }
        let dir = self
            .transfer_dir()?
            .join(format!("src-{}", self.transfer_files.len()));
        std::fs::create_dir(&dir)
            .map_err(|e| LabError::Child(format!("cannot create '{}': {e}", dir.display())))?;
        let files = workfiles::write_files(&dir, &spec.files.entries(), spec.seed)
            .map_err(|e| LabError::Child(format!("generating the transfer's files: {e}")))?;
        self.transfer_files.push((key, files.clone()));
        Ok(files)
    }

    /// One repetition of a transfer: a fresh receiving directory, a `transfer serve --once`
    /// child (in the link's server namespace with a link), the client here (in the client
    /// namespace), then every received file compared with its source. A transfer that fails
    /// or times out, or a received file that differs, gives a sample with `failed = 1` and
    /// the reason (and a warning on stderr), so the experiment goes on and the failure counts.
    fn run_transfer(
        &mut self,
        cell: &Cell,
        spec: &TransferSpec,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        let files = self.transfer_files(spec)?;
        let in_link = spec.link.is_some();
        if let Some(l) = &spec.link {
            self.ensure_link(l)?;
        }
        let rx = tempfile::Builder::new()
            .prefix("rx-")
            .tempdir_in(self.transfer_dir()?)
            .map_err(|e| LabError::Child(format!("cannot create a receiving directory: {e}")))?;
        let rx_text = rx.path().to_string_lossy().to_string();
        let mut args = vec![
            "transfer",
            "serve",
            "--proto",
            spec.proto.as_str(),
            "--dir",
            rx_text.as_str(),
            "--once",
        ];
        if let Some(cc) = &spec.tcp_cc {
            args.extend(["--tcp-cc", cc.as_str()]);
        }
        let server = ServerChild::spawn_server_in(&self.exe, &args, self.ns(in_link))?;
        let to = server.addr();
        let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
        let (r, link_metrics, link_desc) =
            self.in_client(in_link, || transfer_client(spec, to, paths, stop))?;
        let Some(r) = r else {
            return Err(LabError::Run {
                cell: cell.label.clone(),
                source: socklab_net::NetError::Interrupted,
            });
        };
        // With --once the server ends after the session; one that does not is stopped.
        let (_, usage) = server.finish(Duration::from_secs(2))?;
        let outcome = r.and_then(|r| workfiles::verify_copies(rx.path(), &files).map(|()| r));
        drop(rx);
        let mut extra = json!({
            "link": link_desc,
            "to": to.to_string(),
            "proto": spec.proto.as_str(),
            "files": files.len(),
        });
        let mut metrics: Vec<(&'static str, f64)> = Vec::new();
        match outcome {
            Err(why) => {
                eprintln!(
                    "socklab: warning: a repetition of '{}' failed (recorded with failed = 1): {why}",
                    cell.label
                );
                metrics.push(("failed", 1.0));
                extra["error"] = json!(why);
            }
            Ok(r) => {
                let (total_ns, bytes, per_file) =
                    (r.total_ns(), r.bytes(), r.per_file_retransmits());
                let total_s = total_ns as f64 / 1e9;
                metrics.extend([
                    ("failed", 0.0),
                    ("total_s", total_s),
                    ("goodput_mbps", bytes as f64 * 8.0 / total_s.max(1e-9) / 1e6),
                    ("bytes", bytes as f64),
                    ("rcv_user_s", usage.user.as_secs_f64()),
                    ("rcv_sys_s", usage.sys.as_secs_f64()),
                ]);
                match &r {
                    TransferReport::Tcp(t) => {
                        metrics.extend([
                            ("retx", t.total_retrans as f64),
                            ("srtt_us", f64::from(t.rtt_us)),
                            ("min_rtt_us", f64::from(t.tcp.min_rtt_us)),
                            ("pkts_sent", f64::from(t.segs_out)),
                        ]);
                        extra["cc"] = json!(t.cc);
                        extra["mss"] = json!(t.tcp.snd_mss);
                        extra["cwnd"] = json!(t.tcp.snd_cwnd);
                    }
                    TransferReport::Rudp(u) => {
                        let st = &u.stats;
                        metrics.extend([
                            ("retx", st.retransmitted_packets as f64),
                            ("spurious", st.spurious_losses as f64),
                            ("srtt_us", st.srtt_ns as f64 / 1000.0),
                            ("min_rtt_us", st.min_rtt_ns as f64 / 1000.0),
                            ("pkts_sent", st.packets_sent as f64),
                            ("pkts_received", st.packets_received as f64),
                        ]);
                        extra["lost_packets"] = json!(st.lost_packets);
                        extra["probe_timeouts"] = json!(st.probe_timeouts);
                        extra["duplicate_packets"] = json!(st.duplicate_packets);
                    }
                }
                for (f, n) in files.iter().zip(per_file) {
                    metrics.push((crate::metric::per_file_retx(&f.name), *n as f64));
                }
            }
        }
        metrics.extend(link_metrics);
        Ok(Sample {
            metrics,
            extra,
            histograms: Vec::new(),
        })
    }

    /// Runs `f` with the calling thread in the link's client namespace (if `in_link`), and
    /// returns its result with the link's accounting for the run as metrics.
    fn in_client<T>(&self, in_link: bool, f: impl FnOnce() -> T) -> Result<InClient<T>, LabError> {
        let Some((_, link)) = self.link.as_ref().filter(|_| in_link) else {
            return Ok((f(), Vec::new(), None));
        };
        let before = link.report();
        let guard = link
            .namespaces()
            .enter(Side::Client)
            .map_err(|e| LabError::Child(e.to_string()))?;
        let out = f();
        drop(guard);
        let r = link.report().since(&before);
        let why = r.invalid_reason();
        if let Some(w) = &why {
            eprintln!("socklab: warning: this repetition is marked invalid (emu_valid = 0): {w}");
        }
        Ok((out, r.metrics(), Some(link.pair().describe())))
    }
}

fn hist_buckets(h: &hdrhistogram::Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

fn tfo(name: &str, before: &[(String, u64)], after: &[(String, u64)]) -> f64 {
    let get = |v: &[(String, u64)]| v.iter().find(|(k, _)| k == name).map_or(0, |(_, n)| *n);
    get(after).saturating_sub(get(before)) as f64
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Executor for LiveExecutor {
    fn run(&mut self, cell: &Cell, stop: &dyn Fn() -> bool) -> Result<Sample, LabError> {
        let run_err = |source| LabError::Run {
            cell: cell.label.clone(),
            source,
        };
        match &cell.workload {
            Workload::Bulk(spec) => {
                let in_link = spec.link.is_some();
                if let Some(l) = &spec.link {
                    self.ensure_link(l)?;
                }
                let to = match spec.to {
                    Target::SelfSink => self.sink_addr(in_link)?,
                    Target::Addr(a) => a,
                };
                let (r, link_metrics, link_desc) = self.in_client(in_link, || {
                    socklab_net::bulk::run(&spec.net_config(to), stop)
                })?;
                let r = r.map_err(run_err)?;
                if r.verified == Some(false) {
                    return Err(LabError::Run {
                        cell: cell.label.clone(),
                        source: socklab_net::NetError::Protocol {
                            peer: to.to_string(),
                            detail: "the stream hash at the sink differs from what was sent".into(),
                        },
                    });
                }
                let snd_cpu = secs(r.sender_cpu.cpu());
                let rcv_cpu = (r.sink.user_us + r.sink.sys_us) as f64 / 1e6;
                let mut metrics = vec![
                    ("gbps", r.gbps()),
                    ("seconds", r.seconds),
                    ("send_seconds", r.send_seconds),
                    ("bytes", r.bytes as f64),
                    ("writes", r.syscalls as f64),
                    ("reads", r.sink.reads as f64),
                    (
                        "bytes_per_read",
                        if r.sink.reads > 0 {
                            r.sink.bytes as f64 / r.sink.reads as f64
                        } else {
                            0.0
                        },
                    ),
                    ("snd_user_s", secs(r.sender_cpu.user)),
                    ("snd_sys_s", secs(r.sender_cpu.sys)),
                    ("snd_cpu_pct", 100.0 * snd_cpu / r.seconds.max(1e-9)),
                    ("rcv_user_s", r.sink.user_us as f64 / 1e6),
                    ("rcv_sys_s", r.sink.sys_us as f64 / 1e6),
                    ("rcv_cpu_pct", 100.0 * rcv_cpu / r.seconds.max(1e-9)),
                    ("retrans", r.tcp.total_retrans as f64),
                    ("cwnd", r.tcp.snd_cwnd as f64),
                    ("rtt_us", r.tcp.rtt_us as f64),
                ];
                if let Some(zc) = r.zerocopy {
                    metrics.push(("zc_completions", zc.completed as f64));
                    metrics.push(("zc_copied", zc.copied as f64));
                }
                metrics.extend(link_metrics);
                Ok(Sample {
                    metrics,
                    extra: json!({
                        "link": link_desc,
                        "to": to.to_string(),
                        "cc": r.cc,
                        "sndbuf": r.sndbuf,
                        "rcvbuf": r.rcvbuf,
                        "rounds": r.rounds,
                        "mss": r.tcp.snd_mss,
                        "min_rtt_us": r.tcp.min_rtt_us,
                        "verified": r.verified,
                    }),
                    histograms: Vec::new(),
                })
            }
            Workload::PingPong(spec) => {
                let mut cfg = spec.cfg.clone();
                let proxy = spec.link.as_ref().filter(|l| l.driver == Driver::UdpProxy);
                let in_link = spec.link.is_some() && proxy.is_none();
                if let (Some(l), false) = (&spec.link, proxy.is_some()) {
                    self.ensure_link(l)?;
                }
                cfg.to = match spec.to {
                    Target::SelfSink => self.echo_addr(in_link, cfg.udp, &cfg.opts)?,
                    Target::Addr(a) => a,
                };
                // udp-proxy: a relay on loopback in front of the echo server, for this cell.
                let relay = match proxy {
                    Some(l) => {
                        let (addr, h) = socklab_net::udpproxy::spawn(
                            cfg.to,
                            l.pair.forward.clone(),
                            l.pair.backward.clone(),
                            l.seed,
                        )
                        .map_err(run_err)?;
                        cfg.to = addr;
                        Some(h)
                    }
                    None => None,
                };
                let tfo0 = socklab_net::sockopt::tfo_counters();
                let (r, mut link_metrics, mut link_desc) =
                    self.in_client(in_link, || socklab_net::pingpong::run(&cfg, stop))?;
                if let (Some(h), Some(l)) = (relay, proxy) {
                    let st = h.stop().map_err(run_err)?;
                    link_desc = Some(l.pair.describe());
                    link_metrics = socklab_net::link::LinkReport {
                        forward: socklab_net::link::DirReport {
                            stats: st.forward,
                            ..Default::default()
                        },
                        backward: socklab_net::link::DirReport {
                            stats: st.backward,
                            ..Default::default()
                        },
                    }
                    .metrics();
                }
                let r = r.map_err(run_err)?;
                let tfo1 = socklab_net::sockopt::tfo_counters();
                let us = |ns: u64| ns as f64 / 1000.0;
                let h = &r.rtt_ns;
                let mut metrics = vec![
                    ("total_us", us(r.total_ns)),
                    (
                        "rtt_per_s",
                        if r.total_ns > 0 {
                            r.completed as f64 / (r.total_ns as f64 / 1e9)
                        } else {
                            0.0
                        },
                    ),
                    ("rtt_mean_us", h.mean() / 1000.0),
                    ("rtt_p50_us", us(h.value_at_quantile(0.5))),
                    ("rtt_p90_us", us(h.value_at_quantile(0.9))),
                    ("rtt_p99_us", us(h.value_at_quantile(0.99))),
                    ("rtt_p999_us", us(h.value_at_quantile(0.999))),
                    ("rtt_max_us", us(h.max())),
                    ("connects", r.connects as f64),
                    ("tfo_active", tfo("TCPFastOpenActive", &tfo0, &tfo1)),
                    ("tfo_passive", tfo("TCPFastOpenPassive", &tfo0, &tfo1)),
                ];
                if cfg.udp {
                    metrics.extend([
                        ("lost", r.lost as f64),
                        ("late", r.late as f64),
                        ("retries", r.retries_sent as f64),
                    ]);
                }
                if !r.connect_ns.is_empty() {
                    metrics.push(("connect_mean_us", r.connect_ns.mean() / 1000.0));
                }
                metrics.extend(link_metrics);
                let effective: serde_json::Map<String, serde_json::Value> = r
                    .effective
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect();
                Ok(Sample {
                    metrics,
                    extra: json!({ "to": cfg.to.to_string(), "completed": r.completed, "client_opts": effective, "link": link_desc }),
                    histograms: vec![
                        ("rtt_ns", hist_buckets(&r.rtt_ns)),
                        ("connect_ns", hist_buckets(&r.connect_ns)),
                    ],
                })
            }
            Workload::States(cfg) => {
                let r = socklab_net::states::run(cfg).map_err(run_err)?;
                let n = |m: &std::collections::BTreeMap<String, u64>, k: &str| {
                    m.get(k).copied().unwrap_or(0) as f64
                };
                Ok(Sample {
                    metrics: vec![
                        ("rebind_ok", f64::from(u8::from(r.rebind_ok))),
                        ("tw_server", n(&r.server_states, "TIME_WAIT")),
                        ("tw_client", n(&r.client_states, "TIME_WAIT")),
                        ("est_server", n(&r.during_server, "ESTABLISHED")),
                    ],
                    extra: json!({
                        "during_server": r.during_server,
                        "during_client": r.during_client,
                        "server_states": r.server_states,
                        "client_states": r.client_states,
                        "rebind_errno": r.rebind_errno,
                        "rebind_error": r.rebind_errno.map(|e| std::io::Error::from_raw_os_error(e).to_string()),
                    }),
                    histograms: Vec::new(),
                })
            }
            Workload::Pipe(spec) => {
                let r = reference::pipe_bandwidth(spec.size, spec.bytes)
                    .map_err(|e| run_err(socklab_net::NetError::io("pipe reference", e)))?;
                Ok(ref_sample(&r))
            }
            Workload::Memcpy(spec) => Ok(ref_sample(&reference::memcpy_bandwidth(
                spec.size, spec.bytes,
            ))),
            Workload::Transfer(spec) => {
                if stop() {
                    return Err(run_err(socklab_net::NetError::Interrupted));
                }
                self.run_transfer(cell, spec, stop)
            }
            Workload::Load(spec) => {
                if stop() {
                    return Err(run_err(socklab_net::NetError::Interrupted));
                }
                crate::liveload::run_load(&self.exe, cell, spec, stop)
            }
        }
    }

    fn finish(&mut self) -> Result<Vec<(String, String)>, LabError> {
        let mut facts = Vec::new();
        for (in_link, s) in self.sinks.drain(..) {
            let prefix = if in_link { "sink[link]_" } else { "sink_" };
            facts.extend(
                s.stop()?
                    .into_iter()
                    .map(|(k, v)| (format!("{prefix}{k}"), v)),
            );
        }
        for ((in_link, udp, opts), child) in self.echoes.drain(..) {
            let prefix = format!(
                "echo[{}{}{opts}]_",
                if in_link { "link " } else { "" },
                if udp { "udp " } else { "" }
            );
            facts.extend(
                child
                    .stop()?
                    .into_iter()
                    .map(|(k, v)| (format!("{prefix}{k}"), v)),
            );
        }
        self.stop_link()?;
        facts.append(&mut self.link_facts);
        self.transfer_files.clear();
        if let Some(d) = self.transfer_dir.take() {
            let path = d.path().display().to_string();
            d.close()
                .map_err(|e| LabError::Child(format!("cannot remove '{path}': {e}")))?;
        }
        Ok(facts)
    }
}

fn ref_sample(r: &reference::RefResult) -> Sample {
    let mut metrics = vec![
        ("gbps", r.gbps()),
        ("seconds", r.seconds),
        ("bytes", r.bytes as f64),
        ("writes", r.ops as f64),
        ("cpu_s", secs(r.cpu.cpu())),
    ];
    if r.reads > 0 {
        metrics.push(("reads", r.reads as f64));
    }
    Sample {
        metrics,
        extra: serde_json::Value::Null,
        histograms: Vec::new(),
    }
}
