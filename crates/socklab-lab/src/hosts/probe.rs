//! `socklab hosts check`: what a host is and how far it is. The controller runs the role
//! `socklab hosts probe` on the host (over its transport, like every role), which prints its
//! facts (`FACTS {json}`), listens on a TCP port of the measurement plane (`LISTENING addr`),
//! and answers clock questions on its stdin: `T t1` → `T t1 t2 t3`, the NTP four-timestamp
//! exchange (t1 sent by the controller, t2 received by the host, t3 answered by the host, t4
//! received by the controller, each by its own `CLOCK_REALTIME`). The controller measures
//! the path RTT and MTU with TCP connects to that port (directly, not through SSH), and reads
//! the probe's stdin closing as the end.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use socklab_sys::host::HostFacts;

use super::transport::Transport;
use crate::roles::argv::{Role, RoleArgs};
use crate::LabError;

/// This build's version, which every host of an experiment must run.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Prefix of the facts line of `socklab hosts probe`.
pub const FACTS: &str = "FACTS ";

/// Clock exchanges per check; the one with the shortest round trip is kept.
pub const EXCHANGES: usize = 8;

/// TCP connects per RTT measurement; the fastest is kept.
pub const CONNECTS: usize = 5;

/// What a host says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// Host name (`uname -n`).
    pub hostname: String,
    /// `uname -srm`.
    pub kernel: String,
    /// The machine (`uname -m`), for `hosts install`'s same-architecture check.
    pub arch: String,
    /// CPU model.
    pub cpu_model: String,
    /// Online CPUs.
    pub cores: usize,
    /// Memory, MiB.
    pub mem_mib: u64,
    /// Default congestion control.
    pub cc_default: String,
    /// Available congestion controls.
    pub cc_available: String,
    /// `net.ipv4.tcp_wmem`.
    pub tcp_wmem: String,
    /// `net.ipv4.tcp_rmem`.
    pub tcp_rmem: String,
    /// Its socklab version.
    pub socklab_version: String,
    /// The address the SSH connection reached it at (`SSH_CONNECTION`), if over SSH.
    pub ssh_addr: Option<String>,
}

impl Facts {
    /// This host's facts.
    pub fn here() -> Facts {
        let h: HostFacts = socklab_sys::host::host_facts();
        Facts {
            arch: std::env::consts::ARCH.to_string(),
            hostname: h.hostname,
            kernel: h.kernel,
            cpu_model: h.cpu_model,
            cores: h.cores,
            mem_mib: h.mem_mib,
            cc_default: h.cc_default,
            cc_available: h.cc_available,
            tcp_wmem: h.tcp_wmem,
            tcp_rmem: h.tcp_rmem,
            socklab_version: VERSION.to_string(),
            ssh_addr: std::env::var("SSH_CONNECTION")
                .ok()
                .and_then(|v| v.split_whitespace().nth(2).map(String::from)),
        }
    }
}

/// A clock offset: the host's clock minus the controller's, with its error bound (half the
/// round trip of the exchange it came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Host clock − controller clock, nanoseconds.
    pub offset_ns: i64,
    /// ± this much, nanoseconds.
    pub error_ns: u64,
}

/// The offset from NTP four-timestamp exchanges `(t1, t2, t3, t4)` (t1, t4 the controller's
/// send and receive times; t2, t3 the host's): θ = ((t2 − t1) + (t3 − t4)) / 2 of the exchange
/// with the shortest round trip δ = (t4 − t1) − (t3 − t2), ± δ / 2. `None` without a sane
/// exchange.
pub fn clock_offset(exchanges: &[(i128, i128, i128, i128)]) -> Option<ClockOffset> {
    exchanges
        .iter()
        .filter(|(t1, t2, t3, t4)| t4 >= t1 && t3 >= t2)
        .filter_map(|&(t1, t2, t3, t4)| {
            // The host's times are what it printed: arithmetic that would overflow is no
            // sane exchange.
            let delay = t4.checked_sub(t1)?.checked_sub(t3.checked_sub(t2)?)?.max(0);
            let offset = t2.checked_sub(t1)?.checked_add(t3.checked_sub(t4)?)? / 2;
            Some((delay, offset))
        })
        .min_by_key(|&(d, _)| d)
        .map(|(d, o)| ClockOffset {
            offset_ns: o.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            error_ns: u64::try_from(d / 2).unwrap_or(u64::MAX),
        })
}

