//! A bulk run's streams in the lab's vocabulary: the per-stream metrics (`gbps.s0`, …), the
//! direction totals, fairness and facts of a sample, and the report's table of them.

use serde_json::json;
use socklab_net::bulk::BulkResult;
use socklab_net::series::Direction;

use super::PER_STREAM;
use crate::model::sample::Sample;
use crate::model::stats::ExperimentStats;
use crate::table::{num, Table};

/// The name of stream `i`'s value of `metric`.
pub fn name(metric: &str, i: u32) -> String {
    format!("{metric}.s{i}")
}

/// Adds what only a test of several streams, or of other directions, has: per-stream metrics,
/// `fairness`, `gbps_up`/`gbps_down` (both directions), and the streams' facts. A plain test
/// (one stream up, nothing pinned or paced) gets nothing new, so its sample reads as before.
pub fn add(s: &mut Sample, r: &BulkResult) {
    let several = r.streams.len() > 1;
    if several {
        for st in &r.streams {
            let values = [
                st.gbps(),
                st.bytes as f64,
                f64::from(st.tcp.total_retrans),
                f64::from(st.tcp.snd_cwnd),
                f64::from(st.tcp.rtt_us),
            ];
            for (m, v) in PER_STREAM.iter().zip(values) {
                s.push(name(m, st.index), v);
            }
        }
        if let Some(f) = r.fairness() {
            s.extend([("fairness", f)]);
        }
    }
    if let (Some(up), Some(down)) = (r.gbps_of(Direction::Up), r.gbps_of(Direction::Down)) {
        s.extend([("gbps_up", up), ("gbps_down", down)]);
    }
    let plain = !several
        && r.streams.iter().all(|st| {
            st.direction == Direction::Up
                && st.pacing.is_none()
                && st.cpu.is_none()
                && st.server_cpu.is_none()
        });
    if plain {
        return;
    }
    let facts: Vec<serde_json::Value> = r
        .streams
        .iter()
        .map(|st| {
            json!({
                "stream": st.index,
                "direction": st.direction.as_str(),
                "cc": st.cc,
                "sndbuf": st.sndbuf,
                "rcvbuf": st.rcvbuf,
                "pacing_rate_bps": st.pacing.map(|b| b.saturating_mul(8)),
                "cpu": st.cpu,
                "server_cpu": st.server_cpu,
                "mss": st.tcp.snd_mss,
                "min_rtt_us": st.tcp.min_rtt_us,
                "verified": st.verified,
            })
        })
        .collect();
    if let Some(o) = s.extra.as_object_mut() {
        o.insert("streams".into(), facts.into());
    }
}

/// The report's table of the cells with several streams: each stream's mean Gbit/s, the
/// directions' totals with both, the total and Jain's fairness index.
pub fn table(st: &ExperimentStats) -> Option<Table> {
    let cells: Vec<_> = st
        .cells
        .iter()
        .filter(|c| c.metrics.contains_key("gbps.s1"))
        .collect();
    if cells.is_empty() {
        return None;
    }
    let most = cells
        .iter()
        .flat_map(|c| c.metrics.keys())
        .filter_map(|k| k.strip_prefix("gbps.s")?.parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    let bidir = cells.iter().any(|c| c.metrics.contains_key("gbps_up"));
    let heads: Vec<String> = (0..=most).map(|i| format!("s{i}")).collect();
    let mut headers = vec!["config", "n"];
    headers.extend(heads.iter().map(String::as_str));
    if bidir {
        headers.extend(["up", "down"]);
    }
    headers.extend(["total", "fairness"]);
    let mut t = Table::new(&headers);
    let mean = |c: &crate::model::stats::CellStats, k: &str| {
        c.metrics
            .get(k)
            .map(|s| num(s.mean))
            .unwrap_or_else(|| "-".into())
    };
    for c in cells {
        let mut row = vec![c.cell.label.clone(), c.n_text(st.keep_invalid)];
        row.extend((0..=most).map(|i| mean(c, &name("gbps", i))));
        if bidir {
            row.push(mean(c, "gbps_up"));
            row.push(mean(c, "gbps_down"));
        }
        row.push(mean(c, "gbps"));
        row.push(mean(c, "fairness"));
        t.row(row);
    }
    Some(t)
}

/// The caption of [`table`].
pub const NOTE: &str = "Each stream's Gbit/s (its bytes over its own time, from the common start to its receiver having read its last byte), mean over the measured repetitions; with direction = down every stream is the sink's sending, with bidir streams 0 … n-1 send up and n … 2n-1 down. *total* is every stream's bytes over the span to the last stream's end (the cell's gbps); *up* and *down* the same per direction (bidir); *fairness* is Jain's index over the streams' Gbit/s (1: equal shares; 1/n: one stream takes everything).";
