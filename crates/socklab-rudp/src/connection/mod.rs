//! [`Connection`]: one end of a transport connection, as a sans-IO state machine.
//!
//! The caller feeds it datagrams ([`Connection::handle_datagram`]) and timer expiries
//! ([`Connection::handle_timeout`]), takes datagrams to send ([`Connection::poll_transmit`]) and
//! asks when to call back ([`Connection::poll_timeout`]). Time is a parameter (nanoseconds on the
//! caller's clock); nothing here reads a clock, sleeps or touches a socket.
//!
//! Data model: numbered streams of bytes at offsets. The sender [`Connection::write`]s chunks
//! `(stream, offset, bytes)`; the receiver gets them back with [`Connection::read`], reliably,
//! without duplicates, but in arrival order (no head-of-line blocking: a file receiver writes
//! each chunk at its offset). Flow control is by receiver credit: the peer may send at most
//! `credit` distinct stream bytes, and the credit grows as the application reads.
//!
//! Loss recovery follows QUIC (RFC 9002): packet numbers are never reused (a retransmission
//! goes in a new packet), ACK frames carry ranges and are repeated until the peer acknowledged a
//! packet that carried them, loss is detected by packet and time thresholds with an adaptive
//! reordering window, a probe timeout sends tail-loss probes, and only after several probe
//! timeouts does the sender declare everything lost (the RFC 6298 RTO as a last resort).

//!
//! The parts, one file each: [`Config`] (`config.rs`) and [`Stats`] (`stats.rs`); this file, the
//! state machine (handshake, packet dispatch, timers, close); `recovery.rs`, loss detection and
//! RTT estimation; `send_buffer.rs`, the data written and not yet acknowledged; `transmit.rs`,
//! what goes into the next packet and when (congestion window, pacing); `assembler.rs`, the
//! received stream data waiting to be read.

mod assembler;
mod config;
mod recovery;
mod send_buffer;
mod stats;
#[cfg(test)]
mod tests;
mod transmit;

use std::collections::{HashMap, VecDeque};

use crate::cc::Model;
use crate::rangeset::{RangeMap, RangeSet};
use crate::wire::{self, Frame, Header, Packet, PacketType, PacketWriter, COOKIE_LEN};

pub use crate::error::{ConfigError, WriteError};
pub use assembler::Chunk;
pub use config::Config;
pub use stats::Stats;

use recovery::SentPacket;
use send_buffer::{DataRef, SendChunk};

/// Largest stream id a peer may use (bounds the receiver's per-stream state).
pub const MAX_STREAMS: u32 = 1 << 20;
/// Close code of a clean close.
pub const CLOSE_OK: u64 = 0;
/// Close code after a protocol violation by the peer.
pub const CLOSE_PROTOCOL: u64 = 1;
/// Close code after a flow-control violation by the peer.
pub const CLOSE_FLOW: u64 = 2;
/// Close code of a server that has no room for the connection ([`crate::Server::refuse`]).
pub const CLOSE_SERVER_FULL: u64 = 3;
/// Close code of an end that gave up on a peer making no progress (see
/// [`Connection::last_progress`]): PINGs and repeated data keep a connection open, not useful.
pub const CLOSE_NO_PROGRESS: u64 = 4;

/// Most ACK ranges kept (and reported).
const MAX_ACK_RANGES: usize = 64;
const MAX_INITIAL_TRIES: u32 = 10;

/// Something the application should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake finished: data may be written (client) or will arrive (server).
    Connected,
    /// New stream data can be [`Connection::read`].
    Readable,
    /// The connection is over (or closing: nothing more will be delivered).
    Closed(CloseReason),
}

