//! Errors of the file-transfer layer; each names what failed and carries the OS error.

use std::io;
use std::net::SocketAddr;

/// An error of the file-transfer application layer, over TCP or rudp.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// A parameter from the user is unusable (a path, a duplicate name, an empty buffer).
    #[error("{0}")]
    Invalid(String),
    /// A file name in a manifest is unsafe or unusable on this machine.
    #[error("refusing file name '{}': {reason}", socklab_units::text::quote(name))]
    Name {
        /// The name as the manifest spells it.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// The peer sent bytes that break the protocol.
    #[error("protocol error: {}", socklab_units::text::line(.0))]
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
    #[error("the server aborted the transfer: {}", socklab_units::text::line(.0))]
    Aborted(String),
    /// The transfer did not finish in time.
    #[error("{0}")]
    Timeout(String),
    /// The transfer server could not be reached.
    #[error("cannot reach a transfer server at {addr}: {source} (start one there with `socklab transfer serve`, its `proto` tcp|rudp|quic, `port` PORT and `dir` DIR)")]
    Connect {
        /// Where we tried.
        addr: SocketAddr,
        /// What the kernel (or the handshake) said.
        source: io::Error,
    },
    /// A socket option was refused (the congestion control asked for).
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

/// A transfer protocol that is not `tcp`, `rudp` or `quic`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("choose tcp, rudp or quic")]
pub struct ParseProtoError {
    /// The value as given.
    pub value: String,
}

#[cfg(test)]
mod tests {
    use crate::Proto;

    #[test]
    fn a_protocol_that_is_not_one_says_the_choices() {
        let e = "sctp".parse::<Proto>().expect_err("must not parse");
        assert_eq!(e.to_string(), "choose tcp, rudp or quic");
        assert_eq!(e.value, "sctp");
    }
}
