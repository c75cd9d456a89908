//! The `https` load: `http` over TLS 1.3 (rustls with ring, through tokio-rustls).
//!
//! Each generator thread runs a single-threaded tokio runtime over its share of the
//! connections (connection `c` goes to thread `c % threads`, as in the plain engine), one task
//! per connection slot, its own histograms. A slot's request is: connect and handshake when it
//! has no connection (both in the connect time: the TLS handshake is part of the connect
//! phase), the request written, the reply parsed as it streams ([`ReplyParser`]). Closed loop
//! starts the next request at once; open loop (`rate`) at its intended send time, latency
//! counted from it (coordinated omission corrected).
//!
//! Session resumption is off unless `tls_resume` asks for it: every new connection pays a full
//! handshake, so the connection per request case (TLS CRR) measures the handshake's whole
//! cost, as a first visit does. wrk resumes (OpenSSL's session cache): `tls_resume` is the
//! like-for-like comparison, and the report counts the handshakes that resumed.
//! A handshake that fails on the TLS level (a certificate that does not match the pin or the
//! CA, a server that does not speak TLS) ends the run with that one line: every later
//! connection would fail the same way.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use socklab_sys::usage::{getrusage, Who};
use socklab_tls::{Negotiated, TlsVersion, Trust};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::http::ReplyParser;
use super::merge::LoadHistograms;
use super::metrics::record;
use super::schedule::Schedule;
use super::thread_out::{assemble, end_of_run, ThreadOut};
use super::{LoadConfig, LoadReport, TlsSummary};
use crate::NetError;

/// Bytes read per call.
const READ_BUF: usize = 16 << 10;
/// Closed loop: pause after a failed connect, so a refusing server does not make a busy loop.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
/// How often a slot waiting on the network looks at the stop flag.
const POLL_STOP: Duration = Duration::from_millis(50);

/// Checks the https keys of `cfg` (trust, no `interval`).
pub(super) fn check(cfg: &LoadConfig) -> Result<(), NetError> {
    trust(cfg)?;
    if cfg.interval.is_some() {
        return Err(NetError::Invalid(
            "`interval` is not available with https yet: drop `interval`".into(),
        ));
    }
    Ok(())
}

/// The trust `tls_trust` asks for (none given: unverified, as wrk).
fn trust(cfg: &LoadConfig) -> Result<Trust, NetError> {
    match cfg.tls_trust.as_deref().map(str::trim) {
        None | Some("") => Ok(Trust::Unverified),
        Some(t) => Trust::parse(t).map_err(|e| NetError::Invalid(format!("`tls_trust` {e}"))),
    }
}

/// How a request failed.
#[derive(Debug, Clone, Copy)]
enum Fail {
    Connect,
    Read,
    Write,
    BadReply,
}

/// What every thread shares.
struct Shared<'a> {
    cfg: &'a LoadConfig,
    stop: &'a AtomicBool,
    abort: AtomicBool,
    abort_reason: Mutex<Option<String>>,
    negotiated: Mutex<Option<Negotiated>>,
    resumed: std::sync::atomic::AtomicU64,
    connector: TlsConnector,
    name: ServerName<'static>,
    request: Vec<u8>,
    start: Instant,
    end: Option<Instant>,
}

impl Shared<'_> {
    fn abort(&self, reason: String) {
        let mut r = self.abort_reason.lock().unwrap_or_else(|e| e.into_inner());
        r.get_or_insert(reason);
        self.abort.store(true, Ordering::Relaxed);
    }

    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.abort.load(Ordering::Relaxed)
            || self.end.is_some_and(|e| Instant::now() >= e)
    }

    fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.start).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Runs an https load (the configuration is valid).
