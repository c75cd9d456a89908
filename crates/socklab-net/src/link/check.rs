//! `socklab netem check`: measures an emulated link and sets what it measured beside what was
//! configured.
//!
//! A sender thread (in the client namespace, or on loopback in front of a UDP proxy) sends
//! numbered, timestamped, checksummed UDP datagrams, paced so the link's queue never fills;
//! a receiver thread (in the server namespace) records arrivals. One process, one monotonic
//! clock, so one-way delays are exact. Loss, duplication, reordering and corruption are
//! compared with the configured rates through a binomial 99.9 % interval; with `rate`, a
//! back-to-back burst measures the serialisation rate; with a trace or a rate schedule, the
//! probe first saturates the link and counts what it delivers each second
//! ([`super::capacity`]).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use socklab_impair::LinkSpec;

use crate::NetError;

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

/// One line of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRow {
    /// What is compared.
    pub what: String,
    /// Configured value (text).
    pub configured: String,
    /// Measured value (text).
    pub measured: String,
    /// Whether the measurement agrees (`None`: no verdict, shown for information).
    pub ok: Option<bool>,
}

/// What a probe in one direction saw.
#[derive(Debug, Clone, Default)]
pub struct ProbeResult {
    /// Datagrams sent.
    pub sent: u64,
    /// Distinct datagrams received intact.
    pub unique: u64,
    /// Extra copies received.
    pub duplicates: u64,
    /// Arrivals with a sequence number below one already seen.
    pub reordered: u64,
    /// Arrivals whose checksum did not match (corruption reached the application).
    pub corrupted: u64,
    /// One-way delays of first copies, ns.
    pub delays_ns: Vec<u64>,
    /// Burst phase: measured rate, bits/s (IP packet bits), if measured.
    pub burst_bps: Option<f64>,
    /// Capacity phase (trace or rate schedule): datagrams delivered in each second.
    pub capacity: Option<Vec<u64>>,
}

impl CheckRow {
    /// `{"what", "configured", "measured", "verdict": "ok" | "differs" | null}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "what": self.what,
            "configured": self.configured,
            "measured": self.measured,
            "verdict": self.ok.map(|ok| if ok { "ok" } else { "differs" }),
        })
    }
}

