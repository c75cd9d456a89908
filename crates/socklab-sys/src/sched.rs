//! CPU affinity of the calling thread (`sched_setaffinity`/`sched_getaffinity` with pid 0),
//! its scheduling class, and locked memory.
//!
//! A bulk test pins each stream's thread to one CPU of a list (`--affinity`,
//! `--server-affinity`) and reads the mask back, so what is recorded is what the kernel applied.
//! The emulator's release threads ask for the real-time class [`set_fifo`] so that a busy
//! machine cannot keep them off the CPU past a packet's release time.

use std::io;

/// CPUs a mask can name (`CPU_SETSIZE`).
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// Pins the calling thread to the CPUs in `cpus` (numbers below [`MAX_CPUS`]). An empty list or
/// a number out of range is `EINVAL`; CPUs the machine does not have are `EINVAL` from the
/// kernel when none of the list is online.
pub fn set_thread_affinity(cpus: &[usize]) -> io::Result<()> {
    // Thread id 0 is the calling thread.
    set_affinity_of(0, cpus)
}

/// The CPUs the calling thread may run on, ascending.
pub fn thread_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all-zero bytes is the empty set (CPU_ZERO).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed; pid 0 is the calling thread.
    crate::cvt(unsafe {
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
    })?;
    // SAFETY: every index is below CPU_SETSIZE; CPU_ISSET only reads `set`.
    Ok((0..MAX_CPUS)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Puts the calling thread in the `SCHED_FIFO` real-time class at `priority` (1–99). `EPERM`
/// without `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` below `priority`).
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `p` is a valid sched_param that lives across the call; pid 0 is the calling
    // thread; an unsuitable priority is an error return.
    crate::cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) }).map(drop)
}

/// True when the calling thread runs in the `SCHED_FIFO` class.
pub fn is_fifo() -> bool {
    // SAFETY: sched_getscheduler reads the calling thread's policy and has no preconditions.
    let p = unsafe { libc::sched_getscheduler(0) };
    p & !libc::SCHED_RESET_ON_FORK == libc::SCHED_FIFO
}

/// Locks the process's pages in memory as they are touched, now and later
/// (`mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)`): no page of it is swapped out, and
/// nothing is faulted in that was not in use. `EPERM` without `CAP_IPC_LOCK`; `ENOMEM` past
/// `RLIMIT_MEMLOCK`.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: mlockall takes flags only and affects this process's mappings.
    crate::cvt(unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) })
        .map(drop)
}

/// Undoes [`lock_memory`].
pub fn unlock_memory() -> io::Result<()> {
    // SAFETY: munlockall takes no arguments.
    crate::cvt(unsafe { libc::munlockall() }).map(drop)
}

/// Pins thread `tid` (a kernel thread id, `gettid`; 0: the calling thread) to `cpus`. An empty
/// list or a number out of range is `EINVAL`; an unknown `tid` is `ESRCH`.
pub fn set_affinity_of(tid: u32, cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() || cpus.iter().any(|&c| c >= MAX_CPUS) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data; all-zero bytes is the empty set (CPU_ZERO).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c < CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; an unknown tid is ESRCH.
    crate::cvt(unsafe {
        libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_one_allowed_cpu_reads_that_cpu_back() {
        let allowed = thread_affinity().unwrap();
        assert!(!allowed.is_empty());
        let last = *allowed.last().unwrap();
        let got = std::thread::spawn(move || {
            set_thread_affinity(&[last]).unwrap();
            thread_affinity().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(got, vec![last]);
        // The caller's thread is untouched.
        assert_eq!(thread_affinity().unwrap(), allowed);
        assert_eq!(
            set_thread_affinity(&[]).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert!(set_thread_affinity(&[MAX_CPUS]).is_err());
    }

    #[test]
    fn a_thread_asking_for_fifo_gets_it_or_eperm_and_the_class_reads_back() {
        let (r, fifo) = std::thread::spawn(|| {
            let r = set_fifo(1);
            (r, is_fifo())
        })
        .join()
        .unwrap();
        match r {
            Ok(()) => assert!(fifo),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EPERM));
                assert!(!fifo);
            }
        }
        // The caller's thread keeps its class.
        assert!(!is_fifo());
        assert_eq!(set_fifo(0).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }
}
