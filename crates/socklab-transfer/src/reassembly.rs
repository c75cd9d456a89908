//! Putting unordered chunks back in order ([`Ordered`]), and sets of byte ranges ([`RangeSet`]).

use std::collections::BTreeMap;

use super::TransferError;

/// Default bound on bytes buffered out of order by an [`Ordered`].
pub const DEFAULT_ORDERED_LIMIT: usize = 16 << 20;

/// Takes the unordered `(offset, bytes)` chunks of one stream (duplicated, overlapping, split
/// anywhere) and yields the contiguous prefix. Memory is bounded: buffering more than `limit`
/// bytes ahead of the prefix is an error.
#[derive(Debug)]
pub struct Ordered {
    /// Offset of the first byte not yet received contiguously.
    next: u64,
    /// Chunks beyond `next`, by offset.
    pending: BTreeMap<u64, Vec<u8>>,
    pending_bytes: usize,
    limit: usize,
    /// Contiguous bytes not yet taken by the consumer.
    ready: Vec<u8>,
}

impl Default for Ordered {
    fn default() -> Self {
        Ordered::new(DEFAULT_ORDERED_LIMIT)
    }
}

impl Ordered {
    /// A stream starting at offset 0 that buffers at most `limit` bytes out of order.
    pub fn new(limit: usize) -> Self {
        Ordered {
            next: 0,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            limit,
            ready: Vec::new(),
        }
    }

    /// Adds one chunk. Bytes already received are ignored.
    pub fn push(&mut self, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        let end = offset.checked_add(data.len() as u64).ok_or_else(|| {
            TransferError::Protocol(format!(
                "chunk at offset {offset} of {} bytes passes 2^64",
                data.len()
            ))
        })?;
        if end <= self.next {
            return Ok(());
        }
        if offset <= self.next {
            self.ready
                .extend_from_slice(&data[(self.next - offset) as usize..]);
            self.next = end;
            self.drain_pending();
            return Ok(());
        }
        let old = self.pending.get(&offset).map_or(0, Vec::len);
        if old >= data.len() {
            return Ok(());
        }
        if self.pending_bytes - old + data.len() > self.limit {
            return Err(TransferError::Limit(format!(
                "more than {} MiB buffered out of order on one stream (waiting for offset {})",
                self.limit >> 20,
                self.next
            )));
        }
        self.pending_bytes = self.pending_bytes - old + data.len();
        self.pending.insert(offset, data.to_vec());
        Ok(())
    }

    fn drain_pending(&mut self) {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let off = *entry.key();
            let data = entry.remove();
            self.pending_bytes -= data.len();
            let end = off + data.len() as u64;
            if end > self.next {
                self.ready
                    .extend_from_slice(&data[(self.next - off) as usize..]);
                self.next = end;
            }
        }
    }

    /// Contiguous bytes not yet taken.
    pub fn ready(&self) -> &[u8] {
        &self.ready
    }

    /// Takes the contiguous bytes received so far (they are not returned again).
    pub fn take_ready(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.ready)
    }

    /// End of the contiguous prefix: every byte below it has arrived.
    pub fn contiguous_end(&self) -> u64 {
        self.next
    }

    /// Bytes buffered out of order.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Largest offset + 1 seen in any chunk, or the contiguous end.
    pub fn highest_end(&self) -> u64 {
        self.pending
            .last_key_value()
            .map_or(self.next, |(k, v)| (k + v.len() as u64).max(self.next))
    }
}

