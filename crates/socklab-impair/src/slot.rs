//! netem's `slot`: packets leave in bursts ("slots"), as on links that aggregate frames (Wi-Fi,
//! DOCSIS, cellular). Syntax, as `tc`'s:
//!
//! ```text
//! slot MIN_DELAY [MAX_DELAY] [packets N] [bytes N]
//! slot distribution {uniform|normal|pareto|paretonormal} DELAY JITTER [packets N] [bytes N]
//! ```
//!
//! Semantics, as `sch_netem`'s `netem_dequeue` and `get_slot_next`: a slot opens at the time
//! the link starts; at a dequeue attempt the head packet (the one due first) leaves when it is
//! due and the slot is open, and each packet spends one of the slot's `packets` and its length
//! of the slot's `bytes`; when either runs out, or when the head packet falls due only after the
//! open slot began, the next slot opens a gap later, drawn uniformly from `[MIN, MAX)` or from
//! the distribution (never negative). Dequeue attempts happen when a packet arrives and when the
//! next packet or slot is due, as netem's watchdog. `packets 0` and `bytes 0` mean no limit, as
//! in netem.

use std::fmt;

use crate::distribution::Distribution;
use crate::error::ParseSpecError;
use crate::rng::Rng;
use crate::syntax::{err, parse_time, time, Tokens};

/// How far apart slots open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotDelay {
    /// Uniform in `[min_ns, max_ns)` (`min_ns` exactly when equal).
    Range {
        /// Shortest gap.
        min_ns: u64,
        /// Longest gap.
        max_ns: u64,
    },
    /// `delay_ns` with `jitter_ns` of the distribution's shape (netem's `tabledist`).
    Distribution {
        /// Shape of the gap's variation.
        distribution: Distribution,
        /// Mean gap.
        delay_ns: u64,
        /// Scale of the variation (positive).
        jitter_ns: u64,
    },
}

/// netem's `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The gap between slots.
    pub delay: SlotDelay,
    /// Packets a slot may carry (`None`: no limit).
    pub packets: Option<u32>,
    /// Bytes a slot may carry (`None`: no limit).
    pub bytes: Option<u32>,
}

impl Slot {
    /// Whether it does anything: netem turns slotting off when every delay is 0.
    pub fn is_active(&self) -> bool {
        match self.delay {
            SlotDelay::Range { min_ns, max_ns } => min_ns | max_ns != 0,
            SlotDelay::Distribution { jitter_ns, .. } => jitter_ns != 0,
        }
    }

    /// Parses what follows `slot`.
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Slot, ParseSpecError> {
        let delay = if t
            .peek()
            .is_some_and(|w| w.eq_ignore_ascii_case("distribution"))
        {
            t.next();
            let ex = "slot distribution normal 10ms 2ms";
            let name = t.value(
                "slot distribution",
                "uniform, normal, pareto or paretonormal",
                ex,
            )?;
            let distribution = Distribution::from_name(name).ok_or_else(|| {
                err(
                    "slot distribution",
                    name,
                    "unknown distribution; use uniform, normal, pareto or paretonormal",
                )
            })?;
            let d = t.value("slot distribution", "a delay and a jitter", ex)?;
            let delay_ns = parse_time("slot delay", d)?;
            let j = t.value("slot distribution", "a jitter after the delay", ex)?;
            let jitter_ns = parse_time("slot jitter", j)?;
            if jitter_ns == 0 {
                return Err(err(
                    "slot jitter",
                    j,
                    "must be positive (netem refuses 0), e.g. slot distribution normal 10ms 2ms; for fixed gaps write slot 10ms",
                ));
            }
            SlotDelay::Distribution {
                distribution,
                delay_ns,
                jitter_ns,
            }
        } else {
            let v = t.value("slot", "a time", "slot 10ms 20ms packets 8")?;
            let min_ns = parse_time("slot", v)?;
            let max_ns = match t.next_value() {
                Some(m) => {
                    let max = parse_time("slot max", m)?;
                    if max < min_ns {
                        return Err(err(
                            "slot max",
                            m,
                            &format!(
                                "the longest gap must be at least the shortest ({})",
                                time(min_ns)
                            ),
                        ));
                    }
                    max
                }
                None => min_ns,
            };
            SlotDelay::Range { min_ns, max_ns }
        };
        let mut slot = Slot {
            delay,
            packets: None,
            bytes: None,
        };
        while let Some(w) = t.peek() {
            let (ctx, example) = match w.to_ascii_lowercase().as_str() {
                "packets" => ("slot packets", "slot 10ms packets 8"),
                "bytes" => ("slot bytes", "slot 10ms bytes 12000"),
                _ => break,
            };
            t.next();
            let v = t.value(ctx, "a whole number", example)?;
            let n: u32 = v
                .parse()
                .ok()
                .filter(|&n| n <= i32::MAX as u32)
                .ok_or_else(|| {
                    err(
                        ctx,
                        v,
                        &format!(
                            "use a whole number from 0 (no limit) to 2147483647, e.g. {example}"
                        ),
                    )
                })?;
            let n = (n > 0).then_some(n);
            if ctx == "slot packets" {
                slot.packets = n;
            } else {
                slot.bytes = n;
            }
        }
        Ok(slot)
    }
}

