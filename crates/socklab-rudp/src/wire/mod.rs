//! The packet format: a [`Packet`] view over a received datagram (parse, check, iterate frames)
//! and a [`PacketWriter`] that emits one (as smoltcp's `wire`). See `docs/rudp.md`.
//!
//! ```text
//! datagram = type (1 byte: version << 4 | packet type) | cid (8 bytes, LE) | pn (varint)
//!            | frames ... | crc32c (4 bytes, LE, over everything before it)
//! ```
//! Varints are QUIC's (RFC 9000 §16): 1, 2, 4 or 8 bytes, the two top bits give the length.

use std::iter::FusedIterator;
use std::ops::RangeInclusive;

use crate::crc32c::crc32c;
pub use crate::error::WireError;
use crate::varint;

/// Protocol version carried in the high nibble of the first byte.
pub const VERSION: u8 = 1;
/// Initial packets are padded to at least this many bytes (the server's Challenge is smaller,
/// so a spoofed Initial cannot be amplified).
pub const MIN_INITIAL_SIZE: usize = 1200;
/// Length of the trailing CRC32C.
pub const CRC_LEN: usize = 4;
/// Length of a cookie.
pub const COOKIE_LEN: usize = 16;
/// Largest header: type + cid + 8-byte varint.
pub const MAX_HEADER_LEN: usize = 1 + 8 + 8;
/// Smallest datagram that can be a packet: type + cid + 1-byte pn + crc.
pub const MIN_PACKET_LEN: usize = 1 + 8 + 1 + CRC_LEN;
/// Largest value a varint holds (defined with the varint codec, below the wire format).
pub use crate::varint::VARINT_MAX;

/// Most ACK ranges [`PacketWriter::ack`] writes into one frame; a parsed ACK frame may announce
/// at most this many ranges after the first one (its `range_count` field).
pub const MAX_ACK_RANGES: usize = 256;
/// Longest CLOSE reason, in bytes.
pub const MAX_REASON_LEN: usize = 1024;

const FRAME_PADDING: u8 = 0x00;
const FRAME_PING: u8 = 0x01;
const FRAME_ACK: u8 = 0x02;
const FRAME_STREAM: u8 = 0x03;
const FRAME_CREDIT: u8 = 0x04;
const FRAME_CONNECT: u8 = 0x05;
const FRAME_CLOSE: u8 = 0x06;
const FRAME_HELLO: u8 = 0x07;
const FRAME_COOKIE: u8 = 0x08;

/// Offset of the connection id in a datagram, and its length.
const CID_AT: usize = 1;
const CID_LEN: usize = 8;

/// The kind of a packet (low nibble of its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketType {
    /// Client → server, the first packet of a connection: carries HELLO, padded to at least
    /// [`MIN_INITIAL_SIZE`] bytes.
    Initial = 1,
    /// Server → client, the stateless answer to an Initial: carries COOKIE.
    Challenge = 2,
    /// Everything else (both directions).
    Data = 3,
}

impl PacketType {
    fn from_bits(bits: u8) -> Option<PacketType> {
        match bits {
            1 => Some(PacketType::Initial),
            2 => Some(PacketType::Challenge),
            3 => Some(PacketType::Data),
            _ => None,
        }
    }
}

/// The decoded packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The packet type.
    pub ty: PacketType,
    /// The connection id (chosen by the client, random).
    pub cid: u64,
    /// The packet number (at most [`VARINT_MAX`]).
    pub pn: u64,
}

/// The connection id of a datagram without checking anything else (routing); `None` if it is
/// shorter than 9 bytes.
pub fn peek_cid(datagram: &[u8]) -> Option<u64> {
    let bytes = datagram.get(CID_AT..CID_AT + CID_LEN)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// A checked view of a received datagram: its header and its frames.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    header: Header,
    payload: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Checks length >= [`MIN_PACKET_LEN`], the CRC32C (last 4 bytes LE over all bytes before),
    /// version nibble == [`VERSION`], type, and decodes the header. Frames are decoded lazily by
    /// [`Packet::frames`].
    pub fn parse(datagram: &'a [u8]) -> Result<Packet<'a>, WireError> {
        if datagram.len() < MIN_PACKET_LEN {
            return Err(WireError::Truncated);
        }
        let (body, crc) = datagram.split_at(datagram.len() - CRC_LEN);
        let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32c(body) != crc {
            return Err(WireError::BadCrc);
        }
        let first = body[0];
        if first >> 4 != VERSION {
            return Err(WireError::BadVersion(first >> 4));
        }
        let ty = PacketType::from_bits(first & 0x0f)
            .ok_or(WireError::UnknownPacketType(first & 0x0f))?;
        let cid = peek_cid(body).ok_or(WireError::Truncated)?;
        let mut r = Reader {
            buf: &body[CID_AT + CID_LEN..],
        };
        let pn = r.varint()?;
        Ok(Packet {
            header: Header { ty, cid, pn },
            payload: r.buf,
        })
    }

    /// The decoded header.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The frames, undecoded: the bytes between the header and the CRC.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// An iterator over the decoded frames.
    pub fn frames(&self) -> Frames<'a> {
        Frames { rest: self.payload }
    }
}

