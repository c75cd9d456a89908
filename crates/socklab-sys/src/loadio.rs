//! What the load generator needs from the kernel beyond `socket2`: an edge-triggered epoll set
//! with nanosecond wait timeouts (`epoll_pwait2`, Linux 5.11; `epoll_wait` with the timeout
//! rounded up to a millisecond before that).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::cvt;

/// One readiness report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The token given at registration.
    pub token: u64,
    /// Readable (or the peer closed: a read will say so).
    pub readable: bool,
    /// Writable (for a connecting socket: the connect finished, successfully or not).
    pub writable: bool,
    /// An error or hang-up is pending (`EPOLLERR`/`EPOLLHUP`).
    pub error: bool,
    /// The peer closed its side, or the connection is gone (`EPOLLRDHUP`/`EPOLLHUP`): with
    /// edge triggering, read until end of file, since no further edge will come.
    pub hangup: bool,
}

/// A buffer of readiness reports, allocated once.
pub struct Events {
    buf: Vec<libc::epoll_event>,
    len: usize,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("capacity", &self.buf.len())
            .field("len", &self.len)
            .finish()
    }
}

impl Events {
    /// Room for `n` reports per wait (at least 1).
    pub fn with_capacity(n: usize) -> Events {
        Events {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; n.max(1)],
            len: 0,
        }
    }

    /// The reports of the last wait.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.buf[..self.len].iter().map(|e| {
            let ev = e.events;
            Event {
                token: e.u64,
                readable: ev & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0,
                writable: ev & libc::EPOLLOUT as u32 != 0,
                error: ev & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0,
                hangup: ev & (libc::EPOLLRDHUP | libc::EPOLLHUP) as u32 != 0,
            }
        })
    }
}

/// An epoll instance; every registration is edge-triggered for reading and writing.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers; the result is checked before it becomes an owned descriptor.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Registers `fd` with `token`, edge-triggered for input, output and peer hang-up. A closed
    /// descriptor leaves the set by itself.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: token,
        };
        // SAFETY: ev is a valid epoll_event for the duration of the call; both fds are open.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        })
        .map(drop)
    }

    /// Removes `fd` from the set.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in add (a non-null event pointer for kernels before 2.6.9).
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                &mut ev,
            )
        })
        .map(drop)
    }

    /// Waits for readiness at most `timeout` (`None`: until something happens); fills
    /// `events` and returns how many. A signal ends the wait early with 0 reports.
    pub fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.len = 0;
        let max = events.buf.len().min(i32::MAX as usize) as libc::c_int;
        let ptr = events.buf.as_mut_ptr();
        let r = if NO_PWAIT2.load(Ordering::Relaxed) {
            -1
        } else {
            let ts = timeout.map(|d| libc::timespec {
                tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            });
            let tsp = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: ptr/max describe the writable event buffer; tsp is null or points to a
            // timespec alive for the call; a null sigmask means "no change".
            let r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    ptr,
                    max,
                    tsp,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                NO_PWAIT2.store(true, Ordering::Relaxed);
            }
            r as libc::c_int
        };
        let r = if r < 0 && NO_PWAIT2.load(Ordering::Relaxed) {
            let ms = timeout.map_or(-1, |d| {
                d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int
            });
            // SAFETY: ptr/max describe the writable event buffer.
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), ptr, max, ms) }
        } else {
            r
        };
        match cvt(r) {
            Ok(n) => {
                events.len = n as usize;
                Ok(events.len)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn reports_readable_and_writable_sockets() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let ep = Epoll::new().unwrap();
        ep.add(c.as_fd(), 7).unwrap();
        let mut evs = Events::with_capacity(8);
        let n = ep.wait(&mut evs, Some(Duration::from_secs(2))).unwrap();
        assert_eq!(n, 1);
        let e = evs.iter().next().unwrap();
        assert_eq!(e.token, 7);
        assert!(e.writable);
        // Edge-triggered: nothing new, nothing reported.
        assert_eq!(
            ep.wait(&mut evs, Some(Duration::from_millis(5))).unwrap(),
            0
        );
        s.write_all(b"x").unwrap();
        ep.wait(&mut evs, Some(Duration::from_secs(2))).unwrap();
        assert!(evs.iter().any(|e| e.token == 7 && e.readable));
        ep.delete(c.as_fd()).unwrap();
        s.write_all(b"y").unwrap();
        assert_eq!(
            ep.wait(&mut evs, Some(Duration::from_millis(5))).unwrap(),
            0
        );
    }
}
