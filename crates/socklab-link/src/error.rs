//! Errors of the emulated link; each names what failed and carries the OS error.
//!
//! [`LinkError`] is what setting up, using or removing a link returns (the messages are those
//! socklab-net's `NetError` printed before the link had its crate; the lab converts at its
//! boundary); [`LinkKeyError`] is a set of link keys that does not make a link.

use std::io;
use std::net::SocketAddr;

/// An error from an emulated link or one of its probes.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The peer could not be reached.
    #[error("cannot connect to {addr}: {source} (is the socklab server listening there? start it, or omit `to` and socklab starts one)")]
    Connect {
        /// Where we tried to connect.
        addr: SocketAddr,
        /// What the kernel said.
        source: io::Error,
    },
    /// Binding a socket failed.
    #[error("cannot listen on {addr}: {source}{hint}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the kernel said.
        source: io::Error,
        /// A hint for the user.
        hint: &'static str,
    },
    /// A parameter is out of range or inconsistent.
    #[error("{0}")]
    Invalid(String),
    /// An I/O error.
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
}

impl LinkError {
    /// A failed socket/bind on `addr`, with a hint for the common causes.
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
        LinkError::Bind { addr, source, hint }
    }

    /// Wraps an I/O error with what we were doing.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        LinkError::Io {
            context: context.into(),
            source,
        }
    }
}

/// A link driver or side that is not one of the choices; `Display` names the value and the
/// choices: `unknown WHAT 'VALUE': FIX`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{value}': {fix}")]
pub struct ParseNameError {
    /// What was asked for: `driver`, `side`.
    pub what: &'static str,
    /// The value as given.
    pub value: String,
    /// The choices, e.g. `use auto, tun, netem or udp-proxy`.
    pub fix: String,
}

impl ParseNameError {
    /// A [`ParseNameError`] for `value`.
    pub fn unknown(what: &'static str, value: &str, fix: impl Into<String>) -> Self {
        ParseNameError {
            what,
            value: value.to_string(),
            fix: fix.into(),
        }
    }
}

impl From<ParseNameError> for LinkError {
    fn from(e: ParseNameError) -> Self {
        LinkError::Invalid(e.to_string())
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

impl From<LinkKeyError> for LinkError {
    fn from(e: LinkKeyError) -> Self {
        LinkError::Invalid(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Driver, Side};

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
        // `?` still turns them into a LinkError with the same text.
        let e: crate::LinkError = "ovs".parse::<Driver>().unwrap_err().into();
        assert_eq!(e.to_string(), err::<Driver>("ovs"));
    }
}
