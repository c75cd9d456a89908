//! The comparison half of `socklab netem check`: what a probe measured against what the spec
//! (a closed form) or the model (replaying the probe, [`super::check_model`]) expects, row by
//! row.

use socklab_impair::LinkSpec;

use crate::check_row::{CheckRow, ProbeResult, FROM_MODEL, FROM_SPEC};

/// Half-width of the binomial 99.9 % interval of a rate `p` over `n` trials (normal
/// approximation, at least one trial's worth).
fn half_width(p: f64, n: f64) -> f64 {
    socklab_stats::normal_quantile(0.9995) * (p * (1.0 - p) / n).sqrt() + 1.0 / n
}

fn pct(x: f64) -> String {
    format!("{:.2} %", 100.0 * x)
}

/// A rate's row: within the binomial interval of the expected rate over `n` trials, `widen`
/// times (correlated loss; a model's expectation carries the replays' own noise).
fn rate_row(
    what: &str,
    expected: f64,
    measured: f64,
    n: f64,
    widen: f64,
    from: &'static str,
) -> CheckRow {
    let hw = half_width(expected, n) * widen;
    CheckRow {
        what: what.into(),
        configured: pct(expected),
        measured: pct(measured),
        ok: Some((measured - expected).abs() <= hw),
        from,
    }
}

/// Whether the spec's figures have closed forms for the paced probe: no slot, no bottleneck
/// model (aqm, trace, schedule). A plain `rate` and `limit` are closed forms too: the probe
/// keeps the queue short.
fn plain(spec: &LinkSpec) -> bool {
    spec.slot.is_none_or(|s| !s.is_active()) && !spec.needs_bottleneck()
}

/// The closed form of the paced probe's one-way delay (mean and median): the delay, whose
/// jitter is symmetric and cut symmetrically, plus one packet's serialisation at `rate`;
/// `None` where the model must say (skewed distributions, `fifo` jitter, jitter with a rate,
/// `reorder`, slots, a bottleneck model).
pub fn closed_form_delay_ns(spec: &LinkSpec, len: usize) -> Option<f64> {
    use socklab_impair::Distribution;
    let symmetric = spec.jitter_ns == 0
        || (matches!(
            spec.distribution,
            Distribution::Uniform | Distribution::Normal
        ) && !spec.keep_order);
    // With a rate, a packet's delay counts from the one queued before it (netem's tfifo
    // tail), which jitter then skews: the model says.
    let rate_with_jitter = spec.rate_bps.is_some() && spec.jitter_ns > 0;
    (plain(spec) && spec.reorder.is_none() && symmetric && !rate_with_jitter).then(|| {
        let ser = spec.rate_bps.map_or(0.0, |r| {
            (len as f64 + f64::from(spec.overhead_bytes)).max(0.0) * 8.0 * 1e9 / r as f64
        });
        spec.delay_ns as f64 + ser
    })
}

/// Compares one direction's probe with its spec (no release lag known).
pub fn compare(spec: &LinkSpec, r: &ProbeResult) -> Vec<CheckRow> {
    compare_lagged(spec, r, 0.0)
}

