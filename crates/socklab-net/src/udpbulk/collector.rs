//! The receiver's bookkeeping across tests, sans-IO: datagrams in (bytes, the receiver's
//! monotonic time, the arrival time), finished tests out as [`TestReport`]s.
//!
//! A test starts with its first datagram (a new test id) and ends:
//! - **drain**: `drain_ms` (from the FIN datagrams) after the first FIN arrived: stragglers
//!   still on the way (delayed, reordered, duplicated) are counted, the FINs lost are not
//!   waited for;
//! - **idle**: nothing of it arrived for the idle time (every FIN lost, or a sender that died);
//! - **stop**: the receiver is stopped.
//!
//! A datagram of a test that already ended is counted as `late` and otherwise ignored, so a
//! straggler never opens a new test.
//!
//! **Who may write into a test** (issue 26 item 3): a test belongs to the source address (IP
//! and port) of its first datagram, its *owner*. A datagram with its id from any other source
//! is `foreign`: counted apart, never in the test's counts, so a third party that learns a
//! test id cannot change its results. One source holds at most [`MAX_PER_SOURCE`] open tests
//! (a socklab sender uses one socket per test), so one socket cannot fill the table of
//! [`MAX_OPEN`]. A new test that finds no room is *refused*: [`Collector::refusals`] hands out
//! one report of it ([`End::Refused`], with the reason) so whoever waits for the test learns
//! it was refused instead of seeing nothing arrive; its later datagrams are counted refused,
//! and it never opens mid-way.

use std::collections::VecDeque;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::stats::{Arrival, Counts, Interval, Owd, RecvStats};
use super::wire::{Fin, Header};

/// Most tests open at once; datagrams of further tests are refused (counted).
pub const MAX_OPEN: usize = 16;
/// Most tests open at once from one source address (IP and port).
pub const MAX_PER_SOURCE: usize = 4;
/// Test ids remembered after they ended, to recognise their stragglers; refused test ids
/// likewise.
const REMEMBER_ENDED: usize = 256;
/// Most refusal reports waiting for [`Collector::refusals`] (a flood of new ids past that is
/// counted, not reported one by one).
const MAX_PENDING_REFUSALS: usize = 1024;
/// One refusal report per source in this long (receiver time, ns): a source that floods new
/// ids is counted, not reported one by one, so its reports do not crowd out a victim's (a
/// socklab sender has a new source per test).
const REPORT_GAP_NS: u64 = 1_000_000_000;
/// Sources remembered for [`REPORT_GAP_NS`].
const REMEMBER_REPORTED: usize = 4096;

/// Why a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// The drain time after the first FIN passed.
    Drain,
    /// Nothing arrived for the idle time.
    Idle,
    /// The receiver was stopped.
    Stop,
    /// The test was refused when its first datagram came: too many tests open (from its
    /// source, or in all); nothing of it was counted.
    Refused,
}

/// The receiver's account of one test (printed by `socklab sink --udp` as a `REPORT` line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestReport {
    /// The sender's test id.
    pub test_id: u64,
    /// What arrived.
    pub counts: Counts,
    /// RFC 3550 interarrival jitter at the end, ns.
    pub jitter_ns: f64,
    /// One-way delay of the first arrivals (meaningful with a shared clock only).
    pub owd: Option<Owd>,
    /// First and last arrival, ns since the epoch (receiver's clock).
    pub first_arrival_ns: u64,
    /// See `first_arrival_ns`.
    pub last_arrival_ns: u64,
    /// The FIN's content, if a FIN arrived.
    pub total: Option<u64>,
    /// Bytes of the distinct FIN datagrams that arrived (in `counts.bytes` too): the data
    /// received is `counts.bytes − fin_bytes`.
    pub fin_bytes: u64,
    /// See [`Fin::drain_ms`].
    pub drain_ms: Option<u32>,
    /// Why it ended.
    pub ended: End,
    /// Datagrams that did not parse while it ran (any test's).
    pub malformed: u64,
    /// Datagrams the kernel dropped at the receiving socket while it ran (`SO_RXQ_OVFL`, as
    /// far as later arrivals told; filled in by the live receiver).
    pub kernel_drops: u64,
    /// The receiver's CPU time while it ran, µs (filled in by the live receiver).
    pub user_us: u64,
    /// See `user_us`.
    pub sys_us: u64,
    /// Counts per interval, when the receiver keeps a time series.
    pub intervals: Vec<Interval>,
    /// Datagrams with the test's id from a source other than its owner (not counted in it).
    #[serde(default)]
    pub foreign: u64,
    /// Why the test was refused ([`End::Refused`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl TestReport {
    /// Datagrams of the test that never arrived, given how many were sent (the sender's count,
    /// or the FIN's total when the sender's is not at hand).
    pub fn lost(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.counts.unique)
    }
}

