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

/// Bytes a receiving stream still reads once its test stopped: what its socket may hold
/// queued (twice its receive buffer, at least 1 MiB), so that a client that goes on sending
/// after `TEST_END` cannot keep the stream's thread reading.
pub(super) fn drain_bound(s: &TcpStream) -> usize {
    let rcvbuf = SockRef::from(s).recv_buffer_size().unwrap_or(0);
    rcvbuf.saturating_mul(2).max(1 << 20)
}
