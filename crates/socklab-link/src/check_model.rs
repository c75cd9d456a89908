//! What `socklab netem check` should measure, from the model itself (issue 24 item 5).
//!
//! Where a closed form exists (random loss, duplication, corruption; the mean of a symmetric
//! delay distribution plus one packet's serialisation; a fixed rate) the check uses it. Where
//! the figures depend on the arrivals' timing (`slot`, a trace, a rate schedule, an `aqm`,
//! `fifo` jitter, `reorder`, a skewed delay distribution), the check replays the datagrams it
//! actually sent, at the times it sent them, through the sans-IO [`Emulator`] on a simulated
//! clock, with [`REPLAYS`] seeds of its own, and takes the mean of what the replays
//! delivered: loss, duplicates, one-way delays, the burst's rate. The same replay tells when
//! the model's last packet leaves, which is how long the receiver waits for the queues to
//! drain before it counts what was lost.

use std::collections::HashMap;

use socklab_impair::{EventKind, LinkSpec};

/// Seeded replays averaged into an expectation.
pub const REPLAYS: u64 = 4;

/// What the probe sent, on the probe's clock (ns).
#[derive(Debug, Clone, Copy)]
pub struct Schedule<'a> {
    /// The capacity phase's first send (a trace or a schedule: the link's time 0).
    pub origin_ns: Option<u64>,
    /// Send time of each paced datagram, by sequence number.
    pub paced_ns: &'a [u64],
    /// Send time of each burst datagram.
    pub burst_ns: &'a [u64],
    /// Datagram payload, bytes.
    pub size: usize,
    /// The model sees IP packets (`tun`, `netem`: payload + 28 bytes) rather than UDP
    /// payloads (`udp-proxy`).
    pub ip: bool,
}

impl Schedule<'_> {
    /// The packet length the model sees.
    pub fn len(&self) -> usize {
        if self.ip {
            self.size + 28
        } else {
            self.size
        }
    }

    /// Whether nothing was sent.
    pub fn is_empty(&self) -> bool {
        self.paced_ns.is_empty() && self.burst_ns.is_empty()
    }
}

/// What one seeded replay delivered, counted as the probe's receiver counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    /// Distinct paced datagrams delivered intact.
    pub paced_intact: u64,
    /// Extra intact copies of paced datagrams.
    pub duplicates: u64,
    /// Time in the link of each paced datagram's first intact copy, ns (by sequence number).
    pub delays_ns: Vec<u64>,
    /// Distinct burst datagrams delivered intact.
    pub burst_intact: u64,
    /// The burst's rate as the receiver measures it (IP bits after the first arrival over the
    /// time from the first to the last), bits/s.
    pub burst_bps: Option<f64>,
    /// When the model's last packet left, ns (`None`: nothing left).
    pub last_release_ns: Option<u64>,
}

#[derive(Clone, Copy)]
enum Src {
    Origin,
    Paced(usize),
    Burst(usize),
}

