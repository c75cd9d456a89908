//! [`Aqm`]: the queue discipline at the emulated bottleneck (socklab's keyword `aqm`), with its
//! parameters, parsed and printed in the spec's syntax:
//!
//! ```text
//! aqm fifo                                                   drop-tail (the default)
//! aqm codel [target TIME] [interval TIME]                    RFC 8289 (5ms, 100ms)
//! aqm fq_codel [flows N] [quantum BYTES] [target TIME] [interval TIME]
//!                                                            RFC 8290 (1024, 1514, 5ms, 100ms)
//! aqm pie [target TIME] [tupdate TIME] [alpha A] [beta B]    RFC 8033 (15ms, 15ms, 0.125, 1.25)
//! ```
//!
//! Only non-default parameters are printed; the queue's size is the spec's `limit` (packets, in
//! all flows together for fq_codel); `ecn` makes them mark ECN-capable packets instead of
//! dropping them.

use std::fmt;

use crate::error::ParseSpecError;
use crate::syntax::{err, parse_time, time, Tokens};

/// CoDel's default target (RFC 8289).
pub const CODEL_TARGET_NS: u64 = 5_000_000;
/// CoDel's default interval (RFC 8289).
pub const CODEL_INTERVAL_NS: u64 = 100_000_000;
/// fq_codel's default number of flow queues (RFC 8290, Linux).
pub const FQ_FLOWS: u32 = 1024;
/// fq_codel's default DRR quantum in bytes (RFC 8290: an Ethernet frame).
pub const FQ_QUANTUM: u32 = 1514;
/// PIE's default target queue delay, QDELAY_REF (RFC 8033).
pub const PIE_TARGET_NS: u64 = 15_000_000;
/// PIE's default update period, T_UPDATE (RFC 8033).
pub const PIE_TUPDATE_NS: u64 = 15_000_000;
/// PIE's default alpha, 1/s (RFC 8033).
pub const PIE_ALPHA: f64 = 0.125;
/// PIE's default beta, 1/s (RFC 8033).
pub const PIE_BETA: f64 = 1.25;

/// CoDel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodelConfig {
    /// Acceptable standing queue delay.
    pub target_ns: u64,
    /// Window over which the delay must stay above target before dropping starts.
    pub interval_ns: u64,
}

impl Default for CodelConfig {
    fn default() -> CodelConfig {
        CodelConfig {
            target_ns: CODEL_TARGET_NS,
            interval_ns: CODEL_INTERVAL_NS,
        }
    }
}

/// fq_codel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FqCodelConfig {
    /// Flow queues packets are hashed into by their 5-tuple.
    pub flows: u32,
    /// Bytes a flow may send per round of the deficit round robin.
    pub quantum: u32,
    /// Each flow queue's CoDel.
    pub codel: CodelConfig,
}

impl Default for FqCodelConfig {
    fn default() -> FqCodelConfig {
        FqCodelConfig {
            flows: FQ_FLOWS,
            quantum: FQ_QUANTUM,
            codel: CodelConfig::default(),
        }
    }
}

/// PIE's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PieConfig {
    /// Target queue delay (QDELAY_REF).
    pub target_ns: u64,
    /// Period of the drop probability's update (T_UPDATE).
    pub tupdate_ns: u64,
    /// Weight of the delay's distance from target, 1/s.
    pub alpha: f64,
    /// Weight of the delay's trend, 1/s.
    pub beta: f64,
}

impl Default for PieConfig {
    fn default() -> PieConfig {
        PieConfig {
            target_ns: PIE_TARGET_NS,
            tupdate_ns: PIE_TUPDATE_NS,
            alpha: PIE_ALPHA,
            beta: PIE_BETA,
        }
    }
}

