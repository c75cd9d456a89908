//! [`Server`]: the stateless front of a listening endpoint. It answers Initials with a cookie
//! bound to the client's address and connection id, and creates a [`Connection`] only for a
//! client that echoes a valid cookie, so a spoofed source address gets one small Challenge
//! (smaller than the padded Initial that caused it) and no state.

use std::net::SocketAddr;

use crate::connection::{Config, Connection, CLOSE_SERVER_FULL};
use crate::wire::{self, Frame, Header, Packet, PacketType, PacketWriter, COOKIE_LEN};

/// How long a cookie stays valid: the current and the previous period of this length.
const COOKIE_PERIOD_NS: u64 = 10_000_000_000;

/// What the caller should do with a datagram the server handled.
#[derive(Debug)]
pub enum ServerAction {
    /// Nothing: the datagram was invalid, stale or not for a new connection.
    Drop,
    /// Send the first `n` bytes of `out` back to the datagram's source.
    Reply(usize),
    /// A new connection, which already processed the datagram. Route datagrams with its
    /// connection id (see [`wire::peek_cid`]) from this source to it.
    Accept(Box<Connection>),
}

/// The stateless part of a server endpoint.
#[derive(Debug, Clone)]
pub struct Server {
    config: Config,
    secret: [u8; 32],
    challenges: u64,
    rejected: u64,
    refused: u64,
}

impl Server {
    /// A server handing `config` to its connections; `secret` keys the cookies (random bytes).
    pub fn new(config: Config, secret: [u8; 32]) -> Server {
        Server {
            config,
            secret,
            challenges: 0,
            rejected: 0,
            refused: 0,
        }
    }

    /// Challenges sent so far.
    pub fn challenges(&self) -> u64 {
        self.challenges
    }

    /// Datagrams dropped (invalid, wrong version, bad cookie).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Connections turned down with [`Server::refuse`] so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Turns down a connection that [`Server::handle_datagram`] just accepted, because the
    /// application has no room for it: writes into `out` one Data packet carrying CLOSE with
    /// [`CLOSE_SERVER_FULL`] and `reason`, and returns its length (send it to the connection's
    /// source; `None` if `out` is too small). Nothing is kept: the client's next packet with
    /// CONNECT is accepted, and may be refused, afresh. The client's connection ends with
    /// `CloseReason::Peer { code: CLOSE_SERVER_FULL, reason }` instead of timing out.
    pub fn refuse(
        &mut self,
        now: u64,
        mut conn: Box<Connection>,
        reason: &str,
        out: &mut [u8],
    ) -> Option<usize> {
        self.refused += 1;
        conn.close(now, CLOSE_SERVER_FULL, reason);
        conn.poll_transmit(now, out)
    }

    fn cookie(&self, peer: SocketAddr, cid: u64, period: u64) -> [u8; COOKIE_LEN] {
        let mut input = [0u8; 16 + 2 + 8 + 8];
        let ip = match peer {
            SocketAddr::V4(a) => a.ip().to_ipv6_mapped(),
            SocketAddr::V6(a) => *a.ip(),
        };
        input[..16].copy_from_slice(&ip.octets());
        input[16..18].copy_from_slice(&peer.port().to_le_bytes());
        input[18..26].copy_from_slice(&cid.to_le_bytes());
        input[26..].copy_from_slice(&period.to_le_bytes());
        let hash = blake3::keyed_hash(&self.secret, &input);
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(&hash.as_bytes()[..COOKIE_LEN]);
        cookie
    }

    fn cookie_valid(
        &self,
        now: u64,
        peer: SocketAddr,
        cid: u64,
        cookie: &[u8; COOKIE_LEN],
    ) -> bool {
        let period = now / COOKIE_PERIOD_NS;
        // Constant-time enough: a 128-bit keyed MAC cannot be guessed byte by byte over UDP.
        self.cookie(peer, cid, period) == *cookie
            || (period > 0 && self.cookie(peer, cid, period - 1) == *cookie)
    }

    /// Handles a datagram from `peer` whose connection id is not routed to a connection yet.
    pub fn handle_datagram(
        &mut self,
        now: u64,
        peer: SocketAddr,
        datagram: &[u8],
        out: &mut [u8],
    ) -> ServerAction {
        let Ok(packet) = Packet::parse(datagram) else {
            self.rejected += 1;
            return ServerAction::Drop;
        };
        let header = packet.header();
        match header.ty {
            PacketType::Initial => {
                let hello = packet.frames().any(
                    |f| matches!(f, Ok(Frame::Hello { version }) if version == u64::from(wire::VERSION)),
                );
                if !hello || datagram.len() < wire::MIN_INITIAL_SIZE {
                    self.rejected += 1;
                    return ServerAction::Drop;
                }
                let cookie = self.cookie(peer, header.cid, now / COOKIE_PERIOD_NS);
                let Ok(mut w) = PacketWriter::new(
                    out,
                    Header {
                        ty: PacketType::Challenge,
                        cid: header.cid,
                        pn: header.pn,
                    },
                ) else {
                    return ServerAction::Drop;
                };
                if !w.cookie(&cookie, self.config.recv_window) {
                    return ServerAction::Drop;
                }
                self.challenges += 1;
                ServerAction::Reply(w.finish())
            }
            PacketType::Data => {
                let cookie = packet.frames().find_map(|f| match f {
                    Ok(Frame::Connect { cookie }) => Some(cookie),
                    _ => None,
                });
                match cookie {
                    Some(c) if self.cookie_valid(now, peer, header.cid, &c) => {
                        let mut conn = Connection::server(self.config.clone(), header.cid, now);
                        conn.handle_datagram(now, datagram);
                        ServerAction::Accept(Box::new(conn))
                    }
                    _ => {
                        self.rejected += 1;
                        ServerAction::Drop
                    }
                }
            }
            PacketType::Challenge => {
                self.rejected += 1;
                ServerAction::Drop
            }
        }
    }
}
