//! sockperf's message header and framing, sans-IO.
//!
//! Every sockperf message (TCP or UDP, client or server) starts with a 14-byte header, all
//! fields big-endian (sockperf's `MsgHeader`, src/message.h, packed to 2 bytes):
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..8 | sequence number | u64, the client counts from 1 |
//! | 8..10 | flags | u16: 1 client, 2 pong request (reply wanted), 4 warm-up |
//! | 10..14 | length | u32, the whole message including this header |
//!
//! The rest of the message is padding of the client's choosing. A server answers a client
//! message that has the pong-request bit (and not the warm-up bit) by sending the whole
//! message back with the client bit cleared; it ignores every other message. Over TCP the
//! length field frames the stream; over UDP it must equal the datagram's size.

use std::fmt;

/// Header bytes (sockperf's `MsgHeader::EFFECTIVE_SIZE`), also the smallest message.
pub const HEADER_LEN: usize = 14;
/// Largest UDP message sockperf accepts (its `MAX_PAYLOAD_SIZE`, one IPv4 datagram).
pub const MAX_UDP_MESSAGE: usize = 65507;
/// Largest TCP message sockperf accepts (its `MAX_TCP_SIZE`, 1 MiB - 1).
pub const MAX_TCP_MESSAGE: usize = (1 << 20) - 1;

/// The message comes from a client.
pub const FLAG_CLIENT: u16 = 1;
/// The client wants this message answered (every `pp` message, some `ul` ones).
pub const FLAG_PONG: u16 = 2;
/// A warm-up message: never answered.
pub const FLAG_WARMUP: u16 = 4;

/// One message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sequence number.
    pub seq: u64,
    /// Flags ([`FLAG_CLIENT`], [`FLAG_PONG`], [`FLAG_WARMUP`]; other bits are kept as sent).
    pub flags: u16,
    /// Bytes in the whole message, header included.
    pub len: u32,
}

/// Why bytes are not a sockperf message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Fewer than [`HEADER_LEN`] bytes.
    Short {
        /// Bytes there were.
        got: usize,
    },
    /// The length field is below the header's size or above the limit.
    Length {
        /// The length field.
        len: u32,
        /// The largest length accepted here.
        max: usize,
    },
    /// A datagram whose size differs from its length field.
    Datagram {
        /// The length field.
        len: u32,
        /// The datagram's size.
        got: usize,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Short { got } => write!(
                f,
                "sockperf message of {got} bytes is shorter than its {HEADER_LEN}-byte header"
            ),
            WireError::Length { len, max } => write!(
                f,
                "sockperf header says {len} bytes: a message is {HEADER_LEN} to {max} bytes"
            ),
            WireError::Datagram { len, got } => write!(
                f,
                "sockperf header says {len} bytes but the datagram has {got}"
            ),
        }
    }
}

impl std::error::Error for WireError {}

impl Header {
    /// Parses the header at the start of `buf`, refusing a length outside
    /// [`HEADER_LEN`]`..=max`.
    pub fn parse(buf: &[u8], max: usize) -> Result<Header, WireError> {
        let Some(h) = buf.get(..HEADER_LEN) else {
            return Err(WireError::Short { got: buf.len() });
        };
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&h[..8]);
        let h = Header {
            seq: u64::from_be_bytes(seq),
            flags: u16::from_be_bytes([h[8], h[9]]),
            len: u32::from_be_bytes([h[10], h[11], h[12], h[13]]),
        };
        if (h.len as usize) < HEADER_LEN || h.len as usize > max {
            return Err(WireError::Length { len: h.len, max });
        }
        Ok(h)
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `out` (which must hold them).
    pub fn write(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.seq.to_be_bytes());
        out[8..10].copy_from_slice(&self.flags.to_be_bytes());
        out[10..HEADER_LEN].copy_from_slice(&self.len.to_be_bytes());
    }

    /// Whether a server answers this message: a client's pong request, not a warm-up.
    pub fn wants_reply(&self) -> bool {
        self.flags & (FLAG_CLIENT | FLAG_PONG | FLAG_WARMUP) == FLAG_CLIENT | FLAG_PONG
    }
}

/// Whether the first bytes a client sent are a sockperf client's message: a valid header
/// (length within `max`) with the client bit, no flag above the low byte, and a sequence
/// number below 2^56 (its first byte is 0). socklab's own ping-pong clients send printable
/// ASCII (never a NUL byte), so they are never taken for sockperf.
pub fn is_client_start(first: &[u8], max: usize) -> bool {
    match Header::parse(first, max) {
        Ok(h) => first[0] == 0 && h.flags & FLAG_CLIENT != 0 && h.flags >> 8 == 0,
        Err(_) => false,
    }
}

