//! Per-interval figures of a load run (`--interval`): requests completed, failures, and the
//! response-time percentiles of each interval.
//!
//! Each generator thread keeps its current interval — a count, a failure count and an HDR
//! histogram allocated once at the start (recording allocates nothing) — and rolls over when
//! its clock passes a boundary: at the top of its event loop (which wakes at the boundary) and
//! before it counts a request, so a request belongs to the interval in which it completed.
//! Rolling over hands the interval to the [`Merger`], which adds the threads' histograms of an
//! interval together and, once every thread has moved past it, computes its percentiles and
//! hands it to the live consumer. The interval holding the end of the run is closed last, when
//! the threads have finished: it ends at the run's end (a partial interval), so the intervals
//! cover the run and their requests sum to the run's total.
//!
//! Boundaries are nominal (multiples of the interval since the run's start, on the engine's
//! clock); no boundary at or past the run's time bound is crossed, so requests that complete
//! between the bound and the moment a thread notices it count in the last interval, as they
//! count in the run's total.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::metrics::{histogram, record, Timing};

/// One interval of a load run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadInterval {
    /// Start, since the start of the run.
    pub start: Duration,
    /// End, since the start of the run.
    pub end: Duration,
    /// Requests completed in it.
    pub completed: u64,
    /// Requests that failed in it.
    pub errors: u64,
    /// Response time of the requests completed in it (open loop: from the intended send
    /// time), microseconds.
    pub latency: Timing,
}

impl LoadInterval {
    /// Its length in seconds.
    pub fn seconds(&self) -> f64 {
        self.end.saturating_sub(self.start).as_secs_f64()
    }

    /// Requests completed per second of it.
    pub fn req_per_s(&self) -> f64 {
        let s = self.seconds();
        if s > 0.0 {
            self.completed as f64 / s
        } else {
            0.0
        }
    }
}

/// A live consumer of a load run's intervals (called on a generator thread as each interval
/// closes, and on the caller's for the last one).
pub type LiveLoad = Arc<dyn Fn(&LoadInterval) + Send + Sync>;

/// The threads' share of one interval, while some thread is still in it.
struct Acc {
    hist: Histogram<u64>,
    completed: u64,
    errors: u64,
}

struct State {
    /// Per thread: the index of its open interval (`u64::MAX` once it has finished).
    open: Vec<u64>,
    pending: BTreeMap<u64, Acc>,
    /// The next interval index to close.
    next: u64,
    done: Vec<LoadInterval>,
}

/// Where the threads' intervals meet.
pub struct Merger {
    interval_ns: u64,
    live: Option<LiveLoad>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Merger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merger")
            .field("interval_ns", &self.interval_ns)
            .finish_non_exhaustive()
    }
}

impl Merger {
    /// A merger of `threads` threads' intervals of `interval`.
    pub fn new(interval: Duration, threads: usize, live: Option<LiveLoad>) -> Merger {
        Merger {
            interval_ns: u64::try_from(interval.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
            live,
            state: Mutex::new(State {
                open: vec![0; threads],
                pending: BTreeMap::new(),
                next: 0,
                done: Vec::new(),
            }),
        }
    }

    fn interval(&self, k: u64, acc: Option<&Acc>) -> LoadInterval {
        let at = |k: u64| Duration::from_nanos(k.saturating_mul(self.interval_ns));
        LoadInterval {
            start: at(k),
            end: at(k + 1),
            completed: acc.map_or(0, |a| a.completed),
            errors: acc.map_or(0, |a| a.errors),
            latency: acc.map_or_else(Timing::default, |a| Timing::from_ns(&a.hist)),
        }
    }

    /// Thread `t` hands over interval `k` (and, when `last`, says it has finished).
    fn deposit(&self, t: usize, k: u64, cur: &ThreadInterval, last: bool) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if cur.completed + cur.errors > 0 || !st.pending.contains_key(&k) {
            let acc = st.pending.entry(k).or_insert_with(|| Acc {
                hist: histogram(),
                completed: 0,
                errors: 0,
            });
            // Same bounds, auto-resize: adding cannot fail.
            let _ = acc.hist.add(&cur.hist);
            acc.completed += cur.completed;
            acc.errors += cur.errors;
        }
        st.open[t] = if last { u64::MAX } else { k + 1 };
        // Close every interval all threads still running have left.
        let min = st.open.iter().copied().min().unwrap_or(u64::MAX);
        while min != u64::MAX && st.next < min {
            let k = st.next;
            let acc = st.pending.remove(&k);
            let iv = self.interval(k, acc.as_ref());
            if let Some(live) = &self.live {
                live(&iv);
            }
            st.done.push(iv);
            st.next += 1;
        }
    }

