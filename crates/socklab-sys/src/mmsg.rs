//! Batched UDP for the paced sender and the receiver of `socklab bulk --udp`: `sendmmsg` (many
//! datagrams of a connected socket in one call) and `recvmmsg` returning, per datagram, its
//! length and the kernel's arrival time (`SO_TIMESTAMPNS`), and the socket's count of
//! datagrams dropped for a full receive buffer (`SO_RXQ_OVFL`). Enable those two with
//! [`IntOpt::SoTimestampNs`](crate::sockopt::IntOpt::SoTimestampNs) and
//! [`IntOpt::SoRxqOvfl`](crate::sockopt::IntOpt::SoRxqOvfl).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `SO_TIMESTAMPNS` (asm-generic/socket.h, `SO_TIMESTAMPNS_OLD`: a `timespec` of the native
/// `time_t`, 64 bits on the 64-bit targets socklab runs on); also the control message type.
pub(crate) const SO_TIMESTAMPNS: libc::c_int = 35;
/// `SO_RXQ_OVFL` (asm-generic/socket.h); also the control message type (a `u32`).
pub(crate) const SO_RXQ_OVFL: libc::c_int = 40;

/// Most datagrams one call of [`send_batch`] or [`recv_batch`] handles.
pub const MAX_BATCH: usize = 64;

/// Room for the control messages of one datagram: a `timespec` and a `u32`, each behind a
/// `cmsghdr` (16 bytes on 64-bit), aligned for `cmsghdr`.
const CONTROL_WORDS: usize = 8;

/// One datagram of a [`recv_batch`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// Bytes placed in its slot.
    pub len: usize,
    /// It was longer than its slot and was cut.
    pub truncated: bool,
    /// When the kernel received it (`CLOCK_REALTIME`, ns since the epoch), with
    /// `SO_TIMESTAMPNS` enabled.
    pub kernel_ns: Option<u64>,
    /// Where it came from (the sender's IP address and port), when the kernel said.
    pub from: Option<std::net::SocketAddr>,
}

