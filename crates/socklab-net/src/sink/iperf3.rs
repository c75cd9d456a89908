//! The sink's I/O around the sans-IO iperf3 core ([`crate::iperf3`]): a connection that
//! starts with an iperf3 cookie is a test's control connection (a new cookie) or one of its
//! streams (the cookie of a test waiting for them). Each test has its own streams and
//! accounting, so several iperf3 clients are served at once, each as if alone.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use socket2::SockRef;
use socklab_sys::usage::{getrusage, Usage, Who};

use super::iperf3_opts as opts;
use super::{finish, Conn, ConnReport, Mode, Outcome, Shared, TICK};
use crate::aligned::AlignedBuf;
use crate::error::is_timeout;
use crate::iperf3::options::payload_byte;
use crate::iperf3::options::stream_id;
use crate::iperf3::proto::{Cookie, Results, State};
use crate::iperf3::record::TestRecord;
use crate::iperf3::results::{self, Applied, Ended, Meter};
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
    /// Raised by the first stream past the omitted seconds (which restarts `taken`).
    omit_over: AtomicBool,
    /// The file `zerocopy` streams send from, made by the first of them.
    source: OnceLock<Result<Arc<File>, String>>,
}

#[derive(Debug, Default)]
struct Run {
    start: Option<(Instant, bool)>,
    /// The streams' figures, as each ends.
    done: Vec<Ended>,
    /// What the stream sockets run with (the first stream's, read back).
    applied: Option<Applied>,
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
    /// The omitted seconds are over (iperf3's `iperf_reset_stats`): a `-n`/`-k` total is
    /// counted again from here, once for the test.
    fn omit_over(&self) {
        let first =
            self.omit_over
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst);
        if first.is_ok() {
            self.taken.store(0, Ordering::SeqCst);
        }
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
    let mut server = Server::with_check(t0, opts::vet);
    server.control_bytes(t0, &cookie_bytes(&cookie));
    let test = Arc::new(Test {
        server: Mutex::new(server),
        run: Mutex::default(),
        changed: Condvar::new(),
        stop: AtomicBool::new(false),
        taken: AtomicU64::new(0),
        omit_over: AtomicBool::new(false),
        source: OnceLock::new(),
    });
    c.sh.iperf3.lock().insert(cookie, test.clone());
    let reg = Registered {
        sh: c.sh,
        cookie,
        test: test.clone(),
    };
    let mut result = SinkResult::default();
    let mut streams = 0u32;
    let mut record = None;
    let outcome = loop {
        match step(&mut c, &test, &mut result, peer, &mut record) {
            Ok(Some(o)) => break o,
            Ok(None) => {}
            Err(o) => break o,
        }
        streams = test.server().stream_ids().len() as u32;
    };
    drop(reg);
    if matches!(outcome, Outcome::Refused(_)) {
        super::hostile::linger(&mut c);
    }
    let mode = Mode::Iperf3Control { streams };
    let mut r = finish(peer, mode, result, cpu0, t0, outcome, None);
    // Only a test that went to its end has the client's figures (and is stored).
    r.iperf3 = record
        .filter(|_| r.outcome == Outcome::Complete)
        .map(Box::new);
    r
}

/// One turn of the control loop: do what the core asks, then read (a tick at most).
fn step(
    c: &mut Conn<'_>,
    test: &Test,
    result: &mut SinkResult,
    peer: SocketAddr,
    record: &mut Option<TestRecord>,
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
                let ours = collect(c, test, peer)?;
                let applied = test.run().applied.as_ref().map(|a| a.more.clone());
                let mut server = test.server();
                *record = server.params().map(|p| TestRecord {
                    params: p.clone(),
                    ours: ours.clone(),
                    client: ours.clone(),
                    applied: applied
                        .unwrap_or_default()
                        .into_iter()
                        .chain(crate::iperf3::options::notes(p))
                        .collect(),
                });
                server.streams_stopped(Instant::now(), ours);
            }
            Action::Done(client) => {
                if let Some(r) = record.as_mut() {
                    r.client = *client;
                }
                return Ok(Some(Outcome::Complete));
            }
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

/// Waits for the started streams to end (each ends within a tick of `stop`) and builds the
/// sink's results message from their figures.
fn collect(c: &Conn<'_>, test: &Test, peer: SocketAddr) -> Result<Results, Outcome> {
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
    let params = test.server().params().cloned().unwrap_or_default();
    let peer = peer.to_string();
    let t = results::Test {
        params: &params,
        peer: &peer,
        applied: run.applied.as_ref(),
        wall: run.start.map_or(0.0, |(s, _)| s.elapsed().as_secs_f64()),
    };
    Ok(results::build(&t, &run.done))
}

fn cookie_bytes(c: &Cookie) -> [u8; 37] {
    let mut b = [0u8; 37];
    b[..36].copy_from_slice(&c.0);
    b
}