    /// Closes what is left once every thread has finished; the last interval ends at `wall`,
    /// the run's end, and intervals that would start after it (requests a thread completed
    /// before it noticed an interrupt) count in the one before.
    pub fn finish(&self, wall: Duration) -> Vec<LoadInterval> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let pending = std::mem::take(&mut st.pending);
        let emitted = st.done.len();
        let mut done = std::mem::take(&mut st.done);
        for (k, acc) in &pending {
            done.push(self.interval(*k, Some(acc)));
        }
        while done.len() > 1 && done[done.len() - 1].start >= wall {
            let extra = done.pop().unwrap_or_default();
            let last = done.len() - 1;
            done[last].completed += extra.completed;
            done[last].errors += extra.errors;
        }
        if let Some(last) = done.last_mut() {
            last.end = wall.max(last.start);
        }
        if let Some(live) = &self.live {
            for iv in done.iter().skip(emitted) {
                live(iv);
            }
        }
        done
    }
}

/// One thread's open interval.
struct ThreadInterval {
    index: u64,
    /// Where it ends (`u64::MAX`: it holds the end of the run).
    next_ns: u64,
    hist: Histogram<u64>,
    completed: u64,
    errors: u64,
}

/// A generator thread's side of the series: nothing when `--interval` is off.
pub(super) struct ThreadSeries {
    on: Option<ThreadInterval>,
    thread: usize,
    interval_ns: u64,
    end_ns: u64,
}

impl ThreadSeries {
    /// Thread `thread` of a run whose time bound is `end_ns` (`u64::MAX`: none).
    pub(super) fn new(merger: Option<&Merger>, thread: usize, end_ns: u64) -> ThreadSeries {
        let interval_ns = merger.map_or(u64::MAX, |m| m.interval_ns);
        ThreadSeries {
            on: merger.map(|_| ThreadInterval {
                index: 0,
                next_ns: if interval_ns >= end_ns {
                    u64::MAX
                } else {
                    interval_ns
                },
                hist: histogram(),
                completed: 0,
                errors: 0,
            }),
            thread,
            interval_ns,
            end_ns,
        }
    }

    /// When the open interval ends (`u64::MAX` when off or last): the event loop wakes then.
    pub(super) fn next_ns(&self) -> u64 {
        self.on.as_ref().map_or(u64::MAX, |c| c.next_ns)
    }

    /// Moves to the interval holding `now`, handing the closed ones to `m`.
    #[inline]
    pub(super) fn roll(&mut self, now: u64, m: Option<&Merger>) {
        let (Some(c), Some(m)) = (self.on.as_mut(), m) else {
            return;
        };
        while now >= c.next_ns {
            m.deposit(self.thread, c.index, c, false);
            c.hist.reset();
            c.completed = 0;
            c.errors = 0;
            c.index += 1;
            let next = c.next_ns.saturating_add(self.interval_ns);
            c.next_ns = if next >= self.end_ns { u64::MAX } else { next };
        }
    }

    /// A request completed at `now` after `latency_ns`.
    #[inline]
    pub(super) fn completed(&mut self, now: u64, latency_ns: u64, m: Option<&Merger>) {
        self.roll(now, m);
        if let Some(c) = self.on.as_mut() {
            record(&mut c.hist, latency_ns);
            c.completed += 1;
        }
    }

    /// A request failed at `now`.
    #[inline]
    pub(super) fn failed(&mut self, now: u64, m: Option<&Merger>) {
        self.roll(now, m);
        if let Some(c) = self.on.as_mut() {
            c.errors += 1;
        }
    }

