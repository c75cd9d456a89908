//! The time-series charts of the HTML report, as flent draws them: for every cell that stored
//! intervals, each quantity over the time of a repetition — throughput and RTT for TCP
//! streams, requests per second and p99 response time for load runs — one colour per stream,
//! the repetitions overlaid thin and light under the bold line of their mean, the omitted
//! start shaded and labelled.

use std::collections::BTreeMap;

use crate::model::record::IntervalRow;
use crate::model::stats::{CellStats, ExperimentStats};
use crate::svg::{figure, time_chart, Shade, TimeLine};

/// Most points a drawn line keeps: a longer series is drawn with consecutive intervals merged
/// in groups (a time-weighted mean), about one point per two pixels.
pub const MAX_POINTS: usize = 600;

/// A quantity drawn over time.
struct Quantity {
    metric: &'static str,
    title: &'static str,
    /// Its axis label, given the unit actually used.
    axis: &'static str,
    /// A rate averaged over each interval (drawn as steps), not an instant reading.
    steps: bool,
    /// Microseconds, shown in ms from 1 ms up.
    time_us: bool,
    /// Negative values are drawn at 0 (the axis starts there; the caption says why).
    floor_zero: bool,
    caption: &'static str,
    /// The name of a line, from its stream and direction.
    line: fn(u32, &str) -> String,
    /// What the colours tell apart, for the caption.
    colours: &'static str,
}

fn per_stream(stream: u32, dir: &str) -> String {
    format!("stream {stream} {dir}")
}

fn per_direction(_: u32, dir: &str) -> String {
    format!("{dir} (every stream)")
}

fn tcp_probe(_: u32, _: &str) -> String {
    "TCP probes".into()
}

fn udp_probe(_: u32, _: &str) -> String {
    "UDP probes".into()
}

const QUANTITIES: [Quantity; 9] = [
    Quantity {
        metric: "gbps",
        title: "Throughput over time",
        axis: "Gbit/s",
        steps: true,
        time_us: false,
        floor_zero: false,
        caption: "Throughput of each interval (bytes delivered, i.e. acknowledged by the receiver; for UDP the distinct datagrams' payloads that arrived, × 8 / the interval's length), drawn flat over the interval",
        line: per_stream,
        colours: "one colour per stream",
    },
    Quantity {
        metric: "srtt_us",
        title: "RTT over time",
        axis: "smoothed RTT",
        steps: false,
        time_us: true,
        floor_zero: false,
        caption: "Smoothed RTT of the sending socket (TCP_INFO) at the end of each interval",
        line: per_stream,
        colours: "one colour per stream",
    },
    Quantity {
        metric: "req_per_s",
        title: "Requests per second over time",
        axis: "req/s",
        steps: true,
        time_us: false,
        floor_zero: false,
        caption: "Requests completed per second of each interval, drawn flat over the interval",
        line: per_stream,
        colours: "one colour per stream",
    },
    Quantity {
        metric: "lat_p99_us",
        title: "p99 response time over time",
        axis: "p99 response time",
        steps: true,
        time_us: true,
        floor_zero: false,
        caption: "99th percentile of the response time of the requests completed in each interval (open loop: from the intended send time)",
        line: per_stream,
        colours: "one colour per stream",
    },
    Quantity {
        metric: "mbps",
        title: "Throughput each way over time",
        axis: "Mbit/s",
        steps: true,
        time_us: false,
        floor_zero: false,
        caption: "Throughput of each direction in each interval, every stream of it together (zero over the idle phase), drawn flat over the interval",
        line: per_direction,
        colours: "one colour per direction",
    },
    Quantity {
        metric: "probe_tcp_rtt_us",
        title: "TCP probe RTT over time",
        axis: "TCP probe RTT",
        steps: true,
        time_us: true,
        floor_zero: false,
        caption: "Mean round trip of the TCP probes sent in each interval (idle phase, then beside the streams)",
        line: tcp_probe,
        colours: "one line for the probes",
    },
    Quantity {
        metric: "probe_udp_rtt_us",
        title: "UDP probe RTT over time",
        axis: "UDP probe RTT",
        steps: true,
        time_us: true,
        floor_zero: false,
        caption: "Mean round trip of the UDP probes sent in each interval and answered (idle phase, then beside the streams)",
        line: udp_probe,
        colours: "one line for the probes",
    },
    Quantity {
        metric: "loss_pct",
        title: "Datagram loss over time",
        axis: "lost %",
        steps: true,
        time_us: false,
        floor_zero: true,
        caption: "Share of the datagrams each interval should have brought (how far the highest sequence number received advanced) that did not arrive, drawn flat over the interval; an interval where a datagram counted lost earlier arrived late is drawn at 0",
        line: per_stream,
        colours: "one colour per stream",
    },
    Quantity {
        metric: "jitter_us",
        title: "Jitter over time",
        axis: "RFC 3550 jitter",
        steps: false,
        time_us: true,
        floor_zero: false,
        caption: "RFC 3550 interarrival jitter of the datagrams at the end of each interval (the receiver's running estimate)",
        line: per_stream,
        colours: "one colour per stream",
    },
];

