//! Errors of the socket layer; each names what failed and carries the OS error.

use std::io;
use std::net::SocketAddr;

/// An error from a live-socket operation.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The peer could not be reached.
    #[error("cannot connect to {addr}: {source} (is the socklab server listening there? start it, or omit `to` and socklab starts one)")]
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
    /// The run passed its deadline, or the peer stopped taking data: the message says which
    /// and how to allow more time.
    #[error("{0}")]
    Timeout(String),
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
                " (another program holds that port: choose another `port`, or 0 for any free port)"
            }
            Some(errno::EACCES) => " (ports below 1024 need root: choose `port` 1024 or above)",
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
    #[error("cannot reach a transfer server at {addr}: {source} (start one there with `socklab transfer serve`, its `proto` tcp|rudp, `port` PORT and `dir` DIR)")]
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

/// A name that is not one of a fixed set: a server design, handler, load protocol, write
/// strategy, link driver, link side, closer or transfer protocol. `Display` names the value
/// and the choices.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseNameError {
    /// `unknown WHAT 'VALUE': FIX` (designs, handlers, protocols, strategies, drivers, sides).
    #[error("unknown {what} '{value}': {fix}")]
    Unknown {
        /// What was asked for: `server design`, `driver`, …
        what: &'static str,
        /// The value as given.
        value: String,
        /// The choices, e.g. `use auto, tun, netem or udp-proxy`.
        fix: String,
    },
    /// A states-workload closer that is neither `server` nor `client`.
    #[error("closer '{value}': choose server or client")]
    Closer {
        /// The value as given.
        value: String,
    },
    /// A transfer protocol that is neither `tcp` nor `rudp`.
    #[error("choose tcp or rudp")]
    Proto {
        /// The value as given.
        value: String,
    },
}

impl ParseNameError {
    /// A [`ParseNameError::Unknown`].
    pub fn unknown(what: &'static str, value: &str, fix: impl Into<String>) -> Self {
        ParseNameError::Unknown {
            what,
            value: value.to_string(),
            fix: fix.into(),
        }
    }
}

impl From<ParseNameError> for NetError {
    fn from(e: ParseNameError) -> Self {
        NetError::Invalid(e.to_string())
    }
}

/// A socket option (`nodelay`, `sndbuf=64K`, `client:cc=bbr`) or a set of them that does not
/// parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SockOptError {
    /// A known option with a bad or missing value.
    #[error("option '{option}': {reason}")]
    Value {
        /// The option as given.
        option: String,
        /// What is wrong and what to write.
        reason: String,
    },
    /// An option socklab does not know.
    #[error("unknown option '{option}': choose from baseline, {names} (prefix client: or server: for one side)")]
    Unknown {
        /// The option as given.
        option: String,
        /// The known names, comma-separated.
        names: String,
    },
    /// The same option twice for the same side in one set.
    #[error("option '{name}' is given twice in '{set}'")]
    Twice {
        /// The option's name.
        name: &'static str,
        /// The whole set as given.
        set: String,
    },
}

impl From<SockOptError> for NetError {
    fn from(e: SockOptError) -> Self {
        NetError::Invalid(e.to_string())
    }
}

/// A link MTU outside 576 (IPv4's minimum) to 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("use 576 to 65535 (1500 is Ethernet's)")]
pub struct MtuError;

