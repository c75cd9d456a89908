//! Process control: children that die with their parent, signals, and a Ctrl-C flag.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::cvt;

/// Makes a child spawned from `cmd` receive `SIGTERM` when this process dies (even by
/// `SIGKILL`), and puts it in its own process group so a terminal's Ctrl-C reaches only us
/// (we then stop the child ourselves, and read its CPU time with `wait4`).
pub fn child_dies_with_parent(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0);
    dies_with_parent(cmd)
}

/// Makes a child spawned from `cmd` receive `SIGTERM` when this process dies (even by
/// `SIGKILL`), leaving it in our process group (a terminal's Ctrl-C reaches it as it reaches
/// us). The signal survives `exec` (of programs that are not set-user-ID), so a child that
/// execs in place (`ip netns exec NS CMD` does) passes it on to CMD. Mind that "dies" means the
/// spawning *thread* ends: spawn from a thread that lives as long as the child should.
pub fn dies_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
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
static SIGNALS: AtomicU32 = AtomicU32::new(0);

/// The signal (SIGINT or SIGTERM, counted together) that ends the process at once, without the
/// graceful path: for a process stuck where it does not look at the flag.
pub const FORCED_AFTER: u32 = 3;

/// The exit code of an interrupted run, graceful or forced (128 + SIGINT, as shells report).
pub const INTERRUPTED_EXIT: i32 = 130;

extern "C" fn on_interrupt(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    if SIGNALS.fetch_add(1, Ordering::SeqCst) + 1 >= FORCED_AFTER {
        const MSG: &[u8] = b"\nsocklab: third interrupt: exiting at once (finished repetitions are stored; 'socklab netem cleanup' removes a link left behind)\n";
        // SAFETY: write and _exit are async-signal-safe; MSG is a valid static buffer.
        unsafe {
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
            libc::_exit(INTERRUPTED_EXIT);
        }
    }
}

/// Installs a handler for SIGINT and SIGTERM that sets a flag (see [`interrupted`]). A second
/// signal only sets it again: `timeout N` sends SIGTERM to the process and then to its
/// group, and both must take the graceful path (stop, store, clean up, exit 130). The
/// [`FORCED_AFTER`]th signal (press Ctrl-C three times) exits at once with 130; SIGKILL always
/// works. `SA_RESTART` stays: code that is not ready for `EINTR` keeps working, and the loops
/// that must react within 200 ms do not wait for a signal to wake them: every blocking call in
/// them has a short timeout (a socket timeout or a `poll` tick) after which they look at the
/// flag, whichever thread the signal reached.
pub fn install_interrupt_flag() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: an all-zero sigaction is a valid starting value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_interrupt as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: sa.sa_mask is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: the handler only stores to atomics and, on the last signal, calls write and
        // _exit, which are async-signal-safe.
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
