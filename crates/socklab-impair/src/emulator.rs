//! [`Emulator`]: one direction of an impaired link, driven by the caller's clock.

use std::collections::{BTreeMap, VecDeque};

use crate::bottleneck::{Bottleneck, Service};
use crate::event::{Event, EventKind, Log};
use crate::loss::LossModel;
use crate::qdisc::{Ctx, Entry, Qdisc};
use crate::rng::{chance, prob_to_u32, splitmix64, CorrelatedRandom, Rng};
use crate::slot::SlotGate;
use crate::spec::LinkSpec;
pub use crate::stats::Stats;

/// Queue key: release time, then class (0 = sent immediately by `reorder`,
/// which netem puts at the head of its queue), then order within the class: the packet's
/// number (reversed for class 0: the last requeued goes first, as netem's head insertion).
type Key = (u64, u8, u64);

/// The packet number a key carries.
fn key_id(k: &Key) -> u64 {
    if k.1 == 0 {
        u64::MAX - k.2
    } else {
        k.2
    }
}

/// One direction of a link with netem's impairments. Pure: no I/O and no
/// clock; all times are nanoseconds supplied by the caller, and all
/// randomness comes from the seed, so the same seed, spec and call sequence
/// give the same output on every platform.
///
/// Order of decisions per packet (as netem's `netem_enqueue`): duplicate,
/// loss (with `ecn`: a mark instead, for an ECN-capable packet), corrupt (the
/// original only; the copy is made before corruption), then for each copy:
/// queue limit, reorder, delay (+ rate).
///
/// The queue limit counts packets whose release time is still in the future
/// (packets already due count as having left the link, whether or not the
/// caller has polled them yet; with `slot`, every packet not yet let through).
///
/// With an `aqm` other than drop-tail, a `trace` or a rate schedule, each copy first
/// crosses the bottleneck ([`crate::bottleneck`]: the queue discipline holding at most
/// `limit` packets, served at the rate or the trace's opportunities), then reorder and delay
/// apply as it leaves. With `slot`, packets due leave in slots ([`crate::slot`]). Both make
/// decisions at times of their own (a dequeue, an opportunity, a slot): [`Emulator::poll_timeout`]
/// names the next such time too, and they are taken at their own times whenever the caller
/// polls, so the output depends on the arrivals and the seed, not on when the caller polls.
#[derive(Debug, Clone)]
pub struct Emulator {
    spec: LinkSpec,
    rng: Rng,
    loss: LossModel,
    delay_cor: CorrelatedRandom,
    reorder_cor: CorrelatedRandom,
    dup_p: u32,
    corrupt_p: u32,
    reorder_p: u32,
    reorder_counter: u64,
    last_release: u64,
    /// Packets and their release times (netem's tfifo).
    /// (Only the packet: its number is in the key, and the plain path moves it in and out of
    /// the tree once per packet.)
    queue: BTreeMap<Key, Vec<u8>>,
    /// The bottleneck, before the delay (aqm, trace, rate schedule).
    bottleneck: Option<Box<Bottleneck>>,
    /// Random decisions taken as packets leave the bottleneck (reorder, delay).
    depart_rng: Rng,
    /// `slot`: the gate after `queue`, and the packets it let through (with their times).
    gate: Option<Box<SlotGate>>,
    passed: VecDeque<(u64, u64, Vec<u8>)>,
    /// While observed: each packet's wait at the bottleneck, for its `Released` event.
    waits: crate::event::PacketMap<u64, u64>,
    /// The first packet's arrival: time 0 of a trace, a schedule, slots and PIE's updates.
    origin: Option<u64>,
    next_id: u64,
    /// The packets are IP packets (false: UDP payloads, see [`Emulator::udp_payloads`]).
    ip: bool,
    /// A bottleneck or slots: decisions of their own to take.
    internal: bool,
    log: Log,
    departures: Vec<(u64, Entry)>,
}

