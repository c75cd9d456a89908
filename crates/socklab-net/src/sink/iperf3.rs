//! The sink's I/O around the sans-IO iperf3 core ([`crate::iperf3`]): a connection that
//! starts with an iperf3 cookie is a test's control connection (a new cookie) or one of its
//! streams (the cookie of a test waiting for them). Each test has its own streams and
//! accounting, so several iperf3 clients are served at once, each as if alone.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use socklab_sys::usage::{getrusage, Usage, Who};

use super::{finish, Conn, ConnReport, Mode, Outcome, Shared, TICK};
use crate::error::is_timeout;
use crate::iperf3::proto::{Cookie, Results, State, StreamResult};
use crate::iperf3::server::{Action, Server};
use crate::protocol::SinkResult;

pub(super) mod udp;

/// The iperf3 tests whose control connection is open, by cookie; and the UDP socket of
/// their UDP streams.
#[derive(Debug)]
pub(super) struct Registry {
    tests: Mutex<HashMap<Cookie, Arc<Test>>>,
    udp: udp::Udp,
}

impl Registry {
    /// The registry of a sink listening on `addr` (UDP tests bind the same address).
    pub(super) fn new(addr: std::net::SocketAddr) -> Registry {
        Registry {
            tests: Mutex::default(),
            udp: udp::Udp::new(addr),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Cookie, Arc<Test>>> {
        self.tests.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One test, shared by its control connection's thread and its streams' threads.
#[derive(Debug)]
struct Test {
    server: Mutex<Server>,
    /// When the streams were told to start, and whether the sink sends.
    run: Mutex<Run>,
    changed: Condvar,
    /// Raised when the streams must stop (TEST_END, a failure, the control connection gone).
    stop: AtomicBool,
    /// Bytes the sending streams have taken of a `-n`/`-k` test's total, together.
    taken: AtomicU64,
}

#[derive(Debug, Default)]
struct Run {
    start: Option<(Instant, bool)>,
    /// The streams' figures, as each ends.
    done: Vec<(StreamResult, Usage)>,
    /// Streams that started and have not ended.
    live: usize,
}

impl Test {
    fn server(&self) -> MutexGuard<'_, Server> {
        self.server.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn run(&self) -> MutexGuard<'_, Run> {
        self.run.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes the test and stops its streams however the control thread ends.
struct Registered<'a> {
    sh: &'a Shared,
    cookie: Cookie,
    test: Arc<Test>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.test.stop.store(true, Ordering::SeqCst);
        self.test.changed.notify_all();
        self.sh.iperf3.lock().remove(&self.cookie);
        self.sh.iperf3.udp.forget(&self.cookie);
    }
}

/// Serves a connection that began with `cookie`: a stream of the test it names, or a new
/// test's control connection.
pub(super) fn serve(c: Conn<'_>, cookie: Cookie, peer: SocketAddr, cpu0: Usage) -> ConnReport {
    let existing = c.sh.iperf3.lock().get(&cookie).cloned();
    match existing {
        Some(test) => stream(c, &cookie, &test, peer, cpu0),
        None => control(c, cookie, peer, cpu0),
    }
}

fn control(mut c: Conn<'_>, cookie: Cookie, peer: SocketAddr, cpu0: Usage) -> ConnReport {
    let t0 = Instant::now();
    let mut server = Server::new(t0);
    server.control_bytes(t0, &cookie_bytes(&cookie));
    let test = Arc::new(Test {
        server: Mutex::new(server),
        run: Mutex::default(),
        changed: Condvar::new(),
        stop: AtomicBool::new(false),
        taken: AtomicU64::new(0),
    });
    c.sh.iperf3.lock().insert(cookie, test.clone());
    let reg = Registered {
        sh: c.sh,
        cookie,
        test: test.clone(),
    };
    let mut result = SinkResult::default();
    let mut streams = 0u32;
    let outcome = loop {
        match step(&mut c, &test, &mut result) {
            Ok(Some(o)) => break o,
            Ok(None) => {}
            Err(o) => break o,
        }
        streams = test.server().stream_ids().len() as u32;
    };
    drop(reg);
    let mode = Mode::Iperf3Control { streams };
    finish(peer, mode, result, cpu0, t0, outcome, None)
}

/// One turn of the control loop: do what the core asks, then read (a tick at most).
fn step(
    c: &mut Conn<'_>,
    test: &Test,
    result: &mut SinkResult,
) -> Result<Option<Outcome>, Outcome> {
    loop {
        let action = test.server().poll_action();
        let Some(action) = action else { break };
        match action {
            Action::Send(bytes) => {
                if bytes == [State::CreateStreams.byte()] {
                    udp::open(c, test)?;
                }
                c.write_all(&bytes)?
            }
            Action::StartStreams { reverse } => {
                test.run().start = Some((Instant::now(), reverse));
                udp::started(c, test);
                test.changed.notify_all();
            }
            Action::StopStreams => {
                test.stop.store(true, Ordering::SeqCst);
                test.changed.notify_all();
                udp::stopping(c, test);
                let ours = collect(c, test)?;
                test.server().streams_stopped(Instant::now(), ours);
            }
            Action::Done(_client) => return Ok(Some(Outcome::Complete)),
            Action::Fail(why) => return Ok(Some(Outcome::Refused(why))),
        }
    }
    c.halted()?;
    let mut buf = [0u8; 4096];
    match c.stream.read(&mut buf) {
        Ok(0) => test.server().control_closed(),
        Ok(n) => {
            result.reads += 1;
            result.bytes += n as u64;
            test.server().control_bytes(Instant::now(), &buf[..n]);
        }
        Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
            test.server().tick(Instant::now());
        }
        Err(e) => return Err(Outcome::Aborted(e.to_string())),
    }
    Ok(None)
}

/// Waits for the started streams to end (each ends within a tick of `stop`) and sums them
/// into the sink's results message.
fn collect(c: &Conn<'_>, test: &Test) -> Result<Results, Outcome> {
    let udp = test.server().params().is_some_and(|p| p.udp);
    let mut run = test.run();
    let deadline = Instant::now() + Duration::from_secs(5);
    while run.live > 0 && Instant::now() < deadline {
        c.halted()?;
        run = test
            .changed
            .wait_timeout(run, TICK)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    let reverse = run.start.is_some_and(|(_, r)| r);
    let mut streams: Vec<StreamResult> = run.done.iter().map(|(s, _)| s.clone()).collect();
    streams.sort_by_key(|s| s.id);
    let secs = streams.iter().map(|s| s.end_time).fold(0.0, f64::max);
    let (mut user, mut sys) = (0.0, 0.0);
    for (_, u) in &run.done {
        user += u.user.as_secs_f64();
        sys += u.sys.as_secs_f64();
    }
    let pct = |x: f64| if secs > 0.0 { 100.0 * x / secs } else { 0.0 };
    Ok(Results {
        cpu_util_total: pct(user + sys),
        cpu_util_user: pct(user),
        cpu_util_system: pct(sys),
        // A UDP sender knows no retransmits: 0, as iperf3's says.
        sender_has_retransmits: match (reverse, udp) {
            (true, false) => 1,
            (true, true) => 0,
            _ => -1,
        },
        congestion_used: None,
        streams,
    })
}

fn cookie_bytes(c: &Cookie) -> [u8; 37] {
    let mut b = [0u8; 37];
    b[..36].copy_from_slice(&c.0);
    b
}

/// A stream: waits for the start, then reads (or, reversed, sends) until told to stop.
fn stream(
    mut c: Conn<'_>,
    cookie: &Cookie,
    test: &Test,
    peer: SocketAddr,
    cpu0: Usage,
) -> ConnReport {
    let t0 = Instant::now();
    let mut result = SinkResult::default();
    let joined = test.server().stream_connected(t0, cookie);
    let id = match joined {
        Ok(id) => id,
        Err(why) => {
            return finish(
                peer,
                Mode::Raw,
                result,
                cpu0,
                t0,
                Outcome::Refused(why),
                None,
            )
        }
    };
    test.changed.notify_all();
    let mode = |reverse| Mode::Iperf3Stream { id, reverse };
    // Wait for the start.
    let (start, reverse) = {
        let mut run = test.run();
        loop {
            if let Some(s) = run.start {
                break s;
            }
            if test.stop.load(Ordering::SeqCst) || c.halted().is_err() {
                drop(run);
                let o = Outcome::Aborted("its test ended before it started".into());
                return finish(peer, mode(false), result, cpu0, t0, o, None);
            }
            run = test
                .changed
                .wait_timeout(run, TICK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    };
    test.run().live += 1;
    let (len, total) = test.server().params().map_or((128 * 1024, None), |p| {
        // A reversed `-n` or `-k` test: the sink, the sender, stops at the total.
        let total = if p.num > 0 {
            p.num
        } else {
            p.blockcount.saturating_mul(p.len)
        };
        (p.len as usize, (total > 0).then_some(total))
    });
    let cpu_start = getrusage(Who::Thread);
    let (outcome, last) = if reverse {
        send(&mut c, test, len, total, &mut result)
    } else {
        receive(&mut c, test, len, &mut result)
    };
    let retransmits = if reverse {
        socklab_sys::tcp::tcp_info(c.stream.as_fd()).map_or(-1, |i| i64::from(i.total_retrans))
    } else {
        -1
    };
    let cpu = getrusage(Who::Thread).since(&cpu_start);
    let r = StreamResult {
        id,
        bytes: result.bytes,
        retransmits,
        jitter: 0.0,
        errors: 0,
        packets: 0,
        start_time: 0.0,
        end_time: last.saturating_duration_since(start).as_secs_f64(),
    };
    {
        let mut run = test.run();
        run.done.push((r, cpu));
        run.live -= 1;
    }
    test.changed.notify_all();
    finish(peer, mode(reverse), result, cpu0, start, outcome, None)
}

/// Reads and counts until the test stops, then takes what is already queued; with the time
/// of the last byte (the stream's end, as the receiving side saw it).
fn receive(
    c: &mut Conn<'_>,
    test: &Test,
    len: usize,
    result: &mut SinkResult,
) -> (Outcome, Instant) {
    let mut buf = vec![0u8; len.clamp(4096, 1 << 20)];
    let mut last = Instant::now();
    loop {
        if test.stop.load(Ordering::SeqCst) {
            let _ = c.stream.set_nonblocking(true);
            while let Ok(n @ 1..) = c.stream.read(&mut buf) {
                result.reads += 1;
                result.bytes += n as u64;
                last = Instant::now();
                c.idle_since = None;
            }
            return (Outcome::Complete, last);
        }
        match c.stream.read(&mut buf) {
            Ok(0) => return (Outcome::Complete, last),
            Ok(n) => {
                result.reads += 1;
                result.bytes += n as u64;
                last = Instant::now();
                c.idle_since = None;
            }
            // A stream silent past the sink's idle timeout ends (the test goes on).
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if let Err(o) = c.waited(e) {
                    return (o, last);
                }
            }
            Err(e) => return (Outcome::Aborted(e.to_string()), last),
        }
    }
}

/// Sends blocks of `len` until the test stops, or until the streams together sent `total`;
/// with the time of the last write.
fn send(
    c: &mut Conn<'_>,
    test: &Test,
    len: usize,
    total: Option<u64>,
    result: &mut SinkResult,
) -> (Outcome, Instant) {
    let block: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut pending: &[u8] = &[];
    let mut last = Instant::now();
    loop {
        if test.stop.load(Ordering::SeqCst) {
            return (Outcome::Complete, last);
        }
        if pending.is_empty() {
            let want = match total {
                None => len,
                Some(t) => take(&test.taken, t, len as u64) as usize,
            };
            if want == 0 {
                // The total is sent: wait for TEST_END.
                let run = test.run();
                let _ = test.changed.wait_timeout(run, TICK);
                if let Err(o) = c.halted() {
                    return (o, last);
                }
                continue;
            }
            pending = &block[..want];
        }
        match c.stream.write(pending) {
            Ok(n) => {
                result.reads += 1;
                result.bytes += n as u64;
                pending = &pending[n..];
                last = Instant::now();
                c.idle_since = None;
            }
            // A stream silent past the sink's idle timeout ends (the test goes on).
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if let Err(o) = c.waited(e) {
                    return (o, last);
                }
            }
            Err(e) => return (Outcome::Aborted(e.to_string()), last),
        }
    }
}

/// Takes up to `want` bytes of `total` from the shared count; 0 when all are taken.
fn take(taken: &AtomicU64, total: u64, want: u64) -> u64 {
    let prev = taken
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
            (t < total).then(|| t + want.min(total - t))
        })
        .unwrap_or(total);
    want.min(total.saturating_sub(prev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_share_a_total_and_never_take_past_it() {
        let taken = AtomicU64::new(0);
        assert_eq!(take(&taken, 10, 4), 4);
        assert_eq!(take(&taken, 10, 4), 4);
        assert_eq!(take(&taken, 10, 4), 2, "the last block is cut to the total");
        assert_eq!(take(&taken, 10, 4), 0);
        assert_eq!(taken.load(Ordering::SeqCst), 10);
    }
}
