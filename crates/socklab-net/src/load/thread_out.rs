//! What each thread of the load generator hands back ([`ThreadOut`]), and the merge of all
//! threads' into the run's report ([`assemble`]).

use std::time::Duration;

use hdrhistogram::Histogram;

use super::merge::{report, LoadHistograms, Totals};
use super::metrics::histogram;
use super::{Failures, LoadConfig, LoadReport};

/// One thread's histograms, counts and CPU time.
pub(super) struct ThreadOut {
    pub(super) connect: Histogram<u64>,
    pub(super) first_byte: Histogram<u64>,
    pub(super) response: Histogram<u64>,
    pub(super) corrected: Histogram<u64>,
    pub(super) send_lag: Histogram<u64>,
    pub(super) timer_lag: Histogram<u64>,
    pub(super) loop_busy: Histogram<u64>,
    pub(super) completed: u64,
    pub(super) failed: Failures,
    pub(super) connections_opened: u64,
    pub(super) bytes_written: u64,
    pub(super) bytes_read: u64,
    pub(super) cpu_user: Duration,
    pub(super) cpu_sys: Duration,
    pub(super) wall: Duration,
}

impl ThreadOut {
    pub(super) fn new() -> ThreadOut {
        ThreadOut {
            connect: histogram(),
            first_byte: histogram(),
            response: histogram(),
            corrected: histogram(),
            send_lag: histogram(),
            timer_lag: histogram(),
            loop_busy: histogram(),
            completed: 0,
            failed: Failures::default(),
            connections_opened: 0,
            bytes_written: 0,
            bytes_read: 0,
            cpu_user: Duration::ZERO,
            cpu_sys: Duration::ZERO,
            wall: Duration::ZERO,
        }
    }
}

/// Merges the threads' outputs into the report (and warns of a thread busy over 90 %).
pub(super) fn assemble(
    cfg: &LoadConfig,
    outs: Vec<ThreadOut>,
    wall: Duration,
    aborted: Option<String>,
) -> (LoadReport, LoadHistograms) {
    let mut all = ThreadOut::new();
    let mut util = Vec::with_capacity(outs.len());
    for o in &outs {
        let merge = |into: &mut Histogram<u64>, from: &Histogram<u64>| {
            // Both have the same bounds and auto-resize: add cannot fail.
            let _ = into.add(from);
        };
        merge(&mut all.connect, &o.connect);
        merge(&mut all.first_byte, &o.first_byte);
        merge(&mut all.response, &o.response);
        merge(&mut all.corrected, &o.corrected);
        merge(&mut all.send_lag, &o.send_lag);
        merge(&mut all.timer_lag, &o.timer_lag);
        merge(&mut all.loop_busy, &o.loop_busy);
        all.completed += o.completed;
        all.failed.add(&o.failed);
        all.connections_opened += o.connections_opened;
        all.bytes_written += o.bytes_written;
        all.bytes_read += o.bytes_read;
        all.cpu_user += o.cpu_user;
        all.cpu_sys += o.cpu_sys;
        let w = o.wall.as_secs_f64();
        util.push(if w > 0.0 {
            ((o.cpu_user + o.cpu_sys).as_secs_f64() / w).min(1.0)
        } else {
            0.0
        });
    }
    let mut warnings = Vec::new();
    for (t, u) in util.iter().enumerate() {
        if *u > 0.9 {
            warnings.push(format!(
                "generator thread {t} was busy {:.0}% of the time: the client may be the bottleneck (add `threads`, or lower the load)",
                u * 100.0
            ));
        }
    }
    let totals = Totals {
        completed: all.completed,
        failed: all.failed,
        connections_opened: all.connections_opened,
        bytes_written: all.bytes_written,
        bytes_read: all.bytes_read,
        cpu_user_s: all.cpu_user.as_secs_f64(),
        cpu_sys_s: all.cpu_sys.as_secs_f64(),
    };
    let h = LoadHistograms {
        connect: all.connect,
        first_byte: all.first_byte,
        response: all.response,
        corrected: all.corrected,
        send_lag: all.send_lag,
        timer_lag: all.timer_lag,
        loop_busy: all.loop_busy,
    };
    let r = report(
        cfg,
        &totals,
        &h,
        util,
        wall.as_secs_f64(),
        aborted,
        warnings,
    );
    (r, h)
}

/// The end of a run, shared by both engines: the wall time (capped at the asked duration, so
/// the drain is not counted) and why the run was cut short, if it was (an abort, or Ctrl-C).
pub(crate) fn end_of_run(
    duration: Option<std::time::Duration>,
    elapsed: std::time::Duration,
    abort_reason: &std::sync::Mutex<Option<String>>,
    stop: &std::sync::atomic::AtomicBool,
) -> (std::time::Duration, Option<String>) {
    let wall = match duration {
        Some(d) if elapsed > d => d,
        _ => elapsed,
    };
    let mut aborted = abort_reason
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if aborted.is_none() && stop.load(std::sync::atomic::Ordering::Relaxed) {
        aborted = Some("interrupted".into());
    }
    (wall, aborted)
}
