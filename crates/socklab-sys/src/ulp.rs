//! `TCP_ULP`: attach an upper-layer protocol (the kernel's `tls` module for kTLS) to a
//! connected TCP socket.
//!
//! The kernel loads the module on demand (`request_module("tcp-ulp-tls")`); where it is
//! neither built in nor loadable the call fails with `ENOENT`, which [`ulp_missing`] names.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

/// `setsockopt(fd, SOL_TCP, TCP_ULP, name)`: the socket must be an established TCP socket.
pub fn set_tcp_ulp(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let bytes = name.as_bytes();
    let len = libc::socklen_t::try_from(bytes.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: bytes is a valid buffer of len bytes for the duration of the call; the kernel
    // copies at most len bytes from it and keeps no pointer.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            bytes.as_ptr().cast(),
            len,
        )
    })
    .map(drop)
}

/// Whether an error from [`set_tcp_ulp`] means the kernel has no such ULP (no module).
pub fn ulp_missing(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::ENOENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn an_unknown_ulp_is_reported_missing() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _s = l.accept().unwrap();
        let err = set_tcp_ulp(c.as_fd(), "sl-no-such-ulp").unwrap_err();
        assert!(ulp_missing(&err), "{err}");
    }
}
