//! The primitives of the classic process and thread servers (UNP ch. 30): `fork` and `_exit`,
//! reaping children, an `fcntl` record lock and a `PTHREAD_PROCESS_SHARED` mutex to serialise
//! `accept`, counters in shared memory that children report through, descriptor passing over
//! `socketpair(AF_UNIX)` with `SCM_RIGHTS`, `RLIMIT_NOFILE`, and the signal settings they need.
//!
//! Every shared object unmaps or closes itself on `Drop`. A forked child must leave with
//! [`exit_now`] (`_exit`), so that it never runs its parent's destructors a second time.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::cvt;

// ------------------------------------------------------------------------------------- fork

/// Which side of a [`fork`] the caller is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    /// The parent; the child's pid.
    Parent(u32),
    /// The child.
    Child,
}

/// Number of threads of this process, from `/proc/self/stat` (field 20).
pub fn thread_count() -> io::Result<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc/self/stat"))?;
    // Fields after the command name start at field 3 (state); num_threads is field 20.
    after
        .split_ascii_whitespace()
        .nth(17)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc/self/stat"))
}

/// `fork(2)`, refused (an error) when this process runs more than one thread: a child of a multi-threaded process may only call async-signal-safe
/// functions, and the servers' children run ordinary Rust code. Fork before starting threads.
///
/// The child must end with [`exit_now`], never by returning through its parent's frames.
pub fn fork() -> io::Result<Forked> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(io::Error::other(format!(
            "fork refused: this process runs {threads} threads (fork before starting any)"
        )));
    }
    // SAFETY: the process is single-threaded (checked above), so the child inherits no lock
    // held by another thread and may run any code.
    let pid = cvt(unsafe { libc::fork() })?;
    Ok(if pid == 0 {
        Forked::Child
    } else {
        Forked::Parent(pid as u32)
    })
}

/// `_exit(2)`: ends the process at once, without running destructors or `atexit` handlers
/// (a forked child's way out). Flush what must be flushed first.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and never returns.
    unsafe { libc::_exit(code) }
}

/// Makes the calling process receive `SIGKILL` when its parent dies (`PR_SET_PDEATHSIG`), and
/// ends it at once if the parent is already gone (`getppid` no longer `parent`).
pub fn die_with_parent(parent: u32) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and has no memory preconditions.
    cvt(unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    })?;
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != parent {
        exit_now(0);
    }
    Ok(())
}

/// This process's id.
pub fn pid() -> u32 {
    std::process::id()
}

/// How a reaped child ended, and its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// The child.
    pub pid: u32,
    /// Its exit code, or `128 + signal` if a signal killed it.
    pub code: i32,
}

