//! `TCP_INFO`: the kernel's view of a TCP connection.
//!
//! The kernel copies `min(our length, its struct tcp_info)` bytes and returns that length, so
//! an older kernel fills only a prefix of the struct. Fields that a kernel added later (the
//! delivery rate in 4.9, the busy / rwnd-limited / sndbuf-limited times in 4.10, `bytes_sent`
//! in 4.19) are `Option`s here: `None` when the returned length does not cover them. Offsets
//! are those of `struct tcp_info` in `linux/tcp.h` (checked by a test against `libc`'s layout).

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
    /// Bytes acknowledged by the peer (`tcpi_bytes_acked`; it counts the SYN and the FIN as
    /// one byte each).
    pub bytes_acked: u64,
    /// Current pacing rate in bytes/s (`tcpi_pacing_rate`; `u64::MAX`: unlimited).
    pub pacing_rate: u64,
    /// Connection state (`tcpi_state`, e.g. 1 = ESTABLISHED).
    pub state: u8,
    /// Path MTU the connection uses (`tcpi_pmtu`).
    pub pmtu: u32,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`, the kernel's `packets_out`).
    pub unacked: u32,
    /// Segments selectively acknowledged (`tcpi_sacked`).
    pub sacked: u32,
    /// Segments presumed lost (`tcpi_lost`).
    pub lost: u32,
    /// Segments retransmitted and not yet acknowledged (`tcpi_retrans`, `retrans_out`).
    pub retrans_out: u32,
    /// Slow-start threshold in segments (`tcpi_snd_ssthresh`; `0x7fffffff` until the first
    /// loss: "infinite").
    pub snd_ssthresh: u32,
    /// Bytes written by the application and not yet sent (`tcpi_notsent_bytes`).
    pub notsent_bytes: u32,
    /// The receiver's RTT estimate in microseconds (`tcpi_rcv_rtt`: measured by a receiving
    /// socket from the data it gets, for its window autotuning; 0 until it has one).
    pub rcv_rtt_us: u32,
    /// The receiver's space estimate, bytes (`tcpi_rcv_space`: what it expects to receive per
    /// RTT, which drives receive-buffer autotuning).
    pub rcv_space: u32,
    /// The most recent delivery-rate sample in bytes/s (`tcpi_delivery_rate`, Linux 4.9).
    pub delivery_rate: Option<u64>,
    /// Microseconds the connection was busy sending data (`tcpi_busy_time`, Linux 4.10;
    /// updated in jiffies).
    pub busy_time_us: Option<u64>,
    /// Microseconds the sender was limited by the receiver's window (`tcpi_rwnd_limited`).
    pub rwnd_limited_us: Option<u64>,
    /// Microseconds the sender was limited by its send buffer (`tcpi_sndbuf_limited`).
    pub sndbuf_limited_us: Option<u64>,
    /// Data bytes sent, retransmissions included (`tcpi_bytes_sent`, Linux 4.19).
    pub bytes_sent: Option<u64>,
    /// Data bytes retransmitted (`tcpi_bytes_retrans`, Linux 4.19).
    pub bytes_retrans: Option<u64>,
    /// How many bytes of `struct tcp_info` the kernel filled.
    pub len: u32,
}

/// `tcpi_snd_ssthresh` before the first loss (`TCP_INFINITE_SSTHRESH`).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Byte offsets in `struct tcp_info` (`linux/tcp.h`) of the fields a kernel may lack.
pub mod offset {
    /// `tcpi_delivery_rate` (u64).
    pub const DELIVERY_RATE: usize = 160;
    /// `tcpi_busy_time` (u64); `tcpi_rwnd_limited` and `tcpi_sndbuf_limited` follow.
    pub const BUSY_TIME: usize = 168;
    /// `tcpi_rwnd_limited` (u64).
    pub const RWND_LIMITED: usize = 176;
    /// `tcpi_sndbuf_limited` (u64).
    pub const SNDBUF_LIMITED: usize = 184;
    /// `tcpi_bytes_sent` (u64).
    pub const BYTES_SENT: usize = 200;
    /// `tcpi_bytes_retrans` (u64).
    pub const BYTES_RETRANS: usize = 208;
}

impl TcpInfo {
    /// The segments the kernel counts as in flight (`tcp_packets_in_flight`: unacknowledged,
    /// minus those selectively acknowledged or presumed lost, plus those retransmitted).
    pub fn packets_in_flight(&self) -> u32 {
        self.unacked
            .saturating_sub(self.sacked.saturating_add(self.lost))
            .saturating_add(self.retrans_out)
    }

    /// The fields from the raw struct `ti` of which the kernel filled `len` bytes.
    fn from_raw(ti: &libc::tcp_info, len: usize) -> TcpInfo {
        let has = |off: usize| len >= off + 8;
        TcpInfo {
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
            unacked: ti.tcpi_unacked,
            sacked: ti.tcpi_sacked,
            lost: ti.tcpi_lost,
            retrans_out: ti.tcpi_retrans,
            snd_ssthresh: ti.tcpi_snd_ssthresh,
            notsent_bytes: ti.tcpi_notsent_bytes,
            rcv_rtt_us: ti.tcpi_rcv_rtt,
            rcv_space: ti.tcpi_rcv_space,
            delivery_rate: has(offset::DELIVERY_RATE).then_some(ti.tcpi_delivery_rate),
            busy_time_us: has(offset::BUSY_TIME).then_some(ti.tcpi_busy_time),
            rwnd_limited_us: has(offset::RWND_LIMITED).then_some(ti.tcpi_rwnd_limited),
            sndbuf_limited_us: has(offset::SNDBUF_LIMITED).then_some(ti.tcpi_sndbuf_limited),
            bytes_sent: has(offset::BYTES_SENT).then_some(ti.tcpi_bytes_sent),
            bytes_retrans: has(offset::BYTES_RETRANS).then_some(ti.tcpi_bytes_retrans),
            len: len as u32,
        }
    }
}

/// Reads `TCP_INFO` from a TCP socket. Safe to call from another thread than the one writing
/// to the socket (the kernel takes the socket lock).
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
    Ok(TcpInfo::from_raw(&ti, len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// The offsets of `linux/tcp.h` (checked with `offsetof` in C on Linux 6.x), against the
    /// layout of `libc::tcp_info` this crate reads through.
    #[test]
    fn field_offsets_match_linux_tcp_h() {
        type T = libc::tcp_info;
        assert_eq!(offset_of!(T, tcpi_unacked), 24);
        assert_eq!(offset_of!(T, tcpi_sacked), 28);
        assert_eq!(offset_of!(T, tcpi_lost), 32);
        assert_eq!(offset_of!(T, tcpi_retrans), 36);
        assert_eq!(offset_of!(T, tcpi_rtt), 68);
        assert_eq!(offset_of!(T, tcpi_rttvar), 72);
        assert_eq!(offset_of!(T, tcpi_snd_ssthresh), 76);
        assert_eq!(offset_of!(T, tcpi_snd_cwnd), 80);
        assert_eq!(offset_of!(T, tcpi_total_retrans), 100);
        assert_eq!(offset_of!(T, tcpi_pacing_rate), 104);
        assert_eq!(offset_of!(T, tcpi_bytes_acked), 120);
        assert_eq!(offset_of!(T, tcpi_notsent_bytes), 144);
        assert_eq!(offset_of!(T, tcpi_min_rtt), 148);
        assert_eq!(offset_of!(T, tcpi_delivery_rate), offset::DELIVERY_RATE);
        assert_eq!(offset_of!(T, tcpi_busy_time), offset::BUSY_TIME);
        assert_eq!(offset_of!(T, tcpi_rwnd_limited), offset::RWND_LIMITED);
        assert_eq!(offset_of!(T, tcpi_sndbuf_limited), offset::SNDBUF_LIMITED);
        assert_eq!(offset_of!(T, tcpi_bytes_sent), offset::BYTES_SENT);
        assert_eq!(offset_of!(T, tcpi_bytes_retrans), offset::BYTES_RETRANS);
    }

    /// An older kernel's shorter struct: the fields past its length are `None`, not zeros that
    /// would read as "never busy".
    #[test]
    fn a_short_struct_leaves_the_newer_fields_unset() {
        // SAFETY: plain old data; all-zero is valid.
        let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
        ti.tcpi_snd_cwnd = 10;
        ti.tcpi_delivery_rate = 5;
        ti.tcpi_busy_time = 7;
        ti.tcpi_bytes_sent = 9;
        // Linux 4.9: the struct ends after tcpi_delivery_rate.
        let old = TcpInfo::from_raw(&ti, offset::DELIVERY_RATE + 8);
        assert_eq!(old.snd_cwnd, 10);
        assert_eq!(old.delivery_rate, Some(5));
        assert_eq!((old.busy_time_us, old.bytes_sent), (None, None));
        // Linux 4.8: no delivery rate either.
        let older = TcpInfo::from_raw(&ti, offset::DELIVERY_RATE);
        assert_eq!(older.delivery_rate, None);
        let full = TcpInfo::from_raw(&ti, std::mem::size_of::<libc::tcp_info>());
        assert_eq!((full.busy_time_us, full.bytes_sent), (Some(7), Some(9)));
    }

    #[test]
    fn packets_in_flight_is_the_kernels_formula() {
        let t = TcpInfo {
            unacked: 100,
            sacked: 10,
            lost: 5,
            retrans_out: 3,
            ..TcpInfo::default()
        };
        assert_eq!(t.packets_in_flight(), 88);
        assert_eq!(TcpInfo::default().packets_in_flight(), 0);
    }
}