#[derive(Debug)]
struct Open {
    id: u64,
    /// The source of its first datagram: only its datagrams count.
    owner: SocketAddr,
    /// Datagrams with its id from other sources.
    foreign: u64,
    stats: RecvStats,
    fin: Option<Fin>,
    /// Receiver time of the first FIN.
    fin_at: Option<u64>,
    fin_bytes: u64,
    /// Receiver time of the last datagram.
    last_at: u64,
    malformed_at_start: u64,
    /// Closed intervals already handed to [`Collector::closed_intervals`].
    handed: usize,
}

/// What a datagram was to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Counted in the open test.
    Counted,
    /// The first datagram of a new test (now open): the live receiver notes its baselines.
    Opened(u64),
    /// A straggler of a test that ended.
    Late,
    /// A datagram of an open test from a source other than its owner (not counted in it).
    Foreign,
    /// A new test while [`MAX_OPEN`] are open, or [`MAX_PER_SOURCE`] from its source (or a
    /// later datagram of a test refused so).
    Refused,
    /// Not a datagram of ours.
    Malformed,
}

/// The receiver's open tests.
#[derive(Debug)]
pub struct Collector {
    open: Vec<Open>,
    ended: VecDeque<u64>,
    /// Ids refused, to count their later datagrams refused (never open them mid-way).
    refused_ids: VecDeque<u64>,
    /// Refusal reports not yet handed out.
    refusals: Vec<TestReport>,
    /// When each source's last refusal was reported.
    reported: std::collections::HashMap<SocketAddr, u64>,
    foreign: u64,
    idle_ns: u64,
    interval_ns: u64,
    malformed: u64,
    late: u64,
    refused: u64,
}

impl Collector {
    /// Tests end after `idle_ns` without a datagram; with `interval_ns` > 0 each keeps counts
    /// per interval.
    pub fn new(idle_ns: u64, interval_ns: u64) -> Collector {
        Collector {
            open: Vec::new(),
            ended: VecDeque::new(),
            refused_ids: VecDeque::new(),
            refusals: Vec::new(),
            reported: std::collections::HashMap::new(),
            foreign: 0,
            idle_ns: idle_ns.max(1),
            interval_ns,
            malformed: 0,
            late: 0,
            refused: 0,
        }
    }