/// The probe's answer to the clock question `T {t1}` it received at `t2` and answers at `t3`
/// (its clock, ns): `T t1 t2 t3`.
pub fn clock_line(t1: &str, t2: i128, t3: i128) -> String {
    format!("T {t1} {t2} {t3}")
}

/// The exchange `(t1, t2, t3, t4)` of a probe's answer `line` to the question sent at `t1` and
/// read at `t4` (the controller's clock); `None` for a line that is not the answer to `t1`.
pub fn clock_reply(line: &str, t1: i128, t4: i128) -> Option<(i128, i128, i128, i128)> {
    let v: Vec<i128> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    match v[..] {
        [a, t2, t3] if a == t1 => Some((t1, t2, t3, t4)),
        _ => None,
    }
}

/// This host's `CLOCK_REALTIME` in nanoseconds since the epoch.
pub fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// What `hosts check` found about one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// The host as the user named it (`local`, `lab2`).
    pub name: String,
    /// What it says about itself.
    pub facts: Facts,
    /// Its clock against the controller's.
    pub clock: Option<ClockOffset>,
    /// The address measurement traffic goes to (`--server-addr`, else the address SSH reached).
    pub addr: Option<IpAddr>,
    /// The fastest TCP connect to it (one round trip), microseconds.
    pub rtt_us: Option<f64>,
    /// The path MTU to it (`TCP_INFO`).
    pub mtu: Option<u32>,
}

impl HostReport {
    /// The report as experiment facts, `host[ROLE NAME]_key`.
    pub fn facts(&self, role: &str) -> Vec<(String, String)> {
        let p = format!("host[{role} {}]_", self.name);
        let f = &self.facts;
        let mut v: Vec<(String, String)> = vec![
            ("hostname".into(), f.hostname.clone()),
            ("kernel".into(), f.kernel.clone()),
            ("cpu_model".into(), f.cpu_model.clone()),
            ("cores".into(), f.cores.to_string()),
            ("mem_mib".into(), f.mem_mib.to_string()),
            ("cc_default".into(), f.cc_default.clone()),
            ("cc_available".into(), f.cc_available.clone()),
            ("tcp_wmem".into(), f.tcp_wmem.clone()),
            ("tcp_rmem".into(), f.tcp_rmem.clone()),
            ("socklab_version".into(), f.socklab_version.clone()),
        ];
        if let Some(a) = self.addr {
            v.push(("addr".into(), a.to_string()));
        }
        if let Some(c) = self.clock {
            v.push((
                "clock_offset_s".into(),
                format!("{:.6}", c.offset_ns as f64 / 1e9),
            ));
            v.push((
                "clock_error_s".into(),
                format!("{:.6}", c.error_ns as f64 / 1e9),
            ));
        }
        if let Some(r) = self.rtt_us {
            v.push(("path_rtt_s".into(), format!("{:.6}", r / 1e6)));
        }
        if let Some(m) = self.mtu {
            v.push(("path_mtu_bytes".into(), m.to_string()));
        }
        v.into_iter()
            .map(|(k, val)| (format!("{p}{k}"), val))
            .collect()
    }

    /// The clock offset as text, `+1.234 ms ± 0.050 ms`.
    pub fn clock_text(&self) -> String {
        match self.clock {
            Some(c) => format!(
                "{:+.3} ms ± {:.3} ms",
                c.offset_ns as f64 / 1e6,
                c.error_ns as f64 / 1e6
            ),
            None => "-".into(),
        }
    }
}

// ------------------------------------------------------------------------------ remote side

/// The probe role: prints its facts and a listening port, answers clock questions on stdin,
/// accepts (and closes) connections on the port, and ends when stdin ends.
pub fn serve_probe(bind: IpAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(SocketAddr::new(bind, 0))?;
    let addr = listener.local_addr()?;
    std::thread::Builder::new()
        .name("probe-accept".into())
        .spawn(move || {
            for c in listener.incoming() {
                drop(c);
            }
        })?;
    let mut out = std::io::stdout().lock();
    let facts = serde_json::to_string(&Facts::here()).map_err(std::io::Error::other)?;
    writeln!(out, "{FACTS}{facts}")?;
    writeln!(
        out,
        "{}",
        socklab_net::childline::ChildLine::Listening(addr)
    )?;
    out.flush()?;
    let stdin = std::io::stdin();
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let t2 = now_ns();
        if let Some(t1) = line.trim().strip_prefix("T ") {
            writeln!(out, "{}", clock_line(t1, t2, now_ns()))?;
            out.flush()?;
        }
    }
}

