//! The receiver's statistics of one test, sans-IO: sequence numbers, send times and arrival
//! times in, counts out. Deterministic; no clock, no socket.
//!
//! - **Duplicates**: an arrival whose sequence number already arrived (a bitmap over a window
//!   of [`SEQ_WINDOW`] numbers behind the highest; an arrival older than that is counted as
//!   `too_old` and not as received).
//! - **Reordering (RFC 4737)**: `NextExp` is one more than the highest number received; a first
//!   arrival below it is *reordered* (Type-P-Reordered), and its *extent* is how many first
//!   arrivals came between the earliest arrival with a higher number and itself (§4.2.2;
//!   measured over the last [`REORDER_MEMORY`] positions, `extent_capped` counts the cases
//!   beyond). Alongside, *early* counts the datagrams that arrived before at least one datagram
//!   sent before them, the ones that overtook: netem's `reorder` sends its chosen packets at
//!   once, and each of those is one early arrival when the link's delay exceeds the gap between
//!   sends, so `early` is the count to set beside the emulator's own `reordered`. RFC 4737's
//!   count is the datagrams that were overtaken (one early datagram can overtake many).
//! - **Jitter (RFC 3550 §6.4.1, A.8)**: for each arrival in arrival order, the transit time
//!   `R − S` (arrival minus send time); `D` = this transit minus the previous one; `J += (|D| −
//!   J) / 16`. Clock offsets cancel in `D`.
//! - **One-way delay**: `R − S` of first arrivals, in an HDR histogram (ns). Meaningful only
//!   when sender and receiver read the same clock (one host); a negative transit is counted in
//!   `owd_negative` and left out.
//! - **Intervals**: with an interval set, counts per interval of arrival time since the first
//!   arrival (the hook a time series of the test reads).

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Sequence numbers remembered for duplicate detection (16 Mi: 2 MiB of bitmap).
pub const SEQ_WINDOW: u64 = 1 << 24;
/// Arrival positions remembered for the reorder extent and the early count.
pub const REORDER_MEMORY: usize = 1 << 16;
/// Most intervals one test records.
pub const MAX_INTERVALS: usize = 100_000;

/// Which sequence numbers arrived, over a sliding window.
#[derive(Debug, Clone)]
pub struct SeqWindow {
    /// The number of bit 0 of `words[0]` (a multiple of 64).
    base: u64,
    words: VecDeque<u64>,
    limit_words: usize,
}

/// What [`SeqWindow::insert`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// First arrival.
    New,
    /// Arrived before.
    Again,
    /// Below the window: not known.
    TooOld,
}

impl SeqWindow {
    /// A window of `bits` numbers (rounded up to a multiple of 64, at least 64).
    pub fn new(bits: u64) -> SeqWindow {
        SeqWindow {
            base: 0,
            words: VecDeque::new(),
            limit_words: bits.div_ceil(64).max(1) as usize,
        }
    }

    /// Marks `seq` as arrived.
    pub fn insert(&mut self, seq: u64) -> Seen {
        if seq < self.base {
            return Seen::TooOld;
        }
        let limit = self.limit_words as u64;
        let mut word = (seq - self.base) / 64;
        if word >= 2 * limit {
            // A jump far past the window: start a fresh window that ends at `seq`.
            self.words.clear();
            self.base = (seq / 64).saturating_sub(limit - 1) * 64;
            word = (seq - self.base) / 64;
        }
        while word >= self.words.len() as u64 {
            if self.words.len() == self.limit_words {
                self.words.pop_front();
                self.base += 64;
                word -= 1;
            } else {
                self.words.push_back(0);
            }
        }
        let bit = 1u64 << ((seq - self.base) % 64);
        let w = &mut self.words[word as usize];
        if *w & bit != 0 {
            Seen::Again
        } else {
            *w |= bit;
            Seen::New
        }
    }
}

/// The counts of a test (or of one interval of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Every datagram of the test that arrived, copies included.
    pub arrivals: u64,
    /// Distinct sequence numbers that arrived.
    pub unique: u64,
    /// Bytes of the distinct datagrams (headers included: whole UDP payloads).
    pub bytes: u64,
    /// Arrivals of a number that had arrived already.
    pub duplicates: u64,
    /// Arrivals below the duplicate window (neither counted as received nor as duplicates).
    pub too_old: u64,
    /// First arrivals below `NextExp` (RFC 4737 Type-P-Reordered).
    pub reordered: u64,
    /// Datagrams that arrived before one sent earlier (those that overtook).
    pub early: u64,
    /// Largest reorder extent (RFC 4737 §4.2.2), in arrival positions.
    pub extent_max: u64,
    /// Sum of the reorder extents (mean = sum / reordered).
    pub extent_sum: u64,
    /// Reordered arrivals whose extent exceeded what is remembered (the extent is then a lower
    /// bound).
    pub extent_capped: u64,
}

