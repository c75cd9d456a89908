//! The UDP bulk receiver (`socklab sink --udp`): one socket, `recvmmsg` in batches of 64 with
//! the kernel's arrival time of each datagram (`SO_TIMESTAMPNS`) and the socket's drop counter
//! (`SO_RXQ_OVFL`) and the source address, tests told apart by their id and owned by the source
//! of their first datagram ([`Collector`]). It serves until stopped and hands each finished
//! test's [`TestReport`] to the caller, and a report of each test it refused at once. Every
//! wait is at most 50 ms, so `stop()` is seen within that.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use socklab_sys::io::{poll_flags, poll_one};
use socklab_sys::mmsg::{recv_batch, Meta, MAX_BATCH};
use socklab_sys::sockopt::{set, IntOpt};
use socklab_sys::usage::{getrusage, Usage, Who};

use super::collector::{Collector, Taken, TestReport};
use super::sender::now_ns;
use super::stats::Interval;
use super::wire::MAX_DATAGRAM;
use crate::NetError;

/// How the receiver listens.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Where to bind.
    pub bind: SocketAddr,
    /// `SO_RCVBUF` to ask for (`SO_RCVBUFFORCE` first, so root gets it beyond `rmem_max`).
    pub rcvbuf: usize,
    /// A test without a datagram for this long ends (its FINs were lost).
    pub idle: Duration,
    /// Counts per interval in each report (`None`: no time series).
    pub interval: Option<Duration>,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            rcvbuf: 4 << 20,
            idle: Duration::from_secs(2),
            interval: None,
        }
    }
}

/// What the receiver saw over its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkTotals {
    /// Tests reported.
    pub tests: u64,
    /// Datagrams that were not ours.
    pub malformed: u64,
    /// Stragglers of tests that had ended.
    pub late: u64,
    /// Datagrams of tests refused (too many open, in all or from their source).
    pub refused: u64,
    /// Datagrams of open tests from sources other than their owners (not counted in them).
    pub foreign: u64,
}

/// A bound receiver.
#[derive(Debug)]
pub struct UdpSink {
    sock: UdpSocket,
    cfg: SinkConfig,
    rcvbuf: usize,
}

