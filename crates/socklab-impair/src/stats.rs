//! [`Stats`]: the counters of what an emulator did. At the bottom of the crate: the emulator
//! counts, and its event log (`event.rs`) keeps the counters beside the events.

/// Counters of what the emulator did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets passed to [`crate::Emulator::enqueue`].
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
    /// Packets returned by [`crate::Emulator::poll_transmit`].
    pub delivered: u64,
    /// Bytes passed to `enqueue`.
    pub bytes_in: u64,
    /// Bytes returned by `poll_transmit`.
    pub bytes_out: u64,
    /// Loss events that marked an ECN-capable packet Congestion Experienced instead of
    /// dropping it (`ecn`).
    pub loss_marked: u64,
    /// Packets the queue discipline dropped (CoDel, PIE; a full queue counts in
    /// `queue_dropped`).
    pub aqm_dropped: u64,
    /// Packets the queue discipline marked Congestion Experienced instead of dropping them
    /// (`ecn`).
    pub aqm_marked: u64,
    /// Packets that got past the bottleneck (the rate, trace or queue discipline: their
    /// transmission started), each once; with no bottleneck, every packet that entered the delay.
    pub queue_passed: u64,
    /// Sum over those packets of the time each waited at the bottleneck before its
    /// transmission started, ns.
    pub queue_delay_sum_ns: u64,
    /// The longest such wait, ns.
    pub queue_delay_max_ns: u64,
}

impl Stats {
    /// `self += other`, counter by counter (the maximum is the larger one).
    pub fn add(&mut self, o: &Stats) {
        self.packets_in += o.packets_in;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.corrupted += o.corrupted;
        self.reordered += o.reordered;
        self.queue_dropped += o.queue_dropped;
        self.delivered += o.delivered;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.loss_marked += o.loss_marked;
        self.aqm_dropped += o.aqm_dropped;
        self.aqm_marked += o.aqm_marked;
        self.queue_passed += o.queue_passed;
        self.queue_delay_sum_ns += o.queue_delay_sum_ns;
        self.queue_delay_max_ns = self.queue_delay_max_ns.max(o.queue_delay_max_ns);
    }

    /// `self += other` for the counts, leaving `self`'s maximum as it is: how a driver folds a
    /// retired model (one replaced by a new spec) into its totals, so the maximum it reports
    /// is that of the models since the link was last specified, not of the link's life (the
    /// lab specifies the link afresh for every repetition).
    pub fn add_counts(&mut self, o: &Stats) {
        let max = self.queue_delay_max_ns;
        self.add(o);
        self.queue_delay_max_ns = max;
    }

    /// What happened between `earlier` and `self` (a maximum cannot be differenced: `self`'s
    /// is kept, which the drivers take since the link was last specified).
    pub fn since(&self, e: &Stats) -> Stats {
        Stats {
            packets_in: self.packets_in.saturating_sub(e.packets_in),
            dropped: self.dropped.saturating_sub(e.dropped),
            duplicated: self.duplicated.saturating_sub(e.duplicated),
            corrupted: self.corrupted.saturating_sub(e.corrupted),
            reordered: self.reordered.saturating_sub(e.reordered),
            queue_dropped: self.queue_dropped.saturating_sub(e.queue_dropped),
            delivered: self.delivered.saturating_sub(e.delivered),
            bytes_in: self.bytes_in.saturating_sub(e.bytes_in),
            bytes_out: self.bytes_out.saturating_sub(e.bytes_out),
            loss_marked: self.loss_marked.saturating_sub(e.loss_marked),
            aqm_dropped: self.aqm_dropped.saturating_sub(e.aqm_dropped),
            aqm_marked: self.aqm_marked.saturating_sub(e.aqm_marked),
            queue_passed: self.queue_passed.saturating_sub(e.queue_passed),
            queue_delay_sum_ns: self.queue_delay_sum_ns.saturating_sub(e.queue_delay_sum_ns),
            queue_delay_max_ns: self.queue_delay_max_ns,
        }
    }

    /// Mean wait at the bottleneck of the packets that got past it, ns.
    pub fn mean_queue_delay_ns(&self) -> f64 {
        if self.queue_passed == 0 {
            0.0
        } else {
            self.queue_delay_sum_ns as f64 / self.queue_passed as f64
        }
    }

    /// Counts one packet's wait at the bottleneck.
    #[inline]
    pub(crate) fn queued(&mut self, ns: u64) {
        self.queue_passed += 1;
        self.queue_delay_sum_ns += ns;
        self.queue_delay_max_ns = self.queue_delay_max_ns.max(ns);
    }
}
