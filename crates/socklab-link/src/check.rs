//! `socklab netem check`: measures an emulated link and sets what it measured beside what was
//! configured.
//!
//! A sender thread (in the client namespace, or on loopback in front of a UDP proxy) sends
//! numbered, timestamped, checksummed UDP datagrams, paced so the link's queue never fills;
//! a receiver thread (in the server namespace) records arrivals. One process, one monotonic
//! clock, so one-way delays are exact. Loss, duplication, reordering and corruption are
//! compared with the expected rates through a binomial 99.9 % interval; with `rate` (or a
//! `slot` that limits its packets or bytes), a back-to-back burst measures the link's rate;
//! with a trace or a rate schedule, the probe first saturates the link and counts what it
//! delivers each second ([`super::capacity`]). The expectation is the closed form where one
//! exists, else the model replaying the datagrams as they were sent ([`super::check_model`]);
//! each row says which. The receiver stops reading when the model's last packet has left (and
//! 300 ms more) and nothing arrived for 200 ms (10 s more at most), or as soon as every
//! datagram arrived.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use socklab_impair::LinkSpec;

use crate::LinkError;

pub use super::check_compare::{closed_form_delay_ns, compare, compare_lagged};
pub use super::check_row::{CheckRow, ProbeResult, FROM_MODEL, FROM_SPEC};

/// What to send.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// Datagrams in the paced phase.
    pub packets: u64,
    /// Datagram payload size (at least 24).
    pub size: usize,
}

impl Default for CheckConfig {
    fn default() -> CheckConfig {
        CheckConfig {
            packets: 10_000,
            size: 200,
        }
    }
}

/// Where the two ends live.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Namespace of the sender (`None`: this one).
    pub sender_ns: Option<PathBuf>,
    /// Namespace of the receiver (`None`: this one).
    pub receiver_ns: Option<PathBuf>,
    /// Address the receiver binds.
    pub receiver_bind: Ipv4Addr,
    /// Port the receiver binds (0: any free one).
    pub receiver_port: u16,
    /// Maps the receiver's bound address to where the sender sends (e.g. a proxy in front).
    pub via: Option<SocketAddr>,
}

const HEADER: usize = 24;

fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Writes datagram `seq`, sent at `t_ns`, into `buf` (at least 24 bytes).
#[doc(hidden)] // for the fuzz target
pub fn fill(buf: &mut [u8], seq: u64, t_ns: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&t_ns.to_le_bytes());
    for (i, b) in buf[HEADER..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8).wrapping_mul(31);
    }
    let h = fnv(&[&buf[..16], &buf[HEADER..]]);
    buf[16..24].copy_from_slice(&h.to_le_bytes());
}

/// `(seq, send time)` of an intact datagram, `None` if its checksum fails.
#[doc(hidden)] // for the fuzz target
pub fn parse(buf: &[u8]) -> Option<(u64, u64)> {
    if buf.len() < HEADER {
        return None;
    }
    let h = u64::from_le_bytes(buf[16..24].try_into().ok()?);
    if fnv(&[&buf[..16], &buf[HEADER..]]) != h {
        return None;
    }
    Some((
        u64::from_le_bytes(buf[..8].try_into().ok()?),
        u64::from_le_bytes(buf[8..16].try_into().ok()?),
    ))
}

/// The longest delay the spec gives a packet (jitter cut at 4σ, as the model does), and the
/// longest wait for a slot.
fn max_delay(spec: &LinkSpec) -> Duration {
    let slot = slot_limits(spec, 1).map_or(0, |s| s.1);
    Duration::from_nanos(spec.delay_ns + 4 * spec.jitter_ns + slot)
}

/// A `slot`'s packets a second for packets of `len` bytes (`None`: a slot carries any number)
/// and its longest gap, ns; `None` without slots.
pub fn slot_limits(spec: &LinkSpec, len: usize) -> Option<(Option<f64>, u64)> {
    use socklab_impair::SlotDelay;
    let slot = spec.slot.filter(|s| s.is_active())?;
    let longest = match slot.delay {
        SlotDelay::Range { max_ns, .. } => max_ns,
        SlotDelay::Distribution {
            delay_ns,
            jitter_ns,
            ..
        } => delay_ns + 4 * jitter_ns,
    };
    let by_bytes = slot
        .bytes
        .map(|b| (b as usize).div_ceil(len.max(1)).max(1) as u64);
    let per_slot = match (slot.packets.map(u64::from), by_bytes) {
        (Some(p), Some(b)) => Some(p.min(b)),
        (p, b) => p.or(b),
    };
    Some((
        per_slot.map(|n| n as f64 * 1e9 / longest.max(1) as f64),
        longest,
    ))
}

