//! Helpers of the iperf3 test files: Debian's client, and a `socklab sink` child whose log
//! is kept.

use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

use super::{announced, socklab, wait_bounded, wait_until};

/// Debian's iperf3 (3.12).
pub const IPERF3: &str = "/usr/bin/iperf3";

/// Whether Debian's iperf3 is here; says the test is skipped when not.
pub fn have_iperf3(test: &str) -> bool {
    let ok = std::path::Path::new(IPERF3).exists();
    if !ok {
        socklab_sys::skip::skip(test, "no iperf3 client", IPERF3);
    }
    ok
}

/// A `socklab sink` child on 127.0.0.1 (any free port), its stderr (the log) kept in a file;
/// killed when the test ends, passed or not.
pub struct SinkProc {
    pub child: Child,
    pub addr: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Drop for SinkProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SinkProc {
    /// `socklab sink --bind 127.0.0.1 --port 0 --announce EXTRA…`, once it listens.
    pub fn start(extra: &[&str]) -> SinkProc {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut cmd = socklab();
        cmd.args(["sink", "--bind", "127.0.0.1", "--port", "0", "--announce"])
            .args(extra)
            .stderr(log.reopen().unwrap());
        let (child, addr) = announced(cmd);
        SinkProc {
            child,
            addr: addr.parse().unwrap(),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Waits (a hang guard) for a log line holding every needle; returns it.
    pub fn logged(&self, needles: &[&str]) -> String {
        let mut found = String::new();
        let ok = wait_until(Duration::from_secs(20), || {
            let log = self.log();
            match log.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
                Some(l) => {
                    found = l.to_string();
                    true
                }
                None => false,
            }
        });
        assert!(ok, "no sink log line with {needles:?}:\n{}", self.log());
        found
    }

    /// SIGTERM, the exit awaited (a hang guard), then the whole log.
    pub fn stop(mut self) -> String {
        socklab_sys::process::kill(self.child.id(), socklab_sys::process::Signal::Term).unwrap();
        let st = wait_bounded(
            &mut self.child,
            Duration::from_secs(10),
            "sink after SIGTERM",
        );
        assert!(st.success(), "sink exited {st}");
        self.log()
    }
}

/// A hang guard for one iperf3 client run (tests of 1 to 3 s; far from normal behaviour).
pub const CLIENT_BOUND: Duration = Duration::from_secs(60);

/// Runs `iperf3 -c ADDR -p PORT ARGS` to its end (a hang guard of [`CLIENT_BOUND`]): its exit
/// status and stdout.
pub fn run_client(addr: SocketAddr, args: &[&str]) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(IPERF3)
        .args(["-c", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let status = wait_bounded(&mut child, CLIENT_BOUND, &format!("iperf3 {args:?}"));
    (status, reader.join().unwrap())
}

/// `iperf3 … -J ARGS` to its end: its JSON, whatever it says (3.12 puts an error in
/// `"error"` and may exit 0 or 1).
pub fn client_json(addr: SocketAddr, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["-J"];
    all.extend_from_slice(args);
    let (_, text) = run_client(addr, &all);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: JSON {e}: {text}"))
}
