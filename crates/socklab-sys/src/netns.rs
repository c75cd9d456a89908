//! Network namespaces and TUN devices: the raw calls of socklab's emulated links.
//!
//! A thread can move itself into another network namespace with [`enter`]; sockets it creates
//! afterwards (and threads it spawns) belong to that namespace. A TUN descriptor opened while
//! in a namespace stays bound to the device in that namespace, whichever namespace the thread
//! moves to later, so one process can drive TUN devices in two namespaces.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::{cvt, cvt_size};

/// True when the effective user is root (namespaces and TUN need `CAP_NET_ADMIN`; socklab asks
/// for root rather than probing capabilities one by one).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Sets the calling thread's timer slack (how late the kernel may wake it from a timed sleep;
/// 50 µs by default). The emulator's threads ask for 1 µs so packets leave on time.
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only the calling thread.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// The calling thread's kernel id.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// Moves the calling thread into the network namespace `ns` (a descriptor of
/// `/run/netns/NAME` or `/proc/…/ns/net`).
pub fn setns_net(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns takes a descriptor and a flag; an unsuitable descriptor is an error return.
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// The calling thread's current network namespace, to come back to later.
pub fn current_net() -> io::Result<File> {
    File::open("/proc/thread-self/ns/net")
}

/// Moves the calling thread into the namespace at `path` until the guard drops, then back.
pub fn enter(path: &std::path::Path) -> io::Result<NetnsGuard> {
    let home = current_net()?;
    let target = File::open(path)?;
    setns_net(std::os::fd::AsFd::as_fd(&target))?;
    Ok(NetnsGuard { home })
}

/// Returns its thread to the namespace it came from when dropped.
#[derive(Debug)]
pub struct NetnsGuard {
    home: File,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Failing to come back would leave the thread in a namespace that is about to go;
        // there is nothing better to do than report it.
        if let Err(e) = setns_net(std::os::fd::AsFd::as_fd(&self.home)) {
            eprintln!("socklab: cannot return to the original network namespace: {e}");
        }
    }
}

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Offloads a TUN device can accept from the kernel (`TUNSETOFFLOAD`; the `TUN_F_*` bits).
pub mod offload {
    /// The kernel may hand over packets whose TCP/UDP checksum is left to compute
    /// (`VIRTIO_NET_HDR_F_NEEDS_CSUM`).
    pub const CSUM: u32 = libc::TUN_F_CSUM;
    /// TCP over IPv4 segmentation: super-packets of up to 64 KiB (`VIRTIO_NET_HDR_GSO_TCPV4`).
    pub const TSO4: u32 = libc::TUN_F_TSO4;
    /// TCP over IPv6 segmentation.
    pub const TSO6: u32 = libc::TUN_F_TSO6;
}

/// How to open a TUN device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunOptions {
    /// Every packet read or written starts with a 10-byte `struct virtio_net_hdr`
    /// (`IFF_VNET_HDR`): checksum and segmentation offloads travel with the packet.
    pub vnet_hdr: bool,
    /// The `TUN_F_*` offloads ([`offload`]) to accept; needs `vnet_hdr`.
    pub offload: u32,
}

/// Creates (or attaches to) the TUN device `name` in the calling thread's network namespace:
/// layer 3 (`IFF_TUN`), no packet-information header (`IFF_NO_PI`), non-blocking. The device
/// lives as long as the descriptor.
pub fn open_tun(name: &str) -> io::Result<File> {
    open_tun_with(name, TunOptions::default())
}

/// [`open_tun`] with a virtio-net header on every packet and offloads ([`TunOptions`]).
pub fn open_tun_with(name: &str, opts: TunOptions) -> io::Result<File> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name '{name}': 1 to 15 bytes"),
        ));
    }
    if opts.offload != 0 && !opts.vnet_hdr {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TUN offloads need the virtio-net header (vnet_hdr)",
        ));
    }
    // SAFETY: the path is a valid NUL-terminated string; open returns a new descriptor or -1.
    let fd = cvt(unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    })?;
    // SAFETY: fd was just returned by open and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut flags = libc::IFF_TUN | libc::IFF_NO_PI;
    if opts.vnet_hdr {
        flags |= libc::IFF_VNET_HDR;
    }
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: flags as libc::c_short,
        _pad: [0; 22],
    };
    for (d, s) in req.name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: TUNSETIFF reads a struct ifreq; IfReq has its layout (16-byte name, flags,
    // padding to the union's 24 bytes) and lives across the call.
    cvt(unsafe { libc::ioctl(owned.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReq) })?;
    if opts.vnet_hdr {
        // SAFETY: TUNSETOFFLOAD takes its flags by value (an unsigned long), no pointer.
        cvt(unsafe {
            libc::ioctl(
                owned.as_raw_fd(),
                libc::TUNSETOFFLOAD,
                libc::c_ulong::from(opts.offload),
            )
        })?;
    }
    Ok(File::from(owned))
}