/// Answers one UDP datagram in place: `Ok(true)` when it is to be sent back (the client bit
/// is now cleared), `Ok(false)` when a server ignores it (no pong request, a warm-up, a
/// server's message).
pub fn answer_datagram(d: &mut [u8]) -> Result<bool, WireError> {
    let h = Header::parse(d, MAX_UDP_MESSAGE)?;
    if h.len as usize != d.len() {
        return Err(WireError::Datagram {
            len: h.len,
            got: d.len(),
        });
    }
    if !h.wants_reply() {
        return Ok(false);
    }
    d[9] &= !(FLAG_CLIENT as u8);
    Ok(true)
}

/// A TCP server's framing: fed the bytes of a connection as they come, it appends the
/// answers to send back. It holds at most one incomplete message (up to `max` bytes).
#[derive(Debug)]
pub struct Responder {
    pending: Vec<u8>,
    max: usize,
    /// Complete messages received.
    pub messages: u64,
    /// Messages answered.
    pub replies: u64,
}

impl Responder {
    /// A responder accepting messages of up to `max` bytes (at most [`MAX_TCP_MESSAGE`]).
    pub fn new(max: usize) -> Responder {
        Responder {
            pending: Vec::new(),
            max: max.min(MAX_TCP_MESSAGE),
            messages: 0,
            replies: 0,
        }
    }

    /// Takes the next bytes of the stream and appends to `out` the answer to every message
    /// they complete. A bad header is an error: the connection is to be closed.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), WireError> {
        self.pending.extend_from_slice(input);
        let mut pos = 0;
        let result = loop {
            let rest = &self.pending[pos..];
            if rest.len() < HEADER_LEN {
                break Ok(());
            }
            let h = match Header::parse(rest, self.max) {
                Ok(h) => h,
                Err(e) => break Err(e),
            };
            let len = h.len as usize;
            if rest.len() < len {
                break Ok(());
            }
            self.messages += 1;
            if h.wants_reply() {
                let at = out.len();
                out.extend_from_slice(&rest[..len]);
                out[at + 9] &= !(FLAG_CLIENT as u8);
                self.replies += 1;
            }
            pos += len;
        };
        self.pending.drain(..pos);
        if self.pending.is_empty() && self.pending.capacity() > 2 * MAX_UDP_MESSAGE {
            // A large message has passed: do not keep its buffer for the connection's life.
            self.pending = Vec::new();
        }
        result
    }
}

/// Builds a client's ping-pong message in place: header with `seq`, the client and
/// pong-request flags and `msg.len()` as length; the padding after it is left as it is.
pub fn stamp_client(msg: &mut [u8], seq: u64) {
    Header {
        seq,
        flags: FLAG_CLIENT | FLAG_PONG,
        len: msg.len() as u32,
    }
    .write(msg);
}

