//! `transfer serve` and `transfer send` as given (text, unchecked) and their checks: each
//! error names its key in backticks (the binary prints it as the flag).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use socklab_transfer::tcp::{DEFAULT_MAX_SESSIONS, IDLE_TIMEOUT};
use socklab_transfer::{ReceiveLimits, SessionLimits, TcpServeOptions};
use socklab_units::{parse_duration, parse_size};

use super::transfer::{DirError, SendConfig, ServeConfig};
use super::{parse_bind, RoleError, Say};
use crate::workload::{check_tcp_cc, parse_target, Proto, Target};

/// Most sessions `max_sessions` may allow (each is a thread).
pub const MAX_MAX_SESSIONS: u64 = 4096;

fn usage(m: String) -> RoleError {
    RoleError::Usage(m)
}

/// `proto`: tcp, rudp or quic.
pub fn parse_proto(s: &str) -> Result<Proto, RoleError> {
    s.parse()
        .map_err(|e: socklab_transfer::ParseProtoError| usage(format!("`proto` '{s}': {e}")))
}

/// `tcp_cc` of a single transfer: checked for tcp (default cubic: always set, since this
/// kernel's default may be another), refused for rudp, quinn's controller for quic (cubic,
/// newreno, bbr; default cubic).
pub fn tcp_cc(proto: Proto, cc: Option<&str>) -> Result<Option<String>, RoleError> {
    match (proto, cc) {
        (Proto::Tcp, Some(c)) => check_tcp_cc(c)
            .map(Some)
            .map_err(|e| usage(format!("`tcp_cc` '{c}': {e}"))),
        (Proto::Tcp, None) => Ok(Some("cubic".into())),
        (Proto::Rudp, Some(c)) => Err(usage(format!(
            "`tcp_cc` '{c}' applies to `proto` tcp: rudp has its own congestion control; leave it out"
        ))),
        (Proto::Rudp, None) => Ok(None),
        (Proto::Quic, Some(c)) => c
            .parse::<socklab_transfer::quic::QuicCc>()
            .map(|cc| Some(cc.as_str().to_string()))
            .map_err(|e| usage(format!("`tcp_cc` '{c}': {e}"))),
        (Proto::Quic, None) => Ok(Some("cubic".into())),
    }
}

/// `timeout` of `transfer send`: a positive duration.
pub fn parse_timeout(text: &str) -> Result<Duration, RoleError> {
    match parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(usage(format!(
            "`timeout` '{text}': give the transfer some time, e.g. `timeout` 60s"
        ))),
        Err(e) => Err(usage(format!("`timeout` {e}"))),
    }
}

/// `max_file_size SIZE|off`.
pub fn parse_max_file_size(text: &str) -> Result<Option<u64>, RoleError> {
    if text.trim() == "off" {
        return Ok(None);
    }
    match parse_size(text) {
        Ok(0) => Err(usage(format!(
            "`max_file_size` '{text}': give a positive size such as 64G, or off for no limit"
        ))),
        Ok(n) => Ok(Some(n)),
        Err(e) => Err(usage(format!("`max_file_size` {e} (or off for no limit)"))),
    }
}

/// `partial_max_age AGE|off`: a duration, or whole days as `7d`.
pub fn parse_partial_max_age(text: &str) -> Result<Option<Duration>, RoleError> {
    let t = text.trim();
    if t == "off" {
        return Ok(None);
    }
    let bad = |why: String| usage(format!("`partial_max_age` {why} (or off to keep them)"));
    let d = match t.strip_suffix('d').map(str::parse::<u64>) {
        Some(Ok(days)) if days <= 100_000 => Duration::from_secs(days * 86_400),
        Some(_) => {
            return Err(bad(format!(
                "'{text}': give whole days up to 100000, e.g. 7d"
            )))
        }
        None => parse_duration(t).map_err(bad)?,
    };
    if d.is_zero() {
        return Err(bad(format!(
            "'{text}' would remove the partial files of transfers still running: give e.g. 7d"
        )));
    }
    Ok(Some(d))
}