/// Replays `s` through a fresh model of `spec` seeded with `seed`, to the last packet.
pub fn replay(spec: &LinkSpec, s: &Schedule<'_>, seed: u64) -> Replay {
    let mut emu = socklab_impair::Emulator::new(spec.clone(), seed);
    if !s.ip {
        emu = emu.udp_payloads();
    }
    emu.observe(true);
    let first = s.paced_ns.iter().chain(s.burst_ns).copied().min();
    // A capacity phase started the link earlier: one packet then sets its time 0 (its queue
    // has drained since, by the probe's wait).
    let origin = s
        .origin_ns
        .filter(|o| first.is_none_or(|f| *o <= f))
        .map(|o| (o, Src::Origin));
    let mut arrivals = origin
        .into_iter()
        .chain(
            s.paced_ns
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, Src::Paced(i))),
        )
        .chain(
            s.burst_ns
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, Src::Burst(i))),
        )
        .peekable();
    let len = s.len();
    let mut src_of: HashMap<u64, Src> = HashMap::new();
    let mut corrupted: HashMap<u64, ()> = HashMap::new();
    let mut pending_src = Src::Origin;
    let mut out = Replay::default();
    let mut first_at = vec![None::<u64>; s.paced_ns.len()];
    let mut burst_seen = vec![false; s.burst_ns.len()];
    let (mut b_first, mut b_last, mut b_bits) = (None::<u64>, 0u64, 0f64);
    // Every step either takes an arrival or a model decision; bounded all the same.
    let mut budget = 10_000_000 + 64 * (s.paced_ns.len() + s.burst_ns.len()) as u64;
    let mut last_poll = None;
    while budget > 0 {
        budget -= 1;
        let next_arrival = arrivals.peek().map(|a| a.0);
        let model = emu.poll_timeout();
        // A decision time that did not move since the last poll: let the arrival go first.
        let stuck = model.is_some() && model == last_poll;
        match (model, next_arrival) {
            // The model's own events at the nanosecond of an arrival come first, as live.
            (Some(t), a) if !stuck && a.is_none_or(|a| t <= a) => {
                last_poll = Some(t);
                while emu.poll_release(t).is_some() {}
            }
            (_, Some(_)) => {
                let (t, src) = arrivals.next().expect("peeked");
                pending_src = src;
                emu.enqueue(t, vec![0u8; len]);
                last_poll = None;
            }
            _ => break,
        }
        for ev in emu.drain_events() {
            match ev.kind {
                EventKind::Arrived { .. } => {
                    src_of.insert(ev.packet, pending_src);
                }
                EventKind::Duplicated { copy } => {
                    if let Some(&src) = src_of.get(&ev.packet) {
                        src_of.insert(copy, src);
                    }
                }
                EventKind::Corrupted => {
                    corrupted.insert(ev.packet, ());
                }
                EventKind::Released { .. } => {
                    out.last_release_ns = Some(out.last_release_ns.unwrap_or(0).max(ev.at_ns));
                    if corrupted.contains_key(&ev.packet) {
                        continue;
                    }
                    match src_of.get(&ev.packet) {
                        Some(Src::Paced(i)) => match &mut first_at[*i] {
                            Some(_) => out.duplicates += 1,
                            slot @ None => {
                                *slot = Some(ev.at_ns);
                                out.paced_intact += 1;
                            }
                        },
                        Some(Src::Burst(i)) if !burst_seen[*i] => {
                            burst_seen[*i] = true;
                            out.burst_intact += 1;
                            if b_first.is_none() {
                                b_first = Some(ev.at_ns);
                            } else {
                                b_bits += ((s.size + 28) * 8) as f64;
                            }
                            b_last = b_last.max(ev.at_ns);
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
    }
    out.delays_ns = first_at
        .iter()
        .zip(s.paced_ns)
        .filter_map(|(a, &t)| a.map(|a| a.saturating_sub(t)))
        .collect();
    if let Some(f) = b_first {
        if b_last > f && b_bits > 0.0 {
            out.burst_bps = Some(b_bits / ((b_last - f) as f64 / 1e9));
        }
    }
    out
}

/// The mean of [`REPLAYS`] seeded replays.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// Fraction of paced datagrams not received intact.
    pub paced_missing: f64,
    /// Extra intact copies per paced datagram sent.
    pub duplicates: f64,
    /// Mean one-way delay of first copies, ns.
    pub delay_mean_ns: Option<f64>,
    /// Their median, ns.
    pub delay_p50_ns: Option<f64>,
    /// Their standard deviation, ns.
    pub delay_sd_ns: Option<f64>,
    /// Fraction of burst datagrams not received intact.
    pub burst_missing: Option<f64>,
    /// The burst's rate, bits/s.
    pub burst_bps: Option<f64>,
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = xs.fold((0u32, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / f64::from(n))
}

/// What the model expects of the schedule `s` (the mean of [`REPLAYS`] replays).
pub fn expect(spec: &LinkSpec, s: &Schedule<'_>) -> Expectation {
    let runs: Vec<Replay> = (0..REPLAYS)
        .map(|k| replay(spec, s, 0x5eed_0000 + k))
        .collect();
    let paced = s.paced_ns.len().max(1) as f64;
    let stat = |f: &dyn Fn(&[f64]) -> Option<f64>| {
        mean(runs.iter().filter_map(|r| {
            let d: Vec<f64> = r.delays_ns.iter().map(|&x| x as f64).collect();
            f(&d)
        }))
    };
    Expectation {
        paced_missing: mean(runs.iter().map(|r| 1.0 - r.paced_intact as f64 / paced))
            .unwrap_or(0.0),
        duplicates: mean(runs.iter().map(|r| r.duplicates as f64 / paced)).unwrap_or(0.0),
        delay_mean_ns: stat(&|d| socklab_stats::summarize(d).map(|s| s.mean)),
        delay_p50_ns: stat(&|d| socklab_stats::quantile(d, 0.5)),
        delay_sd_ns: stat(&|d| socklab_stats::summarize(d).and_then(|s| s.sd)),
        burst_missing: (!s.burst_ns.is_empty()).then(|| {
            mean(
                runs.iter()
                    .map(|r| 1.0 - r.burst_intact as f64 / s.burst_ns.len() as f64),
            )
            .unwrap_or(0.0)
        }),
        burst_bps: mean(runs.iter().filter_map(|r| r.burst_bps)),
    }
}

/// When the model's last packet of `s` leaves (one replay), ns on the probe's clock.
pub fn last_release_ns(spec: &LinkSpec, s: &Schedule<'_>) -> Option<u64> {
    replay(spec, s, 0x5eed_0000).last_release_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paced(n: usize, gap_ns: u64) -> Vec<u64> {
        (0..n as u64).map(|i| 1_000_000 + i * gap_ns).collect()
    }

    fn sched<'a>(p: &'a [u64], b: &'a [u64]) -> Schedule<'a> {
        Schedule {
            origin_ns: None,
            paced_ns: p,
            burst_ns: b,
            size: 200,
            ip: true,
        }
    }

    #[test]
    fn a_plain_delay_is_the_delay_and_nothing_is_lost() {
        let spec: LinkSpec = "delay 10ms".parse().unwrap();
        let p = paced(1000, 1_000_000);
        let e = expect(&spec, &sched(&p, &[]));
        assert_eq!(e.paced_missing, 0.0);
        assert_eq!(e.delay_mean_ns, Some(10e6));
        let last = last_release_ns(&spec, &sched(&p, &[])).unwrap();
        assert_eq!(last, p[999] + 10_000_000);
    }

    #[test]
    fn random_loss_replayed_agrees_with_its_closed_form() {
        let spec: LinkSpec = "loss 10% duplicate 5%".parse().unwrap();
        let p = paced(20_000, 100_000);
        let e = expect(&spec, &sched(&p, &[]));
        // 99.9 % binomial half-width over 4 × 20 000 trials is about 0.35 %.
        assert!((e.paced_missing - 0.095).abs() < 0.004, "{e:?}");
        assert!((e.duplicates - 0.05 * 0.9).abs() < 0.003, "{e:?}");
    }
}
