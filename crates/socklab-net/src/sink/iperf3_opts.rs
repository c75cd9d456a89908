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

use crate::iperf3::options::{ServerError, IEINITTEST, IESETBUF, IESETBUF2, IESETCONGESTION};
use crate::iperf3::proto::Params;
use crate::iperf3::results::Applied;
use crate::send::available_cc;

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
        if let Err(e) = sock.set_tcp_congestion(cc.as_bytes()) {
            return Err(ServerError {
                code: IESETCONGESTION,
                errno: e.raw_os_error().unwrap_or(0),
                why: format!(
                    "iperf3 `congestion` {cc:?}: this kernel cannot use it ({e}); available here: {}",
                    available_cc()
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

/// The check of a test's parameters before its streams are made: [`apply`] on an
/// unconnected socket of its own, so the client learns at once, with a reason, that this
/// kernel cannot give the window or the congestion control it asked for.
pub(super) fn vet(p: &Params) -> Result<(), ServerError> {
    if p.window.is_none() && p.congestion.is_none() {
        return Ok(());
    }
    let probe = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))
        .or_else(|_| Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP)))
        .map_err(|e| ServerError {
            code: IEINITTEST,
            errno: e.raw_os_error().unwrap_or(0),
            why: format!("iperf3 test: no socket to check its options on: {e}"),
        })?;
    apply(SockRef::from(&probe), p).map(|_| ())
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
