//! HTTPS (and TLS echo) on the event designs: rustls' sans-IO [`ServerConnection`] driven by
//! the non-blocking loops of `event` (epoll, epoll-shared, epoll-exclusive, reuseport), and the
//! refusal accounting every TLS design shares (tokio's connections use tokio-rustls, in
//! `tokio_rt`).
//!
//! Hostile peers: a client that does not speak TLS (a plain `GET`, garbage) fails rustls'
//! record check on its first bytes: the connection is closed, counted in
//! [`TlsCtx::refused`], and the first few refusals are logged as one line each. A handshake
//! that stalls is closed by the design's idle timeout (a handshake answers no request, so it is
//! no progress; `serve` refuses `idle_timeout` off with TLS, so the bound always holds) and
//! counted. A client that leaves during its handshake (a connect probe, a load generator's
//! end) is not a refusal and is not counted. At most
//! [`MAX_HANDSHAKING`] connections per server may be handshaking at once: one more is closed
//! at accept (counted as refused), so a flood of unfinished handshakes costs bounded memory.

use std::io::{self, Read, Write};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use rustls::{ServerConfig, ServerConnection};
use socklab_sys::epoll;

use super::{Replies, Session};

/// Most connections handshaking at once, per server.
pub const MAX_HANDSHAKING: usize = 4096;
/// Refusals logged on stderr (then only counted).
const LOGGED: u64 = 5;

/// The TLS side of a server: its configuration and its refusal counts.
#[derive(Debug)]
pub struct TlsCtx {
    /// rustls' server configuration (certificate, versions, ALPN).
    pub config: Arc<ServerConfig>,
    /// Connections refused: not TLS, a failed handshake, a stalled handshake, over the cap.
    pub refused: AtomicU64,
    /// Connections handshaking now.
    pub handshaking: AtomicUsize,
    /// Log the first refusals on stderr.
    log: bool,
}

impl TlsCtx {
    /// A context for `config`.
    pub fn new(config: Arc<ServerConfig>, log: bool) -> TlsCtx {
        TlsCtx {
            config,
            refused: AtomicU64::new(0),
            handshaking: AtomicUsize::new(0),
            log,
        }
    }

    /// Counts a refused connection and logs the first few, one line each.
    pub fn refuse(&self, why: &str) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if self.log && n <= LOGGED {
            eprintln!(
                "socklab serve: TLS connection refused: {why}{}",
                if n == LOGGED {
                    " (further refusals are only counted)"
                } else {
                    ""
                }
            );
        }
    }

    /// Takes a handshake slot; false (and counted) when [`MAX_HANDSHAKING`] are in use.
    pub fn begin_handshake(&self) -> bool {
        if self.handshaking.fetch_add(1, Ordering::Relaxed) >= MAX_HANDSHAKING {
            self.handshaking.fetch_sub(1, Ordering::Relaxed);
            self.refuse(&format!("{MAX_HANDSHAKING} handshakes already in progress"));
            return false;
        }
        true
    }

    /// Gives a handshake slot back.
    pub fn end_handshake(&self) {
        self.handshaking.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One event-loop connection's TLS state.
#[derive(Debug)]
pub(super) struct TlsConn {
    conn: ServerConnection,
    /// Decrypted input the session has not consumed yet.
    plain: Vec<u8>,
    /// Still handshaking (holds a slot of [`TlsCtx::handshaking`]).
    pub(super) handshaking: bool,
}

/// What the connection needs next (as `event`'s status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    Read,
    Write,
    Close,
}

struct FdIo<'a>(BorrowedFd<'a>);

impl Read for FdIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        epoll::recv(self.0, buf)
    }
}

