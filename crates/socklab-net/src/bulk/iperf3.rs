//! `bulk --to iperf3://HOST:PORT`: socklab's bulk client against an unmodified `iperf3 -s`
//! (issue 27 part 2). The protocol is [`crate::iperf3::client`] (sans I/O); this file is its
//! I/O: the control connection, the streams (connected here in order, since iperf3 numbers
//! them by the order they connect, then run by bulk's own stream threads with bulk's write
//! strategies, counts and CPU), the end of the test and the results exchange.
//!
//! socklab's figures are its own: an up stream's bytes are what it wrote, its time runs from
//! `TEST_RUNNING` until the server's kernel acknowledged the last byte; a down stream's bytes
//! are what it read, to the end of stream the server makes when it closes its streams on
//! `TEST_END`. The server's own figures (its bytes per stream, its CPU) come from the results
//! exchange and are returned beside ([`Iperf3Run::server`]). An up stream's bytes and the
//! server's differ by what was still in the server's socket buffer when it took `TEST_END`
//! (iperf3 stops reading then).
//!
//! `iperf3 -s` runs one test at a time and answers any other client `ACCESS_DENIED`: the
//! client tries again for [`BUSY_WAIT`], then says the server is busy, in one line.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use socklab_sys::usage::{getrusage, Who};

use super::result::{BulkResult, StreamStats};
use super::stream::{self, connect, Done, Event, Gate, Preconnected, Proto, Shared};
use super::{BulkConfig, Flow, Limit, TICK};
use crate::iperf3::client::{
    make_cookie, stream_id, Action, Client, ClientError, ClientParams, Phase, STEP_WAIT,
};
use crate::iperf3::proto::{Results, StreamResult, MAX_PARALLEL};
use crate::payload::Payload;
use crate::send::sendfile_source;
use crate::series::{Direction, SeriesOutput};
use crate::{NetError, Strategy};

/// How long a busy server (`ACCESS_DENIED`: it runs another test) is waited for.
pub const BUSY_WAIT: Duration = Duration::from_secs(10);

/// How often the control connection is read while the streams flow.
const CONTROL_TICK: Duration = Duration::from_millis(20);

/// The largest block iperf3 3.12 reads or writes over TCP (`MAX_BLOCKSIZE`, 1 MiB).
const MAX_BLOCK: usize = 1 << 20;

/// What one test against an iperf3 server measured.
#[derive(Debug, Clone)]
pub struct Iperf3Run {
    /// socklab's own figures, like any bulk test's.
    pub result: BulkResult,
    /// The server's results message (its bytes per stream, its CPU).
    pub server: Results,
}

impl Iperf3Run {
    /// The server's bytes, every stream (received for up streams, sent for down).
    pub fn server_bytes(&self) -> u64 {
        self.server.streams.iter().map(|s| s.bytes).sum()
    }
}

