//! The `transfer serve` role (the file-transfer receiver's main loop) and `transfer send`
//! (one transfer, and its report as text or JSON).

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use socklab_sys::process::{install_interrupt_flag, interrupt_flag};
use socklab_transfer::{
    FileOutcome, ServerSession, SessionLimits, SessionLog, TcpServeOptions, TransferError,
    TransferReport,
};
use socklab_units::{format_duration, format_size};

use super::{server_started, RoleError, Say};
use crate::table::{num, Table};
use crate::workload::Proto;

/// A checked `transfer serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Its transport.
    pub proto: Proto,
    /// Where it listens.
    pub bind: SocketAddr,
    /// The receiving directory (it exists: the caller made it).
    pub dir: PathBuf,
    /// TCP's options (and the receive limits both transports share).
    pub tcp: TcpServeOptions,
    /// The rudp sessions' limits.
    pub rudp_sessions: SessionLimits,
    /// Partial files older than this are reclaimed at the start.
    pub partial_max_age: Option<Duration>,
    /// End after one session.
    pub once: bool,
    /// Remove `dir` when it ends.
    pub remove_dir_at_exit: bool,
    /// How a library message in a session line reads to its user (the binary writes each
    /// marked key as its flag).
    pub words: fn(&str) -> String,
}

