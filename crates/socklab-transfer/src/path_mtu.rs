//! The datagram size of a rudp client on loopback (issue 29: rudp on fast paths).
//!
//! rudp's default `max_datagram` (1472 bytes) fits a 1500-byte Ethernet path. Towards a loopback
//! address the path is the host itself and its MTU is the loopback device's (65536 unless
//! changed), so the client sends datagrams as large as that MTU carries: 44 times fewer packets,
//! ACKs, sends, receives and per-packet transport work per byte. Everything else (a peer in
//! another namespace, behind the emulator's TUN or netem link, on the network) keeps the
//! configured size: rudp does no path-MTU discovery, and such a path may be narrower than the
//! first hop says. A `socklab netem --driver udp-proxy` relay listens on loopback too; a transfer
//! sent through it by hand moves these large datagrams (`socklab transfer` itself refuses the
//! udp-proxy driver).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;

use socklab_sys::sockopt::{get, IntOpt};

/// The largest UDP payload of one IPv4 datagram (65535 - 20 - 8), rudp's `max_datagram` cap.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// The `max_datagram` to use towards `peer`: on loopback the largest datagram the path MTU
/// the kernel reports carries (never less than `configured`); elsewhere, or when the kernel
/// does not say, `configured`. Asks a throwaway UDP socket connected to `peer` (connecting a
/// UDP socket sends nothing).
pub fn datagram_size(peer: SocketAddr, configured: usize) -> usize {
    if !peer.ip().is_loopback() {
        return configured;
    }
    let local: SocketAddr = if peer.is_ipv4() {
        (Ipv4Addr::LOCALHOST, 0).into()
    } else {
        (Ipv6Addr::LOCALHOST, 0).into()
    };
    let opt = if peer.is_ipv4() {
        IntOpt::IpMtu
    } else {
        IntOpt::Ipv6Mtu
    };
    let mtu = UdpSocket::bind(local)
        .and_then(|s| s.connect(peer).map(|()| s))
        .and_then(|s| get(s.as_fd(), opt));
    loopback_datagram(peer.ip(), mtu.ok(), configured)
}

/// The datagram size for a loopback `peer` whose path MTU is `mtu` (IP and UDP headers taken
/// off, capped at [`MAX_UDP_PAYLOAD`], at least `configured`).
pub fn loopback_datagram(peer: IpAddr, mtu: Option<i32>, configured: usize) -> usize {
    let headers = if peer.is_ipv4() { 20 + 8 } else { 40 + 8 };
    match mtu {
        Some(m) if m > 0 => (m as usize)
            .saturating_sub(headers)
            .min(MAX_UDP_PAYLOAD)
            .max(configured),
        _ => configured,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

    #[test]
    fn loopback_mtu_minus_headers_capped_at_the_udp_maximum() {
        assert_eq!(loopback_datagram(V4, Some(65_536), 1472), MAX_UDP_PAYLOAD);
        assert_eq!(loopback_datagram(V6, Some(65_536), 1472), 65_488);
        assert_eq!(loopback_datagram(V4, Some(9000), 1472), 8972);
        assert_eq!(loopback_datagram(V6, Some(9000), 1472), 8952);
    }

    #[test]
    fn never_below_the_configured_size_nor_without_an_mtu() {
        assert_eq!(loopback_datagram(V4, Some(1500), 1472), 1472);
        assert_eq!(loopback_datagram(V4, Some(1280), 1472), 1472);
        assert_eq!(loopback_datagram(V4, Some(0), 1472), 1472);
        assert_eq!(loopback_datagram(V4, Some(-1), 1472), 1472);
        assert_eq!(loopback_datagram(V4, None, 1472), 1472);
        assert_eq!(loopback_datagram(V4, Some(65_536), 65_507), 65_507);
    }

    #[test]
    fn a_loopback_peer_gets_the_loopback_mtu() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect("127.0.0.1:9").unwrap(); // connect() of UDP sends nothing
        let mtu = get(s.as_fd(), IntOpt::IpMtu).unwrap();
        assert!(mtu >= 1500, "loopback MTU {mtu}");
        let d = datagram_size("127.0.0.1:9".parse().unwrap(), 1472);
        assert_eq!(d, loopback_datagram(V4, Some(mtu), 1472));
        assert!(d > 1472 && d <= MAX_UDP_PAYLOAD, "{d}");
    }

    #[test]
    fn a_peer_off_the_host_keeps_the_configured_size() {
        // Decided on the address: no socket is opened for these.
        for peer in [
            "10.0.0.1:9",
            "192.0.2.1:9",
            "[fd00::1]:9",
            // ::ffff:127.0.0.1 is not loopback to Rust; the configured size is the safe side.
            "[::ffff:127.0.0.1]:9",
        ] {
            assert_eq!(datagram_size(peer.parse().unwrap(), 1472), 1472, "{peer}");
        }
    }
}