/// Why a connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// This end called [`Connection::close`].
    Local { code: u64 },
    /// The peer closed.
    Peer { code: u64, reason: String },
    /// Nothing arrived for the idle timeout.
    IdleTimeout,
    /// The server never answered the client's Initial.
    HandshakeTimeout,
    /// The peer broke the protocol (this end closed with [`CLOSE_PROTOCOL`] or [`CLOSE_FLOW`]).
    ProtocolViolation(String),
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::Local { code } => write!(f, "closed locally (code {code})"),
            CloseReason::Peer { code, reason } => {
                write!(f, "closed by the peer (code {code}: {reason})")
            }
            CloseReason::IdleTimeout => f.write_str("idle timeout: nothing arrived"),
            CloseReason::HandshakeTimeout => f.write_str("handshake timeout: no server answered"),
            CloseReason::ProtocolViolation(what) => write!(f, "protocol violation: {what}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Client,
    Server,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Client: sending Initials, waiting for the Challenge.
    Initial {
        next: u64,
        tries: u32,
    },
    Open,
    /// We sent (or will send) CLOSE; until `until`, stragglers are answered with CLOSE again.
    Closing {
        until: u64,
    },
    Closed,
}

/// One end of a connection. See the module documentation.
#[derive(Debug)]
pub struct Connection {
    config: Config,
    role: Role,
    cid: u64,
    state: State,
    cookie: Option<[u8; COOKIE_LEN]>,
    /// Client: the server answered a Data packet, so CONNECT frames are no longer needed.
    confirmed: bool,
    events: VecDeque<Event>,
    stats: Stats,
    last_recv: u64,
    /// When new stream data last arrived or data of ours was first acknowledged.
    last_progress: u64,
    close_sent: bool,
    close_code: u64,
    close_reason: String,
    initial_sent_at: Option<u64>,

    // --- sending ---
    next_pn: u64,
    sent: VecDeque<SentPacket>,
    /// Index into `sent` of the first packet that may be outstanding.
    first_outstanding: usize,
    acked_pns: RangeSet,
    largest_acked: Option<u64>,
    in_flight: u64,
    last_eliciting_sent: Option<u64>,
    chunks: VecDeque<SendChunk>,
    chunk_base: u64,
    spare: Vec<Vec<u8>>,
    buffered: usize,
    unsent_chunk: u64,
    unsent_pos: usize,
    retx: VecDeque<DataRef>,
    /// Tail retransmissions to send a second time (see `write_stream`).
    retx_again: VecDeque<DataRef>,
    new_bytes_sent: u64,
    peer_credit: u64,
    stream_retx: HashMap<u32, u64>,
    probes: u32,
    pto_count: u32,
    loss_time: Option<u64>,
    reordering_seen: bool,
    reo_mult: u64,
    spurious_round: u64,
    delivered: u64,
    delivered_time: u64,
    first_sent_time: u64,
    app_limited_until: u64,
    pace_tokens: f64,
    pace_stamp: u64,
    pace_wait: Option<u64>,
    cc: Model,
    srtt: u64,
    rttvar: u64,
    latest_rtt: u64,
    has_rtt: bool,
    min_rtt: u64,

    // --- receiving ---
    recv_pns: RangeSet,
    ack_floor: u64,
    largest_recv: Option<u64>,
    largest_recv_time: u64,
    unacked_eliciting: u32,
    ack_pending: bool,
    ack_now: bool,
    ack_deadline: Option<u64>,
    ack_only_streak: u32,
    recv_streams: HashMap<u32, RangeMap>,
    ring: VecDeque<u8>,
    ring_chunks: VecDeque<(u32, u64, usize)>,
    unique_received: u64,
    consumed: u64,
    credit_sent: u64,
    credit_pending: bool,
}

impl Connection {
    /// A client connection with connection id `cid` (pick it at random), starting at `now`.
    pub fn client(config: Config, cid: u64, now: u64) -> Connection {
        let mut c = Connection::new(config, Role::Client, cid, now);
        c.state = State::Initial {
            next: now,
            tries: 0,
        };
        c
    }

    /// The server side of a connection whose client proved its address (see [`crate::Server`]).
    pub(crate) fn server(config: Config, cid: u64, now: u64) -> Connection {
        let mut c = Connection::new(config, Role::Server, cid, now);
        c.state = State::Open;
        c.events.push_back(Event::Connected);
        c
    }