/// The queue discipline at the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Aqm {
    /// Drop-tail FIFO: a packet arriving to `limit` queued packets is dropped.
    #[default]
    Fifo,
    /// CoDel (RFC 8289): drops at the head when the queue delay stays above target.
    Codel(CodelConfig),
    /// FQ-CoDel (RFC 8290): flows hashed into queues served by deficit round robin, new
    /// flows first, CoDel on each.
    FqCodel(FqCodelConfig),
    /// PIE (RFC 8033): random early drops with a probability driven by the queue delay.
    Pie(PieConfig),
}

impl Aqm {
    /// The discipline's name as written after `aqm`.
    pub fn name(&self) -> &'static str {
        match self {
            Aqm::Fifo => "fifo",
            Aqm::Codel(_) => "codel",
            Aqm::FqCodel(_) => "fq_codel",
            Aqm::Pie(_) => "pie",
        }
    }

    /// Parses what follows `aqm`: the name, then that discipline's parameters.
    pub(crate) fn parse<'a>(t: &mut Tokens<'a>) -> Result<Aqm, ParseSpecError> {
        let name = t.next().ok_or_else(|| ParseSpecError::MissingValue {
            keyword: "aqm".into(),
            what: "a queue discipline (fifo, codel, fq_codel or pie)".into(),
            example: "aqm fq_codel".into(),
        })?;
        let mut aqm = match name.to_ascii_lowercase().as_str() {
            "fifo" | "pfifo" => Aqm::Fifo,
            "codel" => Aqm::Codel(CodelConfig::default()),
            "fq_codel" | "fq-codel" => Aqm::FqCodel(FqCodelConfig::default()),
            "pie" => Aqm::Pie(PieConfig::default()),
            _ => {
                return Err(err(
                    "aqm",
                    name,
                    "unknown queue discipline; use fifo, codel, fq_codel or pie",
                ))
            }
        };
        let prefix = format!("aqm {}", aqm.name());
        while let Some(word) = t.peek() {
            let word = word.to_ascii_lowercase();
            let ctx = format!("{prefix} {word}");
            let example = format!("{prefix} {}", example_param(aqm, &word));
            let value = |t: &mut Tokens<'a>, what: &str| param(t, &ctx, what, &example);
            match (&mut aqm, word.as_str()) {
                (Aqm::Codel(c), "target")
                | (Aqm::FqCodel(FqCodelConfig { codel: c, .. }), "target") => {
                    let v = value(t, "a time")?;
                    c.target_ns = positive_time(&ctx, v)?;
                }
                (Aqm::Codel(c), "interval")
                | (Aqm::FqCodel(FqCodelConfig { codel: c, .. }), "interval") => {
                    let v = value(t, "a time")?;
                    c.interval_ns = positive_time(&ctx, v)?;
                }
                (Aqm::FqCodel(f), "flows") => {
                    let v = value(t, "a number of flow queues")?;
                    f.flows = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=65536).contains(n))
                        .ok_or_else(|| {
                            err(&ctx, v, "use 1 to 65536 flow queues, e.g. flows 1024")
                        })?;
                }
                (Aqm::FqCodel(f), "quantum") => {
                    let v = value(t, "a number of bytes")?;
                    f.quantum = v
                        .parse()
                        .ok()
                        .filter(|n| (256..=1 << 20).contains(n))
                        .ok_or_else(|| {
                            err(
                                &ctx,
                                v,
                                "use 256 to 1048576 bytes (as Linux), e.g. quantum 1514",
                            )
                        })?;
                }
                (Aqm::Pie(p), "target") => {
                    let v = value(t, "a time")?;
                    p.target_ns = positive_time(&ctx, v)?;
                }
                (Aqm::Pie(p), "tupdate") => {
                    let v = value(t, "a time")?;
                    p.tupdate_ns = positive_time(&ctx, v)?;
                }
                (Aqm::Pie(p), "alpha") => {
                    let v = value(t, "a weight")?;
                    p.alpha = weight(&ctx, v, false)?;
                }
                (Aqm::Pie(p), "beta") => {
                    let v = value(t, "a weight")?;
                    p.beta = weight(&ctx, v, true)?;
                }
                (_, "target" | "interval" | "flows" | "quantum" | "tupdate" | "alpha" | "beta") => {
                    return Err(err(
                        &prefix,
                        &word,
                        &format!(
                            "{} has no parameter {word}; it takes {}",
                            aqm.name(),
                            aqm.parameters()
                        ),
                    ))
                }
                _ => break,
            }
        }
        Ok(aqm)
    }

    /// The parameters the discipline takes, in words.
    fn parameters(&self) -> &'static str {
        match self {
            Aqm::Fifo => "none (its size is limit)",
            Aqm::Codel(_) => "target and interval",
            Aqm::FqCodel(_) => "flows, quantum, target and interval",
            Aqm::Pie(_) => "target, tupdate, alpha and beta",
        }
    }
}