/// Iterator over the frames of a packet ([`Packet::frames`]). It stops after the first error.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match parse_frame(self.rest) {
            Ok((frame, rest)) => {
                self.rest = rest;
                Some(Ok(frame))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

impl FusedIterator for Frames<'_> {}

/// A decoded frame. Slices and strings borrow from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A run of consecutive 0x00 bytes, reported as one frame with its length.
    Padding(usize),
    /// 0x01: asks for an acknowledgement.
    Ping,
    /// 0x02: acknowledged packet numbers.
    Ack(Ack<'a>),
    /// 0x03: stream data at `offset`.
    Stream {
        /// The stream id.
        stream: u32,
        /// Offset of `data[0]` in the stream.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// 0x04: flow control: the peer may send stream bytes up to this total.
    Credit(u64),
    /// 0x05: the client's proof of address (the server's cookie).
    Connect {
        /// The cookie from the Challenge.
        cookie: [u8; COOKIE_LEN],
    },
    /// 0x06: the connection is closed.
    Close {
        /// Application or transport error code.
        code: u64,
        /// Human-readable reason (at most [`MAX_REASON_LEN`] bytes).
        reason: &'a str,
    },
    /// 0x07: the client's protocol version (in an Initial).
    Hello {
        /// The version.
        version: u64,
    },
    /// 0x08: the server's stateless challenge (in a Challenge).
    Cookie {
        /// The cookie the client echoes in CONNECT.
        cookie: [u8; COOKIE_LEN],
        /// Initial flow-control credit.
        credit: u64,
    },
}

/// A decoded ACK frame. Its ranges were validated by the parser, so [`Ack::ranges`] cannot fail.
///
/// Two `Ack`s are equal when they acknowledge the same ranges with the same `largest` and
/// `delay_us`, however the varints were encoded.
#[derive(Debug, Clone, Copy, Eq)]
pub struct Ack<'a> {
    /// The largest acknowledged packet number.
    pub largest: u64,
    /// How long the receiver held the acknowledgement of `largest` back, in microseconds.
    pub delay_us: u64,
    first_range: u64,
    range_count: u64,
    encoded: &'a [u8],
}

impl<'a> Ack<'a> {
    /// The acknowledged packet-number ranges, highest first (as RFC 9000 §19.3.1: first range
    /// covers `largest-first_range..=largest`, then each (gap, len) pair:
    /// `next.hi = prev.lo - gap - 2`, `next.lo = next.hi - len`).
    pub fn ranges(&self) -> AckRanges<'a> {
        let lo = self.largest - self.first_range;
        AckRanges {
            next: Some(lo..=self.largest),
            left: self.range_count,
            encoded: self.encoded,
        }
    }
}

impl PartialEq for Ack<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.largest == other.largest
            && self.delay_us == other.delay_us
            && self.ranges().eq(other.ranges())
    }
}

/// Iterator over the ranges of an [`Ack`], highest first.
#[derive(Debug, Clone)]
pub struct AckRanges<'a> {
    next: Option<RangeInclusive<u64>>,
    left: u64,
    encoded: &'a [u8],
}

