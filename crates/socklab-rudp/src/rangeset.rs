//! [`RangeSet`]: a set of `u64` values stored as sorted, disjoint, non-adjacent half-open ranges.
//! Used for received packet numbers, received and acknowledged stream bytes. Inserting at the end
//! (the common case: data arrives mostly in order) is O(1).

use std::collections::BTreeMap;
use std::ops::Range;

/// A set of `u64` as sorted, disjoint, non-touching `start..end` ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> RangeSet {
        RangeSet::default()
    }

    /// True when the set holds no value.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Number of values in the set.
    pub fn total(&self) -> u64 {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }

    /// The smallest value, if any.
    pub fn min(&self) -> Option<u64> {
        self.ranges.first().map(|r| r.0)
    }

    /// One past the largest value, if any.
    pub fn end(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// Where the values from 0 stop being contiguous: the end of the first range when it
    /// starts at `floor`, else `floor`.
    pub fn contiguous_from(&self, floor: u64) -> u64 {
        match self.ranges.first() {
            Some(&(s, e)) if s <= floor => e.max(floor),
            _ => floor,
        }
    }

    /// Adds `range`; returns how many values were not in the set before.
    pub fn insert(&mut self, range: Range<u64>) -> u64 {
        let (start, end) = (range.start, range.end);
        if start >= end {
            return 0;
        }
        // Fast path: append or extend the last range.
        match self.ranges.last_mut() {
            None => {
                self.ranges.push((start, end));
                return end - start;
            }
            Some(last) if start > last.1 => {
                self.ranges.push((start, end));
                return end - start;
            }
            Some(last) if start >= last.0 => {
                let added = end.saturating_sub(last.1);
                last.1 = last.1.max(end);
                return added;
            }
            _ => {}
        }
        // General case: first range whose end >= start (it may touch or overlap).
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        // Ranges i..j touch or overlap [start, end].
        let j = self.ranges.partition_point(|&(s, _)| s <= end);
        if i == j {
            self.ranges.insert(i, (start, end));
            return end - start;
        }
        let covered: u64 = self.ranges[i..j]
            .iter()
            .map(|&(s, e)| e.min(end).saturating_sub(s.max(start)))
            .sum();
        let new_start = start.min(self.ranges[i].0);
        let new_end = end.max(self.ranges[j - 1].1);
        self.ranges[i] = (new_start, new_end);
        self.ranges.drain(i + 1..j);
        (end - start) - covered
    }

    /// True when `value` is in the set.
    pub fn contains(&self, value: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= value);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= value)
    }

    /// True when every value of `range` is in the set (an empty range is covered).
    pub fn covers(&self, range: Range<u64>) -> bool {
        if range.start >= range.end {
            return true;
        }
        let i = self.ranges.partition_point(|&(_, e)| e <= range.start);
        self.ranges
            .get(i)
            .is_some_and(|&(s, e)| s <= range.start && e >= range.end)
    }

    /// The first sub-range of `range` that is NOT in the set, if any.
    pub fn first_gap_in(&self, range: Range<u64>) -> Option<Range<u64>> {
        let mut start = range.start;
        if start >= range.end {
            return None;
        }
        let mut i = self.ranges.partition_point(|&(_, e)| e <= start);
        while let Some(&(s, e)) = self.ranges.get(i) {
            if s > start {
                return Some(start..s.min(range.end));
            }
            start = e;
            if start >= range.end {
                return None;
            }
            i += 1;
        }
        Some(start..range.end)
    }

    /// Removes every value below `floor`.
    pub fn remove_below(&mut self, floor: u64) {
        let i = self.ranges.partition_point(|&(_, e)| e <= floor);
        self.ranges.drain(..i);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(floor);
        }
    }

    /// Keeps at most `n` ranges, dropping the lowest ones.
    pub fn keep_highest(&mut self, n: usize) {
        if self.ranges.len() > n {
            let drop = self.ranges.len() - n;
            self.ranges.drain(..drop);
        }
    }

    /// The ranges, lowest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Range<u64>> + '_ {
        self.ranges.iter().map(|&(s, e)| s..e)
    }
}

/// The same kind of set as [`RangeSet`] (disjoint, non-touching `start..end` ranges) kept in a
/// `BTreeMap`, so that an insert anywhere costs O(log n) instead of moving the ranges above it.
/// For sets whose shape a peer decides: the stream bytes received, where a hostile sender can
/// send one-byte frames in descending order with gaps between them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeMap {
    /// start -> end.
    ranges: BTreeMap<u64, u64>,
}

impl RangeMap {
    /// An empty set.
    pub fn new() -> RangeMap {
        RangeMap::default()
    }

