//! The io_uring design: one ring per worker thread, each on its own `SO_REUSEPORT` listener,
//! driven through the safe wrapper [`socklab_sys::uring::Ring`]: a multishot accept per
//! listener, a multishot recv per connection into the ring's provided buffers, and one send
//! at a time per connection (partial sends resubmit the rest). Bytes that arrive while a reply
//! is in flight wait in the connection's input buffer; past [`INBUF_CAP`] the recv is cancelled
//! until the input drains (no unbounded buffering).
//!
//! Accept errors for lack of descriptors or memory are counted; the accept is cancelled and
//! submitted again after [`super::event::ACCEPT_BACKOFF`]. Where the kernel lacks a feature the
//! design needs, `serve` returns one line naming it and suggesting `--design epoll`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use socket2::Socket;
use socklab_sys::uring::{Completion, RecvBuf, Ring, RingConfig, Unsupported};

use super::event::{
    is_resource_error, local_addr, report, reuseport_listeners, run_workers, ACCEPT_BACKOFF, TICK,
};
use super::slab::{IdleSweep, Slab};
use super::{Ctx, Design, Handler, Replies, ServeConfig, ServeReport, Session, WorkerCount};
use crate::NetError;

/// The listener's token (connection tokens fit in 55 bits).
const LISTENER: u64 = (1 << 55) | 1;
/// Input kept per connection before its recv is paused.
const INBUF_CAP: usize = 256 << 10;
/// The ring's sizes: 512 provided buffers of 8 KiB per worker.
const RING: RingConfig = RingConfig {
    entries: 1024,
    buffers: 512,
    buffer_size: 8192,
};

fn unsupported(u: Unsupported) -> NetError {
    NetError::Invalid(format!(
        "the uring design needs {u}: this kernel or its settings refuse it; use `design` epoll"
    ))
}

fn ring_err(what: &str, e: io::Error) -> NetError {
    NetError::io(format!("io_uring {what}"), e)
}

/// Runs the design of `ctx` until `ctx.stop`.
pub(crate) fn serve(
    ctx: &Ctx<'_>,
    on_listening: &mut dyn FnMut(SocketAddr),
) -> Result<ServeReport, NetError> {
    let cfg = ctx.cfg;
    let start = Instant::now();
    let workers = cfg.workers;
    let listeners = reuseport_listeners(cfg, workers)?;
    let addr = local_addr(&listeners[0])?;
    let results = run_workers(
        workers,
        "sl-uring",
        |i| Worker::new(ctx, &listeners[i]),
        |w, abort| w.run(ctx.stop, abort),
        &mut || on_listening(addr),
    )?;
    Ok(report(Design::Uring, cfg, results, start))
}

/// One connection.
#[derive(Debug)]
struct Conn {
    fd: OwnedFd,
    session: Session,
    /// Input not consumed yet (bytes that came while a reply was in flight).
    inbuf: Vec<u8>,
    /// A send is in flight.
    sending: bool,
    /// The multishot recv is running (its last completion has not come).
    recv_active: bool,
    /// Its cancellation was asked for (input over [`INBUF_CAP`]).
    recv_paused: bool,
    /// The client closed its side.
    eof: bool,
    last: Instant,
    seen: u64,
}

/// Feeds `data` to the session until a reply is pending; returns the bytes consumed.
fn feed(s: &mut Session, data: &[u8]) -> usize {
    let mut off = 0;
    while off < data.len() && !s.has_pending() && !s.should_close() {
        let c = s.receive(&data[off..]);
        if c == 0 {
            break;
        }
        off += c;
    }
    off
}

/// One ring and its connections.
struct Worker<'a> {
    cfg: &'a ServeConfig,
    replies: &'a Replies,
    ring: Ring,
    listener: &'a Socket,
    accept_active: bool,
    resume_at: Option<Instant>,
    /// No connection accepted yet: an `EINVAL` then means multishot accept is unsupported.
    first_accept: bool,
    first_recv: bool,
    conns: Slab<Conn>,
    count: WorkerCount,
    accept_errors: u64,
    bytes_are_progress: bool,
}