impl Iterator for AckRanges<'_> {
    type Item = RangeInclusive<u64>;

    fn next(&mut self) -> Option<RangeInclusive<u64>> {
        let current = self.next.take()?;
        if self.left > 0 {
            self.left -= 1;
            // Validated by the parser; a failure here only ends the iteration.
            let mut r = Reader { buf: self.encoded };
            if let (Ok(gap), Ok(len)) = (r.varint(), r.varint()) {
                self.encoded = r.buf;
                let hi = current
                    .start()
                    .checked_sub(gap)
                    .and_then(|v| v.checked_sub(2));
                self.next = hi.and_then(|hi| Some(hi.checked_sub(len)?..=hi));
            }
            if self.next.is_none() {
                self.left = 0;
            }
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.next.is_some() {
            1 + self.left as usize
        } else {
            0
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for AckRanges<'_> {}
impl FusedIterator for AckRanges<'_> {}

/// A cursor over the bytes of a packet.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, WireError> {
        let (v, n) = varint::read(self.buf).ok_or(WireError::BadVarint)?;
        self.buf = &self.buf[n..];
        Ok(v)
    }

    fn bytes(&mut self, n: u64) -> Result<&'a [u8], WireError> {
        let n = usize::try_from(n).map_err(|_| WireError::Truncated)?;
        if n > self.buf.len() {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn cookie(&mut self) -> Result<[u8; COOKIE_LEN], WireError> {
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(self.bytes(COOKIE_LEN as u64)?);
        Ok(cookie)
    }
}

/// Decodes the frame at the start of `buf` (not empty); returns it and the bytes after it.
fn parse_frame(buf: &[u8]) -> Result<(Frame<'_>, &[u8]), WireError> {
    let ty = buf[0];
    if ty == FRAME_PADDING {
        let n = buf.iter().take_while(|&&b| b == FRAME_PADDING).count();
        return Ok((Frame::Padding(n), &buf[n..]));
    }
    let mut r = Reader { buf: &buf[1..] };
    let frame = match ty {
        FRAME_PING => Frame::Ping,
        FRAME_ACK => Frame::Ack(parse_ack(&mut r)?),
        FRAME_STREAM => {
            let stream = r.varint()?;
            let stream = u32::try_from(stream).map_err(|_| WireError::StreamIdTooLarge(stream))?;
            let offset = r.varint()?;
            let len = r.varint()?;
            // Both are at most VARINT_MAX < 2^62: the sum cannot overflow a u64.
            if offset + len > VARINT_MAX {
                return Err(WireError::OffsetOverflow);
            }
            Frame::Stream {
                stream,
                offset,
                data: r.bytes(len)?,
            }
        }
        FRAME_CREDIT => Frame::Credit(r.varint()?),
        FRAME_CONNECT => Frame::Connect {
            cookie: r.cookie()?,
        },
        FRAME_CLOSE => {
            let code = r.varint()?;
            let len = r.varint()?;
            if len > MAX_REASON_LEN as u64 {
                return Err(WireError::ValueTooLarge(len));
            }
            let reason = std::str::from_utf8(r.bytes(len)?).map_err(|_| WireError::BadUtf8)?;
            Frame::Close { code, reason }
        }
        FRAME_HELLO => Frame::Hello {
            version: r.varint()?,
        },
        FRAME_COOKIE => {
            let cookie = r.cookie()?;
            Frame::Cookie {
                cookie,
                credit: r.varint()?,
            }
        }
        other => return Err(WireError::UnknownFrame(other)),
    };
    Ok((frame, r.buf))
}

/// Decodes and fully validates the body of an ACK frame.
fn parse_ack<'a>(r: &mut Reader<'a>) -> Result<Ack<'a>, WireError> {
    let largest = r.varint()?;
    let delay_us = r.varint()?;
    let range_count = r.varint()?;
    if range_count > MAX_ACK_RANGES as u64 {
        return Err(WireError::BadAckRanges);
    }
    let first_range = r.varint()?;
    let mut lo = largest
        .checked_sub(first_range)
        .ok_or(WireError::BadAckRanges)?;
    let start = r.buf;
    for _ in 0..range_count {
        let gap = r.varint()?;
        let len = r.varint()?;
        // gap <= VARINT_MAX, so gap + 2 cannot overflow.
        let hi = lo.checked_sub(gap + 2).ok_or(WireError::BadAckRanges)?;
        lo = hi.checked_sub(len).ok_or(WireError::BadAckRanges)?;
    }
    let encoded = &start[..start.len() - r.buf.len()];
    Ok(Ack {
        largest,
        delay_us,
        first_range,
        range_count,
        encoded,
    })
}

/// Emits one packet into a caller-provided buffer: header, frames, CRC. Nothing allocates.
///
/// The buffer's length is the largest datagram the writer produces; the CRC's 4 bytes are
/// reserved from the start, so frame methods can never leave too little room for it.
#[derive(Debug)]
pub struct PacketWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
    header_len: usize,
}

