//! Issue 30 part 2: `serve --tls` and `load --protocol https` through the real binary on
//! loopback: keep-alive and a connection per request on the event designs and tokio, the
//! pinned certificate, a wrong pin refused in one line, hostile clients (plain HTTP, garbage,
//! a stalled handshake) refused and counted while the server keeps serving, wrk's HTTPS
//! against the server when wrk is installed. Every run is bounded in requests and time; no
//! test asserts a throughput.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use common::{assert_usage_error, run, socklab, wait_bounded};
use socklab_sys::process::{kill, Signal};

/// A `socklab serve --tls --announce` with the fingerprint it printed.
struct TlsServer {
    child: Child,
    out: BufReader<ChildStdout>,
    addr: SocketAddr,
    fingerprint: String,
}

impl TlsServer {
    fn start(design: &str, extra: &[&str]) -> TlsServer {
        let mut child = socklab()
            .args([
                "serve",
                "--design",
                design,
                "--workers",
                "2",
                "--handler",
                "http",
                "--tls",
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--announce",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        let fingerprint = first
            .trim()
            .strip_prefix("socklab serve: TLS certificate SHA-256 fingerprint ")
            .unwrap_or_else(|| panic!("{design}: first stderr line {first:?}"))
            .to_string();
        assert_eq!(fingerprint.len(), 64, "{first}");
        // The rest of stderr (the listening line, refusals) is drained so it cannot block.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("announce line {line:?}"))
            .parse()
            .unwrap();
        TlsServer {
            child,
            out,
            addr,
            fingerprint,
        }
    }

    /// SIGINT, then the `STATS` JSON.
    fn stop(mut self) -> serde_json::Value {
        kill(self.child.id(), Signal::Int).unwrap();
        wait_bounded(&mut self.child, Duration::from_secs(60), "serve --tls");
        let mut stdout = String::new();
        self.out.read_to_string(&mut stdout).unwrap();
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("STATS "))
            .map(|j| serde_json::from_str(j).unwrap())
            .unwrap_or_else(|| panic!("no STATS in {stdout}"))
    }
}

/// `socklab load --protocol https` with `extra`; its JSON report.
fn load(addr: SocketAddr, extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let addr = addr.to_string();
    let mut args = vec![
        "load",
        "--to",
        &addr,
        "--protocol",
        "https",
        "--threads",
        "2",
        "--timeout",
        "20s",
        "--duration",
        "60s",
        "--json",
        "--db",
    ];
    args.push(db.to_str().unwrap());
    args.extend_from_slice(extra);
    let (c, out, err) = run(&args);
    assert_eq!(c, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn https_load_runs_keep_alive_and_a_handshake_per_request_on_every_tls_design() {
    for design in ["epoll", "reuseport", "epoll-exclusive", "tokio"] {
        let s = TlsServer::start(design, &[]);
        let pin = s.fingerprint.clone();
        let v = load(
            s.addr,
            &[
                "--connections",
                "4",
                "--requests",
                "200",
                "--tls-trust",
                &pin,
            ],
        );
        assert_eq!(v["completed"], 200, "{design}: {v}");
        assert_eq!(v["failed"]["connect"], 0, "{design}");
        assert_eq!(v["connections_opened"], 4, "{design}");
        assert_eq!(v["tls"]["version"], "1.3", "{design}");
        assert!(
            v["tls"]["cipher"].as_str().unwrap().starts_with("TLS13_"),
            "{v}"
        );
        assert!(v["tls"]["trust"].as_str().unwrap().starts_with("pinned"));
        // Open loop: requests leave on the schedule, latency from the intended send time.
        let v = load(
            s.addr,
            &["--connections", "2", "--requests", "20", "--rate", "400"],
        );
        assert_eq!(v["completed"], 20, "{design}: {v}");
        assert!(v["response_corrected"]["count"].as_u64() == Some(20), "{v}");
        assert_eq!(v["tls"]["resumption"], false);
        // The TLS CRR case: every request its own connection and full handshake.
        let v = load(
            s.addr,
            &[
                "--connections",
                "2",
                "--requests",
                "40",
                "--new-connection-per-request",
            ],
        );
        assert_eq!(v["completed"], 40, "{design}: {v}");
        assert_eq!(v["connections_opened"], 40, "{design}");
        assert_eq!(v["tls"]["trust"], "not verified");
        assert!(v["connect"]["count"].as_u64().unwrap() >= 40, "{v}");
        assert_eq!(
            v["tls"]["resumed"], 0,
            "{design}: resumption is off by default"
        );
        // With `--tls-resume` (as wrk does) the later handshakes resume the first's session.
        let v = load(
            s.addr,
            &[
                "--connections",
                "1",
                "--requests",
                "5",
                "--new-connection-per-request",
                "--tls-resume",
            ],
        );
        assert_eq!(v["completed"], 5, "{design}: {v}");
        assert_eq!(v["tls"]["resumption"], true);
        assert!(v["tls"]["resumed"].as_u64().unwrap() >= 1, "{design}: {v}");
        let stats = s.stop();
        let served: u64 = stats["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["requests"].as_u64().unwrap())
            .sum();
        assert!(served >= 265, "{design}: {stats}");
        // Clients that left during a handshake (the command's connect probe) are no refusal.
        assert_eq!(stats["tls_refused"], 0, "{design}: {stats}");
    }
}

#[test]
fn a_wrong_pin_fails_in_one_line_naming_both_certificates() {
    let s = TlsServer::start("reuseport", &[]);
    let other = "ab".repeat(32);
    let addr = s.addr.to_string();
    let (c, _, err) = run(&[
        "load",
        "--to",
        &addr,
        "--protocol",
        "https",
        "--connections",
        "2",
        "--duration",
        "5s",
        "--tls-trust",
        &other,
        "--json",
    ]);
    assert_ne!(c, 0, "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("TLS handshake"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains(&s.fingerprint) && line.contains(&other),
        "{line}"
    );
    s.stop();
}

/// Reads until the server closes (or `limit`): the bytes it sent.
fn read_to_close(mut t: TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    t.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let t0 = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while t0.elapsed() < limit {
        match t.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (got, true), // reset: closed too
        }
    }
    (got, false)
}

#[test]
fn plain_http_garbage_and_a_stalled_handshake_are_refused_and_the_server_keeps_serving() {
    for design in ["reuseport", "tokio"] {
        let s = TlsServer::start(design, &["--idle-timeout", "300ms"]);
        let mut plain = TcpStream::connect(s.addr).unwrap();
        plain
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut junk = TcpStream::connect(s.addr).unwrap();
        junk.write_all(&[0xff; 64]).unwrap();
        let stalled = TcpStream::connect(s.addr).unwrap();
        for (what, t) in [
            ("plain HTTP", plain),
            ("garbage", junk),
            ("stalled", stalled),
        ] {
            // Bounds on a hang, not timings: the refusal comes at once, the stall after 300 ms.
            let (got, closed) = read_to_close(t, Duration::from_secs(30));
            assert!(closed, "{design}: {what} connection still open");
            assert!(
                !got.starts_with(b"HTTP/"),
                "{design}: {what} got a plain HTTP reply"
            );
        }
        let v = load(s.addr, &["--connections", "2", "--requests", "20"]);
        assert_eq!(v["completed"], 20, "{design}: {v}");
        let stats = s.stop();
        assert!(
            stats["tls_refused"].as_u64().unwrap() >= 3,
            "{design}: {stats}"
        );
    }
}

#[test]
fn tls_on_a_design_that_cannot_carry_it_names_the_ones_that_can() {
    assert_usage_error(
        &[
            "serve",
            "--design",
            "prefork-flock",
            "--handler",
            "http",
            "--tls",
            "--dry-run",
        ],
        &["prefork-flock", "--tls", "epoll", "reuseport", "tokio"],
    );
    assert_usage_error(
        &[
            "serve",
            "--design",
            "epoll",
            "--tls",
            "--idle-timeout",
            "off",
            "--dry-run",
        ],
        &["--idle-timeout off"],
    );
    assert_usage_error(
        &[
            "load",
            "--to",
            "127.0.0.1:9",
            "--protocol",
            "https",
            "--tls-trust",
            "/nonexistent.pem",
        ],
        &["--tls-trust", "/nonexistent.pem"],
    );
    assert_usage_error(
        &[
            "load",
            "--to",
            "127.0.0.1:9",
            "--protocol",
            "https",
            "--interval",
            "1s",
        ],
        &["--interval", "https"],
    );
}

#[test]
fn wrk_https_runs_against_serve_tls() {
    if std::process::Command::new("wrk")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIP wrk_https_runs_against_serve_tls: wrk is not installed");
        return;
    }
    let s = TlsServer::start("reuseport", &[]);
    let url = format!("https://{}/", s.addr);
    let out = std::process::Command::new("timeout")
        .args(["60", "wrk", "-t1", "-c4", "-d1s", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let rps: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(rps > 0.0, "{text}");
    assert!(!text.contains("Non-2xx"), "{text}");
    let stats = s.stop();
    assert!(stats["workers"][0]["requests"].is_u64());
}