pub(super) fn run(
    cfg: &LoadConfig,
    stop: &AtomicBool,
) -> Result<(LoadReport, LoadHistograms), NetError> {
    let trust = trust(cfg)?;
    let mut client = socklab_tls::client_config(&trust, TlsVersion::Tls13, &[])
        .map_err(|e| NetError::Invalid(format!("`tls_trust` {e}")))?
        .as_ref()
        .clone();
    if !cfg.tls_resume {
        client.resumption = rustls::client::Resumption::disabled();
    }
    let name = match &cfg.host {
        Some(h) => ServerName::try_from(h.clone())
            .map_err(|e| NetError::Invalid(format!("`host` '{h}': {e}")))?,
        None => ServerName::IpAddress(cfg.to.ip().into()),
    };
    let threads = cfg.threads.min(cfg.connections).max(1);
    let start = Instant::now();
    let sh = Shared {
        cfg,
        stop,
        abort: AtomicBool::new(false),
        abort_reason: Mutex::new(None),
        negotiated: Mutex::new(None),
        resumed: std::sync::atomic::AtomicU64::new(0),
        connector: TlsConnector::from(Arc::new(client)),
        name,
        request: super::engine::request_bytes(cfg),
        start,
        end: cfg.duration.map(|d| start + d),
    };
    let outs: Vec<ThreadOut> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let sh = &sh;
                std::thread::Builder::new()
                    .name(format!("load-tls-{t}"))
                    .spawn_scoped(s, move || thread(sh, t, threads))
            })
            .collect();
        let mut outs = Vec::new();
        for h in handles {
            match h {
                Ok(h) => match h.join() {
                    Ok(Ok(o)) => outs.push(o),
                    Ok(Err(e)) => sh.abort(e),
                    Err(p) => std::panic::resume_unwind(p),
                },
                Err(e) => sh.abort(format!("cannot start a load thread: {e}")),
            }
        }
        outs
    });
    let elapsed = start.elapsed();
    let (wall, aborted) = end_of_run(cfg.duration, elapsed, &sh.abort_reason, stop);
    let (mut report, h) = assemble(cfg, outs, wall, aborted);
    let negotiated = sh
        .negotiated
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    report.tls = Some(TlsSummary {
        version: negotiated
            .as_ref()
            .map_or_else(String::new, |n| n.version.clone()),
        cipher: negotiated.map_or_else(String::new, |n| n.cipher),
        trust: trust.describe(),
        resumption: cfg.tls_resume,
        resumed: sh.resumed.load(Ordering::Relaxed),
    });
    Ok((report, h))
}

/// One generator thread: a current-thread runtime over its slots.
fn thread(sh: &Shared<'_>, t: usize, threads: usize) -> Result<ThreadOut, String> {
    let usage0 = getrusage(Who::Thread);
    let wall0 = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    let out = Rc::new(RefCell::new(ThreadOut::new()));
    let n = sh.cfg.connections as u64;
    let local = tokio::task::LocalSet::new();
    // Safety of the lifetimes: every task ends inside `block_on` (the joins below), so none
    // outlives `sh`.
    local.block_on(&rt, async {
        let slots = (t..sh.cfg.connections).step_by(threads).map(|c| {
            let sched = Schedule::new(c as u64, n, sh.cfg.loops, sh.cfg.requests, sh.cfg.rate);
            slot(sh, sched, out.clone())
        });
        futures_join_all(slots).await;
    });
    let mut o = Rc::try_unwrap(out)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| std::mem::replace(&mut rc.borrow_mut(), ThreadOut::new()));
    let used = getrusage(Who::Thread).since(&usage0);
    o.cpu_user = used.user;
    o.cpu_sys = used.sys;
    o.wall = wall0.elapsed();
    Ok(o)
}

/// Polls every future to its end on this thread (a minimal `join_all`).
async fn futures_join_all<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
    let mut v: Vec<std::pin::Pin<Box<F>>> = futs.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        v.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if v.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

/// Runs `a` and `b` together: `Ok` with `a`'s output if it ends first, else `Err` with `b`'s.
async fn first<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> Result<A::Output, B::Output> {
    tokio::select! {
        biased;
        v = a => Ok(v),
        v = b => Err(v),
    }
}

/// Waits until the run is over (its end, the stop flag, an abort).
async fn run_over(sh: &Shared<'_>) {
    while !sh.over() {
        let left = sh
            .end
            .map_or(POLL_STOP, |e| e.saturating_duration_since(Instant::now()));
        tokio::time::sleep(left.min(POLL_STOP)).await;
    }
}