impl Counts {
    /// `self − earlier`, for the counts that add up (the maximum extent is kept).
    fn since(&self, e: &Counts) -> Counts {
        Counts {
            arrivals: self.arrivals - e.arrivals,
            unique: self.unique - e.unique,
            bytes: self.bytes - e.bytes,
            duplicates: self.duplicates - e.duplicates,
            too_old: self.too_old - e.too_old,
            reordered: self.reordered - e.reordered,
            early: self.early - e.early,
            extent_max: self.extent_max,
            extent_sum: self.extent_sum - e.extent_sum,
            extent_capped: self.extent_capped - e.extent_capped,
        }
    }
}

/// One interval of a test's time series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Its start, ms after the test's first arrival.
    pub start_ms: u64,
    /// What arrived in it (`extent_max`: the test's so far).
    pub counts: Counts,
    /// The jitter estimate at its end, ns.
    pub jitter_ns: f64,
    /// How far `NextExp` (one past the highest number received) advanced in it: the
    /// datagrams it should have brought, in sequence order. `expected − counts.unique` is the
    /// interval's loss; it is negative when a datagram counted lost in an earlier interval
    /// arrives late (reordered), as iperf3's per-interval loss is, so the intervals' losses
    /// add up to the test's (below its highest number).
    #[serde(default)]
    pub expected: u64,
}

/// One-way delay of first arrivals, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Owd {
    /// Shortest.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Longest.
    pub max_ns: u64,
    /// Arrivals whose transit was negative (the clocks differ): left out.
    pub negative: u64,
}

/// RFC 3550's interarrival jitter estimator.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jitter {
    prev_transit: Option<i64>,
    /// The estimate, ns.
    pub j_ns: f64,
}

impl Jitter {
    /// One arrival: its transit time (arrival − send, ns; any offset between the clocks).
    pub fn on_transit(&mut self, transit: i64) {
        if let Some(p) = self.prev_transit {
            let d = transit.saturating_sub(p).unsigned_abs() as f64;
            self.j_ns += (d - self.j_ns) / 16.0;
        }
        self.prev_transit = Some(transit);
    }
}

/// What [`RecvStats::on_arrival`] made of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A first arrival, in order.
    InOrder,
    /// A first arrival below `NextExp`.
    Reordered,
    /// A copy.
    Duplicate,
    /// Below the duplicate window.
    TooOld,
}

/// The statistics of one test.
#[derive(Debug, Clone)]
pub struct RecvStats {
    seen: SeqWindow,
    next_exp: u64,
    /// `(position, seq)` of the first arrivals that raised `NextExp`, oldest first.
    records: VecDeque<(u64, u64)>,
    /// First arrivals not yet overtaken by a later lower number, increasing.
    candidates: VecDeque<u64>,
    counts: Counts,
    jitter: Jitter,
    owd: Histogram<u64>,
    /// Exact extremes and sum (the histogram keeps 3 significant digits).
    owd_min: u64,
    owd_max: u64,
    owd_sum: u128,
    owd_negative: u64,
    first_arrival_ns: Option<u64>,
    last_arrival_ns: u64,
    interval_ns: u64,
    intervals: Vec<Interval>,
    at_interval: Counts,
    /// `next_exp` when the last interval closed.
    at_interval_next_exp: u64,
}

impl Default for RecvStats {
    fn default() -> Self {
        RecvStats::new()
    }
}

impl RecvStats {
    /// Empty statistics, without intervals.
    pub fn new() -> RecvStats {
        RecvStats {
            seen: SeqWindow::new(SEQ_WINDOW),
            next_exp: 0,
            records: VecDeque::new(),
            candidates: VecDeque::new(),
            counts: Counts::default(),
            jitter: Jitter::default(),
            owd: owd_histogram(),
            owd_min: u64::MAX,
            owd_max: 0,
            owd_sum: 0,
            owd_negative: 0,
            first_arrival_ns: None,
            last_arrival_ns: 0,
            interval_ns: 0,
            intervals: Vec::new(),
            at_interval: Counts::default(),
            at_interval_next_exp: 0,
        }
    }

    /// Also keeps counts per `interval_ns` of arrival time (0: none).
    pub fn with_intervals(mut self, interval_ns: u64) -> RecvStats {
        self.interval_ns = interval_ns;
        self
    }

