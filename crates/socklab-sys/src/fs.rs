//! File-system facts: the space left on the file system holding a directory.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

/// Bytes an unprivileged user may still write on the file system holding `fd` (`fstatvfs`:
/// `f_bavail × f_frsize`; the blocks reserved for root are not counted).
pub fn available_bytes(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `fd` is an open descriptor for the borrow's lifetime and `s` points to writable
    // memory of the size of `statvfs`, which the kernel fills on success.
    cvt(unsafe { libc::fstatvfs(fd.as_raw_fd(), s.as_mut_ptr()) })?;
    // SAFETY: fstatvfs returned 0, so it initialized every field of `s`.
    let s = unsafe { s.assume_init() };
    // Both are 64-bit here, 32-bit on some targets.
    #[allow(clippy::unnecessary_cast)]
    let (blocks, size) = (s.f_bavail as u64, s.f_frsize as u64);
    Ok(blocks.saturating_mul(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn available_bytes_of_a_directory_is_some_and_below_its_size() {
        let d = std::fs::File::open(std::env::temp_dir()).unwrap();
        let n = available_bytes(d.as_fd()).unwrap();
        assert!(n > 0 && n < 1 << 60, "{n}");
    }
}
