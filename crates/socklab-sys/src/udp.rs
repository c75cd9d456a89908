//! UDP receive with generic receive offload (`UDP_GRO`, Linux 5.0): one `recvmsg` may return
//! several datagrams of one flow laid end to end, and a control message gives their size (every
//! one but the last has exactly that size). Enable it with
//! [`IntOpt::UdpGro`](crate::sockopt::IntOpt::UdpGro).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};

/// `UDP_GRO` from linux/udp.h (the libc crate names it only for some targets).
pub(crate) const UDP_GRO: libc::c_int = 104;

/// What [`recv_gro`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes placed in the buffer.
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// Size of each datagram when the kernel glued several together (`None`: one datagram).
    pub segment: Option<usize>,
}

/// Receives without blocking into `buf` (`WouldBlock` when nothing is queued). A datagram
/// longer than `buf` is cut and reported as `InvalidData`.
pub fn recv_gro(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: an all-zero sockaddr_storage is a valid (unspecified) address.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one cmsghdr with an int, aligned for cmsghdr.
    let mut control = [0u64; 8];
    // SAFETY: an all-zero msghdr is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let n = loop {
        // SAFETY: msg points to the address storage, one iovec over `buf` and the control
        // buffer, all owned here and alive for the call; their lengths are given.
        let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if r >= 0 {
            break r as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "datagram longer than the receive buffer",
        ));
    }
    let mut segment = None;
    // SAFETY: msg was filled by the kernel; CMSG_FIRSTHDR/NXTHDR walk within msg_controllen.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: cmsg is non-null and points inside our control buffer.
        let hdr = unsafe { &*cmsg };
        if hdr.cmsg_level == libc::SOL_UDP && hdr.cmsg_type == UDP_GRO {
            // SAFETY: the kernel puts an int (the segment size) in a UDP_GRO message;
            // read_unaligned copes with any alignment of the data area.
            let size: libc::c_int =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            if size > 0 && (size as usize) < n {
                segment = Some(size as usize);
            }
        }
        // SAFETY: msg and cmsg are valid as above.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    let from = socket_addr(&addr).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, "datagram from a non-IP address")
    })?;
    Ok(Received {
        len: n,
        from,
        segment,
    })
}

pub(crate) fn socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large and
            // aligned enough for.
            let a: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockopt::{set, IntOpt};
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn plain_datagrams_come_one_by_one_with_their_sender() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 64];
        let mut r = recv_gro(rx.as_fd(), &mut buf);
        for _ in 0..100 {
            if !matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            r = recv_gro(rx.as_fd(), &mut buf);
        }
        let r = r.unwrap();
        assert_eq!(
            (r.len, r.from, r.segment),
            (5, tx.local_addr().unwrap(), None)
        );
        assert_eq!(&buf[..5], b"hello");
        let e = recv_gro(rx.as_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_gso_send_arrives_glued_with_its_segment_size_or_one_by_one() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let gro = set(rx.as_fd(), IntOpt::UdpGro, 1).is_ok();
        if set(tx.as_fd(), IntOpt::UdpSegment, 1000).is_err() {
            eprintln!("SKIP: this kernel has no UDP GSO");
            return;
        }
        let data: Vec<u8> = (0..3500u32).map(|i| i as u8).collect();
        tx.send_to(&data, rx.local_addr().unwrap()).unwrap();
        let mut buf = vec![0u8; 65536];
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        for _ in 0..200 {
            match recv_gro(rx.as_fd(), &mut buf) {
                Ok(r) => {
                    let seg = r.segment.unwrap_or(r.len);
                    sizes.extend(buf[..r.len].chunks(seg).map(<[u8]>::len));
                    got.extend_from_slice(&buf[..r.len]);
                    if got.len() == data.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, data);
        // Cut at the segment size, the datagrams are the ones sent, whether glued or not.
        assert_eq!(sizes, [1000, 1000, 1000, 500], "gro enabled: {gro}");
    }
}
