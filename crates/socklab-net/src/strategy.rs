//! The write strategies of the bulk lab. Each is a value that parses from and prints to the
//! same text, so the CLI, experiment files, the store and the report share one vocabulary.

use std::fmt;
use std::str::FromStr;

use crate::ParseNameError;

/// How the sender hands a round of `nbufs` buffers of `bufsize` bytes to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// One `write()` per buffer: `nbufs` system calls per round (seed 003, type 1).
    Write,
    /// One `writev()` over `nbufs` iovecs per round (seed 003, type 2).
    Writev,
    /// One `write()` of a contiguous `nbufs × bufsize` buffer per round (seed 003, type 3).
    Single,
    /// One `sendmsg()` over `nbufs` iovecs per round.
    Sendmsg,
    /// `sendfile()` of the round's bytes from a file (page cache) to the socket.
    Sendfile,
    /// `vmsplice()` of the round into a pipe, then `splice()` from the pipe to the socket.
    Splice,
    /// `sendmsg(MSG_ZEROCOPY)` over `nbufs` iovecs; completions reaped from the error queue.
    Zerocopy,
}

impl Strategy {
    /// Every strategy, in the order the docs list them.
    pub const ALL: [Strategy; 7] = [
        Strategy::Write,
        Strategy::Writev,
        Strategy::Single,
        Strategy::Sendmsg,
        Strategy::Sendfile,
        Strategy::Splice,
        Strategy::Zerocopy,
    ];

    /// The text form (`write`, `writev`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Write => "write",
            Strategy::Writev => "writev",
            Strategy::Single => "single",
            Strategy::Sendmsg => "sendmsg",
            Strategy::Sendfile => "sendfile",
            Strategy::Splice => "splice",
            Strategy::Zerocopy => "zerocopy",
        }
    }

    /// True when one call carries `nbufs` iovecs, so `nbufs` must not exceed `IOV_MAX`.
    pub fn uses_iovecs(self) -> bool {
        matches!(
            self,
            Strategy::Writev | Strategy::Sendmsg | Strategy::Zerocopy
        )
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Strategy {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        Strategy::ALL
            .into_iter()
            .find(|st| st.as_str() == t)
            .or(match t.as_str() {
                // The seed's numbering.
                "1" => Some(Strategy::Write),
                "2" => Some(Strategy::Writev),
                "3" => Some(Strategy::Single),
                _ => None,
            })
            .ok_or_else(|| {
                let all: Vec<&str> = Strategy::ALL.iter().map(|s| s.as_str()).collect();
                ParseNameError::unknown("strategy", s, format!("choose one of {}", all.join(", ")))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_round_trips_through_text() {
        for s in Strategy::ALL {
            assert_eq!(s.to_string().parse::<Strategy>().unwrap(), s);
        }
        assert_eq!("3".parse::<Strategy>().unwrap(), Strategy::Single);
        let e = "writeev".parse::<Strategy>().unwrap_err().to_string();
        assert!(e.contains("writeev") && e.contains("writev, single"), "{e}");
    }
}