    /// A datagram arrived from `from`: `now` on the receiver's monotonic clock, `arrival_ns`
    /// on the clock the send times are compared with.
    pub fn on_datagram(
        &mut self,
        now: u64,
        arrival_ns: u64,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Taken {
        let Ok(h) = Header::parse(datagram) else {
            self.malformed += 1;
            return Taken::Malformed;
        };
        let mut taken = Taken::Counted;
        let i = match self.open.iter().position(|o| o.id == h.test_id) {
            Some(i) if self.open[i].owner != from => {
                self.open[i].foreign += 1;
                self.foreign += 1;
                return Taken::Foreign;
            }
            Some(i) => i,
            None if self.ended.contains(&h.test_id) => {
                self.late += 1;
                return Taken::Late;
            }
            None if self.refused_ids.contains(&h.test_id) => {
                self.refused += 1;
                return Taken::Refused;
            }
            None => {
                if let Some(why) = self.no_room(from) {
                    self.refuse(h.test_id, why, from, now);
                    return Taken::Refused;
                }
                self.open.push(Open {
                    id: h.test_id,
                    owner: from,
                    foreign: 0,
                    stats: RecvStats::new().with_intervals(self.interval_ns),
                    fin: None,
                    fin_at: None,
                    fin_bytes: 0,
                    last_at: now,
                    malformed_at_start: self.malformed,
                    handed: 0,
                });
                taken = Taken::Opened(h.test_id);
                self.open.len() - 1
            }
        };
        let o = &mut self.open[i];
        let a = o
            .stats
            .on_arrival(h.seq, datagram.len(), h.send_ns, arrival_ns);
        o.last_at = o.last_at.max(now);
        if let Some(f) = h.fin {
            if matches!(a, Arrival::InOrder | Arrival::Reordered) {
                o.fin_bytes += datagram.len() as u64;
            }
            o.fin.get_or_insert(f);
            o.fin_at.get_or_insert(now);
        }
        taken
    }

    /// Why a new test from `from` finds no room, if it does not.
    fn no_room(&self, from: SocketAddr) -> Option<String> {
        let mine = self.open.iter().filter(|o| o.owner == from).count();
        if mine >= MAX_PER_SOURCE {
            return Some(format!(
                "the UDP receiver refused the test: its source {from} already has {mine} tests open (at most {MAX_PER_SOURCE} per source)"
            ));
        }
        if self.open.len() >= MAX_OPEN {
            let sources = {
                let mut s: Vec<SocketAddr> = self.open.iter().map(|o| o.owner).collect();
                s.sort_unstable();
                s.dedup();
                s.len()
            };
            return Some(format!(
                "the UDP receiver refused the test: {} tests were open (its limit) from {sources} other source{}",
                self.open.len(),
                if sources == 1 { "" } else { "s" }
            ));
        }
        None
    }

    /// Refuses test `id` (its first datagram, from `from` at `now`): remembered, and one
    /// report of it queued unless `from` had one in the last [`REPORT_GAP_NS`].
    fn refuse(&mut self, id: u64, why: String, from: SocketAddr, now: u64) {
        self.refused += 1;
        if self.refused_ids.len() == REMEMBER_ENDED {
            self.refused_ids.pop_front();
        }
        self.refused_ids.push_back(id);
        if self.reported.len() >= REMEMBER_REPORTED {
            self.reported
                .retain(|_, t| now.saturating_sub(*t) < REPORT_GAP_NS);
        }
        let recent = self
            .reported
            .get(&from)
            .is_some_and(|t| now.saturating_sub(*t) < REPORT_GAP_NS);
        if !recent
            && self.reported.len() < REMEMBER_REPORTED
            && self.refusals.len() < MAX_PENDING_REFUSALS
        {
            self.reported.insert(from, now);
            self.refusals.push(TestReport {
                test_id: id,
                counts: Counts::default(),
                jitter_ns: 0.0,
                owd: None,
                first_arrival_ns: 0,
                last_arrival_ns: 0,
                total: None,
                fin_bytes: 0,
                drain_ms: None,
                ended: End::Refused,
                malformed: 0,
                kernel_drops: 0,
                user_us: 0,
                sys_us: 0,
                intervals: Vec::new(),
                foreign: 0,
                refused: Some(why),
            });
        }
    }

    /// The tests refused since the last call, one report each ([`End::Refused`], the reason
    /// in `refused`, nothing counted).
    pub fn refusals(&mut self) -> Vec<TestReport> {
        std::mem::take(&mut self.refusals)
    }

    fn deadline(&self, o: &Open) -> u64 {
        let idle = o.last_at.saturating_add(self.idle_ns);
        match (o.fin, o.fin_at) {
            (Some(f), Some(at)) => at
                .saturating_add(u64::from(f.drain_ms) * 1_000_000)
                .min(idle),
            _ => idle,
        }
    }

    /// When the next open test ends if nothing more arrives (receiver time).
    pub fn next_deadline(&self) -> Option<u64> {
        self.open.iter().map(|o| self.deadline(o)).min()
    }

    /// The intervals the open tests closed since the last call, each with its test id and
    /// its index in the test (the live lines of `socklab sink --udp --interval`); the final
    /// report still carries every interval.
    pub fn closed_intervals(&mut self) -> Vec<(u64, usize, Interval)> {
        let mut out = Vec::new();
        for o in &mut self.open {
            let closed = o.stats.closed_intervals();
            out.extend(
                closed[o.handed..]
                    .iter()
                    .enumerate()
                    .map(|(k, i)| (o.id, o.handed + k, *i)),
            );
            o.handed = closed.len();
        }
        out
    }

    /// The tests that have ended by `now`, in the order they opened.
    pub fn poll(&mut self, now: u64) -> Vec<TestReport> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.open.len() {
            let o = &self.open[i];
            let d = self.deadline(o);
            if d <= now {
                let drained = o.fin_at.zip(o.fin).is_some_and(|(at, f)| {
                    at.saturating_add(u64::from(f.drain_ms) * 1_000_000) == d
                });
                let o = self.open.remove(i);
                out.push(self.close(o, if drained { End::Drain } else { End::Idle }));
            } else {
                i += 1;
            }
        }
        out
    }