/// What an iperf3 server cannot be asked, each refused in one line naming the key.
pub fn check(cfg: &BulkConfig) -> Result<(), NetError> {
    let bad = |m: String| Err(NetError::Invalid(m));
    let server_sends = cfg.flow != Flow::Up;
    if cfg.verify {
        return bad("`verify` with iperf3://: an iperf3 server does not hash what it reads or sends; drop `verify`".into());
    }
    if cfg.server_affinity.is_some() {
        return bad("`server_affinity` with iperf3://: iperf3 pins its whole process (its -A), not each stream; drop `server_affinity` (or start iperf3 -s -A N)".into());
    }
    if cfg.sampling.is_on() {
        return bad("`interval` and `omit` with iperf3:// are not supported yet (socklab's time series needs its own sink); drop them".into());
    }
    if let Some(o) = &cfg.opts {
        if o.0.iter().any(|x| x.side != crate::sockopt::Side::Client) {
            return bad(format!("opts '{o}' set server-side options, which an iperf3 server does not take: prefix them client:"));
        }
    }
    if cfg.streams > MAX_PARALLEL {
        return bad(format!(
            "`streams` {} with iperf3://: iperf3 runs at most {MAX_PARALLEL} streams",
            cfg.streams
        ));
    }
    if server_sends {
        let way = cfg.flow.as_str();
        if !matches!(
            cfg.strategy,
            Strategy::Single | Strategy::Write | Strategy::Sendfile
        ) {
            return bad(format!("`strategy` {} with iperf3:// and `direction` {way}: the iperf3 server writes with write() (single) or sendfile (its -Z); use single or sendfile", cfg.strategy));
        }
        if cfg.nbufs != 1 {
            return bad(format!("`nbufs` {} with iperf3:// and `direction` {way}: the iperf3 server writes one block of `bufsize` at a time; use `nbufs` 1", cfg.nbufs));
        }
        if !matches!(cfg.limit, Limit::Duration(_)) {
            return bad(format!("`iterations` and `bytes` with iperf3:// and `direction` {way}: iperf3 counts them over all its streams together; use `duration`"));
        }
        if cfg.flow == Flow::Bidir && cfg.read_size != cfg.bufsize {
            return bad(format!("`read_size` {} with iperf3:// and `direction` bidir: the iperf3 server reads and writes blocks of one size, `bufsize` {}; give both the same", cfg.read_size, cfg.bufsize));
        }
    }
    let (len, key) = if server_sends {
        (cfg.bufsize, "bufsize")
    } else {
        (cfg.read_size, "read_size")
    };
    if len > MAX_BLOCK {
        return bad(format!(
            "`{key}` {len} with iperf3://: iperf3 reads and writes TCP blocks of at most 1M"
        ));
    }
    Ok(())
}

/// The parameters sent for `cfg`.
pub fn params(cfg: &BulkConfig) -> ClientParams {
    let server_sends = cfg.flow != Flow::Up;
    let round = (cfg.nbufs * cfg.bufsize) as u64;
    let (time, num) = match cfg.limit {
        Limit::Duration(d) => (d.as_secs_f64().ceil().max(1.0) as u64, 0),
        Limit::Iterations(r) => (0, r * round * u64::from(cfg.streams)),
        Limit::Bytes(b) => (0, b.div_ceil(round) * round * u64::from(cfg.streams)),
    };
    ClientParams {
        tcp: true,
        time,
        num,
        parallel: cfg.streams,
        reverse: cfg.flow == Flow::Down,
        bidirectional: cfg.flow == Flow::Bidir,
        nodelay: cfg.nodelay,
        len: if server_sends {
            cfg.bufsize
        } else {
            cfg.read_size
        } as u64,
        fqrate: cfg.pacing_rate.filter(|_| server_sends),
        zerocopy: (server_sends && cfg.strategy == Strategy::Sendfile).then_some(1),
        congestion: server_sends.then(|| cfg.cc.clone()),
        pacing_timer: 1000,
        ..ClientParams::default()
    }
}

/// Runs one test against the iperf3 server at `cfg.to`; `stop()` is polled at least every
/// [`TICK`] (then [`NetError::Interrupted`], and the server is told `CLIENT_TERMINATE`).
pub fn run(cfg: &BulkConfig, stop: &dyn Fn() -> bool) -> Result<Iperf3Run, NetError> {
    cfg.validate()?;
    check(cfg)?;
    let first = Instant::now();
    loop {
        match attempt(cfg, stop) {
            Err(Attempt::Busy) if first.elapsed() < BUSY_WAIT => {
                // The server finishes another test (or the previous repetition): ask again.
                let until = Instant::now() + Duration::from_millis(250);
                while Instant::now() < until {
                    if stop() {
                        return Err(NetError::Interrupted);
                    }
                    std::thread::sleep(Duration::from_millis(25));
                }
            }
            Err(Attempt::Busy) => {
                return Err(NetError::Timeout(format!(
                    "{} (asked again for {}s)",
                    ClientError::Busy.message(&cfg.to.to_string()),
                    BUSY_WAIT.as_secs()
                )))
            }
            Err(Attempt::Failed(e)) => return Err(e),
            Ok(r) => return Ok(r),
        }
    }
}

