//! The bounds of a bulk test, asked after every call that made no progress: Ctrl-C, another
//! stream's failure, the test's deadline, a stall, and the current phase's own limit.

use std::io::{self, Read};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{BulkConfig, Limit, RESULT_WAIT, STALL};
use crate::partial::{Every, Policy};
use crate::protocol::MAX_LINE;
use crate::NetError;

/// Why a test was given up while a call waited ([`Bounds::wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Halt {
    Interrupted,
    Aborted,
    Deadline,
    Stalled,
    Phase,
}

/// The bounds of one stream of a test (or of its control connection).
pub(crate) struct Bounds<'a> {
    pub stop: &'a dyn Fn() -> bool,
    /// Raised when another stream of the test failed: this one gives up too.
    pub abort: &'a AtomicBool,
    /// The start of the test, and its deadline from then (`None`: before the start, or none).
    pub t0: Option<Instant>,
    pub deadline: Option<Duration>,
    /// The current phase's own limit (READY, RESULT), and what it waits for.
    pub phase: Option<(Instant, &'static str)>,
    /// Bytes moved so far (for the messages).
    pub moved: u64,
    /// This stream receives (a down stream): the messages say so.
    pub receiving: bool,
    pub halted: Option<Halt>,
    /// When a call that moved bytes looks at the clock (the deadline).
    pub every: Every,
}

impl<'a> Bounds<'a> {
    /// Bounds before the start, with a phase limit of `phase` from now.
    pub fn new(
        cfg: &BulkConfig,
        stop: &'a dyn Fn() -> bool,
        abort: &'a AtomicBool,
        phase: (Duration, &'static str),
    ) -> Bounds<'a> {
        Bounds {
            stop,
            abort,
            t0: None,
            deadline: cfg.deadline(),
            phase: Some((Instant::now() + phase.0, phase.1)),
            moved: 0,
            receiving: false,
            halted: None,
            every: Every::default(),
        }
    }

    /// Whether to wait on after `e`: `Ok` to try again, `Err` to give up (the reason is kept
    /// in `halted`; [`Bounds::error`] turns it into the test's error).
    pub fn wait(&mut self, e: io::Error, since: Instant) -> io::Result<()> {
        if !crate::partial::is_no_progress(&e) {
            return Err(e);
        }
        self.check(since)
    }

    /// Whether to go on now, with or without progress (`since`: the start of the silence, for
    /// the stall): `Err` when a bound gave up, as [`Bounds::wait`]. A control line that trickles
    /// in makes progress read by read, so it is checked after each partial read too.
    pub fn check(&mut self, since: Instant) -> io::Result<()> {
        let now = Instant::now();
        let halt = if (self.stop)() {
            Halt::Interrupted
        } else if self.abort.load(Ordering::Relaxed) {
            Halt::Aborted
        } else if self.past_deadline(now) {
            Halt::Deadline
        } else if now.duration_since(since) >= STALL {
            Halt::Stalled
        } else if self.phase.is_some_and(|(until, _)| now >= until) {
            Halt::Phase
        } else {
            return Ok(());
        };
        self.halted = Some(halt);
        Err(io::Error::other("given up"))
    }

    /// Whether the test's deadline has passed at `now`.
    fn past_deadline(&self, now: Instant) -> bool {
        self.t0
            .zip(self.deadline)
            .is_some_and(|(t0, d)| now >= t0 + d)
    }

    /// The test's error after a failed call: the bound that gave up, else the I/O error.
    pub fn error(&self, cfg: &BulkConfig, doing: &str, e: io::Error) -> NetError {
        let fmt = socklab_units::format_duration;
        let peer = cfg.to.to_string();
        let moved = self.moved;
        let (count, stopped) = if self.receiving {
            ("received", "the sink stopped sending")
        } else {
            ("sent", "the sink stopped reading")
        };
        match self.halted {
            None => NetError::io(format!("{doing} {peer}"), e),
            Some(Halt::Interrupted) => NetError::Interrupted,
            Some(Halt::Aborted) => NetError::Io {
                context: format!("{doing} {peer}"),
                source: io::Error::other("given up: another stream of the test failed"),
            },
            Some(Halt::Deadline) => {
                let d = self.deadline.unwrap_or_default();
                let why = match (cfg.timeout, cfg.limit) {
                    (None, Limit::Duration(dur)) => {
                        format!("`duration` {} + {} grace", fmt(dur), fmt(cfg.grace))
                    }
                    _ => format!("`timeout` {}", fmt(d)),
                };
                NetError::Timeout(format!(
                    "the test did not end within {} ({why}) while {doing} {peer}, {moved} bytes {count}: {stopped} or the link stopped delivering; a slow link needs a longer `timeout`",
                    fmt(d)
                ))
            }
            Some(Halt::Stalled) if self.receiving => NetError::Timeout(format!(
                "the sink at {peer} sent no data for {} while {doing} it, {moved} bytes received: it stopped sending, or the link stopped delivering",
                fmt(STALL)
            )),
            Some(Halt::Stalled) => NetError::Timeout(format!(
                "the sink at {peer} accepted no data for {} while {doing} it, {moved} bytes sent: it stopped reading, or the link stopped delivering",
                fmt(STALL)
            )),
            Some(Halt::Phase) => match self.phase.map_or("", |(_, what)| what) {
                "RESULT" => NetError::Timeout(format!(
                    "no RESULT from the sink at {peer} within {} of the last write, {moved} bytes sent: it stopped reading, or the link stopped delivering; a slow link needs `timeout`",
                    fmt(RESULT_WAIT)
                )),
                "TLS handshake" => NetError::Protocol {
                    peer,
                    detail: format!(
                        "the TLS handshake did not finish within {}: is it a `socklab sink`, and is the link passing data?",
                        fmt(super::READY_WAIT)
                    ),
                },
                what => NetError::Protocol {
                    peer,
                    detail: format!("no {what} line in time: is it a `socklab sink`?"),
                },
            },
        }
    }
}

