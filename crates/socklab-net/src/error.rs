//! Errors of the socket layer; each names what failed and carries the OS error.

use std::io;
use std::net::SocketAddr;

/// An error from a live-socket operation.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The peer could not be reached.
    #[error("cannot connect to {addr}: {source} (is the socklab server listening there? start it, or omit --to and socklab starts one)")]
    Connect {
        /// Where we tried to connect.
        addr: SocketAddr,
        /// What the kernel said.
        source: io::Error,
    },
    /// Binding a listening socket failed.
    #[error("cannot listen on {addr}: {source}{hint}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the kernel said.
        source: io::Error,
        /// A hint for the user.
        hint: &'static str,
    },
    /// A socket option was refused.
    #[error("socket option {option}={value} refused: {source}{hint}")]
    SockOpt {
        /// Option name as socklab spells it.
        option: &'static str,
        /// The requested value.
        value: String,
        /// What the kernel said.
        source: io::Error,
        /// A hint for the user.
        hint: String,
    },
    /// A parameter is out of range or inconsistent.
    #[error("{0}")]
    Invalid(String),
    /// The peer broke the protocol.
    #[error("protocol error from {peer}: {detail}")]
    Protocol {
        /// The peer.
        peer: String,
        /// What was wrong.
        detail: String,
    },
    /// An I/O error during the test.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The error.
        source: io::Error,
    },
    /// An emulated link could not be set up, used or removed.
    #[error("{0}")]
    Link(String),
    /// The run was interrupted (Ctrl-C) before it finished.
    #[error("interrupted")]
    Interrupted,
}

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
    use socklab_sys::errno;
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

impl NetError {
    /// A failed socket/bind/listen on `addr`, with a hint for the common causes.
    pub fn bind(addr: SocketAddr, source: io::Error) -> Self {
        use socklab_sys::errno;
        let hint = match source.raw_os_error() {
            Some(errno::EADDRINUSE) => {
                " (another program holds that port: choose another --port, or 0 for any free port)"
            }
            Some(errno::EACCES) => " (ports below 1024 need root: choose --port 1024 or above)",
            Some(errno::EADDRNOTAVAIL) => {
                " (that address is not on this machine: use 127.0.0.1, ::1 or ::)"
            }
            _ => "",
        };
        NetError::Bind { addr, source, hint }
    }

    /// Wraps an I/O error with what we were doing.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        NetError::Io {
            context: context.into(),
            source,
        }
    }
}

/// An error of the file-transfer application layer ([`crate::transfer`]), over TCP or rudp.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// A parameter from the user is unusable (a path, a duplicate name, an empty buffer).
    #[error("{0}")]
    Invalid(String),
    /// A file name in a manifest is unsafe or unusable on this machine.
    #[error("refusing file name {name:?}: {reason}")]
    Name {
        /// The name as the manifest spells it.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// The peer sent bytes that break the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The peer made us buffer more than a fixed bound allows.
    #[error("{0}")]
    Limit(String),
    /// A file or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing, naming the file.
        context: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// The server verified a file and found it wrong (or finished without verifying it).
    #[error("transfer failed: {0}")]
    Verdict(String),
    /// The server gave up on the whole session and said why.
    #[error("the server aborted the transfer: {0}")]
    Aborted(String),
    /// The transfer did not finish in time.
    #[error("{0}")]
    Timeout(String),
    /// The transfer server could not be reached.
    #[error("cannot reach a transfer server at {addr}: {source} (start one there with `socklab transfer serve --proto tcp|rudp --port PORT --dir DIR`)")]
    Connect {
        /// Where we tried.
        addr: SocketAddr,
        /// What the kernel (or the handshake) said.
        source: io::Error,
    },
    /// A socket-level error (socket options).
    #[error(transparent)]
    Net(#[from] NetError),
    /// The run was interrupted (Ctrl-C) before it finished.
    #[error("interrupted")]
    Interrupted,
}

impl TransferError {
    /// Wraps an I/O error with what we were doing.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        TransferError::Io {
            context: context.into(),
            source,
        }
    }

    /// A refused file name.
    pub fn name(name: &str, reason: impl Into<String>) -> Self {
        TransferError::Name {
            name: name.to_string(),
            reason: reason.into(),
        }
    }
}
