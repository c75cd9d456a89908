//! [`LinkSpec`]: one direction's impairments, in netem's own syntax.
//!
//! Grammar (tokens separated by whitespace, in any order, a later keyword
//! overriding an earlier one):
//!
//! ```text
//! delay TIME [JITTER [CORRELATION]]   distribution {uniform|normal|pareto|paretonormal}
//! loss [random] PERCENT [CORRELATION] | loss gemodel p [r [1-h [1-k]]]
//! loss state p13 [p31 [p32 [p23 [p14]]]]
//! duplicate PERCENT   corrupt PERCENT   reorder PERCENT [CORRELATION] [gap N]
//! rate RATE [PACKETOVERHEAD] | rate RATE@TIME RATE@TIME … [PACKETOVERHEAD]
//! limit PACKETS   fifo   fixcsum   ecn
//! slot MIN [MAX] [packets N] [bytes N] | slot distribution TYPE DELAY JITTER [packets N] [bytes N]
//! aqm {fifo|codel|fq_codel|pie} [PARAMETERS]   trace FILE [blake3 DIGEST]
//! ```
//!
//! Times take `ns`, `us`, `ms` or `s` (a bare number is microseconds, as in
//! tc); percentages take an optional `%`; rates take tc's units (`bit`,
//! `kbit`, `mbit`, `gbit`, `tbit`, IEC `kibit`.., and `bps`, `kbps`.. meaning
//! *bytes* per second; a bare number is bits per second). `fifo` is a socklab
//! extension: jitter never reorders; so is `fixcsum`: corruption hits an IP packet's transport
//! payload and the TCP/UDP checksum is fixed, so the damage reaches the application. netem only honours `reorder` together
//! with a delay; socklab accepts it alone (then the "immediate" packets are
//! indistinguishable from the others) rather than rejecting it.
//! `distribution` without jitter is accepted and has no effect, as in netem.
//!
//! `slot` and `ecn` are netem's ([`crate::slot`]; `ecn` marks ECN-capable packets Congestion
//! Experienced instead of dropping them, for loss and for the queue discipline). socklab's own:
//! `aqm` (the queue discipline at the bottleneck, [`crate::aqm`]), `trace` (Mahimahi's
//! trace-driven links, [`crate::trace`]) and rate schedules (`rate 100mbit@0s 10mbit@5s`,
//! [`crate::schedule`]). `aqm` needs a bottleneck (`rate` or `trace`); `trace` replaces `rate`;
//! `ecn` needs `loss` or an `aqm` (netem refuses `ecn` without loss too).

use std::fmt;
use std::str::FromStr;

use crate::aqm::Aqm;
use crate::distribution::Distribution;
pub use crate::error::ParseSpecError;
use crate::keywords::KEYWORDS;
use crate::loss::Loss;
use crate::schedule::RateSchedule;
use crate::slot::Slot;
pub use crate::syntax::MAX_RATE_BPS;
use crate::syntax::{
    err, parse_corr, parse_prob, parse_rate, parse_time, pct, rate, time, unknown_word, Tokens,
};
use crate::trace::Trace;

/// netem's default queue limit in packets.
pub const DEFAULT_LIMIT: usize = 1000;