/// Why a receiving directory cannot be used: each names the directory (the caller names its
/// key).
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// A file is there.
    #[error("'{0}' is a file, not a directory: name a directory (it is created if missing)")]
    IsAFile(PathBuf),
    /// It could not be created.
    #[error("'{dir}' cannot be created ({source}): name a directory you can write to")]
    Create {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The receiving directory: created if missing; a file there is an error.
pub fn prepare_dir(dir: &Path) -> Result<(), DirError> {
    if dir.exists() && !dir.is_dir() {
        return Err(DirError::IsAFile(dir.to_path_buf()));
    }
    std::fs::create_dir_all(dir).map_err(|source| DirError::Create {
        dir: dir.to_path_buf(),
        source,
    })
}

/// Removes a receiving directory when dropped (`remove_dir_at_exit`).
struct RemoveAtExit(PathBuf);

impl Drop for RemoveAtExit {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn session_line(s: &ServerSession, words: fn(&str) -> String) -> String {
    let ok = s.files.iter().filter(|f| f.ok).count();
    let secs = s.total_ns as f64 / 1e9;
    let mut l = format!(
        "session from {}: {ok}/{} files ok, {} written in {} s ({} Mbit/s)",
        s.peer,
        s.files.len(),
        format_size(s.bytes),
        num(secs),
        num(s.bytes as f64 * 8.0 / secs.max(1e-9) / 1e6)
    );
    if !s.cc.is_empty() {
        l.push_str(&format!(", cc {}", s.cc));
    }
    if let Some(e) = &s.error {
        l.push_str(&format!(", failed: {}", words(e)));
    }
    l
}

fn log_line(log: &SessionLog) -> String {
    let mut l = format!(
        "sessions = {} ({} failed, {} open at the stop): files {} ok, {} failed, {} written",
        log.sessions,
        log.failed,
        log.open_at_stop,
        log.files_ok,
        log.files_failed,
        format_size(log.bytes)
    );
    if log.refused + log.evicted + log.idle_closed > 0 {
        l.push_str(&format!(
            "; refused {} (server full), evicted {} and closed {} without progress",
            log.refused, log.evicted, log.idle_closed
        ));
    }
    if log.handshakes_failed > 0 {
        l.push_str(&format!(
            "; {} QUIC handshake(s) failed (no state kept)",
            log.handshakes_failed
        ));
    }
    if log.recent().len() as u64 != log.sessions {
        l.push_str(&format!("; the last {} shown", log.recent().len()));
    }
    l
}

/// Receives until SIGINT/SIGTERM (or, `once`, the end of the first session); then (unless
/// quiet) the sessions it served.
pub fn serve(cfg: &ServeConfig, say: Say) -> Result<(), RoleError> {
    let _remove = cfg
        .remove_dir_at_exit
        .then(|| RemoveAtExit(cfg.dir.clone()));
    let run = |e: TransferError| RoleError::Run(e.to_string());
    if let Some(age) = cfg.partial_max_age {
        let r = socklab_transfer::reclaim_partials(&cfg.dir, age).map_err(run)?;
        if r.files > 0 && !say.quiet {
            eprintln!(
                "reclaimed {} partial file(s) ({} bytes) older than {} in '{}'",
                r.files,
                r.bytes,
                format_duration(age),
                cfg.dir.display()
            );
        }
    }
    let bind = cfg.bind;
    let log = match cfg.proto {
        Proto::Tcp => {
            let listener =
                socklab_net::sink::listen(bind).map_err(|e| RoleError::Run(e.to_string()))?;
            let addr = listener.local_addr()?;
            announce(addr, cfg, say, cfg.tcp.cc.as_deref())?;
            socklab_transfer::serve_tcp_with(
                listener,
                &cfg.dir,
                &cfg.tcp,
                interrupt_flag(),
                cfg.once,
            )
            .map(SessionLog::from_sessions)
            .map_err(run)?
        }
        Proto::Rudp => {
            let socket = UdpSocket::bind(bind)
                .map_err(|e| RoleError::Run(format!("cannot bind UDP {bind}: {e}")))?;
            let addr = socket.local_addr()?;
            announce(addr, cfg, say, None)?;
            socklab_transfer::serve_rudp_with(
                socket,
                &cfg.dir,
                &socklab_rudp::Config::default(),
                &cfg.tcp.limits,
                &cfg.rudp_sessions,
                interrupt_flag(),
                cfg.once,
            )
            .map_err(run)?
        }
        Proto::Quic => {
            let socket = UdpSocket::bind(bind)
                .map_err(|e| RoleError::Run(format!("cannot bind UDP {bind}: {e}")))?;
            let addr = socket.local_addr()?;
            let identity = socklab_tls::Identity::self_signed(&[])
                .map_err(|e| RoleError::Run(e.to_string()))?;
            announce(addr, cfg, say, None)?;
            let fp = identity.fingerprint().to_string();
            let key = socklab_transfer::quic::FINGERPRINT_KEY;
            super::announce_certificate(say.announce, key, &fp);
            if !say.quiet {
                eprintln!("certificate: self-signed for this run, SHA-256 {fp} (pin it)");
            }
            let opts = socklab_transfer::quic::QuicServeOptions {
                max_sessions: cfg.tcp.max_sessions,
                idle_timeout: cfg.tcp.idle_timeout,
                limits: cfg.tcp.limits.clone(),
                ..Default::default()
            };
            socklab_transfer::quic::serve_quic(
                socket,
                &cfg.dir,
                &identity,
                &opts,
                interrupt_flag(),
                cfg.once,
            )
            .map_err(run)?
        }
    };
    if !say.quiet {
        for s in log.recent() {
            // A peer names the files (and so the errors quote its bytes): escaped.
            eprintln!("{}", socklab_units::text::line(&session_line(s, cfg.words)));
        }
        eprintln!("{}", log_line(&log));
    }
    // With `once` the first session to end decides (others were interrupted by its end).
    let first_error = log.recent().next().and_then(|s| s.error.clone());
    match first_error {
        Some(e) if cfg.once => Err(RoleError::Run(format!("the transfer failed: {e}"))),
        _ => Ok(()),
    }
}

fn announce(
    addr: SocketAddr,
    cfg: &ServeConfig,
    say: Say,
    cc: Option<&str>,
) -> Result<(), RoleError> {
    server_started(addr, say.announce)?;
    if !say.quiet {
        eprintln!(
            "socklab transfer serve listening on {addr} ({}{}) into '{}'; {}",
            cfg.proto.as_str(),
            cc.map(|c| format!(", cc {c}")).unwrap_or_default(),
            cfg.dir.display(),
            if cfg.once {
                "stops after one transfer"
            } else {
                "Ctrl-C stops"
            }
        );
    }
    Ok(())
}

/// A checked `transfer send`.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Its transport.
    pub proto: Proto,
    /// The server.
    pub to: SocketAddr,
    /// The files (each a regular file).
    pub files: Vec<PathBuf>,
    /// TCP's congestion control.
    pub cc: Option<String>,
    /// How long the transfer may make no progress.
    pub timeout: Duration,
    /// quic: the server's certificate (`None`: unverified, the signature still checked).
    pub trust: Option<socklab_tls::Trust>,
    /// The report as JSON instead of a table and a line.
    pub json: bool,
}

/// Sends the files; the report to print.
pub fn send(cfg: &SendConfig) -> Result<String, RoleError> {
    install_interrupt_flag()?;
    let proto = cfg.proto;
    let to = cfg.to;
    let trust = cfg.trust.clone();
    let r = socklab_transfer::send(proto, to, &cfg.files, cfg.cc.as_deref(), cfg.timeout, trust)
        .map_err(|e| RoleError::Run(e.to_string()))?;
    let (summary, extra) = match &r {
        TransferReport::Tcp(r) => (
            format!(
                "cc {}, retransmissions {} segments (tcpi_total_retrans), srtt {} us, min rtt {} us, segments out {}",
                r.cc, r.total_retrans, r.rtt_us, r.tcp.min_rtt_us, r.segs_out
            ),
            json!({
                "cc": r.cc, "total_retrans": r.total_retrans, "srtt_us": r.rtt_us,
                "min_rtt_us": r.tcp.min_rtt_us, "segs_out": r.segs_out,
            }),
        ),
        TransferReport::Rudp(r) => {
            let st = &r.stats;
            (
                format!(
                    "retransmitted packets {}, spurious losses {}, srtt {} us, min rtt {} us, packets sent {}, received {}",
                    st.retransmitted_packets,
                    st.spurious_losses,
                    num(st.srtt_ns as f64 / 1000.0),
                    num(st.min_rtt_ns as f64 / 1000.0),
                    st.packets_sent,
                    st.packets_received
                ),
                json!({
                    "retransmitted_packets": st.retransmitted_packets,
                    "spurious_losses": st.spurious_losses, "lost_packets": st.lost_packets,
                    "srtt_us": st.srtt_ns as f64 / 1000.0, "min_rtt_us": st.min_rtt_ns as f64 / 1000.0,
                    "packets_sent": st.packets_sent, "packets_received": st.packets_received,
                }),
            )
        }
        TransferReport::Quic(q) => (
            format!(
                "cc {} (quinn), lost packets {}, congestion events {}, srtt {} us, min rtt {} us, packets sent {}, path MTU {}, handshake {} us",
                q.cc, q.lost_packets, q.congestion_events, q.rtt_us, q.min_rtt_us, q.sent_packets, q.mtu, q.handshake_ns / 1000
            ),
            json!({
                "cc": q.cc, "lost_packets": q.lost_packets, "congestion_events": q.congestion_events,
                "srtt_us": q.rtt_us, "min_rtt_us": q.min_rtt_us, "packets_sent": q.sent_packets,
                "mtu": q.mtu, "handshake_us": q.handshake_ns as f64 / 1000.0,
            }),
        ),
    };
    let (files, per_file, total_ns, bytes) =
        (r.files(), r.per_file_retransmits(), r.total_ns(), r.bytes());
    let secs = total_ns as f64 / 1e9;
    let goodput = bytes as f64 * 8.0 / secs.max(1e-9) / 1e6;
    if cfg.json {
        let files: Vec<serde_json::Value> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                json!({"name": f.name, "size": f.size, "ok": f.ok, "retransmissions": per_file.get(i)})
            })
            .collect();
        let mut v = json!({
            "proto": proto.as_str(), "to": to.to_string(), "total_s": secs,
            "goodput_mbps": goodput, "bytes": bytes, "files": files,
        });
        if let (Some(v), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            v.extend(e.clone());
        }
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ));
    }
    Ok(file_table(files, per_file).to_text()
        + &format!(
            "{} files, {} in {} s: goodput {} Mbit/s ({}); {summary}\n",
            files.len(),
            format_size(bytes),
            num(secs),
            num(goodput),
            proto.as_str()
        ))
}

fn file_table(files: &[FileOutcome], per_file: &[u64]) -> Table {
    let mut t = Table::new(&["file", "bytes", "ok", "retx"]);
    t.left = vec![true, false, true, false];
    for (i, f) in files.iter().enumerate() {
        t.row(vec![
            f.name.clone(),
            f.size.to_string(),
            if f.ok { "ok" } else { f.detail.as_str() }.to_string(),
            per_file
                .get(i)
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receiving_directory_is_made_and_a_file_in_its_place_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        prepare_dir(&dir).unwrap();
        assert!(dir.is_dir());
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = prepare_dir(&file).unwrap_err();
        assert!(matches!(e, DirError::IsAFile(_)));
        assert!(e
            .to_string()
            .ends_with("is a file, not a directory: name a directory (it is created if missing)"));
    }
}
