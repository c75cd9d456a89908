//! What an I/O error means to a socket loop: a socket timeout, or an `accept()` error a server
//! survives. Shared by net, link and transfer (moved here from `socklab-net`'s `error.rs`).

use std::io;

use crate::errno;

/// True for the errors a socket timeout (`SO_RCVTIMEO`/`SO_SNDTIMEO`) produces.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// True for `accept()` errors a server should survive: out of descriptors or memory, a client
/// that left before it was accepted, a signal.
pub fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            errno::ENFILE
                | errno::EMFILE
                | errno::ECONNABORTED
                | errno::ENOBUFS
                | errno::ENOMEM
                | errno::EINTR
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_and_transient_accept_errors_are_told_apart() {
        assert!(is_timeout(&io::Error::from(io::ErrorKind::WouldBlock)));
        assert!(is_timeout(&io::Error::from(io::ErrorKind::TimedOut)));
        assert!(!is_timeout(&io::Error::from(
            io::ErrorKind::ConnectionReset
        )));
        assert!(is_transient_accept_error(&io::Error::from_raw_os_error(
            errno::EMFILE
        )));
        assert!(!is_transient_accept_error(&io::Error::from_raw_os_error(
            errno::EINVAL
        )));
    }
}