// --------------------------------------------------------------------------- controller side

/// Lines of a child's stdout, read on a thread, with a bound on the wait for each.
struct Lines {
    rx: mpsc::Receiver<String>,
}

impl Lines {
    fn new(stdout: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Lines { rx }
    }

    fn next(&self, wait: Duration) -> Option<String> {
        self.rx.recv_timeout(wait).ok()
    }
}

/// The stderr of a child, collected on a thread.
fn collect_stderr(c: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(e) = c.stderr.take() {
        std::thread::spawn(move || {
            let mut s = String::new();
            for l in BufReader::new(e).lines().map_while(Result::ok) {
                s.push_str(&l);
                s.push('\n');
            }
            let _ = tx.send(s);
        });
    }
    rx
}

fn host_err(t: &dyn Transport, reason: impl Into<String>) -> LabError {
    LabError::Host {
        host: t.name().to_string(),
        reason: reason.into(),
    }
}

/// Runs `socklab --version` on the host; an error unless it is this build's version.
pub fn check_version(t: &dyn Transport) -> Result<(), LabError> {
    let mut c = t.socklab(&RoleArgs::from(Role::Version))?;
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| host_err(t, format!("cannot run ssh: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let fix = format!(
        "run 'socklab hosts install {}' (or give `remote_socklab` PATH)",
        t.name()
    );
    if !out.status.success() {
        return Err(host_err(
            t,
            format!(
                "cannot run socklab there ({}): {fix}",
                super::ssh::last_line(&err)
            ),
        ));
    }
    let theirs = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("socklab "))
        .map_or("(no version)", str::trim)
        .to_string();
    if theirs != VERSION {
        return Err(host_err(
            t,
            format!("runs socklab {theirs}, this controller socklab {VERSION} (local): {fix}"),
        ));
    }
    Ok(())
}

/// Checks a host: version, facts, clock offset, and (given a measurement address, or the one
/// SSH reached) the path RTT and MTU.
pub fn check(t: &dyn Transport, server_addr: Option<IpAddr>) -> Result<HostReport, LabError> {
    check_version(t)?;
    let mut c = t.socklab(&RoleArgs::from(Role::Probe))?;
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .map_err(|e| host_err(t, format!("cannot start the probe: {e}")))?;
    let result = exchange(t, &mut child, server_addr);
    drop(child.stdin.take());
    let t0 = Instant::now();
    while matches!(child.try_wait(), Ok(None)) {
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.wait();
    result
}

fn exchange(
    t: &dyn Transport,
    child: &mut Child,
    server_addr: Option<IpAddr>,
) -> Result<HostReport, LabError> {
    let errs = collect_stderr(child);
    let lines = Lines::new(
        child
            .stdout
            .take()
            .ok_or_else(|| host_err(t, "the probe has no stdout"))?,
    );
    let wait = Duration::from_secs(10);
    let died = |what: &str| {
        let e = errs
            .recv_timeout(Duration::from_secs(2))
            .unwrap_or_default();
        host_err(
            t,
            format!(
                "the probe ended before {what}: {}",
                super::ssh::last_line(&e)
            ),
        )
    };
    // A chatty login shell may print first: the facts line is looked for.
    let facts: Facts = loop {
        match lines.next(wait) {
            Some(l) if l.starts_with(FACTS) => {
                break serde_json::from_str(&l[FACTS.len()..])
                    .map_err(|e| host_err(t, format!("the probe's facts do not parse: {e}")))?
            }
            Some(_) => {}
            None => return Err(died("its facts")),
        }
    };
    let port = match lines
        .next(wait)
        .as_deref()
        .map(socklab_net::childline::ChildLine::parse)
    {
        Some(Some(socklab_net::childline::ChildLine::Listening(a))) => a.port(),
        _ => return Err(died("its port")),
    };
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| host_err(t, "the probe has no stdin"))?;
    let mut samples = Vec::with_capacity(EXCHANGES);
    for _ in 0..EXCHANGES {
        let t1 = now_ns();
        writeln!(stdin, "T {t1}")
            .and_then(|()| stdin.flush())
            .map_err(|e| host_err(t, format!("the probe's stdin: {e}")))?;
        let Some(l) = lines.next(wait) else {
            return Err(died("answering the clock"));
        };
        samples.extend(clock_reply(&l, t1, now_ns()));
    }
    child.stdin = Some(stdin);
    let addr = server_addr.or_else(|| facts.ssh_addr.as_deref().and_then(|a| a.parse().ok()));
    let (rtt_us, mtu) = match addr {
        Some(ip) => path(SocketAddr::new(ip, port)),
        None => (None, None),
    };
    Ok(HostReport {
        name: t.name().to_string(),
        facts,
        clock: clock_offset(&samples),
        addr,
        rtt_us,
        mtu,
    })
}

