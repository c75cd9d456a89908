//! Integer socket options by name, set and read back with `setsockopt`/`getsockopt`.
//!
//! One code path for every integer option socklab sets, including those `socket2` lacks
//! (`TCP_FASTOPEN`, `TCP_FASTOPEN_CONNECT`, `TCP_NOTSENT_LOWAT`, `SO_BUSY_POLL`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

/// The integer options socklab knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntOpt {
    /// `TCP_NODELAY`.
    TcpNoDelay,
    /// `TCP_QUICKACK` (the kernel clears it again; re-arm after every receive).
    TcpQuickAck,
    /// `TCP_CORK`.
    TcpCork,
    /// `TCP_FASTOPEN`: the server's queue of pending TFO requests.
    TcpFastOpen,
    /// `TCP_FASTOPEN_CONNECT`: the client sends data with its SYN.
    TcpFastOpenConnect,
    /// `TCP_NOTSENT_LOWAT`.
    TcpNotsentLowat,
    /// `TCP_MAXSEG`.
    TcpMaxSeg,
    /// `TCP_KEEPIDLE` (seconds).
    TcpKeepIdle,
    /// `TCP_KEEPINTVL` (seconds).
    TcpKeepIntvl,
    /// `TCP_KEEPCNT`.
    TcpKeepCnt,
    /// `SO_KEEPALIVE`.
    SoKeepAlive,
    /// `SO_REUSEADDR`.
    SoReuseAddr,
    /// `SO_REUSEPORT`.
    SoReusePort,
    /// `SO_SNDBUF` (the kernel doubles what is set, for bookkeeping).
    SoSndBuf,
    /// `SO_RCVBUF` (doubled likewise).
    SoRcvBuf,
    /// `SO_BUSY_POLL` (microseconds).
    SoBusyPoll,
    /// `SO_SNDBUFFORCE`: `SO_SNDBUF` past `net.core.wmem_max` (needs `CAP_NET_ADMIN`).
    SoSndBufForce,
    /// `SO_RCVBUFFORCE`: `SO_RCVBUF` past `net.core.rmem_max` (needs `CAP_NET_ADMIN`).
    SoRcvBufForce,
    /// `UDP_SEGMENT` (Linux 4.18): a send larger than this many bytes leaves as datagrams of
    /// this size, the last one possibly shorter (UDP GSO); 0 turns it off.
    UdpSegment,
    /// `UDP_GRO` (Linux 5.0): receive several datagrams of a flow with one call (see
    /// [`crate::udp::recv_gro`]).
    UdpGro,
    /// `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2): a `bind()` to an address with port 0 defers the
    /// port choice to `connect()`, which picks one unique for the whole 4-tuple (so many
    /// source addresses multiply the ports a client can use).
    IpBindAddressNoPort,
    /// `SO_TIMESTAMPNS`: every received datagram carries the kernel's arrival time
    /// (`CLOCK_REALTIME`, ns) as a control message (see [`crate::mmsg::recv_batch`]).
    SoTimestampNs,
    /// `SO_RXQ_OVFL`: every received datagram carries the socket's count of datagrams dropped
    /// because its receive buffer was full (see [`crate::mmsg::recv_batch`]).
    SoRxqOvfl,
    /// `IP_TOS` (TCP keeps the two ECN bits for itself).
    IpTos,
    /// `IPV6_TCLASS`.
    Ipv6TClass,
    /// `IP_MTU_DISCOVER` (`IP_PMTUDISC_DO` = 2: the DF bit set, no fragmenting).
    IpMtuDiscover,
    /// `IPV6_MTU_DISCOVER` (`IPV6_PMTUDISC_DO` = 2).
    Ipv6MtuDiscover,
    /// `IP_MTU` (read only, on a connected socket): the path MTU the kernel knows for the peer
    /// (the route's MTU until a smaller one is discovered; 65536 on loopback).
    IpMtu,
    /// `IPV6_MTU` read on a connected socket: the path MTU, as [`IntOpt::IpMtu`].
    Ipv6Mtu,
}