/// Datagrams in the back-to-back burst that measures the rate of a `rate` or of a slot that
/// limits its packets or bytes (0: no burst): half the queue, at most 500, and no more than
/// the link carries in 2 s, so the queue drains in bounded time.
pub fn burst_len(spec: &LinkSpec, len: usize) -> u64 {
    let slot_pps = slot_limits(spec, len).and_then(|s| s.0);
    let rate_pps = spec.rate_bps.map(|r| r as f64 / (len as f64 * 8.0));
    let pps = match (rate_pps, slot_pps) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => match a.or(b) {
            Some(p) => p,
            None => return 0,
        },
    };
    ((spec.limit / 2).clamp(2, 500) as u64)
        .min((2.0 * pps) as u64)
        .max(2)
}

/// Sleeps until `due` in slices of at most 20 ms; false as soon as `stop()` says so.
fn pause_until(due: Instant, stop: &(dyn Fn() -> bool + Sync)) -> bool {
    loop {
        if stop() {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(20)));
    }
}

/// Moves the calling thread into `ns` (if any) until the guard drops.
fn enter(ns: &Option<PathBuf>) -> Result<Option<socklab_sys::netns::NetnsGuard>, LinkError> {
    ns.as_deref()
        .map(|p| socklab_sys::netns::enter(p).map_err(|e| LinkError::io("enter namespace", e)))
        .transpose()
}

/// The gap between datagrams that keeps the link's queue below half its limit and the
/// offered load below 80 % of its rate.
pub fn pacing_gap(spec: &LinkSpec, size: usize) -> Duration {
    let by_queue = 2 * max_delay(spec).as_nanos() as u64 / spec.limit.max(1) as u64;
    // A slot carries so many packets (or bytes) per gap: stay below 80 % of that.
    let by_slot = slot_limits(spec, size + 28)
        .and_then(|s| s.0)
        .map_or(0, |pps| (1e9 * 5.0 / 4.0 / pps) as u64);
    // The rate, a schedule's slowest step, a trace's slowest second.
    let sustained = match &spec.trace {
        Some(t) => Some(super::capacity::slowest_second_bps(t)),
        None => spec.sustained_bps(),
    };
    let by_rate = sustained.map_or(0, |r| {
        ((size + 28) as f64 * 8.0 * 1e9 * 5.0 / 4.0 / r.max(1.0)) as u64
    });
    // A trace's longest gap between opportunities must not fill half the queue.
    let by_gap = spec.trace.as_ref().map_or(0, |t| {
        let longest = (1..=t.len() as u64)
            .map(|j| t.opportunity_ns(j) - t.opportunity_ns(j - 1))
            .max()
            .unwrap_or(0);
        2 * longest / spec.limit.max(1) as u64
    });
    Duration::from_nanos(by_queue.max(by_rate).max(by_gap).max(by_slot).max(100_000))
}

