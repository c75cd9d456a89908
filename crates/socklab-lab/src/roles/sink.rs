//! The `sink` role (TCP): the bulk receiver's main loop.

use std::net::SocketAddr;
use std::path::PathBuf;

use socklab_net::protocol::MAX_READ_SIZE;
use socklab_net::sink::{Mode, Sink, SinkConfig};
use socklab_sys::process::interrupted;
use socklab_units::{format_size, parse_size};

use super::checks::{idle_timeout, parse_bind};

use super::sink_store::SinkStore;
use super::{print_server_cpu, server_started, RoleError, Say};
/// Connections the sink serves at once by default.
pub use socklab_net::sink::DEFAULT_MAX_CONNS;

/// The sink's configuration from its command line (text where the command line has text):
/// `bind` an IP address, `read_size` 1 to 64M, `idle_timeout` positive. Errors name the key
/// and the fix.
pub fn config(
    bind: &str,
    port: u16,
    read_size: &str,
    idle: &str,
    max_conns: usize,
) -> Result<SinkConfig, RoleError> {
    let ip = parse_bind(bind)?;
    let bad = |why: String| RoleError::Usage(format!("`read_size` {why}"));
    let read_size = match parse_size(read_size).map_err(bad)? {
        n @ 1.. if n <= MAX_READ_SIZE as u64 => n as usize,
        _ => {
            return Err(bad(format!(
                "{read_size}: use 1 to {}",
                format_size(MAX_READ_SIZE as u64)
            )))
        }
    };
    Ok(SinkConfig {
        bind: SocketAddr::new(ip, port),
        read_size,
        idle_timeout: idle_timeout(idle)?,
        max_conns,
        ..SinkConfig::default()
    })
}

/// What the sink would do, for a dry run.
pub fn dry_text(cfg: &SinkConfig) -> String {
    format!(
        "socklab sink would listen on {} (raw clients read {} bytes at a time)",
        cfg.bind,
        format_size(cfg.read_size as u64)
    )
}

/// Listens as `cfg` says and serves until SIGINT/SIGTERM; then (unless quiet) the CPU time
/// and the connections served. With `db`, each iperf3 test it finishes is stored there as it
/// ends ([`super::sink_store`]).
pub fn run(cfg: SinkConfig, say: Say, db: Option<PathBuf>) -> Result<(), RoleError> {
    let mut store = match db.as_deref() {
        Some(p) => Some(SinkStore::open(p).map_err(|e| RoleError::Usage(e.to_string()))?),
        None => None,
    };
    let read_size = cfg.read_size;
    let mut sink = Sink::bind(cfg)?;
    let addr = sink.local_addr()?;
    server_started(addr, say.announce)?;
    let fingerprint = sink.tls_fingerprint().map(|f| f.to_string());
    if let Some(fp) = &fingerprint {
        let key = socklab_net::sink::TLS_FINGERPRINT_KEY;
        super::announce_certificate(say.announce, key, fp);
    }
    if !say.quiet {
        eprintln!(
            "socklab sink listening on {addr} (raw clients read {} bytes at a time; Ctrl-C stops)",
            format_size(read_size as u64)
        );
        if let Some(fp) = &fingerprint {
            eprintln!("TLS streams: a self-signed certificate of this run, SHA-256 {fp} (pin it)");
        }
    }
    let quiet = say.quiet;
    let mut served = 0u64;
    sink.serve(&interrupted, &mut |r| {
        // The UDP port's report of datagrams outside any test is not a connection.
        served += u64::from(!matches!(r.mode, Mode::Iperf3UdpApart { .. }));
        if !quiet {
            eprintln!("{}", r.line());
        }
        if let (Some(s), Some(t)) = (store.as_mut(), r.iperf3.as_deref()) {
            // A test that cannot be stored is said, and the sink goes on serving.
            match s.record(r.peer, t) {
                Ok(id) if !quiet => eprintln!("{} iperf3 test stored as experiment {id}", r.peer),
                Ok(_) => {}
                Err(e) => eprintln!("{} iperf3 test not stored: {e}", r.peer),
            }
        }
    })
    .map_err(|e| RoleError::Run(e.to_string()))?;
    if !quiet {
        print_server_cpu();
        eprintln!("connections served = {served}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_config_from_its_flags() {
        let cfg = config("::1", 5001, "1500", "30s", 8).unwrap();
        assert_eq!(cfg.bind, "[::1]:5001".parse().unwrap());
        assert_eq!((cfg.read_size, cfg.max_conns), (1500, 8));
        assert_eq!(
            dry_text(&cfg),
            "socklab sink would listen on [::1]:5001 (raw clients read 1500 bytes at a time)"
        );
        let e = config("::", 0, "0", "30s", 1).unwrap_err().to_string();
        assert_eq!(e, "`read_size` 0: use 1 to 64M");
        let e = config("::", 0, "1G", "30s", 1).unwrap_err().to_string();
        assert_eq!(e, "`read_size` 1G: use 1 to 64M");
        assert!(config("::", 0, "1K", "0s", 1).is_err());
        assert!(config("nowhere", 0, "1K", "1s", 1).is_err());
    }
}