/// Compares one direction's probe with its spec; `lag_ns` is the emulator's mean release lag
/// over the probe (its accounting), which the delay rows allow for.
pub fn compare_lagged(spec: &LinkSpec, r: &ProbeResult, lag_ns: f64) -> Vec<CheckRow> {
    let sent = r.sent.max(1) as f64;
    let sched = r.schedule();
    let model = (!sched.is_empty()).then(|| super::check_model::expect(spec, &sched));
    // A model's expectation is the mean of a few replays: its own noise widens the interval.
    let model_widen = (1.0 + 1.0 / super::check_model::REPLAYS as f64).sqrt();
    let p_loss = spec.loss.stationary_loss_rate();
    // Copies: with probability `duplicate` a second copy; a loss takes one copy.
    let d = spec.duplicate;
    // A corrupted datagram never counts as received intact: without fixcsum it fails the UDP
    // checksum and the kernel drops it; with fixcsum it reaches us and fails ours.
    let c = spec.corrupt;
    let closed_missing = ((1.0 - d) * p_loss) + (1.0 - (1.0 - d) * p_loss) * c;
    let missing = 1.0 - r.unique.min(r.sent) as f64 / sent;
    let correlated = !matches!(
        spec.loss,
        socklab_impair::Loss::None
            | socklab_impair::Loss::Random {
                correlation: 0.0,
                ..
            }
    );
    let corr_widen = if correlated { 3.0 } else { 1.0 };
    let (expect_missing, widen, from) = match &model {
        Some(m) if !plain(spec) => (m.paced_missing, corr_widen * model_widen, FROM_MODEL),
        _ => (closed_missing, corr_widen, FROM_SPEC),
    };
    let mut rows = vec![rate_row(
        if c > 0.0 {
            "not received intact (loss + corrupt)"
        } else {
            "lost"
        },
        expect_missing,
        missing,
        sent,
        widen,
        from,
    )];
    let expect_dup = d * (1.0 - p_loss) * (1.0 - c);
    rows.push(rate_row(
        "duplicated",
        expect_dup,
        r.duplicates as f64 / sent,
        sent,
        1.0,
        FROM_SPEC,
    ));
    if spec.fix_checksum {
        rows.push(rate_row(
            "corrupted (reached us)",
            spec.corrupt,
            r.corrupted as f64 / sent,
            sent,
            1.0,
            FROM_SPEC,
        ));
    } else {
        rows.push(CheckRow {
            what: "corrupted (reached us)".into(),
            configured: "0 (kernel drops them)".into(),
            measured: r.corrupted.to_string(),
            ok: Some(r.corrupted == 0),
            from: FROM_SPEC,
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
        from: FROM_SPEC,
    });
    rows.extend(delay_rows(spec, r, model.as_ref(), lag_ns));
    if let Some(per_second) = &r.capacity {
        rows.extend(super::capacity::rows(spec, per_second));
    }
    if r.burst_sent > 0 {
        let nb = r.burst_sent as f64;
        if let Some(m) = model.as_ref().and_then(|m| m.burst_missing) {
            // Queue and aqm drops follow the timing: two packets' slack beside the interval.
            let mut row = rate_row(
                "lost in the burst",
                m,
                1.0 - r.burst_unique.min(r.burst_sent) as f64 / nb,
                nb,
                corr_widen * model_widen,
                FROM_MODEL,
            );
            let slack = 2.0 / nb;
            row.ok = Some(
                (1.0 - r.burst_unique.min(r.burst_sent) as f64 / nb - m).abs()
                    <= half_width(m, nb) * corr_widen * model_widen + slack,
            );
            rows.push(row);
        }
        let slotted = spec.slot.is_some_and(|s| s.is_active());
        // Through the udp-proxy the model charges payload bytes; the receiver counts IP bytes.
        let ip_bytes = if r.ip {
            1.0
        } else {
            (r.size + 28) as f64 / r.size.max(1) as f64
        };
        let (expected, from) = match spec.rate_bps {
            Some(rate) if !slotted => (Some(rate as f64 * ip_bytes), FROM_SPEC),
            _ => (model.as_ref().and_then(|m| m.burst_bps), FROM_MODEL),
        };
        if let Some(e) = expected {
            let measured = r.burst_bps.unwrap_or(0.0);
            rows.push(CheckRow {
                what: "rate (burst)".into(),
                configured: format!("{:.2} Mbit/s", e / 1e6),
                measured: format!("{:.2} Mbit/s", measured / 1e6),
                ok: Some((measured - e).abs() <= 0.1 * e),
                from,
            });
        }
    }
    rows
}

/// The one-way delay rows: the median has a verdict (within 1 ms + 5 % + the emulator's
/// mean release lag + four standard errors: the stack and a loaded machine's wake-ups move a
/// few packets far, the median little), the mean, sd and tail are shown with what they
/// should be.
fn delay_rows(
    spec: &LinkSpec,
    r: &ProbeResult,
    model: Option<&super::check_model::Expectation>,
    lag_ns: f64,
) -> Vec<CheckRow> {
    let delays: Vec<f64> = r.delays_ns.iter().map(|&x| x as f64).collect();
    let Some(sum) = socklab_stats::summarize(&delays) else {
        return Vec::new();
    };
    let p99 = socklab_stats::quantile(&delays, 0.99).unwrap_or(sum.max);
    let ms = |x: f64| format!("{:.3} ms", x / 1e6);
    let closed = closed_form_delay_ns(spec, r.schedule().len());
    let (mean, p50, from) = match (closed, model) {
        (Some(c), _) => (Some(c), Some(c), FROM_SPEC),
        (None, Some(m)) => (m.delay_mean_ns, m.delay_p50_ns, FROM_MODEL),
        (None, None) => (None, None, ""),
    };
    let sd = model.and_then(|m| m.delay_sd_ns);
    let n = delays.len() as f64;
    let p50_measured = sum.median;
    let mut rows = vec![CheckRow {
        what: "one-way delay p50".into(),
        configured: p50.map_or_else(String::new, ms),
        measured: ms(p50_measured),
        ok: p50.map(|e| {
            let tol = 1e6 + 0.05 * e + lag_ns + 4.0 * sd.unwrap_or(0.0) / n.sqrt();
            (p50_measured - e).abs() <= tol
        }),
        from,
    }];
    rows.push(CheckRow {
        what: "one-way delay mean".into(),
        configured: mean.map_or_else(String::new, ms),
        measured: ms(sum.mean),
        ok: None,
        from,
    });
    rows.push(CheckRow {
        what: "one-way delay sd".into(),
        configured: match sd {
            Some(s) => ms(s),
            None => format!("jitter {}", ms(spec.jitter_ns as f64)),
        },
        measured: ms(sum.sd.unwrap_or(0.0)),
        ok: None,
        from: if sd.is_some() { FROM_MODEL } else { "" },
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
        from: "",
    });
    rows
}