impl ProbeResult {
    /// The raw counts as JSON: `sent`, `unique`, `duplicates`, `reordered`, `corrupted`,
    /// `delay_ns` (`{"n", "mean", "sd", "p50", "p99", "max"}` of first copies, or null),
    /// `burst_bps` (null without a rate) and `capacity_per_second` (datagrams delivered in each
    /// second of the saturating phase; null without a trace or a rate schedule).
    pub fn to_json(&self) -> serde_json::Value {
        let d: Vec<f64> = self.delays_ns.iter().map(|&x| x as f64).collect();
        let delay = socklab_stats::summarize(&d).map(|s| {
            serde_json::json!({
                "n": d.len(),
                "mean": s.mean,
                "sd": s.sd,
                "p50": s.median,
                "p99": socklab_stats::quantile(&d, 0.99).unwrap_or(s.max),
                "max": s.max,
            })
        });
        serde_json::json!({
            "sent": self.sent,
            "unique": self.unique,
            "duplicates": self.duplicates,
            "reordered": self.reordered,
            "corrupted": self.corrupted,
            "delay_ns": delay,
            "burst_bps": self.burst_bps,
            "capacity_per_second": self.capacity,
        })
    }
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

/// The longest delay the spec gives a packet (jitter cut at 4σ, as the model does).
fn max_delay(spec: &LinkSpec) -> Duration {
    Duration::from_nanos(spec.delay_ns + 4 * spec.jitter_ns)
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
fn enter(ns: &Option<PathBuf>) -> Result<Option<socklab_sys::netns::NetnsGuard>, NetError> {
    ns.as_deref()
        .map(|p| socklab_sys::netns::enter(p).map_err(|e| NetError::io("enter namespace", e)))
        .transpose()
}

/// The gap between datagrams that keeps the link's queue below half its limit and the
/// offered load below 80 % of its rate.
pub fn pacing_gap(spec: &LinkSpec, size: usize) -> Duration {
    let by_queue = 2 * max_delay(spec).as_nanos() as u64 / spec.limit.max(1) as u64;
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
    Duration::from_nanos(by_queue.max(by_rate).max(by_gap).max(100_000))
}

/// Sends `cfg.packets` paced datagrams (then, with a rate, a burst) from the sender side to the
/// receiver side and returns what arrived.
pub fn probe(
    ends: &Endpoints,
    spec: &LinkSpec,
    cfg: &CheckConfig,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<ProbeResult, NetError> {
    let size = cfg.size.max(HEADER);
    if cfg.packets == 0 {
        return Err(NetError::Invalid(
            "--packets 0: send at least 1 datagram (e.g. 10000)".into(),
        ));
    }
    let epoch = Instant::now();
    let gap = pacing_gap(spec, size);
    let drain = max_delay(spec) + Duration::from_millis(300);
    let burst = if spec.rate_bps.is_some() {
        (spec.limit / 2).clamp(2, 500) as u64
    } else {
        0
    };
    let capacity = super::capacity::plan(spec);
    let (tx_addr, rx_addr) = std::sync::mpsc::channel::<Result<SocketAddr, NetError>>();
    let (tx_done, rx_done) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let receiver = s.spawn(move || -> Result<ProbeResult, NetError> {
            let _g = enter(&ends.receiver_ns)?;
            let sock =
                match UdpSocket::bind(SocketAddr::from((ends.receiver_bind, ends.receiver_port))) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx_addr.send(Err(NetError::io("bind probe receiver", e)));
                        return Ok(ProbeResult::default());
                    }
                };
            let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(8 << 20);
            sock.set_read_timeout(Some(Duration::from_millis(20)))
                .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
            let _ = tx_addr.send(
                sock.local_addr()
                    .map_err(|e| NetError::io("getsockname", e)),
            );
            let mut r = ProbeResult::default();
            let total = cfg.packets + burst;
            let mut seen = vec![0u8; total as usize];
            let mut max_seq: Option<u64> = None;
            let mut buf = vec![0u8; 65536];
            let mut done_at: Option<Instant> = None;
            let (mut b_first, mut b_last, mut b_bytes) = (None::<u64>, 0u64, 0u64);
            let (mut cap_arrivals, mut cap_origin) = (Vec::new(), u64::MAX);
            loop {
                // Done when the sender says so, or when it is gone (it failed).
                if done_at.is_none()
                    && !matches!(
                        rx_done.try_recv(),
                        Err(std::sync::mpsc::TryRecvError::Empty)
                    )
                {
                    done_at = Some(Instant::now());
                }
                if done_at.is_some_and(|d| d.elapsed() > drain) || stop() {
                    break;
                }
                let n = match sock.recv(&mut buf) {
                    Ok(n) => n,
                    // A socket with SO_RCVTIMEO returns EINTR on any pending signal, SA_RESTART
                    // or not: look at stop() and go on.
                    Err(e)
                        if crate::error::is_timeout(&e)
                            || e.kind() == std::io::ErrorKind::Interrupted =>
                    {
                        continue
                    }
                    Err(e) => return Err(NetError::io("recv", e)),
                };
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
                r.unique += 1;
                if max_seq.is_some_and(|m| seq < m) {
                    r.reordered += 1;
                }
                max_seq = Some(max_seq.map_or(seq, |m| m.max(seq)));
                if seq < cfg.packets {
                    r.delays_ns.push(now.saturating_sub(sent));
                } else {
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
        let sender = s.spawn(move || -> Result<u64, NetError> {
            let to = rx_addr
                .recv_timeout(Duration::from_secs(5))
                .map_err(|_| NetError::Link("the probe receiver did not start".into()))??;
            let to = ends.via.unwrap_or(to);
            let _g = enter(&ends.sender_ns)?;
            let sock = UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0)))
                .map_err(|e| NetError::io("bind probe sender", e))?;
            sock.connect(to)
                .map_err(|e| NetError::io("connect probe sender", e))?;
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
                        fill(
                            &mut cap,
                            super::capacity::SEQ_BASE + i,
                            epoch.elapsed().as_nanos() as u64,
                        );
                        let _ = sock.send(&cap);
                        i += 1;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                pause_until(Instant::now() + p.drain, stop);
            }
            let mut buf = vec![0u8; size];
            let start = Instant::now();
            let mut sent = 0;
            for seq in 0..cfg.packets {
                if stop() {
                    break;
                }
                let due = start + gap * seq as u32;
                if !pause_until(due, stop) {
                    break;
                }
                fill(&mut buf, seq, epoch.elapsed().as_nanos() as u64);
                // ECONNREFUSED from an earlier ICMP or ENOBUFS: the datagram counts as sent.
                let _ = sock.send(&buf);
                sent += 1;
            }
            let drained = Instant::now() + max_delay(spec) + Duration::from_millis(50);
            // Let the paced phase drain (interruptibly: the delay may be hours), then send
            // back-to-back.
            if burst > 0 && pause_until(drained, stop) {
                for seq in cfg.packets..cfg.packets + burst {
                    fill(&mut buf, seq, epoch.elapsed().as_nanos() as u64);
                    let _ = sock.send(&buf);
                }
            }
            let _ = tx_done.send(());
            Ok(sent)
        });
        let sent = sender
            .join()
            .map_err(|_| NetError::Link("the probe sender panicked".into()))?;
        let mut r = receiver
            .join()
            .map_err(|_| NetError::Link("the probe receiver panicked".into()))??;
        r.sent = sent?;
        Ok(r)
    })
}

/// Half-width of the binomial 99.9 % interval of a rate `p` over `n` trials (normal
/// approximation, at least one trial's worth).
fn half_width(p: f64, n: f64) -> f64 {
    socklab_stats::normal_quantile(0.9995) * (p * (1.0 - p) / n).sqrt() + 1.0 / n
}

