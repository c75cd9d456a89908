//! The server designs of `socklab serve`, as data: each parses from and prints to the same
//! text (`prefork-flock`), so the CLI, the lab, the store and the report speak one vocabulary.

use std::fmt;
use std::str::FromStr;

use crate::ParseNameError;

/// One way to structure a TCP server (Stevens, UNP ch. 30 "Client/Server Design Alternatives",
/// plus the modern ones). Each variant lists its exact system-call sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Design {
    /// One process, one connection at a time: `socket, bind, listen`, then loop
    /// `accept → (read, write)* → close`. The book's baseline: its CPU time is subtracted from
    /// the others'. One idle client blocks everyone behind it: the idle timeout
    /// ([`ServeConfig::idle_timeout`](super::ServeConfig::idle_timeout)) is its only defence.
    Iterative,
    /// A new process per connection: loop `accept → fork`; the child `close(listener)`, serves,
    /// `_exit`s; the parent `close(conn)` and reaps with `waitpid(WNOHANG)` on `SIGCHLD`.
    Fork,
    /// `--workers` children forked after `listen`; every child blocks in `accept` on the shared
    /// listener (the kernel wakes one: no thundering herd on Linux for blocking accept).
    PreforkNolock,
    /// Preforked children; each takes an `fcntl(F_SETLKW)` write lock on a temporary file around
    /// `accept` and releases it (`F_UNLCK`) afterwards.
    PreforkFlock,
    /// Preforked children; a `PTHREAD_PROCESS_SHARED` mutex in `mmap(MAP_SHARED|MAP_ANONYMOUS)`
    /// memory is locked around `accept`.
    PreforkMutex,
    /// Preforked children, each with one end of a `socketpair(AF_UNIX, SOCK_STREAM)`; the parent
    /// `accept`s, picks an idle child, passes the descriptor with `sendmsg(SCM_RIGHTS)` and closes
    /// its copy; the child `recvmsg`s it, serves, and writes one byte back to say it is idle.
    PreforkFdpass,
    /// A new thread per connection: loop `accept → pthread_create` (detached); the thread serves
    /// and `close`s.
    Thread,
    /// `--workers` threads created after `listen`; each locks a mutex around `accept`.
    PrethreadMutex,
    /// `--workers` threads; the main thread `accept`s and hands the descriptor to an idle thread
    /// through a mutex- and condition-variable-protected queue.
    PrethreadHandoff,
    /// `--workers` threads, each calls `accept` on the shared listener without a lock.
    PrethreadAccept,
    /// One thread, one `epoll` instance, non-blocking sockets: `epoll_wait` →
    /// `accept4(SOCK_NONBLOCK)` until `EAGAIN` / `read` / `write` per ready descriptor.
    Epoll,
    /// One thread and one `epoll` instance per worker, all watching the one listener (no
    /// `EPOLLEXCLUSIVE`: every loop wakes for every connection, the thundering herd).
    EpollShared,
    /// As [`Design::EpollShared`], with the listener registered `EPOLLEXCLUSIVE` in every loop.
    EpollExclusive,
    /// One listener per worker with `SO_REUSEPORT` (the kernel hashes connections across them),
    /// each with its own thread and `epoll` loop.
    Reuseport,
    /// One `io_uring` per worker on a `SO_REUSEPORT` listener: multishot accept, multishot recv
    /// into a provided buffer ring, send. Falls back with a clear message where the kernel lacks
    /// a feature.
    Uring,
    /// A tokio multi-thread runtime (`--workers` threads), one task per connection.
    Tokio,
}

impl Design {
    /// Every design, in the book's order then the modern ones.
    pub const ALL: [Design; 16] = [
        Design::Iterative,
        Design::Fork,
        Design::PreforkNolock,
        Design::PreforkFlock,
        Design::PreforkMutex,
        Design::PreforkFdpass,
        Design::Thread,
        Design::PrethreadMutex,
        Design::PrethreadHandoff,
        Design::PrethreadAccept,
        Design::Epoll,
        Design::EpollShared,
        Design::EpollExclusive,
        Design::Reuseport,
        Design::Uring,
        Design::Tokio,
    ];

    /// The design's name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Design::Iterative => "iterative",
            Design::Fork => "fork",
            Design::PreforkNolock => "prefork-nolock",
            Design::PreforkFlock => "prefork-flock",
            Design::PreforkMutex => "prefork-mutex",
            Design::PreforkFdpass => "prefork-fdpass",
            Design::Thread => "thread",
            Design::PrethreadMutex => "prethread-mutex",
            Design::PrethreadHandoff => "prethread-handoff",
            Design::PrethreadAccept => "prethread-accept",
            Design::Epoll => "epoll",
            Design::EpollShared => "epoll-shared",
            Design::EpollExclusive => "epoll-exclusive",
            Design::Reuseport => "reuseport",
            Design::Uring => "uring",
            Design::Tokio => "tokio",
        }
    }

    /// True for the designs with a fixed pool of workers (`--workers` matters).
    pub fn has_workers(self) -> bool {
        !matches!(
            self,
            Design::Iterative | Design::Fork | Design::Thread | Design::Epoll
        )
    }

    /// True for the designs whose workers are processes (their CPU time comes from reaped
    /// children, as in the book).
    pub fn uses_processes(self) -> bool {
        matches!(
            self,
            Design::Fork
                | Design::PreforkNolock
                | Design::PreforkFlock
                | Design::PreforkMutex
                | Design::PreforkFdpass
        )
    }

    /// True for the designs the book measured (UNP figure 30.1 / seed 002).
    pub fn is_classic(self) -> bool {
        matches!(
            self,
            Design::Iterative
                | Design::Fork
                | Design::PreforkNolock
                | Design::PreforkFlock
                | Design::PreforkMutex
                | Design::PreforkFdpass
                | Design::Thread
                | Design::PrethreadMutex
                | Design::PrethreadHandoff
                | Design::PrethreadAccept
        )
    }
}

/// The designs that can serve TLS (`tls`).
pub const TLS_DESIGNS: [Design; 5] = [
    Design::Epoll,
    Design::EpollShared,
    Design::EpollExclusive,
    Design::Reuseport,
    Design::Tokio,
];

impl Design {
    /// True for the designs that can serve TLS: the event loops (rustls' sans-IO connection)
    /// and tokio (tokio-rustls).
    pub fn carries_tls(self) -> bool {
        TLS_DESIGNS.contains(&self)
    }
}

/// The one-line refusal of `tls` on a design that cannot carry it.
pub fn tls_refusal(d: Design) -> String {
    format!(
        "design {d} cannot serve `tls`: use one of {}",
        TLS_DESIGNS.map(Design::name).join(", ")
    )
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Design {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Design, ParseNameError> {
        let t = s.trim().to_ascii_lowercase();
        Design::ALL
            .into_iter()
            .find(|d| d.name() == t)
            .ok_or_else(|| {
                ParseNameError::unknown(
                    "server design",
                    s,
                    format!("use one of {}", Design::ALL.map(Design::name).join(", ")),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for d in Design::ALL {
            assert_eq!(d.name().parse::<Design>().unwrap(), d);
            assert_eq!(d.to_string(), d.name());
        }
        let mut names: Vec<_> = Design::ALL.iter().map(|d| d.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Design::ALL.len());
    }

    #[test]
    fn unknown_design_names_the_value_and_the_choices() {
        let e = "prefork-lock".parse::<Design>().unwrap_err().to_string();
        assert!(e.contains("'prefork-lock'"), "{e}");
        assert!(e.contains("prefork-flock"), "{e}");
    }
}
