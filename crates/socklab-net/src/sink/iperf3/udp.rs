//! The sink's UDP socket for iperf3's UDP tests (`iperf3 -u`, issue 27 part 1), around the
//! sans-IO table and accounting of [`crate::iperf3::udp`].
//!
//! One UDP socket, on the TCP listener's address and port number, serves the UDP streams of
//! every test: a datagram is told apart by its peer's address (IP and port). It is bound on
//! demand, by the first UDP test before its `CREATE_STREAMS` (so a client's connect datagram
//! never races the bind), and given back once no UDP test has needed it for [`IDLE_CLOSE`]:
//! the same number stays free for other UDP servers (`socklab sink --udp --port 5001` beside
//! `socklab sink --port 5001`) while no iperf3 UDP test runs. Where it cannot be bound, the UDP
//! test is refused with the reason and the sink goes on.
//!
//! A connect datagram carries no cookie: it is bound to the test, from the same client
//! address, that is connecting its UDP streams. So that this is never ambiguous, a second UDP
//! test from that address waits (before its `CREATE_STREAMS`) until the first has its
//! streams. One reader thread counts all the datagrams; with `reverse`, a thread per test
//! sends its streams' datagrams, paced at the client's `bandwidth` per stream.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use socklab_sys::io::{poll_flags, poll_one};
use socklab_sys::sockopt::{set, IntOpt};
use socklab_sys::usage::{getrusage, Who};

use super::super::{Conn, ConnReport, Mode, Outcome, Shared, TICK};
use super::{take, Test};
use crate::iperf3::options::payload_byte;
use crate::iperf3::proto::{Cookie, Params, State, StreamResult};
use crate::iperf3::results::Ended;
use crate::iperf3::server::STREAMS_TIMEOUT;
use crate::iperf3::udp::{Busy, Header, Table, Verdict, MAX_STREAMS};
use crate::protocol::SinkResult;
use crate::udpbulk::pacer::Pacer;

/// The socket's receive buffer asked for (the kernel may give less).
const RCVBUF: i32 = 4 << 20;
/// Datagrams one stream sends in a row before the others get their turn.
const BURST: u64 = 64;
/// Datagrams read in one turn of the reader before it lets go of the table.
const BATCH: usize = 256;
/// How long the UDP port stays bound with no UDP test.
pub(in crate::sink) const IDLE_CLOSE: Duration = Duration::from_secs(1);

/// The UDP side of the sink's iperf3 service.
#[derive(Debug)]
pub(in crate::sink) struct Udp {
    /// Where UDP tests bind: the listener's address and port.
    addr: SocketAddr,
    /// The socket, while UDP tests need it.
    sock: Mutex<Option<Arc<UdpSocket>>>,
    /// Raised when the socket is bound.
    bound: Condvar,
    table: Mutex<Table>,
    /// Raised when a test's streams are complete or a test is forgotten.
    changed: Condvar,
    /// The origin of the send times the sink writes in its datagrams.
    clock: Instant,
}

impl Udp {
    /// The service of a sink listening on `addr`.
    pub(in crate::sink) fn new(addr: SocketAddr) -> Udp {
        Udp {
            addr,
            sock: Mutex::default(),
            bound: Condvar::new(),
            table: Mutex::default(),
            changed: Condvar::new(),
            clock: Instant::now(),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn slot(&self) -> MutexGuard<'_, Option<Arc<UdpSocket>>> {
        self.sock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The socket, if bound.
    fn socket(&self) -> Option<Arc<UdpSocket>> {
        self.slot().clone()
    }

    /// `test` is over: its streams and their reservation go.
    pub(super) fn forget(&self, test: &Cookie) {
        self.table().forget(test);
        self.changed.notify_all();
    }
}

/// A UDP socket on `addr` (dual-stack for `[::]`), non-blocking, with a large receive buffer.
fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        sock.set_only_v6(false)?;
    }
    sock.bind(&addr.into())?;
    sock.set_nonblocking(true)?;
    if set(sock.as_fd(), IntOpt::SoRcvBufForce, RCVBUF).is_err() {
        let _ = set(sock.as_fd(), IntOpt::SoRcvBuf, RCVBUF);
    }
    Ok(sock.into())
}