/// Whether a connect failed the way it does while `iperf3 -s` is between two tests: its
/// listener, closed with our handshake in its queue, answered with a reset (seen under load
/// right after the previous repetition). Such a server is asked again, as a busy one is.
pub(crate) fn between_tests(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
    )
}

enum Attempt {
    Busy,
    Failed(NetError),
}

impl From<NetError> for Attempt {
    fn from(e: NetError) -> Attempt {
        Attempt::Failed(e)
    }
}

/// A cookie seed no other test of this process is likely to use.
fn seed() -> u64 {
    static N: AtomicU32 = AtomicU32::new(0);
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    ns ^ (u64::from(std::process::id()) << 32) ^ u64::from(N.fetch_add(1, Ordering::Relaxed))
}

fn attempt(cfg: &BulkConfig, stop: &dyn Fn() -> bool) -> Result<Iperf3Run, Attempt> {
    let payload = Payload::new(cfg.nbufs, cfg.bufsize, cfg.seed);
    let n = cfg.connections();
    let source = (cfg.strategy == Strategy::Sendfile && cfg.flow != Flow::Down)
        .then(|| sendfile_source(&payload))
        .transpose()?;
    let mut ctl = connect(cfg, false, false, stop)
        .map_err(|e| match e {
            NetError::Connect { source, .. } if between_tests(&source) => Attempt::Busy,
            NetError::Connect { addr, source } => Attempt::Failed(NetError::Io {
                context: format!(
                    "cannot connect to the iperf3 server at {addr} (is `iperf3 -s` running there?)"
                ),
                source,
            }),
            e => Attempt::Failed(e),
        })?
        .stream;
    ctl.set_read_timeout(Some(CONTROL_TICK))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let mut client = Client::new(Instant::now(), make_cookie(seed()), &params(cfg));
    let (halt, abort) = (AtomicBool::new(false), AtomicBool::new(false));
    let remaining = AtomicU32::new(n);
    let gate = Gate::default();
    let slots: Preconnected = Mutex::new((0..n).map(|_| None).collect());
    let sh = Shared {
        cfg,
        payload: &payload,
        source: source.as_ref(),
        gate: &gate,
        abort: &abort,
        halt: &halt,
        remaining: &remaining,
        proto: Proto::Iperf3,
        sampling: false,
        preconnected: Some(&slots),
        tls: None,
    };
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let mut d = Driver {
            cfg,
            stop,
            sh: &sh,
            rx,
            dones: (0..n).map(|_| None).collect(),
            t0: None,
            cpu0: getrusage(Who::Process),
        };
        let r = d.drive(s, &tx, &mut ctl, &mut client);
        if r.is_err() {
            halt.store(stop(), Ordering::SeqCst);
            abort.store(true, Ordering::SeqCst);
            gate.abandon();
            if let Some(bytes) = client.abort() {
                let _ = ctl.write_all(&bytes);
            }
            let _ = ctl.shutdown(Shutdown::Both);
        }
        r
    })
}

/// Whether `e` is the peer's reset or close.
fn reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

/// The main thread's side of a test.
struct Driver<'a, 'b> {
    cfg: &'a BulkConfig,
    stop: &'a dyn Fn() -> bool,
    sh: &'a Shared<'b>,
    rx: mpsc::Receiver<Event>,
    dones: Vec<Option<Done>>,
    t0: Option<Instant>,
    cpu0: socklab_sys::usage::Usage,
}

impl<'a, 'b> Driver<'a, 'b> {
    fn peer(&self) -> String {
        self.cfg.to.to_string()
    }

