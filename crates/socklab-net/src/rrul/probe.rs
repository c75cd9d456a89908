//! The live probes: one TCP connection (`TCP_NODELAY`, the congestion control set) and one UDP
//! socket, each probed by a thread of its own at a fixed rate ([`Schedule`]) against an echo
//! server. A probe is [`PROBE_SIZE`] bytes: a magic word and its sequence number. TCP probes
//! are pipelined on the one connection (a probe is due whether or not the one before was
//! answered: the echo returns them in order), so a queue that holds one answer holds the next
//! ones too, as it holds an interactive application's. UDP probes that come back are matched
//! by their sequence number.
//!
//! Bounds: every wait is at most [`WAKE`]; after `finish` is set the thread sends no more and
//! waits for the outstanding answers at most `bound` after the last probe went out, then
//! returns what it has (an unanswered probe is missing, never a hang).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::log::{ProbeLog, Schedule};
use crate::error::is_timeout;
use crate::send::SendOpts;
use crate::NetError;

/// Bytes of one probe: 8 bytes of magic, 8 of sequence number (little-endian), padding.
pub const PROBE_SIZE: usize = 64;

/// The magic word that starts every probe.
const MAGIC: &[u8; 8] = b"SLRRUL01";

/// Longest single wait of a prober (it looks at Ctrl-C and `finish` this often).
pub const WAKE: Duration = Duration::from_millis(100);

/// What a prober needs: where, how often, the shared start and its stop signals.
#[derive(Debug)]
pub struct Prober<'a> {
    /// The echo server.
    pub to: SocketAddr,
    /// When probes are due.
    pub schedule: Schedule,
    /// The start of the repetition (time zero of the log).
    pub start: Instant,
    /// Set when no more probes are to be sent.
    pub finish: &'a AtomicBool,
    /// How long an answer may take before it is late (and how long the prober waits for the
    /// outstanding ones after the last probe).
    pub bound: Duration,
    /// Set on Ctrl-C (by the thread that watches it).
    pub halt: &'a AtomicBool,
}

#[doc(hidden)] // for the fuzz target
pub fn probe(seq: u64) -> [u8; PROBE_SIZE] {
    let mut b = [0u8; PROBE_SIZE];
    b[..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b
}

/// The sequence number of an answer, if it is one of ours.
#[doc(hidden)] // for the fuzz target
pub fn seq_of(b: &[u8]) -> Option<u64> {
    (b.len() == PROBE_SIZE && &b[..8] == MAGIC)
        .then(|| u64::from_le_bytes(b[8..16].try_into().unwrap_or_default()))
}

/// Connects the TCP probe connection: `TCP_NODELAY` (a probe leaves at once) and the
/// congestion control `cc`, set before connect and read back.
pub fn connect_tcp(
    to: SocketAddr,
    cc: &str,
    timeout: Duration,
) -> Result<(TcpStream, String), NetError> {
    let sock = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| NetError::io("socket", e))?;
    SendOpts {
        cc: cc.to_string(),
        nodelay: true,
        sndbuf: None,
        pacing: None,
    }
    .apply(SockRef::from(&sock))?;
    sock.connect_timeout(&to.into(), timeout)
        .map_err(|source| NetError::Connect { addr: to, source })?;
    let applied = crate::send::read_back(SockRef::from(&sock))?;
    let s: TcpStream = sock.into();
    s.set_write_timeout(Some(WAKE))
        .map_err(|e| NetError::io("SO_SNDTIMEO", e))?;
    Ok((s, applied.cc))
}

/// A UDP socket connected to the echo server.
pub fn bind_udp(to: SocketAddr) -> Result<UdpSocket, NetError> {
    let any: SocketAddr = if to.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let s = UdpSocket::bind(any).map_err(|e| NetError::io("bind of the UDP probe socket", e))?;
    s.connect(to)
        .map_err(|e| NetError::io(format!("connect of the UDP probe socket to {to}"), e))?;
    Ok(s)
}

