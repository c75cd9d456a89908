//! CPU accounting: `getrusage(2)` and `wait4(2)`.

use std::io;
use std::time::Duration;

use crate::cvt;

/// The resource-usage figures socklab records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub sys: Duration,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Peak resident set size in KiB.
    pub maxrss_kib: u64,
}

impl Usage {
    /// `self - earlier`, saturating at zero (for per-interval accounting).
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
            nvcsw: self.nvcsw.saturating_sub(earlier.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(earlier.nivcsw),
            maxrss_kib: self.maxrss_kib,
        }
    }

    /// User plus system time.
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }

    fn from_raw(ru: &libc::rusage) -> Usage {
        let tv = |t: libc::timeval| {
            Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000)
        };
        Usage {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
            nvcsw: ru.ru_nvcsw.max(0) as u64,
            nivcsw: ru.ru_nivcsw.max(0) as u64,
            maxrss_kib: ru.ru_maxrss.max(0) as u64,
        }
    }
}

/// Whose usage to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The calling thread only (`RUSAGE_THREAD`).
    Thread,
    /// The whole process (`RUSAGE_SELF`).
    Process,
    /// Reaped children (`RUSAGE_CHILDREN`).
    Children,
}

/// Reads resource usage.
pub fn getrusage(who: Who) -> Usage {
    let w = match who {
        Who::Thread => libc::RUSAGE_THREAD,
        Who::Process => libc::RUSAGE_SELF,
        Who::Children => libc::RUSAGE_CHILDREN,
    };
    // SAFETY: rusage is plain old data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid writable rusage; getrusage cannot fail with a valid `who`.
    unsafe { libc::getrusage(w, &mut ru) };
    Usage::from_raw(&ru)
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// Waits for child `pid` to end (blocking) and returns its exit status and resource usage
/// (the child and its own reaped descendants), as `wait4(2)` reports them.
pub fn wait4(pid: u32) -> io::Result<(ExitStatus, Usage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: status and ru are valid writable locations for the kernel to fill.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if r >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let st = if libc::WIFEXITED(status) {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    } else {
        ExitStatus::Signal(libc::WTERMSIG(status))
    };
    Ok((st, Usage::from_raw(&ru)))
}

/// Polls for child `pid` without blocking: `Some` once it has ended (and is reaped).
pub fn try_wait4(pid: u32) -> io::Result<Option<(ExitStatus, Usage)>> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: status and ru are valid writable locations for the kernel to fill.
    let r = cvt(unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut ru) })?;
    if r == 0 {
        return Ok(None);
    }
    let st = if libc::WIFEXITED(status) {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    } else {
        ExitStatus::Signal(libc::WTERMSIG(status))
    };
    Ok(Some((st, Usage::from_raw(&ru))))
}