/// Reads one packet into the spare capacity of `buf` (after its current length), without
/// initialising that memory first; the packet's bytes are appended. `Ok(0)` is end of file.
pub fn read_append(fd: BorrowedFd<'_>, buf: &mut Vec<u8>) -> io::Result<usize> {
    let spare = buf.capacity() - buf.len();
    // SAFETY: the pointer and length describe the vector's spare capacity, which is writable
    // memory owned by `buf`; read writes at most `spare` bytes there.
    let n = cvt_size(unsafe {
        libc::read(
            fd.as_raw_fd(),
            buf.as_mut_ptr().add(buf.len()).cast(),
            spare,
        )
    })?;
    // SAFETY: read initialised exactly n <= spare bytes after the old length.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// Waits until `fd` is readable or `timeout` passes (`None`: forever), with nanosecond
/// resolution (`ppoll`). Returns whether it is readable. `EINTR` counts as a timeout.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: pfd is one valid pollfd; tsp is null or points to a timespec alive for the call;
    // a null signal mask keeps the current one.
    let r = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
    if r == -1 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

/// An `eventfd` that wakes a thread sleeping in [`wait_readable_or_woken`] (a forwarding thread
/// asked to switch models or capture windows, or to stop).
#[derive(Debug)]
pub struct Waker(OwnedFd);

impl Waker {
    /// A new, non-blocking eventfd.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: eventfd takes an initial value and flags; it returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: fd was just returned by eventfd and is owned by nobody else.
        Ok(Waker(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Wakes the waiting thread (or the next wait, at once).
    pub fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an eventfd write takes exactly 8 readable bytes, which `one` provides. A full
        // counter (EAGAIN) already means "woken".
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Clears the wake-ups so far.
    pub fn drain(&self) {
        let mut v = [0u8; 8];
        // SAFETY: an eventfd read writes exactly 8 bytes into `v`; non-blocking, so an unset
        // counter is an EAGAIN return.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    }
}

/// [`wait_readable`] that also returns when `waker` is woken: `Ok(true)` when `fd` is
/// readable, `Ok(false)` on timeout, wake-up (cleared) or `EINTR`.
pub fn wait_readable_or_woken(
    fd: BorrowedFd<'_>,
    waker: &Waker,
    timeout: Duration,
) -> io::Result<bool> {
    let mut pfd = [
        libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: waker.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: pfd is an array of two valid pollfds and its length is passed; ts lives across
    // the call; a null signal mask keeps the current one.
    let r = unsafe { libc::ppoll(pfd.as_mut_ptr(), 2, &ts, std::ptr::null()) };
    if r == -1 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    if pfd[1].revents != 0 {
        waker.drain();
    }
    Ok(pfd[0].revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

/// CPU time (user + system) a thread of this process has used so far, from
/// `/proc/self/task/TID/schedstat` (nanoseconds); `None` if the thread is gone.
pub fn thread_cpu(tid: u32) -> Option<Duration> {
    thread_sched(tid).map(|(cpu, _)| cpu)
}

/// A thread's CPU time and its run-queue wait so far: the time it was runnable (woken, or
/// preempted) but another task held the CPU, from the first two fields of
/// `/proc/self/task/TID/schedstat`; `None` if the thread is gone.
pub fn thread_sched(tid: u32) -> Option<(Duration, Duration)> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let mut f = s.split_whitespace().map(|x| x.parse::<u64>().ok());
    let (cpu, wait) = (f.next()??, f.next()??);
    Some((Duration::from_nanos(cpu), Duration::from_nanos(wait)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_tun_names_are_refused_before_any_syscall() {
        for n in ["", "sixteen-chars-xx", "a\0b"] {
            let e = open_tun(n).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{n:?}");
        }
    }

    /// The waker's eventfd has a wake-up pending (a zero-timeout poll of it).
    fn pending(waker: &Waker) -> bool {
        wait_readable(std::os::fd::AsFd::as_fd(&waker.0), Some(Duration::ZERO)).unwrap()
    }

    #[test]
    fn a_waker_ends_the_wait_early() {
        let (r, w) = crate::io::pipe().unwrap();
        let waker = std::sync::Arc::new(Waker::new().unwrap());
        assert!(!pending(&waker));
        waker.wake();
        assert!(pending(&waker), "wake() left nothing to see");
        // A wait of an hour on a pipe nobody writes: only the wake-up can end it (the channel's
        // bound is on a hang, not a figure).
        let (tx, rx) = std::sync::mpsc::channel();
        let w2 = waker.clone();
        std::thread::spawn(move || {
            let rf = std::os::fd::AsFd::as_fd(&r);
            let _ = tx.send(wait_readable_or_woken(rf, &w2, Duration::from_secs(3600)));
        });
        let woken = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the wake-up did not end the wait");
        assert!(!woken.unwrap(), "woken, not readable");
        // Cleared: no wake-up is left pending for the next wait.
        assert!(!pending(&waker), "the wait did not clear the wake-up");
        drop(w);
    }

    #[test]
    fn offloads_without_the_virtio_header_are_refused() {
        let e = open_tun_with(
            "sl-x",
            TunOptions {
                vnet_hdr: false,
                offload: offload::CSUM,
            },
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn this_threads_cpu_time_is_readable_and_grows() {
        let tid = gettid();
        let a = thread_cpu(tid).expect("schedstat");
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = thread_cpu(tid).expect("schedstat");
        assert!(b > a, "{a:?} -> {b:?}");
    }

    #[test]
    fn read_append_appends_what_was_read() {
        let (r, w) = crate::io::pipe().unwrap();
        crate::io::write(std::os::fd::AsFd::as_fd(&w), b"hello").unwrap();
        let mut buf = Vec::with_capacity(16);
        buf.extend_from_slice(b">");
        let n = read_append(std::os::fd::AsFd::as_fd(&r), &mut buf).unwrap();
        assert_eq!(n, 5);
        assert_eq!(buf, b">hello");
    }

    #[test]
    fn wait_readable_times_out_then_sees_data() {
        let (r, w) = crate::io::pipe().unwrap();
        let rf = std::os::fd::AsFd::as_fd(&r);
        assert!(!wait_readable(rf, Some(Duration::from_millis(1))).unwrap());
        crate::io::write(std::os::fd::AsFd::as_fd(&w), b"x").unwrap();
        assert!(wait_readable(rf, Some(Duration::from_millis(1))).unwrap());
    }
}
