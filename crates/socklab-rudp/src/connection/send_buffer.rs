//! The send buffer: chunks the application wrote, which parts of them the peer acknowledged,
//! and where the next new data starts. Fully acknowledged chunks are freed from the front.

use crate::error::WriteError;
use crate::rangeset::RangeSet;
use crate::wire;

use super::{Connection, State, MAX_STREAMS};

#[derive(Debug, Clone, Copy)]
pub(super) struct DataRef {
    pub(super) chunk: u64,
    pub(super) start: u32,
    pub(super) len: u32,
}

#[derive(Debug)]
pub(super) struct SendChunk {
    pub(super) stream: u32,
    pub(super) offset: u64,
    pub(super) data: Vec<u8>,
    pub(super) acked: RangeSet,
}

impl Connection {
    /// True when every byte written has been acknowledged.
    pub fn all_acked(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Bytes [`Connection::write`] accepts now.
    pub fn send_space(&self) -> usize {
        self.config.send_buffer.saturating_sub(self.buffered)
    }

    /// Queues `data` for `stream` at `offset`: all of it or nothing (see [`Connection::send_space`]).
    pub fn write(&mut self, stream: u32, offset: u64, data: &[u8]) -> Result<(), WriteError> {
        if matches!(self.state, State::Closing { .. } | State::Closed) {
            return Err(WriteError::Closed);
        }
        if stream >= MAX_STREAMS || offset.saturating_add(data.len() as u64) > wire::VARINT_MAX {
            return Err(WriteError::Invalid);
        }
        if data.len() > self.send_space() {
            return Err(WriteError::Full);
        }
        if data.is_empty() {
            return Ok(());
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.chunks.push_back(SendChunk {
            stream,
            offset,
            data: buf,
            acked: RangeSet::new(),
        });
        self.buffered += data.len();
        Ok(())
    }

    pub(super) fn chunk_index(&self, seq: u64) -> Option<usize> {
        let idx = seq.checked_sub(self.chunk_base)? as usize;
        (idx < self.chunks.len()).then_some(idx)
    }

    pub(super) fn on_data_acked(&mut self, d: DataRef) {
        let Some(idx) = self.chunk_index(d.chunk) else {
            return;
        };
        let start = u64::from(d.start);
        self.chunks[idx]
            .acked
            .insert(start..start + u64::from(d.len));
        // Free fully acknowledged chunks at the front (their buffers are reused).
        while let Some(front) = self.chunks.front() {
            if !front.acked.covers(0..front.data.len() as u64) {
                break;
            }
            let chunk = self.chunks.pop_front().expect("front exists");
            self.buffered -= chunk.data.len();
            self.chunk_base += 1;
            if self.spare.len() < 8 {
                self.spare.push(chunk.data);
            }
        }
    }
    pub(super) fn has_new_data(&self) -> bool {
        match self.chunk_index(self.unsent_chunk) {
            Some(i) => self.unsent_pos < self.chunks[i].data.len(),
            None => false,
        }
    }

    pub(super) fn has_data(&self) -> bool {
        !self.retx.is_empty()
            || !self.retx_again.is_empty()
            || (self.has_new_data() && self.peer_credit_left() > 0)
    }
}