/// Starts the reader thread; it ends within a tick of the sink's stop and returns the report
/// of the datagrams counted apart from every test (if any).
pub(in crate::sink) fn spawn(sh: &Arc<Shared>) -> Option<JoinHandle<Option<ConnReport>>> {
    let sh = sh.clone();
    std::thread::Builder::new()
        .name("sink-iperf3-udp".into())
        .spawn(move || read_loop(&sh))
        .ok()
}

/// Reads the socket while it is bound; gives it back after [`IDLE_CLOSE`] without UDP tests.
fn read_loop(sh: &Shared) -> Option<ConnReport> {
    let udp = &sh.iperf3.udp;
    let t0 = Instant::now();
    let mut buf = vec![0u8; 1 << 16];
    let mut idle: Option<(Instant, *const UdpSocket)> = None;
    while !sh.stop.load(Ordering::Relaxed) {
        let sock = {
            let slot = udp.slot();
            match slot.as_ref() {
                Some(s) => s.clone(),
                None => {
                    let _ = udp.bound.wait_timeout(slot, TICK);
                    continue;
                }
            }
        };
        match poll_one(sock.as_fd(), poll_flags::IN, TICK.as_millis() as i32) {
            Ok(0) => {}
            Ok(_) => drain(sh, &sock, &mut buf, BATCH),
            Err(_) => std::thread::sleep(TICK),
        }
        // Idle since when, for this socket (a socket bound anew starts its own count).
        let me = Arc::as_ptr(&sock);
        drop(sock);
        if !udp.table().is_empty() {
            idle = None;
            continue;
        }
        let since = match idle {
            Some((t, s)) if s == me => t,
            _ => idle.insert((Instant::now(), me)).0,
        };
        if since.elapsed() >= IDLE_CLOSE {
            // Under the slot, then the table: a test that binds and opens holds both.
            let mut slot = udp.slot();
            if udp.table().is_empty() {
                *slot = None;
            }
            idle = None;
        }
    }
    let table = udp.table();
    let (s, l) = (table.strangers, table.late);
    let datagrams = s.datagrams + l.datagrams;
    (datagrams > 0).then(|| ConnReport {
        peer: udp.addr,
        mode: Mode::Iperf3UdpApart {
            strangers: s.datagrams,
            late: l.datagrams,
        },
        result: SinkResult {
            bytes: s.bytes + l.bytes,
            reads: datagrams,
            elapsed_ns: t0.elapsed().as_nanos() as u64,
            ..SinkResult::default()
        },
        outcome: Outcome::Complete,
        iperf3: None,
    })
}

/// Reads up to `max` datagrams waiting on the socket and accounts each, holding the table
/// throughout: a datagram read is counted before anyone else may look at the table.
fn drain(sh: &Shared, sock: &UdpSocket, buf: &mut [u8], max: usize) {
    let udp = &sh.iperf3.udp;
    let mut table = udp.table();
    for _ in 0..max {
        let Ok((n, peer)) = sock.recv_from(buf) else {
            break;
        };
        let now = Instant::now();
        match table.datagram(now, peer, &buf[..n]) {
            Verdict::Reply(r) => {
                let _ = sock.send_to(&r, peer);
            }
            Verdict::Joined { test, reply } => {
                let t = sh.iperf3.lock().get(&test).cloned();
                match t.map(|t| t.server().stream_connected(now, &test)) {
                    Some(Ok(id)) => {
                        table.confirm(peer, id);
                        let _ = sock.send_to(&reply, peer);
                        if table.complete(&test) {
                            udp.changed.notify_all();
                        }
                    }
                    _ => table.unbind(peer),
                }
            }
            Verdict::Counted | Verdict::Late | Verdict::Stranger => {}
        }
    }
}

/// The cookie and parameters of a UDP test; `None` for a TCP one.
fn udp_test(test: &Test) -> Option<(Cookie, Params)> {
    let s = test.server();
    let p = s.params().filter(|p| p.udp)?;
    Some((s.cookie()?, p.clone()))
}

/// Ends the test with `SERVER_TERMINATE` and `why`.
fn refuse(c: &mut Conn<'_>, why: String) -> Result<(), Outcome> {
    let _ = c.write_all(&[State::ServerTerminate.byte()]);
    Err(Outcome::Refused(why))
}

