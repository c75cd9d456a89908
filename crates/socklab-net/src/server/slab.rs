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

    /// Removes every value.
    pub fn take_all(&mut self) -> impl Iterator<Item = T> + '_ {
        self.free.clear();
        self.len = 0;
        self.slots.drain(..).filter_map(|s| s.val)
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
    expired: Vec<u64>,
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

    /// The tokens of the values of `slab` whose `last` progress is older than the timeout,
    /// when a sweep is due at `now` (none otherwise). Hand the list back with
    /// [`IdleSweep::done`] once they are closed.
    pub fn expired<T>(
        &mut self,
        now: Instant,
        slab: &Slab<T>,
        last: impl Fn(&T) -> Instant,
    ) -> Vec<u64> {
        let mut out = std::mem::take(&mut self.expired);
        let Some(t) = self.timeout.filter(|_| now >= self.next) else {
            return out;
        };
        self.next = now + self.every;
        slab.select(&mut out, |v| now.saturating_duration_since(last(v)) >= t);
        out
    }

    /// Takes back the list [`IdleSweep::expired`] gave (its memory is reused).
    pub fn done(&mut self, mut list: Vec<u64>) {
        list.clear();
        self.expired = list;
    }

    /// How long an event loop may wait at `now`: at most `tick`, less when the next sweep or
    /// `resume_at` comes sooner.
    pub fn wait_timeout(
        &self,
        now: Instant,
        tick: Duration,
        resume_at: Option<Instant>,
    ) -> Duration {
        let mut t = tick;
        if self.timeout.is_some() {
            t = t.min(self.next.saturating_duration_since(now));
        }
        if let Some(r) = resume_at {
            t = t.min(r.saturating_duration_since(now));
        }
        t
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

    #[test]
    fn idle_sweep_lists_only_the_expired_and_only_when_due() {
        let t0 = Instant::now();
        let mut s = Slab::new();
        let old = s.insert(t0);
        let _new = s.insert(t0 + Duration::from_millis(900));
        let mut sweep = IdleSweep::new(Some(Duration::from_secs(1)), t0);
        // Not due yet (every 250 ms).
        let none = sweep.expired(t0 + Duration::from_millis(100), &s, |v| *v);
        assert!(none.is_empty());
        sweep.done(none);
        let due = t0 + Duration::from_millis(1200);
        let list = sweep.expired(due, &s, |v| *v);
        assert_eq!(list, vec![old]);
        sweep.done(list);
        assert_eq!(
            sweep.wait_timeout(due, Duration::from_secs(5), None),
            Duration::from_millis(250)
        );
        assert_eq!(
            sweep.wait_timeout(
                due,
                Duration::from_secs(5),
                Some(due + Duration::from_millis(20))
            ),
            Duration::from_millis(20)
        );
        let never = IdleSweep::new(None, t0);
        assert_eq!(
            never.wait_timeout(t0, Duration::from_millis(100), None),
            Duration::from_millis(100)
        );
    }
}
