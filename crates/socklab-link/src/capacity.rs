//! The capacity phase of `socklab netem check` for a trace-driven link or a rate schedule
//! (issue 19 item 3): a link whose capacity changes over time is checked by what it delivers
//! each second while saturated, against what the trace or the schedule allows that second.
//!
//! The probe starts with this phase, so that its first datagram is the link's first packet:
//! the trace's and the schedule's time 0. It sends datagrams of [`PAYLOAD`] bytes (1500-byte
//! IP packets: one per trace opportunity) at 1.5 times the link's peak for [`CapacityPlan::
//! seconds`], keeping the queue full; the receiver counts arrivals per second from the first
//! send. Then it waits for the queue to drain before the paced phase.

use std::time::Duration;

use socklab_impair::trace::OPPORTUNITY_BYTES;
use socklab_impair::LinkSpec;

use crate::check_row::CheckRow;

/// UDP payload of the capacity phase's datagrams: 1500-byte IPv4 packets.
pub const PAYLOAD: usize = 1472;

/// The capacity datagram's payload: 1500-byte IP packets across a namespace link; through the
/// `udp-proxy` driver, whose model sees UDP payloads, 1500-byte payloads.
pub fn payload(over_proxy: bool) -> usize {
    if over_proxy {
        OPPORTUNITY_BYTES as usize
    } else {
        PAYLOAD
    }
}
/// Bits of one capacity datagram on the link.
const PACKET_BITS: f64 = (OPPORTUNITY_BYTES * 8) as f64;
/// Sequence numbers of the capacity phase start here (apart from the paced and burst ones).
pub const SEQ_BASE: u64 = 1 << 48;

/// How long and how fast to saturate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityPlan {
    /// Whole seconds of saturation (each is compared).
    pub seconds: u64,
    /// Datagrams per second sent.
    pub send_pps: f64,
    /// Wait after it for the queue to drain.
    pub drain: Duration,
}

/// The plan for a trace or a rate schedule (`None` for other links): a schedule is covered to
/// 2 s past its last step (at most 30 s), a trace for one period (3 to 10 s).
pub fn plan(spec: &LinkSpec) -> Option<CapacityPlan> {
    let (seconds, peak_bps, floor_bps) = if let Some(t) = &spec.trace {
        let secs = t.period_ms().div_ceil(1000).clamp(3, 10);
        // The busiest 100 ms of the first period(s) covered.
        let windows = (secs * 10).max(1);
        let busiest = (0..windows)
            .map(|k| t.opportunities_between(k * 100_000_000, (k + 1) * 100_000_000))
            .max()
            .unwrap_or(1);
        (secs, busiest as f64 * 10.0 * PACKET_BITS, t.mean_bps())
    } else if let Some(s) = &spec.rate_schedule {
        let last = s.steps().last().map_or(0, |st| st.0);
        let secs = (last / 1_000_000_000 + 2).clamp(3, 30);
        // It drains at the rate in force when the saturation ends.
        let after = s.rate_at(secs * 1_000_000_000);
        (secs, s.max_bps() as f64, after as f64)
    } else {
        return None;
    };
    let send_pps = (1.5 * peak_bps / PACKET_BITS).clamp(10.0, 300_000.0);
    let queue_s = spec.limit as f64 * PACKET_BITS / floor_bps.max(1.0);
    let drain = Duration::from_secs_f64((2.0 * queue_s).min(60.0))
        + Duration::from_nanos(spec.delay_ns + 4 * spec.jitter_ns)
        + Duration::from_millis(200);
    Some(CapacityPlan {
        seconds,
        send_pps,
        drain,
    })
}

/// The least a trace carries in any second (windows starting every 100 ms over a period, or
/// the period if shorter), bits per second: what a paced probe must stay under.
pub fn slowest_second_bps(t: &socklab_impair::Trace) -> f64 {
    let period = t.period_ms() * 1_000_000;
    let window = period.min(1_000_000_000);
    let starts = (period / 100_000_000).max(1);
    let least = (0..starts)
        .map(|k| t.opportunities_between(k * 100_000_000, k * 100_000_000 + window))
        .min()
        .unwrap_or(0);
    least as f64 * PACKET_BITS * 1e9 / window as f64
}