impl Write for FdIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        epoll::send(self.0, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsConn {
    /// A new server connection, or None (refused) when over the handshake cap or rustls fails.
    pub(super) fn accept(ctx: &TlsCtx) -> Option<TlsConn> {
        if !ctx.begin_handshake() {
            return None;
        }
        match ServerConnection::new(ctx.config.clone()) {
            Ok(conn) => Some(TlsConn {
                conn,
                plain: Vec::new(),
                handshaking: true,
            }),
            Err(e) => {
                ctx.end_handshake();
                ctx.refuse(&e.to_string());
                None
            }
        }
    }

    /// Gives back the handshake slot of a connection closed while handshaking.
    pub(super) fn release(&mut self, ctx: &TlsCtx) {
        if self.handshaking {
            self.handshaking = false;
            ctx.end_handshake();
        }
    }

    /// The socket is readable (`readable`) or writable: reads one batch of records, decrypts,
    /// runs the session, encrypts its replies and sends them.
    pub(super) fn ready(
        &mut self,
        ctx: &TlsCtx,
        s: &mut Session,
        r: &Replies,
        fd: BorrowedFd<'_>,
        readable: bool,
        buf: &mut [u8],
    ) -> Next {
        if readable {
            match self.conn.read_tls(&mut FdIo(fd)) {
                Ok(0) => return Next::Close,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
            if let Err(e) = self.conn.process_new_packets() {
                // Send the alert if it fits, then close: a plain-HTTP client or garbage.
                let _ = self.conn.write_tls(&mut FdIo(fd));
                ctx.refuse(&e.to_string());
                self.release(ctx);
                return Next::Close;
            }
            if self.handshaking && !self.conn.is_handshaking() {
                self.release(ctx);
            }
            loop {
                match self.conn.reader().read(buf) {
                    Ok(0) => {
                        // close_notify: answer what came before it, then close.
                        self.serve(s, r);
                        let _ = self.flush(fd);
                        return Next::Close;
                    }
                    Ok(n) => self.plain.extend_from_slice(&buf[..n]),
                    Err(_) => break, // WouldBlock: no more plaintext for now
                }
            }
        }
        loop {
            let close = self.serve(s, r);
            match self.flush(fd) {
                Next::Read => {}
                other => return other,
            }
            if close {
                return Next::Close;
            }
            if !s.has_pending() {
                return Next::Read;
            }
        }
    }

    /// Runs the session over the plaintext, writing replies into rustls until its buffer is
    /// full; true when the session says close (and its last reply is in rustls).
    fn serve(&mut self, s: &mut Session, r: &Replies) -> bool {
        let mut off = 0;
        loop {
            while s.has_pending() {
                match self.conn.writer().write(s.pending(r)) {
                    Ok(0) | Err(_) => {
                        self.plain.drain(..off);
                        return false;
                    }
                    Ok(n) => s.sent(n, r),
                }
            }
            if s.should_close() {
                self.plain.drain(..off);
                return true;
            }
            if off == self.plain.len() {
                break;
            }
            let c = s.receive(&self.plain[off..]);
            off += c;
            if c == 0 && !s.has_pending() {
                break;
            }
        }
        self.plain.drain(..off);
        false
    }

    /// Sends what rustls holds: `Write` when the socket is full, `Close` on an error.
    fn flush(&mut self, fd: BorrowedFd<'_>) -> Next {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut FdIo(fd)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Write,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        Next::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes_past_the_cap_are_refused_and_counted_and_slots_come_back() {
        let id = socklab_tls::Identity::self_signed(&[]).unwrap();
        let cfg = socklab_tls::server_config(&id, socklab_tls::TlsVersion::Tls13, &[]).unwrap();
        let ctx = TlsCtx::new(cfg, false);
        for _ in 0..MAX_HANDSHAKING {
            assert!(ctx.begin_handshake());
        }
        assert!(!ctx.begin_handshake());
        assert_eq!(ctx.refused.load(Ordering::Relaxed), 1);
        ctx.end_handshake();
        let mut c = TlsConn::accept(&ctx).expect("a slot came back");
        assert!(TlsConn::accept(&ctx).is_none());
        c.release(&ctx);
        c.release(&ctx); // twice gives back once
        assert_eq!(ctx.handshaking.load(Ordering::Relaxed), MAX_HANDSHAKING - 1);
    }
}