/// A stream: sets the client's socket options, waits for the start, then reads (or, when the
/// sink sends on it, sends) until told to stop.
fn stream(
    mut c: Conn<'_>,
    cookie: &Cookie,
    test: &Test,
    peer: SocketAddr,
    cpu0: Usage,
) -> ConnReport {
    let t0 = Instant::now();
    let result = SinkResult::default();
    let refused = |c: &mut Conn<'_>, result, why| {
        super::hostile::deny(c);
        finish(
            peer,
            Mode::Raw,
            result,
            cpu0,
            t0,
            Outcome::Refused(why),
            None,
        )
    };
    // The test's options were checked on a socket of its own; a failure here is the kernel's.
    let params = test.server().params().cloned();
    let applied = match params
        .as_ref()
        .map(|p| opts::apply(SockRef::from(&c.stream), p))
    {
        Some(Err(e)) => return refused(&mut c, result, e.why),
        Some(Ok(a)) => Some(a),
        None => None,
    };
    let joined = test.server().stream_joined(t0, cookie, c.accepted);
    let ticket = match joined {
        Ok(t) => t,
        Err(why) => return refused(&mut c, result, why),
    };
    {
        let mut run = test.run();
        if let Some(a) = applied {
            run.applied.get_or_insert(a);
        }
        // Live from its join, not from its start: a stream thread starved until after the
        // client's TEST_END (a `-n 1M` test fits in the socket buffers) is still waited for by
        // `collect`, which otherwise built the results without it (0 bytes stored, seen under
        // `stress-ng --cpu 2`). Each way out before its end takes it back ([`left`]).
        run.live += 1;
    }
    test.changed.notify_all();
    let left = || {
        test.run().live -= 1;
        test.changed.notify_all();
    };
    // Wait for the start.
    let start = {
        let mut run = test.run();
        loop {
            if let Some((s, _)) = run.start {
                break s;
            }
            if test.stop.load(Ordering::SeqCst) || c.halted().is_err() {
                drop(run);
                left();
                let o = Outcome::Aborted("its test ended before it started".into());
                let mode = Mode::Iperf3Stream {
                    id: stream_id(ticket),
                    reverse: false,
                };
                return finish(peer, mode, result, cpu0, t0, o, None);
            }
            run = test
                .changed
                .wait_timeout(run, TICK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    };
    let role = test.server().stream_role(ticket);
    let Some(role) = role else {
        left();
        let o = Outcome::Aborted("its test has no role for it".into());
        return finish(peer, Mode::Raw, result, cpu0, t0, o, None);
    };
    let p = params.unwrap_or_default();
    // A rate asked for (`bandwidth`, `fqrate`) paces the sink's sending streams.
    if role.sends {
        match opts::pace(&SockRef::from(&c.stream), &p) {
            Ok(Some(line)) => {
                if let Some(a) = test
                    .run()
                    .applied
                    .as_mut()
                    .filter(|a| !a.more.contains(&line))
                {
                    a.more.push(line);
                }
            }
            Ok(None) => {}
            Err(e) => {
                left();
                return refused(&mut c, result, e.why);
            }
        }
    }
    // A `-n` or `-k` test: the sending streams stop at the total, together.
    let total = if p.num > 0 {
        p.num
    } else {
        p.blockcount.saturating_mul(p.len)
    };
    let mut s = Stream {
        meter: Meter::new(start, Duration::from_secs(p.omit)),
        retrans_base: 0,
        result,
        sends: role.sends,
    };
    let cpu_start = getrusage(Who::Thread);
    let zerocopy = p.zerocopy.is_some_and(|z| z != 0);
    let (outcome, how) = if role.sends {
        // Writes of at most 1 MiB (iperf3's own largest TCP block): a `len` of 16 MiB asked
        // for by a client costs no 16 MiB per stream.
        let mut block = AlignedBuf::zeroed((p.len.max(1) as usize).min(1 << 20));
        for (i, b) in block.as_mut_slice().iter_mut().enumerate() {
            *b = payload_byte(i, p.repeating_payload.is_some_and(|r| r != 0));
        }
        let block = block.as_slice();
        let file = zerocopy.then(|| {
            test.source
                .get_or_init(|| {
                    opts::sendfile_source(block)
                        .map(Arc::new)
                        .map_err(|e| format!("no file for `zerocopy` to send from: {e}"))
                })
                .clone()
        });
        match file.transpose() {
            Ok(file) => {
                let total = (total > 0).then_some(total);
                let o = send(&mut c, test, block, file.as_deref(), total, &mut s);
                (o, if file.is_some() { "sendfile" } else { "write" })
            }
            Err(why) => (Outcome::Aborted(why), "sendfile"),
        }
    } else {
        (receive(&mut c, test, p.len as usize, &mut s), "read")
    };
    if role.sends {
        opts::unpace(&SockRef::from(&c.stream));
    }
    let retransmits = if role.sends {
        socklab_sys::tcp::tcp_info(c.stream.as_fd()).map_or(-1, |i| {
            if s.meter.omitting() {
                0
            } else {
                i64::from(i.total_retrans.saturating_sub(s.retrans_base))
            }
        })
    } else {
        -1
    };
    let cpu = getrusage(Who::Thread).since(&cpu_start);
    let ended = Ended {
        result: s.meter.result(role.id, retransmits),
        sends: role.sends,
        how,
        cpu: (cpu.user, cpu.sys),
    };
    {
        let mut run = test.run();
        run.done.push(ended);
        run.live -= 1;
    }
    test.changed.notify_all();
    let mode = Mode::Iperf3Stream {
        id: role.id,
        reverse: role.sends,
    };
    finish(peer, mode, s.result, cpu0, start, outcome, None)
}

/// A started stream's counts: the sink's log (`result`, every byte) and iperf3's figures
/// (`meter`, the omitted start taken off).
struct Stream {
    meter: Meter,
    /// `tcpi_total_retrans` when the omitted seconds ended.
    retrans_base: u32,
    result: SinkResult,
    sends: bool,
}

impl Stream {
    /// `n` bytes moved (or only the clock); past the omitted seconds, the baselines restart.
    fn moved(&mut self, c: &Conn<'_>, test: &Test, n: usize) {
        if n > 0 {
            self.result.reads += 1;
            self.result.bytes += n as u64;
        }
        if self.meter.moved(Instant::now(), n as u64) {
            test.omit_over();
            if self.sends {
                self.retrans_base =
                    socklab_sys::tcp::tcp_info(c.stream.as_fd()).map_or(0, |i| i.total_retrans);
            }
        }
    }
}

/// Reads and counts until the test stops, then takes what is already queued.
fn receive(c: &mut Conn<'_>, test: &Test, len: usize, s: &mut Stream) -> Outcome {
    // Page-aligned: the kernel copies into a buffer at malloc's page offset 16 at about half
    // speed ([`AlignedBuf`]; measured in docs/benchmarks.md, `bench/iperf3-interop`).
    let mut buf = AlignedBuf::zeroed(len.clamp(4096, 1 << 20));
    let buf = buf.as_mut_slice();
    loop {
        if test.stop.load(Ordering::SeqCst) {
            // What the client sent before TEST_END, some of it maybe still in its send queue,
            // but not what a client goes on sending after it (issue 27 part 4).
            let mut drain = super::hostile::Drain::new(&c.stream);
            while let Some(n) = drain.read(c, buf) {
                s.moved(c, test, n);
                c.idle_since = None;
            }
            return Outcome::Complete;
        }
        match c.stream.read(buf) {
            Ok(0) => return Outcome::Complete,
            Ok(n) => {
                s.moved(c, test, n);
                c.idle_since = None;
            }
            // A stream silent past the sink's idle timeout ends (the test goes on).
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                s.moved(c, test, 0);
                if let Err(o) = c.waited(e) {
                    return o;
                }
            }
            Err(e) => return Outcome::Aborted(e.to_string()),
        }
    }
}