impl IntOpt {
    fn level_name(self) -> (libc::c_int, libc::c_int) {
        use IntOpt::*;
        match self {
            TcpNoDelay => (libc::IPPROTO_TCP, libc::TCP_NODELAY),
            TcpQuickAck => (libc::IPPROTO_TCP, libc::TCP_QUICKACK),
            TcpCork => (libc::IPPROTO_TCP, libc::TCP_CORK),
            TcpFastOpen => (libc::IPPROTO_TCP, libc::TCP_FASTOPEN),
            TcpFastOpenConnect => (libc::IPPROTO_TCP, 30),
            TcpNotsentLowat => (libc::IPPROTO_TCP, 25),
            TcpMaxSeg => (libc::IPPROTO_TCP, libc::TCP_MAXSEG),
            TcpKeepIdle => (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
            TcpKeepIntvl => (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
            TcpKeepCnt => (libc::IPPROTO_TCP, libc::TCP_KEEPCNT),
            SoKeepAlive => (libc::SOL_SOCKET, libc::SO_KEEPALIVE),
            SoReuseAddr => (libc::SOL_SOCKET, libc::SO_REUSEADDR),
            SoReusePort => (libc::SOL_SOCKET, libc::SO_REUSEPORT),
            SoSndBuf => (libc::SOL_SOCKET, libc::SO_SNDBUF),
            SoRcvBuf => (libc::SOL_SOCKET, libc::SO_RCVBUF),
            SoBusyPoll => (libc::SOL_SOCKET, 46),
            SoSndBufForce => (libc::SOL_SOCKET, libc::SO_SNDBUFFORCE),
            SoRcvBufForce => (libc::SOL_SOCKET, libc::SO_RCVBUFFORCE),
            // linux/udp.h: UDP_SEGMENT = 103 (the libc crate names it only for some targets).
            UdpSegment => (libc::SOL_UDP, 103),
            UdpGro => (libc::SOL_UDP, crate::udp::UDP_GRO),
            // linux/in.h: IP_BIND_ADDRESS_NO_PORT = 24.
            IpBindAddressNoPort => (libc::IPPROTO_IP, 24),
            SoTimestampNs => (libc::SOL_SOCKET, crate::mmsg::SO_TIMESTAMPNS),
            SoRxqOvfl => (libc::SOL_SOCKET, crate::mmsg::SO_RXQ_OVFL),
            IpTos => (libc::IPPROTO_IP, libc::IP_TOS),
            Ipv6TClass => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
            IpMtuDiscover => (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER),
            Ipv6MtuDiscover => (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER),
            IpMtu => (libc::IPPROTO_IP, libc::IP_MTU),
            Ipv6Mtu => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
        }
    }
}

/// `setsockopt(fd, level, name, &value, sizeof(int))`.
pub fn set(fd: BorrowedFd<'_>, opt: IntOpt, value: i32) -> io::Result<()> {
    let (level, name) = opt.level_name();
    let v: libc::c_int = value;
    // SAFETY: the value is a valid c_int of the stated size for the duration of the call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(fd, level, name)` of an integer option.
pub fn get(fd: BorrowedFd<'_>, opt: IntOpt) -> io::Result<i32> {
    let (level, name) = opt.level_name();
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v is a writable c_int and len its size; the kernel writes at most len bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// `SO_MAX_PACING_RATE` (bytes per second, 64-bit: Linux 4.20 takes a `u64` when the option
/// length says so; `u64::MAX` is unlimited). The kernel paces TCP at most at this rate (with
/// the fq qdisc, or TCP's own internal pacing otherwise).
pub fn set_max_pacing_rate(fd: BorrowedFd<'_>, bytes_per_sec: u64) -> io::Result<()> {
    let v: u64 = bytes_per_sec;
    // SAFETY: v is a valid u64 of the stated size for the duration of the call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&v as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `SO_MAX_PACING_RATE` read back, bytes per second (`u64::MAX`: unlimited). A kernel that
/// answers with 32 bits (`~0U`: unlimited) is widened.
pub fn max_pacing_rate(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: v is a writable u64 and len its size; the kernel writes at most len bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    })?;
    if len as usize == std::mem::size_of::<u32>() {
        let v32 = v as u32;
        return Ok(if v32 == u32::MAX {
            u64::MAX
        } else {
            u64::from(v32)
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn max_pacing_rate_reads_back_what_was_set() {
        let s = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()).unwrap(), u64::MAX);
        set_max_pacing_rate(s.as_fd(), 62_500_000).unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()).unwrap(), 62_500_000);
        // Above 32 bits (40 Gbit/s = 5 GB/s).
        set_max_pacing_rate(s.as_fd(), 5_000_000_000).unwrap();
        assert_eq!(max_pacing_rate(s.as_fd()).unwrap(), 5_000_000_000);
    }
}