/// The rudp session limits from `max_sessions_per_source` (refused for tcp).
pub fn session_limits(proto: Proto, per_source: Option<usize>) -> Result<SessionLimits, RoleError> {
    let mut limits = SessionLimits::default();
    match (proto, per_source) {
        (_, None) => {}
        (Proto::Tcp | Proto::Quic, Some(n)) => {
            return Err(usage(format!(
            "`max_sessions_per_source` {n} applies to `proto` rudp; leave it out for tcp and quic"
        )))
        }
        (Proto::Rudp, Some(n)) if n == 0 || n > limits.max_sessions => {
            return Err(usage(format!(
                "`max_sessions_per_source` {n}: give 1 to {} (the server's session table)",
                limits.max_sessions
            )))
        }
        (Proto::Rudp, Some(n)) => limits.max_per_source = n,
    }
    Ok(limits)
}

/// `transfer serve` as given.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// tcp, rudp or quic.
    pub proto: String,
    /// The port.
    pub port: u16,
    /// The address (text).
    pub bind: String,
    /// The receiving directory.
    pub dir: PathBuf,
    /// TCP's congestion control.
    pub tcp_cc: Option<String>,
    /// rudp: most sessions per source address.
    pub max_sessions_per_source: Option<usize>,
    /// End after one session.
    pub once: bool,
    /// TCP: most sessions at once.
    pub max_sessions: Option<u64>,
    /// TCP: the idle timeout (a duration as text).
    pub idle_timeout: Option<String>,
    /// A size, or `off`.
    pub max_file_size: String,
    /// A duration or whole days, or `off`.
    pub partial_max_age: String,
    /// Remove `dir` when it ends.
    pub remove_dir_at_exit: bool,
}

impl ServeArgs {
    /// Checks the arguments (not the directory: [`ServeArgs::check_dir`]); `words` is how a
    /// library message in a session line reads to the user.
    pub fn config(&self, words: fn(&str) -> String) -> Result<ServeConfig, RoleError> {
        let proto = parse_proto(&self.proto)?;
        let cc = tcp_cc(proto, self.tcp_cc.as_deref())?;
        let rudp_sessions = session_limits(proto, self.max_sessions_per_source)?;
        let ip = parse_bind(&self.bind)?;
        let mut tcp = self.tcp_options(proto)?;
        tcp.cc = cc;
        Ok(ServeConfig {
            proto,
            bind: SocketAddr::new(ip, self.port),
            dir: self.dir.clone(),
            tcp,
            rudp_sessions,
            partial_max_age: parse_partial_max_age(&self.partial_max_age)?,
            once: self.once,
            remove_dir_at_exit: self.remove_dir_at_exit,
            words,
        })
    }

    /// The TCP server's limits (`max_sessions` and `idle_timeout` are TCP's only).
    fn tcp_options(&self, proto: Proto) -> Result<TcpServeOptions, RoleError> {
        let tcp_only = |key: &str, given: bool| {
            if given && proto == Proto::Rudp {
                Err(usage(format!(
                    "`{key}` applies to `proto` tcp (rudp has its own session table and idle timeout): leave it out"
                )))
            } else {
                Ok(())
            }
        };
        tcp_only("max_sessions", self.max_sessions.is_some())?;
        tcp_only("idle_timeout", self.idle_timeout.is_some())?;
        let max_sessions = match self.max_sessions {
            None => DEFAULT_MAX_SESSIONS,
            Some(n) if (1..=MAX_MAX_SESSIONS).contains(&n) => n as usize,
            Some(n) => {
                return Err(usage(format!(
                    "`max_sessions` {n}: give 1 to {MAX_MAX_SESSIONS} (each session is a thread)"
                )))
            }
        };
        let idle_timeout = match &self.idle_timeout {
            None => IDLE_TIMEOUT,
            Some(t) => match parse_duration(t) {
                Ok(d) if !d.is_zero() => d,
                Ok(_) => {
                    return Err(usage(format!(
                        "`idle_timeout` '{t}': give the client some time, e.g. `idle_timeout` 30s"
                    )))
                }
                Err(e) => return Err(usage(format!("`idle_timeout` {e}"))),
            },
        };
        let limits = ReceiveLimits {
            max_file_size: parse_max_file_size(&self.max_file_size)?,
            ..ReceiveLimits::default()
        };
        Ok(TcpServeOptions {
            cc: None,
            max_sessions,
            idle_timeout,
            limits,
        })
    }

    /// The receiving directory: on a dry run only checked (a file there is refused), else
    /// created if missing.
    pub fn check_dir(&self, dry: bool) -> Result<(), RoleError> {
        let r = if dry {
            match self.dir.exists() && !self.dir.is_dir() {
                true => Err(DirError::IsAFile(self.dir.clone())),
                false => Ok(()),
            }
        } else {
            super::transfer::prepare_dir(&self.dir)
        };
        r.map_err(|e| usage(format!("`dir` {e}")))
    }
}