    /// A datagram of the test arrived: its sequence number, length, send time (sender's clock)
    /// and arrival time (receiver's clock), both ns.
    pub fn on_arrival(&mut self, seq: u64, len: usize, send_ns: u64, arrival_ns: u64) -> Arrival {
        let first = *self.first_arrival_ns.get_or_insert(arrival_ns);
        if self.interval_ns > 0 {
            self.close_intervals(arrival_ns.saturating_sub(first));
        }
        self.last_arrival_ns = self.last_arrival_ns.max(arrival_ns);
        self.counts.arrivals += 1;
        let transit = (i128::from(arrival_ns) - i128::from(send_ns))
            .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        self.jitter.on_transit(transit);
        match self.seen.insert(seq) {
            Seen::Again => {
                self.counts.duplicates += 1;
                return Arrival::Duplicate;
            }
            Seen::TooOld => {
                self.counts.too_old += 1;
                return Arrival::TooOld;
            }
            Seen::New => {}
        }
        if transit >= 0 {
            let t = transit as u64;
            if self.owd.record(t).is_err() {
                self.owd.saturating_record(t);
            }
            self.owd_min = self.owd_min.min(t);
            self.owd_max = self.owd_max.max(t);
            self.owd_sum += u128::from(t);
        } else {
            self.owd_negative += 1;
        }
        let pos = self.counts.unique;
        self.counts.unique += 1;
        self.counts.bytes += len as u64;
        let kind = if seq >= self.next_exp {
            self.next_exp = seq.saturating_add(1);
            push_capped(&mut self.records, (pos, seq));
            Arrival::InOrder
        } else {
            self.counts.reordered += 1;
            // The earliest remembered arrival with a higher number: records rise in both
            // position and number.
            let i = self.records.partition_point(|&(_, s)| s < seq);
            let extent = match self.records.get(i) {
                Some(&(p, _)) => {
                    if i == 0 && self.records.len() == REORDER_MEMORY {
                        self.counts.extent_capped += 1;
                    }
                    pos - p
                }
                None => 0,
            };
            self.counts.extent_max = self.counts.extent_max.max(extent);
            self.counts.extent_sum += extent;
            Arrival::Reordered
        };
        // Every remembered first arrival above `seq` arrived before it: it overtook.
        while self.candidates.back().is_some_and(|&c| c > seq) {
            self.candidates.pop_back();
            self.counts.early += 1;
        }
        push_capped(&mut self.candidates, seq);
        kind
    }

    fn close_intervals(&mut self, since_first_ns: u64) {
        let index = since_first_ns / self.interval_ns;
        while (self.intervals.len() as u64) < index && self.intervals.len() < MAX_INTERVALS {
            self.push_interval();
        }
    }

    fn push_interval(&mut self) {
        let start_ms = self.intervals.len() as u64 * self.interval_ns / 1_000_000;
        self.intervals.push(Interval {
            start_ms,
            counts: self.counts.since(&self.at_interval),
            jitter_ns: self.jitter.j_ns,
            expected: self.next_exp - self.at_interval_next_exp,
        });
        self.at_interval = self.counts;
        self.at_interval_next_exp = self.next_exp;
    }

    /// The counts so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The jitter estimate so far, ns.
    pub fn jitter_ns(&self) -> f64 {
        self.jitter.j_ns
    }

    /// The first and the last arrival time, if anything arrived.
    pub fn arrival_span(&self) -> Option<(u64, u64)> {
        self.first_arrival_ns.map(|f| (f, self.last_arrival_ns))
    }

    /// One-way delay of the first arrivals, if any had a non-negative transit.
    pub fn owd(&self) -> Option<Owd> {
        let h = &self.owd;
        (!h.is_empty()).then(|| Owd {
            min_ns: self.owd_min,
            mean_ns: self.owd_sum as f64 / h.len() as f64,
            // Percentiles within the histogram's 3 significant digits, inside the extremes.
            p50_ns: h.value_at_quantile(0.5).clamp(self.owd_min, self.owd_max),
            p90_ns: h.value_at_quantile(0.9).clamp(self.owd_min, self.owd_max),
            p99_ns: h.value_at_quantile(0.99).clamp(self.owd_min, self.owd_max),
            max_ns: self.owd_max,
            negative: self.owd_negative,
        })
    }

    /// The intervals closed so far (the one in progress left out): what a live reader may
    /// print as the test goes.
    pub fn closed_intervals(&self) -> &[Interval] {
        &self.intervals
    }

    /// The intervals, the one in progress included (with intervals enabled and something
    /// arrived).
    pub fn intervals(&self) -> Vec<Interval> {
        let mut out = self.intervals.clone();
        if self.interval_ns > 0 && self.first_arrival_ns.is_some() && out.len() < MAX_INTERVALS {
            out.push(Interval {
                start_ms: out.len() as u64 * self.interval_ns / 1_000_000,
                counts: self.counts.since(&self.at_interval),
                jitter_ns: self.jitter.j_ns,
                expected: self.next_exp - self.at_interval_next_exp,
            });
        }
        out
    }
}

fn push_capped<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() == REORDER_MEMORY {
        q.pop_front();
    }
    q.push_back(v);
}

/// A histogram of nanoseconds sized for 1 ns to 60 s at 3 significant figures (growing for
/// longer delays).
fn owd_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3)
        .expect("1 ns .. 60 s at 3 significant figures is a valid histogram");
    h.auto(true);
    h
}

#[cfg(test)]
mod tests;