/// The impairments of one direction of a link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// Base delay.
    pub delay_ns: u64,
    /// Jitter scale (σ for normal, half-width for uniform).
    pub jitter_ns: u64,
    /// Correlation of successive delay random values, `0..=1`.
    pub delay_correlation: f64,
    /// Shape of the jitter.
    pub distribution: Distribution,
    /// Loss model.
    pub loss: Loss,
    /// Probability of sending an extra copy.
    pub duplicate: f64,
    /// Probability of flipping one random bit.
    pub corrupt: f64,
    /// `(probability, gap)`: netem reordering (gap defaults to 1).
    pub reorder: Option<(f64, u32)>,
    /// Correlation of the reorder random values (netem `reorder P CORR`);
    /// only meaningful with `reorder`.
    pub reorder_correlation: f64,
    /// Serialisation rate in bits per second (constant; `None` with a schedule).
    pub rate_bps: Option<u64>,
    /// A rate that changes over time (`rate A@T0 B@T1 …`), instead of `rate_bps`.
    pub rate_schedule: Option<RateSchedule>,
    /// Bytes added to (or, negative, removed from) each packet's length for
    /// the rate computation.
    pub overhead_bytes: i32,
    /// Queue limit in packets.
    pub limit: usize,
    /// `fifo`: jitter never reorders packets.
    pub keep_order: bool,
    /// `fixcsum`: corruption flips a bit of an IP packet's transport payload and fixes the
    /// TCP/UDP checksum, so the corrupted bytes reach the application (netem's corruption
    /// leaves the checksum wrong, so the receiving kernel drops the packet).
    pub fix_checksum: bool,
    /// netem's `slot`: packets leave in bursts.
    pub slot: Option<Slot>,
    /// netem's `ecn`: loss and the queue discipline mark ECN-capable packets CE instead of
    /// dropping them.
    pub ecn: bool,
    /// The queue discipline at the bottleneck.
    pub aqm: Aqm,
    /// A Mahimahi trace giving the bottleneck's delivery opportunities, instead of a rate.
    pub trace: Option<Trace>,
}

impl Default for LinkSpec {
    fn default() -> LinkSpec {
        LinkSpec {
            delay_ns: 0,
            jitter_ns: 0,
            delay_correlation: 0.0,
            distribution: Distribution::Uniform,
            loss: Loss::None,
            duplicate: 0.0,
            corrupt: 0.0,
            reorder: None,
            reorder_correlation: 0.0,
            rate_bps: None,
            rate_schedule: None,
            overhead_bytes: 0,
            limit: DEFAULT_LIMIT,
            keep_order: false,
            fix_checksum: false,
            slot: None,
            ecn: false,
            aqm: Aqm::Fifo,
            trace: None,
        }
    }
}

impl LinkSpec {
    /// Whether the emulator needs its bottleneck model ([`crate::bottleneck`]): a queue
    /// discipline other than drop-tail, a trace or a rate schedule.
    pub fn needs_bottleneck(&self) -> bool {
        self.aqm != Aqm::Fifo || self.trace.is_some() || self.rate_schedule.is_some()
    }

    /// The capacity the link sustains, bits/s: the rate, a schedule's slowest step, a trace's
    /// mean; `None` without a limit.
    pub fn sustained_bps(&self) -> Option<f64> {
        if let Some(t) = &self.trace {
            return Some(t.mean_bps());
        }
        if let Some(s) = &self.rate_schedule {
            return Some(s.min_bps() as f64);
        }
        self.rate_bps.map(|r| r as f64)
    }
}

impl FromStr for LinkSpec {
    type Err = ParseSpecError;