/// Before a UDP test's `CREATE_STREAMS`: binds the UDP port if no test holds it, reserves the
/// test's streams and opens it to their connect datagrams, waiting while another UDP test from
/// the same client address connects its own.
pub(super) fn open(c: &mut Conn<'_>, test: &Test) -> Result<(), Outcome> {
    let Some((cookie, p)) = udp_test(test) else {
        return Ok(());
    };
    let udp = &c.sh.iperf3.udp;
    let client = match c.stream.peer_addr() {
        Ok(a) => a.ip(),
        Err(e) => return Err(Outcome::Aborted(e.to_string())),
    };
    let deadline = Instant::now() + STREAMS_TIMEOUT;
    // A second for our own socket to go (below); another program's is not waited for longer.
    let bind_deadline = Instant::now() + Duration::from_secs(1);
    let wide = p.udp_counters_64bit.is_some();
    loop {
        // The slot, then the table: the reader gives the port back holding both.
        let mut slot = udp.slot();
        if slot.is_none() {
            match bind(udp.addr) {
                Ok(s) => {
                    *slot = Some(Arc::new(s));
                    udp.bound.notify_all();
                }
                // Our own socket, given back a moment ago, may linger in a sender thread.
                Err(e)
                    if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < bind_deadline =>
                {
                    drop(slot);
                    c.halted()?;
                    std::thread::sleep(TICK);
                    continue;
                }
                Err(e) => {
                    drop(slot);
                    let why = format!(
                        "iperf3 UDP test refused: UDP port {} cannot be bound: {e}",
                        udp.addr.port()
                    );
                    return refuse(c, why);
                }
            }
        }
        let mut table = udp.table();
        drop(slot);
        match table.open(cookie, client, p.parallel, wide, p.reverse) {
            Ok(()) => return Ok(()),
            Err(Busy::Full { in_use }) => {
                drop(table);
                let why = format!(
                    "sink busy: {in_use} iperf3 UDP streams in use, {} asked for, at most {MAX_STREAMS} at once; try again later",
                    p.parallel
                );
                return refuse(c, why);
            }
            Err(Busy::SameAddress) if Instant::now() >= deadline => {
                drop(table);
                let why = format!(
                    "another iperf3 UDP test from {client} was connecting its streams for {} s",
                    STREAMS_TIMEOUT.as_secs()
                );
                return refuse(c, why);
            }
            Err(Busy::SameAddress) => {
                c.halted()?;
                let _ = udp.changed.wait_timeout(table, TICK);
            }
        }
    }
}

/// The streams started: a receiving test's datagrams count from now; a sending test gets its
/// sender thread (a stream of the test, as the control thread's `collect` sees it).
pub(super) fn started(c: &Conn<'_>, test: &Test) {
    let Some((cookie, p)) = udp_test(test) else {
        return;
    };
    let udp = &c.sh.iperf3.udp;
    let streams = udp.table().start(&cookie);
    if !p.reverse {
        return;
    }
    let (Some(sock), Some(arc)) = (udp.socket(), c.sh.iperf3.lock().get(&cookie).cloned()) else {
        return;
    };
    let clock = udp.clock;
    test.run().live += 1;
    let spawned = std::thread::Builder::new()
        .name("sink-iperf3-udp-send".into())
        .spawn(move || send(&arc, &sock, &streams, &p, clock));
    if spawned.is_err() {
        test.run().live -= 1;
    }
}

/// The streams stop: what is queued on the socket is counted first, then a receiving test's
/// figures go to `collect` (a sending test's thread reports its own).
pub(super) fn stopping(c: &Conn<'_>, test: &Test) {
    let Some((cookie, p)) = udp_test(test) else {
        return;
    };
    let udp = &c.sh.iperf3.udp;
    if let Some(sock) = udp.socket() {
        drain(c.sh, &sock, &mut vec![0u8; 1 << 16], 100_000);
    }
    let figures = udp.table().stop(&cookie);
    if p.reverse {
        return;
    }
    let mut run = test.run();
    let start = run.start.map_or_else(Instant::now, |(s, _)| s);
    for (id, rx) in figures {
        let end = rx
            .last
            .map_or(0.0, |l| l.saturating_duration_since(start).as_secs_f64());
        let r = StreamResult {
            id,
            bytes: rx.bytes,
            retransmits: -1,
            jitter: rx.jitter,
            errors: i64::try_from(rx.lost).unwrap_or(i64::MAX),
            packets: i64::try_from(rx.highest).unwrap_or(i64::MAX),
            start_time: 0.0,
            end_time: end,
        };
        // The reader thread serves every test: its CPU is not this test's alone.
        run.done.push(Ended {
            result: r,
            sends: false,
            how: "recv",
            cpu: (Duration::ZERO, Duration::ZERO),
        });
    }
}