/// `transfer serve`: the arguments and the directory checked (the directory made), then
/// [`super::transfer::serve`]; on a dry run, the line to print. `words`: as in
/// [`ServeArgs::config`].
pub fn serve(
    args: &ServeArgs,
    words: fn(&str) -> String,
    say: Say,
    dry: bool,
) -> Result<Option<String>, RoleError> {
    let cfg = args.config(words)?;
    args.check_dir(dry)?;
    if dry {
        return Ok(Some(serve_dry_run_text(&cfg)));
    }
    super::transfer::serve(&cfg, say)?;
    Ok(None)
}

/// What a dry run of `transfer serve` says.
pub fn serve_dry_run_text(cfg: &ServeConfig) -> String {
    format!(
        "socklab transfer serve would listen on {} ({}) and write into '{}'",
        cfg.bind,
        cfg.proto.as_str(),
        cfg.dir.display()
    )
}

/// `transfer send` as given.
#[derive(Debug, Clone)]
pub struct SendArgs {
    /// tcp, rudp or quic.
    pub proto: String,
    /// The server, HOST:PORT.
    pub to: String,
    /// TCP's congestion control.
    pub tcp_cc: Option<String>,
    /// Give up after this long (a duration as text).
    pub timeout: String,
    /// quic: how the server's certificate is trusted (`None`: unverified).
    pub tls_trust: Option<String>,
    /// The report as JSON.
    pub json: bool,
    /// The files to send.
    pub files: Vec<PathBuf>,
}

impl SendArgs {
    /// Checks the arguments: the server's address, the timeout, each file a regular file.
    pub fn config(&self) -> Result<SendConfig, RoleError> {
        let proto = parse_proto(&self.proto)?;
        let cc = tcp_cc(proto, self.tcp_cc.as_deref())?;
        let to = match parse_target(&self.to) {
            Ok(Target::Addr(addr)) => addr,
            Ok(Target::SelfSink) => {
                return Err(usage(format!(
                    "`to` '{}': give the server as HOST:PORT, e.g. 127.0.0.1:9000",
                    self.to
                )))
            }
            Err(e) => return Err(usage(format!("`to` '{}': {e}", self.to))),
        };
        let timeout = parse_timeout(&self.timeout)?;
        let trust = match (self.tls_trust.as_deref(), proto) {
            (None, _) => None,
            (Some(t), Proto::Quic) => Some(
                socklab_tls::Trust::parse(t).map_err(|e| usage(format!("`tls_trust` {e}")))?,
            ),
            (Some(_), _) => {
                return Err(usage(
                    "`tls_trust` applies to `proto` quic, the encrypted transport: leave it out for tcp and rudp".into(),
                ))
            }
        };
        for f in &self.files {
            check_file(f)?;
        }
        Ok(SendConfig {
            proto,
            to,
            files: self.files.clone(),
            cc,
            timeout,
            trust,
            json: self.json,
        })
    }
}

fn check_file(f: &Path) -> Result<(), RoleError> {
    if f.is_file() {
        return Ok(());
    }
    Err(usage(format!(
        "'{}' {}: name the files to send",
        f.display(),
        if f.exists() {
            "is not a regular file"
        } else {
            "does not exist"
        }
    )))
}

