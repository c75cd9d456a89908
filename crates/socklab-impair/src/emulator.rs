//! [`Emulator`]: one direction of an impaired link, driven by the caller's clock.

use std::collections::BTreeMap;

use crate::loss::LossModel;
use crate::rng::{chance, prob_to_u32, CorrelatedRandom, Rng};
use crate::spec::LinkSpec;

/// Counters of what the emulator did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets passed to [`Emulator::enqueue`].
    pub packets_in: u64,
    /// Copies removed by the loss model (a loss event on a duplicated packet
    /// counts here and in `duplicated`, leaving one copy).
    pub dropped: u64,
    /// Extra copies created by `duplicate`.
    pub duplicated: u64,
    /// Packets that had a bit flipped.
    pub corrupted: u64,
    /// Packets sent immediately by `reorder` (netem's requeues).
    pub reordered: u64,
    /// Copies dropped because the queue held `limit` packets.
    pub queue_dropped: u64,
    /// Packets returned by [`Emulator::poll_transmit`].
    pub delivered: u64,
    /// Bytes passed to `enqueue`.
    pub bytes_in: u64,
    /// Bytes returned by `poll_transmit`.
    pub bytes_out: u64,
}

/// Queue key: release time, then class (0 = sent immediately by `reorder`,
/// which netem puts at the head of its queue), then order within the class.
type Key = (u64, u8, u64);

/// One direction of a link with netem's impairments. Pure: no I/O and no
/// clock; all times are nanoseconds supplied by the caller, and all
/// randomness comes from the seed, so the same seed, spec and call sequence
/// give the same output on every platform.
///
/// Order of decisions per packet (as netem's `netem_enqueue`): duplicate,
/// loss, corrupt (the original only; the copy is made before corruption),
/// then for each copy: queue limit, reorder, delay (+ rate).
///
/// The queue limit counts packets whose release time is still in the future
/// (packets already due count as having left the link, whether or not the
/// caller has polled them yet).
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
    seq: u64,
    queue: BTreeMap<Key, Vec<u8>>,
    stats: Stats,
}

impl Emulator {
    /// An emulator for `spec` whose random decisions are determined by `seed`.
    pub fn new(spec: LinkSpec, seed: u64) -> Emulator {
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
            seq: 0,
            queue: BTreeMap::new(),
            stats: Stats::default(),
            spec,
        }
    }

    /// The spec this emulator models.
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// A packet arrives at the link at `now_ns`.
    pub fn enqueue(&mut self, now_ns: u64, mut packet: Vec<u8>) {
        self.stats.packets_in += 1;
        self.stats.bytes_in += packet.len() as u64;

        let mut copy = None;
        if chance(self.dup_p, self.rng.next_u32()) {
            self.stats.duplicated += 1;
            copy = Some(packet.clone());
        }
        if self.loss.is_lost(&mut self.rng) {
            self.stats.dropped += 1;
            match copy.take() {
                Some(c) => packet = c,
                None => return,
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
                    self.stats.corrupted += 1;
                }
            } else {
                let byte = self.rng.below(packet.len() as u64) as usize;
                let bit = self.rng.below(8) as u32;
                packet[byte] ^= 1u8 << bit;
                self.stats.corrupted += 1;
            }
        }
        self.insert(now_ns, packet);
        if let Some(c) = copy {
            self.insert(now_ns, c);
        }
    }

    fn insert(&mut self, now: u64, packet: Vec<u8>) {
        if self.waiting(now) >= self.spec.limit {
            self.stats.queue_dropped += 1;
            return;
        }
        self.seq += 1;
        if let Some((_, gap)) = self.spec.reorder {
            let gap = u64::from(gap);
            let rnd = self.reorder_cor.next(&mut self.rng);
            if gap > 0 && self.reorder_counter + 1 >= gap && chance(self.reorder_p, rnd) {
                self.reorder_counter = 0;
                self.stats.reordered += 1;
                self.queue.insert((now, 0, u64::MAX - self.seq), packet);
                return;
            }
        }
        let rnd = self.delay_cor.next(&mut self.rng);
        let extra = self.rng.next_u32();
        let delay =
            self.spec
                .distribution
                .delay_ns(self.spec.delay_ns, self.spec.jitter_ns, rnd, extra);
        let mut release = now.saturating_add(delay);
        if let Some(rate) = self.spec.rate_bps {
            if let Some((&(last, _, _), _)) = self.queue.last_key_value() {
                release = release.max(last);
            }
            let bytes = (packet.len() as i64 + i64::from(self.spec.overhead_bytes)).max(0) as u128;
            let tx = bytes * 8 * 1_000_000_000 / u128::from(rate.max(1));
            release = release.saturating_add(u64::try_from(tx).unwrap_or(u64::MAX));
        }
        if self.spec.keep_order {
            release = release.max(self.last_release);
        }
        self.last_release = self.last_release.max(release);
        self.reorder_counter += 1;
        self.queue.insert((release, 1, self.seq), packet);
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
        self.poll_transmit_copy(now_ns).map(|(_, p)| p)
    }

    /// [`Emulator::poll_transmit`] with the released copy's number (see
    /// [`Emulator::copies_queued`]), so a driver can follow each packet (a capture).
    pub fn poll_transmit_copy(&mut self, now_ns: u64) -> Option<(u64, Vec<u8>)> {
        let (&key, _) = self.queue.first_key_value()?;
        if key.0 > now_ns {
            return None;
        }
        let packet = self.queue.remove(&key)?;
        self.stats.delivered += 1;
        self.stats.bytes_out += packet.len() as u64;
        let copy = if key.1 == 0 { u64::MAX - key.2 } else { key.2 };
        Some((copy, packet))
    }

    /// Copies queued so far: those one [`Emulator::enqueue`] queued are numbered from the
    /// value before it + 1 to the value after it (the packet first, then its duplicate).
    pub fn copies_queued(&self) -> u64 {
        self.seq
    }

    /// The release time of the next packet, if any is queued.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.queue.first_key_value().map(|(k, _)| k.0)
    }

    /// Packets queued (due or not).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}