impl Emulator {
    /// An emulator for `spec` whose random decisions are determined by `seed`.
    pub fn new(spec: LinkSpec, seed: u64) -> Emulator {
        // Streams of their own for the bottleneck's and the slots' decisions, so that the
        // arrival-time decisions draw the same values as without them.
        let mut sm = seed ^ 0x6a09_e667_f3bc_c908;
        let (k_flow, k_slot, k_depart) = (
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        );
        let service = if let Some(t) = &spec.trace {
            Some(Service::Trace(t.clone()))
        } else if let Some(s) = &spec.rate_schedule {
            Some(Service::Schedule {
                schedule: s.clone(),
                overhead: spec.overhead_bytes,
            })
        } else {
            spec.rate_bps.map(|bps| Service::Rate {
                bps,
                overhead: spec.overhead_bytes,
            })
        };
        let bottleneck = service.filter(|_| spec.needs_bottleneck()).map(|s| {
            Box::new(Bottleneck::new(
                Qdisc::new(&spec.aqm, spec.limit, k_flow),
                s,
            ))
        });
        let gate = spec
            .slot
            .filter(|s| s.is_active())
            .map(|s| Box::new(SlotGate::new(s, k_slot)));
        let internal = bottleneck.is_some() || gate.is_some();
        Emulator {
            rng: Rng::new(seed),
            loss: LossModel::new(spec.loss),
            delay_cor: CorrelatedRandom::new(spec.delay_correlation),
            reorder_cor: CorrelatedRandom::new(spec.reorder_correlation),
            dup_p: prob_to_u32(spec.duplicate),
            corrupt_p: prob_to_u32(spec.corrupt),
            reorder_p: prob_to_u32(spec.reorder.map_or(0.0, |r| r.0)),
            reorder_counter: 0,
            last_release: 0,
            queue: BTreeMap::new(),
            bottleneck,
            depart_rng: Rng::new(k_depart),
            gate,
            passed: VecDeque::new(),
            waits: Default::default(),
            origin: None,
            next_id: 0,
            ip: true,
            internal,
            log: Log::default(),
            departures: Vec::new(),
            spec,
        }
    }

    /// The packets are UDP payloads (the udp-proxy driver relays datagrams), not IP packets:
    /// fq_codel puts them all in one flow and nothing marks them ECN (they are dropped
    /// instead, as packets that are not ECN-capable).
    pub fn udp_payloads(mut self) -> Emulator {
        self.ip = false;
        self
    }

    /// The spec this emulator models.
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// Records an [`Event`] for every decision from now on (`true`), or stops and forgets the
    /// events not yet taken (`false`). Off (the default) the emulator pays one untaken branch
    /// per decision.
    pub fn observe(&mut self, on: bool) {
        match (on, &self.log.events) {
            (true, None) => self.log.events = Some(Vec::new()),
            (false, _) => {
                self.log.events = None;
                self.waits = Default::default();
            }
            (true, Some(_)) => {}
        }
    }

