//! A `BULK/2` down stream at the sink: the sender's options, READY, GO, rounds until the test's
//! end, FIN, the client's close, report.
//!
//! Its bounds are looked at between the send calls, not only between rounds or when a call
//! made no progress: a client that reads a few KiB at a time keeps every call making progress
//! and a round going for as long as it likes (issue 26 item 2). So the sink's stop and the test
//! given up end the stream within a call (a call returns within the socket's send timeout, a
//! 100 ms tick), and a round still unfinished [`ROUND_OVERRUN`] past the test's duration is cut
//! there, the stream reported `FAILED` with the reason.

use std::io;
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::SockRef;
use socklab_sys::tcp::tcp_info;
use socklab_sys::usage::{getrusage, Who};

use super::super::{conn_error, Conn, Outcome};
use super::{server_opts, wait_go, Posting, Test};
use crate::partial::{is_no_progress, Every, Policy};
use crate::protocol::multi::{JoinReady, SendEnd, SenderTcp, StreamLine, StreamResult};
use crate::protocol::SinkResult;
use crate::send::{read_back, SendOpts, Sender};

/// How long a round may run past a duration-bounded stream's duration before the stream is
/// cut (rounds end whole otherwise: a healthy reader finishes a round in far less).
pub(super) const ROUND_OVERRUN: Duration = Duration::from_secs(1);

/// A down stream's bounds, asked between its send calls.
struct Bounds<'a> {
    stop: &'a AtomicBool,
    abort: &'a AtomicBool,
    idle: Duration,
    /// When a round still going is cut: the duration plus [`ROUND_OVERRUN`] from GO.
    cut_at: Option<Instant>,
    /// The test's duration and round, for the message.
    duration: Duration,
    round_len: u64,
    every: Every,
    /// Bytes sent in the round under way.
    in_round: u64,
    halted: Option<Outcome>,
}

impl Bounds<'_> {
    /// The sink stopped, the test was given up, or the round overran the duration at `now`.
    fn over(&self, now: Option<Instant>) -> Option<Outcome> {
        if self.stop.load(Ordering::Relaxed) {
            Some(Outcome::Stopped)
        } else if self.abort.load(Ordering::Relaxed) {
            Some(Outcome::Aborted("its test was given up".into()))
        } else if now.zip(self.cut_at).is_some_and(|(now, cut)| now >= cut) {
            Some(Outcome::Aborted(format!(
                "its round of {} bytes was unfinished {} s past the test's duration of {} s, {} of its bytes sent: the client reads too slowly for rounds this large; use a smaller nbufs or bufsize",
                self.round_len,
                ROUND_OVERRUN.as_secs_f64(),
                self.duration.as_secs_f64(),
                self.in_round
            )))
        } else {
            None
        }
    }

    fn halt(&mut self, o: Outcome) -> io::Error {
        self.halted = Some(o);
        io::Error::other("given up")
    }
}

impl Policy for Bounds<'_> {
    fn stalled(&mut self, e: io::Error, since: Instant) -> io::Result<()> {
        let now = Instant::now();
        let o = if !is_no_progress(&e) {
            conn_error(&e)
        } else if let Some(o) = self.over(Some(now)) {
            o
        } else if now.duration_since(since) >= self.idle {
            Outcome::IdleTimeout
        } else {
            return Ok(());
        };
        Err(self.halt(o))
    }

    fn moved(&mut self, n: usize) -> io::Result<()> {
        self.in_round += n as u64;
        // The flags every call, the clock every few (a call returns within a tick).
        let now = self.every.tick().then(Instant::now);
        match self.over(now) {
            None => Ok(()),
            Some(o) => Err(self.halt(o)),
        }
    }
}

