//! The crate's errors: [`ConfigError`] (settings refused by [`Config::validate`]),
//! [`WriteError`] ([`Connection::write`] refused data) and [`WireError`] (a datagram or frame
//! that does not decode, or a value the writer cannot encode).
//!
//! [`Config::validate`]: crate::Config::validate
//! [`Connection::write`]: crate::Connection::write

/// [`Config::validate`](crate::Config::validate) refused the settings: the message names the
/// setting and the range it must be in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `max_datagram` is outside `1200..=65507` (the value given).
    #[error("max datagram {0} bytes is outside 1200..=65507")]
    MaxDatagram(usize),
    /// `recv_window` or `send_buffer` is below 64 KiB.
    #[error("receive window and send buffer must be at least 64 KiB")]
    BuffersTooSmall {
        /// The receive window given (bytes).
        recv_window: u64,
        /// The send buffer given (bytes).
        send_buffer: usize,
    },
    /// `ack_every` or `initial_window_packets` is 0.
    #[error("ack_every and initial_window_packets must be at least 1")]
    ZeroCount {
        /// The `ack_every` given.
        ack_every: u32,
        /// The `initial_window_packets` given.
        initial_window_packets: u64,
    },
    /// `idle_timeout_ns` is below 1 ms or `initial_rtt_ns` is 0.
    #[error("idle timeout must be at least 1 ms and the initial RTT positive")]
    Timing {
        /// The idle timeout given (ns).
        idle_timeout_ns: u64,
        /// The initial RTT given (ns).
        initial_rtt_ns: u64,
    },
}

/// [`Connection::write`](crate::Connection::write) refused the data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The send buffer has less space than the data (see
    /// [`Connection::send_space`](crate::Connection::send_space)).
    #[error("send buffer full")]
    Full,
    /// The connection is closing or closed.
    #[error("connection closed")]
    Closed,
    /// Stream id at or above [`MAX_STREAMS`](crate::MAX_STREAMS), or offset beyond the varint
    /// range.
    #[error("stream id or offset out of range")]
    Invalid,
}

/// Why a datagram or a frame could not be decoded (or a value not encoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The datagram is shorter than [`MIN_PACKET_LEN`](crate::wire::MIN_PACKET_LEN), or a frame's fixed-size field or data
    /// runs past the end of the packet.
    #[error("packet truncated")]
    Truncated,
    /// The trailing CRC32C does not match.
    #[error("crc32c mismatch")]
    BadCrc,
    /// The version nibble is not [`VERSION`](crate::wire::VERSION) (the value is the nibble).
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// The packet type nibble is not 1, 2 or 3 (the value is the nibble).
    #[error("unknown packet type {0}")]
    UnknownPacketType(u8),
    /// A frame starts with an unknown type byte.
    #[error("unknown frame type 0x{0:02x}")]
    UnknownFrame(u8),
    /// A varint runs past the end of the packet.
    #[error("varint runs past the end of the packet")]
    BadVarint,
    /// An ACK frame's ranges go below packet number 0, or it announces more than
    /// [`MAX_ACK_RANGES`](crate::wire::MAX_ACK_RANGES) ranges.
    #[error("invalid ack ranges")]
    BadAckRanges,
    /// A STREAM frame's stream id does not fit in 32 bits.
    #[error("stream id {0} too large")]
    StreamIdTooLarge(u64),
    /// A STREAM frame's offset + length exceeds [`VARINT_MAX`](crate::wire::VARINT_MAX).
    #[error("stream offset + length too large")]
    OffsetOverflow,
    /// A CLOSE reason is not UTF-8.
    #[error("close reason is not utf-8")]
    BadUtf8,
    /// The buffer given to [`PacketWriter::new`](crate::wire::PacketWriter::new) cannot hold a
    /// header and the CRC.
    #[error("buffer too small for a packet")]
    BufferTooSmall,
    /// A value is too large: a packet number above [`VARINT_MAX`](crate::wire::VARINT_MAX) (writer) or a CLOSE reason
    /// longer than [`MAX_REASON_LEN`](crate::wire::MAX_REASON_LEN) (parser).
    #[error("value {0} too large")]
    ValueTooLarge(u64),
}