impl fmt::Display for Slot {
    /// `tc`'s syntax, after the word `slot`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.delay {
            SlotDelay::Range { min_ns, max_ns } if min_ns == max_ns => {
                write!(f, "{}", time(min_ns))?
            }
            SlotDelay::Range { min_ns, max_ns } => write!(f, "{} {}", time(min_ns), time(max_ns))?,
            SlotDelay::Distribution {
                distribution,
                delay_ns,
                jitter_ns,
            } => write!(
                f,
                "distribution {distribution} {} {}",
                time(delay_ns),
                time(jitter_ns)
            )?,
        }
        if let Some(p) = self.packets {
            write!(f, " packets {p}")?;
        }
        if let Some(b) = self.bytes {
            write!(f, " bytes {b}")?;
        }
        Ok(())
    }
}

/// The slot state of one direction (netem's `q->slot`), with its own random stream.
#[derive(Debug, Clone)]
pub(crate) struct SlotGate {
    slot: Slot,
    rng: Rng,
    /// When the current (or next) slot opens.
    next: u64,
    packets_left: i64,
    bytes_left: i64,
}

impl SlotGate {
    pub(crate) fn new(slot: Slot, seed: u64) -> SlotGate {
        SlotGate {
            slot,
            rng: Rng::new(seed),
            next: 0,
            packets_left: 0,
            bytes_left: 0,
        }
    }

    /// The first slot opens when the link starts (netem: when the qdisc is configured).
    pub(crate) fn start(&mut self, origin: u64) {
        self.next = origin;
        self.refill();
    }

    fn refill(&mut self) {
        self.packets_left = self.slot.packets.map_or(i64::from(i32::MAX), i64::from);
        self.bytes_left = self.slot.bytes.map_or(i64::from(i32::MAX), i64::from);
    }

    /// netem's `get_slot_next`.
    fn next_slot(&mut self, now: u64) {
        let gap = match self.slot.delay {
            SlotDelay::Range { min_ns, max_ns } => {
                let r = u128::from(self.rng.next_u32());
                min_ns + ((u128::from(max_ns - min_ns) * r) >> 32) as u64
            }
            SlotDelay::Distribution {
                distribution,
                delay_ns,
                jitter_ns,
            } => {
                let (a, b) = (self.rng.next_u32(), self.rng.next_u32());
                distribution.delay_ns(delay_ns, jitter_ns, a, b)
            }
        };
        self.next = now.saturating_add(gap);
        self.refill();
    }

    /// When a dequeue attempt is next worth making, the head packet being due at `due`.
    pub(crate) fn wake(&self, due: u64) -> u64 {
        due.max(self.next)
    }

    /// A dequeue attempt at `now` for a head packet of `len` bytes due at `due`: true when it
    /// leaves now (and is charged to the slot).
    pub(crate) fn try_pass(&mut self, now: u64, due: u64, len: usize) -> bool {
        if self.next < due {
            self.next_slot(now);
        }
        if due <= now && self.next <= now {
            self.packets_left -= 1;
            self.bytes_left -= len as i64;
            if self.packets_left <= 0 || self.bytes_left <= 0 {
                self.next_slot(now);
            }
            true
        } else {
            false
        }
    }
}