/// `(start, end, value)` of one interval.
type Pt = (f64, f64, f64);

/// Merges consecutive points in groups so that at most [`MAX_POINTS`] remain: each group
/// spans its first start to its last end, its value the time-weighted mean.
pub fn thin(points: &[Pt]) -> Vec<Pt> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let k = points.len().div_ceil(MAX_POINTS);
    points
        .chunks(k)
        .map(|g| {
            let (a, b) = (g[0].0, g[g.len() - 1].1);
            let w: f64 = g.iter().map(|p| p.1 - p.0).sum();
            let v = if w > 0.0 {
                g.iter().map(|p| p.2 * (p.1 - p.0)).sum::<f64>() / w
            } else {
                g.iter().map(|p| p.2).sum::<f64>() / g.len() as f64
            };
            (a, b, v)
        })
        .collect()
}

/// The mean of several repetitions' points, interval by interval (over the repetitions that
/// have that interval).
fn mean(reps: &[Vec<Pt>]) -> Vec<Pt> {
    let n = reps.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .filter_map(|k| {
            let at: Vec<&Pt> = reps.iter().filter_map(|r| r.get(k)).collect();
            let c = at.len() as f64;
            (!at.is_empty()).then(|| {
                (
                    at.iter().map(|p| p.0).sum::<f64>() / c,
                    at.iter().map(|p| p.1).sum::<f64>() / c,
                    at.iter().map(|p| p.2).sum::<f64>() / c,
                )
            })
        })
        .collect()
}

/// A cell's intervals by stream (`(stream, direction)`), then by repetition in run order.
type ByStream<'a> = BTreeMap<(u32, String), Vec<(i64, Vec<&'a IntervalRow>)>>;

fn by_stream(series: &[IntervalRow]) -> ByStream<'_> {
    let mut out: ByStream<'_> = BTreeMap::new();
    for r in series {
        let reps = out.entry((r.stream, r.direction.clone())).or_default();
        match reps.iter_mut().find(|(rep, _)| *rep == r.rep) {
            Some((_, v)) => v.push(r),
            None => reps.push((r.rep, vec![r])),
        }
    }
    out
}

/// Where the omitted start ends: the mean over the repetitions of the end of their last
/// omitted interval.
fn omitted_end(series: &[IntervalRow]) -> Option<f64> {
    let mut ends: BTreeMap<i64, f64> = BTreeMap::new();
    for r in series.iter().filter(|r| r.omitted) {
        let e = ends.entry(r.rep).or_insert(0.0);
        *e = e.max(r.end_s);
    }
    (!ends.is_empty()).then(|| ends.values().sum::<f64>() / ends.len() as f64)
}

