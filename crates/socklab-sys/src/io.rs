//! Write primitives used by the bulk write strategies.
//!
//! Each function issues exactly one system call and returns what it returned; loops over
//! partial writes live above this crate (in `socklab-net`), where they are tested with mocks.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::{cvt, cvt_size};

/// The kernel's limit on the number of iovecs in one `writev`/`sendmsg`/`vmsplice` call.
pub fn iov_max() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_IOV_MAX) };
    if v > 0 {
        v as usize
    } else {
        1024
    }
}

/// One `write(2)`.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes for the duration of the call.
    cvt_size(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
}

/// One `read(2)`.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid writable slice of `buf.len()` bytes for the duration of the call.
    cvt_size(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// One `writev(2)` over at most [`iov_max`] slices.
pub fn writev(fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let n = bufs.len().min(iov_max()) as libc::c_int;
    // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` (guaranteed by std on Unix) and
    // every slice stays borrowed for the duration of the call; `n` does not exceed `bufs.len()`.
    cvt_size(unsafe { libc::writev(fd.as_raw_fd(), bufs.as_ptr().cast(), n) })
}

/// One `sendmsg(2)` of `bufs` with `flags` (no destination, no control data).
pub fn sendmsg(fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is a valid "empty" message header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(iov_max()) as _;
    // SAFETY: msg points to iovecs (ABI-compatible IoSlices) that outlive the call; the kernel
    // only reads them.
    cvt_size(unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, flags | libc::MSG_NOSIGNAL) })
}

/// One `sendfile(2)` of up to `count` bytes of `file` starting at `*offset`; advances `*offset`.
pub fn sendfile(
    out: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: &mut i64,
    count: usize,
) -> io::Result<usize> {
    let mut off: libc::off_t = *offset as libc::off_t;
    // SAFETY: `off` is a valid, exclusively borrowed off_t; both descriptors are open.
    let n =
        cvt_size(unsafe { libc::sendfile(out.as_raw_fd(), file.as_raw_fd(), &mut off, count) })?;
    *offset = off as i64;
    Ok(n)
}

/// One `splice(2)` of up to `count` bytes from `from` (a pipe) to `to` (no offsets).
pub fn splice(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    count: usize,
    more: bool,
) -> io::Result<usize> {
    let mut flags = libc::SPLICE_F_MOVE;
    if more {
        flags |= libc::SPLICE_F_MORE;
    }
    // SAFETY: null offsets are allowed (the pipe and the socket have no file offset to use).
    cvt_size(unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            count,
            flags,
        )
    })
}

/// One `vmsplice(2)`: maps user memory into the write end of a pipe.
///
/// The pages stay referenced by the pipe until spliced out, so the caller must not modify
/// `bufs` until the data has left the pipe; socklab's send buffers are never modified.
pub fn vmsplice(pipe_w: BorrowedFd<'_>, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let n = bufs.len().min(iov_max());
    // SAFETY: IoSlice is ABI-compatible with iovec; the slices are valid for the call; the
    // kernel only takes references to pages that the caller never writes again (see above).
    cvt_size(unsafe { libc::vmsplice(pipe_w.as_raw_fd(), bufs.as_ptr().cast(), n, 0) })
}

/// A pipe: `(read end, write end)`, close-on-exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints for the kernel to fill.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: on success both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets a pipe's capacity (`F_SETPIPE_SZ`); returns the capacity the kernel granted.
pub fn set_pipe_size(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<usize> {
    let want = bytes.min(libc::c_int::MAX as usize) as libc::c_int;
    // SAFETY: F_SETPIPE_SZ takes an int argument and touches no user memory.
    let got = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, want) })?;
    Ok(got as usize)
}

/// The largest pipe an unprivileged process may ask for (`/proc/sys/fs/pipe-max-size`).
pub fn pipe_max_size() -> usize {
    std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

/// Shuts down the write half of a socket (sends FIN).
pub fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: shutdown has no memory-safety preconditions.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) }).map(drop)
}

/// Waits until `fd` is readable or has an error/hang-up, or `timeout_ms` passes (-1: forever).
/// Returns the `revents` bits (0 on timeout).
pub fn poll_one(
    fd: BorrowedFd<'_>,
    events: libc::c_short,
    timeout_ms: i32,
) -> io::Result<libc::c_short> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    loop {
        // SAFETY: p is one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r >= 0 {
            return Ok(if r == 0 { 0 } else { p.revents });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Waits until either descriptor is readable, or `timeout_ms` passes (-1: forever). Returns
/// whether each is readable (or has an error or hang-up to report).
pub fn poll_two_readable(
    a: BorrowedFd<'_>,
    b: BorrowedFd<'_>,
    timeout_ms: i32,
) -> io::Result<(bool, bool)> {
    let mut p = [
        libc::pollfd {
            fd: a.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: b.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: p is an array of two valid pollfds, and its length is passed.
        let r = unsafe { libc::poll(p.as_mut_ptr(), 2, timeout_ms) };
        if r >= 0 {
            return Ok((p[0].revents != 0, p[1].revents != 0));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Poll flags re-exported for callers of [`poll_one`].
pub mod poll_flags {
    /// Readable.
    pub const IN: libc::c_short = libc::POLLIN;
    /// Writable.
    pub const OUT: libc::c_short = libc::POLLOUT;
    /// Error queue has data.
    pub const ERR: libc::c_short = libc::POLLERR;
    /// Hung up.
    pub const HUP: libc::c_short = libc::POLLHUP;
}
