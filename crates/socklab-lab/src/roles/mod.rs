//! The roles socklab runs as a process of its own: their main loops, and [`argv::RoleArgs`],
//! the one typed command line the lab starts them with. The binary parses its flags into a
//! role's configuration and calls the role here; what a role prints (its stderr lines, its
//! child lines on stdout) and how it ends ([`RoleError`]) are the role's.

pub mod argv;
pub mod checks;
pub mod echo;
pub mod netem;
pub mod netem_args;
pub mod netem_check;
pub mod remote;
pub mod serve;
pub mod serve_tls;
pub mod sink;
pub mod sink_store;
pub mod transfer;
pub mod transfer_args;
pub mod udp_sink;

use std::io::Write;
use std::net::SocketAddr;

use socklab_net::childline::ChildLine;
/// Catches SIGINT/SIGTERM in a flag (the binary calls it before a long run).
pub use socklab_sys::process::install_interrupt_flag;

pub use argv::{Listen, Role, RoleArgs};

/// Why a role ended other than by its stop signal.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    /// Its configuration cannot be used (the process exits 2).
    #[error("{0}")]
    Usage(String),
    /// It failed while running (the process exits 1).
    #[error("{0}")]
    Run(String),
    /// Stopped by SIGINT/SIGTERM before its end (the process exits 130).
    #[error("{0}")]
    Interrupted(String),
    /// Ends with this exit code, saying nothing (a command it ran ended so).
    #[error("exit code {0}")]
    Exit(u8),
    /// Its stdout closed (the controller reading it went away): not an error.
    #[error("broken pipe")]
    BrokenPipe,
}

impl From<std::io::Error> for RoleError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            RoleError::BrokenPipe
        } else {
            RoleError::Run(e.to_string())
        }
    }
}

impl From<socklab_net::NetError> for RoleError {
    /// A configuration the net layer refused is a usage error; anything else a failed run.
    fn from(e: socklab_net::NetError) -> Self {
        match e {
            socklab_net::NetError::Invalid(m) => RoleError::Usage(m),
            other => RoleError::Run(other.to_string()),
        }
    }
}

pub use checks::parse_bind;

/// What a server role says: its child lines on stdout (`announce`), its lines for people on
/// stderr (unless `quiet`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Say {
    /// Print `LISTENING <addr>` and the other child lines on stdout.
    pub announce: bool,
    /// Say nothing on stderr.
    pub quiet: bool,
}

impl Say {
    /// A role's `announce` and `quiet` flags.
    pub fn new(announce: bool, quiet: bool) -> Say {
        Say { announce, quiet }
    }
}

/// Writes `s` to stdout at once.
pub fn out(s: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())?;
    o.flush()
}

/// A server is listening: catch Ctrl-C/SIGTERM (to stop cleanly and report), and when
/// announcing print `LISTENING <addr>` for the runner that started it.
pub fn server_started(addr: SocketAddr, announce: bool) -> Result<(), RoleError> {
    install_interrupt_flag()?;
    if announce {
        out(&format!("{}\n", ChildLine::Listening(addr)))?;
    }
    Ok(())
}

/// After the port, when announcing: a `REPORT {key: fp}` line naming the certificate's SHA-256,
/// which the lab's client pins. Best effort: a caller that read the port and closed the pipe
/// still gets a server (an error here would end it).
pub fn announce_certificate(announce: bool, key: &str, fp: &str) {
    if announce {
        let line = ChildLine::Report(serde_json::json!({ key: fp }));
        let _ = out(&format!("{line}\n"));
    }
}

/// The classic servers' last words: the process's CPU time.
pub fn print_server_cpu() {
    let u = socklab_sys::usage::getrusage(socklab_sys::usage::Who::Process);
    eprintln!(
        "user time = {:.6}, sys time = {:.6}",
        u.user.as_secs_f64(),
        u.sys.as_secs_f64()
    );
}