impl<'a> Worker<'a> {
    fn new(ctx: &'a Ctx<'a>, listener: &'a Socket) -> Result<Self, NetError> {
        let ring = Ring::new(&RING).map_err(unsupported)?;
        let mut w = Worker {
            cfg: ctx.cfg,
            replies: &ctx.replies,
            ring,
            listener,
            accept_active: false,
            resume_at: None,
            first_accept: true,
            first_recv: true,
            conns: Slab::new(),
            count: WorkerCount::default(),
            accept_errors: 0,
            bytes_are_progress: matches!(ctx.cfg.handler, Handler::Echo | Handler::Discard),
        };
        w.arm_accept()?;
        // Submit now: the listener is being accepted on before the server says it listens
        // (an unsupported multishot accept is reported by the loop's first completion).
        w.ring
            .wait(std::time::Duration::ZERO)
            .map_err(|e| ring_err("submit", e))?;
        Ok(w)
    }

    fn arm_accept(&mut self) -> Result<(), NetError> {
        self.ring
            .accept_multi(self.listener.as_fd(), LISTENER)
            .map_err(|e| ring_err("accept", e))?;
        self.accept_active = true;
        Ok(())
    }

    fn run(
        mut self,
        stop: &AtomicBool,
        abort: &AtomicBool,
    ) -> Result<(WorkerCount, u64), NetError> {
        let mut sweep = IdleSweep::new(self.cfg.idle_timeout, Instant::now());
        let result = self.event_loop(stop, abort, &mut sweep);
        // Close every connection (its requests count), then the ring cancels what is left.
        self.count.requests += self
            .conns
            .take_all()
            .map(|c| c.session.requests())
            .sum::<u64>();
        result.map(|()| (self.count, self.accept_errors))
    }

    fn event_loop(
        &mut self,
        stop: &AtomicBool,
        abort: &AtomicBool,
        sweep: &mut IdleSweep,
    ) -> Result<(), NetError> {
        while !stop.load(Ordering::Relaxed) && !abort.load(Ordering::Relaxed) {
            let timeout = sweep.wait_timeout(Instant::now(), TICK, self.resume_at);
            self.ring.wait(timeout).map_err(|e| ring_err("wait", e))?;
            let now = Instant::now();
            while let Some(c) = self.ring.next_completion() {
                match c {
                    Completion::Accepted { result, more, .. } => {
                        self.accepted(result, more, now)?
                    }
                    Completion::Received {
                        token,
                        result,
                        more,
                    } => self.received(token, result, more, now)?,
                    Completion::Sent { token, result } => self.sent(token, result, now),
                }
            }
            if !self.accept_active && self.resume_at.is_none_or(|t| now >= t) {
                self.resume_at = None;
                self.arm_accept()?;
            }
            let expired = sweep.expired(now, &self.conns, |c| c.last);
            for &t in &expired {
                self.close(t);
            }
            sweep.done(expired);
        }
        Ok(())
    }

    fn accepted(
        &mut self,
        result: io::Result<OwnedFd>,
        more: bool,
        now: Instant,
    ) -> Result<(), NetError> {
        if !more {
            self.accept_active = false;
        }
        match result {
            Ok(fd) => {
                self.first_accept = false;
                let sock = Socket::from(fd);
                let _ = self.cfg.opts.apply_accepted(&sock);
                self.count.connections += 1;
                let token = self.conns.insert(Conn {
                    fd: sock.into(),
                    session: self.replies.session(),
                    inbuf: Vec::new(),
                    sending: false,
                    recv_active: false,
                    recv_paused: false,
                    eof: false,
                    last: now,
                    seen: 0,
                });
                self.arm_recv(token);
            }
            Err(e) if e.raw_os_error() == Some(socklab_sys::errno::EINVAL) && self.first_accept => {
                return Err(unsupported(Unsupported {
                    feature: "multishot accept (IORING_ACCEPT_MULTISHOT, Linux 5.19)",
                    source: e,
                }));
            }
            Err(e) if is_resource_error(&e) => {
                self.accept_errors += 1;
                self.resume_at = Some(now + ACCEPT_BACKOFF);
                if more {
                    self.ring
                        .cancel_accept(LISTENER)
                        .map_err(|e| ring_err("cancel", e))?;
                }
            }
            Err(e) if e.raw_os_error() == Some(socklab_sys::errno::ECANCELED) => {}
            Err(_) => {
                // ECONNABORTED and friends: the client left; the accept goes on (or is
                // submitted again by the loop).
            }
        }
        Ok(())
    }

