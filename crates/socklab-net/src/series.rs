//! Interval time series of TCP streams (`--interval`, `--omit`), as iperf3 and flent show them.
//!
//! A sampler thread, independent of the writer (a writer blocked in `write()` on a stalled link
//! does not stop the samples), wakes at absolute deadlines — every `interval` from the start
//! of the run, plus once exactly at `omit` — so nothing drifts, and reads for every stream the
//! sender's byte counter (an atomic the sender bumps after each round) and `TCP_INFO` of the
//! socket (read through a duplicate of its descriptor; the kernel locks the socket). The
//! interval boundaries are the real times of these readings; the first interval starts at the
//! run's start and the last one ends at the run's real end (the caller's final reading), so the
//! intervals cover the run without gaps or overlaps.
//!
//! **Bytes per interval** are bytes *delivered*: the growth of `tcpi_bytes_acked` (what the
//! receiver acknowledged) since the run started, capped at the bytes written (which removes the
//! FIN, counted by the kernel as one byte). Bytes written are kept too (`written`), but the
//! first intervals of a run write a whole send buffer into the kernel at memory speed: bytes
//! written would show a burst no link carried. Delivered bytes sum to the end-to-end byte count
//! of the run (the final reading is taken when the sink has read everything), so the intervals'
//! Gbit/s agree with the run's end-to-end figure. Kernels without `tcpi_bytes_acked` (before
//! 4.1) fall back to bytes written.
//!
//! **A down stream** (the sink sends, `--reverse`, `--bidir`) is sampled on the client, at its
//! receiving socket: bytes per interval are the bytes the client read, and of `TCP_INFO` only
//! the receiver's view counts (`tcpi_rcv_rtt`, `tcpi_rcv_space`); the sender's congestion
//! window, RTT and retransmissions are the sink's, reported once at the end of the stream.
//!
//! The run's end is taken under the same lock as each reading ([`Sampler::end`]), so a reading
//! is either before the end (kept, and printed live) or not taken at all: a reading the sampler
//! happened to take just after the sink answered would otherwise be printed live and then
//! dropped from the stored series.
//!
//! The pure part — readings in, intervals out ([`intervals`]) — is separate from the thread
//! ([`Sampler`]) and unit-tested.

use std::os::fd::{AsFd, OwnedFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socklab_sys::tcp::{tcp_info, TcpInfo, INFINITE_SSTHRESH};
use socklab_sys::usage::{getrusage, Who};

use crate::NetError;
use socklab_units::format_duration;

/// Shortest sampling interval.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// Most intervals one stream of one run records; past it the sampler stops and the last
/// interval runs to the end.
pub const MAX_INTERVALS: usize = 100_000;

/// Which way a stream's data flows, seen from the client that runs the test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server (`socklab bulk` today).
    #[default]
    Up,
    /// Server to client (a reverse test).
    Down,
}

impl Direction {
    /// `up` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Direction {
    type Err = String;

    fn from_str(s: &str) -> Result<Direction, String> {
        match s {
            "up" => Ok(Direction::Up),
            "down" => Ok(Direction::Down),
            _ => Err(format!("direction '{s}': use up or down")),
        }
    }
}

/// When a series is sampled: every `interval` from the start, and once at `omit` (the end of
/// the start that the summary leaves out, iperf3's `-O`). Both off: no series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sampling {
    /// Sample every this long.
    pub interval: Option<Duration>,
    /// Leave the run's first this long out of its summary (needs a reading there).
    pub omit: Option<Duration>,
}

impl Sampling {
    /// Whether anything is sampled.
    pub fn is_on(&self) -> bool {
        self.interval.is_some() || self.omit.is_some()
    }