    /// Ends every open test (the receiver stops).
    pub fn stop(&mut self) -> Vec<TestReport> {
        let open = std::mem::take(&mut self.open);
        open.into_iter().map(|o| self.close(o, End::Stop)).collect()
    }

    fn close(&mut self, o: Open, ended: End) -> TestReport {
        if self.ended.len() == REMEMBER_ENDED {
            self.ended.pop_front();
        }
        self.ended.push_back(o.id);
        let (first, last) = o.stats.arrival_span().unwrap_or_default();
        TestReport {
            test_id: o.id,
            counts: *o.stats.counts(),
            jitter_ns: o.stats.jitter_ns(),
            owd: o.stats.owd(),
            first_arrival_ns: first,
            last_arrival_ns: last,
            total: o.fin.map(|f| f.total),
            fin_bytes: o.fin_bytes,
            drain_ms: o.fin.map(|f| f.drain_ms),
            ended,
            malformed: self.malformed - o.malformed_at_start,
            kernel_drops: 0,
            user_us: 0,
            sys_us: 0,
            intervals: o.stats.intervals(),
            foreign: o.foreign,
            refused: None,
        }
    }

    /// Tests open now.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// Datagrams that were not ours, stragglers of ended tests, and datagrams of tests refused
    /// because [`MAX_OPEN`] were open (or [`MAX_PER_SOURCE`] from their source), since the
    /// start.
    pub fn strays(&self) -> (u64, u64, u64) {
        (self.malformed, self.late, self.refused)
    }