    fn new(config: Config, role: Role, cid: u64, now: u64) -> Connection {
        let mss = config.max_datagram as u64;
        let cc = Model::new(
            mss,
            config.initial_window_packets,
            config.initial_rtt_ns,
            config.max_rate.map(|r| r as f64),
        );
        let window = config.recv_window;
        Connection {
            role,
            cid,
            state: State::Open,
            cookie: None,
            confirmed: role == Role::Server,
            events: VecDeque::new(),
            stats: Stats::default(),
            last_recv: now,
            last_progress: now,
            close_sent: false,
            close_code: 0,
            close_reason: String::new(),
            initial_sent_at: None,
            next_pn: 0,
            sent: VecDeque::new(),
            first_outstanding: 0,
            acked_pns: RangeSet::new(),
            largest_acked: None,
            in_flight: 0,
            last_eliciting_sent: None,
            chunks: VecDeque::new(),
            chunk_base: 0,
            spare: Vec::new(),
            buffered: 0,
            unsent_chunk: 0,
            unsent_pos: 0,
            retx: VecDeque::new(),
            retx_again: VecDeque::new(),
            new_bytes_sent: 0,
            peer_credit: 0,
            stream_retx: HashMap::new(),
            probes: 0,
            pto_count: 0,
            loss_time: None,
            reordering_seen: false,
            reo_mult: 1,
            spurious_round: 0,
            delivered: 0,
            delivered_time: now,
            first_sent_time: now,
            app_limited_until: 0,
            pace_tokens: (2 * mss) as f64,
            pace_stamp: now,
            pace_wait: None,
            srtt: config.initial_rtt_ns,
            rttvar: config.initial_rtt_ns / 2,
            latest_rtt: 0,
            has_rtt: false,
            min_rtt: u64::MAX,
            cc,
            recv_pns: RangeSet::new(),
            ack_floor: 0,
            largest_recv: None,
            largest_recv_time: now,
            unacked_eliciting: 0,
            ack_pending: false,
            ack_now: false,
            ack_deadline: None,
            ack_only_streak: 0,
            recv_streams: HashMap::new(),
            ring: VecDeque::new(),
            ring_chunks: VecDeque::new(),
            unique_received: 0,
            consumed: 0,
            credit_sent: window,
            // The first packet tells the peer our window.
            credit_pending: true,
            config,
        }
    }

    /// The connection id.
    pub fn cid(&self) -> u64 {
        self.cid
    }

    /// True once the handshake finished and until the connection closes.
    pub fn is_established(&self) -> bool {
        self.state == State::Open && (self.role == Role::Server || self.cookie.is_some())
    }

    /// True when the connection is over.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// When the connection last made progress (ns, the caller's clock): new stream bytes
    /// arrived, or the peer acknowledged a packet of ours carrying stream data for the first
    /// time. Creation counts. PINGs, ACK-only packets, repeated data and credit do not: an
    /// application can give up on a peer that only keeps the connection alive.
    pub fn last_progress(&self) -> u64 {
        self.last_progress
    }