/// A down stream: the sender's options, READY, GO, rounds until the test's end, FIN, the
/// client's close, report.
pub(super) fn send_down(
    c: &mut Conn<'_>,
    test: &Test,
    index: u32,
    cpu: Option<usize>,
    post: &mut Posting,
) -> Result<(SinkResult, Outcome), String> {
    let sh = c.sh;
    let (Some(p), Some(payload)) = (&test.hello.send, &test.payload) else {
        let why = "a down stream of a test without send keys".to_string();
        post.failed(&Outcome::Refused(why.clone()));
        return Err(why);
    };
    let fail = |post: &mut Posting, why: String| {
        post.failed(&Outcome::Refused(why.clone()));
        why
    };
    let opts = SendOpts {
        cc: p.cc.clone(),
        nodelay: p.nodelay,
        sndbuf: p.sndbuf,
        pacing: p.pacing,
    };
    opts.apply(SockRef::from(&c.stream))
        .map_err(|e| fail(post, e.to_string()))?;
    // The test's options after the sender's own, as on the client.
    let opts = server_opts(c, test).map_err(|why| fail(post, why))?;
    let applied = read_back(SockRef::from(&c.stream)).map_err(|e| fail(post, e.to_string()))?;
    // Sendfile sends from the test's one file (made and counted with the test).
    let mut sender = Sender::new(p.strategy, payload, c.stream.as_fd(), test.source.as_ref())
        .map_err(|e| fail(post, e.to_string()))?;
    let sock = SockRef::from(&c.stream);
    let ready = JoinReady {
        index,
        down: true,
        rcvbuf: sock.recv_buffer_size().unwrap_or(0),
        sndbuf: applied.sndbuf,
        cc: Some(applied.cc),
        pacing: applied.pacing,
        cpu,
        opts,
    };
    let mut result = SinkResult::default();
    let handshake = |c: &mut Conn<'_>| match test.hello.tls {
        Some(v) => super::super::tls::accept(c, v, test.hello.read_size),
        None => Ok(()),
    };
    if let Err(o) = c
        .write_all(ready.emit().as_bytes())
        .and_then(|()| handshake(c))
    {
        post.failed(&o);
        return Ok((result, o));
    }
    let go = match wait_go(c, test) {
        Ok(go) => go,
        Err(o) => {
            post.failed(&o);
            return Ok((result, o));
        }
    };
    let cpu0 = getrusage(Who::Thread);
    let fd = c.stream.as_fd();
    let round_len = payload.round_len() as u64;
    let (max_rounds, duration) = match p.end {
        SendEnd::Rounds(n) => (n, None),
        SendEnd::Duration(d) => (u64::MAX, Some(d)),
    };
    let stop = &sh.stop;
    let abort = &test.abort;
    let idle = sh.cfg.idle_timeout;
    let mut b = Bounds {
        stop,
        abort,
        idle,
        cut_at: duration.map(|d| go + d + ROUND_OVERRUN),
        duration: duration.unwrap_or_default(),
        round_len,
        every: Every::default(),
        in_round: 0,
        halted: None,
    };
    let mut rounds = 0u64;
    let mut writes = 0u64;
    let mut outcome = Outcome::Complete;
    while rounds < max_rounds {
        b.in_round = 0;
        let r = match c.tls.as_deref_mut() {
            Some(t) => t.round(&c.stream, payload, p.strategy, &mut b),
            None => sender.round(fd, payload, &mut b),
        };
        match r {
            Ok(n) => writes += n,
            Err(e) => {
                outcome = b.halted.take().unwrap_or_else(|| conn_error(&e));
                break;
            }
        }
        b.in_round = 0;
        rounds += 1;
        if duration.is_some_and(|d| go.elapsed() >= d) {
            break;
        }
        if let Some(o) = b.over(None) {
            outcome = o;
            break;
        }
    }
    let elapsed = go.elapsed();
    result.bytes = rounds * round_len + b.in_round;
    result.reads = writes;
    result.elapsed_ns = elapsed.as_nanos() as u64;
    if outcome != Outcome::Complete {
        post.failed(&outcome);
        return Ok((result, outcome));
    }
    let stopped = || stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed);
    let _ = sender.drain(fd, idle.min(Duration::from_secs(10)), &stopped);
    super::super::tls::close(c);
    let _ = c.stream.shutdown(Shutdown::Write);
    // The client closes once it has read every byte; then every byte is acknowledged and the
    // sender's figures are final. (Waiting looks at the stop flag every tick.)
    let mut junk = [0u8; 64];
    let outcome = match c.read(&mut junk) {
        Ok(0) => Outcome::Complete,
        Ok(_) => Outcome::Refused("data on a down stream".into()),
        Err(o) => o,
    };
    let used = getrusage(Who::Thread).since(&cpu0);
    let info = tcp_info(c.stream.as_fd()).unwrap_or_default();
    if outcome == Outcome::Complete {
        post.send(StreamLine::Result(StreamResult {
            index,
            bytes: result.bytes,
            reads: 0,
            writes,
            user_us: used.user.as_micros() as u64,
            sys_us: used.sys.as_micros() as u64,
            elapsed_ns: result.elapsed_ns,
            hash: None,
            tcp: Some(SenderTcp {
                retrans: info.total_retrans,
                cwnd: info.snd_cwnd,
                rtt_us: info.rtt_us,
                min_rtt_us: info.min_rtt_us,
                mss: info.snd_mss,
            }),
        }));
    } else {
        post.failed(&outcome);
    }
    Ok((result, outcome))
}
