//! Live JSON (`json_stream`, iperf3 3.x's `--json-stream`): one JSON object a line on stdout
//! as the run goes, each line written whole and flushed. Like iperf3's, every line is
//! `{"event": NAME, "data": {…}}`; the events:
//!
//! - `start`: the plan (experiment id, name, command, reps, warm-ups, order, runs, cells);
//! - `interval`: one interval of one stream of a time series (`interval`), as it closes;
//! - `repetition`: a finished repetition: its cell, configuration, index, warm-up or not,
//!   retry or not, valid or marked invalid (and why), and its metrics;
//! - `error`: a repetition that failed (stored with `failed = 1`), or the run's own error
//!   (then the last line);
//! - `end`: the statistics, the object `--json` prints (and `results show --json`): the
//!   last line of a run that finished;
//! - `interrupted`: the last line of a run stopped by Ctrl-C or SIGTERM: what it holds and
//!   the statistics of the repetitions it finished.
//!
//! [`Streamed`] wraps the binary's observer (whose progress text stays on stderr) and writes
//! the events of the run; [`run_and_stream`] runs a plan with it and writes the last line.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Map, Value};

use super::{run, CaptureConfig, Printer, IO_AS_IS};
use crate::dryrun::keeping_invalid;
use crate::hosts::HostPlan;
use crate::model::sample::{Interval, Sample};
use crate::model::stats::VALID_METRIC;
use crate::output;
use crate::plan::{Cell, Plan};
use crate::runner::Observer;
use crate::series::{live_json, LiveSink};
use crate::store::Store;
use crate::summary::experiment_stats_with;
use crate::LabError;

/// The name of the stream's format, in every `start` event.
pub const SCHEMA: &str = "socklab.json-stream/1";

/// Where the lines go, and the first error writing them.
struct Out {
    w: Box<dyn Write + Send>,
    error: Option<std::io::Error>,
}

/// Writes events, one JSON line each, whole and flushed; shared by the observer and the
/// sinks of the time series (which run on the measuring threads).
#[derive(Clone)]
pub struct EventWriter {
    out: Arc<Mutex<Out>>,
}

impl std::fmt::Debug for EventWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventWriter").finish_non_exhaustive()
    }
}

impl EventWriter {
    /// Lines to `w`.
    pub fn new(w: impl Write + Send + 'static) -> EventWriter {
        EventWriter {
            out: Arc::new(Mutex::new(Out {
                w: Box::new(w),
                error: None,
            })),
        }
    }

    /// Lines to this process's stdout.
    pub fn stdout() -> EventWriter {
        EventWriter::new(std::io::stdout())
    }

    fn lock(&self) -> MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `{"event": event, "data": data}` as one line and flushes it. After a failed
    /// write (a closed pipe) nothing more is written; [`EventWriter::take_error`] says why.
    pub fn event(&self, event: &str, data: Value) {
        // `event` first, as iperf3 writes it (serde_json's objects sort their keys).
        let line = format!("{{\"event\":{},\"data\":{data}}}\n", json!(event));
        let mut o = self.lock();
        if o.error.is_some() {
            return;
        }
        if let Err(e) = o.w.write_all(line.as_bytes()).and_then(|()| o.w.flush()) {
            o.error = Some(e);
        }
    }

    /// The first error writing a line, if any.
    pub fn take_error(&self) -> Option<std::io::Error> {
        self.lock().error.take()
    }
}

/// The `start` event's data: the plan as it will run.
pub fn start_data(plan: &Plan, experiment: i64, runs: usize) -> Value {
    let cells: Vec<Value> = plan
        .cells
        .iter()
        .map(|c| {
            json!({
                "cell": c.index,
                "label": c.label,
                "workload": c.workload.kind(),
                "config": c.workload.params().0,
            })
        })
        .collect();
    json!({
        "schema": SCHEMA,
        "experiment": experiment,
        "name": plan.name,
        "command": plan.command,
        "reps": plan.reps,
        "warmup": plan.warmup,
        "order": plan.order.as_text(),
        "retry_invalid": plan.retry_invalid,
        "runs": runs,
        "cells": cells,
    })
}

