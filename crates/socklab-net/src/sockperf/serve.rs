//! `socklab echo` answering sockperf clients: a TCP connection whose first read is a sockperf
//! client's message is served by [`tcp`] for the rest of its life (framed, answering only pong
//! requests); a UDP datagram that is one is answered by [`wire::answer_datagram`].

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use socklab_sys::ioerr::is_timeout;

use super::wire::{self, Responder};

/// How a sockperf connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End<E> {
    /// The client closed the connection.
    Complete,
    /// A bad header (its one-line reason) or an I/O error.
    Aborted(String),
    /// `gave_up` said so.
    GaveUp(E),
}

/// What a sockperf connection did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served<E> {
    /// How it ended.
    pub end: End<E>,
    /// Bytes received.
    pub bytes: u64,
    /// sockperf messages received.
    pub messages: u64,
}

/// Serves a TCP connection as sockperf's `sr` does, from its first read `buf[..first]` on:
/// messages up to `max` bytes, an answer to each pong request. `gave_up` says, when a read or
/// write timed out, whether the connection is to end (stop asked, idle too long).
pub fn tcp<E>(
    stream: &mut TcpStream,
    buf: &mut [u8],
    first: usize,
    max: usize,
    gave_up: &dyn Fn(Instant) -> Option<E>,
) -> Served<E> {
    let mut r = Responder::new(max);
    let mut out = Vec::new();
    let mut bytes = 0u64;
    let mut last = Instant::now();
    let mut n = first;
    let end = 'conn: loop {
        bytes += n as u64;
        out.clear();
        let before = r.messages;
        if let Err(e) = r.feed(&buf[..n], &mut out) {
            break End::Aborted(e.to_string());
        }
        // The idle clock moves with whole messages only, and is looked at after every read:
        // a client that trickles one message's bytes is given up at the idle timeout however
        // often it sends (issue 27 part 4).
        if r.messages > before {
            last = Instant::now();
        } else if let Some(end) = gave_up(last) {
            break End::GaveUp(end);
        }
        let mut off = 0;
        while off < out.len() {
            match stream.write(&out[off..]) {
                Ok(0) => break 'conn End::Aborted("write accepted 0 bytes".into()),
                Ok(k) => {
                    off += k;
                    last = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if let Some(end) = gave_up(last) {
                        break 'conn End::GaveUp(end);
                    }
                }
                Err(e) => break 'conn End::Aborted(e.to_string()),
            }
        }
        n = loop {
            match stream.read(buf) {
                Ok(0) => break 'conn End::Complete,
                Ok(k) => break k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if let Some(end) = gave_up(last) {
                        break 'conn End::GaveUp(end);
                    }
                }
                Err(e) => break 'conn End::Aborted(e.to_string()),
            }
        };
    };
    Served {
        end,
        bytes,
        messages: r.messages,
    }
}

/// Whether `first` (a connection's first read) starts a sockperf client's TCP stream.
pub fn is_sockperf_tcp(first: &[u8]) -> bool {
    wire::is_client_start(first, wire::MAX_TCP_MESSAGE)
}
