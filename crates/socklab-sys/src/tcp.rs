//! `TCP_INFO`: the kernel's view of a TCP connection.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

/// The fields of `struct tcp_info` that socklab records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Total retransmitted segments over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Congestion window in segments (`tcpi_snd_cwnd`).
    pub snd_cwnd: u32,
    /// Smoothed RTT in microseconds (`tcpi_rtt`).
    pub rtt_us: u32,
    /// RTT variance in microseconds (`tcpi_rttvar`).
    pub rttvar_us: u32,
    /// Minimum RTT seen, microseconds (`tcpi_min_rtt`).
    pub min_rtt_us: u32,
    /// Sender MSS in bytes (`tcpi_snd_mss`).
    pub snd_mss: u32,
    /// Segments sent (`tcpi_segs_out`).
    pub segs_out: u32,
    /// Bytes acknowledged by the peer (`tcpi_bytes_acked`).
    pub bytes_acked: u64,
    /// Current pacing rate in bytes/s (`tcpi_pacing_rate`).
    pub pacing_rate: u64,
    /// Connection state (`tcpi_state`, e.g. 1 = ESTABLISHED).
    pub state: u8,
    /// Path MTU the connection uses (`tcpi_pmtu`).
    pub pmtu: u32,
}

/// Reads `TCP_INFO` from a TCP socket.
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: ti is a writable buffer of `len` bytes; the kernel writes at most `len` bytes and
    // updates len.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut libc::tcp_info).cast(),
            &mut len,
        )
    })?;
    Ok(TcpInfo {
        total_retrans: ti.tcpi_total_retrans,
        snd_cwnd: ti.tcpi_snd_cwnd,
        rtt_us: ti.tcpi_rtt,
        rttvar_us: ti.tcpi_rttvar,
        min_rtt_us: ti.tcpi_min_rtt,
        snd_mss: ti.tcpi_snd_mss,
        segs_out: ti.tcpi_segs_out,
        bytes_acked: ti.tcpi_bytes_acked,
        pacing_rate: ti.tcpi_pacing_rate,
        state: ti.tcpi_state,
        pmtu: ti.tcpi_pmtu,
    })
}
