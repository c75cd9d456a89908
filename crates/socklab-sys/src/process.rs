//! Process control: children that die with their parent, signals, and a Ctrl-C flag.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cvt;

/// Makes a child spawned from `cmd` receive `SIGTERM` when this process dies (even by
/// `SIGKILL`), and puts it in its own process group so a terminal's Ctrl-C reaches only us
/// (we then stop the child ourselves, and read its CPU time with `wait4`).
pub fn child_dies_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    cmd.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only calls prctl and
    // getppid, which are async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then nobody would signal us.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    }
}

/// Signals a process.
pub fn kill(pid: u32, sig: Signal) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    cvt(unsafe { libc::kill(pid as libc::pid_t, sig.raw()) }).map(drop)
}

/// The signals socklab sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT.
    Int,
    /// SIGTERM.
    Term,
    /// SIGKILL.
    Kill,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs a one-shot handler for SIGINT and SIGTERM that sets a flag (see [`interrupted`]);
/// a second signal takes the default action (terminates), so a stuck run can still be killed.
pub fn install_interrupt_flag() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: an all-zero sigaction is a valid starting value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_interrupt as *const () as usize;
        sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        // SAFETY: sa.sa_mask is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        cvt(unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) })?;
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived after [`install_interrupt_flag`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The flag behind [`interrupted`], for loops that poll an `&AtomicBool`.
pub fn interrupt_flag() -> &'static AtomicBool {
    &INTERRUPTED
}
