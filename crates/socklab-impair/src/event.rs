//! [`Event`]: what the emulator decided for one packet, for an observer (a packet capture
//! that writes each decision beside the packet). Recorded only while
//! [`crate::Emulator::observe`] is on; off, the emulator pays one untaken branch per decision.
//!
//! Every counter of [`crate::Stats`] that counts packets has exactly one kind of event, so the
//! events of a run add up to its counts (`Arrived` = `packets_in`, `Lost` = `dropped`, …,
//! `Released` = `delivered`).

/// One decision about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// When, ns on the caller's clock: the arrival for decisions taken on arrival (loss,
    /// duplication, corruption, a full queue, PIE), the dequeue for CoDel's, the time the
    /// packet was scheduled to leave for `Released`.
    pub at_ns: u64,
    /// The packet, numbered from 0 in arrival order; a duplicate gets a number of its own
    /// (announced by `Duplicated`).
    pub packet: u64,
    /// What happened.
    pub kind: EventKind,
}

/// What happened to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// It was passed to `enqueue`, `len` bytes long (`Stats::packets_in`).
    Arrived {
        /// Its length in bytes.
        len: u32,
    },
    /// `duplicate` made a copy of it, numbered `copy` (`Stats::duplicated`).
    Duplicated {
        /// The copy's number.
        copy: u64,
    },
    /// The loss model removed it (`Stats::dropped`).
    Lost,
    /// A loss event marked it Congestion Experienced instead (`ecn`; `Stats::loss_marked`).
    LossMarked,
    /// One of its bits was flipped (`Stats::corrupted`).
    Corrupted,
    /// The queue was full (`Stats::queue_dropped`); with fq_codel the packet dropped is the head
    /// of the flow with the most bytes queued, not necessarily the one arriving.
    QueueDropped,
    /// `reorder` sent it at once (`Stats::reordered`).
    Reordered,
    /// The queue discipline dropped it after `sojourn_ns` in the queue (CoDel at dequeue; PIE
    /// on arrival, 0) (`Stats::aqm_dropped`).
    AqmDropped {
        /// Time spent in the bottleneck queue, ns.
        sojourn_ns: u64,
    },
    /// The queue discipline marked it Congestion Experienced instead of dropping it (`ecn`;
    /// `Stats::aqm_marked`).
    AqmMarked {
        /// Time spent in the bottleneck queue so far, ns.
        sojourn_ns: u64,
    },
    /// It left the link: returned by `poll_transmit` (`Stats::delivered`); `at_ns` is the time
    /// it was due to leave (its time in the link is that minus its `Arrived` time).
    Released {
        /// Time it waited at the bottleneck (the rate, trace or queue discipline) before its
        /// transmission started, ns (`Stats::queue_delay_sum_ns` adds these up).
        queued_ns: u64,
    },
}

/// Counters and, when observed, the events behind them: what every part of the model writes
/// its decisions to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Log {
    pub(crate) stats: crate::stats::Stats,
    pub(crate) events: Option<Vec<Event>>,
}

impl Log {
    #[inline]
    pub(crate) fn event(&mut self, at_ns: u64, packet: u64, kind: EventKind) {
        if let Some(ev) = &mut self.events {
            ev.push(Event {
                at_ns,
                packet,
                kind,
            });
        }
    }
}

/// A hasher for packet numbers (and small tuples of them), for maps an observer keys by
/// [`Event::packet`]: the numbers are dense and never chosen by a peer, so a multiplicative
/// hash (Fibonacci hashing) spreads them at a fraction of SipHash's cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct PacketHasher(u64);

impl std::hash::Hasher for PacketHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by packet numbers (see [`PacketHasher`]).
pub type PacketMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<PacketHasher>>;
