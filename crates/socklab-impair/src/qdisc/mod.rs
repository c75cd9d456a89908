//! The queue disciplines at the emulated bottleneck ([`crate::aqm::Aqm`]): drop-tail FIFO,
//! CoDel (RFC 8289), FQ-CoDel (RFC 8290) and PIE (RFC 8033), each implemented from its RFC's
//! pseudocode over packets stamped with their arrival time. They decide; the bottleneck's
//! server ([`crate::bottleneck`]) asks them for the next packet when it can send one.

pub(crate) mod codel;
pub(crate) mod fq_codel;
pub(crate) mod pie;

use std::collections::VecDeque;

use crate::aqm::Aqm;
use crate::event::{EventKind, Log};
use crate::rng::Rng;

/// A packet inside the emulator.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Its number (events name it).
    pub(crate) id: u64,
    /// When it arrived at the link.
    pub(crate) arrival_ns: u64,
    /// Time it waited at the bottleneck before its transmission started.
    pub(crate) queued_ns: u64,
    /// The packet.
    pub(crate) bytes: Vec<u8>,
}

/// What a queue discipline needs besides its packets: where to count and report, and whether
/// it may mark.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) log: &'a mut Log,
    /// `ecn`: mark ECN-capable packets instead of dropping them.
    pub(crate) ecn: bool,
    /// The packets are IP packets (false: UDP payloads of the udp-proxy driver, never marked).
    pub(crate) ip: bool,
}

impl Ctx<'_> {
    /// A drop decided by the discipline (not a full queue).
    pub(crate) fn aqm_drop(&mut self, now: u64, e: Entry) {
        self.log.stats.aqm_dropped += 1;
        let sojourn_ns = now.saturating_sub(e.arrival_ns);
        self.log
            .event(now, e.id, EventKind::AqmDropped { sojourn_ns });
    }

    /// A packet the queue had no room for.
    pub(crate) fn queue_drop(&mut self, now: u64, e: Entry) {
        self.log.stats.queue_dropped += 1;
        self.log.event(now, e.id, EventKind::QueueDropped);
    }

    /// Marks the packet CE instead of dropping it, when `ecn` is on and it is ECN-capable.
    pub(crate) fn mark(&mut self, now: u64, e: &mut Entry) -> bool {
        if !(self.ecn && self.ip && crate::ip::set_ce(&mut e.bytes)) {
            return false;
        }
        self.log.stats.aqm_marked += 1;
        let sojourn_ns = now.saturating_sub(e.arrival_ns);
        self.log
            .event(now, e.id, EventKind::AqmMarked { sojourn_ns });
        true
    }
}

/// Drop-tail: a packet arriving to `limit` queued packets is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Fifo {
    q: VecDeque<Entry>,
    limit: usize,
}

/// One of the queue disciplines.
#[derive(Debug, Clone)]
pub(crate) enum Qdisc {
    Fifo(Fifo),
    Codel(codel::Codel),
    FqCodel(fq_codel::FqCodel),
    Pie(pie::Pie),
}

impl Qdisc {
    /// `aqm` holding at most `limit` packets; `key` keys fq_codel's flow hash.
    pub(crate) fn new(aqm: &Aqm, limit: usize, key: u64) -> Qdisc {
        match aqm {
            Aqm::Fifo => Qdisc::Fifo(Fifo {
                q: VecDeque::new(),
                limit,
            }),
            Aqm::Codel(c) => Qdisc::Codel(codel::Codel::new(*c, limit)),
            Aqm::FqCodel(c) => Qdisc::FqCodel(fq_codel::FqCodel::new(*c, limit, key)),
            Aqm::Pie(c) => Qdisc::Pie(pie::Pie::new(*c, limit)),
        }
    }

    /// The link starts at `origin` (PIE's updates count from it).
    pub(crate) fn start(&mut self, origin: u64) {
        if let Qdisc::Pie(p) = self {
            p.start(origin);
        }
    }

    /// A packet arrives at `now` (it may be dropped; PIE draws from `rng`).
    pub(crate) fn enqueue(&mut self, now: u64, e: Entry, ctx: &mut Ctx<'_>, rng: &mut Rng) {
        match self {
            Qdisc::Fifo(f) => {
                if f.q.len() >= f.limit {
                    ctx.queue_drop(now, e);
                } else {
                    f.q.push_back(e);
                }
            }
            Qdisc::Codel(c) => c.enqueue(now, e, ctx),
            Qdisc::FqCodel(c) => c.enqueue(now, e, ctx),
            Qdisc::Pie(p) => p.enqueue(now, e, ctx, rng),
        }
    }

    /// The next packet to send at `now`, if any (the discipline may drop some first).
    pub(crate) fn dequeue(&mut self, now: u64, ctx: &mut Ctx<'_>) -> Option<Entry> {
        match self {
            Qdisc::Fifo(f) => f.q.pop_front(),
            Qdisc::Codel(c) => c.dequeue(now, ctx),
            Qdisc::FqCodel(c) => c.dequeue(now, ctx),
            Qdisc::Pie(p) => p.dequeue(now),
        }
    }

    /// Packets queued.
    pub(crate) fn len(&self) -> usize {
        match self {
            Qdisc::Fifo(f) => f.q.len(),
            Qdisc::Codel(c) => c.len(),
            Qdisc::FqCodel(c) => c.len(),
            Qdisc::Pie(p) => p.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
