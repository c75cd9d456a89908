//! How the sink ends a connection it refused so that the peer reads the refusal, and how far
//! it reads a stream after its test stopped (issue 27 part 4, hostile iperf3 peers).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use socket2::SockRef;

use super::Conn;
use crate::error::is_timeout;

/// How long a refused connection is read (and what it sends dropped) before its close.
const LINGER: Duration = Duration::from_secs(1);
/// Bytes read and dropped at most in that time.
const LINGER_BYTES: usize = 1 << 20;

/// After a refusal was written: FIN, then read and drop what the peer still sends (at most
/// [`LINGER`] and [`LINGER_BYTES`]) so that the close is not a reset, which can make the peer
/// lose the refusal still unread in its receive queue.
pub(super) fn linger(c: &mut Conn<'_>) {
    let _ = c.stream.shutdown(Shutdown::Write);
    let until = Instant::now() + LINGER;
    let mut junk = [0u8; 16 * 1024];
    let mut left = LINGER_BYTES;
    while left > 0 && Instant::now() < until && c.halted().is_ok() {
        match c.stream.read(&mut junk) {
            Ok(0) => break,
            Ok(n) => left = left.saturating_sub(n),
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// A stream its test does not want (a cookie of a test that has all its streams, or is not
/// waiting for any): iperf3's `ACCESS_DENIED`, as iperf3's server answers a connection it
/// does not expect, then the close.
pub(super) fn deny(c: &mut Conn<'_>) {
    let _ = c.stream.write(&crate::iperf3::refusal::access_denied());
    linger(c);
}

/// A receiving stream once its test stopped (`TEST_END`): the bytes the client wrote before
/// may still be on their way (its send queue drains as the sink reads), so the stream reads on
/// until [`DRAIN_QUIET`] passes without a byte; but no further than [`DRAIN_TIME`] and what two
/// socket buffers hold (at least 8 MiB), so that a client that goes on sending after
/// `TEST_END` cannot keep the stream's thread reading.
pub(super) struct Drain {
    left: usize,
    until: Instant,
}

/// A stopped stream that stays this long without a byte has all its client sent.
const DRAIN_QUIET: Duration = Duration::from_millis(20);
/// How long a stopped stream reads at most.
const DRAIN_TIME: Duration = Duration::from_millis(300);

impl Drain {
    pub(super) fn new(s: &TcpStream) -> Drain {
        let sock = SockRef::from(s);
        let bufs = sock.recv_buffer_size().unwrap_or(0) + sock.send_buffer_size().unwrap_or(0);
        let _ = s.set_read_timeout(Some(DRAIN_QUIET));
        Drain {
            left: bufs.saturating_mul(2).max(8 << 20),
            until: Instant::now() + DRAIN_TIME,
        }
    }

    /// The next read's byte count; `None` once the stream is quiet, closed, or the bounds
    /// (bytes, time, the sink's stop) are reached.
    pub(super) fn read(&mut self, c: &mut Conn<'_>, buf: &mut [u8]) -> Option<usize> {
        if self.left == 0 || Instant::now() >= self.until || c.halted().is_err() {
            return None;
        }
        let cap = self.left.min(buf.len());
        match c.stream.read(&mut buf[..cap]) {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                self.left = self.left.saturating_sub(n);
                Some(n)
            }
        }
    }
}