impl UdpSink {
    /// Binds and sets the receive buffer, arrival times and the drop counter.
    pub fn bind(cfg: SinkConfig) -> Result<UdpSink, NetError> {
        let sock = UdpSocket::bind(cfg.bind).map_err(|e| NetError::bind(cfg.bind, e))?;
        let want = i32::try_from(cfg.rcvbuf).unwrap_or(i32::MAX);
        if set(sock.as_fd(), IntOpt::SoRcvBufForce, want).is_err() {
            socket2::SockRef::from(&sock)
                .set_recv_buffer_size(cfg.rcvbuf)
                .map_err(|source| NetError::SockOpt {
                    option: "rcvbuf",
                    value: cfg.rcvbuf.to_string(),
                    source,
                    hint: String::new(),
                })?;
        }
        for (opt, name) in [
            (IntOpt::SoTimestampNs, "SO_TIMESTAMPNS"),
            (IntOpt::SoRxqOvfl, "SO_RXQ_OVFL"),
        ] {
            set(sock.as_fd(), opt, 1).map_err(|e| NetError::io(name, e))?;
        }
        let rcvbuf = socket2::SockRef::from(&sock)
            .recv_buffer_size()
            .unwrap_or(0);
        Ok(UdpSink { sock, cfg, rcvbuf })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The receive buffer the kernel granted, bytes.
    pub fn rcvbuf(&self) -> usize {
        self.rcvbuf
    }

    /// Receives until `stop()`, handing each finished test to `report` (the tests still open
    /// at the stop too).
    pub fn serve(
        &self,
        stop: &dyn Fn() -> bool,
        report: &mut dyn FnMut(TestReport),
    ) -> Result<SinkTotals, NetError> {
        self.serve_live(stop, report, &mut |_, _, _| {})
    }

    /// [`UdpSink::serve`], also handing each interval a test closes (with `interval` set) to
    /// `interval` as it closes: `(test id, its index in the test, the interval)`. An interval
    /// closes when the first datagram after it arrives; the report still carries them all.
    pub fn serve_live(
        &self,
        stop: &dyn Fn() -> bool,
        report: &mut dyn FnMut(TestReport),
        interval_out: &mut dyn FnMut(u64, usize, &Interval),
    ) -> Result<SinkTotals, NetError> {
        let t0 = Instant::now();
        let mono = || u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let interval = self
            .cfg
            .interval
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let idle = u64::try_from(self.cfg.idle.as_nanos()).unwrap_or(u64::MAX);
        let mut col = Collector::new(idle, interval);
        let slot = MAX_DATAGRAM + 1;
        let mut buf = vec![0u8; MAX_BATCH * slot];
        let mut metas = [Meta::default(); MAX_BATCH];
        // The kernel names every UDP source; a datagram without one counts as this source.
        let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
        let mut drops: Option<u32> = None;
        // Per open test: the drop counter and the CPU time when it opened.
        let mut baselines: Vec<(u64, u32, Usage)> = Vec::new();
        let mut tests = 0u64;
        let finish = |r: TestReport,
                      drops: Option<u32>,
                      baselines: &mut Vec<(u64, u32, Usage)>,
                      tests: &mut u64,
                      report: &mut dyn FnMut(TestReport)| {
            let mut r = r;
            if let Some(i) = baselines.iter().position(|b| b.0 == r.test_id) {
                let (_, d0, u0) = baselines.swap_remove(i);
                r.kernel_drops = u64::from(drops.unwrap_or(0).wrapping_sub(d0));
                let u = getrusage(Who::Process).since(&u0);
                r.user_us = u64::try_from(u.user.as_micros()).unwrap_or(u64::MAX);
                r.sys_us = u64::try_from(u.sys.as_micros()).unwrap_or(u64::MAX);
            }
            *tests += 1;
            report(r);
        };
        while !stop() {
            let wait_ms = match col.next_deadline() {
                Some(d) => (d.saturating_sub(mono()) / 1_000_000).min(50) as i32,
                None => 50,
            };
            poll_one(self.sock.as_fd(), poll_flags::IN, wait_ms)
                .map_err(|e| NetError::io("poll", e))?;
            // Drain what is queued, a bounded number of batches before looking at the clock.
            for _ in 0..64 {
                let n = match recv_batch(self.sock.as_fd(), &mut buf, slot, &mut metas, &mut drops)
                {
                    Ok(n) => n,
                    Err(e) if crate::error::is_timeout(&e) => break,
                    // An ICMP error queued on the socket, or a signal: not the receiver's end.
                    Err(e) if e.raw_os_error() == Some(socklab_sys::errno::ECONNREFUSED) => {
                        continue
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => break,
                    Err(e) => return Err(NetError::io("recvmmsg", e)),
                };
                let now = mono();
                let fallback = now_ns();
                for (i, m) in metas[..n].iter().enumerate() {
                    let d = &buf[i * slot..i * slot + m.len];
                    let from = m.from.unwrap_or(unknown);
                    let taken = col.on_datagram(now, m.kernel_ns.unwrap_or(fallback), from, d);
                    if let Taken::Opened(id) = taken {
                        baselines.push((id, drops.unwrap_or(0), getrusage(Who::Process)));
                    }
                }
                if n < MAX_BATCH {
                    break;
                }
            }
            if interval > 0 {
                for (id, k, i) in col.closed_intervals() {
                    interval_out(id, k, &i);
                }
            }
            // A refused test is told at once, so whoever waits for it need not wait it out.
            for r in col.refusals() {
                report(r);
            }
            for r in col.poll(mono()) {
                finish(r, drops, &mut baselines, &mut tests, report);
            }
        }
        for r in col.refusals() {
            report(r);
        }
        for r in col.stop() {
            finish(r, drops, &mut baselines, &mut tests, report);
        }
        let (malformed, late, refused) = col.strays();
        Ok(SinkTotals {
            tests,
            malformed,
            late,
            refused,
            foreign: col.foreign(),
        })
    }
}
