//! `socklab-sys`: the one crate of socklab that contains `unsafe` code.
//!
//! Every raw `libc` call of the project lives here, behind a safe function over
//! [`BorrowedFd`](std::os::fd::BorrowedFd) or owned types. Each `unsafe` block carries a
//! `// SAFETY:` line saying why the call is sound. Everything above this crate is safe Rust
//! (`unsafe_code = "forbid"`).
//!
//! Modules:
//! - [`io`] — the write primitives of the bulk strategies (`write`, `writev`, `sendmsg`,
//!   `sendfile`, `splice`, `vmsplice`) and pipes with a chosen capacity;
//! - [`zerocopy`] — `SO_ZEROCOPY` and the `MSG_ERRQUEUE` completion reaper;
//! - [`tcp`] — `TCP_INFO`;
//! - [`usage`] — `getrusage` and `wait4`;
//! - [`process`] — parent-death signal, signals to children, a Ctrl-C flag;
//! - [`procs`] — the classic servers' primitives: `fork`/`_exit`/reaping, an `fcntl` lock, a
//!   process-shared mutex and counters in shared memory, `SCM_RIGHTS` passing, `RLIMIT_NOFILE`;
//! - [`host`] — facts about the machine (kernel, CPU, congestion control);
//! - [`sched`] — CPU affinity of the calling thread;
//! - [`fs`] — free space of a file system (`fstatvfs`);
//! - [`ioerr`] — what an I/O error means to a socket loop (a timeout, a transient `accept()`);
//! - [`netns`] — network namespaces, TUN devices, per-thread CPU time;
//! - [`ulp`] — `TCP_ULP` (the kernel's `tls` module for kTLS) and its missing-module error;
//! - [`udp`] — UDP receive with GRO (several datagrams per call);
//! - [`mmsg`] — batched UDP: `sendmmsg`, `recvmmsg` with kernel arrival times and the
//!   socket's drop counter;
//! - [`epoll`] — `epoll`, `accept4`, non-blocking `send`/`recv` for the event-loop servers;
//! - [`uring`] — a safe io_uring ring: multishot accept, multishot recv into a provided buffer
//!   ring, send from owned buffers;
//! - [`mem`] — giving the C heap's free memory back (`malloc_trim`);
//! - [`alloc_count`] — a counting global allocator for no-allocation and no-leak tests;
//! - [`skip`] — tests that cannot run here: counted by `scripts/test`, fatal in CI as root.

pub mod alloc_count;
pub mod epoll;
pub mod fs;
pub mod host;
pub mod io;
pub mod ioerr;
pub mod mem;
pub mod mmsg;
pub mod netns;
pub mod process;
pub mod procs;
pub mod sched;
pub mod skip;
pub mod sockopt;
pub mod tcp;
pub mod udp;
pub mod ulp;
pub mod uring;
pub mod usage;
pub mod zerocopy;

/// Turns a libc return value into an `io::Result`, reading `errno` on `-1`.
pub(crate) fn cvt(ret: libc::c_int) -> std::io::Result<libc::c_int> {
    if ret == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Like [`cvt`] for `ssize_t` results.
pub(crate) fn cvt_size(ret: libc::ssize_t) -> std::io::Result<usize> {
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// The `errno` values socklab reacts to, named, so crates above this one need no `libc`.
pub mod errno {
    pub use libc::{
        EACCES, EADDRINUSE, EADDRNOTAVAIL, EAFNOSUPPORT, ECANCELED, ECONNABORTED, ECONNREFUSED,
        ECONNRESET, EINPROGRESS, EINTR, EINVAL, EIO, EMFILE, ENFILE, ENOBUFS, ENOENT, ENOMEM,
        EPERM, EPIPE,
    };
}

/// Flags of `open` that socklab passes, named, so crates above need no `libc`.
pub mod oflag {
    pub use libc::{O_CLOEXEC, O_NOFOLLOW, O_NONBLOCK};
}

/// Flags of `send`/`recv` that socklab passes, named, so crates above need no `libc`.
pub mod msg {
    pub use libc::{MSG_DONTWAIT, MSG_NOSIGNAL};
}
