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

pub use crate::udpbulk::wire::UdpWireError;
pub use socklab_sys::ioerr::{is_timeout, is_transient_accept_error};

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

/// A name that is not one of a fixed set: a server design, handler, load protocol, write
/// strategy or closer (the link's driver and side: `socklab_link::ParseNameError`). `Display` names the value
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

#[cfg(test)]
mod tests {
    use crate::load::LoadProtocol;
    use crate::server::{Design, Handler};
    use crate::sockopt::{OptSet, OptSpec, SockOpt};
    use crate::states::Closer;
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
            err::<Handler>("ftp"),
            "unknown handler 'ftp': use one of stevens, echo, discard, http"
        );
        assert_eq!(
            err::<LoadProtocol>("ftp"),
            "unknown protocol 'ftp': use one of stevens, echo, http, https"
        );
        assert!(err::<Design>("x").starts_with("unknown server design 'x': use one of "));
        assert!(err::<Strategy>("x").starts_with("unknown strategy 'x': choose one of write"));
        assert_eq!(
            err::<Closer>("both"),
            "closer 'both': choose server or client"
        );
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
        let e: crate::NetError = "ftp".parse::<Handler>().unwrap_err().into();
        assert_eq!(e.to_string(), err::<Handler>("ftp"));
    }
}
