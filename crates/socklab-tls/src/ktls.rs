//! Kernel TLS: whether this kernel offers the `tls` upper-layer protocol.
//!
//! socklab probes by attaching the ULP to a loopback connection of its own, the same call a
//! kTLS sender makes; `/proc/sys/net/ipv4/tcp_available_ulp` lists only modules already
//! loaded, while the call loads one on demand.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;

use crate::TlsError;

/// `Ok(())` where `setsockopt(TCP_ULP, "tls")` succeeds on a fresh loopback connection;
/// otherwise the one-line error that names the missing module and the fix.
pub fn probe() -> Result<(), TlsError> {
    let io = |e: std::io::Error| TlsError::Ktls(format!("kTLS probe failed: {e}"));
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io)?;
    let client = TcpStream::connect(listener.local_addr().map_err(io)?).map_err(io)?;
    let _server = listener.accept().map_err(io)?;
    match socklab_sys::ulp::set_tcp_ulp(client.as_fd(), "tls") {
        Ok(()) => Ok(()),
        Err(e) if socklab_sys::ulp::ulp_missing(&e) => Err(TlsError::Ktls(format!(
            "`ktls`: this kernel ({}) has no tls ULP (setsockopt TCP_ULP \"tls\": {e}; \
             available: {}): load the module with `modprobe tls` (CONFIG_TLS), or drop `ktls` \
             to measure user-space TLS",
            kernel_release(),
            available_ulps()
        ))),
        Err(e) => Err(TlsError::Ktls(format!(
            "`ktls`: setsockopt TCP_ULP \"tls\" failed: {e}"
        ))),
    }
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

fn available_ulps() -> String {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    let s = s.trim();
    if s.is_empty() {
        "none".to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_probe_either_succeeds_or_names_the_module() {
        match super::probe() {
            Ok(()) => {}
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("tls ULP") && e.contains("modprobe tls"), "{e}");
                assert!(!e.contains('\n'));
            }
        }
    }
}