    /// The first deadline strictly after `t` (time since the start of the run).
    pub fn next_after(&self, t: Duration) -> Option<Duration> {
        let by_interval = self.interval.filter(|i| !i.is_zero()).map(|i| {
            let n = t.as_nanos() / i.as_nanos() + 1;
            Duration::from_nanos(u64::try_from(n * i.as_nanos()).unwrap_or(u64::MAX))
        });
        let omit = self.omit.filter(|o| *o > t);
        match (by_interval, omit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Checks the values against a run of `duration` (`None`: a run bounded otherwise, whose
    /// length is not known in advance). The message names the flag and the fix.
    pub fn check(&self, duration: Option<Duration>) -> Result<(), String> {
        if let Some(i) = self.interval {
            if i.is_zero() {
                return Err(
                    "`interval` 0s: give a positive interval, e.g. `interval` 100ms (a line per interval)"
                        .into(),
                );
            }
            if i < MIN_INTERVAL {
                return Err(format!(
                    "`interval` {} is shorter than {}: sample every 1ms or more",
                    format_duration(i),
                    format_duration(MIN_INTERVAL)
                ));
            }
            if let Some(d) = duration {
                let n = d.as_nanos().div_ceil(i.as_nanos());
                if n > MAX_INTERVALS as u128 {
                    return Err(format!(
                        "`interval` {} over `duration` {} makes {n} intervals, more than {MAX_INTERVALS}: use a longer interval",
                        format_duration(i),
                        format_duration(d)
                    ));
                }
            }
        }
        if let Some(o) = self.omit.filter(|o| !o.is_zero()) {
            match duration {
                None => {
                    return Err(format!(
                        "`omit` {} needs a run bounded by `duration` (with `iterations` or `bytes` its length is unknown): use `duration`",
                        format_duration(o)
                    ))
                }
                Some(d) if o >= d => {
                    return Err(format!(
                        "`omit` {} is not shorter than `duration` {}: nothing would be left to summarise; omit less or run longer (e.g. `omit` {} `duration` {})",
                        format_duration(o),
                        format_duration(d),
                        format_duration(d / 4),
                        format_duration(d)
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// One reading of a stream: when, which deadline it was for, the sender's byte counter and the
/// socket's `TCP_INFO`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Time since the start of the run.
    pub at: Duration,
    /// The deadline it was taken for (the run's end for the final reading).
    pub deadline: Duration,
    /// Bytes the application had written (up) or read (down) so far.
    pub written: u64,
    /// `TCP_INFO` at that moment.
    pub info: TcpInfo,
}

/// One interval of one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpInterval {
    /// Stream number (0 for a single stream).
    pub stream: u32,
    /// Which way the data flows.
    pub direction: Direction,
    /// Start, since the start of the run.
    pub start: Duration,
    /// End, since the start of the run.
    pub end: Duration,
    /// Inside the omitted start (`--omit`): stored and shown, not summarised.
    pub omitted: bool,
    /// Bytes delivered (acknowledged by the receiver) during the interval.
    pub delivered: u64,
    /// Bytes the application wrote during the interval.
    pub written: u64,
    /// Segments retransmitted during the interval.
    pub retrans: u32,
    /// Congestion window at the end, segments.
    pub cwnd: u32,
    /// Smoothed RTT at the end, microseconds.
    pub srtt_us: u32,
    /// RTT variance at the end, microseconds.
    pub rttvar_us: u32,
    /// Slow-start threshold at the end, segments (`None` before the first loss).
    pub ssthresh: Option<u32>,
    /// The kernel's last delivery-rate sample, bytes/s.
    pub delivery_rate: Option<u64>,
    /// Pacing rate at the end, bytes/s (`None`: unlimited).
    pub pacing_rate: Option<u64>,
    /// Bytes in flight at the end (the kernel's packets in flight × MSS).
    pub inflight_bytes: u64,
    /// Bytes written but not yet sent at the end.
    pub notsent_bytes: u32,
    /// Microseconds of the interval the connection was busy sending (jiffy resolution).
    pub busy_us: Option<u64>,
    /// Microseconds of the interval limited by the receiver's window.
    pub rwnd_limited_us: Option<u64>,
    /// Microseconds of the interval limited by the send buffer.
    pub sndbuf_limited_us: Option<u64>,
    /// The receiving socket's RTT estimate at the end, µs (a down stream, read on the client;
    /// `None` for an up stream or before the receiver has one).
    pub rcv_rtt_us: Option<u32>,
    /// The receiving socket's space estimate at the end, bytes (a down stream).
    pub rcv_space: Option<u32>,
}

impl TcpInterval {
    /// Its length in seconds.
    pub fn seconds(&self) -> f64 {
        self.end.saturating_sub(self.start).as_secs_f64()
    }

    /// Delivered throughput in Gbit/s.
    pub fn gbps(&self) -> f64 {
        let s = self.seconds();
        if s > 0.0 {
            self.delivered as f64 * 8.0 / s / 1e9
        } else {
            0.0
        }
    }
}

/// Whether `tcpi_bytes_acked` is in the struct the kernel returned.
fn has_bytes_acked(i: &TcpInfo) -> bool {
    i.len >= 128
}

/// Bytes delivered from `base` to `r`: acknowledged (capped at written) when the kernel says,
/// else written; a receiving stream counts what it read.
fn delivered(direction: Direction, base: &Reading, r: &Reading) -> u64 {
    let written = r.written.saturating_sub(base.written);
    if direction == Direction::Up && has_bytes_acked(&base.info) && has_bytes_acked(&r.info) {
        r.info
            .bytes_acked
            .saturating_sub(base.info.bytes_acked)
            .min(written)
    } else {
        written
    }
}

/// The interval from `prev` to `cur` of a stream whose run started at `base`.
fn interval(
    (stream, direction): (u32, Direction),
    base: &Reading,
    prev: &Reading,
    cur: &Reading,
    omit: Option<Duration>,
) -> TcpInterval {
    let (p, c) = (&prev.info, &cur.info);
    let delta = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
    TcpInterval {
        stream,
        direction,
        start: prev.at,
        end: cur.at,
        omitted: omit.is_some_and(|o| cur.deadline <= o),
        delivered: delivered(direction, base, cur).saturating_sub(delivered(direction, base, prev)),
        written: cur.written.saturating_sub(prev.written),
        retrans: c.total_retrans.saturating_sub(p.total_retrans),
        cwnd: c.snd_cwnd,
        srtt_us: c.rtt_us,
        rttvar_us: c.rttvar_us,
        ssthresh: (c.snd_ssthresh < INFINITE_SSTHRESH).then_some(c.snd_ssthresh),
        delivery_rate: c.delivery_rate,
        pacing_rate: (c.pacing_rate != u64::MAX).then_some(c.pacing_rate),
        inflight_bytes: u64::from(c.packets_in_flight()) * u64::from(c.snd_mss),
        notsent_bytes: c.notsent_bytes,
        busy_us: delta(p.busy_time_us, c.busy_time_us),
        rwnd_limited_us: delta(p.rwnd_limited_us, c.rwnd_limited_us),
        sndbuf_limited_us: delta(p.sndbuf_limited_us, c.sndbuf_limited_us),
        rcv_rtt_us: (direction == Direction::Down && c.rcv_rtt_us > 0).then_some(c.rcv_rtt_us),
        rcv_space: (direction == Direction::Down).then_some(c.rcv_space),
    }
}

/// The intervals of one stream: from `base` (the start of the run, time 0) through each
/// reading in turn; the last reading is the run's end. A reading that does not move time
/// forward is skipped — but the last one, the run's end, takes the place of the reading
/// before it — so the intervals are contiguous, never overlap, and their delivered bytes sum
/// to what was delivered from `base` to the last reading.
pub fn intervals(
    stream: u32,
    direction: Direction,
    base: &Reading,
    readings: &[Reading],
    omit: Option<Duration>,
) -> Vec<TcpInterval> {
    let base = Reading {
        at: Duration::ZERO,
        ..*base
    };
    let mut bounds = Vec::with_capacity(readings.len() + 1);
    bounds.push(base);
    for (k, r) in readings.iter().enumerate() {
        let prev = bounds[bounds.len() - 1];
        if r.at > prev.at {
            bounds.push(*r);
        } else if k + 1 == readings.len() && bounds.len() > 1 {
            let n = bounds.len();
            bounds[n - 1] = Reading { at: prev.at, ..*r };
        }
    }
    bounds
        .windows(2)
        .map(|w| interval((stream, direction), &base, &w[0], &w[1], omit))
        .collect()
}

/// What a sampled run yields: its intervals and what the sampling itself cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesOutput {
    /// Every stream's intervals (stream by stream, each in time order).
    pub intervals: Vec<TcpInterval>,
    /// CPU time (user + system) of the sampler thread over the run.
    pub sampler_cpu: Duration,
}

/// A live consumer of intervals (called on the sampler's thread as each interval closes, and
/// on the caller's for the last one).
pub type LiveTcp = Arc<dyn Fn(&TcpInterval) + Send + Sync>;

/// One stream the sampler reads.
#[derive(Debug)]
pub struct Probe {
    /// Stream number.
    pub stream: u32,
    /// Which way its data flows.
    pub direction: Direction,
    /// A duplicate of its socket's descriptor.
    pub fd: OwnedFd,
    /// The application's byte counter for it.
    pub counter: Arc<AtomicU64>,
}

/// The sampler thread of a run's streams.
pub struct Sampler {
    meta: Vec<(u32, Direction)>,
    bases: Vec<Reading>,
    omit: Option<Duration>,
    live: Option<LiveTcp>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<(Vec<Vec<Reading>>, Duration)>>,
    /// The run's end, once known; held while the thread takes a reading.
    ended: Arc<Mutex<Option<Duration>>>,
    t0: Instant,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("streams", &self.meta)
            .field("omit", &self.omit)
            .finish_non_exhaustive()
    }
}

impl Sampler {
    /// Takes each stream's base reading (time 0: call it just after `t0`, before any byte of
    /// the run is written) and starts the thread.
    pub fn start(
        probes: Vec<Probe>,
        sampling: Sampling,
        t0: Instant,
        live: Option<LiveTcp>,
    ) -> Result<Sampler, NetError> {
        let bases: Vec<Reading> = probes
            .iter()
            .map(|p| Reading {
                at: Duration::ZERO,
                deadline: Duration::ZERO,
                written: p.counter.load(Ordering::Relaxed),
                info: tcp_info(p.fd.as_fd()).unwrap_or_default(),
            })
            .collect();
        let meta: Vec<(u32, Direction)> = probes.iter().map(|p| (p.stream, p.direction)).collect();
        let (tx, rx) = mpsc::channel();
        let ended: Arc<Mutex<Option<Duration>>> = Arc::default();
        let (m, b, l, e) = (meta.clone(), bases.clone(), live.clone(), ended.clone());
        let thread = std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || {
                let clock = Clock { t0, ended: &e };
                sample_loop(probes, &m, &b, sampling, &clock, &rx, l.as_ref())
            })
            .map_err(|e| NetError::io("starting the sampler thread", e))?;
        Ok(Sampler {
            meta,
            bases,
            omit: sampling.omit,
            live,
            stop: Some(tx),
            thread: Some(thread),
            ended,
            t0,
        })
    }

    /// The run has ended: its time since the start, taken under the readings' lock, after which
    /// the thread takes no more readings. A second call returns the first one's time.
    pub fn end(&self) -> Duration {
        self.ender().end()
    }

    /// A handle that ends the run from another thread (the last stream of a test to finish).
    pub fn ender(&self) -> Ender {
        Ender {
            ended: self.ended.clone(),
            t0: self.t0,
        }
    }

    /// Stops the thread and returns every stream's intervals, the last of each ending at
    /// `end` with the final `(counter, TCP_INFO)` of that stream given in `finals` (in probe
    /// order). Readings the thread took at or after `end` are dropped.
    pub fn finish(mut self, end: Duration, finals: &[(u64, TcpInfo)]) -> SeriesOutput {
        drop(self.stop.take());
        let (readings, sampler_cpu) = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let mut out = Vec::new();
        for (i, (meta, base)) in self.meta.iter().zip(&self.bases).enumerate() {
            let mut rs: Vec<Reading> = readings
                .get(i)
                .map(|r| r.iter().filter(|r| r.at < end).copied().collect())
                .unwrap_or_default();
            let Some(&(written, info)) = finals.get(i) else {
                continue;
            };
            rs.push(Reading {
                at: end,
                deadline: end,
                written,
                info,
            });
            let ivs = intervals(meta.0, meta.1, base, &rs, self.omit);
            if let (Some(live), Some(last)) = (&self.live, ivs.last()) {
                live(last);
            }
            out.extend(ivs);
        }
        SeriesOutput {
            intervals: out,
            sampler_cpu,
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Ends a sampled run ([`Sampler::ender`]): cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct Ender {
    ended: Arc<Mutex<Option<Duration>>>,
    t0: Instant,
}

impl Ender {
    /// The run has ended now: its time since the start, taken under the readings' lock (no
    /// reading follows it). A second call returns the first one's time.
    pub fn end(&self) -> Duration {
        let mut e = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        *e.get_or_insert_with(|| self.t0.elapsed())
    }
}

/// The sampler's view of the run's clock: its start, and its end once known.
struct Clock<'a> {
    t0: Instant,
    ended: &'a Mutex<Option<Duration>>,
}

/// The sampler thread: reads every stream at each deadline until told to stop.
fn sample_loop(
    probes: Vec<Probe>,
    meta: &[(u32, Direction)],
    bases: &[Reading],
    sampling: Sampling,
    clock: &Clock<'_>,
    stop: &mpsc::Receiver<()>,
    live: Option<&LiveTcp>,
) -> (Vec<Vec<Reading>>, Duration) {
    let t0 = clock.t0;
    let mut out: Vec<Vec<Reading>> = probes.iter().map(|_| Vec::with_capacity(64)).collect();
    let mut last = Duration::ZERO;
    while let Some(mut next) = sampling.next_after(last) {
        // Woken late (a descheduled thread): skip the deadlines already past, but never the
        // omit deadline, which the summary needs.
        let now = t0.elapsed();
        while next < now && Some(next) != sampling.omit {
            match sampling.next_after(next) {
                Some(n) if n <= now => next = n,
                _ => break,
            }
        }
        let wait = next.saturating_sub(t0.elapsed());
        match stop.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => break,
        }
        // Read every stream under the lock the run's end is taken under (not the printing).
        let taken = {
            let ended = clock.ended.lock().unwrap_or_else(|p| p.into_inner());
            if ended.is_some() {
                break;
            }
            let at = t0.elapsed();
            let mut taken = Vec::with_capacity(probes.len());
            for (i, p) in probes.iter().enumerate() {
                let written = p.counter.load(Ordering::Relaxed);
                if let Ok(info) = tcp_info(p.fd.as_fd()) {
                    let r = Reading {
                        at,
                        deadline: next,
                        written,
                        info,
                    };
                    taken.push((i, out[i].last().copied(), r));
                    out[i].push(r);
                }
            }
            taken
        };
        if let Some(live) = live {
            for (i, prev, r) in &taken {
                let prev = prev.as_ref().unwrap_or(&bases[*i]);
                live(&interval(meta[*i], &bases[*i], prev, r, sampling.omit));
            }
        }
        last = next;
        if out.iter().any(|o| o.len() >= MAX_INTERVALS) {
            break;
        }
    }
    (out, getrusage(Who::Thread).cpu())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A reading at `at` ms (deadline `deadline` ms), `written` bytes written, `acked` bytes
    /// acknowledged.
    fn reading(at: u64, deadline: u64, written: u64, acked: u64) -> Reading {
        Reading {
            at: ms(at),
            deadline: ms(deadline),
            written,
            info: TcpInfo {
                bytes_acked: acked,
                len: 232,
                ..TcpInfo::default()
            },
        }
    }

    #[test]
    fn deadlines_are_multiples_of_the_interval_and_the_omit_time() {
        let s = Sampling {
            interval: Some(ms(300)),
            omit: Some(ms(1000)),
        };
        let mut t = Duration::ZERO;
        let mut got = Vec::new();
        while let Some(n) = s.next_after(t) {
            if n > ms(2000) {
                break;
            }
            got.push(n.as_millis());
            t = n;
        }
        assert_eq!(got, [300, 600, 900, 1000, 1200, 1500, 1800]);
        let only_omit = Sampling {
            interval: None,
            omit: Some(ms(500)),
        };
        assert_eq!(only_omit.next_after(Duration::ZERO), Some(ms(500)));
        assert_eq!(only_omit.next_after(ms(500)), None);
        assert!(!Sampling::default().is_on());
    }

    #[test]
    fn bad_sampling_is_one_line_naming_the_flag_and_the_fix() {
        let s = |i: Option<u64>, o: Option<u64>| Sampling {
            interval: i.map(ms),
            omit: o.map(ms),
        };
        let d = Some(ms(10_000));
        assert!(s(Some(0), None)
            .check(d)
            .unwrap_err()
            .starts_with("`interval` 0s"));
        let e = Sampling {
            interval: Some(Duration::from_micros(500)),
            omit: None,
        }
        .check(d)
        .unwrap_err();
        assert!(e.contains("shorter than 1ms"), "{e}");
        let e = s(None, Some(10_000)).check(d).unwrap_err();
        assert!(
            e.starts_with("`omit` 10s is not shorter than `duration` 10s"),
            "{e}"
        );
        let e = s(None, Some(12_000)).check(d).unwrap_err();
        assert!(e.contains("not shorter"), "{e}");
        let e = s(Some(100), Some(1000)).check(None).unwrap_err();
        assert!(e.contains("needs a run bounded by `duration`"), "{e}");
        let e = s(Some(1), None)
            .check(Some(Duration::from_secs(600)))
            .unwrap_err();
        assert!(e.contains("600000 intervals"), "{e}");
        assert_eq!(s(Some(100), Some(2000)).check(d), Ok(()));
        assert_eq!(
            s(Some(100), Some(0)).check(None),
            Ok(()),
            "--omit 0 omits nothing"
        );
        for m in [
            s(Some(0), None).check(d),
            s(None, Some(10_000)).check(d),
            s(None, Some(1)).check(None),
        ] {
            assert!(!m.unwrap_err().contains('\n'));
        }
    }

    /// Acknowledged bytes, capped at written: the FIN's byte never shows, and a kernel that
    /// does not report acknowledgements falls back to bytes written.
    #[test]
    fn delivered_bytes_are_acknowledged_bytes_capped_at_written() {
        // The base counts the SYN and the request line as acknowledged.
        let base = reading(0, 0, 0, 1 + 20);
        let rs = [
            reading(100, 100, 5000, 21 + 3000),
            reading(205, 200, 9000, 21 + 8000),
            // The end: every byte and the FIN acknowledged.
            reading(250, 250, 9000, 21 + 9000 + 1),
        ];
        let iv = intervals(0, Direction::Up, &base, &rs, None);
        let d: Vec<u64> = iv.iter().map(|i| i.delivered).collect();
        assert_eq!(d, [3000, 5000, 1000]);
        let w: Vec<u64> = iv.iter().map(|i| i.written).collect();
        assert_eq!(w, [5000, 4000, 0]);
        assert_eq!((iv[1].start, iv[1].end), (ms(100), ms(205)));
        assert!((iv[0].gbps() - 3000.0 * 8.0 / 0.1 / 1e9).abs() < 1e-12);
        // Without tcpi_bytes_acked (len 0): bytes written.
        let old: Vec<Reading> = rs
            .iter()
            .map(|r| Reading {
                info: TcpInfo::default(),
                ..*r
            })
            .collect();
        let base_old = Reading {
            info: TcpInfo::default(),
            ..base
        };
        let iv = intervals(0, Direction::Up, &base_old, &old, None);
        assert_eq!(
            iv.iter().map(|i| i.delivered).collect::<Vec<_>>(),
            [5000, 4000, 0]
        );
    }

    #[test]
    fn intervals_up_to_the_omit_deadline_are_flagged() {
        let base = reading(0, 0, 0, 0);
        let rs = [
            reading(101, 100, 10, 10),
            reading(201, 200, 20, 20),
            reading(250, 250, 30, 30),
            reading(301, 300, 40, 40),
            reading(330, 330, 50, 50),
        ];
        let iv = intervals(0, Direction::Up, &base, &rs, Some(ms(250)));
        let flags: Vec<bool> = iv.iter().map(|i| i.omitted).collect();
        assert_eq!(flags, [true, true, true, false, false]);
    }

    #[test]
    fn kernel_fields_map_to_the_interval() {
        let base = reading(0, 0, 0, 0);
        let mut a = reading(100, 100, 100, 100);
        a.info.total_retrans = 2;
        a.info.busy_time_us = Some(40_000);
        a.info.snd_ssthresh = INFINITE_SSTHRESH;
        a.info.pacing_rate = u64::MAX;
        let mut b = reading(200, 200, 200, 200);
        b.info.total_retrans = 7;
        b.info.busy_time_us = Some(120_000);
        b.info.rwnd_limited_us = Some(5);
        b.info.snd_ssthresh = 30;
        b.info.pacing_rate = 1_000_000;
        b.info.unacked = 10;
        b.info.snd_mss = 1000;
        let iv = intervals(0, Direction::Up, &base, &[a, b], None);
        assert_eq!((iv[0].retrans, iv[1].retrans), (2, 5));
        assert_eq!(iv[1].busy_us, Some(80_000));
        assert_eq!(iv[1].rwnd_limited_us, None, "no earlier value to subtract");
        assert_eq!((iv[0].ssthresh, iv[1].ssthresh), (None, Some(30)));
        assert_eq!(
            (iv[0].pacing_rate, iv[1].pacing_rate),
            (None, Some(1_000_000))
        );
        assert_eq!(iv[1].inflight_bytes, 10_000);
    }

    proptest! {
        /// Any sequence of readings (times out of order or repeated, counters that jump):
        /// the intervals start at 0, end at the last reading, touch end to start, and their
        /// delivered bytes sum to what was delivered over the run.
        #[test]
        fn intervals_cover_the_run_without_gaps_and_sum_to_the_total(
            steps in proptest::collection::vec((0u64..50_000, 0u64..1_000_000, 0u64..1_000_000), 1..200),
        ) {
            let base = reading(0, 0, 0, 7);
            let (mut t, mut w, mut a) = (0u64, 0u64, 7u64);
            let mut rs = Vec::new();
            for (dt, dw, da) in steps {
                t += dt;
                w += dw;
                a += da;
                rs.push(Reading { at: Duration::from_micros(t), ..reading(0, 0, w, a) });
            }
            let iv = intervals(0, Direction::Up, &base, &rs, None);
            let last = rs.last().unwrap();
            if last.at.is_zero() {
                prop_assert!(iv.is_empty());
                return Ok(());
            }
            prop_assert_eq!(iv[0].start, Duration::ZERO);
            prop_assert_eq!(iv.last().unwrap().end, last.at);
            for p in iv.windows(2) {
                prop_assert_eq!(p[0].end, p[1].start);
                prop_assert!(p[0].start < p[0].end);
            }
            let sum: u64 = iv.iter().map(|i| i.delivered).sum();
            prop_assert_eq!(sum, delivered(Direction::Up, &base, last));
            let written: u64 = iv.iter().map(|i| i.written).sum();
            prop_assert_eq!(written, last.written);
        }
    }
}
