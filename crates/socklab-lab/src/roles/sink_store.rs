//! The sink's results database (issue 27 part 1: "the test is stored like any sink-side
//! measurement when the sink has a `db`"): each iperf3 test the sink finished is an experiment
//! of one cell (workload `bulk`) and one repetition, committed when the test ends, so a killed
//! sink keeps every test it finished. The figures are the sink's own (bytes, seconds, Gbit/s,
//! its CPU, the sender's retransmits where known); the client's own are kept beside them
//! (`client_*` metrics, and its whole results message in the repetition's facts).

use std::net::SocketAddr;
use std::path::Path;

use socklab_net::iperf3::record::TestRecord;
use socklab_sys::host::{host_facts, HostFacts};

use crate::clock::now_rfc3339;
use crate::model::params::Params;
use crate::model::record::{CellRecord, PlanRecord};
use crate::model::sample::Sample;
use crate::store::Store;
use crate::LabError;

/// An open results database and the host's facts, recorded with each test.
#[derive(Debug)]
pub struct SinkStore {
    store: Store,
    host: HostFacts,
}

impl SinkStore {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> Result<SinkStore, LabError> {
        Ok(SinkStore {
            store: Store::open(path)?,
            host: host_facts(),
        })
    }

    /// Stores one finished test of the client at `peer`; returns its experiment id.
    pub fn record(&mut self, peer: SocketAddr, t: &TestRecord) -> Result<i64, LabError> {
        let started = now_rfc3339();
        let (exp, cells) = self.store.begin_experiment(plan(peer, t), &self.host)?;
        let sample = sample(peer, t);
        self.store
            .record_sample(cells[0], 0, false, &started, t.seconds(), &sample)?;
        self.store.finish_experiment(exp, "done")?;
        Ok(exp)
    }
}

/// The experiment of one test: its name says whose, its cell what the client asked for.
fn plan(peer: SocketAddr, t: &TestRecord) -> PlanRecord {
    let p = &t.params;
    let dir = if t.reverse() { "down" } else { "up" };
    let mut config = Params::new()
        .with("peer", peer.to_string())
        .with("streams", p.parallel.to_string())
        .with("direction", dir)
        .with("len", p.len.to_string());
    if p.time > 0 {
        config.set("duration", format!("{}s", p.time));
    }
    if p.num > 0 {
        config.set("bytes", p.num.to_string());
    }
    if let Some(v) = &p.client_version {
        config.set("client_version", v.clone());
    }
    PlanRecord {
        name: format!("iperf3 from {}", peer.ip()),
        description: "an iperf3 client's test, measured by socklab sink".into(),
        command: format!(
            "iperf3 -c (from {peer}) -P {}{} served by socklab sink",
            p.parallel,
            if t.reverse() { " -R" } else { "" }
        ),
        reps: 1,
        warmup: 0,
        run_order: "sequential".into(),
        cells: vec![CellRecord {
            index: 0,
            workload: "bulk".into(),
            label: format!("iperf3 {} streams {dir}", p.parallel),
            config,
        }],
    }
}

/// The repetition: the sink's figures, the client's beside them.
fn sample(peer: SocketAddr, t: &TestRecord) -> Sample {
    let mut metrics: Vec<(String, f64)> = vec![
        ("gbps".into(), t.gbps()),
        ("bytes".into(), t.bytes() as f64),
        ("seconds".into(), t.seconds()),
        ("streams".into(), f64::from(t.params.parallel)),
        ("client_bytes".into(), t.client_bytes() as f64),
        ("client_cpu_pct".into(), t.client.cpu_util_total),
    ];
    // The sink's CPU is the receiver's, or the sender's with `-R`; the client's the other.
    let (ours, theirs) = if t.reverse() {
        ("snd_cpu_pct", "rcv_cpu_pct")
    } else {
        ("rcv_cpu_pct", "snd_cpu_pct")
    };
    metrics.push((ours.into(), t.ours.cpu_util_total));
    metrics.push((theirs.into(), t.client.cpu_util_total));
    if let Some(r) = t.retransmits() {
        metrics.push(("retrans".into(), r as f64));
    }
    for (i, s) in t.ours.streams.iter().enumerate() {
        metrics.push((format!("bytes.s{i}"), s.bytes as f64));
    }
    let extra = serde_json::json!({
        "iperf3": {
            "peer": peer.to_string(),
            "reverse": t.reverse(),
            "client_version": t.params.client_version,
            "sink_results": t.ours,
            "client_results": t.client,
        }
    });
    Sample {
        metrics: metrics.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        extra,
        ..Sample::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_net::iperf3::proto::{Params as IperfParams, Results};

    fn record(reverse: bool) -> TestRecord {
        let params = IperfParams::parse(
            format!(r#"{{"tcp":true,"time":2,"parallel":2,"len":131072,"reverse":{reverse},"client_version":"3.12"}}"#)
                .as_bytes(),
        )
        .unwrap();
        let r = |bytes: u64, flag: i64, retx: i64| {
            Results::parse(
                format!(
                    r#"{{"cpu_util_total":12.5,"cpu_util_user":2.5,"cpu_util_system":10,"sender_has_retransmits":{flag},"streams":[{{"id":1,"bytes":{bytes},"retransmits":{retx},"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2}},{{"id":3,"bytes":{bytes},"retransmits":{retx},"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.5}}]}}"#
                )
                .as_bytes(),
            )
            .unwrap()
        };
        TestRecord {
            params,
            ours: r(
                1_000_000_000,
                if reverse { 1 } else { -1 },
                if reverse { 3 } else { -1 },
            ),
            client: r(
                1_000_000_100,
                if reverse { -1 } else { 1 },
                if reverse { -1 } else { 4 },
            ),
            applied: Vec::new(),
        }
    }

    #[test]
    fn a_finished_test_is_an_experiment_with_the_sinks_figures_and_the_clients() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sink.db");
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let mut s = SinkStore::open(&db).unwrap();
        let up = s.record(peer, &record(false)).unwrap();
        let down = s.record(peer, &record(true)).unwrap();
        drop(s);
        let store = Store::open_read_only(&db).unwrap();
        let e = store.experiment(up).unwrap();
        assert_eq!(
            (e.name.as_str(), e.status.as_str()),
            ("iperf3 from 127.0.0.1", "done")
        );
        let m = &store.samples(up).unwrap()[0].metrics;
        assert_eq!(m["bytes"], 2e9);
        assert_eq!(m["seconds"], 2.0);
        assert_eq!(m["gbps"], 8.0);
        assert_eq!(m["client_bytes"], 2_000_000_200.0);
        assert_eq!(m["retrans"], 8.0, "the client sent: its own count");
        assert_eq!((m["rcv_cpu_pct"], m["streams"]), (12.5, 2.0));
        let m = &store.samples(down).unwrap()[0].metrics;
        assert_eq!(m["retrans"], 6.0, "the sink sent: its TCP_INFO count");
        assert!(m.contains_key("snd_cpu_pct"));
        let cell = &store.cells(down).unwrap()[0];
        assert_eq!(cell.config.get("direction"), Some("down"));
    }
}