    /// The thread has finished: hands over its open interval.
    pub(super) fn finish(&mut self, m: Option<&Merger>) {
        if let (Some(c), Some(m)) = (self.on.as_ref(), m) {
            m.deposit(self.thread, c.index, c, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn live() -> (LiveLoad, Arc<Mutex<Vec<LoadInterval>>>) {
        let seen: Arc<Mutex<Vec<LoadInterval>>> = Arc::default();
        let s = seen.clone();
        (
            Arc::new(move |i: &LoadInterval| s.lock().unwrap().push(*i)),
            seen,
        )
    }

    /// Two threads, 100 ms intervals, a 350 ms run: each request counts in the interval in
    /// which it completed, an interval closes (live) once both threads left it, the last ends
    /// at the run's end, and the counts sum to the total.
    #[test]
    fn threads_merge_per_interval_and_the_counts_sum_to_the_total() {
        let (l, seen) = live();
        let merger = Merger::new(Duration::from_millis(100), 2, Some(l));
        let end = 350 * MS;
        let mut a = ThreadSeries::new(Some(&merger), 0, end);
        let mut b = ThreadSeries::new(Some(&merger), 1, end);
        let m = Some(&merger);
        a.completed(10 * MS, 1000, m);
        a.completed(99 * MS, 2000, m);
        b.completed(50 * MS, 3000, m);
        b.failed(60 * MS, m);
        a.completed(150 * MS, 1000, m); // a leaves interval 0
        assert!(seen.lock().unwrap().is_empty(), "b is still in interval 0");
        b.roll(120 * MS, m); // b leaves it too
        assert_eq!(seen.lock().unwrap().len(), 1);
        // a sleeps through interval 1 into 2; b finishes its quota in interval 1.
        a.completed(230 * MS, 5000, m);
        b.completed(180 * MS, 1000, m);
        b.finish(m);
        // Past the time bound: no boundary at or after 350 ms is crossed.
        a.completed(360 * MS, 1000, m);
        assert_eq!(a.next_ns(), u64::MAX, "interval 3 holds the end");
        a.finish(m);
        let got = merger.finish(Duration::from_nanos(end));
        let counts: Vec<(u64, u64)> = got.iter().map(|i| (i.completed, i.errors)).collect();
        assert_eq!(counts, [(3, 1), (2, 0), (1, 0), (1, 0)]);
        let bounds: Vec<(u128, u128)> = got
            .iter()
            .map(|i| (i.start.as_millis(), i.end.as_millis()))
            .collect();
        assert_eq!(bounds, [(0, 100), (100, 200), (200, 300), (300, 350)]);
        assert_eq!(got[0].latency.count, 3);
        assert!(
            (got[0].latency.max_us - 3.0).abs() < 0.01,
            "{:?}",
            got[0].latency
        );
        assert!((got[3].req_per_s() - 1.0 / 0.05).abs() < 1e-9);
        assert_eq!(
            &*seen.lock().unwrap(),
            &got,
            "every interval went live once, in order"
        );
    }

    /// Interrupted: a thread that had not noticed the stop crossed a boundary after the run's
    /// end; its requests count in the last interval, which ends at the run's end.
    #[test]
    fn requests_after_an_interrupt_count_in_the_last_interval() {
        let m = Merger::new(Duration::from_millis(100), 1, None);
        let mut a = ThreadSeries::new(Some(&m), 0, u64::MAX);
        a.completed(50 * MS, 1000, Some(&m));
        a.completed(120 * MS, 1000, Some(&m));
        a.completed(210 * MS, 1000, Some(&m));
        a.finish(Some(&m));
        let got = m.finish(Duration::from_millis(180));
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[1].completed, got[1].end),
            (2, Duration::from_millis(180))
        );
    }

    #[test]
    fn off_records_nothing() {
        let mut a = ThreadSeries::new(None, 0, u64::MAX);
        a.completed(5, 5, None);
        a.failed(5, None);
        a.finish(None);
        assert_eq!(a.next_ns(), u64::MAX);
    }
}