    fn from_str(s: &str) -> Result<LinkSpec, ParseSpecError> {
        let mut spec = LinkSpec::default();
        let mut t = Tokens::new(s);
        let mut gap: Option<u32> = None;
        while let Some(kw) = t.next() {
            match kw.to_ascii_lowercase().as_str() {
                "delay" => {
                    let v = t.value("delay", "a time", "delay 50ms")?;
                    spec.delay_ns = parse_time("delay", v)?;
                    spec.jitter_ns = 0;
                    spec.delay_correlation = 0.0;
                    if let Some(j) = t.next_value() {
                        spec.jitter_ns = parse_time("delay jitter", j)?;
                        if let Some(c) = t.next_value() {
                            spec.delay_correlation = parse_corr("delay correlation", c)?;
                        }
                    }
                }
                "distribution" => {
                    let v = t.next().ok_or(ParseSpecError::MissingDistribution)?;
                    spec.distribution = Distribution::from_name(v).ok_or_else(|| {
                        err(
                            "distribution",
                            v,
                            "unknown distribution; use uniform, normal, pareto or paretonormal",
                        )
                    })?;
                }
                "loss" => spec.loss = parse_loss(&mut t)?,
                "duplicate" => {
                    let v = t.value("duplicate", "a percentage", "duplicate 1%")?;
                    spec.duplicate = parse_prob("duplicate", v)?;
                    if let Some(c) = t.next_value() {
                        return Err(err(
                            "duplicate",
                            c,
                            "socklab does not model duplicate correlation; remove it",
                        ));
                    }
                }
                "corrupt" => {
                    let v = t.value("corrupt", "a percentage", "corrupt 1%")?;
                    spec.corrupt = parse_prob("corrupt", v)?;
                    if let Some(c) = t.next_value() {
                        return Err(err(
                            "corrupt",
                            c,
                            "socklab does not model corrupt correlation; remove it",
                        ));
                    }
                }
                "reorder" => {
                    let v = t.value("reorder", "a percentage", "reorder 25%")?;
                    let p = parse_prob("reorder", v)?;
                    spec.reorder_correlation = 0.0;
                    if let Some(c) = t.next_value() {
                        spec.reorder_correlation = parse_corr("reorder correlation", c)?;
                    }
                    spec.reorder = Some((p, 1));
                }
                "gap" => {
                    let v = t.value("gap", "a packet count", "reorder 25% gap 5")?;
                    let g: u32 = v.parse().ok().filter(|&g| g > 0).ok_or_else(|| {
                        err("gap", v, "a gap must be a whole number >= 1, e.g. gap 5")
                    })?;
                    gap = Some(g);
                }
                "rate" => {
                    let v = t.value("rate", "a rate", "rate 100mbit")?;
                    spec.overhead_bytes = 0;
                    spec.rate_schedule = None;
                    if v.contains('@') {
                        let mut more = Vec::new();
                        while let Some(n) = t.peek().filter(|n| n.contains('@')) {
                            t.next();
                            more.push(n);
                        }
                        match RateSchedule::parse_steps(v, &more)? {
                            Ok(s) => {
                                spec.rate_schedule = Some(s);
                                spec.rate_bps = None;
                            }
                            Err(r) => spec.rate_bps = Some(r),
                        }
                    } else {
                        spec.rate_bps = Some(parse_rate("rate", v)?);
                    }
                    if let Some(o) = t.next_value() {
                        spec.overhead_bytes = o.parse().map_err(|_| {
                            err(
                                "rate packetoverhead",
                                o,
                                "a packet overhead must be a whole number of bytes, e.g. rate 100mbit 20",
                            )
                        })?;
                    }
                }
                "limit" => {
                    let v = t.value("limit", "a packet count", "limit 1000")?;
                    spec.limit = v.parse().map_err(|_| {
                        err(
                            "limit",
                            v,
                            "a limit must be a whole number of packets, e.g. limit 1000",
                        )
                    })?;
                }
                "fifo" => spec.keep_order = true,
                "fixcsum" => spec.fix_checksum = true,
                "ecn" => spec.ecn = true,
                "slot" => spec.slot = Some(Slot::parse(&mut t)?),
                "aqm" => spec.aqm = Aqm::parse(&mut t)?,
                "trace" => {
                    let path = t.value("trace", "a file", "trace ./verizon-lte-down.trace")?;
                    let trace = Trace::load(path)?;
                    if t.peek().is_some_and(|w| w.eq_ignore_ascii_case("blake3")) {
                        t.next();
                        let ex = format!("trace {path} blake3 {}", trace.digest_hex());
                        let h = t.value("trace blake3", "a digest", &ex)?;
                        if !h.eq_ignore_ascii_case(&trace.digest_hex()) {
                            return Err(ParseSpecError::Trace {
                                path: path.to_string(),
                                reason: format!(
                                    "its content changed: blake3 {h} was recorded, the file now has {}; use the file that ran, or drop 'blake3 {h}' to take this one",
                                    trace.digest_hex()
                                ),
                            });
                        }
                    }
                    spec.trace = Some(trace);
                }
                "packets" | "bytes" | "target" | "interval" | "flows" | "quantum" | "tupdate"
                | "alpha" | "beta" | "blake3" => {
                    return Err(ParseSpecError::Misplaced {
                        word: kw.to_string(),
                        owner: match kw.to_ascii_lowercase().as_str() {
                            "packets" | "bytes" => "slot, e.g. slot 10ms packets 8",
                            "blake3" => "trace, e.g. trace ./x.trace blake3 DIGEST",
                            "flows" | "quantum" => "aqm fq_codel, e.g. aqm fq_codel flows 1024",
                            "tupdate" | "alpha" | "beta" => "aqm pie, e.g. aqm pie tupdate 15ms",
                            _ => "an aqm, e.g. aqm codel target 5ms interval 100ms",
                        },
                    })
                }
                _ => return Err(unknown_word(&t, kw)),
            }
        }
        if spec.trace.is_some() && (spec.rate_bps.is_some() || spec.rate_schedule.is_some()) {
            return Err(ParseSpecError::Combination {
                what: "trace and rate".into(),
                fix: "both set the bottleneck's capacity: use one".into(),
            });
        }
        if spec.aqm != Aqm::Fifo
            && spec.trace.is_none()
            && spec.rate_bps.is_none()
            && spec.rate_schedule.is_none()
        {
            return Err(ParseSpecError::Combination {
                what: format!("aqm {}", spec.aqm.name()),
                fix: format!(
                    "a queue discipline needs a bottleneck to queue at: add rate RATE (or a rate schedule, or trace FILE), e.g. rate 20mbit aqm {}",
                    spec.aqm.name()
                ),
            });
        }
        if spec.ecn && spec.loss == Loss::None && spec.aqm == Aqm::Fifo {
            return Err(ParseSpecError::Combination {
                what: "ecn".into(),
                fix: "marks packets instead of dropping them, so it needs loss or an aqm, e.g. loss 5% ecn or rate 20mbit aqm codel ecn".into(),
            });
        }
        if let Some(g) = gap {
            match spec.reorder.as_mut() {
                Some(r) => r.1 = g,
                None => return Err(ParseSpecError::GapWithoutReorder { gap: g }),
            }
        }
        Ok(spec)
    }
}

