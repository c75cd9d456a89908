//! The sink's side of `BULK/2` (see [`crate::protocol::multi`]): a test's control connection,
//! and its streams joining it, each on its own connection thread.
//!
//! The control connection's thread registers the test, answers READY, waits for GO (every
//! stream has joined by then), then writes each stream's RESULT as the stream's thread reports
//! it, and ends the test. A stream's thread checks its JOIN against the registry (a test that
//! exists, an index in range and free, not started), sets up its socket and thread (the
//! congestion control, `SO_MAX_PACING_RATE`, the CPU, the server side's `opts`, read back),
//! answers READY, then reads (up) or sends
//! (down, from GO until the test's rounds or duration) and reports.
//!
//! Bounds: a test is removed, and its streams given up, when its control connection ends for
//! whatever reason (so a down stream never outlives its test); a down stream sends at most what
//! the request stated; every wait is bounded by the idle timeout and the sink's stop.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Instant;

use socket2::SockRef;
use socklab_sys::usage::{getrusage, Usage, Who};

use super::{busy, finish, Charge, Conn, ConnReport, Mode, Outcome, Shared, TICK};
use crate::payload::Payload;
use crate::protocol::multi::{
    test_id_text, Join, JoinReady, StreamLine, StreamResult, TestHello, TestReady, GO,
};
use crate::protocol::{SinkResult, MAX_LINE};
use crate::send::sendfile_source;
use crate::sockopt::Side;
use crate::Strategy;

mod down;

/// The open tests, by id.
#[derive(Debug, Default)]
pub(super) struct Registry {
    tests: Mutex<HashMap<u64, Arc<Test>>>,
}

/// One open test.
#[derive(Debug)]
struct Test {
    hello: TestHello,
    /// Which streams have joined.
    joined: Mutex<Vec<bool>>,
    /// When GO came (the down streams start then).
    go: Mutex<Option<Instant>>,
    started: Condvar,
    /// Raised when the control connection ended: every stream of the test gives up.
    abort: Arc<AtomicBool>,
    /// The streams' results, to the control connection's thread.
    results: Mutex<mpsc::Sender<StreamLine>>,
    /// The round the down streams send.
    payload: Option<Payload>,
    /// The file the down streams send from with sendfile: one per test, shared by its streams.
    source: Option<Arc<File>>,
    /// The round and the file, counted against the sink's budget until the test is dropped
    /// (its control connection and every stream of it ended), when both are freed.
    _charge: Option<Charge>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Test>>> {
        self.tests.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes a test when its control connection's thread ends, however it ends, and gives its
/// streams up (they drop the test, its round and its file, within a tick).
struct Registered<'a> {
    sh: &'a Shared,
    id: u64,
    test: Arc<Test>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.test.abort.store(true, Ordering::SeqCst);
        self.test.started.notify_all();
        self.sh.tests.lock().remove(&self.id);
    }
}