/// A set of disjoint, non-adjacent byte ranges `start..end`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    map: BTreeMap<u64, u64>,
    total: u64,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `start..end`; returns how many bytes were not in the set before.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let mut s = start;
        let mut e = end;
        if let Some((&ps, &pe)) = self.map.range(..=start).next_back() {
            if pe >= start {
                s = ps;
            }
        }
        let mut removed = 0;
        while let Some((&k, &v)) = self.map.range(s..).next() {
            if k > e {
                break;
            }
            self.map.remove(&k);
            removed += v - k;
            e = e.max(v);
        }
        self.map.insert(s, e);
        let added = (e - s) - removed;
        self.total += added;
        added
    }

    /// Total bytes in the set.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// True when no byte is in the set.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Number of disjoint ranges.
    pub fn range_count(&self) -> usize {
        self.map.len()
    }

    /// True when every byte of `start..end` is in the set.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        start >= end || self.containing(start).is_some_and(|(_, e)| e >= end)
    }

    /// The range holding byte `pos`, if any.
    pub fn containing(&self, pos: u64) -> Option<(u64, u64)> {
        self.map
            .range(..=pos)
            .next_back()
            .filter(|(_, &e)| e > pos)
            .map(|(&s, &e)| (s, e))
    }

    /// Start of the first range at or after `pos`.
    pub fn next_start(&self, pos: u64) -> Option<u64> {
        self.map.range(pos..).next().map(|(&s, _)| s)
    }

    /// The parts of `start..end` not in the set, into `out` (cleared first).
    pub fn gaps(&self, start: u64, end: u64, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let mut pos = start;
        if let Some((_, e)) = self.containing(pos) {
            pos = e;
        }
        for (&s, &e) in self.map.range(pos..) {
            if pos >= end || s >= end {
                break;
            }
            if s > pos {
                out.push((pos, s));
            }
            pos = pos.max(e);
        }
        if pos < end {
            out.push((pos, end));
        }
    }

    /// The ranges, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;
    use proptest::prelude::*;

    #[test]
    fn transfer_ordered_reassembles_shuffled_duplicated_splits() {
        let mut rng = Rng(7);
        for round in 0..50 {
            let n = 1 + rng.below(5000) as usize;
            let data = rng.bytes(n);
            let mut chunks = Vec::new();
            let mut off = 0;
            while off < data.len() {
                let n = 1 + rng.below(300) as usize;
                let end = (off + n).min(data.len());
                chunks.push((off, end));
                // Duplicates, some split differently.
                if rng.below(4) == 0 {
                    let mid = off + rng.below((end - off) as u64) as usize;
                    chunks.push((mid, end));
                }
                off = end;
            }
            rng.shuffle(&mut chunks);
            let mut o = Ordered::new(1 << 20);
            let mut got = Vec::new();
            for (s, e) in chunks {
                o.push(s as u64, &data[s..e]).unwrap();
                got.extend(o.take_ready());
            }
            assert_eq!(got, data, "round {round}");
            assert_eq!(o.pending_bytes(), 0);
            assert_eq!(o.contiguous_end(), data.len() as u64);
        }
    }

    #[test]
    fn transfer_ordered_is_bounded() {
        let mut o = Ordered::new(1000);
        o.push(10, &[0; 600]).unwrap();
        o.push(10, &[0; 600]).unwrap(); // a duplicate costs nothing
        let e = o.push(2000, &[0; 500]).unwrap_err().to_string();
        assert!(e.contains("buffered out of order"), "{e}");
        assert!(o.push(u64::MAX, &[1]).is_err());
        o.push(0, &[1; 10]).unwrap();
        assert_eq!(o.ready().len(), 610);
        assert_eq!(o.pending_bytes(), 0);
    }

    #[test]
    fn transfer_range_set_merges() {
        let mut r = RangeSet::new();
        assert_eq!(r.insert(10, 20), 10);
        assert_eq!(r.insert(30, 40), 10);
        assert_eq!(r.insert(15, 35), 10);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(10, 40)]);
        assert_eq!(r.insert(40, 41), 1);
        assert_eq!(r.insert(0, 5), 5);
        assert_eq!(r.range_count(), 2);
        assert_eq!(r.len(), 36);
        let mut g = Vec::new();
        r.gaps(0, 50, &mut g);
        assert_eq!(g, vec![(5, 10), (41, 50)]);
        r.gaps(12, 30, &mut g);
        assert!(g.is_empty());
        assert!(r.covers(10, 41) && !r.covers(9, 12));
        assert_eq!(r.containing(40), Some((10, 41)));
        assert_eq!(r.next_start(6), Some(10));
    }

    proptest! {
        #[test]
        fn transfer_range_set_matches_a_bitmap(ops in proptest::collection::vec((0u64..200, 0u64..40), 0..40)) {
            let mut r = RangeSet::new();
            let mut bits = [false; 256];
            for (s, n) in ops {
                let before = bits.iter().filter(|b| **b).count() as u64;
                let added = r.insert(s, s + n);
                for b in &mut bits[s as usize..(s + n) as usize] { *b = true; }
                let after = bits.iter().filter(|b| **b).count() as u64;
                prop_assert_eq!(added, after - before);
            }
            prop_assert_eq!(r.len(), bits.iter().filter(|b| **b).count() as u64);
            let mut g = Vec::new();
            r.gaps(0, 256, &mut g);
            let mut gap_bits = [false; 256];
            for (s, e) in &g { for b in &mut gap_bits[*s as usize..*e as usize] { *b = true; } }
            for i in 0..256 { prop_assert_eq!(gap_bits[i], !bits[i]); }
            // Ranges are disjoint and non-adjacent.
            let v: Vec<_> = r.iter().collect();
            for w in v.windows(2) { prop_assert!(w[0].1 < w[1].0); }
        }
    }
}