/// What a dry run of `transfer send` says.
pub fn send_dry_run_text(cfg: &SendConfig) -> String {
    format!(
        "socklab transfer send would send {} file(s) to {} over {}",
        cfg.files.len(),
        cfg.to,
        cfg.proto.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_args() -> ServeArgs {
        ServeArgs {
            proto: "tcp".into(),
            port: 0,
            bind: "::".into(),
            dir: PathBuf::from("incoming"),
            tcp_cc: None,
            max_sessions_per_source: None,
            once: false,
            max_sessions: None,
            idle_timeout: None,
            max_file_size: "64G".into(),
            partial_max_age: "7d".into(),
            remove_dir_at_exit: false,
        }
    }

    fn err(a: ServeArgs) -> String {
        a.config(|m| m.to_string()).unwrap_err().to_string()
    }

    #[test]
    fn serve_limits_are_checked_naming_their_key() {
        let cfg = serve_args().config(|m| m.to_string()).unwrap();
        assert_eq!(cfg.tcp.max_sessions, DEFAULT_MAX_SESSIONS);
        assert_eq!(cfg.tcp.cc.as_deref(), Some("cubic"));
        assert_eq!(cfg.partial_max_age, Some(Duration::from_secs(7 * 86_400)));
        let rudp = || ServeArgs {
            proto: "rudp".into(),
            ..serve_args()
        };
        assert!(err(ServeArgs {
            max_sessions: Some(3),
            ..rudp()
        })
        .starts_with("`max_sessions` applies to `proto` tcp"));
        assert!(err(ServeArgs {
            max_sessions: Some(0),
            ..serve_args()
        })
        .starts_with("`max_sessions` 0: give 1 to 4096"));
        assert!(err(ServeArgs {
            idle_timeout: Some("0s".into()),
            ..serve_args()
        })
        .starts_with("`idle_timeout` '0s'"));
        assert!(err(ServeArgs {
            max_sessions_per_source: Some(2),
            ..serve_args()
        })
        .starts_with("`max_sessions_per_source` 2 applies to `proto` rudp"));
        assert!(err(ServeArgs {
            tcp_cc: Some("bbr".into()),
            ..rudp()
        })
        .starts_with("`tcp_cc` 'bbr' applies to `proto` tcp"));
        assert!(err(ServeArgs {
            bind: "nowhere".into(),
            ..serve_args()
        })
        .starts_with("`bind` 'nowhere' is not an IP address"));
    }

    #[test]
    fn sizes_and_ages_take_off() {
        assert_eq!(parse_max_file_size("off").unwrap(), None);
        assert_eq!(parse_max_file_size("1K").unwrap(), Some(1024));
        assert!(parse_max_file_size("0")
            .unwrap_err()
            .to_string()
            .starts_with("`max_file_size` '0'"));
        assert_eq!(parse_partial_max_age("off").unwrap(), None);
        assert_eq!(
            parse_partial_max_age("2d").unwrap(),
            Some(Duration::from_secs(2 * 86_400))
        );
        assert!(parse_partial_max_age("0s").is_err());
        assert!(parse_partial_max_age("999999d").is_err());
        assert!(parse_timeout("0s")
            .unwrap_err()
            .to_string()
            .contains("`timeout` 60s"));
    }

    #[test]
    fn send_needs_an_address_and_regular_files() {
        let a = SendArgs {
            proto: "tcp".into(),
            to: "self".into(),
            tcp_cc: None,
            timeout: "60s".into(),
            tls_trust: None,
            json: false,
            files: vec![],
        };
        assert!(a
            .config()
            .unwrap_err()
            .to_string()
            .starts_with("`to` 'self': give the server as HOST:PORT"));
        let a = SendArgs {
            to: "127.0.0.1:9000".into(),
            files: vec![PathBuf::from("/nonexistent/x")],
            ..a
        };
        assert!(a
            .config()
            .unwrap_err()
            .to_string()
            .ends_with("does not exist: name the files to send"));
        // A pin is QUIC's only: named on any other transport, and checked for its form.
        let file = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
        let pinned = |proto: &str, trust: &str| SendArgs {
            proto: proto.into(),
            tls_trust: Some(trust.into()),
            files: vec![file.clone()],
            ..a.clone()
        };
        let fp = "ab".repeat(32);
        let cfg = pinned("quic", &fp).config().unwrap();
        assert!(matches!(cfg.trust, Some(socklab_tls::Trust::Pinned(_))));
        let e = pinned("tcp", &fp).config().unwrap_err().to_string();
        assert!(e.starts_with("`tls_trust` applies to `proto` quic"), "{e}");
        let e = pinned("quic", "nope").config().unwrap_err().to_string();
        assert!(e.starts_with("`tls_trust` 'nope' is neither"), "{e}");
    }

    #[test]
    fn a_dry_run_makes_no_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("incoming");
        let a = ServeArgs {
            dir: dir.clone(),
            ..serve_args()
        };
        let said = serve(&a, |m| m.to_string(), Say::default(), true)
            .unwrap()
            .unwrap();
        assert!(
            said.starts_with("socklab transfer serve would listen on [::]:0 (tcp)"),
            "{said}"
        );
        assert!(!dir.exists());
        std::fs::write(&dir, b"x").unwrap();
        let e = serve(&a, |m| m.to_string(), Say::default(), true).unwrap_err();
        assert!(e.to_string().starts_with("`dir` '"), "{e}");
    }
}