/// Sends `cfg.packets` paced datagrams (then, with a rate, a burst) from the sender side to the
/// receiver side and returns what arrived.
pub fn probe(
    ends: &Endpoints,
    spec: &LinkSpec,
    cfg: &CheckConfig,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<ProbeResult, LinkError> {
    let size = cfg.size.max(HEADER);
    if cfg.packets == 0 {
        return Err(LinkError::Invalid(
            "`packets` 0: send at least 1 datagram (e.g. 10000)".into(),
        ));
    }
    let epoch = Instant::now();
    let gap = pacing_gap(spec, size);
    let ip = ends.via.is_none();
    let burst = burst_len(spec, if ip { size + 28 } else { size });
    let capacity = super::capacity::plan(spec);
    let (tx_addr, rx_addr) = std::sync::mpsc::channel::<Result<SocketAddr, LinkError>>();
    // The sender's last word: until when to read, and how many paced and burst datagrams it sent.
    let (tx_done, rx_done) = std::sync::mpsc::channel::<(Instant, u64, u64)>();
    std::thread::scope(|s| {
        let receiver = s.spawn(move || -> Result<ProbeResult, LinkError> {
            let _g = enter(&ends.receiver_ns)?;
            let sock =
                match UdpSocket::bind(SocketAddr::from((ends.receiver_bind, ends.receiver_port))) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx_addr.send(Err(LinkError::io("bind probe receiver", e)));
                        return Ok(ProbeResult::default());
                    }
                };
            let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(8 << 20);
            sock.set_read_timeout(Some(Duration::from_millis(20)))
                .map_err(|e| LinkError::io("SO_RCVTIMEO", e))?;
            let _ = tx_addr.send(
                sock.local_addr()
                    .map_err(|e| LinkError::io("getsockname", e)),
            );
            let mut r = ProbeResult::default();
            let total = cfg.packets + burst;
            let mut seen = vec![0u8; total as usize];
            let mut max_seq: Option<u64> = None;
            let mut buf = vec![0u8; 65536];
            let mut done: Option<(Instant, u64, u64)> = None;
            // Past the model's time, go on while datagrams still come (an emulator that fell
            // behind releases late), 200 ms of quiet or 10 s at most.
            let mut last_arrival = Instant::now();
            let (mut b_first, mut b_last, mut b_bytes) = (None::<u64>, 0u64, 0u64);
            let (mut cap_arrivals, mut cap_origin) = (Vec::new(), u64::MAX);
            loop {
                // Done when the sender says so; when it is gone (it failed), after 300 ms.
                if done.is_none() {
                    match rx_done.try_recv() {
                        Ok(d) => done = Some(d),
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                            done = Some((Instant::now() + Duration::from_millis(300), 0, 0))
                        }
                        Err(std::sync::mpsc::TryRecvError::Empty) => {}
                    }
                }
                if let Some((until, paced, bursted)) = done {
                    // Everything arrived and nothing can come twice: no need to wait longer.
                    let all = paced > 0
                        && r.unique == paced
                        && r.burst_unique == bursted
                        && spec.duplicate == 0.0;
                    let now = Instant::now();
                    let quiet = last_arrival.elapsed() >= Duration::from_millis(200);
                    if all || now >= until && quiet || now >= until + Duration::from_secs(10) {
                        break;
                    }
                }
                if stop() {
                    break;
                }
                let n = match sock.recv(&mut buf) {
                    Ok(n) => n,
                    // A socket with SO_RCVTIMEO returns EINTR on any pending signal, SA_RESTART
                    // or not: look at stop() and go on.
                    Err(e)
                        if socklab_sys::ioerr::is_timeout(&e)
                            || e.kind() == std::io::ErrorKind::Interrupted =>
                    {
                        continue
                    }
                    Err(e) => return Err(LinkError::io("recv", e)),
                };
                last_arrival = Instant::now();
                let now = epoch.elapsed().as_nanos() as u64;
                let Some((seq, sent)) = parse(&buf[..n]) else {
                    r.corrupted += 1;
                    continue;
                };
                if seq >= super::capacity::SEQ_BASE {
                    cap_arrivals.push(now);
                    cap_origin = cap_origin.min(sent);
                    continue;
                }
                let Some(slot) = seen.get_mut(seq as usize) else {
                    r.corrupted += 1;
                    continue;
                };
                *slot = slot.saturating_add(1);
                if *slot > 1 {
                    r.duplicates += 1;
                    continue;
                }
                if max_seq.is_some_and(|m| seq < m) {
                    r.reordered += 1;
                }
                max_seq = Some(max_seq.map_or(seq, |m| m.max(seq)));
                if seq < cfg.packets {
                    r.unique += 1;
                    r.delays_ns.push(now.saturating_sub(sent));
                } else {
                    r.burst_unique += 1;
                    if b_first.is_none() {
                        b_first = Some(now);
                    } else {
                        b_bytes += (n + 28) as u64;
                    }
                    b_last = now;
                }
            }
            if let Some(f) = b_first {
                if b_last > f && b_bytes > 0 {
                    r.burst_bps = Some(b_bytes as f64 * 8.0 / ((b_last - f) as f64 / 1e9));
                }
            }
            if let Some(p) = capacity {
                r.capacity = Some(super::capacity::per_second(
                    &cap_arrivals,
                    cap_origin,
                    p.seconds,
                ));
            }
            Ok(r)
        });
        let sender = s.spawn(move || -> Result<Sent, LinkError> {
            let to = rx_addr
                .recv_timeout(Duration::from_secs(5))
                .map_err(|_| LinkError::Link("the probe receiver did not start".into()))??;
            let to = ends.via.unwrap_or(to);
            let _g = enter(&ends.sender_ns)?;
            let sock = UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0)))
                .map_err(|e| LinkError::io("bind probe sender", e))?;
            sock.connect(to)
                .map_err(|e| LinkError::io("connect probe sender", e))?;
            let mut out = Sent::default();
            // A trace or a schedule: saturate first (the link's first packet is its time 0),
            // then let the queue drain.
            if let Some(p) = capacity {
                let mut cap = vec![0u8; super::capacity::payload(ends.via.is_some())];
                let t0 = Instant::now();
                let end = t0 + Duration::from_secs(p.seconds);
                let mut i = 0u64;
                while !stop() {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    let due = ((now - t0).as_secs_f64() * p.send_pps) as u64 + 1;
                    while i < due {
                        let t = epoch.elapsed().as_nanos() as u64;
                        out.origin_ns.get_or_insert(t);
                        fill(&mut cap, super::capacity::SEQ_BASE + i, t);
                        let _ = sock.send(&cap);
                        i += 1;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                pause_until(Instant::now() + p.drain, stop);
            }
            let mut buf = vec![0u8; size];
            // Each datagram a gap after the previous one left: a sender that woke late does
            // not catch up in a burst (which would queue at a rate or a slot).
            let mut due = Instant::now();
            for seq in 0..cfg.packets {
                if stop() {
                    break;
                }
                if !pause_until(due, stop) {
                    break;
                }
                due = Instant::now() + gap;
                let t = epoch.elapsed().as_nanos() as u64;
                fill(&mut buf, seq, t);
                // ECONNREFUSED from an earlier ICMP or ENOBUFS: the datagram counts as sent.
                let _ = sock.send(&buf);
                out.paced_ns.push(t);
            }
            // The model says when the last packet leaves (a slot, a trace, a schedule can hold
            // packets longer than the delay); bounded, and interruptible (the delay may be
            // hours).
            let until = |o: &Sent, margin: Duration| {
                let floor = Instant::now() + max_delay(spec) + margin;
                let sched = super::check_model::Schedule {
                    origin_ns: o.origin_ns,
                    paced_ns: &o.paced_ns,
                    burst_ns: &o.burst_ns,
                    size,
                    ip,
                };
                super::check_model::last_release_ns(spec, &sched)
                    .map(|t| {
                        let by_model = epoch + Duration::from_nanos(t) + margin;
                        by_model.min(floor + Duration::from_secs(120)).max(floor)
                    })
                    .unwrap_or(floor)
            };
            // Let the paced phase drain, then send back-to-back.
            if burst > 0 && pause_until(until(&out, Duration::from_millis(50)), stop) {
                for seq in cfg.packets..cfg.packets + burst {
                    let t = epoch.elapsed().as_nanos() as u64;
                    fill(&mut buf, seq, t);
                    let _ = sock.send(&buf);
                    out.burst_ns.push(t);
                }
            }
            let _ = tx_done.send((
                until(&out, Duration::from_millis(300)),
                out.paced_ns.len() as u64,
                out.burst_ns.len() as u64,
            ));
            Ok(out)
        });
        let sent = sender
            .join()
            .map_err(|_| LinkError::Link("the probe sender panicked".into()))?;
        let mut r = receiver
            .join()
            .map_err(|_| LinkError::Link("the probe receiver panicked".into()))??;
        let sent = sent?;
        r.sent = sent.paced_ns.len() as u64;
        r.burst_sent = sent.burst_ns.len() as u64;
        r.send_ns = sent.paced_ns;
        r.burst_send_ns = sent.burst_ns;
        r.origin_ns = sent.origin_ns;
        r.size = size;
        r.ip = ip;
        Ok(r)
    })
}