/// Checks a server's answer to the client message `msg`: same sequence number and length,
/// client bit cleared. The error is one line.
pub fn check_reply(msg: &[u8], reply: &[u8]) -> Result<(), String> {
    let sent = Header::parse(msg, MAX_TCP_MESSAGE).map_err(|e| e.to_string())?;
    let got = Header::parse(reply, MAX_TCP_MESSAGE).map_err(|e| e.to_string())?;
    if got.seq != sent.seq {
        return Err(format!(
            "answer carries sequence number {}, expected {}",
            got.seq, sent.seq
        ));
    }
    if got.len != sent.len || reply.len() != msg.len() {
        return Err(format!(
            "answer is {} bytes (header says {}), expected {}",
            reply.len(),
            got.len,
            sent.len
        ));
    }
    if got.flags & FLAG_CLIENT != 0 {
        return Err("answer still has the client flag: is that a sockperf server?".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first message of `sockperf pp --tcp -m 64`, captured on loopback (padding cut).
    const PP_FIRST: [u8; 14] = [0, 0, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0x40];

    fn msg(seq: u64, flags: u16, len: usize) -> Vec<u8> {
        let mut m = vec![0xa5; len];
        Header {
            seq,
            flags,
            len: len as u32,
        }
        .write(&mut m);
        m
    }

    #[test]
    fn the_captured_header_parses_and_is_rebuilt() {
        let h = Header::parse(&PP_FIRST, MAX_UDP_MESSAGE).unwrap();
        assert_eq!(
            h,
            Header {
                seq: 1,
                flags: FLAG_CLIENT | FLAG_PONG,
                len: 64
            }
        );
        assert!(h.wants_reply());
        let mut m = [0u8; 64];
        stamp_client(&mut m, 1);
        assert_eq!(m[..HEADER_LEN], PP_FIRST);
        assert!(is_client_start(&m, MAX_TCP_MESSAGE));
    }

    #[test]
    fn bad_headers_get_a_one_line_reason() {
        let e = Header::parse(&PP_FIRST[..5], 100).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sockperf message of 5 bytes is shorter than its 14-byte header"
        );
        let e = Header::parse(&msg(1, 3, 13 + 1)[..], 13).unwrap_err();
        assert_eq!(e, WireError::Length { len: 14, max: 13 });
        let mut tiny = PP_FIRST;
        tiny[13] = 13;
        let e = Header::parse(&tiny, MAX_UDP_MESSAGE).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sockperf header says 13 bytes: a message is 14 to 65507 bytes"
        );
        let mut d = msg(1, 3, 64);
        let e = answer_datagram(&mut d[..60]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sockperf header says 64 bytes but the datagram has 60"
        );
    }

    #[test]
    fn socklab_messages_are_never_taken_for_sockperf() {
        // Printable ASCII, as socklab pingpong sends: no NUL in the first byte.
        let m = b"00000001asdadqwDSDQWD13123ewadSADASDA";
        assert!(!is_client_start(m, MAX_TCP_MESSAGE));
        // A server's answer or a bare header without the client bit is no client either.
        assert!(!is_client_start(&msg(1, FLAG_PONG, 64), MAX_TCP_MESSAGE));
        assert!(!is_client_start(&msg(1, 0x103, 64), MAX_TCP_MESSAGE));
    }

    #[test]
    fn only_pong_requests_are_answered_with_the_client_bit_cleared() {
        let mut d = msg(7, FLAG_CLIENT | FLAG_PONG, 20);
        assert_eq!(answer_datagram(&mut d), Ok(true));
        assert_eq!(Header::parse(&d, 100).unwrap().flags, FLAG_PONG);
        for flags in [
            FLAG_CLIENT,
            FLAG_PONG,
            FLAG_CLIENT | FLAG_PONG | FLAG_WARMUP,
        ] {
            assert_eq!(
                answer_datagram(&mut msg(7, flags, 20)),
                Ok(false),
                "{flags}"
            );
        }
    }

    #[test]
    fn the_responder_frames_a_stream_split_anywhere() {
        // Under-load: three messages, only the middle one asks for a reply.
        let mut stream = msg(1, FLAG_CLIENT, 30);
        stream.extend(msg(2, FLAG_CLIENT | FLAG_PONG, 40));
        stream.extend(msg(3, FLAG_CLIENT, 14));
        let mut want = msg(2, FLAG_PONG, 40);
        want[HEADER_LEN..].fill(0xa5);
        for cut in 1..stream.len() {
            let mut r = Responder::new(MAX_TCP_MESSAGE);
            let mut out = Vec::new();
            for part in stream.chunks(cut) {
                r.feed(part, &mut out).unwrap();
            }
            assert_eq!(out, want, "chunks of {cut}");
            assert_eq!((r.messages, r.replies), (3, 1));
            assert!(r.pending.is_empty());
        }
    }

    #[test]
    fn the_responder_refuses_an_oversized_message_before_buffering_it() {
        let mut r = Responder::new(1000);
        let mut out = Vec::new();
        let e = r
            .feed(&msg(1, 3, 1001)[..HEADER_LEN], &mut out)
            .unwrap_err();
        assert_eq!(
            e,
            WireError::Length {
                len: 1001,
                max: 1000
            }
        );
        assert!(out.is_empty());
    }

    #[test]
    fn replies_are_checked() {
        let sent = msg(5, FLAG_CLIENT | FLAG_PONG, 64);
        let mut good = sent.clone();
        good[9] = FLAG_PONG as u8;
        assert_eq!(check_reply(&sent, &good), Ok(()));
        let e = check_reply(&sent, &sent).unwrap_err();
        assert!(e.contains("client flag"), "{e}");
        let e = check_reply(&sent, &msg(4, FLAG_PONG, 64)).unwrap_err();
        assert_eq!(e, "answer carries sequence number 4, expected 5");
    }
}