/// The fastest of [`CONNECTS`] TCP connects to `to` (one round trip each) and the path MTU.
fn path(to: SocketAddr) -> (Option<f64>, Option<u32>) {
    let mut best: Option<f64> = None;
    let mut mtu = None;
    for _ in 0..CONNECTS {
        let t0 = Instant::now();
        let Ok(s) = TcpStream::connect_timeout(&to, Duration::from_secs(2)) else {
            continue;
        };
        let us = t0.elapsed().as_secs_f64() * 1e6;
        best = Some(best.map_or(us, |b: f64| b.min(us)));
        if let Ok(i) = socklab_sys::tcp::tcp_info(s.as_fd()) {
            mtu = Some(i.pmtu).filter(|&m| m > 0);
        }
    }
    (best, mtu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_comes_from_the_shortest_exchange() {
        // Host clock 5 ms ahead; the first exchange has a 2 ms round trip (1 ms each way), the
        // second a slow return path (8 ms) that would bias the offset by -3.5 ms.
        let ms = |x: f64| (x * 1e6) as i128;
        let fast = (ms(0.0), ms(6.0), ms(6.0), ms(2.0));
        let slow = (ms(10.0), ms(16.0), ms(16.0), ms(19.0));
        let c = clock_offset(&[slow, fast]).unwrap();
        assert_eq!(c.offset_ns, 5_000_000);
        assert_eq!(c.error_ns, 1_000_000);
        let only_slow = clock_offset(&[slow]).unwrap();
        assert_eq!(only_slow.offset_ns, 1_500_000);
        assert_eq!(only_slow.error_ns, 4_500_000);
        // The host's processing time (t3 - t2) is not part of the round trip.
        let c = clock_offset(&[(0, 1_000, 3_000, 2_000)]).unwrap();
        assert_eq!((c.offset_ns, c.error_ns), (1_000, 0));
        // Exchanges that run backwards are dropped.
        assert_eq!(clock_offset(&[(10, 0, 0, 5)]), None);
        assert_eq!(clock_offset(&[]), None);
    }

    #[test]
    fn a_hosts_answer_is_read_and_extreme_times_never_overflow() {
        let line = clock_line("100", 150, 160);
        assert_eq!(clock_reply(&line, 100, 200), Some((100, 150, 160, 200)));
        assert_eq!(
            clock_reply(&line, 99, 200),
            None,
            "the answer to another question"
        );
        assert_eq!(clock_reply("T 100 150", 100, 200), None);
        // A host may print anything: times whose differences overflow i128 are no exchange.
        let (lo, hi) = (i128::MIN, i128::MAX);
        let reply = clock_reply(&clock_line("0", lo, hi), 0, 1).unwrap();
        assert_eq!(clock_offset(&[reply]), None);
        assert_eq!(clock_offset(&[(lo, 0, 0, hi)]), None);
        let c = clock_offset(&[(0, hi / 2, hi / 2, 0)]).unwrap();
        assert_eq!(c.offset_ns, i64::MAX, "clamped");
    }

    #[test]
    fn a_report_becomes_facts_with_its_role_and_host() {
        let r = HostReport {
            name: "lab2".into(),
            facts: Facts::here(),
            clock: Some(ClockOffset {
                offset_ns: -1_500_000,
                error_ns: 40_000,
            }),
            addr: Some("10.0.0.2".parse().unwrap()),
            rtt_us: Some(120.0),
            mtu: Some(1500),
        };
        let f = r.facts("server");
        let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("host[server lab2]_addr"), Some("10.0.0.2"));
        assert_eq!(get("host[server lab2]_clock_offset_s"), Some("-0.001500"));
        assert_eq!(get("host[server lab2]_clock_error_s"), Some("0.000040"));
        assert_eq!(get("host[server lab2]_path_rtt_s"), Some("0.000120"));
        assert_eq!(get("host[server lab2]_path_mtu_bytes"), Some("1500"));
        assert_eq!(get("host[server lab2]_socklab_version"), Some(VERSION));
        assert_eq!(r.clock_text(), "-1.500 ms ± 0.040 ms");
    }
}