    fn arm_recv(&mut self, token: u64) {
        let Some(c) = self.conns.get_mut(token) else {
            return;
        };
        if c.recv_active || c.eof || c.inbuf.len() >= INBUF_CAP {
            return;
        }
        if self.ring.recv_multi(c.fd.as_fd(), token).is_ok() {
            c.recv_active = true;
            c.recv_paused = false;
        } else {
            self.close(token);
        }
    }

    fn received(
        &mut self,
        token: u64,
        result: io::Result<Option<RecvBuf>>,
        more: bool,
        now: Instant,
    ) -> Result<(), NetError> {
        let Some(c) = self.conns.get_mut(token) else {
            if let Ok(Some(b)) = result {
                self.ring.recycle(b); // a closed connection's late bytes
            }
            return Ok(());
        };
        if !more {
            c.recv_active = false;
        }
        match result {
            Ok(Some(b)) => {
                self.first_recv = false;
                let data = self.ring.buffer(&b);
                let used = if c.inbuf.is_empty() && !c.sending {
                    feed(&mut c.session, data)
                } else {
                    0
                };
                if used < data.len() {
                    c.inbuf.extend_from_slice(&data[used..]);
                }
                if self.bytes_are_progress || c.session.requests() != c.seen {
                    c.seen = c.session.requests();
                    c.last = now;
                }
                self.ring.recycle(b);
                self.advance(token);
            }
            Ok(None) => {
                c.eof = true;
                if !c.sending {
                    self.close(token);
                }
                return Ok(());
            }
            Err(e) if e.raw_os_error() == Some(socklab_sys::errno::EINVAL) && self.first_recv => {
                return Err(unsupported(Unsupported {
                    feature: "multishot recv with provided buffers (Linux 6.0)",
                    source: e,
                }));
            }
            Err(e)
                if e.raw_os_error() == Some(socklab_sys::errno::ENOBUFS)
                    || e.raw_os_error() == Some(socklab_sys::errno::ECANCELED) => {}
            Err(_) => {
                self.close(token);
                return Ok(());
            }
        }
        // Pause reading while too much input waits; resume (or re-arm an ended multishot).
        if let Some(c) = self.conns.get_mut(token) {
            if c.recv_active && !c.recv_paused && c.inbuf.len() >= INBUF_CAP {
                c.recv_paused = true;
                let _ = self.ring.cancel_recv(token);
            } else if !c.recv_active {
                self.arm_recv(token);
            }
        }
        Ok(())
    }

    fn sent(&mut self, token: u64, result: io::Result<usize>, now: Instant) {
        let r = self.replies;
        let Some(c) = self.conns.get_mut(token) else {
            return;
        };
        c.sending = false;
        match result {
            Ok(n) if n > 0 => {
                c.session.sent(n, r);
                c.last = now;
                self.advance(token);
            }
            _ => self.close(token),
        }
    }

    /// Moves a connection on after input or a finished send: sends what is pending, answers
    /// input kept from before, closes when the session says so.
    fn advance(&mut self, token: u64) {
        let r = self.replies;
        let Some(c) = self.conns.get_mut(token) else {
            return;
        };
        if c.sending {
            return;
        }
        if !c.session.has_pending() && !c.session.should_close() && !c.inbuf.is_empty() {
            let used = feed(&mut c.session, &c.inbuf);
            c.inbuf.drain(..used);
        }
        if c.session.has_pending() {
            let fd = c.fd.as_fd();
            if self.ring.send(fd, c.session.pending(r), token).is_ok() {
                c.sending = true;
            } else {
                self.close(token);
            }
            return;
        }
        if c.session.should_close() || c.eof {
            self.close(token);
            return;
        }
        if !c.recv_active {
            self.arm_recv(token);
        }
    }

    fn close(&mut self, token: u64) {
        if let Some(c) = self.conns.remove(token) {
            self.count.requests += c.session.requests();
            // Cancels the recv (and a send) on it, then closes it; if even that cannot be
            // queued, the descriptor is closed at once.
            let _ = self.ring.close(c.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_feature_is_one_line_naming_it_and_the_fallback() {
        let e = unsupported(Unsupported {
            feature: "provided buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19)",
            source: io::Error::from_raw_os_error(socklab_sys::errno::EINVAL),
        })
        .to_string();
        assert!(e.contains("IORING_REGISTER_PBUF_RING"), "{e}");
        assert!(e.contains("`design` epoll"), "{e}");
        assert!(!e.contains('\n'));
    }
}