fn parse_loss(t: &mut Tokens<'_>) -> Result<Loss, ParseSpecError> {
    let first = t.next().ok_or(ParseSpecError::MissingLoss)?;
    let mut probs = |ctx: &str, max: usize| -> Result<Vec<f64>, ParseSpecError> {
        let mut v = Vec::new();
        while v.len() < max {
            match t.next_value() {
                Some(tok) => v.push(parse_prob(ctx, tok)?),
                None => break,
            }
        }
        Ok(v)
    };
    match first.to_ascii_lowercase().as_str() {
        "gemodel" | "gilbert-elliott" => {
            let v = probs("loss gemodel", 4)?;
            let Some(&p) = v.first() else {
                return Err(ParseSpecError::MissingGemodel);
            };
            Ok(Loss::GilbertElliott {
                p,
                r: v.get(1).copied().unwrap_or(1.0 - p),
                one_minus_h: v.get(2).copied().unwrap_or(1.0),
                one_minus_k: v.get(3).copied().unwrap_or(0.0),
            })
        }
        "state" => {
            let v = probs("loss state", 5)?;
            let Some(&p13) = v.first() else {
                return Err(ParseSpecError::MissingState);
            };
            let g = |i: usize, d: f64| v.get(i).copied().unwrap_or(d);
            let (p31, p32, p23, p14) = (g(1, 1.0 - p13), g(2, 0.0), g(3, 0.0), g(4, 0.0));
            if p13 + p14 > 1.0 + 1e-12 || p31 + p32 > 1.0 + 1e-12 {
                return Err(ParseSpecError::StateOver100 {
                    p13_p14: p13 + p14,
                    p31_p32: p31 + p32,
                });
            }
            Ok(Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            })
        }
        "random" => {
            let v = t.value("loss random", "a percentage", "loss random 5%")?;
            random_loss(t, v)
        }
        _ => {
            if KEYWORDS.contains(&first) {
                return Err(ParseSpecError::LossBeforeKeyword {
                    keyword: first.to_string(),
                });
            }
            random_loss(t, first)
        }
    }
}

