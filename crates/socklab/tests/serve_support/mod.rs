//! Helpers of the `socklab serve` tests: a server process kept with its stdout, a Stevens
//! client, an HTTP client, descriptor counts from /proc. Every wait is bounded.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use socklab_sys::process::{kill, Signal};

/// The ten classic designs.
pub const CLASSIC: &[&str] = &[
    "iterative",
    "fork",
    "prefork-nolock",
    "prefork-flock",
    "prefork-mutex",
    "prefork-fdpass",
    "thread",
    "prethread-mutex",
    "prethread-handoff",
    "prethread-accept",
];

/// The longest any single client operation may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `socklab serve --announce`, with its stdout.
pub struct Server {
    child: Child,
    out: BufReader<ChildStdout>,
    /// Where to connect (loopback IPv4; the server listens on `::`, dual-stack).
    pub addr: SocketAddr,
    pub design: String,
}

/// What the server printed at exit.
pub struct Stopped {
    /// Everything after the `LISTENING` line.
    pub stdout: String,
    /// The `STATS` JSON.
    pub stats: serde_json::Value,
    pub code: Option<i32>,
}

impl Stopped {
    pub fn connections(&self) -> u64 {
        self.sum("connections")
    }
    pub fn requests(&self) -> u64 {
        self.sum("requests")
    }
    fn sum(&self, key: &str) -> u64 {
        self.stats["workers"]
            .as_array()
            .map(|ws| ws.iter().map(|w| w[key].as_u64().unwrap_or(0)).sum())
            .unwrap_or(0)
    }
    pub fn accept_errors(&self) -> u64 {
        self.stats["accept_errors"].as_u64().unwrap_or(0)
    }
}