    /// Datagrams of open tests from sources other than their owners, since the start.
    pub fn foreign(&self) -> u64 {
        self.foreign
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Source `k`: 127.0.0.1, port 40000 + k.
    fn src(k: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 40_000 + k))
    }

    fn dgram(test_id: u64, seq: u64, fin: Option<(u64, u32)>) -> Vec<u8> {
        let mut b = vec![0u8; 100];
        Header {
            test_id,
            seq,
            send_ns: 0,
            fin: fin.map(|(total, drain_ms)| Fin { total, drain_ms }),
        }
        .emit(&mut b)
        .unwrap();
        b
    }

    #[test]
    fn a_test_ends_its_drain_after_the_first_fin_and_stragglers_after_are_late() {
        let mut c = Collector::new(2000 * MS, 0);
        assert_eq!(
            c.on_datagram(0, 10, src(1), &dgram(7, 0, None)),
            Taken::Opened(7)
        );
        assert_eq!(
            c.on_datagram(1, 11, src(1), &dgram(7, 2, None)),
            Taken::Counted
        );
        // FIN 3 of a test of 5 (seqs 0..=2 data, 3 and 4 FIN), drain 50 ms.
        c.on_datagram(10 * MS, 12, src(1), &dgram(7, 3, Some((5, 50))));
        assert_eq!(c.next_deadline(), Some(60 * MS));
        // A straggler within the drain counts; a second FIN does not move the deadline.
        c.on_datagram(30 * MS, 13, src(1), &dgram(7, 1, None));
        c.on_datagram(40 * MS, 14, src(1), &dgram(7, 4, Some((5, 50))));
        assert!(c.poll(59 * MS).is_empty());
        let r = c.poll(60 * MS);
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(
            (r.test_id, r.ended, r.total, r.drain_ms),
            (7, End::Drain, Some(5), Some(50))
        );
        assert_eq!((r.counts.unique, r.counts.reordered), (5, 1));
        assert_eq!(
            (r.counts.bytes, r.fin_bytes),
            (500, 200),
            "two FINs of 100 bytes"
        );
        assert_eq!(r.lost(5), 0);
        assert_eq!((r.first_arrival_ns, r.last_arrival_ns), (10, 14));
        assert_eq!(
            c.on_datagram(70 * MS, 15, src(1), &dgram(7, 1, None)),
            Taken::Late
        );
        assert_eq!(c.open(), 0);
        assert_eq!(c.strays(), (0, 1, 0));
    }

    #[test]
    fn closed_intervals_are_handed_over_once_each_as_they_close() {
        let mut c = Collector::new(2000 * MS, 100 * MS);
        c.on_datagram(0, 1_000 * MS, src(1), &dgram(3, 0, None));
        c.on_datagram(0, 1_050 * MS, src(1), &dgram(3, 1, None));
        assert!(c.closed_intervals().is_empty(), "the first is still open");
        // Arrivals at 250 ms close the intervals starting at 0 and 100 ms.
        c.on_datagram(0, 1_250 * MS, src(1), &dgram(3, 3, None));
        let got = c.closed_intervals();
        assert_eq!(
            got.iter()
                .map(|(id, k, i)| (*id, *k, i.counts.unique, i.expected))
                .collect::<Vec<_>>(),
            [(3, 0, 2, 2), (3, 1, 0, 0)]
        );
        assert!(c.closed_intervals().is_empty(), "each once");
        c.on_datagram(0, 1_310 * MS, src(1), &dgram(3, 4, None));
        assert_eq!(c.closed_intervals()[0].1, 2);
        // The report still has every interval, the open one included.
        let r = c.stop();
        assert_eq!(r[0].intervals.len(), 4);
    }

    #[test]
    fn a_test_whose_fins_are_lost_ends_when_idle() {
        let mut c = Collector::new(500 * MS, 0);
        c.on_datagram(0, 1, src(1), &dgram(1, 0, None));
        c.on_datagram(100 * MS, 2, src(1), &dgram(1, 1, None));
        assert_eq!(c.next_deadline(), Some(600 * MS));
        assert!(c.poll(599 * MS).is_empty());
        let r = c.poll(600 * MS);
        assert_eq!(
            (r[0].ended, r[0].total, r[0].counts.unique),
            (End::Idle, None, 2)
        );
        assert_eq!(r[0].lost(10), 8);
    }

    #[test]
    fn tests_are_kept_apart_and_foreign_datagrams_counted() {
        let mut c = Collector::new(500 * MS, 0);
        c.on_datagram(0, 0, src(1), &dgram(1, 0, None));
        c.on_datagram(0, 0, src(1), &dgram(2, 0, None));
        c.on_datagram(0, 0, src(1), &dgram(2, 1, None));
        assert_eq!(
            c.on_datagram(0, 0, src(1), b"GET / HTTP/1.1\r\n"),
            Taken::Malformed
        );
        let mut bad = dgram(1, 1, None);
        bad[20] ^= 4;
        assert_eq!(c.on_datagram(0, 0, src(1), &bad), Taken::Malformed);
        assert_eq!(c.open(), 2);
        let r = c.stop();
        assert_eq!(r.iter().map(|r| r.test_id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(r[0].counts.unique, 1);
        assert_eq!(r[1].counts.unique, 2);
        assert_eq!(r[0].ended, End::Stop);
        assert_eq!(r[0].malformed, 2);
        for id in 0..MAX_OPEN as u64 {
            c.on_datagram(0, 0, src(100 + id as u16), &dgram(100 + id, 0, None));
        }
        assert_eq!(
            c.on_datagram(0, 0, src(1), &dgram(999, 0, None)),
            Taken::Refused
        );
        assert_eq!(c.strays(), (2, 0, 1));
    }

    #[test]
    fn reports_travel_as_json_and_come_back_equal() {
        let mut c = Collector::new(MS, 100 * MS);
        for seq in [0, 2, 1, 1] {
            c.on_datagram(0, 1_000 + seq, src(1), &dgram(u64::MAX, seq, None));
        }
        let r = c.stop().remove(0);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"ended\":\"stop\""), "{text}");
        let back: TestReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.test_id, u64::MAX, "u64 ids survive JSON");
        assert_eq!(back.intervals.len(), 1);
    }

    #[test]
    fn one_source_holds_at_most_its_share_and_a_refusal_is_reported_once() {
        let mut c = Collector::new(500 * MS, 0);
        // A squatter: fake tests from one socket.
        for id in 0..MAX_PER_SOURCE as u64 {
            assert_eq!(
                c.on_datagram(0, 0, src(9), &dgram(100 + id, 0, None)),
                Taken::Opened(100 + id)
            );
        }
        assert_eq!(
            c.on_datagram(0, 0, src(9), &dgram(200, 0, None)),
            Taken::Refused
        );
        assert_eq!(
            c.on_datagram(1, 0, src(9), &dgram(200, 1, None)),
            Taken::Refused,
            "a refused test stays refused"
        );
        // More new tests from the squatter within a second: counted, not reported.
        for id in 300..310 {
            assert_eq!(
                c.on_datagram(2, 0, src(9), &dgram(id, 0, None)),
                Taken::Refused
            );
        }
        let r = c.refusals();
        assert_eq!(
            r.len(),
            1,
            "one report per refused test, one a second per source"
        );
        assert_eq!((r[0].test_id, r[0].ended), (200, End::Refused));
        let why = r[0].refused.as_deref().unwrap();
        assert!(
            why.contains("127.0.0.1:40009") && why.contains("at most 4 per source"),
            "{why}"
        );
        assert!(c.refusals().is_empty());
        // Another source still gets in, and is counted exactly.
        assert_eq!(
            c.on_datagram(0, 0, src(1), &dgram(7, 0, None)),
            Taken::Opened(7)
        );
        c.on_datagram(0, 0, src(1), &dgram(7, 1, Some((2, 0))));
        let done = c.poll(1);
        assert_eq!(done.len(), 1);
        assert_eq!((done[0].test_id, done[0].counts.unique), (7, 2));
        assert_eq!(c.strays(), (0, 0, 12));
        // A second later the squatter's next refusal is reported again.
        c.on_datagram(2_000 * MS, 0, src(9), &dgram(400, 0, None));
        assert_eq!(c.refusals().len(), 1);
    }

    #[test]
    fn a_full_table_refuses_with_the_reason_and_squatters_expire_when_idle() {
        let mut c = Collector::new(500 * MS, 0);
        for k in 0..MAX_OPEN as u16 {
            c.on_datagram(0, 0, src(100 + k), &dgram(u64::from(k), 0, None));
        }
        assert_eq!(c.open(), MAX_OPEN);
        assert_eq!(
            c.on_datagram(MS, 0, src(1), &dgram(1000, 0, None)),
            Taken::Refused
        );
        let why = c.refusals().remove(0).refused.unwrap();
        assert!(
            why.contains("16 tests were open") && why.contains("from 16"),
            "{why}"
        );
        // Fake tests that stop sending expire after the idle time, and room is back.
        let gone = c.poll(500 * MS);
        assert_eq!(gone.len(), MAX_OPEN);
        assert!(gone.iter().all(|r| r.ended == End::Idle));
        assert_eq!(
            c.on_datagram(501 * MS, 0, src(2), &dgram(1001, 0, None)),
            Taken::Opened(1001)
        );
    }

    #[test]
    fn datagrams_of_a_test_from_another_source_are_not_counted_in_it() {
        let mut c = Collector::new(500 * MS, 0);
        c.on_datagram(0, 10, src(1), &dgram(7, 0, None));
        c.on_datagram(0, 11, src(1), &dgram(7, 1, None));
        // A spoofer sends into test 7: more data, a duplicate, a FIN that would end it early.
        for (seq, fin) in [(2, None), (1, None), (50, Some((60, 0)))] {
            assert_eq!(
                c.on_datagram(MS, 12, src(2), &dgram(7, seq, fin)),
                Taken::Foreign
            );
        }
        assert!(c.poll(2 * MS).is_empty(), "the foreign FIN did not end it");
        c.on_datagram(3 * MS, 13, src(1), &dgram(7, 2, Some((3, 0))));
        let r = c.poll(3 * MS).remove(0);
        assert_eq!(
            (r.counts.unique, r.counts.duplicates, r.total),
            (3, 0, Some(3))
        );
        assert_eq!((r.foreign, c.foreign()), (3, 3));
        assert_eq!(r.ended, End::Drain);
    }
}