/// One connection slot's requests.
async fn slot(sh: &Shared<'_>, sched: Schedule, out: Rc<RefCell<ThreadOut>>) {
    let cfg = sh.cfg;
    let mut stream: Option<TlsStream<TcpStream>> = None;
    let mut parser = ReplyParser::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut k = 0;
    while k < sched.quota && !sh.over() {
        let intended = sched
            .intended_ns(k)
            .map(|ns| sh.start + Duration::from_nanos(ns));
        if let Some(at) = intended {
            if sh.end.is_some_and(|e| at >= e) {
                break;
            }
            if first(tokio::time::sleep_until(at.into()), run_over(sh))
                .await
                .is_err()
            {
                break;
            }
        }
        k += 1;
        let begin = Instant::now();
        if let Some(at) = intended {
            record(
                &mut out.borrow_mut().send_lag,
                sh.ns(begin).saturating_sub(sh.ns(at)),
            );
        }
        let req = request(sh, &mut stream, &mut parser, &mut buf, &out, begin);
        let outcome = first(tokio::time::timeout(cfg.timeout, req), run_over(sh))
            .await
            .ok();
        let now = Instant::now();
        let back_off = {
            let mut back_off = false;
            let mut o = out.borrow_mut();
            match outcome {
                // The run ended with this request in flight: not counted.
                None => break,
                Some(Ok(Ok(()))) if sh.end.is_none_or(|e| now <= e) => {
                    record(&mut o.response, sh.ns(now) - sh.ns(begin));
                    if let Some(at) = intended {
                        record(&mut o.corrected, sh.ns(now).saturating_sub(sh.ns(at)));
                    }
                    o.completed += 1;
                    if cfg.new_connection_per_request || !parser.keep_alive() {
                        stream = None;
                    }
                }
                Some(Ok(Ok(()))) => break,
                Some(Ok(Err(kind))) => {
                    stream = None;
                    let f = &mut o.failed;
                    match kind {
                        Fail::Connect => f.connect += 1,
                        Fail::Read => f.read += 1,
                        Fail::Write => f.write += 1,
                        Fail::BadReply => f.bad_reply += 1,
                    }
                    back_off = matches!(kind, Fail::Connect) && cfg.rate.is_none();
                }
                Some(Err(_)) => {
                    stream = None;
                    o.failed.timeout += 1;
                }
            }
            back_off
        };
        if back_off {
            tokio::time::sleep(CONNECT_BACKOFF).await;
        }
    }
}

/// One request: connect and handshake if needed, the request out, the whole reply in.
async fn request(
    sh: &Shared<'_>,
    stream: &mut Option<TlsStream<TcpStream>>,
    parser: &mut ReplyParser,
    buf: &mut [u8],
    out: &Rc<RefCell<ThreadOut>>,
    begin: Instant,
) -> Result<(), Fail> {
    if stream.is_none() {
        let tcp = TcpStream::connect(sh.cfg.to)
            .await
            .map_err(|_| Fail::Connect)?;
        let _ = tcp.set_nodelay(true);
        let tls = match sh.connector.connect(sh.name.clone(), tcp).await {
            Ok(t) => t,
            Err(e) => {
                if let Some(tls_err) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                    sh.abort(format!(
                        "TLS handshake with {} failed: {tls_err}",
                        sh.cfg.to
                    ));
                }
                return Err(Fail::Connect);
            }
        };
        if tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            sh.resumed.fetch_add(1, Ordering::Relaxed);
        }
        let mut neg = sh.negotiated.lock().unwrap_or_else(|e| e.into_inner());
        if neg.is_none() {
            *neg = Some(Negotiated::of(tls.get_ref().1));
        }
        drop(neg);
        let mut o = out.borrow_mut();
        record(&mut o.connect, sh.ns(Instant::now()) - sh.ns(begin));
        o.connections_opened += 1;
        *stream = Some(tls);
    }
    let Some(s) = stream.as_mut() else {
        return Err(Fail::Connect);
    };
    let write_start = Instant::now();
    s.write_all(&sh.request).await.map_err(|_| Fail::Write)?;
    s.flush().await.map_err(|_| Fail::Write)?;
    out.borrow_mut().bytes_written += sh.request.len() as u64;
    parser.reset();
    let mut first = true;
    loop {
        let n = s.read(buf).await.map_err(|_| Fail::Read)?;
        if n == 0 {
            return Err(Fail::Read);
        }
        let mut o = out.borrow_mut();
        o.bytes_read += n as u64;
        if first {
            first = false;
            record(
                &mut o.first_byte,
                sh.ns(Instant::now()) - sh.ns(write_start),
            );
        }
        match parser.feed(&buf[..n]) {
            Ok(Some(used)) if used == n => return Ok(()),
            Ok(Some(_)) | Err(_) => return Err(Fail::BadReply),
            Ok(None) => {}
        }
    }
}