/// A sending stream's bounds: after a call without progress, [`Bounds::wait`]; after one that
/// moved bytes, Ctrl-C and another stream's failure (every call) and the deadline (every few
/// calls), so a sink that reads a few bytes at a time holds no stream past them.
impl Policy for Bounds<'_> {
    fn stalled(&mut self, e: io::Error, since: Instant) -> io::Result<()> {
        self.wait(e, since)
    }

    fn moved(&mut self, _n: usize) -> io::Result<()> {
        let halt = if (self.stop)() {
            Halt::Interrupted
        } else if self.abort.load(Ordering::Relaxed) {
            Halt::Aborted
        } else if self.every.tick() && self.past_deadline(Instant::now()) {
            Halt::Deadline
        } else {
            return Ok(());
        };
        self.halted = Some(halt);
        Err(io::Error::other("given up"))
    }
}

/// Reads one `\n`-terminated control line (without over-reading: the peer sends nothing after it
/// until we act), within the phase's limit in `b`.
pub(crate) fn read_line(
    stream: &mut TcpStream,
    what: &str,
    b: &mut Bounds<'_>,
    cfg: &BulkConfig,
) -> Result<String, NetError> {
    let peer = cfg.to.to_string();
    let mut line = Vec::with_capacity(128);
    let mut buf = [0u8; MAX_LINE];
    loop {
        let n = match stream.read(&mut buf[..MAX_LINE - line.len()]) {
            Ok(n) => n,
            // Silence while waiting for a line is no stall (the sink is reading): only the
            // phase's limit, the deadline and Ctrl-C apply.
            Err(e) => match b.wait(e, Instant::now()) {
                Ok(()) => continue,
                Err(e) => return Err(b.error(cfg, &format!("waiting for {what} from"), e)),
            },
        };
        if n == 0 {
            return Err(NetError::Protocol {
                peer,
                detail: format!(
                    "closed the connection before sending {what}: is it a `socklab sink`?"
                ),
            });
        }
        line.extend_from_slice(&buf[..n]);
        if let Some(nl) = line.iter().position(|&b| b == b'\n') {
            line.truncate(nl);
            return Ok(String::from_utf8_lossy(&line).into_owned());
        }
        // Part of a line: the phase's limit, the deadline and Ctrl-C bound the whole line, not
        // each read of it (issue 26 item 7).
        if let Err(e) = b.check(Instant::now()) {
            return Err(b.error(cfg, &format!("waiting for {what} from"), e));
        }
        if line.len() >= MAX_LINE {
            return Err(NetError::Protocol {
                peer,
                detail: format!("{what} line longer than {MAX_LINE} bytes"),
            });
        }
    }
}

/// Reads control lines that may arrive back to back (the RESULT lines of a test's streams):
/// what follows a line is kept for the next call.
#[derive(Debug, Default)]
pub(crate) struct LineReader {
    buf: Vec<u8>,
}

impl LineReader {
    /// The next line (without its newline), within the bounds in `b`.
    pub fn next(
        &mut self,
        stream: &mut TcpStream,
        what: &str,
        b: &mut Bounds<'_>,
        cfg: &BulkConfig,
    ) -> Result<String, NetError> {
        let peer = cfg.to.to_string();
        let mut chunk = [0u8; MAX_LINE];
        loop {
            if let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
                let line = String::from_utf8_lossy(&self.buf[..nl]).into_owned();
                self.buf.drain(..=nl);
                return Ok(line);
            }
            if self.buf.len() >= MAX_LINE {
                return Err(NetError::Protocol {
                    peer,
                    detail: format!("{what} line longer than {MAX_LINE} bytes"),
                });
            }
            match stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(NetError::Protocol {
                        peer,
                        detail: format!("closed the control connection before sending {what}"),
                    })
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    // A line may trickle in: its bounds apply to the whole of it.
                    if !self.buf.contains(&b'\n') {
                        if let Err(e) = b.check(Instant::now()) {
                            return Err(b.error(cfg, &format!("waiting for {what} from"), e));
                        }
                    }
                }
                Err(e) => match b.wait(e, Instant::now()) {
                    Ok(()) => {}
                    Err(e) => return Err(b.error(cfg, &format!("waiting for {what} from"), e)),
                },
            }
        }
    }
}

/// An up stream's end (the server reports at `TEST_END` and never closes it first): waits,
/// within the bounds, until the server's kernel has acknowledged every byte written.
pub(crate) fn await_acked(
    stream: &TcpStream,
    b: &mut Bounds<'_>,
    cfg: &BulkConfig,
) -> Result<(), NetError> {
    if b.deadline.is_none() {
        b.phase = Some((Instant::now() + RESULT_WAIT, "RESULT"));
    }
    let mut since = Instant::now();
    let mut last = u32::MAX;
    loop {
        let ti = socklab_sys::tcp::tcp_info(std::os::fd::AsFd::as_fd(stream))
            .map_err(|e| NetError::io("TCP_INFO", e))?;
        if ti.unacked == 0 && ti.notsent_bytes == 0 {
            return Ok(());
        }
        let left = ti.unacked.saturating_add(ti.notsent_bytes);
        if left != last {
            (last, since) = (left, Instant::now());
        }
        b.check(since)
            .map_err(|e| b.error(cfg, "waiting for the last bytes to be acknowledged by", e))?;
        std::thread::sleep(Duration::from_millis(1));
    }
}
