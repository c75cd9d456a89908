//! socklab-rudp: a reliable transport over UDP as a sans-IO state machine.
//!
//! No sockets and no clock: [`Connection`] and [`Server`] take datagrams and times (ns) from the
//! caller and give back datagrams to send and the next time to call them (quinn-proto's shape).
//! Loss recovery follows QUIC (RFC 9002); congestion control is model-based ([`cc::Model`]) and
//! tells random loss from congestion. The packet format is in [`wire`] and `docs/rudp.md`.
#![forbid(unsafe_code)]

pub mod cc;
pub mod connection;
pub mod crc32c;
pub mod error;
pub mod rangeset;
pub mod server;
pub mod varint;
pub mod wire;

pub use connection::{
    Chunk, CloseReason, Config, Connection, Event, Stats, CLOSE_NO_PROGRESS, CLOSE_OK,
    CLOSE_SERVER_FULL, MAX_STREAMS,
};
pub use error::{ConfigError, WireError, WriteError};
pub use server::{Server, ServerAction};