impl Server {
    /// `socklab serve --design D --port 0 --announce --quiet` plus `extra`.
    pub fn start(design: &str, extra: &[&str]) -> Server {
        let mut child = Command::cargo_bin("socklab")
            .unwrap()
            .args([
                "serve",
                "--design",
                design,
                "--port",
                "0",
                "--announce",
                "--quiet",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("LISTENING ")
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{design}: announce line {line:?}"));
        Server {
            child,
            out,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            design: design.to_string(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, then the report (the server must exit within 10 s).
    pub fn stop(self) -> Stopped {
        self.stop_with(Signal::Int)
    }

    /// `sig`, then the report (the server must exit within 10 s).
    pub fn stop_with(mut self, sig: Signal) -> Stopped {
        kill(self.child.id(), sig).unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            // A bound on a hang only (a loaded machine stops in far less).
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{}: still running 60 s after {sig:?}",
                self.design
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut stdout = String::new();
        self.out.read_to_string(&mut stdout).unwrap();
        let stats = stdout
            .lines()
            .find_map(|l| l.strip_prefix("STATS "))
            .map(|j| serde_json::from_str(j).unwrap())
            .unwrap_or(serde_json::Value::Null);
        Stopped {
            stdout,
            stats,
            code: status.code(),
        }
    }

    /// Open descriptors of the server and of its child processes.
    pub fn fds(&self) -> usize {
        let pid = self.pid();
        count_fds(pid) + children_of(pid).into_iter().map(count_fds).sum::<usize>()
    }

    /// Waits (up to 10 s) until [`Server::fds`] equals `want`; returns the last count.
    pub fn fds_settle_to(&self, want: usize) -> usize {
        let t0 = Instant::now();
        loop {
            let n = self.fds();
            if n == want || t0.elapsed() > Duration::from_secs(10) {
                return n;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn count_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Processes whose parent is `pid`, from /proc/*/stat.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')?
                        .1
                        .split_ascii_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()
                })
                == Some(pid)
        })
        .collect()
}

pub fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

/// The Stevens reply pattern: byte i is `a + i % 26`.
pub fn pattern_ok(buf: &[u8]) -> bool {
    buf.iter()
        .enumerate()
        .all(|(i, &b)| b == b'a' + (i % 26) as u8)
}

/// One Stevens client connection: each count in turn, exactly that many bytes back, and the
/// client closes first.
pub fn stevens(addr: SocketAddr, counts: &[usize]) -> Result<(), String> {
    let mut s = connect(addr).map_err(|e| format!("connect: {e}"))?;
    for &n in counts {
        s.write_all(format!("{n}\n").as_bytes())
            .map_err(|e| format!("write {n}: {e}"))?;
        let mut got = vec![0u8; n];
        s.read_exact(&mut got)
            .map_err(|e| format!("read {n} bytes: {e}"))?;
        if !pattern_ok(&got) {
            return Err(format!("reply of {n} bytes has wrong content"));
        }
    }
    Ok(())
}

/// As [`stevens`], retried (up to 5 attempts, 40 s) when the server closed on us: for servers
/// with a very short idle timeout.
pub fn stevens_retry(addr: SocketAddr, counts: &[usize]) -> Result<(), String> {
    let t0 = Instant::now();
    let mut last = String::new();
    for _ in 0..5 {
        match stevens(addr, counts) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        if t0.elapsed() > Duration::from_secs(40) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(last)
}

/// Sends `req` and reads until the server closes; returns what came back.
pub fn until_close(addr: SocketAddr, req: &[u8]) -> Result<Vec<u8>, String> {
    let mut s = connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.write_all(req).map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .map_err(|e| format!("read to close: {e} (after {} bytes)", got.len()))?;
    Ok(got)
}

/// `n` keep-alive GETs on one connection; checks each response and its body length.
pub fn http_keepalive(addr: SocketAddr, n: usize, body: usize) -> Result<(), String> {
    keepalive_gets(
        addr,
        n,
        body,
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        None,
    )
}

/// `n` HTTP/1.0 GETs with `Connection: Keep-Alive` (as `ab -k` sends them) on one connection:
/// every response must say `Connection: keep-alive` (RFC 9112 §9.3), else such a client waits
/// for a close that never comes.
pub fn http10_keepalive(addr: SocketAddr, n: usize, body: usize) -> Result<(), String> {
    keepalive_gets(
        addr,
        n,
        body,
        b"GET / HTTP/1.0\r\nHost: localhost\r\nConnection: Keep-Alive\r\n\r\n",
        Some("connection: keep-alive"),
    )
}

/// `n` times `req` on one connection; checks each response's status, body length, that none
/// says close, and that each has the header line `must` (lowercase), if given.
fn keepalive_gets(
    addr: SocketAddr,
    n: usize,
    body: usize,
    req: &[u8],
    must: Option<&str>,
) -> Result<(), String> {
    let mut s = connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    for i in 0..n {
        s.write_all(req)
            .map_err(|e| format!("write GET {i}: {e}"))?;
        let mut status = String::new();
        r.read_line(&mut status)
            .map_err(|e| format!("GET {i}: status line: {e}"))?;
        if !status.starts_with("HTTP/1.1 200 ") {
            return Err(format!("GET {i}: status {status:?}"));
        }
        let mut len = None;
        let mut seen = must.is_none();
        loop {
            let mut h = String::new();
            r.read_line(&mut h).map_err(|e| e.to_string())?;
            if h == "\r\n" || h.is_empty() {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse::<usize>().ok();
            }
            if lower.starts_with("connection: close") {
                return Err(format!(
                    "GET {i}: the server closes a keep-alive connection"
                ));
            }
            seen |= must.is_some_and(|m| lower.trim_end() == m);
        }
        if !seen {
            return Err(format!(
                "GET {i}: the response lacks `{}` although the connection stays open",
                must.unwrap_or_default()
            ));
        }
        if len != Some(body) {
            return Err(format!("GET {i}: Content-Length {len:?}, want {body}"));
        }
        let mut b = vec![0u8; body];
        r.read_exact(&mut b).map_err(|e| format!("body {i}: {e}"))?;
    }
    Ok(())
}

/// Raises this test process's descriptor limit (the clients of the slow-client tests hold
/// thousands).
pub fn raise_nofile() {
    if let Ok((soft, hard)) = socklab_sys::procs::nofile_limit() {
        let want = hard.min(32768);
        if soft < want {
            let _ = socklab_sys::procs::set_nofile_limit(want);
        }
    }
}

/// Runs `f` for every design on `parallel` threads; panics with every failure at once.
pub fn for_designs(
    designs: &[&str],
    parallel: usize,
    f: impl Fn(&str) -> Result<(), String> + Sync,
) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..parallel.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(d) = designs.get(i) else { break };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(d)));
                let err = match r {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e),
                    Err(p) => Some(
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "panic".into()),
                    ),
                };
                if let Some(e) = err {
                    failures.lock().unwrap().push(format!("{d}: {e}"));
                }
            });
        }
    });
    let f = failures.into_inner().unwrap();
    assert!(
        f.is_empty(),
        "{} design(s) failed:\n{}",
        f.len(),
        f.join("\n")
    );
}
