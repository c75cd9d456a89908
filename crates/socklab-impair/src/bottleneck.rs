//! The emulated bottleneck as a queue and a server, for what a release time computed on
//! arrival cannot express: a queue discipline that decides at dequeue (`aqm`), a capacity that
//! follows a trace or changes over time. Packets wait in the discipline; the server takes the
//! next one whenever it can send:
//!
//! - `rate` (constant or a schedule): one packet at a time, its transmission taking its length
//!   (plus `PACKETOVERHEAD`) at the rate in force; the next is taken when it is done;
//! - `trace`: at each delivery opportunity, [`crate::trace::OPPORTUNITY_BYTES`] bytes of the
//!   packets in order (Mahimahi's `LinkQueue::rationalize`).
//!
//! A packet leaves the bottleneck when its last bit is sent; the emulator then applies the
//! delay. The server's events at the same nanosecond as an arrival come before it (as in
//! Mahimahi: an opportunity at the arrival's instant is gone when the packet arrives).

use crate::qdisc::{Ctx, Entry, Qdisc};
use crate::rng::Rng;
use crate::schedule::RateSchedule;
use crate::trace::{Trace, OPPORTUNITY_BYTES};

/// How the bottleneck sends.
#[derive(Debug, Clone)]
pub(crate) enum Service {
    /// A constant rate, bits/s, and the per-packet overhead in bytes.
    Rate { bps: u64, overhead: i32 },
    /// A rate schedule and the per-packet overhead in bytes.
    Schedule {
        schedule: RateSchedule,
        overhead: i32,
    },
    /// Mahimahi delivery opportunities.
    Trace(Trace),
}

/// The discipline and its server.
#[derive(Debug, Clone)]
pub(crate) struct Bottleneck {
    qdisc: Qdisc,
    service: Service,
    origin: u64,
    /// When the server next acts: a transmission ends (rate) or an opportunity comes (trace).
    next: Option<u64>,
    /// Rate: the packet being sent (it leaves at `next`).
    sending: Option<Entry>,
    /// Trace: the next opportunity's index, and the packet partly sent with its bytes left.
    cursor: u64,
    partial: Option<(Entry, u64)>,
}

impl Bottleneck {
    pub(crate) fn new(qdisc: Qdisc, service: Service) -> Bottleneck {
        Bottleneck {
            qdisc,
            service,
            origin: 0,
            next: None,
            sending: None,
            cursor: 0,
            partial: None,
        }
    }

    /// The link starts at `origin`: the schedule's and the trace's time 0.
    pub(crate) fn start(&mut self, origin: u64) {
        self.origin = origin;
        self.qdisc.start(origin);
    }

    /// When the server next acts.
    pub(crate) fn next_event(&self) -> Option<u64> {
        self.next
    }

    /// Packets in the bottleneck (queued or being sent).
    pub(crate) fn held(&self) -> usize {
        self.qdisc.len() + usize::from(self.sending.is_some()) + usize::from(self.partial.is_some())
    }

    /// A packet arrives at `now`.
    pub(crate) fn enqueue(&mut self, now: u64, e: Entry, ctx: &mut Ctx<'_>, rng: &mut Rng) {
        self.qdisc.enqueue(now, e, ctx, rng);
        if self.next.is_none() && !self.qdisc.is_empty() {
            self.next = Some(match &self.service {
                Service::Rate { .. } | Service::Schedule { .. } => now,
                Service::Trace(t) => {
                    // The opportunities up to `now` are past (the emulator took them before
                    // this arrival): the next one after `now`.
                    let j = t.first_at_or_after(now.saturating_sub(self.origin).saturating_add(1));
                    self.cursor = self.cursor.max(j);
                    self.origin.saturating_add(t.opportunity_ns(self.cursor))
                }
            });
        }
    }

    /// Does what is due at `next_event()`; the packets that leave go to `out` with their time.
    pub(crate) fn step(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<(u64, Entry)>) {
        let Some(t) = self.next else { return };
        match &self.service {
            Service::Rate { .. } | Service::Schedule { .. } => {
                if let Some(e) = self.sending.take() {
                    out.push((t, e));
                }
                self.next = None;
                if let Some(mut e) = self.qdisc.dequeue(t, ctx) {
                    e.queued_ns = t.saturating_sub(e.arrival_ns);
                    ctx.log.stats.queued(e.queued_ns);
                    let done = self.transmitted(t, e.bytes.len());
                    self.sending = Some(e);
                    self.next = Some(done);
                }
            }
            Service::Trace(trace) => {
                let mut budget = OPPORTUNITY_BYTES;
                loop {
                    let (e, left) = match self.partial.take() {
                        Some(p) => p,
                        None => match self.qdisc.dequeue(t, ctx) {
                            Some(mut e) => {
                                e.queued_ns = t.saturating_sub(e.arrival_ns);
                                ctx.log.stats.queued(e.queued_ns);
                                let n = e.bytes.len() as u64;
                                (e, n)
                            }
                            None => break,
                        },
                    };
                    let sent = left.min(budget);
                    budget -= sent;
                    if left == sent {
                        out.push((t, e));
                    } else {
                        self.partial = Some((e, left - sent));
                    }
                    if budget == 0 {
                        break;
                    }
                }
                self.cursor += 1;
                self.next = (self.partial.is_some() || !self.qdisc.is_empty()).then(|| {
                    self.origin
                        .saturating_add(trace.opportunity_ns(self.cursor))
                });
            }
        }
    }

    /// When a packet of `len` bytes whose transmission starts at `start` is out.
    fn transmitted(&self, start: u64, len: usize) -> u64 {
        let bits = |overhead: i32| (len as i64 + i64::from(overhead)).max(0) as u64 * 8;
        match &self.service {
            Service::Rate { bps, overhead } => {
                let tx = u128::from(bits(*overhead)) * 1_000_000_000 / u128::from((*bps).max(1));
                start.saturating_add(u64::try_from(tx).unwrap_or(u64::MAX))
            }
            Service::Schedule { schedule, overhead } => {
                let rel = start.saturating_sub(self.origin);
                self.origin
                    .saturating_add(schedule.finish_ns(rel, bits(*overhead)))
            }
            Service::Trace(_) => start,
        }
    }
}