impl Prober<'_> {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// How long to wait now: until the next probe is due, or (finishing) until the answers
    /// stop being awaited; at most [`WAKE`], at least 1 ms. `None` when the prober is done.
    fn wait(&self, log: &ProbeLog, due: Duration, finishing: bool) -> Option<Duration> {
        let now = self.now();
        let until = if finishing {
            if log.outstanding() == 0 {
                return None;
            }
            let end = log.last_sent().unwrap_or_default() + self.bound;
            if now >= end {
                return None;
            }
            end
        } else {
            due
        };
        Some(
            until
                .saturating_sub(now)
                .clamp(Duration::from_millis(1), WAKE),
        )
    }

    /// Runs the TCP probes on `s` until `finish`, then collects the outstanding answers.
    pub fn run_tcp(&self, mut s: TcpStream) -> Result<ProbeLog, NetError> {
        let peer = self.to.to_string();
        let mut log = ProbeLog::default();
        let mut k = 0u64;
        let mut buf = [0u8; PROBE_SIZE];
        let mut filled = 0usize;
        loop {
            if self.halt.load(Ordering::Relaxed) {
                return Err(NetError::Interrupted);
            }
            let finishing = self.finish.load(Ordering::SeqCst);
            let now = self.now();
            if !finishing && now >= self.schedule.due(k) {
                let seq = log.sent(now);
                self.write_all(&mut s, &probe(seq))?;
                let (next, skipped) = self.schedule.next(k, self.now());
                log.skipped += skipped;
                k = next;
                continue;
            }
            let Some(wait) = self.wait(&log, self.schedule.due(k), finishing) else {
                return Ok(log);
            };
            s.set_read_timeout(Some(wait))
                .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
            match s.read(&mut buf[filled..]) {
                Ok(0) => {
                    return Err(NetError::Protocol {
                        peer,
                        detail: "the echo server closed the TCP probe connection".into(),
                    })
                }
                Ok(n) => {
                    filled += n;
                    if filled == PROBE_SIZE {
                        filled = 0;
                        let at = self.now();
                        match seq_of(&buf) {
                            Some(seq) => {
                                log.answered(seq, at);
                            }
                            None => return Err(NetError::Protocol {
                                peer,
                                detail:
                                    "a TCP probe came back changed: is it a socklab echo server?"
                                        .into(),
                            }),
                        }
                    }
                }
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(NetError::io(format!("reading TCP probes from {peer}"), e)),
            }
        }
    }

    /// Writes one probe, waiting at most `bound` for room (a send buffer that stays full that
    /// long means the echo server stopped reading).
    fn write_all(&self, s: &mut TcpStream, mut b: &[u8]) -> Result<(), NetError> {
        let t0 = Instant::now();
        while !b.is_empty() {
            match s.write(b) {
                Ok(n) => b = &b[n..],
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                    if self.halt.load(Ordering::Relaxed) {
                        return Err(NetError::Interrupted);
                    }
                    if t0.elapsed() > self.bound {
                        return Err(NetError::Timeout(format!(
                            "a TCP probe to {} found no room in the send buffer for {:?}: the echo server stopped reading",
                            self.to, self.bound
                        )));
                    }
                }
                Err(e) => {
                    return Err(NetError::io(
                        format!("sending a TCP probe to {}", self.to),
                        e,
                    ))
                }
            }
        }
        Ok(())
    }

    /// Runs the UDP probes on `s` until `finish`, then collects the outstanding answers.
    pub fn run_udp(&self, s: UdpSocket) -> Result<ProbeLog, NetError> {
        let mut log = ProbeLog::default();
        let mut k = 0u64;
        let mut buf = [0u8; 2 * PROBE_SIZE];
        loop {
            if self.halt.load(Ordering::Relaxed) {
                return Err(NetError::Interrupted);
            }
            let finishing = self.finish.load(Ordering::SeqCst);
            let now = self.now();
            if !finishing && now >= self.schedule.due(k) {
                let seq = log.sent(now);
                match s.send(&probe(seq)) {
                    // A probe the kernel could not send is a lost probe (it stays unanswered).
                    Ok(_) => {}
                    Err(e) if is_send_drop(&e) => {}
                    Err(e) => {
                        return Err(NetError::io(
                            format!("sending a UDP probe to {}", self.to),
                            e,
                        ))
                    }
                }
                let (next, skipped) = self.schedule.next(k, self.now());
                log.skipped += skipped;
                k = next;
                continue;
            }
            let Some(wait) = self.wait(&log, self.schedule.due(k), finishing) else {
                return Ok(log);
            };
            s.set_read_timeout(Some(wait))
                .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
            match s.recv(&mut buf) {
                Ok(n) => {
                    let at = self.now();
                    match seq_of(&buf[..n]) {
                        Some(seq) => {
                            log.answered(seq, at);
                        }
                        None => log.strays += 1,
                    }
                }
                Err(e) if is_timeout(&e) || is_send_drop(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(NetError::io(
                        format!("reading UDP probes from {}", self.to),
                        e,
                    ))
                }
            }
        }
    }
}

/// Errors of a UDP send or receive that mean a datagram was dropped on the way (an ICMP
/// error queued on the socket, a full queue), not that the socket broke.
fn is_send_drop(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(socklab_sys::errno::ENOBUFS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_carries_its_sequence_number_and_nothing_else_passes() {
        assert_eq!(seq_of(&probe(0)), Some(0));
        assert_eq!(seq_of(&probe(123_456_789)), Some(123_456_789));
        let mut b = probe(5);
        b[0] = b'x';
        assert_eq!(seq_of(&b), None);
        assert_eq!(seq_of(&probe(5)[..PROBE_SIZE - 1]), None);
    }
}