impl<'a> PacketWriter<'a> {
    /// Writes the header into buf; `Err(BufferTooSmall)` if buf cannot hold the header +
    /// [`CRC_LEN`]; `Err(ValueTooLarge)` if pn > [`VARINT_MAX`].
    pub fn new(buf: &'a mut [u8], header: Header) -> Result<PacketWriter<'a>, WireError> {
        if header.pn > VARINT_MAX {
            return Err(WireError::ValueTooLarge(header.pn));
        }
        let header_len = 1 + CID_LEN + varint::len(header.pn);
        if buf.len() < header_len + CRC_LEN {
            return Err(WireError::BufferTooSmall);
        }
        buf[0] = VERSION << 4 | header.ty as u8;
        buf[CID_AT..CID_AT + CID_LEN].copy_from_slice(&header.cid.to_le_bytes());
        let mut w = PacketWriter {
            buf,
            pos: CID_AT + CID_LEN,
            header_len,
        };
        w.put_varint(header.pn);
        debug_assert_eq!(w.pos, header_len);
        Ok(w)
    }

    /// Bytes still available for frames (the CRC's 4 bytes already reserved).
    pub fn remaining(&self) -> usize {
        self.end() - self.pos
    }

    /// Bytes written so far (header + frames, without CRC).
    pub fn len(&self) -> usize {
        self.pos
    }

    /// True when no frame has been written yet (only the header).
    pub fn is_empty(&self) -> bool {
        self.pos == self.header_len
    }

    /// Writes a PING frame.
    pub fn ping(&mut self) -> bool {
        if self.remaining() < 1 {
            return false;
        }
        self.put(&[FRAME_PING]);
        true
    }

    /// Writes a CREDIT frame (false, nothing written, if it does not fit or
    /// `max > VARINT_MAX`).
    pub fn credit(&mut self, max: u64) -> bool {
        self.type_and_varint(FRAME_CREDIT, max)
    }

    /// Writes a CONNECT frame.
    pub fn connect(&mut self, cookie: &[u8; COOKIE_LEN]) -> bool {
        if self.remaining() < 1 + COOKIE_LEN {
            return false;
        }
        self.put(&[FRAME_CONNECT]);
        self.put(cookie);
        true
    }

    /// Writes a CLOSE frame; `reason` is cut to at most [`MAX_REASON_LEN`] bytes at a char
    /// boundary (false, nothing written, if the frame does not fit or `code > VARINT_MAX`).
    pub fn close(&mut self, code: u64, reason: &str) -> bool {
        let mut n = reason.len().min(MAX_REASON_LEN);
        while !reason.is_char_boundary(n) {
            n -= 1;
        }
        let reason = &reason.as_bytes()[..n];
        let size = 1 + varint::len(code) + varint::len(n as u64) + n;
        if code > VARINT_MAX || size > self.remaining() {
            return false;
        }
        self.put(&[FRAME_CLOSE]);
        self.put_varint(code);
        self.put_varint(n as u64);
        self.put(reason);
        true
    }

    /// Writes a HELLO frame (false, nothing written, if it does not fit or
    /// `version > VARINT_MAX`).
    pub fn hello(&mut self, version: u64) -> bool {
        self.type_and_varint(FRAME_HELLO, version)
    }

    /// Writes a COOKIE frame (false, nothing written, if it does not fit or
    /// `credit > VARINT_MAX`).
    pub fn cookie(&mut self, cookie: &[u8; COOKIE_LEN], credit: u64) -> bool {
        if credit > VARINT_MAX || 1 + COOKIE_LEN + varint::len(credit) > self.remaining() {
            return false;
        }
        self.put(&[FRAME_COOKIE]);
        self.put(cookie);
        self.put_varint(credit);
        true
    }

    /// Bytes a STREAM frame header takes for these values (type + 3 varints).
    pub fn stream_overhead(stream: u32, offset: u64, len: usize) -> usize {
        1 + varint::len(u64::from(stream)) + varint::len(offset) + varint::len(len as u64)
    }

    /// Writes a STREAM frame with as much of `data` as fits (at least 1 byte); returns the
    /// number of data bytes written (0 = nothing written: no room for a byte, `data` empty, or
    /// `offset` at [`VARINT_MAX`]). The frame never ends beyond stream offset [`VARINT_MAX`].
    pub fn stream(&mut self, stream: u32, offset: u64, data: &[u8]) -> usize {
        if data.is_empty() || offset >= VARINT_MAX {
            return 0;
        }
        let avail = self.remaining();
        let fixed = 1 + varint::len(u64::from(stream)) + varint::len(offset);
        let limit = (data.len() as u64).min(VARINT_MAX - offset);
        // Try each width of the length varint: the largest n it can carry that fits.
        let mut n = 0u64;
        for (width, cap) in [
            (1, (1 << 6) - 1),
            (2, (1 << 14) - 1),
            (4, (1 << 30) - 1),
            (8, VARINT_MAX),
        ] {
            let Some(room) = avail.checked_sub(fixed + width) else {
                break;
            };
            n = n.max(limit.min(cap).min(room as u64));
        }
        if n == 0 {
            return 0;
        }
        let n = n as usize;
        self.put(&[FRAME_STREAM]);
        self.put_varint(u64::from(stream));
        self.put_varint(offset);
        self.put_varint(n as u64);
        self.put(&data[..n]);
        n
    }

    /// Writes an ACK frame with `largest`, `delay_us` and as many of `ranges` as fit (ranges:
    /// disjoint, descending, the first must end at `largest`; at most [`MAX_ACK_RANGES`] ranges
    /// written). Returns the number of ranges written (0 = nothing written).
    ///
    /// Ranges must also be non-adjacent (a gap of at least one packet number between two
    /// ranges, as RFC 9000's encoding requires). A range that breaks these rules ends the
    /// frame: the ranges before it are written; if the first range is invalid (or `largest` or
    /// `delay_us` exceed [`VARINT_MAX`]), nothing is written.
    pub fn ack(
        &mut self,
        largest: u64,
        delay_us: u64,
        mut ranges: impl Iterator<Item = RangeInclusive<u64>>,
    ) -> usize {
        let Some(first) = ranges.next() else {
            return 0;
        };
        if largest > VARINT_MAX
            || delay_us > VARINT_MAX
            || *first.end() != largest
            || first.start() > first.end()
        {
            return 0;
        }
        let first_range = largest - first.start();
        // The range count is written as a fixed 2-byte varint (non-minimal when < 64), patched
        // once the number of ranges that fit is known.
        let fixed = 1 + varint::len(largest) + varint::len(delay_us) + 2 + varint::len(first_range);
        if fixed > self.remaining() {
            return 0;
        }
        self.put(&[FRAME_ACK]);
        self.put_varint(largest);
        self.put_varint(delay_us);
        let count_at = self.pos;
        self.put(&[0x40, 0]);
        self.put_varint(first_range);
        let mut count = 0usize;
        let mut lo = *first.start();
        for r in ranges {
            if count + 1 >= MAX_ACK_RANGES {
                break;
            }
            let (start, end) = (*r.start(), *r.end());
            if start > end || end.checked_add(2).is_none_or(|e| e > lo) {
                break;
            }
            let (gap, len) = (lo - end - 2, end - start);
            if varint::len(gap) + varint::len(len) > self.remaining() {
                break;
            }
            self.put_varint(gap);
            self.put_varint(len);
            lo = start;
            count += 1;
        }
        self.buf[count_at] = 0x40 | (count >> 8) as u8;
        self.buf[count_at + 1] = count as u8;
        count + 1
    }

    /// Pads with PADDING bytes until len() + CRC_LEN == total (or the buffer is full).
    pub fn pad_to(&mut self, total: usize) {
        let target = total.saturating_sub(CRC_LEN).min(self.end());
        if target > self.pos {
            self.buf[self.pos..target].fill(FRAME_PADDING);
            self.pos = target;
        }
    }

    /// Appends the CRC32C and returns the datagram length.
    pub fn finish(self) -> usize {
        let crc = crc32c(&self.buf[..self.pos]);
        self.buf[self.pos..self.pos + CRC_LEN].copy_from_slice(&crc.to_le_bytes());
        self.pos + CRC_LEN
    }

    /// Where frames must end: the CRC follows.
    fn end(&self) -> usize {
        self.buf.len() - CRC_LEN
    }

    fn type_and_varint(&mut self, ty: u8, v: u64) -> bool {
        if v > VARINT_MAX || 1 + varint::len(v) > self.remaining() {
            return false;
        }
        self.put(&[ty]);
        self.put_varint(v);
        true
    }

    /// Appends bytes whose room was checked by the caller.
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    /// Appends a varint whose room (and range) was checked by the caller.
    fn put_varint(&mut self, v: u64) {
        let end = self.end();
        let n = varint::write(&mut self.buf[self.pos..end], v).expect("varint room checked");
        self.pos += n;
    }
}

#[cfg(test)]
mod tests;