/// What the sender sent, and when (ns on the probe's clock).
#[derive(Default)]
struct Sent {
    origin_ns: Option<u64>,
    paced_ns: Vec<u64>,
    burst_ns: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_round_trip_and_detect_any_flip() {
        let mut b = vec![0u8; 64];
        fill(&mut b, 77, 123_456);
        assert_eq!(parse(&b), Some((77, 123_456)));
        for byte in 0..64 {
            if (16..24).contains(&byte) {
                continue;
            }
            let mut c = b.clone();
            c[byte] ^= 4;
            assert_eq!(parse(&c), None, "flip at {byte} undetected");
        }
        assert_eq!(parse(&b[..10]), None);
    }

    #[test]
    fn pacing_respects_queue_and_rate() {
        let s: LinkSpec = "delay 100ms".parse().unwrap();
        assert_eq!(pacing_gap(&s, 200), Duration::from_micros(200));
        let s: LinkSpec = "rate 1mbit".parse().unwrap();
        // 228 bytes at 1 Mbit/s = 1.824 ms, × 1.25.
        assert_eq!(pacing_gap(&s, 200), Duration::from_nanos(2_280_000));
        assert_eq!(
            pacing_gap(&LinkSpec::default(), 200),
            Duration::from_micros(100)
        );
    }

    #[test]
    fn comparison_flags_what_disagrees() {
        let spec: LinkSpec = "loss 10%".parse().unwrap();
        let mut r = ProbeResult {
            sent: 10_000,
            unique: 9_000,
            ..Default::default()
        };
        let rows = compare(&spec, &r);
        assert_eq!(rows[0].ok, Some(true), "{rows:?}");
        r.unique = 9_500;
        let rows = compare(&spec, &r);
        assert_eq!(rows[0].ok, Some(false), "{rows:?}");
        // No jitter, no reorder: any reordering is a failure.
        r.reordered = 3;
        let rows = compare(&spec, &r);
        assert_eq!(
            rows.iter()
                .find(|x| x.what == "reordered arrivals")
                .unwrap()
                .ok,
            Some(false)
        );
    }
}