/// Reaps one ended child without blocking (`waitpid(-1, WNOHANG)`): `None` when no child has
/// ended yet or there is no child left. Its CPU time joins `getrusage(RUSAGE_CHILDREN)`.
pub fn reap_any() -> io::Result<Option<Reaped>> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: status is a valid writable int.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r > 0 {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            return Ok(Some(Reaped {
                pid: r as u32,
                code,
            }));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Reaps child `pid`, blocking until it ends (`waitpid(pid, 0)`).
pub fn reap(pid: u32) -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: status is a valid writable int.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        if r > 0 {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            return Ok(Reaped { pid, code });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

// ---------------------------------------------------------------------------------- signals

static SIGCHLD_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigchld(_sig: libc::c_int) {
    SIGCHLD_SEEN.store(true, Ordering::SeqCst);
}

/// Installs a `SIGCHLD` handler that sets a flag (see [`take_sigchld`]), without `SA_RESTART`,
/// so a blocking `accept` returns `EINTR` when a child ends and the caller can reap it.
pub fn install_sigchld_flag() -> io::Result<()> {
    // SAFETY: an all-zero sigaction is a valid starting value.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_sigchld as *const () as usize;
    sa.sa_flags = libc::SA_NOCLDSTOP;
    // SAFETY: sa.sa_mask is a valid sigset_t to initialise.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    cvt(unsafe { libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut()) }).map(drop)
}

/// Puts `SIGCHLD` back to its default action.
pub fn reset_sigchld() -> io::Result<()> {
    // SAFETY: SIG_DFL is a valid disposition for SIGCHLD.
    let r = unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    if r == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// True (once) if a `SIGCHLD` arrived since the last call.
pub fn take_sigchld() -> bool {
    SIGCHLD_SEEN.swap(false, Ordering::SeqCst)
}

/// Ignores `SIGPIPE` (a write to a reset connection then fails with `EPIPE` instead of killing
/// the process). Rust binaries already start this way; forked children inherit it.
pub fn ignore_sigpipe() -> io::Result<()> {
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE.
    let r = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    if r == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// ----------------------------------------------------------------------------- fcntl lock

/// An `fcntl(F_SETLKW)` write lock on an unlinked temporary file, as UNP's `my_lock_wait`
/// (serv03). Record locks belong to processes: each forked child that inherited the file
/// excludes the others.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// Creates the lock file in the temporary directory and unlinks it at once (the open
    /// descriptor keeps it alive for the parent and its children).
    pub fn new() -> io::Result<FileLock> {
        let dir = std::env::temp_dir();
        for attempt in 0..100u32 {
            let path = dir.join(format!("socklab-lock-{}-{attempt}", std::process::id()));
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    let _ = std::fs::remove_file(&path);
                    return Ok(FileLock { file });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(
            "no free name for the lock file in the temporary directory",
        ))
    }

    fn fcntl(&self, kind: libc::c_int, wait: bool) -> io::Result<()> {
        // SAFETY: flock is plain old data; all-zero is valid (whole file from offset 0).
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        let cmd = if wait { libc::F_SETLKW } else { libc::F_SETLK };
        loop {
            // SAFETY: fl is a valid flock for the duration of the call.
            let r = unsafe { libc::fcntl(self.file.as_raw_fd(), cmd, &fl) };
            if r != -1 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }

    /// Takes the write lock, waiting for it (`F_SETLKW`); released when the guard drops
    /// (`F_UNLCK`).
    pub fn lock(&self) -> io::Result<FileLockGuard<'_>> {
        self.fcntl(libc::F_WRLCK, true)?;
        Ok(FileLockGuard { lock: self })
    }

    /// Takes the lock if it is free (`F_SETLK`), else `None`.
    pub fn try_lock(&self) -> io::Result<Option<FileLockGuard<'_>>> {
        match self.fcntl(libc::F_WRLCK, false) {
            Ok(()) => Ok(Some(FileLockGuard { lock: self })),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// A held [`FileLock`]; dropping it releases the lock.
#[derive(Debug)]
pub struct FileLockGuard<'a> {
    lock: &'a FileLock,
}

impl Drop for FileLockGuard<'_> {
    fn drop(&mut self) {
        let _ = self.lock.fcntl(libc::F_UNLCK, false);
    }
}

// ------------------------------------------------------------------------- shared memory

/// An anonymous shared mapping (`mmap(MAP_SHARED|MAP_ANONYMOUS)`), zero-filled, shared with
/// children forked after it is made. Unmapped on drop.
#[derive(Debug)]
struct SharedMap {
    ptr: *mut libc::c_void,
    len: usize,
}

impl SharedMap {
    fn new(len: usize) -> io::Result<SharedMap> {
        let len = len.max(1);
        // SAFETY: an anonymous mapping at an address of the kernel's choice touches no
        // existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMap { ptr, len })
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in new, unmapped only here; the borrow rules of
        // the owners guarantee no reference into it outlives self.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// `n` `AtomicU64` counters in shared memory: forked children (and threads) add to them and
/// the parent reads them, as UNP's serv02 `meter` array.
#[derive(Debug)]
pub struct SharedCounters {
    map: SharedMap,
    n: usize,
}

// SAFETY: the mapping holds only AtomicU64s, which are Sync; the raw pointer is owned.
unsafe impl Send for SharedCounters {}
// SAFETY: as above: all access goes through &AtomicU64.
unsafe impl Sync for SharedCounters {}

impl SharedCounters {
    /// `n` counters, all zero.
    pub fn new(n: usize) -> io::Result<SharedCounters> {
        let map = SharedMap::new(n * std::mem::size_of::<AtomicU64>())?;
        Ok(SharedCounters { map, n })
    }

    /// Counter `i` (panics when `i >= len`).
    pub fn get(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.n, "counter {i} of {}", self.n);
        // SAFETY: the mapping is page-aligned, zero-filled (a valid AtomicU64 is any bit
        // pattern), at least n*8 bytes long, lives as long as &self, and is only accessed
        // atomically.
        unsafe { &*(self.map.ptr as *const AtomicU64).add(i) }
    }

    /// Number of counters.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True with no counter.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// A `pthread_mutex_t` in shared memory, initialised `PTHREAD_PROCESS_SHARED` and
/// `PTHREAD_MUTEX_ROBUST` (if its holder dies, the next locker gets it and recovers), as UNP's
/// serv04 `my_lock_init`.
#[derive(Debug)]
pub struct SharedMutex {
    map: SharedMap,
}

// SAFETY: a process-shared pthread mutex may be locked from any thread or process.
unsafe impl Send for SharedMutex {}
// SAFETY: as above; lock and unlock are the only operations and are thread-safe.
unsafe impl Sync for SharedMutex {}

impl SharedMutex {
    /// Maps and initialises the mutex (before forking the children that share it).
    pub fn new() -> io::Result<SharedMutex> {
        let map = SharedMap::new(std::mem::size_of::<libc::pthread_mutex_t>())?;
        // SAFETY: pthread_mutexattr_t is plain old data, initialised by the call below.
        let mut attr: libc::pthread_mutexattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: attr is valid writable memory for the attribute object, and map.ptr points
        // to enough aligned (page-aligned) memory for a pthread_mutex_t that nobody uses yet.
        let r = unsafe {
            let mut r = libc::pthread_mutexattr_init(&mut attr);
            if r == 0 {
                r = libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            }
            if r == 0 {
                r = libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST);
            }
            if r == 0 {
                r = libc::pthread_mutex_init(map.ptr.cast(), &attr);
            }
            libc::pthread_mutexattr_destroy(&mut attr);
            r
        };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(SharedMutex { map })
    }

    /// Locks, waiting; unlocked when the guard drops. A lock whose holder died is recovered
    /// (`EOWNERDEAD` → `pthread_mutex_consistent`).
    pub fn lock(&self) -> io::Result<SharedMutexGuard<'_>> {
        // SAFETY: the mutex was initialised in new and lives as long as &self.
        let r = unsafe { libc::pthread_mutex_lock(self.map.ptr.cast()) };
        match r {
            0 => Ok(SharedMutexGuard { m: self }),
            libc::EOWNERDEAD => {
                // SAFETY: we hold the mutex (EOWNERDEAD returns it locked); it protects no
                // data, so it is consistent as it stands.
                unsafe { libc::pthread_mutex_consistent(self.map.ptr.cast()) };
                Ok(SharedMutexGuard { m: self })
            }
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// A held [`SharedMutex`]; dropping it unlocks.
#[derive(Debug)]
pub struct SharedMutexGuard<'a> {
    m: &'a SharedMutex,
}

impl Drop for SharedMutexGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: this guard exists only while the calling thread holds the mutex.
        unsafe { libc::pthread_mutex_unlock(self.m.map.ptr.cast()) };
    }
}

// ---------------------------------------------------------------------- descriptor passing

/// `socketpair(AF_UNIX, SOCK_STREAM)`, close-on-exec.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints for the kernel to fill.
    cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: socketpair succeeded: both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

const CMSG_SPACE_ONE_FD: usize = 64;

/// An iovec over `data` (one byte).
fn one_byte_iov(data: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// A msghdr with one iovec and the whole of `cbuf` as control buffer. The pointers it holds
/// are valid as long as `iov` (and the byte it points to) and `cbuf` are.
fn one_byte_msghdr(iov: &mut libc::iovec, cbuf: &mut [u64; CMSG_SPACE_ONE_FD / 8]) -> libc::msghdr {
    // SAFETY: msghdr is plain old data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_SPACE_ONE_FD as _;
    msg
}

/// Sends `fd` over the `AF_UNIX` socket `sock` with one data byte `byte`
/// (`sendmsg(SCM_RIGHTS)`, `MSG_NOSIGNAL`). The caller may close its copy afterwards.
pub fn send_fd(sock: BorrowedFd<'_>, fd: BorrowedFd<'_>, byte: u8) -> io::Result<()> {
    let mut data = [byte];
    let mut iov = one_byte_iov(&mut data);
    let mut cbuf = [0u64; CMSG_SPACE_ONE_FD / 8];
    let mut msg = one_byte_msghdr(&mut iov, &mut cbuf);
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen =
        unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as _;
    // SAFETY: msg_control points to cbuf, which is large (64 bytes) and aligned (u64) enough
    // for one cmsghdr carrying one int; CMSG_FIRSTHDR returns a pointer inside it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd.as_raw_fd());
    }
    loop {
        // SAFETY: msg and everything it points to (iov, data, cbuf) are valid for the call.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Receives one descriptor sent by [`send_fd`] (`recvmsg`, `MSG_CMSG_CLOEXEC`): `Ok(None)` at
/// end of stream; `WouldBlock` when a receive timeout (`SO_RCVTIMEO`) passes; an error
/// `InvalidData` when a byte came without a descriptor.
pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    let mut data = [0u8; 1];
    let mut iov = one_byte_iov(&mut data);
    let mut cbuf = [0u64; CMSG_SPACE_ONE_FD / 8];
    let mut msg = one_byte_msghdr(&mut iov, &mut cbuf);
    let n = loop {
        // SAFETY: msg and everything it points to (iov, data, cbuf) are valid and writable.
        let r = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if r >= 0 {
            break r;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    };
    if n == 0 {
        return Ok(None);
    }
    let mut got: Option<OwnedFd> = None;
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of well-formed cmsghdrs;
    // the CMSG_* macros walk only within them. Each SCM_RIGHTS descriptor is newly installed
    // in this process and owned by nobody else, so wrapping it in OwnedFd is sound (extra
    // ones are wrapped and dropped, i.e. closed).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let p = libc::CMSG_DATA(c).cast::<libc::c_int>();
                for k in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(p.add(k)));
                    if got.is_none() {
                        got = Some(fd);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 && got.is_none() {
        return Err(io::Error::other("descriptor lost: control data truncated"));
    }
    got.map(Some).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "a byte without a descriptor on the passing socket",
        )
    })
}

// ---------------------------------------------------------------------------------- poll

/// `poll(2)` for readability over `fds`: sets `ready[i]` when `fds[i]` is readable or has an
/// error or hang-up; returns how many are ready (0 on timeout or `EINTR`). `timeout_ms`: -1
/// waits forever. At most 4096 descriptors.
pub fn poll_readable(
    fds: &[BorrowedFd<'_>],
    ready: &mut [bool],
    timeout_ms: i32,
) -> io::Result<usize> {
    assert!(fds.len() <= 4096 && ready.len() >= fds.len());
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: p is a valid array of p.len() pollfds.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            ready.iter_mut().for_each(|r| *r = false);
            return Ok(0);
        }
        return Err(e);
    }
    for (i, pf) in p.iter().enumerate() {
        ready[i] = pf.revents != 0;
    }
    Ok(r as usize)
}

// ------------------------------------------------------------------------------- rlimits

/// `getrlimit(RLIMIT_NOFILE)`: (soft, hard).
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    // SAFETY: rlimit is plain old data.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: rl is a valid writable rlimit.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) })?;
    Ok((rl.rlim_cur as u64, rl.rlim_max as u64))
}