    /// Distinct stream bytes the peer allows us to send beyond what we sent.
    pub fn peer_credit_left(&self) -> u64 {
        self.peer_credit.saturating_sub(self.new_bytes_sent)
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Starts a close with `code` and `reason` (`CLOSE_OK` for a clean one). Data not yet
    /// acknowledged is abandoned: close after [`Connection::all_acked`] for a clean end.
    pub fn close(&mut self, now: u64, code: u64, reason: &str) {
        if matches!(self.state, State::Closing { .. } | State::Closed) {
            return;
        }
        self.close_code = code;
        self.close_reason = reason.chars().take(200).collect();
        self.events
            .push_back(Event::Closed(CloseReason::Local { code }));
        if matches!(self.state, State::Initial { .. }) {
            self.state = State::Closed;
            return;
        }
        self.state = State::Closing {
            until: now + 3 * self.pto_base(),
        };
        self.close_sent = false;
    }

    fn violation(&mut self, now: u64, code: u64, what: String) {
        if matches!(self.state, State::Closing { .. } | State::Closed) {
            return;
        }
        self.close_code = code;
        self.close_reason = what.clone();
        self.state = State::Closing {
            until: now + 3 * self.pto_base(),
        };
        self.close_sent = false;
        self.events
            .push_back(Event::Closed(CloseReason::ProtocolViolation(what)));
    }

    // ------------------------------------------------------------------ receiving

    /// Processes one received datagram. Invalid ones are counted and dropped.
    pub fn handle_datagram(&mut self, now: u64, datagram: &[u8]) {
        if self.state == State::Closed {
            return;
        }
        let packet = match Packet::parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.invalid_datagrams += 1;
                return;
            }
        };
        let header = packet.header();
        if header.cid != self.cid {
            self.stats.invalid_datagrams += 1;
            return;
        }
        match (header.ty, self.state) {
            (PacketType::Challenge, State::Initial { .. }) => {
                self.stats.packets_received += 1;
                self.stats.bytes_received += datagram.len() as u64;
                self.on_challenge(now, &packet);
            }
            (PacketType::Data, State::Open) => {
                self.stats.packets_received += 1;
                self.stats.bytes_received += datagram.len() as u64;
                self.last_recv = now;
                self.on_data_packet(now, header.pn, &packet);
            }
            (PacketType::Data, State::Closing { .. }) => {
                self.stats.packets_received += 1;
                self.stats.bytes_received += datagram.len() as u64;
                // Answer stragglers with our CLOSE again; their CLOSE ends it at once.
                self.close_sent = false;
                if packet
                    .frames()
                    .any(|f| matches!(f, Ok(Frame::Close { .. })))
                {
                    self.state = State::Closed;
                }
            }
            _ => {}
        }
    }

    fn on_challenge(&mut self, now: u64, packet: &Packet<'_>) {
        for frame in packet.frames() {
            if let Ok(Frame::Cookie { cookie, credit }) = frame {
                self.cookie = Some(cookie);
                self.peer_credit = credit;
                self.state = State::Open;
                self.last_recv = now;
                self.pace_stamp = now;
                self.delivered_time = now;
                self.first_sent_time = now;
                if let Some(sent) = self.initial_sent_at.take() {
                    self.on_rtt_sample(now.saturating_sub(sent), 0);
                }
                self.events.push_back(Event::Connected);
                // Something must carry CONNECT even if the application has no data yet.
                self.probes = self.probes.max(1);
                return;
            }
        }
    }

    fn on_data_packet(&mut self, now: u64, pn: u64, packet: &Packet<'_>) {
        if self.recv_pns.contains(pn) {
            self.stats.duplicate_packets += 1;
            self.ack_now = true;
            self.ack_pending = true;
            return;
        }
        if self.role == Role::Client {
            self.confirmed = true;
        }
        let received_before = self.stats.stream_bytes_received;
        let mut eliciting = false;
        for frame in packet.frames() {
            let frame = match frame {
                Ok(f) => f,
                Err(e) => {
                    self.violation(now, CLOSE_PROTOCOL, format!("bad frame: {e}"));
                    return;
                }
            };
            match frame {
                Frame::Padding(_) => {}
                Frame::Ping | Frame::Connect { .. } => eliciting = true,
                Frame::Ack(ack) => {
                    if let Err(e) = self.on_ack_frame(now, &ack) {
                        self.violation(now, CLOSE_PROTOCOL, e);
                        return;
                    }
                }
                Frame::Stream {
                    stream,
                    offset,
                    data,
                } => {
                    eliciting = true;
                    if let Err((code, e)) = self.on_stream(stream, offset, data) {
                        self.violation(now, code, e);
                        return;
                    }
                    if self.stats.stream_bytes_received > received_before {
                        self.last_progress = now;
                    }
                }
                Frame::Credit(max) => {
                    eliciting = true;
                    self.peer_credit = self.peer_credit.max(max);
                }
                Frame::Close { code, reason } => {
                    let reason = reason.to_string();
                    self.state = State::Closed;
                    self.events
                        .push_back(Event::Closed(CloseReason::Peer { code, reason }));
                    return;
                }
                Frame::Hello { .. } | Frame::Cookie { .. } => {
                    self.violation(
                        now,
                        CLOSE_PROTOCOL,
                        "handshake frame in a data packet".into(),
                    );
                    return;
                }
            }
        }
        if pn >= self.ack_floor {
            self.recv_pns.insert(pn..pn + 1);
            self.recv_pns.keep_highest(MAX_ACK_RANGES);
            self.ack_pending = true;
        }
        match self.largest_recv {
            Some(l) if pn < l => self.ack_now |= eliciting,
            Some(l) if pn > l + 1 => {
                self.ack_now |= eliciting;
                self.largest_recv = Some(pn);
                self.largest_recv_time = now;
            }
            _ => {
                self.largest_recv = Some(pn);
                self.largest_recv_time = now;
            }
        }
        if eliciting {
            self.unacked_eliciting += 1;
            if self.unacked_eliciting >= self.config.ack_every {
                self.ack_now = true;
            } else if self.ack_deadline.is_none() {
                self.ack_deadline = Some(now + self.config.max_ack_delay_ns);
            }
        }
    }

    /// The peer has seen an ACK of ours reaching up to `largest`: stop reporting below it.
    fn on_ack_acked(&mut self, largest: u64) {
        if largest + 1 > self.ack_floor {
            self.ack_floor = largest + 1;
            self.recv_pns.remove_below(self.ack_floor.saturating_sub(1));
        }
    }
    /// Writes the next datagram to send into `buf` (which should hold `max_datagram` bytes) and
    /// returns its length, or `None` when nothing is due now.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<usize> {
        let buf_len = buf.len().min(self.config.max_datagram);
        let buf = &mut buf[..buf_len];
        match self.state {
            State::Closed => None,
            State::Initial { next, tries } => {
                if now < next {
                    return None;
                }
                let mut w = PacketWriter::new(
                    buf,
                    Header {
                        ty: PacketType::Initial,
                        cid: self.cid,
                        pn: u64::from(tries),
                    },
                )
                .ok()?;
                w.hello(u64::from(wire::VERSION));
                w.pad_to(wire::MIN_INITIAL_SIZE);
                let len = w.finish();
                let backoff = self.config.initial_rtt_ns.saturating_mul(2 << tries.min(6));
                self.state = State::Initial {
                    next: now + backoff,
                    tries: tries + 1,
                };
                self.initial_sent_at = (tries == 0).then_some(now);
                self.count_sent(len);
                Some(len)
            }
            State::Closing { .. } => {
                if self.close_sent {
                    return None;
                }
                let mut w = PacketWriter::new(buf, self.data_header()).ok()?;
                w.close(self.close_code, &self.close_reason);
                let len = w.finish();
                self.next_pn += 1;
                self.sent.push_back(self.untracked(now, len, None));
                self.close_sent = true;
                self.count_sent(len);
                Some(len)
            }
            State::Open => self.transmit_open(now, buf),
        }
    }

    /// When [`Connection::handle_timeout`] should be called next, if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Closed => None,
            State::Closing { until } => Some(until),
            State::Initial { next, .. } => Some(next),
            State::Open => {
                let mut t = self.last_recv + self.config.idle_timeout_ns;
                let mut consider = |x: Option<u64>| {
                    if let Some(x) = x {
                        t = t.min(x);
                    }
                };
                consider(self.loss_time.or(self.pto_time()));
                if self.ack_pending && !self.ack_now {
                    consider(self.ack_deadline);
                }
                consider(self.pace_wait);
                Some(t)
            }
        }
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        match self.state {
            State::Closed => {}
            State::Closing { until } => {
                if now >= until {
                    self.state = State::Closed;
                }
            }
            State::Initial { tries, .. } => {
                if tries >= MAX_INITIAL_TRIES {
                    self.state = State::Closed;
                    self.events
                        .push_back(Event::Closed(CloseReason::HandshakeTimeout));
                }
            }
            State::Open => {
                if now >= self.last_recv + self.config.idle_timeout_ns {
                    self.state = State::Closed;
                    self.events
                        .push_back(Event::Closed(CloseReason::IdleTimeout));
                    return;
                }
                if self.ack_deadline.is_some_and(|d| now >= d) {
                    self.ack_now = true;
                }
                if self.pace_wait.is_some_and(|w| now >= w) {
                    self.pace_wait = None;
                }
                if let Some(t) = self.loss_time {
                    if now >= t {
                        let lost = self.detect_lost(now);
                        if lost > 0 {
                            self.cc.on_loss(lost);
                        }
                        self.trim_sent(now);
                    }
                } else if let Some(t) = self.pto_time() {
                    if now >= t {
                        self.on_pto(now);
                    }
                }
            }
        }
    }
}