/// Receives up to [`MAX_BATCH`] datagrams without blocking (`WouldBlock` when none is
/// queued): datagram `i` lands in `buf[i * slot..(i + 1) * slot]` and is described by
/// `metas[i]`. Returns how many arrived. `drops` takes the socket's `SO_RXQ_OVFL` counter
/// (datagrams dropped so far because the receive buffer was full) when the kernel sent it.
pub fn recv_batch(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    slot: usize,
    metas: &mut [Meta],
    drops: &mut Option<u32>,
) -> io::Result<usize> {
    if slot == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "recv_batch: a slot of 0 bytes",
        ));
    }
    let n = (buf.len() / slot).min(metas.len()).min(MAX_BATCH);
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "recv_batch: no room for one datagram",
        ));
    }
    let base = buf.as_mut_ptr();
    // SAFETY: an all-zero iovec is a valid empty one.
    let mut iovs: [libc::iovec; MAX_BATCH] = unsafe { std::mem::zeroed() };
    let mut control = [[0u64; CONTROL_WORDS]; MAX_BATCH];
    // SAFETY: an all-zero sockaddr_storage is a valid (unspecified) address.
    let mut names: [libc::sockaddr_storage; MAX_BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: an all-zero mmsghdr is a valid empty header.
    let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        iovs[i] = libc::iovec {
            // SAFETY: i * slot + slot <= buf.len(), so the offset stays inside `buf`.
            iov_base: unsafe { base.add(i * slot) }.cast(),
            iov_len: slot,
        };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        h.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
        h.msg_control = control[i].as_mut_ptr().cast();
        h.msg_controllen = std::mem::size_of_val(&control[i]) as _;
    }
    let got = loop {
        // SAFETY: hdrs[..n] each point to one iovec over a distinct `slot`-byte part of `buf`,
        // to their own control buffer and to their own sockaddr_storage for the source
        // address, all alive and exclusively borrowed for the call; no timeout is given.
        let r = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r >= 0 {
            break r as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    for i in 0..got {
        let h = &hdrs[i].msg_hdr;
        let mut meta = Meta {
            len: (hdrs[i].msg_len as usize).min(slot),
            truncated: h.msg_flags & libc::MSG_TRUNC != 0,
            kernel_ns: None,
            from: crate::udp::socket_addr(&names[i]),
        };
        // SAFETY: the kernel filled `h`; CMSG_FIRSTHDR/NXTHDR walk within its msg_controllen,
        // inside control[i].
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(h) };
        while !cmsg.is_null() {
            // SAFETY: cmsg is non-null and points inside control[i].
            let c = unsafe { &*cmsg };
            if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == SO_TIMESTAMPNS {
                // SAFETY: a SCM_TIMESTAMPNS message carries a timespec; read_unaligned copes
                // with the data area's alignment.
                let ts: libc::timespec =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                if ts.tv_sec >= 0 && ts.tv_nsec >= 0 {
                    meta.kernel_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
            } else if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == SO_RXQ_OVFL {
                // SAFETY: a SO_RXQ_OVFL message carries a u32.
                let d: u32 = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                *drops = Some(d);
            }
            // SAFETY: h and cmsg are valid as above.
            cmsg = unsafe { libc::CMSG_NXTHDR(h, cmsg) };
        }
        metas[i] = meta;
    }
    Ok(got)
}

/// Sends `buf` on a connected datagram socket as datagrams of `size` bytes (the last one
/// possibly shorter), at most [`MAX_BATCH`] of them, with one `sendmmsg`. Returns how many the
/// kernel took (fewer than asked when it stopped at an error after the first).
pub fn send_batch(fd: BorrowedFd<'_>, buf: &[u8], size: usize) -> io::Result<usize> {
    if size == 0 || buf.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "send_batch: nothing to send",
        ));
    }
    let n = buf.len().div_ceil(size);
    if n > MAX_BATCH {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "send_batch: more than MAX_BATCH datagrams",
        ));
    }
    // SAFETY: an all-zero iovec is a valid empty one.
    let mut iovs: [libc::iovec; MAX_BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: an all-zero mmsghdr is a valid empty header (no address: the socket is
    // connected).
    let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    for (i, chunk) in buf.chunks(size).enumerate() {
        iovs[i] = libc::iovec {
            // The kernel only reads through a send iovec.
            iov_base: chunk.as_ptr().cast_mut().cast(),
            iov_len: chunk.len(),
        };
        hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    loop {
        // SAFETY: hdrs[..n] each point to one iovec over a part of `buf`, alive for the call;
        // the kernel reads them and writes only msg_len.
        let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockopt::{set, IntOpt};
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[test]
    fn a_batch_goes_out_in_one_call_and_comes_back_with_arrival_times() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        set(rx.as_fd(), IntOpt::SoTimestampNs, 1).unwrap();
        set(rx.as_fd(), IntOpt::SoRxqOvfl, 1).unwrap();
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        // Five datagrams of 100 bytes and one of 30, each filled with its index.
        let data: Vec<u8> = (0..530).map(|i| (i / 100) as u8).collect();
        assert_eq!(send_batch(tx.as_fd(), &data, 100).unwrap(), 6);
        let mut buf = vec![0u8; 8 * 128];
        let mut metas = [Meta::default(); 8];
        let mut drops = None;
        let mut got = 0;
        let mut lens = Vec::new();
        for _ in 0..200 {
            match recv_batch(rx.as_fd(), &mut buf, 128, &mut metas[got..], &mut drops) {
                Ok(n) => {
                    for (i, m) in metas[got..got + n].iter().enumerate() {
                        let slot = &buf[i * 128..i * 128 + m.len];
                        assert!(slot.iter().all(|&b| b == (got + i) as u8), "datagram {i}");
                        lens.push(m.len);
                        assert!(!m.truncated);
                        assert_eq!(m.from, Some(tx.local_addr().unwrap()), "the source");
                        let t = m.kernel_ns.expect("SO_TIMESTAMPNS was enabled");
                        assert!(t >= before.as_nanos() as u64, "{t} before the send");
                    }
                    got += n;
                    // Each call reuses the buffer from its start.
                    buf.fill(0xff);
                    if got == 6 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(lens, [100, 100, 100, 100, 100, 30]);
        // The kernel sends SO_RXQ_OVFL only once the socket has dropped something.
        assert_eq!(drops, None, "SO_RXQ_OVFL: nothing dropped");
        let e = recv_batch(rx.as_fd(), &mut buf, 128, &mut metas, &mut drops).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_full_receive_buffer_shows_in_the_drop_counter_and_long_datagrams_are_cut() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        set(rx.as_fd(), IntOpt::SoRcvBuf, 4096).unwrap();
        set(rx.as_fd(), IntOpt::SoRxqOvfl, 1).unwrap();
        let data = vec![7u8; 64 * 1000];
        for _ in 0..4 {
            send_batch(tx.as_fd(), &data, 1000).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut buf = vec![0u8; 4 * 500];
        let mut metas = [Meta::default(); 4];
        let mut drops = None;
        let n = recv_batch(rx.as_fd(), &mut buf, 500, &mut metas, &mut drops).unwrap();
        assert!(n >= 1);
        assert!(metas[0].truncated && metas[0].len == 500, "{:?}", metas[0]);
        // Empty the queue; a datagram queued after the drops carries their count.
        while recv_batch(rx.as_fd(), &mut buf, 500, &mut metas, &mut drops).is_ok() {}
        tx.send(&[1u8; 10]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            recv_batch(rx.as_fd(), &mut buf, 500, &mut metas, &mut drops).unwrap(),
            1
        );
        assert!(drops.is_some_and(|d| d > 200), "{drops:?}");
    }

    #[test]
    fn bad_batches_are_refused() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut drops = None;
        let mut metas = [Meta::default(); 1];
        assert!(recv_batch(s.as_fd(), &mut [0u8; 10], 0, &mut metas, &mut drops).is_err());
        assert!(recv_batch(s.as_fd(), &mut [0u8; 10], 20, &mut metas, &mut drops).is_err());
        assert!(send_batch(s.as_fd(), &[], 10).is_err());
        assert!(send_batch(s.as_fd(), &[0u8; 65], 1).is_err());
    }
}
