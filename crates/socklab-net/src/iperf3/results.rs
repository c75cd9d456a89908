//! The sink's own figures of an iperf3 test, sans I/O: each stream's counts with the
//! omitted start taken off (`omit`), the results message built from them, and the text a
//! client gets with `get_server_output`.
//!
//! Learnt from esnet/iperf 3.12 `src/iperf_api.c`: `iperf_reset_stats` (when the omitted
//! seconds are over, a server restarts each stream's counts and clock: received bytes to 0,
//! sent bytes and retransmits counted from there on, the start time to now, and the test's
//! byte total of `-n` to 0), `send_results` (a stream's `bytes` are those after the omitted
//! start, `start_time` 0, `end_time` the seconds since the restart; `server_output_text` or,
//! for a server in JSON mode, `server_output_json`, when the client asked), and
//! `src/iperf_server_api.c` (`create_server_omit_timer`: the omitted period starts when the
//! server sends `TEST_START`). Notes in docs/interop.md, section "iperf3".

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::proto::{Params, Results, StreamResult};

/// One stream's counts, restarted when the omitted seconds are over (iperf3's
/// `iperf_reset_stats`): what moved before is in no figure.
#[derive(Debug, Clone)]
pub struct Meter {
    /// Where the counted part begins: the test's start, or the end of the omitted period.
    start: Instant,
    /// The end of the omitted period, while it lasts.
    omit_end: Option<Instant>,
    bytes: u64,
    last: Option<Instant>,
}

impl Meter {
    /// A stream whose test started at `start`, with `omit` seconds omitted.
    pub fn new(start: Instant, omit: Duration) -> Meter {
        Meter {
            start,
            omit_end: (!omit.is_zero()).then(|| start + omit),
            bytes: 0,
            last: None,
        }
    }

    /// `n` bytes moved at `now` (0: only the clock moved). `true` when this call ended the
    /// omitted period: the counts restarted at its end (the bytes of this call are counted),
    /// and the caller takes its other baselines (retransmits, the test's byte total) now.
    pub fn moved(&mut self, now: Instant, n: u64) -> bool {
        let crossed = match self.omit_end {
            Some(end) if now >= end => {
                self.omit_end = None;
                self.start = end;
                self.bytes = 0;
                self.last = None;
                true
            }
            _ => false,
        };
        if n > 0 {
            self.bytes += n;
            self.last = Some(now);
        }
        crossed
    }

    /// Whether the omitted period lasts.
    pub fn omitting(&self) -> bool {
        self.omit_end.is_some()
    }

    /// Bytes counted (0 while omitting).
    pub fn bytes(&self) -> u64 {
        if self.omitting() {
            0
        } else {
            self.bytes
        }
    }

    /// Seconds from the start of the counted part to the last byte counted.
    pub fn seconds(&self) -> f64 {
        match (self.omitting(), self.last) {
            (false, Some(last)) => last.saturating_duration_since(self.start).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// The stream's figures for the results message; `retransmits` -1 where not known.
    pub fn result(&self, id: i64, retransmits: i64) -> StreamResult {
        StreamResult {
            id,
            bytes: self.bytes(),
            retransmits,
            jitter: 0.0,
            errors: 0,
            packets: 0,
            start_time: 0.0,
            end_time: self.seconds(),
        }
    }
}

/// What the stream sockets run with, read back from the kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// `TCP_CONGESTION` (`None`: it could not be read).
    pub congestion: Option<String>,
    /// `SO_SNDBUF` (the kernel doubles what is set, for its bookkeeping).
    pub sndbuf: usize,
    /// `SO_RCVBUF` (doubled likewise).
    pub rcvbuf: usize,
    /// Further options asked for and read back, e.g. `TCP_NODELAY 1` (issue 27 part 1).
    pub more: Vec<String>,
}

/// One stream of a test at its end, as the sink saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// Its figures.
    pub result: StreamResult,
    /// The sink sent on it.
    pub sends: bool,
    /// How the sink moved its bytes (`read`, `write`, `sendfile`).
    pub how: &'static str,
    /// CPU of its thread, user and system, over the whole test.
    pub cpu: (Duration, Duration),
}

/// The test, for the results message and the server's output.
#[derive(Debug, Clone, Copy)]
pub struct Test<'a> {
    /// The client's parameters.
    pub params: &'a Params,
    /// The client, as text.
    pub peer: &'a str,
    /// What the stream sockets run with.
    pub applied: Option<&'a Applied>,
    /// Seconds from the start of the streams to their end (the CPU is a share of them).
    pub wall: f64,
}

