//! The socket side of an iperf3 client's options on the sink's streams: `window` (`-w`,
//! `SO_SNDBUF` and `SO_RCVBUF`), `congestion` (`-C`, `TCP_CONGESTION`), both read back from
//! the kernel; the check of a test's options on a socket of its own before its streams are
//! made; and `zerocopy` (`-Z`): the sink's sending streams send with `sendfile` from a file
//! holding one block, as iperf3's server does (`iperf_tcp_send`: `Nsendfile`).

use std::fs::File;
use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::iperf3::options::tcp_pacing;
use crate::iperf3::options::{ServerError, IEINITTEST, IESETBUF, IESETBUF2, IESETCONGESTION};
use crate::iperf3::proto::Params;

mod more;
use crate::iperf3::results::Applied;
use crate::send::available_cc;
pub(super) use more::{pace, unpace};

/// Sets the client's `window` and `congestion` on `sock` and reads back what it runs with;
/// a window the kernel cut below what was asked is refused as iperf3's server refuses it
/// (`IESETBUF2`), a congestion control the kernel lacks with `IESETCONGESTION`.
pub(super) fn apply(sock: SockRef<'_>, p: &Params) -> Result<Applied, ServerError> {
    if let Some(w) = p.window {
        let w = w as usize;
        let set = sock
            .set_recv_buffer_size(w)
            .and_then(|()| sock.set_send_buffer_size(w));
        if let Err(e) = set {
            return Err(ServerError {
                code: IESETBUF,
                errno: e.raw_os_error().unwrap_or(0),
                why: format!("iperf3 `window` {w}: setting SO_RCVBUF and SO_SNDBUF failed: {e}"),
            });
        }
    }
    if let Some(cc) = &p.congestion {
        // Only an algorithm already loaded: as root, setting another would have the kernel
        // load a module `tcp_<name>` at a remote client's word.
        let available = available_cc();
        let set = if loaded(&available, cc) {
            sock.set_tcp_congestion(cc.as_bytes())
        } else {
            Err(io::Error::from_raw_os_error(socklab_sys::errno::ENOENT))
        };
        if let Err(e) = set {
            return Err(ServerError {
                code: IESETCONGESTION,
                errno: e.raw_os_error().unwrap_or(0),
                why: format!(
                    "iperf3 `congestion` {cc:?}: this kernel cannot use it ({e}); available here: {available} (the sink loads no module for a client: `modprobe tcp_<name>` on its host)"
                ),
            });
        }
    }
    let applied = Applied {
        congestion: sock.tcp_congestion().ok().map(|v| {
            String::from_utf8_lossy(&v)
                .trim_end_matches('\0')
                .to_string()
        }),
        sndbuf: sock.send_buffer_size().unwrap_or(0),
        rcvbuf: sock.recv_buffer_size().unwrap_or(0),
        more: more::apply(&sock, p)?,
    };
    if let Some(w) = p.window {
        if applied.sndbuf < w as usize || applied.rcvbuf < w as usize {
            return Err(ServerError {
                code: IESETBUF2,
                errno: 0,
                why: format!(
                    "iperf3 `window` {w}: the kernel gave SO_SNDBUF {} and SO_RCVBUF {} (net.core.wmem_max and net.core.rmem_max cap them; raise those or ask for less)",
                    applied.sndbuf, applied.rcvbuf
                ),
            });
        }
    }
    Ok(applied)
}

/// Whether `cc` is among the algorithms this kernel has loaded (`available`, the text of
/// `tcp_available_congestion_control`); where that list cannot be read, the kernel decides.
fn loaded(available: &str, cc: &str) -> bool {
    available.trim().is_empty() || available.split_whitespace().any(|a| a == cc)
}

/// The check of a test's parameters before its streams are made: [`apply`] on an
/// unconnected socket of its own, so the client learns at once, with a reason, that this
/// kernel cannot give the window or the congestion control it asked for.
pub(super) fn vet(p: &Params) -> Result<(), ServerError> {
    let more = p.nodelay || p.tos.is_some() || p.dont_fragment.is_some();
    let pacing = (p.reverse || p.bidirectional) && tcp_pacing(p).is_some();
    if p.window.is_none() && p.congestion.is_none() && !more && !pacing {
        return Ok(());
    }
    let probe = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))
        .or_else(|_| Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP)))
        .map_err(|e| ServerError {
            code: IEINITTEST,
            errno: e.raw_os_error().unwrap_or(0),
            why: format!("iperf3 test: no socket to check its options on: {e}"),
        })?;
    apply(SockRef::from(&probe), p)?;
    if pacing {
        more::pace(&SockRef::from(&probe), p)?;
    }
    Ok(())
}

/// The file a `zerocopy` stream sends from: one block, in an unlinked temporary file.
pub(super) fn sendfile_source(block: &[u8]) -> io::Result<File> {
    let mut f = tempfile::tempfile()?;
    f.write_all(block)?;
    Ok(f)
}

/// One send of `n` bytes of the block from `offset`: `write` from memory, or `sendfile`
/// from the block's file.
pub(super) fn send_some(
    stream: &mut TcpStream,
    block: &[u8],
    file: Option<&File>,
    offset: usize,
    n: usize,
) -> io::Result<usize> {
    match file {
        None => stream.write(&block[offset..offset + n]),
        Some(f) => {
            let mut off = offset as i64;
            socklab_sys::io::sendfile(stream.as_fd(), f.as_fd(), &mut off, n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loaded_algorithm_is_set_so_no_client_makes_the_kernel_load_a_module() {
        assert!(loaded("reno cubic bbr\n", "cubic"));
        assert!(!loaded("reno cubic bbr", "dctcp"), "a module not loaded");
        assert!(!loaded("reno cubic", "cub"), "whole names only");
        assert!(loaded("", "cubic"), "no list: the kernel decides");
        let p = Params {
            congestion: Some("dctcp-x".into()),
            ..Params::default()
        };
        let e = vet(&p).unwrap_err();
        assert_eq!(
            (e.code, e.errno),
            (IESETCONGESTION, socklab_sys::errno::ENOENT)
        );
        assert!(
            e.why.contains("\"dctcp-x\"") && e.why.contains("available here"),
            "{}",
            e.why
        );
    }

    #[test]
    fn a_window_is_set_doubled_and_read_back_on_a_socket() {
        let p = Params {
            window: Some(64 * 1024),
            ..Params::default()
        };
        let probe = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        let a = apply(SockRef::from(&probe), &p).unwrap();
        // Linux doubles what is set (socket(7)); net.core.[rw]mem_max is at least 64 KiB.
        assert_eq!((a.sndbuf, a.rcvbuf), (128 * 1024, 128 * 1024));
        assert!(a.congestion.is_some_and(|c| !c.is_empty()));
    }
}