/// Packets of 1500 bytes the link can deliver in each second `[k s, (k+1) s)` after its start.
pub fn configured_per_second(spec: &LinkSpec, seconds: u64) -> Vec<f64> {
    (0..seconds)
        .map(|k| {
            let (a, b) = (k * 1_000_000_000, (k + 1) * 1_000_000_000);
            if let Some(t) = &spec.trace {
                t.opportunities_between(a, b) as f64
            } else if let Some(s) = &spec.rate_schedule {
                s.bits_between(a, b) / PACKET_BITS
            } else {
                0.0
            }
        })
        .collect()
}

/// One row per second: configured against measured deliveries, within 1 % + 3 packets (a
/// packet or two moves across a second's boundary with the release lag and the first
/// packet's own transmission).
pub fn rows(spec: &LinkSpec, measured: &[u64]) -> Vec<CheckRow> {
    configured_per_second(spec, measured.len() as u64)
        .into_iter()
        .zip(measured)
        .enumerate()
        .map(|(k, (c, &m))| CheckRow {
            what: format!("delivered in second {k}, saturated (1500 B packets)"),
            configured: format!("{c:.0} ({:.2} Mbit/s)", c * PACKET_BITS / 1e6),
            measured: format!("{m} ({:.2} Mbit/s)", m as f64 * PACKET_BITS / 1e6),
            ok: Some((m as f64 - c).abs() <= 3.0 + 0.01 * c),
            from: crate::check_row::FROM_SPEC,
        })
        .collect()
}

/// Counts capacity-phase arrivals (`arrival_ns` on the probe's clock) into seconds after
/// `origin_ns`, the first datagram's send time.
pub fn per_second(arrivals_ns: &[u64], origin_ns: u64, seconds: u64) -> Vec<u64> {
    let mut bins = vec![0u64; seconds as usize];
    for &t in arrivals_ns {
        let k = t.saturating_sub(origin_ns) / 1_000_000_000;
        if let Some(b) = bins.get_mut(k as usize) {
            *b += 1;
        }
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_covered_and_compared_second_by_second() {
        let spec: LinkSpec = "rate 12mbit@0s 1200kbit@1s 12mbit@2s".parse().unwrap();
        let p = plan(&spec).unwrap();
        assert_eq!(p.seconds, 4);
        assert_eq!(p.send_pps, 1500.0);
        // The queue (1000 packets) drains at the last step's 12 Mbit/s in 1 s; wait twice that.
        assert!(p.drain >= Duration::from_secs(2), "{p:?}");
        assert!(p.drain < Duration::from_secs(3), "{p:?}");
        let c = configured_per_second(&spec, 4);
        assert_eq!(c, [1000.0, 100.0, 1000.0, 1000.0]);
        let rows = rows(&spec, &[999, 100, 1000, 960]);
        let verdicts: Vec<Option<bool>> = rows.iter().map(|r| r.ok).collect();
        assert_eq!(verdicts, [Some(true), Some(true), Some(true), Some(false)]);
        assert!(plan(&"rate 10mbit".parse().unwrap()).is_none());
    }

    #[test]
    fn the_slowest_second_of_a_trace() {
        // 1 opportunity a ms for a second, then one every 2 ms for a second.
        let text: String = (1..=2000u32)
            .filter(|ms| *ms <= 1000 || ms % 2 == 0)
            .map(|ms| format!("{ms}\n"))
            .collect();
        let t = socklab_impair::Trace::from_text("t", &text).unwrap();
        assert_eq!(slowest_second_bps(&t), 500.0 * 12_000.0);
    }

    #[test]
    fn arrivals_fall_in_their_second() {
        let s = 1_000_000_000;
        assert_eq!(
            per_second(&[5, s + 4, s + 5, 2 * s + 4, 9 * s], 5, 3),
            [2, 2, 0]
        );
    }
}