/// Why one value of an emulated link's keys is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkValueError {
    /// `link` or `link_back` is not netem syntax.
    #[error(transparent)]
    Spec(#[from] socklab_impair::ParseSpecError),
    /// `link_driver` is not a driver.
    #[error(transparent)]
    Driver(#[from] ParseNameError),
    /// `link_mtu` is not a number in range.
    #[error(transparent)]
    Mtu(#[from] MtuError),
    /// `link_seed` is not a count.
    #[error("{0}")]
    Seed(String),
    /// `link_valid` is not `SHARE LAG`.
    #[error("{0}")]
    Valid(String),
}

/// An emulated link's keys (`link`, `link_back`, `link_driver`, `link_mtu`, `link_seed`,
/// `link_valid`) that
/// do not make a link; `Display` names the key, the value and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkKeyError {
    /// A link key given without `link`.
    #[error("{key} needs link: add link = \"…\" (netem syntax, or none)")]
    NeedsLink {
        /// The key given alone.
        key: &'static str,
    },
    /// A key whose value does not parse.
    #[error("{key} = '{value}': {reason}")]
    Value {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// Why, and what to write instead.
        reason: LinkValueError,
    },
}

impl From<LinkKeyError> for NetError {
    fn from(e: LinkKeyError) -> Self {
        NetError::Invalid(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use crate::link::{Driver, Side};
    use crate::load::LoadProtocol;
    use crate::server::{Design, Handler};
    use crate::sockopt::{OptSet, OptSpec, SockOpt};
    use crate::states::Closer;
    use crate::transfer::Proto;
    use crate::Strategy;

    fn err<T: std::str::FromStr>(s: &str) -> String
    where
        T::Err: std::fmt::Display,
    {
        s.parse::<T>().err().expect("must not parse").to_string()
    }

    #[test]
    fn typed_parse_errors_print_the_messages_users_know() {
        assert_eq!(
            err::<Driver>("ovs"),
            "unknown driver 'ovs': use auto, tun, netem or udp-proxy"
        );
        assert_eq!(
            err::<Side>("mid"),
            "unknown side 'mid': use client or server"
        );
        assert_eq!(
            err::<Handler>("ftp"),
            "unknown handler 'ftp': use one of stevens, echo, discard, http"
        );
        assert_eq!(
            err::<LoadProtocol>("ftp"),
            "unknown protocol 'ftp': use one of stevens, echo, http"
        );
        assert!(err::<Design>("x").starts_with("unknown server design 'x': use one of "));
        assert!(err::<Strategy>("x").starts_with("unknown strategy 'x': choose one of write"));
        assert_eq!(
            err::<Closer>("both"),
            "closer 'both': choose server or client"
        );
        assert_eq!(err::<Proto>("sctp"), "choose tcp or rudp");
        assert!(
            err::<SockOpt>("x").starts_with("unknown option 'x': choose from baseline, nodelay")
        );
        assert!(err::<SockOpt>("x").ends_with(" (prefix client: or server: for one side)"));
        assert_eq!(
            err::<OptSpec>("client:mss=1"),
            "option 'mss=1': out of range 88..=65535"
        );
        assert_eq!(
            err::<OptSet>("nodelay+client:nodelay"),
            "option 'nodelay' is given twice in 'nodelay+client:nodelay'"
        );
        // `?` still turns them into a NetError with the same text.
        let e: crate::NetError = "ovs".parse::<Driver>().unwrap_err().into();
        assert_eq!(e.to_string(), err::<Driver>("ovs"));
    }
}

/// Why a datagram is not one of `socklab bulk --udp` ([`crate::udpbulk::wire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UdpWireError {
    /// Shorter than the header.
    #[error("datagram of {0} bytes, shorter than the {len}-byte header", len = crate::udpbulk::wire::HEADER_LEN)]
    Short(usize),
    /// Not socklab's magic number.
    #[error("not a socklab UDP bulk datagram (magic {0:#010x})")]
    Magic(u32),
    /// A version this build does not speak.
    #[error("UDP bulk datagram version {0}, this socklab speaks {v}", v = crate::udpbulk::wire::VERSION)]
    Version(u8),
    /// The header checksum does not match (the header was damaged on the way).
    #[error("UDP bulk datagram header checksum mismatch")]
    Check,
    /// Flags or a length that this version does not define.
    #[error("UDP bulk datagram with unknown flags {flags:#04x} or header length {len}")]
    Layout {
        /// The flags byte.
        flags: u8,
        /// The header length field.
        len: u16,
    },
}