    /// Number of disjoint ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Adds `range`; returns how many values were not in the set before.
    pub fn insert(&mut self, range: Range<u64>) -> u64 {
        let (start, end) = (range.start, range.end);
        if start >= end {
            return 0;
        }
        // Fast path: at or after the start of the last range (data arriving in order).
        if let Some(mut last) = self.ranges.last_entry() {
            if start >= *last.key() {
                let last_end = *last.get();
                if start > last_end {
                    self.ranges.insert(start, end);
                    return end - start;
                }
                *last.get_mut() = last_end.max(end);
                return end.saturating_sub(last_end);
            }
        }
        let (mut new_start, mut new_end) = (start, end);
        let mut covered = 0;
        // The range starting at or below `start` that touches or overlaps it.
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e >= start {
                covered += e.min(end).saturating_sub(start);
                new_start = s;
                new_end = new_end.max(e);
                self.ranges.remove(&s);
            }
        }
        // The ranges starting inside `start..=end` (touching or overlapping).
        while let Some((&s, &e)) = self.ranges.range(start..=end).next() {
            covered += e.min(end).saturating_sub(s);
            new_end = new_end.max(e);
            self.ranges.remove(&s);
        }
        self.ranges.insert(new_start, new_end);
        (end - start) - covered
    }

    /// The first sub-range of `range` that is NOT in the set, if any.
    pub fn first_gap_in(&self, range: Range<u64>) -> Option<Range<u64>> {
        let mut start = range.start;
        if start >= range.end {
            return None;
        }
        // Fast path: beyond the last range (new data arriving in order).
        if self
            .ranges
            .last_key_value()
            .is_none_or(|(_, &e)| start >= e)
        {
            return Some(range);
        }
        if let Some((_, &e)) = self.ranges.range(..=start).next_back() {
            start = start.max(e);
        }
        if start >= range.end {
            return None;
        }
        // Ranges do not touch: the next one starts beyond `start`.
        let next = self.ranges.range(start..).next().map(|(&s, _)| s);
        Some(start..next.map_or(range.end, |s| s.min(range.end)))
    }

    /// The ranges, lowest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Range<u64>> + '_ {
        self.ranges.iter().map(|(&s, &e)| s..e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn insert_merges_and_counts_new_values() {
        let mut s = RangeSet::new();
        assert_eq!(s.insert(10..20), 10);
        assert_eq!(s.insert(30..40), 10);
        assert_eq!(s.insert(15..35), 10);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![10..40]);
        assert_eq!(s.insert(0..5), 5);
        assert_eq!(s.insert(5..10), 5);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..40]);
        assert_eq!(s.insert(0..40), 0);
        assert_eq!(s.contiguous_from(0), 40);
    }

    #[test]
    fn gaps_cover_and_prune() {
        let mut s = RangeSet::new();
        s.insert(0..10);
        s.insert(20..30);
        assert_eq!(s.first_gap_in(0..30), Some(10..20));
        assert_eq!(s.first_gap_in(5..10), None);
        assert_eq!(s.first_gap_in(25..50), Some(30..50));
        assert!(s.covers(20..30));
        assert!(!s.covers(5..25));
        s.remove_below(25);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![25..30]);
        s.insert(40..41);
        s.insert(50..51);
        s.keep_highest(2);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![40..41, 50..51]);
    }

    proptest! {
        #[test]
        fn matches_a_btreeset(ops in proptest::collection::vec((0u64..200, 0u64..20), 1..60), probe in 0u64..230) {
            let mut s = RangeSet::new();
            let mut model = BTreeSet::new();
            for (start, len) in ops {
                let before = model.len() as u64;
                model.extend(start..start + len);
                let added = s.insert(start..start + len);
                prop_assert_eq!(added, model.len() as u64 - before);
            }
            prop_assert_eq!(s.total(), model.len() as u64);
            prop_assert_eq!(s.contains(probe), model.contains(&probe));
            // Disjoint, sorted, non-touching.
            let r: Vec<_> = s.iter().collect();
            for w in r.windows(2) {
                prop_assert!(w[0].end < w[1].start);
            }
            let gap = s.first_gap_in(probe..probe + 10);
            let expected = (probe..probe + 10).find(|v| !model.contains(v));
            prop_assert_eq!(gap.map(|g| g.start), expected);
        }

        #[test]
        fn range_map_matches_range_set(
            ops in proptest::collection::vec((0u64..200, 0u64..20), 1..60),
            probes in proptest::collection::vec((0u64..230, 0u64..30), 1..20),
        ) {
            let mut set = RangeSet::new();
            let mut map = RangeMap::new();
            for (start, len) in ops {
                prop_assert_eq!(map.insert(start..start + len), set.insert(start..start + len));
                prop_assert_eq!(map.iter().collect::<Vec<_>>(), set.iter().collect::<Vec<_>>());
                prop_assert_eq!(map.range_count(), set.range_count());
            }
            for (start, len) in probes {
                prop_assert_eq!(map.first_gap_in(start..start + len), set.first_gap_in(start..start + len));
            }
        }
    }
}
