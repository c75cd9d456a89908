//! CoDel, RFC 8289, from its pseudocode (section 5 and appendix): at dequeue, a packet whose
//! sojourn time has stayed at or above `target` for `interval` (while more than one MTU is
//! queued) is dropped, and further drops follow at `interval / sqrt(count)` while the delay
//! stays above target. With `ecn`, an ECN-capable packet is marked instead of dropped and sent
//! (as Linux's `codel_dequeue`): the next drop or mark is scheduled as if it had been dropped.
//! The control law uses an exact square root (Linux approximates it with Newton steps).

use std::collections::VecDeque;

use super::{Ctx, Entry};
use crate::aqm::CodelConfig;

/// A queue CoDel takes packets from.
pub(crate) trait Backlog {
    /// Removes the head packet.
    fn pop(&mut self) -> Option<Entry>;
    /// Bytes queued (after the pop): the whole discipline's, as Linux's fq_codel passes.
    fn bytes(&self) -> u64;
    /// The largest packet seen (CoDel's `maxpacket`, the link's MTU in practice).
    fn maxpacket(&self) -> u64;
}

/// CoDel's state (RFC 8289's member variables).
#[derive(Debug, Clone, Default)]
pub(crate) struct CodelVars {
    /// When the delay will have been above target for an interval (0: it is below).
    first_above_time: u64,
    /// When the next drop is due while dropping.
    drop_next: u64,
    /// Drops since entering the dropping state.
    count: u32,
    /// `count` when the dropping state was last entered.
    lastcount: u32,
    /// In the dropping state.
    dropping: bool,
}

/// RFC 8289's `control_law`: `t + interval / sqrt(count)`.
pub(crate) fn control_law(t: u64, interval_ns: u64, count: u32) -> u64 {
    let step = interval_ns as f64 / f64::from(count.max(1)).sqrt();
    t.saturating_add(step as u64)
}

/// RFC 8289's `dodequeue`: the head packet and whether it is OK to drop.
fn dodequeue(
    v: &mut CodelVars,
    cfg: &CodelConfig,
    now: u64,
    q: &mut impl Backlog,
) -> (Option<Entry>, bool) {
    let Some(p) = q.pop() else {
        v.first_above_time = 0;
        return (None, false);
    };
    let sojourn = now.saturating_sub(p.arrival_ns);
    if sojourn < cfg.target_ns || q.bytes() <= q.maxpacket() {
        v.first_above_time = 0;
        (Some(p), false)
    } else if v.first_above_time == 0 {
        v.first_above_time = now.saturating_add(cfg.interval_ns);
        (Some(p), false)
    } else {
        (Some(p), now >= v.first_above_time)
    }
}

/// RFC 8289's `dequeue`, with ECN marking as Linux does.
pub(crate) fn codel_dequeue(
    v: &mut CodelVars,
    cfg: &CodelConfig,
    now: u64,
    q: &mut impl Backlog,
    ctx: &mut Ctx<'_>,
) -> Option<Entry> {
    let (mut p, ok) = dodequeue(v, cfg, now, q);
    if v.dropping {
        if !ok {
            // Sojourn time below target: leave the dropping state.
            v.dropping = false;
        }
        // Time for the next drop: drop the packet and take the next, for as long as drops
        // are due (a large backlog may need several at once).
        while v.dropping && now >= v.drop_next {
            let mut pk = p.take()?;
            v.count = v.count.saturating_add(1);
            if ctx.mark(now, &mut pk) {
                v.drop_next = control_law(v.drop_next, cfg.interval_ns, v.count);
                return Some(pk);
            }
            ctx.aqm_drop(now, pk);
            let (next, ok) = dodequeue(v, cfg, now, q);
            p = next;
            if !ok {
                v.dropping = false;
            } else {
                v.drop_next = control_law(v.drop_next, cfg.interval_ns, v.count);
            }
        }
    } else if ok {
        // The delay has been above target for an interval: drop (or mark) and enter the
        // dropping state.
        let mut pk = p.take()?;
        if ctx.mark(now, &mut pk) {
            p = Some(pk);
        } else {
            ctx.aqm_drop(now, pk);
            p = dodequeue(v, cfg, now, q).0;
        }
        v.dropping = true;
        // If the delay went above target soon after it last went below, start from the drop
        // rate that controlled it then (RFC 8289: the Linux version).
        let delta = v.count.saturating_sub(v.lastcount);
        v.count = 1;
        if delta > 1 && now.saturating_sub(v.drop_next) < 16 * cfg.interval_ns {
            v.count = delta;
        }
        v.drop_next = control_law(now, cfg.interval_ns, v.count);
        v.lastcount = v.count;
    }
    p
}

/// CoDel on one queue of at most `limit` packets (drop-tail beyond).
#[derive(Debug, Clone)]
pub(crate) struct Codel {
    cfg: CodelConfig,
    vars: CodelVars,
    q: VecDeque<Entry>,
    bytes: u64,
    maxpacket: u64,
    limit: usize,
}

struct One<'a> {
    q: &'a mut VecDeque<Entry>,
    bytes: &'a mut u64,
    maxpacket: u64,
}

impl Backlog for One<'_> {
    fn pop(&mut self) -> Option<Entry> {
        let e = self.q.pop_front()?;
        *self.bytes -= e.bytes.len() as u64;
        Some(e)
    }
    fn bytes(&self) -> u64 {
        *self.bytes
    }
    fn maxpacket(&self) -> u64 {
        self.maxpacket
    }
}

impl Codel {
    pub(crate) fn new(cfg: CodelConfig, limit: usize) -> Codel {
        Codel {
            cfg,
            vars: CodelVars::default(),
            q: VecDeque::new(),
            bytes: 0,
            maxpacket: 0,
            limit,
        }
    }

    pub(crate) fn enqueue(&mut self, now: u64, e: Entry, ctx: &mut Ctx<'_>) {
        if self.q.len() >= self.limit {
            ctx.queue_drop(now, e);
            return;
        }
        let len = e.bytes.len() as u64;
        self.maxpacket = self.maxpacket.max(len);
        self.bytes += len;
        self.q.push_back(e);
    }

    pub(crate) fn dequeue(&mut self, now: u64, ctx: &mut Ctx<'_>) -> Option<Entry> {
        let mut one = One {
            q: &mut self.q,
            bytes: &mut self.bytes,
            maxpacket: self.maxpacket,
        };
        codel_dequeue(&mut self.vars, &self.cfg, now, &mut one, ctx)
    }

    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_control_law_is_interval_over_the_square_root_of_count() {
        let i = 100_000_000;
        assert_eq!(control_law(0, i, 1), 100_000_000);
        assert_eq!(control_law(5, i, 4), 50_000_005);
        assert_eq!(control_law(0, i, 2), 70_710_678);
        assert_eq!(control_law(0, i, 100), 10_000_000);
        assert_eq!(control_law(u64::MAX - 1, i, 1), u64::MAX);
    }
}
