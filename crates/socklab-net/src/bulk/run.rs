//! A bulk test from start to end: the control connection (`BULK/2`), one thread per stream, the
//! barrier, the time series, and the merge of both ends' figures.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use socklab_sys::tcp::TcpInfo;
use socklab_sys::usage::Usage;

use super::bounds::{read_line, Bounds, LineReader};
use super::result::{BulkResult, StreamStats};
use super::stream::{self, connect, send_line, Done, Event, Gate, Proto, Shared};
use super::{BulkConfig, Limit, READY_WAIT, RESULT_WAIT, TICK};
use crate::payload::Payload;
use crate::protocol::multi::{
    SendEnd, SendSpec, StreamLine, StreamResult, TestHello, TestReady, GO,
};
use crate::protocol::MAX_LINE;
use crate::send::sendfile_source;
use crate::series::{Direction, LiveTcp, Probe, Sampler, SeriesOutput};
use crate::sockopt::Side;
use crate::{NetError, Strategy};

/// Runs one bulk test against the sink at `cfg.to`. `stop()` is polled at least every
/// [`TICK`]: when it turns true the test is abandoned with [`NetError::Interrupted`]. A test past
/// its deadline, or whose peer moves nothing for [`super::STALL`], ends with
/// [`NetError::Timeout`].
pub fn run(cfg: &BulkConfig, stop: &dyn Fn() -> bool) -> Result<BulkResult, NetError> {
    run_live(cfg, stop, None)
}

/// [`run`], handing each interval of the time series to `live` as it closes.
pub fn run_live(
    cfg: &BulkConfig,
    stop: &dyn Fn() -> bool,
    live: Option<LiveTcp>,
) -> Result<BulkResult, NetError> {
    cfg.validate()?;
    let payload = Payload::new(cfg.nbufs, cfg.bufsize, cfg.seed);
    let n = cfg.connections();
    // Sendfile's source: one file for every up stream of the test, not one each.
    let source = (cfg.strategy == Strategy::Sendfile
        && (0..n).any(|i| cfg.direction_of(i) == Direction::Up))
    .then(|| sendfile_source(&payload))
    .transpose()?;
    let halt = AtomicBool::new(false);
    let abort = AtomicBool::new(false);
    let remaining = AtomicU32::new(n);
    let gate = Gate::default();
    let tls = super::tls::client_config(cfg)?;
    let (proto, control) = if cfg.is_classic() {
        (Proto::V1, None)
    } else {
        let (c, test) = open_test(cfg, stop, &abort)?;
        (Proto::V2 { test }, Some(c))
    };
    let sh = Shared {
        cfg,
        payload: &payload,
        source: source.as_ref(),
        gate: &gate,
        abort: &abort,
        halt: &halt,
        remaining: &remaining,
        proto,
        sampling: cfg.sampling.is_on(),
        preconnected: None,
        tls: tls.as_ref(),
    };
    let outcome = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        for i in 0..n {
            let (tx, sh) = (tx.clone(), &sh);
            let spawned = std::thread::Builder::new()
                .name(format!("bulk-s{i}"))
                .spawn_scoped(s, move || stream::spawned(sh, i, &tx));
            if let Err(e) = spawned {
                abort.store(true, Ordering::SeqCst);
                gate.abandon();
                return Err(NetError::io(
                    format!("starting the thread of stream {i}"),
                    e,
                ));
            }
        }
        let mut run = Running {
            sh: &sh,
            stop,
            rx,
            control: control.as_ref(),
            n,
        };
        let result = run.test(s, &tx, live);
        if result.is_err() {
            abort.store(true, Ordering::SeqCst);
            gate.abandon();
            if let Some(c) = &control {
                // The sink's down streams stop sending when their test's control ends.
                let _ = c.shutdown(Shutdown::Both);
            }
        }
        result
    })?;
    merge(cfg, &payload, outcome)
}

