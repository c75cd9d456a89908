use super::*;
use crate::model::params::Params;
use crate::plan::{Group, Order};

/// A writer into a shared buffer, and a way to read back its lines.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn lines(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "whole lines: {text:?}"
        );
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }
}

/// A writer whose every write fails as a closed pipe does.
struct Closed;

impl Write for Closed {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The binary's observer, as a record of the calls it gets.
#[derive(Default)]
struct Mock(Vec<String>);

impl Observer for Mock {
    fn start(&mut self, _: &Plan, experiment: i64, runs: usize) {
        self.0.push(format!("start {experiment} {runs}"));
    }
    fn run_start(&mut self, c: &Cell, rep: usize, warmup: bool) {
        self.0.push(format!("run_start {} {rep} {warmup}", c.index));
    }
    fn live(&mut self, _: &Cell, _: usize, _: bool) -> Option<LiveSink> {
        self.0.push("live".into());
        None
    }
    fn retry(&mut self, c: &Cell, rep: usize) {
        self.0.push(format!("retry {} {rep}", c.index));
    }
    fn run_done(&mut self, c: &Cell, rep: usize, warmup: bool, _: &Sample) {
        self.0.push(format!("run_done {} {rep} {warmup}", c.index));
    }
    fn end(&mut self) {
        self.0.push("end".into());
    }
}

fn plan() -> Plan {
    let g = Group::new("bulk", Params::new().with("duration", "0.5s"))
        .axis(crate::plan::Axis::single("strategy", ["write", "writev"]));
    Plan::build("p", "", &[g], 2, 1, Order::Sequential, "socklab bulk").unwrap()
}

fn interval(start: f64) -> Interval {
    Interval {
        start_s: start,
        end_s: start + 0.1,
        values: vec![("gbps".into(), 9.5), ("rtt_us".into(), f64::NAN)],
        ..Interval::default()
    }
}

#[test]
fn a_run_writes_start_intervals_repetitions_and_errors_as_json_lines() {
    let plan = plan();
    let buf = Buf::default();
    let mut mock = Mock::default();
    {
        let mut s = Streamed::new(&mut mock, EventWriter::new(buf.clone()));
        s.start(&plan, 7, 6);
        let c0 = &plan.cells[0];
        s.run_start(c0, 0, true);
        let sink = s.live(c0, 0, true).expect("a stream takes the intervals");
        sink(&interval(0.0));
        sink(&interval(0.1));
        s.run_done(
            c0,
            0,
            true,
            &Sample::new([("gbps", 9.0), (VALID_METRIC, 1.0)], json!({})),
        );
        s.run_start(c0, 0, false);
        s.run_done(
            c0,
            0,
            false,
            &Sample::new(
                [("gbps", 2.0), ("emu_valid", 0.0)],
                json!({ "invalid_reason": "forward: 3.0 % of packets left more than 1ms late" }),
            ),
        );
        s.retry(c0, 0);
        s.run_done(
            c0,
            0,
            false,
            &Sample::new([("gbps", 8.0)], json!({ "retry": true })),
        );
        s.run_done(
            &plan.cells[1],
            0,
            false,
            &crate::runner::failed_sample("writev: connection refused"),
        );
        s.end();
    }
    // Every call reaches the binary's observer but `live`: the intervals go to the stream.
    assert_eq!(
        mock.0,
        [
            "start 7 6",
            "run_start 0 0 true",
            "run_done 0 0 true",
            "run_start 0 0 false",
            "run_done 0 0 false",
            "retry 0 0",
            "run_done 0 0 false",
            "run_done 1 0 false",
            "end"
        ]
    );
    let lines = buf.lines();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(
        events,
        [
            "start",
            "interval",
            "interval",
            "repetition",
            "repetition",
            "repetition",
            "error"
        ]
    );
    let start = &lines[0]["data"];
    assert_eq!(start["schema"], SCHEMA);
    assert_eq!(start["experiment"], 7);
    assert_eq!(start["runs"], 6);
    assert_eq!(
        (start["reps"].as_u64(), start["warmup"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(start["cells"][1]["label"], "strategy=writev");
    assert_eq!(start["cells"][1]["config"]["strategy"], "writev");
    assert_eq!(start["cells"][1]["workload"], "bulk");

    let i = &lines[2]["data"];
    assert_eq!(
        (i["experiment"].as_i64(), i["warmup"].as_bool()),
        (Some(7), Some(true))
    );
    assert_eq!(i["start_s"], 0.1);
    assert_eq!(i["gbps"], 9.5);
    assert!(i.get("type").is_none() && i.get("rtt_us").is_none(), "{i}");

    let (warm, invalid, retry) = (&lines[3]["data"], &lines[4]["data"], &lines[5]["data"]);
    assert_eq!(warm["warmup"], true);
    assert_eq!(warm["valid"], true);
    assert_eq!(warm["invalid_reason"], Value::Null);
    assert_eq!(warm["metrics"]["gbps"], 9.0);
    assert_eq!(warm["config"]["strategy"], "write");
    assert_eq!(warm["label"], "strategy=write");
    assert_eq!(invalid["warmup"], false);
    assert_eq!(invalid["valid"], false);
    assert_eq!(
        invalid["invalid_reason"],
        "forward: 3.0 % of packets left more than 1ms late"
    );
    let bare = Sample::new([("emu_valid", 0.0)], Value::Null);
    let (_, d) = repetition_event(7, &plan.cells[0], 1, false, &bare);
    assert!(
        d["invalid_reason"].as_str().unwrap().contains("emu_valid"),
        "{d}"
    );
    assert_eq!(
        (retry["retry"].as_bool(), retry["valid"].as_bool()),
        (Some(true), Some(true))
    );

    let err = &lines[6]["data"];
    assert_eq!(err["cell"], 1);
    assert_eq!(err["error"], "writev: connection refused");
    assert!(err.get("metrics").is_none(), "{err}");
}

#[test]
fn a_closed_stdout_stops_the_lines_and_is_reported_once() {
    let w = EventWriter::new(Closed);
    w.event("start", json!({}));
    w.event("end", json!({}));
    let e = w.take_error().expect("the first failed write");
    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
    assert!(w.take_error().is_none());
}

#[test]
fn lines_from_many_threads_stay_whole() {
    let buf = Buf::default();
    let w = EventWriter::new(buf.clone());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let w = w.clone();
            std::thread::spawn(move || {
                for k in 0..50 {
                    w.event(
                        "interval",
                        json!({ "thread": t, "k": k, "pad": "x".repeat(300) }),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(buf.lines().len(), 200);
}

#[test]
fn an_interruption_names_what_the_experiment_holds() {
    let e = LabError::Interrupted {
        experiment: 3,
        measured: 2,
        warmups: 1,
    };
    let d = interrupted_data(&e, Some(json!({ "cells": [] })));
    assert_eq!(d["experiment"], 3);
    assert_eq!(
        (d["measured"].as_u64(), d["warmups"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(
        d["message"].as_str().unwrap().starts_with("interrupted"),
        "{d}"
    );
    assert_eq!(d["statistics"]["cells"], json!([]));
    assert_eq!(interrupted_data(&e, None)["statistics"], Value::Null);
}
