//! File data that arrives before the manifest is complete (rudp delivers unordered; a hostile
//! TCP client may send it on purpose), held until the manifest says where it goes.
//!
//! The bytes are copied into one growing buffer, and a chunk that continues the previous one
//! on the same stream only lengthens its index entry, so a flood of tiny chunks costs about
//! its payload, not one allocation each. What is counted is memory actually held — both
//! buffers by capacity — against a per-session limit and a [`MemoryBudget`] shared by every
//! session of the server; the count is given back when the chunks are replayed or dropped.

use std::sync::Arc;

use super::limits::MemoryBudget;
use super::TransferError;

/// One run of early bytes: `len` bytes of `stream` at `offset`, next in the buffer.
#[derive(Debug, Clone, Copy)]
struct Piece {
    stream: u32,
    len: u32,
    offset: u64,
}

/// Smallest buffer allocated, in bytes.
const MIN_ALLOC: usize = 4096;

/// Early chunks of one session.
#[derive(Debug)]
pub(crate) struct EarlyChunks {
    data: Vec<u8>,
    index: Vec<Piece>,
    /// Bytes taken from `budget` (always `self.held()`).
    charged: usize,
    per_session: usize,
    budget: Arc<MemoryBudget>,
}

impl EarlyChunks {
    pub(crate) fn new(per_session: usize, budget: Arc<MemoryBudget>) -> EarlyChunks {
        EarlyChunks {
            data: Vec::new(),
            index: Vec::new(),
            charged: 0,
            per_session,
            budget,
        }
    }

    /// Memory held: both buffers by capacity.
    pub(crate) fn held(&self) -> usize {
        self.data.capacity() + self.index.capacity() * std::mem::size_of::<Piece>()
    }

    /// Number of index entries (runs of contiguous bytes).
    #[cfg(test)]
    pub(crate) fn pieces(&self) -> usize {
        self.index.len()
    }

    fn refuse(&self, server: bool) -> TransferError {
        TransferError::Limit(if server {
            format!(
                "the server holds {} MiB of file data sent before manifests, its limit for all \
                 sessions: send the manifest first",
                self.budget.limit() >> 20
            )
        } else {
            format!(
                "more than {} MiB of memory held for file data before the manifest: send the \
                 manifest first",
                self.per_session >> 20
            )
        })
    }

    /// Grows `v` (by doubling, within the session's limit) so `extra` more elements fit,
    /// charging the budget first; `other` is what the other buffer holds.
    fn grow<T>(
        v: &mut Vec<T>,
        extra: usize,
        other: usize,
        per_session: usize,
        budget: &MemoryBudget,
        charged: &mut usize,
    ) -> Result<(), Option<bool>> {
        if v.capacity() - v.len() >= extra {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        let room = per_session.saturating_sub(other) / size;
        let need = v.len() + extra;
        if need > room {
            return Err(Some(false));
        }
        let cap = need
            .max(v.capacity().saturating_mul(2))
            .max(MIN_ALLOC / size)
            .min(room);
        let more = (cap - v.capacity()) * size;
        if !budget.try_take(more) {
            return Err(Some(true));
        }
        if v.try_reserve_exact(cap - v.len()).is_err() {
            budget.give_back(more);
            return Err(None);
        }
        *charged += more;
        // The allocator may hand out more than asked: count what is held.
        let actual = v.capacity() * size;
        if actual > cap * size {
            budget.force_take(actual - cap * size);
            *charged += actual - cap * size;
        }
        Ok(())
    }

    /// Keeps a copy of `data` (bytes of `stream` at `offset`), or says which limit it passes.
    pub(crate) fn push(
        &mut self,
        stream: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), TransferError> {
        if data.is_empty() {
            return Ok(());
        }
        let oom =
            || TransferError::Limit("out of memory buffering data before the manifest".into());
        let idx_bytes = self.index.capacity() * std::mem::size_of::<Piece>();
        Self::grow(
            &mut self.data,
            data.len(),
            idx_bytes,
            self.per_session,
            &self.budget,
            &mut self.charged,
        )
        .map_err(|e| e.map_or_else(oom, |s| self.refuse(s)))?;
        let continues = self.index.last().is_some_and(|p| {
            p.stream == stream
                && p.offset.checked_add(u64::from(p.len)) == Some(offset)
                && (p.len as usize)
                    .checked_add(data.len())
                    .is_some_and(|n| n <= u32::MAX as usize)
        });
        if !continues {
            let data_bytes = self.data.capacity();
            Self::grow(
                &mut self.index,
                1,
                data_bytes,
                self.per_session,
                &self.budget,
                &mut self.charged,
            )
            .map_err(|e| e.map_or_else(oom, |s| self.refuse(s)))?;
        }
        self.data.extend_from_slice(data);
        match self.index.last_mut() {
            Some(p) if continues => p.len += data.len() as u32,
            _ => self.index.push(Piece {
                stream,
                len: data.len() as u32,
                offset,
            }),
        }
        Ok(())
    }

    /// The runs held, in arrival order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u64, &[u8])> + '_ {
        let mut at = 0usize;
        self.index.iter().map(move |p| {
            let d = &self.data[at..at + p.len as usize];
            at += p.len as usize;
            (p.stream, p.offset, d)
        })
    }
}