/// Opens a `BULK/2` test: connects the control connection, names the test and its streams, and
/// reads the sink's READY.
fn open_test(
    cfg: &BulkConfig,
    stop: &dyn Fn() -> bool,
    abort: &AtomicBool,
) -> Result<(TcpStream, u64), NetError> {
    let round = (cfg.nbufs * cfg.bufsize) as u64;
    let (up, down) = match cfg.flow {
        super::Flow::Up => (cfg.streams, 0),
        super::Flow::Down => (0, cfg.streams),
        super::Flow::Bidir => (cfg.streams, cfg.streams),
    };
    let end = match cfg.limit {
        Limit::Iterations(r) => SendEnd::Rounds(r),
        Limit::Bytes(b) => SendEnd::Rounds(b.div_ceil(round)),
        Limit::Duration(d) => SendEnd::Duration(d),
    };
    let test = test_id();
    let hello = TestHello {
        test,
        up,
        down,
        read_size: cfg.read_size,
        verify: cfg.verify,
        send: (down > 0).then(|| SendSpec {
            strategy: cfg.strategy,
            nbufs: cfg.nbufs,
            bufsize: cfg.bufsize,
            seed: cfg.seed,
            cc: cfg.cc.clone(),
            nodelay: cfg.nodelay,
            sndbuf: cfg.sndbuf,
            pacing: cfg.pacing_bytes(),
            end,
        }),
        cpus: cfg.server_affinity.clone(),
        opts: cfg.opts.clone(),
        tls: cfg.tls.as_ref().map(|t| t.version),
    };
    let line = hello.emit();
    if line.len() > MAX_LINE {
        return Err(NetError::Invalid(format!(
            "the request to the sink is {} bytes, more than the {MAX_LINE} of a control line: shorten `server_affinity` (ranges: 0-7)",
            line.len()
        )));
    }
    let mut c = connect(cfg, false, false, stop)?.stream;
    let mut b = Bounds::new(cfg, stop, abort, (READY_WAIT, "READY"));
    send_line(&c, &line, &mut b, cfg)?;
    let ready = TestReady::parse(&read_line(&mut c, "READY", &mut b, cfg)?).map_err(|detail| {
        let hint = if detail.contains("BULK/1") && !detail.contains("BULK/2") {
            " (that sink is older: `streams`, `reverse`, `bidir`, `server_affinity` and `opts` need a sink of socklab that speaks BULK/2)"
        } else {
            ""
        };
        NetError::Protocol {
            peer: cfg.to.to_string(),
            detail: format!("{detail}{hint}"),
        }
    })?;
    if cfg.tls.is_some() && !ready.tls {
        return Err(NetError::Protocol {
            peer: cfg.to.to_string(),
            detail: "its READY does not offer TLS: a sink of socklab older than `tls` (update it), or another program".into(),
        });
    }
    if ready.test != test || ready.streams != up + down {
        return Err(NetError::Protocol {
            peer: cfg.to.to_string(),
            detail: format!(
                "READY for test {:016x} of {} streams, asked for {test:016x} of {}",
                ready.test,
                ready.streams,
                up + down
            ),
        });
    }
    Ok((c, test))
}

/// A test id no other test of this sink is likely to use: the clock, the process and a
/// counter, mixed.
fn test_id() -> u64 {
    static N: AtomicU32 = AtomicU32::new(0);
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x =
        ns ^ (u64::from(std::process::id()) << 32) ^ u64::from(N.fetch_add(1, Ordering::Relaxed));
    // splitmix64's finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)).max(1)
}

/// What the threads of a finished test measured.
struct Outcome {
    t0: Instant,
    dones: Vec<Done>,
    results: Vec<Option<StreamResult>>,
    series: SeriesOutput,
}

/// The main thread's side of a running test.
struct Running<'a, 'b> {
    sh: &'a Shared<'b>,
    stop: &'a dyn Fn() -> bool,
    rx: mpsc::Receiver<Event>,
    control: Option<&'a TcpStream>,
    n: u32,
}