/// Sends blocks (from memory, or with `sendfile` from `file`) until the test stops, or until
/// the streams together sent `total`.
fn send(
    c: &mut Conn<'_>,
    test: &Test,
    block: &[u8],
    file: Option<&File>,
    total: Option<u64>,
    s: &mut Stream,
) -> Outcome {
    let len = block.len();
    let (mut off, mut left) = (0usize, 0usize);
    loop {
        if test.stop.load(Ordering::SeqCst) {
            return Outcome::Complete;
        }
        if left == 0 {
            let want = match total {
                None => len,
                Some(t) => take(&test.taken, t, len as u64) as usize,
            };
            if want == 0 {
                // The total is sent: wait for TEST_END (or the omitted seconds' end).
                let run = test.run();
                let _ = test.changed.wait_timeout(run, TICK);
                if let Err(o) = c.halted() {
                    return o;
                }
                s.moved(c, test, 0);
                continue;
            }
            (off, left) = (0, want);
        }
        match opts::send_some(&mut c.stream, block, file, off, left) {
            Ok(0) => return Outcome::Aborted("the connection accepts no data".into()),
            Ok(n) => {
                (off, left) = (off + n, left - n);
                s.moved(c, test, n);
                c.idle_since = None;
            }
            // A stream silent past the sink's idle timeout ends (the test goes on).
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                s.moved(c, test, 0);
                if let Err(o) = c.waited(e) {
                    return o;
                }
            }
            Err(e) => return Outcome::Aborted(e.to_string()),
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
