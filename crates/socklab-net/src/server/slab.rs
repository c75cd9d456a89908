//! Connections of an event loop in a slab: a `Vec` of slots and a free list, addressed by a
//! token that carries the slot's generation, so an event or completion for a connection that
//! was closed (and whose slot was reused) is recognised as stale.

use std::time::{Duration, Instant};

/// Bits of the slot index in a token.
const INDEX_BITS: u32 = 32;
/// Generations wrap within 23 bits, so a token fits in 55 bits (the io_uring wrapper keeps
/// the top byte of its user data for the operation kind).
const GEN_MASK: u32 = (1 << 23) - 1;

/// A slab of `T` addressed by generation-checked tokens.
#[derive(Debug)]
pub(super) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

#[derive(Debug)]
struct Slot<T> {
    gen: u32,
    val: Option<T>,
}

impl<T> Slab<T> {
    pub fn new() -> Slab<T> {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    fn token(idx: u32, gen: u32) -> u64 {
        (u64::from(gen) << INDEX_BITS) | u64::from(idx)
    }

    fn split(token: u64) -> (usize, u32) {
        ((token & 0xffff_ffff) as usize, (token >> INDEX_BITS) as u32)
    }

    /// Stores `val`; returns its token.
    pub fn insert(&mut self, val: T) -> u64 {
        self.len += 1;
        if let Some(idx) = self.free.pop() {
            let slot = &mut self.slots[idx as usize];
            slot.val = Some(val);
            return Self::token(idx, slot.gen);
        }
        let idx = self.slots.len() as u32;
        self.slots.push(Slot {
            gen: 0,
            val: Some(val),
        });
        Self::token(idx, 0)
    }

    /// The value of `token`, unless it was removed since.
    pub fn get_mut(&mut self, token: u64) -> Option<&mut T> {
        let (idx, gen) = Self::split(token);
        self.slots
            .get_mut(idx)
            .filter(|s| s.gen == gen)
            .and_then(|s| s.val.as_mut())
    }

    /// Removes and returns the value of `token`.
    pub fn remove(&mut self, token: u64) -> Option<T> {
        let (idx, gen) = Self::split(token);
        let slot = self.slots.get_mut(idx).filter(|s| s.gen == gen)?;
        let val = slot.val.take()?;
        slot.gen = slot.gen.wrapping_add(1) & GEN_MASK;
        self.free.push(idx as u32);
        self.len -= 1;
        Some(val)
    }

    /// Appends to `out` the tokens of the values for which `f` is true.
    pub fn select(&self, out: &mut Vec<u64>, mut f: impl FnMut(&T) -> bool) {
        for (idx, s) in self.slots.iter().enumerate() {
            if let Some(v) = &s.val {
                if f(v) {
                    out.push(Self::token(idx as u32, s.gen));
                }
            }
        }
    }
}

/// When to sweep idle connections: every quarter of the timeout, between 10 ms and 1 s.
#[derive(Debug)]
pub(super) struct IdleSweep {
    timeout: Option<Duration>,
    every: Duration,
    next: Instant,
    /// Reused list of expired tokens.
    pub expired: Vec<u64>,
}

impl IdleSweep {
    pub fn new(timeout: Option<Duration>, now: Instant) -> IdleSweep {
        let every = timeout
            .map(|t| (t / 4).clamp(Duration::from_millis(10), Duration::from_secs(1)))
            .unwrap_or(Duration::from_secs(3600));
        IdleSweep {
            timeout,
            every,
            next: now + every,
            expired: Vec::new(),
        }
    }

    /// The idle timeout if a sweep is due at `now` (and schedules the next one).
    pub fn due(&mut self, now: Instant) -> Option<Duration> {
        let t = self.timeout?;
        if now < self.next {
            return None;
        }
        self.next = now + self.every;
        Some(t)
    }

    /// How long until the next sweep (for the wait timeout).
    pub fn until_next(&self, now: Instant) -> Option<Duration> {
        self.timeout
            .map(|_| self.next.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_tokens_miss_and_slots_are_reused() {
        let mut s = Slab::new();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!(s.len, 2);
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None);
        let c = s.insert("c");
        assert_ne!(a, c, "same slot, new generation");
        assert_eq!(a & 0xffff_ffff, c & 0xffff_ffff);
        assert!(s.get_mut(a).is_none());
        assert_eq!(s.get_mut(c), Some(&mut "c"));
        let mut out = Vec::new();
        s.select(&mut out, |v| *v == "b");
        assert_eq!(out, vec![b]);
        assert!(c < 1 << 56);
    }
}