/// One stream the sink sends on.
struct Out {
    id: i64,
    peer: SocketAddr,
    pacer: Pacer,
    bytes: u64,
    packets: u64,
    last: Option<Instant>,
}

/// Sends the streams' datagrams, each paced at `bandwidth` (none: as fast as the socket takes
/// them), until the test stops; a `num` or `blockcount` test stops at twice its total at
/// most (UDP may lose some, and the client ends the test only once it has received the total;
/// iperf3's own server sends until `TEST_END`).
fn send(test: &Test, sock: &UdpSocket, streams: &[(i64, SocketAddr)], p: &Params, clock: Instant) {
    let cpu0 = getrusage(Who::Thread);
    let start = test.run().start.map_or_else(Instant::now, |(s, _)| s);
    let wide = p.udp_counters_64bit.is_some();
    let len = p.len as usize;
    let rate = p.bandwidth.unwrap_or(0);
    let total = if p.num > 0 {
        p.num
    } else {
        p.blockcount.saturating_mul(p.len)
    };
    let cap = (total > 0).then(|| total.saturating_mul(2));
    let repeating = p.repeating_payload.is_some_and(|r| r != 0);
    let mut buf: Vec<u8> = (0..len).map(|i| payload_byte(i, repeating)).collect();
    let mut out: Vec<Out> = streams
        .iter()
        .map(|&(id, peer)| Out {
            id,
            peer,
            pacer: Pacer::new(rate, len),
            bytes: 0,
            packets: 0,
            last: None,
        })
        .collect();
    let mut exhausted = false;
    while !test.stop.load(Ordering::SeqCst) {
        let mut blocked = false;
        let elapsed = start.elapsed().as_nanos() as u64;
        for s in out.iter_mut() {
            let due = if rate == 0 {
                BURST
            } else {
                s.pacer.due(elapsed).min(BURST)
            };
            for _ in 0..due {
                if cap.is_some_and(|cap| take(&test.taken, cap, p.len) == 0) {
                    exhausted = true;
                    break;
                }
                let since = clock.elapsed();
                let h = Header {
                    sec: since.as_secs() as u32,
                    usec: since.subsec_micros(),
                    count: s.packets + 1,
                };
                h.write(&mut buf, wide);
                match sock.send_to(&buf, s.peer) {
                    Ok(n) => {
                        s.packets += 1;
                        s.bytes += n as u64;
                        s.last = Some(Instant::now());
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        blocked = true;
                        break;
                    }
                    // Not sent (the number is used again); the pacer moves on.
                    Err(_) => {}
                }
                s.pacer.sent(1);
            }
        }
        if exhausted {
            // The total is sent: wait for TEST_END.
            let run = test.run();
            let _ = test.changed.wait_timeout(run, TICK);
        } else if blocked {
            let _ = poll_one(sock.as_fd(), poll_flags::OUT, 1);
        } else if rate > 0 {
            let next = out.iter().map(|s| s.pacer.next_due_ns()).min().unwrap_or(0);
            let now = start.elapsed().as_nanos() as u64;
            let wait = Duration::from_nanos(next.saturating_sub(now)).min(TICK);
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        }
    }
    let mut cpu = Some(getrusage(Who::Thread).since(&cpu0));
    let mut run = test.run();
    for s in &out {
        let r = StreamResult {
            id: s.id,
            bytes: s.bytes,
            retransmits: -1,
            jitter: 0.0,
            errors: 0,
            packets: i64::try_from(s.packets).unwrap_or(i64::MAX),
            start_time: 0.0,
            end_time: s
                .last
                .map_or(0.0, |l| l.saturating_duration_since(start).as_secs_f64()),
        };
        // The thread's CPU, once: collect sums the streams'.
        let cpu = cpu.take().unwrap_or_default();
        run.done.push(Ended {
            result: r,
            sends: true,
            how: "send",
            cpu: (cpu.user, cpu.sys),
        });
    }
    run.live -= 1;
    drop(run);
    test.changed.notify_all();
}
