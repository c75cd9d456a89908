//! The receive side of the streams: which bytes of each stream arrived, the ring of new data
//! waiting for [`Connection::read`], and the credit granted back to the peer as it is read.

use super::{Connection, Event, CLOSE_FLOW, CLOSE_PROTOCOL, MAX_STREAMS};

/// A piece of stream data returned by [`Connection::read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Stream id.
    pub stream: u32,
    /// Offset of the first byte within the stream.
    pub offset: u64,
    /// Bytes copied into the caller's buffer.
    pub len: usize,
}

impl Connection {
    /// Copies the next piece of received stream data into `buf` (at most `buf.len()` bytes of
    /// one chunk) and says where it belongs.
    pub fn read(&mut self, buf: &mut [u8]) -> Option<Chunk> {
        if buf.is_empty() {
            return None;
        }
        let (stream, offset, len) = self.ring_chunks.front_mut()?;
        let n = (*len).min(buf.len());
        let chunk = Chunk {
            stream: *stream,
            offset: *offset,
            len: n,
        };
        if n == *len {
            self.ring_chunks.pop_front();
        } else {
            *offset += n as u64;
            *len -= n;
        }
        let (a, b) = self.ring.as_slices();
        if n <= a.len() {
            buf[..n].copy_from_slice(&a[..n]);
        } else {
            buf[..a.len()].copy_from_slice(a);
            buf[a.len()..n].copy_from_slice(&b[..n - a.len()]);
        }
        self.ring.drain(..n);
        self.consumed += n as u64;
        let max = self.consumed + self.config.recv_window;
        if max - self.credit_sent >= self.config.recv_window / 8 {
            self.credit_pending = true;
        }
        Some(chunk)
    }

    pub(super) fn on_stream(
        &mut self,
        stream: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), (u64, String)> {
        if stream >= MAX_STREAMS {
            return Err((CLOSE_PROTOCOL, format!("stream id {stream} too large")));
        }
        if data.is_empty() {
            // Nothing to deliver, and no per-stream state for a peer to make us hold.
            return Ok(());
        }
        let end = offset + data.len() as u64;
        let received = self.recv_streams.entry(stream).or_default();
        let was_empty = self.ring_chunks.is_empty();
        let mut pos = offset;
        let mut added = 0u64;
        while let Some(gap) = received.first_gap_in(pos..end) {
            let n = gap.end - gap.start;
            if self.unique_received + n > self.credit_sent {
                return Err((CLOSE_FLOW, "peer sent beyond its credit".into()));
            }
            let a = (gap.start - offset) as usize;
            let b = (gap.end - offset) as usize;
            self.ring.extend(&data[a..b]);
            self.ring_chunks.push_back((stream, gap.start, b - a));
            self.unique_received += n;
            received.insert(gap.clone());
            pos = gap.end;
            added += n;
        }
        self.stats.stream_bytes_received += added;
        self.stats.duplicate_stream_bytes += (end - offset) - added;
        if added > 0 && was_empty {
            self.events.push_back(Event::Readable);
        }
        Ok(())
    }
}