/// The charts of one cell.
fn cell_charts(out: &mut String, c: &CellStats) {
    let streams = by_stream(&c.series);
    let shade = omitted_end(&c.series).map(|end| Shade {
        end,
        label: format!("omitted: the first {end:.2} s"),
    });
    let nreps = streams.values().map(Vec::len).max().unwrap_or(0);
    for q in &QUANTITIES {
        if !c.series.iter().any(|r| r.get(q.metric).is_some()) {
            continue;
        }
        let max = c
            .series
            .iter()
            .filter_map(|r| r.get(q.metric))
            .fold(0.0_f64, f64::max);
        let (scale, unit) = match (q.time_us, max >= 1000.0) {
            (true, true) => (1e-3, " (ms)"),
            (true, false) => (1.0, " (µs)"),
            (false, _) => (1.0, ""),
        };
        let mut lines = Vec::new();
        let mut merged = false;
        for (colour, ((stream, dir), reps)) in streams.iter().enumerate() {
            if !reps
                .iter()
                .any(|(_, rows)| rows.iter().any(|r| r.get(q.metric).is_some()))
            {
                continue;
            }
            let name = (q.line)(*stream, dir);
            let pts: Vec<Vec<Pt>> = reps
                .iter()
                .map(|(_, rows)| {
                    rows.iter()
                        .filter_map(|r| {
                            let v = r.get(q.metric)? * scale;
                            Some((
                                r.start_s,
                                r.end_s,
                                if q.floor_zero { v.max(0.0) } else { v },
                            ))
                        })
                        .collect()
                })
                .collect();
            merged |= pts.iter().any(|p| p.len() > MAX_POINTS);
            if pts.len() >= 2 {
                for ((rep, _), p) in reps.iter().zip(&pts) {
                    lines.push(TimeLine {
                        name: format!("{name}, rep {}", rep + 1),
                        colour,
                        faded: true,
                        points: thin(p),
                    });
                }
                lines.push(TimeLine {
                    name: format!("{name}: mean of {} repetitions", pts.len()),
                    colour,
                    faded: false,
                    points: thin(&mean(&pts)),
                });
            } else if let Some(p) = pts.first() {
                lines.push(TimeLine {
                    name,
                    colour,
                    faded: false,
                    points: thin(p),
                });
            }
        }
        let title = format!("{}: {}", q.title, c.cell.label);
        let mut caption = format!("{} ({}), {}", q.caption, c.cell.label, q.colours);
        if nreps >= 2 {
            caption.push_str(&format!(
                "; thin light lines: each of the {nreps} measured repetitions, bold line: their mean interval by interval"
            ));
        }
        if merged {
            caption.push_str(&format!(
                "; more than {MAX_POINTS} intervals per line are drawn merged in groups of consecutive intervals (time-weighted mean)"
            ));
        }
        if let Some(s) = &shade {
            caption.push_str(&format!(
                "; shaded: the omitted start (the first {:.2} s on average), stored but left out of the summary",
                s.end
            ));
        }
        caption.push('.');
        figure(
            out,
            &time_chart(
                &title,
                &lines,
                shade.as_ref(),
                &format!("{}{unit}", q.axis),
                q.steps,
            ),
            &caption,
        );
    }
}

/// The time-series charts of an experiment: every cell with stored intervals.
pub fn series_charts(out: &mut String, st: &ExperimentStats) {
    for c in st.cells.iter().filter(|c| !c.series.is_empty()) {
        cell_charts(out, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_series_are_thinned_by_a_time_weighted_mean() {
        let pts: Vec<Pt> = (0..1500)
            .map(|i| (i as f64 * 0.01, (i + 1) as f64 * 0.01, (i % 3) as f64))
            .collect();
        let t = thin(&pts);
        assert!(
            t.len() <= MAX_POINTS && t.len() >= MAX_POINTS / 2,
            "{}",
            t.len()
        );
        assert_eq!(t[0], (0.0, 0.03, 1.0));
        assert!(
            (t[t.len() - 1].1 - 15.0).abs() < 1e-9,
            "still ends at the end"
        );
        for w in t.windows(2) {
            assert!((w[0].1 - w[1].0).abs() < 1e-9, "contiguous");
        }
        let short = &pts[..10];
        assert_eq!(thin(short), short.to_vec());
    }

    #[test]
    fn the_mean_is_taken_interval_by_interval() {
        let a = vec![(0.0, 1.0, 2.0), (1.0, 2.0, 4.0)];
        let b = vec![(0.0, 1.2, 4.0)];
        assert_eq!(mean(&[a, b]), [(0.0, 1.1, 3.0), (1.0, 2.0, 4.0)]);
    }
}