/// The `interval` event's data: the object of a `--json` live line, less its `type`.
pub fn interval_data(
    experiment: i64,
    cell: &Cell,
    rep: usize,
    warmup: bool,
    i: &Interval,
) -> Value {
    let mut v = live_json(experiment, cell.index, &cell.label, rep, warmup, i);
    if let Value::Object(m) = &mut v {
        m.remove("type");
    }
    v
}

/// What names a repetition in its events.
fn repetition_head(experiment: i64, cell: &Cell, rep: usize, warmup: bool) -> Map<String, Value> {
    let v = json!({
        "experiment": experiment,
        "cell": cell.index,
        "label": cell.label,
        "rep": rep,
        "warmup": warmup,
    });
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The event of a finished repetition: `error` when it failed (`failed = 1`, its reason),
/// else `repetition` with its configuration, validity and metrics (finite values only).
pub fn repetition_event(
    experiment: i64,
    cell: &Cell,
    rep: usize,
    warmup: bool,
    s: &Sample,
) -> (&'static str, Value) {
    let mut m = repetition_head(experiment, cell, rep, warmup);
    let retry = s
        .extra
        .get("retry")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    m.insert("retry".into(), retry.into());
    if s.get("failed") == Some(1.0) {
        let why = s
            .extra
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("failed");
        m.insert("error".into(), why.into());
        return ("error", Value::Object(m));
    }
    let valid = s.get(VALID_METRIC) != Some(0.0);
    m.insert("config".into(), json!(cell.workload.params().0));
    m.insert("valid".into(), valid.into());
    let why = s.extra.get("invalid_reason").and_then(Value::as_str);
    let why =
        (!valid).then(|| why.unwrap_or("the emulated link could not keep up (`emu_valid` = 0)"));
    m.insert("invalid_reason".into(), json!(why));
    let metrics: Map<String, Value> = s
        .metrics
        .iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    m.insert("metrics".into(), Value::Object(metrics));
    ("repetition", Value::Object(m))
}

/// An observer that writes the run's events and passes every call on to `inner` (the
/// binary's progress on stderr). The time series go only to the stream: `inner` prints none.
pub struct Streamed<'a> {
    inner: &'a mut dyn Observer,
    out: EventWriter,
    experiment: i64,
}

impl std::fmt::Debug for Streamed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamed")
            .field("experiment", &self.experiment)
            .finish_non_exhaustive()
    }
}

impl<'a> Streamed<'a> {
    /// Events to `out`, progress to `inner`.
    pub fn new(inner: &'a mut dyn Observer, out: EventWriter) -> Streamed<'a> {
        Streamed {
            inner,
            out,
            experiment: 0,
        }
    }
}

impl Observer for Streamed<'_> {
    fn start(&mut self, plan: &Plan, experiment: i64, runs: usize) {
        self.experiment = experiment;
        self.inner.start(plan, experiment, runs);
        self.out.event("start", start_data(plan, experiment, runs));
    }

    fn run_start(&mut self, cell: &Cell, rep: usize, warmup: bool) {
        self.inner.run_start(cell, rep, warmup);
    }

    fn live(&mut self, cell: &Cell, rep: usize, warmup: bool) -> Option<LiveSink> {
        let (out, experiment, cell) = (self.out.clone(), self.experiment, cell.clone());
        Some(Arc::new(move |i: &Interval| {
            out.event("interval", interval_data(experiment, &cell, rep, warmup, i));
        }))
    }

    fn retry(&mut self, cell: &Cell, rep: usize) {
        self.inner.retry(cell, rep);
    }

