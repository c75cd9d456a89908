//! `strace` attached to a running child, for tests that check which system calls it made.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::wait_bounded;

/// `strace -f -p PID FILTER… -o OUT`, attached (it said so) before it is returned.
pub struct Strace {
    child: Child,
    out: std::path::PathBuf,
}

impl Strace {
    /// `None` where strace cannot attach (not installed, or not allowed).
    pub fn attach(pid: u32, out: std::path::PathBuf, filter: &[&str]) -> Option<Strace> {
        let mut child = Command::new("strace")
            .arg("-f")
            .args(filter)
            .arg("-o")
            .arg(&out)
            .args(["-p", &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let mut line = String::new();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let _ = err.read_line(&mut line);
        if !line.contains("attached") {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Some(Strace { child, out })
    }

    /// Detaches (SIGINT) and returns what it traced.
    pub fn finish(mut self) -> String {
        let _ = socklab_sys::process::kill(self.child.id(), socklab_sys::process::Signal::Int);
        wait_bounded(&mut self.child, Duration::from_secs(20), "strace");
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}
