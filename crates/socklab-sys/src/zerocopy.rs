//! `MSG_ZEROCOPY` support: enabling `SO_ZEROCOPY` and reaping completion notifications from
//! the socket's error queue.
//!
//! Each successful `send(…, MSG_ZEROCOPY)` is numbered by the kernel (a 32-bit counter starting
//! at 0); completions arrive on the error queue as `sock_extended_err` records with
//! `ee_origin == SO_EE_ORIGIN_ZEROCOPY` covering the inclusive range `[ee_info, ee_data]`.
//! `ee_code & SO_EE_CODE_ZEROCOPY_COPIED` says the kernel fell back to copying (always the
//! case on loopback, where the skb is delivered locally).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

const SO_ZEROCOPY: libc::c_int = 60;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// The `MSG_ZEROCOPY` send flag.
pub const MSG_ZEROCOPY: libc::c_int = libc::MSG_ZEROCOPY;

/// Enables `SO_ZEROCOPY` on a socket (required before `MSG_ZEROCOPY` sends).
pub fn enable(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: the option value is a valid c_int of the stated size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Counts of completion notifications reaped so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Completions {
    /// Sends whose completion has been reported.
    pub completed: u64,
    /// Of those, sends the kernel reported as copied rather than sent from user pages.
    pub copied: u64,
}

/// Reads every completion currently queued on `fd`'s error queue without blocking and adds
/// them to `acc`. Returns how many sends the reaped records covered.
pub fn reap(fd: BorrowedFd<'_>, acc: &mut Completions) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        // Control buffer large enough for one sock_extended_err plus its cmsghdr, aligned.
        let mut control = [0u64; 16];
        // SAFETY: an all-zero msghdr is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg refers to a control buffer we own for the duration of the call; no data
        // iovecs are given (error-queue records carry their payload in the control message).
        let r = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => Ok(total),
                Some(libc::EINTR) => continue,
                _ => Err(e),
            };
        }
        // SAFETY: msg was filled by the kernel; CMSG_FIRSTHDR/NXTHDR walk within msg_controllen.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !cmsg.is_null() {
            // SAFETY: cmsg is non-null and points inside our control buffer.
            let hdr = unsafe { &*cmsg };
            let is_recverr = (hdr.cmsg_level == libc::SOL_IP && hdr.cmsg_type == libc::IP_RECVERR)
                || (hdr.cmsg_level == libc::SOL_IPV6 && hdr.cmsg_type == libc::IPV6_RECVERR);
            if is_recverr {
                // SAFETY: for IP_RECVERR/IPV6_RECVERR the payload starts with a sock_extended_err;
                // read_unaligned copes with any alignment of the data area.
                let ee: libc::sock_extended_err =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                    let n = u64::from(ee.ee_data.wrapping_sub(ee.ee_info)) + 1;
                    acc.completed += n;
                    if ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                        acc.copied += n;
                    }
                    total += n;
                }
            }
            // SAFETY: msg and cmsg are valid as above.
            cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
        }
    }
}