impl<'a, 'b> Running<'a, 'b> {
    /// The next event, waking every tick to pass Ctrl-C on to the threads.
    fn next(&self) -> Result<Event, NetError> {
        loop {
            if (self.stop)() {
                self.sh.halt.store(true, Ordering::SeqCst);
                return Err(NetError::Interrupted);
            }
            match self.rx.recv_timeout(TICK) {
                Ok(e) => return Ok(e),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(NetError::Invalid(
                        "the test's threads ended unexpectedly".into(),
                    ))
                }
            }
        }
    }

    /// Waits until every stream is ready, starts them together, and collects their ends.
    fn test<'s>(
        &mut self,
        scope: &'s std::thread::Scope<'s, 'a>,
        tx: &mpsc::Sender<Event>,
        live: Option<LiveTcp>,
    ) -> Result<Outcome, NetError>
    where
        'a: 's,
    {
        let cfg = self.sh.cfg;
        let n = self.n as usize;
        let mut probes: Vec<Option<Probe>> = (0..n).map(|_| None).collect();
        let mut ready = 0;
        while ready < n {
            match self.next()? {
                Event::Ready(i, setup) => {
                    ready += 1;
                    if let Some((fd, counter)) = setup.probe {
                        probes[i as usize] = Some(Probe {
                            stream: i,
                            direction: cfg.direction_of(i),
                            fd,
                            counter,
                        });
                    }
                }
                Event::Done(_, r) => {
                    return Err(match *r {
                        Err(e) => e,
                        Ok(_) => NetError::Invalid("a stream ended before the start".into()),
                    })
                }
                Event::Control(_) => {}
            }
        }
        // Every connection got READY: the start. The sampler's base readings come before any
        // byte moves (the sink sends nothing before GO, the client's streams wait at the gate).
        let t0 = Instant::now();
        let sampler = if self.sh.sampling {
            Some(Sampler::start(
                probes.into_iter().flatten().collect(),
                cfg.sampling,
                t0,
                live,
            )?)
        } else {
            None
        };
        if let Some(c) = self.control {
            let mut b = Bounds::new(cfg, self.stop, self.sh.abort, (READY_WAIT, "GO"));
            send_line(c, GO, &mut b, cfg)?;
            let reader = c
                .try_clone()
                .map_err(|e| NetError::io("dup of the control connection", e))?;
            let (sh, tx, n) = (self.sh, tx.clone(), self.n);
            std::thread::Builder::new()
                .name("bulk-control".into())
                .spawn_scoped(scope, move || read_results(sh, reader, n, &tx))
                .map_err(|e| NetError::io("starting the control thread", e))?;
        }
        self.sh.gate.open(t0, sampler.as_ref().map(Sampler::ender));

        let mut dones: Vec<Option<Done>> = (0..n).map(|_| None).collect();
        let mut results: Vec<Option<StreamResult>> = vec![None; n];
        let (mut ended, mut reported) = (0, 0);
        let want_results = if self.control.is_some() { n } else { 0 };
        let mut all_ended_at: Option<Instant> = None;
        while ended < n || reported < want_results {
            let ev = match self.next_or_late(all_ended_at)? {
                Some(ev) => ev,
                None => {
                    return Err(NetError::Timeout(format!(
                        "every stream ended but the sink at {} sent {reported} of {want_results} results within {}: it stopped answering",
                        cfg.to,
                        socklab_units::format_duration(RESULT_WAIT)
                    )))
                }
            };
            match ev {
                Event::Done(i, r) => {
                    dones[i as usize] = Some((*r)?);
                    ended += 1;
                    if ended == n {
                        all_ended_at = Some(Instant::now());
                    }
                }
                Event::Control(line) => match line? {
                    StreamLine::Result(r) => {
                        let i = r.index as usize;
                        if i >= n || results[i].is_some() {
                            return Err(NetError::Protocol {
                                peer: cfg.to.to_string(),
                                detail: format!("a RESULT for stream {i}, unexpected"),
                            });
                        }
                        results[i] = Some(r);
                        reported += 1;
                    }
                    StreamLine::Failed { index, reason } => {
                        return Err(NetError::Protocol {
                            peer: cfg.to.to_string(),
                            detail: format!("the sink's end of stream {index} failed: {reason}"),
                        })
                    }
                },
                Event::Ready(..) => {}
            }
        }
        let dones: Vec<Done> = dones.into_iter().flatten().collect();
        let series = match sampler {
            Some(s) => {
                let end = s.end();
                let finals: Vec<(u64, TcpInfo)> = dones.iter().map(|d| (d.bytes, d.tcp)).collect();
                s.finish(end, &finals)
            }
            None => SeriesOutput::default(),
        };
        Ok(Outcome {
            t0,
            dones,
            results,
            series,
        })
    }

    /// [`Running::next`], or `None` once every stream has ended and the results have been
    /// awaited [`RESULT_WAIT`] since.
    fn next_or_late(&self, since: Option<Instant>) -> Result<Option<Event>, NetError> {
        let Some(since) = since else {
            return self.next().map(Some);
        };
        loop {
            if (self.stop)() {
                self.sh.halt.store(true, Ordering::SeqCst);
                return Err(NetError::Interrupted);
            }
            if since.elapsed() >= RESULT_WAIT {
                return Ok(None);
            }
            match self.rx.recv_timeout(TICK) {
                Ok(e) => return Ok(Some(e)),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
            }
        }
    }
}