/// Serves a test's control connection.
pub(super) fn control(mut c: Conn<'_>, h: &TestHello, peer: SocketAddr, cpu0: Usage) -> ConnReport {
    let sh = c.sh;
    let t0 = Instant::now();
    let mode = Mode::Control {
        test: h.test,
        streams: h.streams(),
    };
    let done = |outcome| finish(peer, mode, SinkResult::default(), cpu0, t0, outcome, None);
    let refuse = |c: &mut Conn<'_>, why: String| {
        let _ = c.write_all(format!("ERROR {why}\n").as_bytes());
        done(Outcome::Refused(why))
    };
    let n = h.streams();
    if n as usize >= sh.cfg.max_conns {
        return refuse(
            &mut c,
            format!(
                "a test of {n} streams needs {} connections; this sink serves at most {} at once (the sink's `max_conns`)",
                n + 1,
                sh.cfg.max_conns
            ),
        );
    }
    if h.tls.is_some() {
        let capable = h
            .send
            .as_ref()
            .map_or(Ok(()), |p| crate::tlsio::user_space_capable(p.strategy));
        if let Err(why) = capable.and(sh.tls.as_ref().map(drop).ok_or_else(|| {
            "this sink could not make its certificate, so it serves no TLS".to_string()
        })) {
            return refuse(&mut c, why);
        }
    }
    // The down streams' round (and its sendfile file), counted against the budget.
    let (payload, source, charge) = match &h.send {
        Some(p) => {
            let iov_max = socklab_sys::io::iov_max();
            if p.strategy.uses_iovecs() && p.nbufs > iov_max {
                return refuse(
                    &mut c,
                    format!(
                        "nbufs {} exceeds this sink's IOV_MAX ({iov_max}) for strategy {}",
                        p.nbufs, p.strategy
                    ),
                );
            }
            let round = p.nbufs * p.bufsize;
            let sendfile = p.strategy == Strategy::Sendfile;
            let held = if sendfile { 2 * round } else { round };
            if held > sh.buffers.budget {
                return refuse(&mut c, over_budget(round, sendfile, sh.buffers.budget));
            }
            let charge = match sh.buffers.charge(held) {
                Ok(charge) => charge,
                Err(used) => {
                    let why = match busy(sh, used) {
                        Outcome::Refused(w) => w,
                        _ => "sink busy".into(),
                    };
                    return refuse(&mut c, why);
                }
            };
            let payload = Payload::new(p.nbufs, p.bufsize, p.seed);
            let source = match sendfile.then(|| sendfile_source(&payload)).transpose() {
                Ok(f) => f,
                Err(e) => return refuse(&mut c, format!("this sink {e}")),
            };
            (Some(payload), source, Some(charge))
        }
        None => (None, None, None),
    };
    let (tx, rx) = mpsc::channel();
    let test = Arc::new(Test {
        hello: h.clone(),
        joined: Mutex::new(vec![false; n as usize]),
        go: Mutex::new(None),
        started: Condvar::new(),
        abort: Arc::new(AtomicBool::new(false)),
        results: Mutex::new(tx),
        payload,
        source,
        _charge: charge,
    });
    {
        let mut tests = sh.tests.lock();
        if tests.contains_key(&h.test) {
            drop(tests);
            drop(test);
            return refuse(
                &mut c,
                format!("test {} is in progress already", test_id_text(h.test)),
            );
        }
        tests.insert(h.test, test.clone());
    }
    let _registered = Registered {
        sh,
        id: h.test,
        test: test.clone(),
    };
    let ready = TestReady {
        test: h.test,
        streams: n,
        tls: h.tls.is_some(),
    };
    if let Err(o) = c.write_all(ready.emit().as_bytes()) {
        return done(o);
    }
    // GO, once every stream has joined.
    match read_go(&mut c) {
        Ok(()) => {}
        Err(o) => return done(o),
    }
    let joined = test
        .joined
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|j| **j)
        .count();
    if joined != n as usize {
        return refuse(
            &mut c,
            format!("GO with {joined} of {n} streams joined: join every stream first"),
        );
    }
    *test.go.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    test.started.notify_all();
    // Every stream's result, as it comes; the client leaving gives the test up.
    let mut reported = 0;
    while reported < n {
        match rx.recv_timeout(TICK) {
            Ok(line) => {
                if let Err(o) = c.write_all(line.emit().as_bytes()) {
                    return done(o);
                }
                reported += 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if sh.stop.load(Ordering::Relaxed) {
                    return done(Outcome::Stopped);
                }
                if let Err(o) = client_still_there(&c) {
                    return done(o);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    done(Outcome::Complete)
}

/// Why a test whose round can never fit the budget is refused.
fn over_budget(round: usize, sendfile: bool, budget: usize) -> String {
    let mib = |b: usize| b.div_ceil(1 << 20);
    let file = if sendfile {
        format!(
            " and {} MiB more for its copy in a temporary file that sendfile sends from",
            mib(round)
        )
    } else {
        String::new()
    };
    format!(
        "a round of {} MiB (nbufs x bufsize) holds {} MiB of the sink's memory{file}; this sink allows {} MiB for the read buffers and rounds of all tests: use a smaller nbufs or bufsize",
        mib(round),
        mib(round),
        mib(budget)
    )
}

/// Reads the `GO` line (and nothing after it).
fn read_go(c: &mut Conn<'_>) -> Result<(), Outcome> {
    let mut line = Vec::with_capacity(8);
    let mut byte = [0u8; 1];
    loop {
        match c.read(&mut byte)? {
            0 => return Err(Outcome::Aborted("closed before GO".into())),
            _ if byte[0] == b'\n' => break,
            _ if line.len() >= MAX_LINE => {
                return Err(Outcome::Refused("control line too long".into()))
            }
            _ => line.push(byte[0]),
        }
    }
    if line == GO.as_bytes().strip_suffix(b"\n").unwrap_or(GO.as_bytes()) {
        Ok(())
    } else {
        let why = format!(
            "expected GO, got '{}'",
            socklab_units::text::quote_bytes(&line)
        );
        let _ = c.write_all(format!("ERROR {why}\n").as_bytes());
        Err(Outcome::Refused(why))
    }
}

/// Whether the control connection is still open: the client sends nothing after GO, so a
/// readable socket is its end (or a protocol error).
fn client_still_there(c: &Conn<'_>) -> Result<(), Outcome> {
    use socklab_sys::io::{poll_flags, poll_one};
    if poll_one(c.stream.as_fd(), poll_flags::IN, 0).unwrap_or(0) == 0 {
        return Ok(());
    }
    let mut b = [0u8; 16];
    match (&c.stream).read(&mut b) {
        Ok(0) => Err(Outcome::Aborted("the client closed the test".into())),
        Ok(_) => Err(Outcome::Refused(
            "data on the control connection after GO".into(),
        )),
        Err(e) if super::is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => Ok(()),
        Err(e) => Err(Outcome::Aborted(e.to_string())),
    }
}

/// Posts a stream's result to its test's control connection (a `FAILED` line unless
/// [`Posting::result`] was called), once.
struct Posting {
    test: Arc<Test>,
    index: u32,
    sent: bool,
}

impl Posting {
    fn send(&mut self, line: StreamLine) {
        if !self.sent {
            self.sent = true;
            let tx = self.test.results.lock().unwrap_or_else(|p| p.into_inner());
            let _ = tx.send(line);
        }
    }

    fn failed(&mut self, o: &Outcome) {
        let reason = match o {
            Outcome::Complete => "ended early".to_string(),
            Outcome::Aborted(e) => format!("aborted ({e})"),
            Outcome::IdleTimeout => "idle timeout".to_string(),
            Outcome::Refused(e) => format!("refused ({e})"),
            Outcome::Stopped => "the sink stopped".to_string(),
        };
        self.send(StreamLine::Failed {
            index: self.index,
            reason,
        });
    }
}

impl Drop for Posting {
    fn drop(&mut self) {
        self.failed(&Outcome::Aborted("the stream's thread ended".into()));
    }
}

/// Serves a stream joining a test.
pub(super) fn join(mut c: Conn<'_>, j: Join, peer: SocketAddr) -> ConnReport {
    let sh = c.sh;
    let cpu0 = getrusage(Who::Thread);
    let t0 = Instant::now();
    let test = sh.tests.lock().get(&j.test).cloned();
    let down = test.as_ref().is_some_and(|t| t.hello.is_down(j.index));
    let mode = Mode::Stream {
        test: j.test,
        index: j.index,
        down,
    };
    let refuse = |c: &mut Conn<'_>, why: String| {
        let _ = c.write_all(format!("ERROR {why}\n").as_bytes());
        finish(
            peer,
            mode,
            SinkResult::default(),
            cpu0,
            t0,
            Outcome::Refused(why),
            None,
        )
    };
    let Some(test) = test else {
        return refuse(
            &mut c,
            format!(
                "unknown test {}: a stream joins a test its control connection opened (SOCKLAB BULK/2)",
                test_id_text(j.test)
            ),
        );
    };
    {
        let mut joined = test.joined.lock().unwrap_or_else(|p| p.into_inner());
        let why = if j.index >= test.hello.streams() {
            Some(format!(
                "stream {} of a test of {}",
                j.index,
                test.hello.streams()
            ))
        } else if joined[j.index as usize] {
            Some(format!("stream {} has joined already", j.index))
        } else if test.go.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
            Some("the test has started".into())
        } else {
            None
        };
        if let Some(why) = why {
            drop(joined);
            return refuse(&mut c, why);
        }
        joined[j.index as usize] = true;
    }
    let mut post = Posting {
        test: test.clone(),
        index: j.index,
        sent: false,
    };
    c.test_abort = Some(test.abort.clone());
    // Pinned first, as the client's streams are.
    let cpu = match test
        .hello
        .cpus
        .as_ref()
        .and_then(|l| l.pick(j.index as usize))
    {
        None => None,
        Some(cpu) => match socklab_sys::sched::set_thread_affinity(&[cpu]) {
            Ok(()) => socklab_sys::sched::thread_affinity()
                .ok()
                .filter(|v| v.len() == 1)
                .map(|v| v[0]),
            Err(e) => {
                let why = format!(
                    "cannot run stream {} on CPU {cpu} of this sink: {e}",
                    j.index
                );
                post.failed(&Outcome::Refused(why.clone()));
                return refuse(&mut c, why);
            }
        },
    };
    let r = if down {
        down::send_down(&mut c, &test, j.index, cpu, &mut post)
    } else {
        receive_up(&mut c, &test, j.index, cpu, &mut post)
    };
    match r {
        Ok((result, outcome)) => finish(peer, mode, result, cpu0, t0, outcome, None),
        Err(why) => refuse(&mut c, why),
    }
}

/// An up stream: READY, read to the end, close, report.
fn receive_up(
    c: &mut Conn<'_>,
    test: &Test,
    index: u32,
    cpu: Option<usize>,
    post: &mut Posting,
) -> Result<(SinkResult, Outcome), String> {
    let sh = c.sh;
    let h = &test.hello;
    let mut buf = sh.buffers.take(h.read_size).map_err(|used| {
        let o = busy(sh, used);
        post.failed(&o);
        match o {
            Outcome::Refused(w) => w,
            _ => "sink busy".into(),
        }
    })?;
    let opts = match server_opts(c, test) {
        Ok(o) => o,
        Err(why) => {
            sh.buffers.give(buf);
            post.failed(&Outcome::Refused(why.clone()));
            return Err(why);
        }
    };
    let sock = SockRef::from(&c.stream);
    let ready = JoinReady {
        index,
        down: false,
        rcvbuf: sock.recv_buffer_size().unwrap_or(0),
        sndbuf: sock.send_buffer_size().unwrap_or(0),
        cc: None,
        pacing: None,
        cpu,
        opts,
    };
    let mut result = SinkResult::default();
    let handshake = |c: &mut Conn<'_>| match h.tls {
        Some(v) => super::tls::accept(c, v, h.read_size),
        None => Ok(()),
    };
    if let Err(o) = c
        .write_all(ready.emit().as_bytes())
        .and_then(|()| handshake(c))
    {
        sh.buffers.give(buf);
        post.failed(&o);
        return Ok((result, o));
    }
    // The stream's clock and CPU start after its handshake, as the client's do.
    let cpu0 = getrusage(Who::Thread);
    let t0 = Instant::now();
    let mut hasher = h.verify.then(blake3::Hasher::new);
    let outcome = c.receive(&mut buf, &mut result, &mut hasher);
    sh.buffers.give(buf);
    let elapsed = t0.elapsed();
    // The client's clock stops when this connection closes: close first, then report.
    super::tls::close(c);
    let _ = c.stream.shutdown(Shutdown::Write);
    let used = getrusage(Who::Thread).since(&cpu0);
    result.elapsed_ns = elapsed.as_nanos() as u64;
    result.hash = hasher.map(|x| x.finalize().to_hex().to_string());
    if outcome == Outcome::Complete {
        post.send(StreamLine::Result(StreamResult {
            index,
            bytes: result.bytes,
            reads: result.reads,
            writes: 0,
            user_us: used.user.as_micros() as u64,
            sys_us: used.sys.as_micros() as u64,
            elapsed_ns: result.elapsed_ns,
            hash: result.hash.clone(),
            tcp: None,
        }));
    } else {
        post.failed(&outcome);
    }
    Ok((result, outcome))
}

/// Sets the server side of the test's `opts` on a stream's connection and reads them back
/// (`None` for a test without options).
fn server_opts(c: &Conn<'_>, test: &Test) -> Result<Option<Vec<(String, String)>>, String> {
    let Some(o) = &test.hello.opts else {
        return Ok(None);
    };
    let sock = SockRef::from(&c.stream);
    o.apply_connected(&sock, Side::Server)
        .map_err(|e| e.to_string())?;
    Ok(Some(o.read_back(&sock, Side::Server)))
}

/// Waits for the test's GO (every tick: the sink's stop, the test given up, the idle bound).
fn wait_go(c: &mut Conn<'_>, test: &Test) -> Result<Instant, Outcome> {
    let sh = c.sh;
    let since = Instant::now();
    let mut go = test.go.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(t) = *go {
            return Ok(t);
        }
        if sh.stop.load(Ordering::Relaxed) {
            return Err(Outcome::Stopped);
        }
        if test.abort.load(Ordering::Relaxed) {
            return Err(Outcome::Aborted("its test was given up before GO".into()));
        }
        if since.elapsed() >= sh.cfg.idle_timeout {
            return Err(Outcome::IdleTimeout);
        }
        go = test
            .started
            .wait_timeout(go, TICK)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}
