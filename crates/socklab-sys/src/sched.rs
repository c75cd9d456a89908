//! CPU affinity of the calling thread (`sched_setaffinity`/`sched_getaffinity` with pid 0).
//!
//! A bulk test pins each stream's thread to one CPU of a list (`--affinity`,
//! `--server-affinity`) and reads the mask back, so what is recorded is what the kernel applied.

use std::io;

/// CPUs a mask can name (`CPU_SETSIZE`).
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// Pins the calling thread to the CPUs in `cpus` (numbers below [`MAX_CPUS`]). An empty list or
/// a number out of range is `EINVAL`; CPUs the machine does not have are `EINVAL` from the
/// kernel when none of the list is online.
pub fn set_thread_affinity(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() || cpus.iter().any(|&c| c >= MAX_CPUS) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data; all-zero bytes is the empty set (CPU_ZERO).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c < CPU_SETSIZE (checked above), so CPU_SET writes inside `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    crate::cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(drop)
}

/// The CPUs the calling thread may run on, ascending.
pub fn thread_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: as above, all-zero is a valid empty set.
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
}