    /// The events recorded since the last call, oldest first (see [`Emulator::observe`]).
    pub fn drain_events(&mut self) -> impl Iterator<Item = Event> + '_ {
        self.log.events.iter_mut().flat_map(|v| v.drain(..))
    }

    #[inline]
    fn internal(&self) -> bool {
        self.internal
    }

    fn start(&mut self, now: u64) {
        self.origin = Some(now);
        if let Some(b) = &mut self.bottleneck {
            b.start(now);
        }
        if let Some(g) = &mut self.gate {
            g.start(now);
        }
    }

    /// A packet arrives at the link at `now_ns`.
    pub fn enqueue(&mut self, now_ns: u64, mut packet: Vec<u8>) {
        if self.origin.is_none() {
            self.start(now_ns);
        }
        if self.internal() {
            self.run(now_ns);
        }
        let mut id = self.next_id;
        self.next_id += 1;
        self.log.stats.packets_in += 1;
        self.log.stats.bytes_in += packet.len() as u64;
        self.log.event(
            now_ns,
            id,
            EventKind::Arrived {
                len: packet.len() as u32,
            },
        );

        let mut copy = None;
        if chance(self.dup_p, self.rng.next_u32()) {
            self.log.stats.duplicated += 1;
            let c = self.next_id;
            self.next_id += 1;
            self.log
                .event(now_ns, id, EventKind::Duplicated { copy: c });
            copy = Some((c, packet.clone()));
        }
        if self.loss.is_lost(&mut self.rng) {
            if self.spec.ecn && self.ip && crate::ip::set_ce(&mut packet) {
                // netem clones the duplicate after this decision: it carries the mark too.
                if let Some((_, c)) = &mut copy {
                    crate::ip::set_ce(c);
                }
                self.log.stats.loss_marked += 1;
                self.log.event(now_ns, id, EventKind::LossMarked);
            } else {
                self.log.stats.dropped += 1;
                self.log.event(now_ns, id, EventKind::Lost);
                match copy.take() {
                    Some((c, p)) => (id, packet) = (c, p),
                    None => return,
                }
            }
        }
        if chance(self.corrupt_p, self.rng.next_u32()) && !packet.is_empty() {
            if self.spec.fix_checksum {
                // Only the transport payload, then a valid checksum: the damage reaches the
                // application. Packets without payload (pure ACKs) stay intact.
                if let Some(range) = crate::packet::payload_range(&packet) {
                    let byte = range.start + self.rng.below(range.len() as u64) as usize;
                    let bit = self.rng.below(8) as u32;
                    packet[byte] ^= 1u8 << bit;
                    crate::packet::fix_transport_checksum(&mut packet);
                    self.log.stats.corrupted += 1;
                    self.log.event(now_ns, id, EventKind::Corrupted);
                }
            } else {
                let byte = self.rng.below(packet.len() as u64) as usize;
                let bit = self.rng.below(8) as u32;
                packet[byte] ^= 1u8 << bit;
                self.log.stats.corrupted += 1;
                self.log.event(now_ns, id, EventKind::Corrupted);
            }
        }
        self.insert(now_ns, id, packet);
        if let Some((c, p)) = copy {
            self.insert(now_ns, c, p);
        }
    }

    #[inline]
    fn insert(&mut self, now: u64, id: u64, packet: Vec<u8>) {
        if let Some(b) = &mut self.bottleneck {
            let e = Entry {
                id,
                arrival_ns: now,
                queued_ns: 0,
                bytes: packet,
            };
            let mut ctx = Ctx {
                log: &mut self.log,
                ecn: self.spec.ecn,
                ip: self.ip,
            };
            b.enqueue(now, e, &mut ctx, &mut self.rng);
            return;
        }
        let waiting = if self.gate.is_some() {
            self.queue.len()
        } else {
            self.waiting(now)
        };
        if waiting >= self.spec.limit {
            self.log.stats.queue_dropped += 1;
            self.log.event(now, id, EventKind::QueueDropped);
            return;
        }
        self.delay_stage(now, id, packet, 0, false);
    }

    /// Reorder, delay (and, without a bottleneck, the rate) for packet `id` entering the delay
    /// at `now`; `departing`: it comes out of the bottleneck after waiting `queued_ns` there
    /// (its decisions use their own stream).
    #[inline(always)]
    fn delay_stage(&mut self, now: u64, id: u64, p: Vec<u8>, queued_ns: u64, departing: bool) {
        let mut queued_ns = queued_ns;
        let rng = if departing {
            &mut self.depart_rng
        } else {
            &mut self.rng
        };
        if let Some((_, gap)) = self.spec.reorder {
            let gap = u64::from(gap);
            let rnd = self.reorder_cor.next(rng);
            if gap > 0 && self.reorder_counter + 1 >= gap && chance(self.reorder_p, rnd) {
                self.reorder_counter = 0;
                self.log.stats.reordered += 1;
                self.log.event(now, id, EventKind::Reordered);
                self.note_wait(id, queued_ns, departing);
                self.queue.insert((now, 0, u64::MAX - id), p);
                if self.gate.is_some() {
                    self.gate_pass(now);
                }
                return;
            }
        }
        let rnd = self.delay_cor.next(rng);
        let extra = rng.next_u32();
        let delay =
            self.spec
                .distribution
                .delay_ns(self.spec.delay_ns, self.spec.jitter_ns, rnd, extra);
        let mut release = now.saturating_add(delay);
        if let (Some(rate), false) = (self.spec.rate_bps, departing) {
            let ready = release;
            if let Some((&(last, _, _), _)) = self.queue.last_key_value() {
                release = release.max(last);
            }
            queued_ns = release - ready;
            let bytes = (p.len() as i64 + i64::from(self.spec.overhead_bytes)).max(0) as u128;
            let tx = bytes * 8 * 1_000_000_000 / u128::from(rate.max(1));
            release = release.saturating_add(u64::try_from(tx).unwrap_or(u64::MAX));
        }
        if self.spec.keep_order {
            release = release.max(self.last_release);
        }
        self.last_release = self.last_release.max(release);
        self.reorder_counter += 1;
        self.note_wait(id, queued_ns, departing);
        self.queue.insert((release, 1, id), p);
        if self.gate.is_some() {
            self.gate_pass(now);
        }
    }

    /// Counts the wait of a packet that entered the delay (the bottleneck's packets were
    /// counted as they started their transmission) and keeps it for its `Released` event.
    #[inline(always)]
    fn note_wait(&mut self, id: u64, queued_ns: u64, departing: bool) {
        if !departing {
            self.log.stats.queued(queued_ns);
        }
        if self.log.events.is_some() {
            self.waits.insert(id, queued_ns);
        }
    }

    /// A dequeue attempt of netem's at `now`: the slot lets through the due packets it can.
    fn gate_pass(&mut self, now: u64) {
        let Some(g) = &mut self.gate else { return };
        while let Some(head) = self.queue.first_entry() {
            let (due, len) = (head.key().0, head.get().len());
            if !g.try_pass(now, due, len) {
                break;
            }
            let id = key_id(head.key());
            self.passed.push_back((now, id, head.remove()));
        }
    }

    /// Takes the bottleneck's and the slots' decisions due at or before `until`, in time order.
    /// Decisions due at an arrival's instant come before it (as Mahimahi, which brings its link
    /// up to date before it queues a packet), whether or not the caller polled at that instant.
    fn run(&mut self, until: u64) {
        loop {
            let b = self.bottleneck.as_ref().and_then(|b| b.next_event());
            let g = self
                .gate
                .as_ref()
                .and_then(|g| self.queue.first_key_value().map(|(k, _)| g.wake(k.0)));
            let (t, bottleneck) = match (b, g) {
                (Some(b), Some(g)) if b <= g => (b, true),
                (Some(b), None) => (b, true),
                (_, Some(g)) => (g, false),
                (None, None) => return,
            };
            if t > until {
                return;
            }
            if bottleneck {
                let mut out = std::mem::take(&mut self.departures);
                if let Some(b) = &mut self.bottleneck {
                    let mut ctx = Ctx {
                        log: &mut self.log,
                        ecn: self.spec.ecn,
                        ip: self.ip,
                    };
                    b.step(&mut ctx, &mut out);
                }
                for (at, e) in out.drain(..) {
                    self.delay_stage(at, e.id, e.bytes, e.queued_ns, true);
                }
                self.departures = out;
            } else {
                self.gate_pass(t);
            }
        }
    }

    /// Packets whose release time is after `now`: counted from whichever end of the queue is
    /// shorter (due packets or waiting ones), so a driver that polls promptly pays for the few
    /// due packets, not for the whole queue.
    fn waiting(&self, now: u64) -> usize {
        let mut due = self.queue.range(..=(now, u8::MAX, u64::MAX));
        let mut later = self.queue.range((now.saturating_add(1), 0, 0)..);
        let (mut n_due, mut n_later) = (0usize, 0usize);
        loop {
            if due.next().is_none() {
                return self.queue.len() - n_due;
            }
            n_due += 1;
            if later.next().is_none() {
                return n_later;
            }
            n_later += 1;
        }
    }

    /// The next packet whose release time is `<= now_ns`, in release order.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Vec<u8>> {
        self.poll_release(now_ns).map(|(_, p)| p)
    }

    /// [`Emulator::poll_transmit`] with the time the packet was due to leave (for a driver
    /// that measures how late it releases packets).
    #[inline]
    pub fn poll_release(&mut self, now_ns: u64) -> Option<(u64, Vec<u8>)> {
        if self.internal() {
            self.run(now_ns);
        }
        let (t, id, p) = if self.gate.is_some() {
            self.passed.pop_front()?
        } else {
            let first = self.queue.first_entry()?;
            if first.key().0 > now_ns {
                return None;
            }
            let (key, p) = first.remove_entry();
            (key.0, key_id(&key), p)
        };
        self.log.stats.delivered += 1;
        self.log.stats.bytes_out += p.len() as u64;
        if self.log.events.is_some() {
            let queued_ns = self.waits.remove(&id).unwrap_or(0);
            self.log.event(t, id, EventKind::Released { queued_ns });
        }
        Some((t, p))
    }

    /// When the emulator next needs the caller: the release time of the next packet, or an
    /// earlier decision of the bottleneck or the slots (after which the next packet's release
    /// may be known). `None` when it holds no packet.
    pub fn poll_timeout(&self) -> Option<u64> {
        if !self.internal {
            return self.queue.first_key_value().map(|(k, _)| k.0);
        }
        let out = match &self.gate {
            Some(g) => self
                .passed
                .front()
                .map(|p| p.0)
                .or_else(|| self.queue.first_key_value().map(|(k, _)| g.wake(k.0))),
            None => self.queue.first_key_value().map(|(k, _)| k.0),
        };
        let b = self.bottleneck.as_ref().and_then(|b| b.next_event());
        match (out, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Packets queued (due or not, in the bottleneck or the delay).
    pub fn queued(&self) -> usize {
        self.queue.len() + self.passed.len() + self.bottleneck.as_ref().map_or(0, |b| b.held())
    }

    /// The counters so far.
    pub fn stats(&self) -> &Stats {
        &self.log.stats
    }
}