/// `setrlimit(RLIMIT_NOFILE)` with soft limit `soft` (the hard limit is kept; a soft limit
/// above it fails with `EINVAL`), as `ulimit -Sn`.
pub fn set_nofile_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = nofile_limit()?;
    let rl = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: rl is a valid rlimit.
    cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn counters_are_zeroed_and_shared_between_threads() {
        let c = SharedCounters::new(3).unwrap();
        assert_eq!(c.len(), 3);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.get(1).fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(c.get(0).load(Ordering::Relaxed), 0);
        assert_eq!(c.get(1).load(Ordering::Relaxed), 4000);
    }

    #[test]
    fn fd_passing_round_trips() {
        let (a, b) = socketpair().unwrap();
        let (mut x, y) = UnixStream::pair().unwrap();
        send_fd(a.as_fd(), y.as_fd(), 7).unwrap();
        drop(y);
        let got = recv_fd(b.as_fd()).unwrap().expect("a descriptor");
        let mut y2 = UnixStream::from(got);
        x.write_all(b"hi").unwrap();
        let mut buf = [0u8; 2];
        y2.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hi");
        drop(a);
        assert!(recv_fd(b.as_fd()).unwrap().is_none(), "EOF after close");
    }

    /// The kernel's record of this process's POSIX write locks on `l`'s file, from
    /// `/proc/locks` (`N: POSIX ADVISORY WRITE PID MAJ:MIN:INODE START END`). Within one
    /// process a second `fcntl` lock always succeeds, so the kernel's table is what shows
    /// whether the lock is taken and given back.
    fn held_by_us(l: &FileLock) -> usize {
        use std::os::unix::fs::MetadataExt;
        let ino = l.file.metadata().unwrap().ino();
        let pid = std::process::id().to_string();
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .filter(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                f.len() >= 6
                    && f[1] == "POSIX"
                    && f[3] == "WRITE"
                    && f[4] == pid
                    && f[5].rsplit(':').next() == Some(&ino.to_string())
            })
            .count()
    }

    #[test]
    fn file_lock_is_held_and_released_within_a_process() {
        let l = FileLock::new().unwrap();
        assert_eq!(held_by_us(&l), 0);
        let g = l.lock().unwrap();
        assert_eq!(held_by_us(&l), 1, "lock() took no write lock");
        drop(g);
        assert_eq!(held_by_us(&l), 0, "the guard's drop did not release it");
        let g = l.try_lock().unwrap();
        assert!(g.is_some());
        assert_eq!(held_by_us(&l), 1, "try_lock() took no write lock");
        drop(g);
        assert_eq!(held_by_us(&l), 0, "the guard's drop did not release it");
    }

    #[test]
    fn shared_mutex_excludes_threads() {
        let m = SharedMutex::new().unwrap();
        let c = SharedCounters::new(1).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let _g = m.lock().unwrap();
                        // A non-atomic read-modify-write: lost updates without the lock.
                        let v = c.get(0).load(Ordering::Relaxed);
                        std::hint::spin_loop();
                        c.get(0).store(v + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(c.get(0).load(Ordering::Relaxed), 800);
    }

    #[test]
    fn nofile_limit_reads_back() {
        let (soft, hard) = nofile_limit().unwrap();
        assert!(soft <= hard);
        set_nofile_limit(soft).unwrap();
        assert_eq!(nofile_limit().unwrap().0, soft);
    }

    #[test]
    fn fork_is_refused_with_threads() {
        // The test harness runs tests on threads: fork must refuse.
        let t = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(200)));
        assert!(fork().is_err());
        t.join().unwrap();
    }

    #[test]
    fn poll_readable_sees_data() {
        let (mut x, y) = UnixStream::pair().unwrap();
        let mut ready = [false; 1];
        assert_eq!(poll_readable(&[y.as_fd()], &mut ready, 0).unwrap(), 0);
        x.write_all(b"z").unwrap();
        assert_eq!(poll_readable(&[y.as_fd()], &mut ready, 1000).unwrap(), 1);
        assert!(ready[0]);
    }
}