/// The control connection's reader: every stream's RESULT (or FAILED) line, as it comes.
fn read_results(sh: &Shared<'_>, mut c: TcpStream, n: u32, tx: &mpsc::Sender<Event>) {
    let halt = || sh.halt.load(Ordering::Relaxed);
    // Silence on the control connection is no stall (the streams are running): only Ctrl-C,
    // a failed stream and the deadline end the wait.
    let mut b = Bounds::new(sh.cfg, &halt, sh.abort, (Duration::ZERO, "RESULT"));
    b.phase = None;
    b.t0 = Some(Instant::now());
    let mut lines = LineReader::default();
    for _ in 0..n {
        let line = lines.next(&mut c, "RESULT", &mut b, sh.cfg).and_then(|l| {
            StreamLine::parse(&l).map_err(|detail| NetError::Protocol {
                peer: sh.cfg.to.to_string(),
                detail,
            })
        });
        let failed = !matches!(line, Ok(StreamLine::Result(_)));
        if tx.send(Event::Control(line)).is_err() || failed {
            return;
        }
    }
}

fn usage(user_us: u64, sys_us: u64) -> Usage {
    Usage {
        user: Duration::from_micros(user_us),
        sys: Duration::from_micros(sys_us),
        ..Usage::default()
    }
}

