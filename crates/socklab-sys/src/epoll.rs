//! `epoll(7)` and the non-blocking socket calls of the event-loop servers: an [`Epoll`]
//! instance with `ctl` add/modify/delete (including `EPOLLEXCLUSIVE` and edge triggering),
//! `epoll_pwait2` with a nanosecond timeout into a reusable [`Events`] buffer (the load
//! generator's timers need it), `accept4(SOCK_NONBLOCK|SOCK_CLOEXEC)`, and a
//! `send` that never raises `SIGPIPE`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::{cvt, cvt_size};

/// Readable (`EPOLLIN`).
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable (`EPOLLOUT`).
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// The peer shut down its writing side (`EPOLLRDHUP`).
pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;
/// Hang-up (`EPOLLHUP`, always reported).
pub const HUP: u32 = libc::EPOLLHUP as u32;
/// Error (`EPOLLERR`, always reported).
pub const ERR: u32 = libc::EPOLLERR as u32;
/// Edge-triggered (`EPOLLET`).
pub const ET: u32 = libc::EPOLLET as u32;
/// Wake only one of the epoll instances waiting on the descriptor (`EPOLLEXCLUSIVE`; add
/// only, never modify).
pub const EXCLUSIVE: u32 = libc::EPOLLEXCLUSIVE as u32;

/// One `epoll` instance (closed on drop).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory-safety preconditions.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: both descriptors are open for the call; `ev` is a valid epoll_event the
        // kernel only reads (it is ignored for EPOLL_CTL_DEL).
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd.as_raw_fd(), &mut ev) }).map(drop)
    }

    /// Watches `fd` for `events` (a mask of [`IN`], [`OUT`], [`RDHUP`], [`ET`],
    /// [`EXCLUSIVE`]…), reporting `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes what `fd` is watched for (not allowed for an `EXCLUSIVE` registration: delete
    /// and add it again).
    pub fn modify(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd` (closing the last descriptor of a file does this too).
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits for readiness into `events` (replacing its content) for at most `timeout`
    /// (`None`: forever): `epoll_pwait2` with a nanosecond timeout (Linux 5.11), else
    /// `epoll_wait` with the timeout rounded up to whole milliseconds. Returns the number of
    /// ready descriptors; an interrupting signal returns 0.
    pub fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.len = 0;
        let cap = events.buf.len().min(libc::c_int::MAX as usize) as libc::c_int;
        let ptr = events.buf.as_mut_ptr();
        let mut r = -1;
        if !NO_PWAIT2.load(Ordering::Relaxed) {
            let ts = timeout.map(|d| libc::timespec {
                tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            });
            let tsp = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: ptr/cap describe the writable event buffer; tsp is null or points to a
            // timespec alive for the call; a null sigmask means "no change".
            r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    ptr,
                    cap,
                    tsp,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            } as libc::c_int;
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                NO_PWAIT2.store(true, Ordering::Relaxed);
            }
        }
        if r < 0 && NO_PWAIT2.load(Ordering::Relaxed) {
            let ms = timeout.map_or(-1, |d| {
                d.as_nanos()
                    .div_ceil(1_000_000)
                    .min(libc::c_int::MAX as u128) as libc::c_int
            });
            // SAFETY: ptr/cap describe the writable event buffer for the call.
            r = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), ptr, cap, ms) };
        }
        match cvt(r) {
            Ok(n) => {
                events.len = n as usize;
                Ok(n as usize)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// Set once `epoll_pwait2` said `ENOSYS` (a kernel before 5.11).
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

impl std::os::fd::AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A reusable buffer of ready events.
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
    /// Room for `n` events per wait (at least 1).
    pub fn with_capacity(n: usize) -> Events {
        Events {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; n.max(1)],
            len: 0,
        }
    }

    /// The events of the last wait.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.buf[..self.len].iter().map(|e| Event {
            token: e.u64,
            events: e.events,
        })
    }

    /// Number of events of the last wait.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the last wait returned nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th event of the last wait.
    pub fn get(&self, i: usize) -> Option<Event> {
        (i < self.len).then(|| Event {
            token: self.buf[i].u64,
            events: self.buf[i].events,
        })
    }
}

/// One ready descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The token it was registered with.
    pub token: u64,
    /// What is ready (mask of [`IN`], [`OUT`], [`RDHUP`], [`HUP`], [`ERR`]).
    pub events: u32,
}

impl Event {
    /// Readable, or hung up / in error (a read will say which).
    pub fn readable(&self) -> bool {
        self.events & (IN | RDHUP | HUP | ERR) != 0
    }

    /// Writable, or hung up / in error (a write will say which; for a connecting socket: the
    /// connect finished, successfully or not).
    pub fn writable(&self) -> bool {
        self.events & (OUT | HUP | ERR) != 0
    }

    /// An error or hang-up is pending (`EPOLLERR`/`EPOLLHUP`).
    pub fn error(&self) -> bool {
        self.events & (ERR | HUP) != 0
    }

    /// The peer closed its side, or the connection is gone (`EPOLLRDHUP`/`EPOLLHUP`): with
    /// edge triggering, read until end of file, since no further edge will come.
    pub fn hangup(&self) -> bool {
        self.events & (RDHUP | HUP) != 0
    }
}

/// `accept4(listener, NULL, NULL, SOCK_NONBLOCK|SOCK_CLOEXEC)`: one pending connection,
/// non-blocking, or `WouldBlock` when none is pending.
pub fn accept4(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed (the peer address is not wanted).
    let fd = cvt(unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` is a new descriptor returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One non-blocking `send(2)` with `MSG_NOSIGNAL` (a reset peer gives `EPIPE`, never
/// `SIGPIPE`).
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes for the call.
    cvt_size(unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    })
}