/// The sink's results message: its own figures, by stream id, its CPU as a share of the
/// test's `wall` time, the congestion control its streams used, and its output when asked.
pub fn build(t: &Test<'_>, ended: &[Ended]) -> Results {
    let mut ended = ended.to_vec();
    ended.sort_by_key(|e| e.result.id);
    let (mut user, mut sys) = (0.0, 0.0);
    for e in &ended {
        user += e.cpu.0.as_secs_f64();
        sys += e.cpu.1.as_secs_f64();
    }
    let pct = |x: f64| {
        if t.wall > 0.0 {
            100.0 * x / t.wall
        } else {
            0.0
        }
    };
    let sends = ended.iter().any(|e| e.sends) || t.params.reverse || t.params.bidirectional;
    Results {
        cpu_util_total: pct(user + sys),
        cpu_util_user: pct(user),
        cpu_util_system: pct(sys),
        // A UDP sender knows no retransmits: 0, as iperf3's server says.
        sender_has_retransmits: match (sends, t.params.udp) {
            (true, false) => 1,
            (true, true) => 0,
            (false, _) => -1,
        },
        congestion_used: t.applied.and_then(|a| a.congestion.clone()),
        server_output_text: t
            .params
            .get_server_output
            .is_some_and(|g| g != 0)
            .then(|| text(t, &ended)),
        streams: ended.into_iter().map(|e| e.result).collect(),
    }
}

fn gbits(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e9
    } else {
        0.0
    }
}

/// The sink's own account of a test, the text a client prints under "Server output:" (or
/// keeps as `server_output_text` with `-J`).
pub fn text(t: &Test<'_>, ended: &[Ended]) -> String {
    let p = t.params;
    let n_send = ended.iter().filter(|e| e.sends).count();
    let mut s = String::new();
    let _ = write!(
        s,
        "socklab sink: iperf3 test from {}: {} streams ({} receive, {} send)",
        t.peer,
        ended.len(),
        ended.len() - n_send,
        n_send
    );
    if p.omit > 0 {
        let _ = write!(s, ", the first {} s omitted", p.omit);
    }
    s.push('\n');
    if let Some(a) = t.applied {
        let cc = a.congestion.as_deref().unwrap_or("unknown");
        let _ = write!(
            s,
            "stream sockets: congestion {cc}, SO_SNDBUF {}, SO_RCVBUF {}",
            a.sndbuf, a.rcvbuf
        );
        match p.window {
            Some(w) => {
                let _ = write!(s, " (window {w} asked; the kernel doubles what is set)");
            }
            None => s.push_str(" (no window asked: the kernel tunes them)"),
        }
        s.push('\n');
        for m in &a.more {
            let _ = writeln!(s, "stream sockets: {m}");
        }
    }
    for n in super::options::notes(p) {
        let _ = writeln!(s, "{n}");
    }
    for e in ended {
        let r = &e.result;
        let dir = if e.sends { "send" } else { "receive" };
        let _ = write!(
            s,
            "stream {} {dir}: {} bytes in {:.3} s = {:.3} Gbit/s",
            r.id,
            r.bytes,
            r.end_time,
            gbits(r.bytes, r.end_time)
        );
        if e.sends && r.retransmits >= 0 {
            let _ = write!(s, ", {} retransmits", r.retransmits);
        }
        let _ = writeln!(s, " ({})", e.how);
    }
    for sends in [false, true] {
        let part: Vec<&StreamResult> = ended
            .iter()
            .filter(|e| e.sends == sends)
            .map(|e| &e.result)
            .collect();
        if part.is_empty() {
            continue;
        }
        let bytes: u64 = part.iter().map(|r| r.bytes).sum();
        let secs = part.iter().map(|r| r.end_time).fold(0.0, f64::max);
        let dir = if sends { "send" } else { "receive" };
        let _ = write!(
            s,
            "{dir} total: {bytes} bytes in {secs:.3} s = {:.3} Gbit/s",
            gbits(bytes, secs)
        );
        if sends {
            let retr: i64 = part.iter().map(|r| r.retransmits.max(0)).sum();
            let _ = write!(s, ", {retr} retransmits");
        }
        s.push('\n');
    }
    if p.zerocopy.is_some_and(|z| z != 0) && n_send < ended.len() {
        s.push_str("zerocopy: applies to sending; the sink receives with read(), as iperf3's server does\n");
    }
    s
}