fn random_loss(t: &mut Tokens<'_>, tok: &str) -> Result<Loss, ParseSpecError> {
    let p = parse_prob("loss", tok)?;
    let correlation = match t.next_value() {
        Some(c) => parse_corr("loss correlation", c)?,
        None => 0.0,
    };
    Ok(Loss::Random { p, correlation })
}

impl fmt::Display for LinkSpec {
    /// Canonical netem text (defaults omitted; the default spec prints as "").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.delay_ns != 0 || self.jitter_ns != 0 || self.delay_correlation != 0.0 {
            let mut s = format!("delay {}", time(self.delay_ns));
            if self.jitter_ns != 0 || self.delay_correlation != 0.0 {
                s += &format!(" {}", time(self.jitter_ns));
                if self.delay_correlation != 0.0 {
                    s += &format!(" {}", pct(self.delay_correlation));
                }
            }
            parts.push(s);
        }
        if self.distribution != Distribution::Uniform {
            parts.push(format!("distribution {}", self.distribution));
        }
        match self.loss {
            Loss::None => {}
            Loss::Random { p, correlation } => {
                let mut s = format!("loss {}", pct(p));
                if correlation != 0.0 {
                    s += &format!(" {}", pct(correlation));
                }
                parts.push(s);
            }
            Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => parts.push(format!(
                "loss gemodel {} {} {} {}",
                pct(p),
                pct(r),
                pct(one_minus_h),
                pct(one_minus_k)
            )),
            Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => parts.push(format!(
                "loss state {} {} {} {} {}",
                pct(p13),
                pct(p31),
                pct(p32),
                pct(p23),
                pct(p14)
            )),
        }
        if self.duplicate != 0.0 {
            parts.push(format!("duplicate {}", pct(self.duplicate)));
        }
        if self.corrupt != 0.0 {
            parts.push(format!("corrupt {}", pct(self.corrupt)));
        }
        if let Some((p, gap)) = self.reorder {
            let mut s = format!("reorder {}", pct(p));
            if self.reorder_correlation != 0.0 {
                s += &format!(" {}", pct(self.reorder_correlation));
            }
            if gap != 1 {
                s += &format!(" gap {gap}");
            }
            parts.push(s);
        }
        let rate_text = match (&self.rate_schedule, self.rate_bps) {
            (Some(s), _) => Some(format!("rate {s}")),
            (None, Some(r)) => Some(format!("rate {}", rate(r))),
            (None, None) => None,
        };
        if let Some(mut s) = rate_text {
            if self.overhead_bytes != 0 {
                s += &format!(" {}", self.overhead_bytes);
            }
            parts.push(s);
        }
        if self.limit != DEFAULT_LIMIT {
            parts.push(format!("limit {}", self.limit));
        }
        if self.keep_order {
            parts.push("fifo".to_string());
        }
        if self.fix_checksum {
            parts.push("fixcsum".to_string());
        }
        if let Some(slot) = &self.slot {
            parts.push(format!("slot {slot}"));
        }
        if self.ecn {
            parts.push("ecn".to_string());
        }
        if self.aqm != Aqm::Fifo {
            parts.push(format!("aqm {}", self.aqm));
        }
        if let Some(t) = &self.trace {
            parts.push(format!("trace {} blake3 {}", t.path(), t.digest_hex()));
        }
        f.write_str(&parts.join(" "))
    }
}