    fn drive<'s>(
        &mut self,
        scope: &'s std::thread::Scope<'s, 'a>,
        tx: &mpsc::Sender<Event>,
        ctl: &mut TcpStream,
        client: &mut Client,
    ) -> Result<Iperf3Run, Attempt>
    where
        'a: 's,
    {
        let mut buf = [0u8; 4096];
        loop {
            while let Some(a) = client.poll_action() {
                match a {
                    // 3.12 answers a client that comes during another test ACCESS_DENIED
                    // without reading its cookie, then closes: the close may reset the
                    // connection before the byte is read. Before PARAM_EXCHANGE, a reset is
                    // that busy answer too.
                    Action::Send(bytes) => match self.send(ctl, &bytes) {
                        Err(NetError::Io { source, .. })
                            if client.phase() == Phase::Params && reset(&source) =>
                        {
                            return Err(Attempt::Busy)
                        }
                        r => r?,
                    },
                    Action::ConnectStreams { cookie, count } => {
                        self.connect_streams(scope, tx, &cookie, count)?;
                        client.streams_connected(Instant::now());
                    }
                    Action::StartStreams => {
                        let t0 = Instant::now();
                        self.t0 = Some(t0);
                        self.cpu0 = getrusage(Who::Process);
                        self.sh.gate.open(t0, None);
                    }
                    Action::WantResults => {
                        self.await_streams()?;
                        client.results(Instant::now(), &self.ours());
                    }
                    Action::Done(server) => return Ok(self.merge(*server)),
                    Action::Fail(ClientError::Busy) => return Err(Attempt::Busy),
                    Action::Fail(e) => {
                        return Err(NetError::Protocol {
                            peer: self.peer(),
                            detail: e.message(&self.peer()),
                        }
                        .into())
                    }
                }
            }
            self.events()?;
            if client.phase() == Phase::Flowing && self.over() {
                client.end_test(Instant::now());
                continue;
            }
            let early = client.phase() == Phase::Params;
            match ctl.read(&mut buf) {
                Ok(0) if early => return Err(Attempt::Busy),
                Err(e) if early && reset(&e) => return Err(Attempt::Busy),
                Ok(0) => client.control_closed(),
                Ok(k) => client.control_bytes(Instant::now(), &buf[..k]),
                Err(e) if crate::partial::is_no_progress(&e) => client.tick(Instant::now()),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => client.control_closed(),
                Err(e) => {
                    return Err(NetError::io(
                        format!("reading the control connection of {}", self.peer()),
                        e,
                    )
                    .into())
                }
            }
        }
    }

    /// Writes on the control connection, within [`STEP_WAIT`].
    fn send(&self, ctl: &mut TcpStream, bytes: &[u8]) -> Result<(), NetError> {
        let until = Instant::now() + STEP_WAIT;
        let mut rest = bytes;
        while !rest.is_empty() {
            match ctl.write(rest) {
                Ok(k) => rest = &rest[k..],
                Err(e) if crate::partial::is_no_progress(&e) && Instant::now() < until => {
                    if (self.stop)() {
                        return Err(NetError::Interrupted);
                    }
                }
                Err(e) => {
                    return Err(NetError::io(
                        format!("writing the control connection of {}", self.peer()),
                        e,
                    ))
                }
            }
        }
        Ok(())
    }

    /// Connects the streams in order (iperf3 numbers them so), each with the cookie first,
    /// and starts their threads (they wait at the gate).
    fn connect_streams<'s>(
        &mut self,
        scope: &'s std::thread::Scope<'s, 'a>,
        tx: &mpsc::Sender<Event>,
        cookie: &[u8],
        count: u32,
    ) -> Result<(), NetError>
    where
        'a: 's,
    {
        let cfg = self.cfg;
        for i in 0..count {
            let up = cfg.direction_of(i) == Direction::Up;
            let mut c = connect(cfg, up, true, self.stop)?;
            self.send(&mut c.stream, cookie)?;
            self.sh
                .preconnected
                .expect("an iperf3 test has its streams' slots")
                .lock()
                .unwrap_or_else(|e| e.into_inner())[i as usize] = Some(c);
        }
        for i in 0..count {
            let (tx, sh) = (tx.clone(), self.sh);
            std::thread::Builder::new()
                .name(format!("iperf3-s{i}"))
                .spawn_scoped(scope, move || stream::spawned(sh, i, &tx))
                .map_err(|e| NetError::io(format!("starting the thread of stream {i}"), e))?;
        }
        Ok(())
    }

    /// Takes the streams' events that have come: a failed stream fails the test.
    fn events(&mut self) -> Result<(), NetError> {
        if (self.stop)() {
            self.sh.halt.store(true, Ordering::SeqCst);
            return Err(NetError::Interrupted);
        }
        while let Ok(ev) = self.rx.try_recv() {
            if let Event::Done(i, r) = ev {
                self.dones[i as usize] = Some((*r)?);
            }
        }
        Ok(())
    }

    /// Whether the client's part of the test is over: every up stream has ended, and a test
    /// with down streams has run its duration.
    fn over(&self) -> bool {
        let Some(t0) = self.t0 else { return false };
        let ups_done = self
            .dones
            .iter()
            .enumerate()
            .all(|(i, d)| d.is_some() || self.cfg.direction_of(i as u32) == Direction::Down);
        let timed_out = match (self.cfg.flow, self.cfg.limit) {
            (Flow::Up, _) => true,
            (_, Limit::Duration(d)) => t0.elapsed() >= d,
            _ => true,
        };
        ups_done && timed_out
    }

    /// Waits for every stream to end (the down streams end when the server closes them on
    /// `TEST_END`), within [`STEP_WAIT`].
    fn await_streams(&mut self) -> Result<(), NetError> {
        let since = Instant::now();
        while self.dones.iter().any(Option::is_none) {
            self.events()?;
            if since.elapsed() >= STEP_WAIT {
                let left = self.dones.iter().filter(|d| d.is_none()).count();
                return Err(NetError::Timeout(format!(
                    "{left} streams of the iperf3 server at {} did not end within {}s of TEST_END (iperf3 closes them then)",
                    self.peer(),
                    STEP_WAIT.as_secs()
                )));
            }
            match self.rx.recv_timeout(TICK) {
                Ok(Event::Done(i, r)) => self.dones[i as usize] = Some((*r)?),
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(NetError::Invalid(
                        "the test's threads ended unexpectedly".into(),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Seconds from the start to `t`.
    fn secs(&self, t: Instant) -> f64 {
        self.t0
            .map_or(0.0, |t0| t.saturating_duration_since(t0).as_secs_f64())
    }

    fn seconds(&self, d: &Done) -> f64 {
        self.secs(d.end)
    }

    /// The client's results message: each stream's bytes and time, this process's CPU.
    fn ours(&self) -> Results {
        let span = self.t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let cpu = getrusage(Who::Process).since(&self.cpu0);
        let pct = |x: Duration| {
            if span > 0.0 {
                100.0 * x.as_secs_f64() / span
            } else {
                0.0
            }
        };
        let any_up = self.cfg.flow != Flow::Down;
        Results {
            cpu_util_total: pct(cpu.user + cpu.sys),
            cpu_util_user: pct(cpu.user),
            cpu_util_system: pct(cpu.sys),
            sender_has_retransmits: if any_up { 1 } else { -1 },
            congestion_used: None,
            server_output_text: None,
            streams: (self.dones.iter().enumerate())
                .filter_map(|(i, d)| Some((i as u32, d.as_ref()?)))
                .map(|(i, d)| {
                    let up = self.cfg.direction_of(i) == Direction::Up;
                    StreamResult {
                        id: stream_id(i),
                        bytes: d.bytes,
                        retransmits: if up {
                            i64::from(d.tcp.total_retrans)
                        } else {
                            -1
                        },
                        jitter: 0.0,
                        errors: 0,
                        packets: 0,
                        start_time: 0.0,
                        end_time: self.seconds(d),
                    }
                })
                .collect(),
        }
    }

    /// socklab's figures of every stream, the server's kept beside.
    fn merge(&mut self, server: Results) -> Iperf3Run {
        let mut streams = Vec::new();
        for (i, d) in self.dones.iter().enumerate() {
            let Some(d) = d else { continue };
            let index = i as u32;
            let direction = self.cfg.direction_of(index);
            let theirs = server.streams.iter().find(|s| s.id == stream_id(index));
            let mut s = StreamStats {
                index,
                direction,
                bytes: d.bytes,
                received: d.bytes,
                seconds: self.seconds(d),
                cpu: d.cpu_pinned,
                client_opts: d.client_opts.clone(),
                ..StreamStats::default()
            };
            if direction == Direction::Up {
                s.rounds = d.rounds;
                s.writes = d.writes;
                s.send_seconds = d.send_end.map_or(0.0, |t| self.secs(t));
                s.sender_cpu = d.cpu;
                s.tcp = d.tcp;
                s.cc = d.applied.cc.clone();
                s.sndbuf = d.applied.sndbuf;
                s.pacing = d.applied.pacing;
                s.zerocopy = d.zerocopy;
            } else {
                s.reads = d.reads;
                s.receiver_cpu = d.cpu;
                s.rcvbuf = d.rcvbuf;
                s.cc = self.cfg.cc.clone();
                if let Some(r) = theirs.filter(|r| r.retransmits >= 0) {
                    s.tcp.total_retrans = r.retransmits as u32;
                }
            }
            streams.push(s);
        }
        Iperf3Run {
            result: BulkResult {
                started: self.t0,
                ..BulkResult::from_streams(streams, SeriesOutput::default())
            },
            server,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn cfg() -> BulkConfig {
        BulkConfig::new(SocketAddr::from(([127, 0, 0, 1], 5201)))
    }

    #[test]
    fn what_iperf3_cannot_carry_is_refused_naming_the_key() {
        assert!(check(&cfg()).is_ok());
        let refused = |f: &dyn Fn(&mut BulkConfig)| {
            let mut c = cfg();
            f(&mut c);
            check(&c).unwrap_err().to_string()
        };
        let e = refused(&|c| c.verify = true);
        assert!(e.starts_with("`verify` with iperf3://"), "{e}");
        let e = refused(&|c| {
            c.flow = Flow::Down;
            c.strategy = Strategy::Splice;
        });
        assert!(
            e.starts_with("`strategy` splice with iperf3:// and `direction` down"),
            "{e}"
        );
        let e = refused(&|c| {
            c.flow = Flow::Bidir;
            c.limit = Limit::Bytes(1000);
        });
        assert!(e.contains("use `duration`"), "{e}");
        let e = refused(&|c| {
            c.flow = Flow::Bidir;
            c.read_size = 1000;
        });
        assert!(e.starts_with("`read_size` 1000"), "{e}");
        let e = refused(&|c| c.read_size = 2 << 20);
        assert!(e.starts_with("`read_size` 2097152"), "{e}");
        let e = refused(&|c| c.server_affinity = Some("1".parse().unwrap()));
        assert!(e.starts_with("`server_affinity`"), "{e}");
        // The client's own strategy is free when the client sends.
        let mut c = cfg();
        c.strategy = Strategy::Splice;
        assert!(check(&c).is_ok());
    }

    #[test]
    fn the_parameters_follow_the_test() {
        let mut c = cfg();
        c.streams = 2;
        c.limit = Limit::Duration(Duration::from_millis(1500));
        let p = params(&c);
        assert_eq!((p.time, p.num, p.parallel, p.len), (2, 0, 2, 131072));
        assert!(!p.reverse && p.congestion.is_none());
        c.flow = Flow::Bidir;
        c.strategy = Strategy::Sendfile;
        c.pacing_rate = Some(1_000_000);
        let p = params(&c);
        assert!(p.bidirectional && !p.reverse);
        assert_eq!(p.zerocopy, Some(1));
        assert_eq!(p.fqrate, Some(1_000_000));
        assert_eq!(p.congestion.as_deref(), Some("cubic"));
        c.flow = Flow::Up;
        c.limit = Limit::Bytes(1);
        assert_eq!(params(&c).num, 2 * 131072);
        assert_eq!(params(&c).time, 0);
    }
}