/// Skips the parameter's name and takes its value.
fn param<'a>(
    t: &mut Tokens<'a>,
    ctx: &str,
    what: &str,
    example: &str,
) -> Result<&'a str, ParseSpecError> {
    t.next();
    t.value(ctx, what, example)
}

fn example_param(aqm: Aqm, word: &str) -> &'static str {
    match (aqm, word) {
        (Aqm::Pie(_), "target") => "target 15ms",
        (_, "target") => "target 5ms",
        (_, "interval") => "interval 100ms",
        (_, "flows") => "flows 1024",
        (_, "quantum") => "quantum 1514",
        (_, "tupdate") => "tupdate 15ms",
        (_, "alpha") => "alpha 0.125",
        (_, "beta") => "beta 1.25",
        _ => "",
    }
}

fn positive_time(ctx: &str, v: &str) -> Result<u64, ParseSpecError> {
    match parse_time(ctx, v)? {
        0 => Err(err(ctx, v, "must be longer than 0, e.g. 5ms")),
        ns => Ok(ns),
    }
}

fn weight(ctx: &str, v: &str, zero_ok: bool) -> Result<f64, ParseSpecError> {
    let x: f64 = v
        .parse()
        .map_err(|_| err(ctx, v, "not a number; write a weight in 1/s, e.g. 0.125"))?;
    let ok = x.is_finite() && x <= 100.0 && (x > 0.0 || zero_ok && x == 0.0);
    if !ok {
        return Err(err(
            ctx,
            v,
            if zero_ok {
                "use 0 to 100 (1/s), e.g. 1.25"
            } else {
                "use more than 0 and at most 100 (1/s), e.g. 0.125"
            },
        ));
    }
    Ok(x)
}

impl fmt::Display for Aqm {
    /// The discipline and its non-default parameters, as written after `aqm`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        let codel = |f: &mut fmt::Formatter<'_>, c: &CodelConfig| -> fmt::Result {
            if c.target_ns != CODEL_TARGET_NS {
                write!(f, " target {}", time(c.target_ns))?;
            }
            if c.interval_ns != CODEL_INTERVAL_NS {
                write!(f, " interval {}", time(c.interval_ns))?;
            }
            Ok(())
        };
        match self {
            Aqm::Fifo => Ok(()),
            Aqm::Codel(c) => codel(f, c),
            Aqm::FqCodel(q) => {
                if q.flows != FQ_FLOWS {
                    write!(f, " flows {}", q.flows)?;
                }
                if q.quantum != FQ_QUANTUM {
                    write!(f, " quantum {}", q.quantum)?;
                }
                codel(f, &q.codel)
            }
            Aqm::Pie(p) => {
                if p.target_ns != PIE_TARGET_NS {
                    write!(f, " target {}", time(p.target_ns))?;
                }
                if p.tupdate_ns != PIE_TUPDATE_NS {
                    write!(f, " tupdate {}", time(p.tupdate_ns))?;
                }
                if p.alpha != PIE_ALPHA {
                    write!(f, " alpha {}", p.alpha)?;
                }
                if p.beta != PIE_BETA {
                    write!(f, " beta {}", p.beta)?;
                }
                Ok(())
            }
        }
    }
}