/// Both ends' figures of every stream, checked: every byte sent was received, and (with
/// verify) the receiver's hash is that of what was sent.
fn merge(cfg: &BulkConfig, payload: &Payload, o: Outcome) -> Result<BulkResult, NetError> {
    let peer = cfg.to.to_string();
    let round_len = payload.round_len() as u64;
    let secs = |t: Instant| t.saturating_duration_since(o.t0).as_secs_f64();
    let want_hash = |rounds: u64| payload.stream_hash(rounds).to_hex().to_string();
    let mut streams = Vec::with_capacity(o.dones.len());
    let tls = super::tls::stats(o.dones.iter().map(|d| d.tls.as_ref()));
    for (i, (d, r)) in o.dones.into_iter().zip(o.results).enumerate() {
        let index = i as u32;
        let direction = cfg.direction_of(index);
        let joined = d.joined.clone().unwrap_or_default();
        let mut s = StreamStats {
            index,
            direction,
            seconds: secs(d.end),
            cpu: d.cpu_pinned,
            server_cpu: joined.cpu,
            ..StreamStats::default()
        };
        if let Some(o) = &cfg.opts {
            let server = joined.opts.clone().unwrap_or_default();
            s.opts_off = (o.off(Side::Client, &d.client_opts).into_iter())
                .map(|x| format!("client:{x}"))
                .chain(
                    o.off(Side::Server, &server)
                        .into_iter()
                        .map(|x| format!("server:{x}")),
                )
                .collect();
            s.client_opts = d.client_opts.clone();
            s.server_opts = joined.opts.clone();
        }
        let mismatch = |what: String| NetError::Protocol {
            peer: peer.clone(),
            detail: what,
        };
        match (direction, d.v1, r) {
            (Direction::Up, Some((sink, rcvbuf)), _) => {
                s.received = sink.bytes;
                s.reads = sink.reads;
                s.receiver_cpu = usage(sink.user_us, sink.sys_us);
                s.rcvbuf = rcvbuf;
                s.verified = cfg
                    .verify
                    .then(|| sink.hash.as_deref() == Some(want_hash(d.rounds).as_str()));
            }
            (Direction::Up, None, Some(r)) => {
                s.received = r.bytes;
                s.reads = r.reads;
                s.receiver_cpu = usage(r.user_us, r.sys_us);
                s.rcvbuf = joined.rcvbuf;
                s.verified = cfg
                    .verify
                    .then(|| r.hash.as_deref() == Some(want_hash(d.rounds).as_str()));
            }
            (Direction::Down, _, Some(r)) => {
                if r.bytes % round_len != 0 {
                    return Err(mismatch(format!(
                        "stream {index}: the sink sent {} bytes, not whole rounds of {round_len}",
                        r.bytes
                    )));
                }
                s.received = d.bytes;
                s.reads = d.reads;
                s.receiver_cpu = d.cpu;
                s.rcvbuf = d.rcvbuf;
                let rounds = r.bytes / round_len;
                s.verified = d.hash.map(|h| h.to_hex().to_string() == want_hash(rounds));
                let t = r.tcp.unwrap_or_default();
                let down = DownSender {
                    r: &r,
                    rounds,
                    tcp: TcpInfo {
                        total_retrans: t.retrans,
                        snd_cwnd: t.cwnd,
                        rtt_us: t.rtt_us,
                        min_rtt_us: t.min_rtt_us,
                        snd_mss: t.mss,
                        ..TcpInfo::default()
                    },
                };
                down.fill(&mut s, &joined);
                streams.push(s);
                continue;
            }
            _ => return Err(mismatch(format!("no RESULT for stream {index}"))),
        }
        // The client sent this stream.
        s.bytes = d.bytes;
        s.rounds = d.rounds;
        s.writes = d.writes;
        s.send_seconds = d.send_end.map_or(0.0, secs);
        s.sender_cpu = d.cpu;
        s.tcp = d.tcp;
        s.cc = d.applied.cc;
        s.sndbuf = d.applied.sndbuf;
        s.pacing = d.applied.pacing;
        s.zerocopy = d.zerocopy;
        streams.push(s);
    }
    for s in &streams {
        if s.received != s.bytes {
            let (got, sent) = match s.direction {
                Direction::Up => ("sink received", "sender wrote"),
                Direction::Down => ("client received", "sink sent"),
            };
            return Err(NetError::Protocol {
                peer,
                detail: if streams.len() == 1 {
                    format!("{got} {} bytes, {sent} {}", s.received, s.bytes)
                } else {
                    format!(
                        "stream {}: {got} {} bytes, {sent} {}",
                        s.index, s.received, s.bytes
                    )
                },
            });
        }
    }
    Ok(BulkResult {
        started: Some(o.t0),
        tls,
        ..BulkResult::from_streams(streams, o.series)
    })
}

/// The sink's side of a down stream, from its RESULT.
struct DownSender<'r> {
    r: &'r StreamResult,
    rounds: u64,
    tcp: TcpInfo,
}

impl DownSender<'_> {
    fn fill(&self, s: &mut StreamStats, joined: &crate::protocol::multi::JoinReady) {
        s.bytes = self.r.bytes;
        s.rounds = self.rounds;
        s.writes = self.r.writes;
        s.send_seconds = self.r.elapsed_ns as f64 / 1e9;
        s.sender_cpu = usage(self.r.user_us, self.r.sys_us);
        s.tcp = self.tcp;
        s.cc = joined.cc.clone().unwrap_or_default();
        s.sndbuf = joined.sndbuf;
        s.pacing = joined.pacing;
    }
}