impl Drop for EarlyChunks {
    fn drop(&mut self) {
        self.budget.give_back(self.charged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_early_chunks_coalesce_and_count_what_they_hold() {
        let budget = Arc::new(MemoryBudget::new(1 << 30));
        let mut e = EarlyChunks::new(1 << 20, budget.clone());
        // 100 000 contiguous one-byte chunks: one run, about 100 KB held.
        for i in 0..100_000u64 {
            e.push(1, i, &[i as u8]).unwrap();
        }
        assert_eq!(e.pieces(), 1);
        assert!(e.held() < 200_000, "{}", e.held());
        assert_eq!(budget.held(), e.held());
        // Scattered one-byte chunks cost their index entry too, and the limit counts it:
        // 1 MiB / (1 + 16) bytes is about 61 000 chunks, far from 1 Mi of payload.
        let mut e2 = EarlyChunks::new(1 << 20, budget.clone());
        let mut n = 0u64;
        let err = loop {
            match e2.push(2, n * 2, b"x") {
                Ok(()) => n += 1,
                Err(err) => break err,
            }
        };
        assert!(n > 30_000 && n < 70_000, "{n} chunks accepted");
        assert!(e2.held() <= 1 << 20, "{}", e2.held());
        assert!(err.to_string().contains("1 MiB of memory held"), "{err}");
        assert_eq!(budget.held(), e.held() + e2.held());
        let runs: Vec<_> = e.iter().map(|(s, o, d)| (s, o, d.len())).collect();
        assert_eq!(runs, vec![(1, 0, 100_000)]);
        assert_eq!(
            e2.iter().nth(7).map(|(s, o, d)| (s, o, d.to_vec())),
            Some((2, 14, b"x".to_vec()))
        );
        drop(e);
        drop(e2);
        assert_eq!(budget.held(), 0, "everything given back");
    }

    #[test]
    fn transfer_early_chunks_of_all_sessions_share_one_budget() {
        let budget = Arc::new(MemoryBudget::new(3 << 20));
        let mut sessions: Vec<EarlyChunks> = (0..4)
            .map(|_| EarlyChunks::new(1 << 30, budget.clone()))
            .collect();
        let chunk = vec![7u8; 64 * 1024];
        let mut refused = None;
        'fill: for round in 0..100u64 {
            for s in sessions.iter_mut() {
                if let Err(e) = s.push(1, round * chunk.len() as u64, &chunk) {
                    refused = Some(e);
                    break 'fill;
                }
            }
        }
        let e = refused.expect("the shared budget refuses");
        assert!(e.to_string().contains("3 MiB"), "{e}");
        assert!(budget.held() <= 3 << 20);
        sessions.clear();
        assert_eq!(budget.held(), 0);
    }
}