/// One non-blocking `recv(2)` (`MSG_DONTWAIT`); `Ok(0)` is end of stream.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid writable slice of `buf.len()` bytes for the call.
    cvt_size(unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn accept_send_recv_and_readiness() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let ep = Epoll::new().unwrap();
        ep.add(l.as_fd(), IN, 7).unwrap();
        let mut ev = Events::with_capacity(8);
        // Nothing pending: a wait times out, accept says WouldBlock.
        assert_eq!(ep.wait(&mut ev, Some(Duration::from_millis(1))).unwrap(), 0);
        assert!(ev.is_empty());
        assert_eq!(
            accept4(l.as_fd()).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert_eq!(ep.wait(&mut ev, Some(Duration::from_secs(5))).unwrap(), 1);
        let e = ev.get(0).unwrap();
        assert_eq!(e.token, 7);
        assert!(e.readable());
        let s = accept4(l.as_fd()).unwrap();
        ep.add(s.as_fd(), IN | RDHUP, 9).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            recv(s.as_fd(), &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        c.write_all(b"hello").unwrap();
        ep.wait(&mut ev, Some(Duration::from_secs(5))).unwrap();
        assert!(ev.iter().any(|e| e.token == 9 && e.readable()));
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), 5);
        assert_eq!(send(s.as_fd(), b"world").unwrap(), 5);
        let mut got = [0u8; 5];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"world");
        // Watching for output reports writable; delete stops reports.
        ep.modify(s.as_fd(), OUT, 10).unwrap();
        ep.wait(&mut ev, Some(Duration::from_secs(5))).unwrap();
        assert!(ev.iter().any(|e| e.token == 10 && e.writable()));
        ep.delete(s.as_fd()).unwrap();
        ep.delete(l.as_fd()).unwrap();
        assert_eq!(ep.wait(&mut ev, Some(Duration::from_millis(1))).unwrap(), 0);
        // End of stream, then a send to a closed peer is EPIPE/ECONNRESET, not SIGPIPE.
        drop(c);
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), 0);
        let mut err = None;
        for _ in 0..100 {
            if let Err(e) = send(s.as_fd(), &[0u8; 1024]) {
                err = Some(e);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(err.is_some());
    }

    #[test]
    fn exclusive_registration_is_accepted_and_cannot_be_modified() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Epoll::new().unwrap();
        let b = Epoll::new().unwrap();
        a.add(l.as_fd(), IN | EXCLUSIVE, 1).unwrap();
        b.add(l.as_fd(), IN | EXCLUSIVE, 1).unwrap();
        assert!(a.modify(l.as_fd(), IN | EXCLUSIVE, 1).is_err());
        a.delete(l.as_fd()).unwrap();
        a.add(l.as_fd(), IN | EXCLUSIVE, 2).unwrap();
    }

    #[test]
    fn edge_triggered_reports_each_change_once_with_sub_millisecond_timeouts() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let ep = Epoll::new().unwrap();
        ep.add(c.as_fd(), IN | OUT | RDHUP | ET, 7).unwrap();
        let mut evs = Events::with_capacity(8);
        assert_eq!(ep.wait(&mut evs, Some(Duration::from_secs(2))).unwrap(), 1);
        let e = evs.iter().next().unwrap();
        assert_eq!(e.token, 7);
        assert!(e.writable() && !e.error() && !e.hangup());
        // Edge-triggered: nothing new, nothing reported (a 200 us wait).
        assert_eq!(
            ep.wait(&mut evs, Some(Duration::from_micros(200))).unwrap(),
            0
        );
        s.write_all(b"x").unwrap();
        ep.wait(&mut evs, Some(Duration::from_secs(2))).unwrap();
        assert!(evs.iter().any(|e| e.token == 7 && e.readable()));
        drop(s);
        ep.wait(&mut evs, Some(Duration::from_secs(2))).unwrap();
        assert!(evs.iter().any(|e| e.token == 7 && e.hangup()));
        ep.delete(c.as_fd()).unwrap();
        assert_eq!(
            ep.wait(&mut evs, Some(Duration::from_millis(5))).unwrap(),
            0
        );
    }
}