fn pct(x: f64) -> String {
    format!("{:.2} %", 100.0 * x)
}

fn rate_row(what: &str, configured: f64, measured: f64, n: f64, exact: bool) -> CheckRow {
    let hw = half_width(configured, n) * if exact { 1.0 } else { 3.0 };
    CheckRow {
        what: what.into(),
        configured: pct(configured),
        measured: pct(measured),
        ok: Some((measured - configured).abs() <= hw),
    }
}

/// Compares one direction's probe with its spec.
pub fn compare(spec: &LinkSpec, r: &ProbeResult) -> Vec<CheckRow> {
    let sent = r.sent.max(1) as f64;
    let p_loss = spec.loss.stationary_loss_rate();
    // Copies: with probability `duplicate` a second copy; a loss takes one copy.
    let d = spec.duplicate;
    // A corrupted datagram never counts as received intact: without fixcsum it fails the UDP
    // checksum and the kernel drops it; with fixcsum it reaches us and fails ours.
    let c = spec.corrupt;
    let expect_missing = ((1.0 - d) * p_loss) + (1.0 - (1.0 - d) * p_loss) * c;
    let missing = 1.0 - r.unique.min(r.sent) as f64 / sent;
    let correlated = !matches!(
        spec.loss,
        socklab_impair::Loss::None
            | socklab_impair::Loss::Random {
                correlation: 0.0,
                ..
            }
    );
    let mut rows = vec![rate_row(
        if c > 0.0 {
            "not received intact (loss + corrupt)"
        } else {
            "lost"
        },
        expect_missing,
        missing,
        sent,
        !correlated,
    )];
    let expect_dup = d * (1.0 - p_loss) * (1.0 - c);
    rows.push(rate_row(
        "duplicated",
        expect_dup,
        r.duplicates as f64 / sent,
        sent,
        true,
    ));
    if spec.fix_checksum {
        rows.push(rate_row(
            "corrupted (reached us)",
            spec.corrupt,
            r.corrupted as f64 / sent,
            sent,
            true,
        ));
    } else {
        rows.push(CheckRow {
            what: "corrupted (reached us)".into(),
            configured: "0 (kernel drops them)".into(),
            measured: r.corrupted.to_string(),
            ok: Some(r.corrupted == 0),
        });
    }
    let reorder_expected = spec.reorder.is_some() || spec.jitter_ns > 0 && !spec.keep_order;
    rows.push(CheckRow {
        what: "reordered arrivals".into(),
        configured: if reorder_expected {
            "some".into()
        } else {
            "none".into()
        },
        measured: pct(r.reordered as f64 / r.unique.max(1) as f64),
        ok: if reorder_expected {
            None
        } else {
            Some(r.reordered == 0)
        },
    });
    let delays: Vec<f64> = r.delays_ns.iter().map(|&x| x as f64).collect();
    if let Some(sum) = socklab_stats::summarize(&delays) {
        let p99 = socklab_stats::quantile(&delays, 0.99).unwrap_or(sum.max);
        let ms = |x: f64| format!("{:.3} ms", x / 1e6);
        // The stack adds tens of µs; allow 0.5 ms + 5 % (more with a rate: queueing).
        let tol =
            0.5e6 + 0.05 * spec.delay_ns as f64 + if spec.rate_bps.is_some() { 1e6 } else { 0.0 };
        rows.push(CheckRow {
            what: "one-way delay mean".into(),
            configured: ms(spec.delay_ns as f64),
            measured: ms(sum.mean),
            // Slots, traces and schedules add waits of their own: no verdict then.
            ok: ((spec.distribution == socklab_impair::Distribution::Uniform
                || spec.jitter_ns == 0)
                && spec.slot.is_none()
                && spec.trace.is_none()
                && spec.rate_schedule.is_none())
            .then_some((sum.mean - spec.delay_ns as f64).abs() <= tol),
        });
        rows.push(CheckRow {
            what: "one-way delay sd".into(),
            configured: format!("jitter {}", ms(spec.jitter_ns as f64)),
            measured: ms(sum.sd.unwrap_or(0.0)),
            ok: None,
        });
        rows.push(CheckRow {
            what: "one-way delay p50 / p99 / max".into(),
            configured: String::new(),
            measured: format!(
                "{:.3} / {:.3} / {:.3} ms",
                sum.median / 1e6,
                p99 / 1e6,
                sum.max / 1e6
            ),
            ok: None,
        });
    }
    if let Some(per_second) = &r.capacity {
        rows.extend(super::capacity::rows(spec, per_second));
    }
    if let Some(rate) = spec.rate_bps {
        let measured = r.burst_bps.unwrap_or(0.0);
        rows.push(CheckRow {
            what: "rate (burst)".into(),
            configured: format!("{:.2} Mbit/s", rate as f64 / 1e6),
            measured: format!("{:.2} Mbit/s", measured / 1e6),
            ok: Some((measured - rate as f64).abs() <= 0.1 * rate as f64),
        });
    }
    rows
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
