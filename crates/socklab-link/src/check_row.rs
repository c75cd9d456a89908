//! The rows of `netem check` and what a probe saw: plain data, shared by the probe
//! ([`super::check`]), the comparison ([`super::check_compare`]) and the capacity phase
//! ([`super::capacity`]), so none of them imports another for its types.

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
    /// Where the expected value comes from: [`FROM_SPEC`] (a closed form of the spec),
    /// [`FROM_MODEL`] (the model replaying the probe) or `""` (information only).
    pub from: &'static str,
}

/// [`CheckRow::from`]: a closed form of the spec.
pub const FROM_SPEC: &str = "spec";
/// [`CheckRow::from`]: the mean of [`crate::check_model::REPLAYS`] seeded replays of the
/// datagrams as they were sent through the model.
pub const FROM_MODEL: &str = "model";

/// What a probe in one direction saw.
#[derive(Debug, Clone, Default)]
pub struct ProbeResult {
    /// Datagrams sent.
    pub sent: u64,
    /// Distinct paced datagrams received intact.
    pub unique: u64,
    /// Burst datagrams sent.
    pub burst_sent: u64,
    /// Distinct burst datagrams received intact.
    pub burst_unique: u64,
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
    /// Send time of each paced datagram (by sequence number), ns on the probe's clock.
    pub send_ns: Vec<u64>,
    /// Send time of each burst datagram, ns.
    pub burst_send_ns: Vec<u64>,
    /// Send time of the capacity phase's first datagram (the link's time 0), ns.
    pub origin_ns: Option<u64>,
    /// Datagram payload, bytes.
    pub size: usize,
    /// The link's model sees IP packets (false: UDP payloads, through the `udp-proxy`).
    pub ip: bool,
}

impl CheckRow {
    /// `{"what", "configured", "measured", "verdict": "ok" | "differs" | null}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "what": self.what,
            "configured": self.configured,
            "measured": self.measured,
            "verdict": self.ok.map(|ok| if ok { "ok" } else { "differs" }),
            "expected_from": (!self.from.is_empty()).then_some(self.from),
        })
    }
}

impl ProbeResult {
    /// The schedule the probe sent, for the model to replay.
    pub fn schedule(&self) -> crate::check_model::Schedule<'_> {
        crate::check_model::Schedule {
            origin_ns: self.origin_ns,
            paced_ns: &self.send_ns,
            burst_ns: &self.burst_send_ns,
            size: self.size,
            ip: self.ip,
        }
    }

    /// The raw counts as JSON: `sent`, `unique` (paced), `burst_sent`, `burst_unique`,
    /// `duplicates`, `reordered`, `corrupted`,
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
            "burst_sent": self.burst_sent,
            "burst_unique": self.burst_unique,
            "duplicates": self.duplicates,
            "reordered": self.reordered,
            "corrupted": self.corrupted,
            "delay_ns": delay,
            "burst_bps": self.burst_bps,
            "capacity_per_second": self.capacity,
        })
    }
}