    fn run_done(&mut self, cell: &Cell, rep: usize, warmup: bool, sample: &Sample) {
        self.inner.run_done(cell, rep, warmup, sample);
        let (event, data) = repetition_event(self.experiment, cell, rep, warmup, sample);
        self.out.event(event, data);
    }

    fn end(&mut self) {
        self.inner.end();
    }
}

/// The `interrupted` event's data: what the stopped experiment holds and the statistics of
/// its finished repetitions (`null` when none could be read).
pub fn interrupted_data(e: &LabError, stats: Option<Value>) -> Value {
    let (experiment, measured, warmups) = match e {
        LabError::Interrupted {
            experiment,
            measured,
            warmups,
        } => (Some(*experiment), *measured, *warmups),
        _ => (None, 0, 0),
    };
    json!({
        "experiment": experiment,
        "measured": measured,
        "warmups": warmups,
        "message": e.to_string(),
        "statistics": stats,
    })
}

/// Runs a one-off command's plan as [`super::run_and_report`] does, with its events on
/// stdout ([`Streamed`]) in place of the statistics: the last line is `end` (the statistics,
/// as `--json` prints them), `interrupted`, or `error` (the run's own error). A stopped run
/// also prints what it finished on stderr, for people.
pub fn run_and_stream(
    plan: &Plan,
    store: &mut Store,
    hosts: &HostPlan,
    capture: Option<&CaptureConfig>,
    keep_invalid: bool,
    observer: &mut dyn Observer,
    printer: &mut dyn Printer,
) -> Result<i64, LabError> {
    let plan = &keeping_invalid(plan.clone(), keep_invalid); // none re-run
    let out = EventWriter::stdout();
    streamed(
        &out,
        keep_invalid,
        store,
        observer,
        printer,
        |store, obs, p| run(plan, store, hosts, capture, obs, p),
    )
    .map_err(|(_, e)| e)
}

/// Runs `go` with [`Streamed`] wrapping `observer`, its events to `out`, and writes the last
/// line (see [`run_and_stream`]); returns what `go` returned (the error and the experiment it
/// left), or the error of a stdout that closed.
pub(crate) fn streamed(
    out: &EventWriter,
    keep_invalid: bool,
    store: &mut Store,
    observer: &mut dyn Observer,
    printer: &mut dyn Printer,
    go: impl FnOnce(
        &mut Store,
        &mut dyn Observer,
        &mut dyn Printer,
    ) -> Result<i64, (Option<i64>, LabError)>,
) -> Result<i64, (Option<i64>, LabError)> {
    let mut obs = Streamed::new(observer, out.clone());
    let result = go(store, &mut obs, printer);
    let stats = |store: &Store, id| {
        experiment_stats_with(store, id, keep_invalid).map(|st| (output::to_json(&st), st))
    };
    let result = match result {
        Ok(id) => match stats(store, id) {
            Ok((json, _)) => {
                out.event("end", json);
                Ok(id)
            }
            Err(e) => Err((Some(id), e)),
        },
        Err((Some(id), e @ LabError::Failed { .. })) => {
            match stats(store, id) {
                Ok((json, _)) => out.event("end", json),
                Err(e) => return Err((Some(id), e)),
            }
            Err((Some(id), e))
        }
        Err((Some(id), e @ LabError::Interrupted { .. })) => {
            let st = stats(store, id).ok();
            let json = st.as_ref().map(|s| s.0.clone());
            out.event("interrupted", interrupted_data(&e, json));
            if let Some((_, st)) = st {
                printer.err(&output::human(&st));
            }
            Err((Some(id), e))
        }
        Err((id, e)) => {
            out.event("error", json!({ "error": e.to_string() }));
            Err((id, e))
        }
    };
    match (out.take_error(), result) {
        (Some(source), Ok(id)) => Err((
            Some(id),
            LabError::Io {
                context: IO_AS_IS.into(),
                source,
            },
        )),
        (_, result) => result,
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
