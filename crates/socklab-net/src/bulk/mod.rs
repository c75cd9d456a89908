//! The bulk client (`socklab bulk`): one or more TCP streams to a sink, each on its own
//! connection and thread, the client sending (up), the sink sending (down, `--reverse`) or both
//! (`--bidir`), with one write strategy on every sending side; it collects both ends' counts.
//!
//! - One stream up, nothing asked of the sink's side: `BULK/1` on one connection (every sink
//!   speaks it): READY, the stream, RESULT.
//! - Socket options (`opts`, in [`crate::sockopt`]'s vocabulary): the client side's on every
//!   stream's connection before connect, the server side's sent in the `BULK/2` request and set
//!   by the sink on each stream's accepted connection; both read back (`getsockopt`) and
//!   compared with what was asked ([`BulkResult::opts_off`]). A test with `opts` always speaks
//!   `BULK/2`, its `baseline` too, so the cells of an `opts` list differ in the options alone.
//! - Anything else: `BULK/2` ([`crate::protocol::multi`]): a control connection names the test
//!   and its streams, each stream joins it on its own connection, and every stream starts at
//!   once (a barrier: every connection got READY, then GO).
//!
//! Timing: each stream's clock starts at the common start (READY, or the barrier) and stops when
//! its receiver has read every byte: the sink's RESULT (`BULK/1`), the sink closing an up stream
//! after reading it to its end, or the client reading a down stream to its end (end to end, like
//! iperf3's receiver figure). The test's total is the bytes of every stream over the span from
//! the start to the last stream's end. The time until the last write returned is kept too
//! (`send_seconds`).
//!
//! Bounds: no call blocks for long. Every socket has send and receive timeouts of [`TICK`];
//! after each tick without progress the loops look at `stop()` (Ctrl-C: [`NetError::Interrupted`]
//! within about 100 ms), at another stream's failure, at the test's deadline
//! ([`BulkConfig::deadline`]: `--duration` plus a grace, or `--timeout`) and at how long the
//! peer has moved nothing ([`STALL`]); either bound ends the test with [`NetError::Timeout`],
//! which the lab stores as a failed repetition.

mod bounds;
pub mod iperf3;
mod result;
mod run;
mod stream;
mod tls;

use std::net::SocketAddr;
use std::time::Duration;

pub use result::{jain_fairness, BulkResult, StreamStats, TlsStats};
pub use run::{run, run_live};

use crate::cpus::CpuList;
use crate::protocol::multi::MAX_STREAMS;
use crate::series::{Direction, Sampling};
use crate::sockopt::{OptSet, Side};
use crate::{NetError, Strategy};

/// When a test ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// After this many rounds of `nbufs` buffers.
    Iterations(u64),
    /// After this much time (checked after every round).
    Duration(Duration),
    /// After this many bytes (rounded up to whole rounds).
    Bytes(u64),
}

/// Largest round (`nbufs × bufsize`) a test may use.
pub const MAX_ROUND_BYTES: usize = 1 << 30;

/// How often a blocked send or receive wakes to look at `stop()` and the deadlines (the
/// socket's `SO_SNDTIMEO`/`SO_RCVTIMEO`; a flowing stream never waits for it).
pub const TICK: Duration = Duration::from_millis(100);

/// The time a `--duration` test may run past its duration before it fails, by default (the
/// sink has to read what the socket buffers still hold): [`BulkConfig::deadline`].
pub const GRACE: Duration = Duration::from_secs(10);

/// A test fails when the sink accepts no byte for this long (it stopped reading, or the link
/// stopped delivering), whatever its limit.
pub const STALL: Duration = Duration::from_secs(30);

/// How long the sink may take to answer READY.
pub const READY_WAIT: Duration = Duration::from_secs(10);

/// How long the sink may take to answer RESULT after the last write, for a test without a
/// deadline (count-limited, no `timeout`).
pub const RESULT_WAIT: Duration = Duration::from_secs(60);

/// Everything that defines one bulk test.
#[derive(Debug, Clone)]
pub struct BulkConfig {
    /// The sink.
    pub to: SocketAddr,
    /// How buffers are written.
    pub strategy: Strategy,
    /// Buffers per round.
    pub nbufs: usize,
    /// Bytes per buffer.
    pub bufsize: usize,
    /// When to stop.
    pub limit: Limit,
    /// Congestion control to set on the sending socket (always set; recorded as read back).
    pub cc: String,
    /// `TCP_NODELAY` on the sender.
    pub nodelay: bool,
    /// `SO_SNDBUF` on the sender (`None`: kernel autotuning).
    pub sndbuf: Option<usize>,
    /// Bytes per `read()` at the sink.
    pub read_size: usize,
    /// Hash the stream on both sides and compare.
    pub verify: bool,
    /// Seed of the payload pattern.
    pub seed: u64,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
    /// The longest the test may take from READY to RESULT, when given (`--timeout`).
    pub timeout: Option<Duration>,
    /// Without `timeout`, how long a `--duration` test may run past its duration
    /// ([`GRACE`], plus the round trips of an emulated link).
    pub grace: Duration,
    /// Interval time series (`--interval`, `--omit`); off by default.
    pub sampling: Sampling,
    /// Streams (connections) per direction (iperf3's `-P`): each its own connection and
    /// thread. `bidir` runs this many each way.
    pub streams: u32,
    /// Which way the streams send.
    pub flow: Flow,
    /// `SO_MAX_PACING_RATE` of every sending socket, bits/s (`None`: unlimited).
    pub pacing_rate: Option<u64>,
    /// CPUs of the client's stream threads, round-robin by stream index.
    pub affinity: Option<CpuList>,
    /// CPUs of the sink's stream threads, round-robin by stream index.
    pub server_affinity: Option<CpuList>,
    /// Socket options of every stream's two ends (`None`: not given; `baseline` is the empty
    /// set, which still speaks `BULK/2`).
    pub opts: Option<OptSet>,
    /// TLS on every stream (`None`: plain TCP): see [`BulkTls`].
    pub tls: Option<BulkTls>,
}

/// TLS on a bulk test's streams (`tls`): rustls in user space on both ends, the sink the
/// server with its certificate of the run. Each stream's handshake follows its READY and is
/// timed apart from the transfer; the control connection stays plain. Only the write
/// strategies that copy from user memory can carry it ([`crate::tlsio::user_space_capable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkTls {
    /// The version offered (1.3 by default).
    pub version: socklab_tls::TlsVersion,
    /// How the client checks the sink's certificate.
    pub trust: socklab_tls::Trust,
}

impl BulkConfig {
    /// The longest the test may take from READY to RESULT before it fails: `timeout` when
    /// given, else `--duration` + `grace` for a duration-limited test; `None` for a
    /// count-limited test without `timeout` (only [`STALL`] and [`RESULT_WAIT`] bound it).
    pub fn deadline(&self) -> Option<Duration> {
        match (self.timeout, self.limit) {
            (Some(t), _) => Some(t),
            (None, Limit::Duration(d)) => Some(d + self.grace),
            (None, _) => None,
        }
    }

    /// Checks the parameters, naming the bad value and the fix.
    pub fn validate(&self) -> Result<(), NetError> {
        let bad = |m: String| Err(NetError::Invalid(m));
        if self.nbufs == 0 {
            return bad("`nbufs` 0: send at least one buffer per round (e.g. `nbufs` 1)".into());
        }
        if self.bufsize == 0 {
            return bad(
                "`bufsize` 0: a buffer needs at least one byte (e.g. `bufsize` 1500)".into(),
            );
        }
        let iov_max = socklab_sys::io::iov_max();
        if self.strategy.uses_iovecs() && self.nbufs > iov_max {
            return bad(format!(
                "`nbufs` {} exceeds IOV_MAX ({iov_max}) for strategy {}: use `nbufs` {iov_max} or less, or `strategy` write/single",
                self.nbufs, self.strategy
            ));
        }
        match self.nbufs.checked_mul(self.bufsize) {
            Some(n) if n <= MAX_ROUND_BYTES => {}
            _ => {
                return bad(format!(
                    "`nbufs` {} x `bufsize` {} is more than 1 GiB per round: use smaller buffers",
                    self.nbufs, self.bufsize
                ))
            }
        }
        match self.limit {
            Limit::Iterations(0) => return bad("`iterations` 0: run at least one round".into()),
            Limit::Bytes(0) => return bad("`bytes` 0: send at least one byte".into()),
            Limit::Duration(d) if d.is_zero() => {
                return bad("`duration` 0s: run for some time, e.g. `duration` 1s".into())
            }
            _ => {}
        }
        match (self.timeout, self.limit) {
            (Some(t), _) if t.is_zero() => {
                return bad("`timeout` 0s: give the test some time, e.g. `timeout` 30s".into())
            }
            (Some(t), Limit::Duration(d)) if t <= d => {
                return bad(format!(
                    "`timeout` {} is not longer than `duration` {}: the test could never finish; give more, e.g. `timeout` {}",
                    socklab_units::format_duration(t),
                    socklab_units::format_duration(d),
                    socklab_units::format_duration(d + GRACE)
                ))
            }
            _ => {}
        }
        if let Err(m) = self.sampling.check(match self.limit {
            Limit::Duration(d) => Some(d),
            _ => None,
        }) {
            return bad(m);
        }
        if self.read_size == 0 || self.read_size > crate::protocol::MAX_READ_SIZE {
            return bad(format!(
                "`read_size` {} is out of range: use 1 to 64M",
                self.read_size
            ));
        }
        if !crate::protocol::multi::is_cc_name(&self.cc) {
            return bad(format!("`cc` '{}' is not a congestion-control name: see /proc/sys/net/ipv4/tcp_available_congestion_control", self.cc));
        }
        let max = MAX_STREAMS / self.flow.ways();
        if self.streams == 0 {
            return bad("`streams` 0: run at least one stream (e.g. `streams` 1)".into());
        }
        if self.streams > max {
            return bad(format!(
                "`streams` {} is more than {max}{}: a test has at most {MAX_STREAMS} connections; use `streams` {max} or fewer",
                self.streams,
                if self.flow == Flow::Bidir { " each way with `bidir`" } else { "" }
            ));
        }
        if let Some(o) = &self.opts {
            if let Some(x) = o.not_on_connected(Side::Server).first() {
                return bad(format!(
                    "opts '{o}': {x} applies to a listener or a connect, but bulk's sink sets server-side options on each stream's accepted connection (its listener serves every test): prefix it client:"
                ));
            }
        }
        if self.tls.is_some() {
            crate::tlsio::user_space_capable(self.strategy).map_err(NetError::Invalid)?;
        }
        if self.pacing_rate.is_some_and(|r| r / 8 == 0) {
            return bad(format!(
                "`pacing_rate` {}: give a rate of at least 8 bits/s, e.g. `pacing_rate` 500M (bits/s), or leave it out for none",
                self.pacing_rate.unwrap_or(0)
            ));
        }
        Ok(())
    }

    /// The number of connections of the test.
    pub fn connections(&self) -> u32 {
        self.streams * self.flow.ways()
    }

    /// Whether the test is the plain one of `BULK/1` (one stream, the client sends, nothing
    /// asked of the sink's side, no TLS): then it speaks `BULK/1`, which every sink understands.
    pub fn is_classic(&self) -> bool {
        self.streams == 1
            && self.flow == Flow::Up
            && self.server_affinity.is_none()
            && self.opts.is_none()
            && self.tls.is_none()
    }

    /// The direction of stream `index` (up streams first).
    pub fn direction_of(&self, index: u32) -> Direction {
        match self.flow {
            Flow::Up => Direction::Up,
            Flow::Down => Direction::Down,
            Flow::Bidir if index < self.streams => Direction::Up,
            Flow::Bidir => Direction::Down,
        }
    }

    /// `SO_MAX_PACING_RATE` in bytes/s.
    pub fn pacing_bytes(&self) -> Option<u64> {
        self.pacing_rate.map(|r| r / 8)
    }

    /// A configuration with the defaults of `socklab bulk` against the sink at `to`.
    pub fn new(to: SocketAddr) -> BulkConfig {
        BulkConfig {
            to,
            strategy: Strategy::Single,
            nbufs: 1,
            bufsize: 128 * 1024,
            limit: Limit::Duration(Duration::from_secs(2)),
            cc: "cubic".into(),
            nodelay: false,
            sndbuf: None,
            read_size: 128 * 1024,
            verify: false,
            seed: 1,
            connect_timeout: Duration::from_secs(5),
            timeout: None,
            grace: GRACE,
            sampling: Sampling::default(),
            streams: 1,
            flow: Flow::Up,
            pacing_rate: None,
            affinity: None,
            server_affinity: None,
            opts: None,
            tls: None,
        }
    }
}

/// Which way a test's streams send (`direction`): the client sends (`up`, as iperf3's
/// default), the sink sends (`down`, iperf3 `-R`), or both at once on separate connections
/// (`bidir`, iperf3 `--bidir`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Flow {
    /// The client sends.
    #[default]
    Up,
    /// The sink sends (`--reverse`).
    Down,
    /// Both, `streams` each way (`--bidir`).
    Bidir,
}

impl Flow {
    /// Every value, in the docs' order.
    pub const ALL: [Flow; 3] = [Flow::Up, Flow::Down, Flow::Bidir];

    /// `up`, `down` or `bidir`.
    pub fn as_str(self) -> &'static str {
        match self {
            Flow::Up => "up",
            Flow::Down => "down",
            Flow::Bidir => "bidir",
        }
    }

    /// Directions a test of this flow runs (2 for bidir).
    pub fn ways(self) -> u32 {
        if self == Flow::Bidir {
            2
        } else {
            1
        }
    }
}

impl std::fmt::Display for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Flow {
    type Err = String;

    fn from_str(s: &str) -> Result<Flow, String> {
        match s.trim() {
            "up" => Ok(Flow::Up),
            "down" | "reverse" => Ok(Flow::Down),
            "bidir" => Ok(Flow::Bidir),
            other => Err(format!(
                "direction '{other}': use up, down (the sink sends) or bidir"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bounds::Bounds;
    use super::*;
    use std::io;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    fn cfg(limit: Limit, timeout: Option<Duration>) -> BulkConfig {
        BulkConfig {
            bufsize: 1000,
            limit,
            read_size: 1000,
            timeout,
            ..BulkConfig::new(SocketAddr::from(([127, 0, 0, 1], 5001)))
        }
    }

    fn ago(secs: u64) -> Instant {
        Instant::now()
            .checked_sub(Duration::from_secs(secs))
            .expect("the clock runs long enough")
    }

    fn tick() -> io::Error {
        io::ErrorKind::WouldBlock.into()
    }

    /// Each bound of [`Bounds::wait`] gives up with its own reason, in order: Ctrl-C, the
    /// deadline, the stall, the phase's limit; real errors pass through.
    #[test]
    fn bounds_give_up_for_each_reason_with_a_message_that_names_it() {
        let c = cfg(Limit::Duration(Duration::from_secs(1)), None);
        let stop = || false;
        let no = AtomicBool::new(false);
        let fresh = |stop| Bounds {
            stop,
            abort: &no,
            t0: Some(Instant::now()),
            deadline: c.deadline(),
            phase: None,
            moved: 4096,
            receiving: false,
            halted: None,
            every: Default::default(),
        };
        let mut b = fresh(&stop);
        assert!(b.wait(tick(), Instant::now()).is_ok());
        assert!(b.wait(io::ErrorKind::Interrupted.into(), ago(1)).is_ok());
        let e = b.wait(io::ErrorKind::ConnectionReset.into(), Instant::now());
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(b.halted, None);

        let yes = || true;
        let mut b = fresh(&yes);
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        assert!(matches!(
            b.error(&c, "sending to", e),
            NetError::Interrupted
        ));

        let mut b = fresh(&stop);
        b.t0 = Some(ago(12));
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        let m = b.error(&c, "sending with single to", e).to_string();
        assert_eq!(
            m,
            "the test did not end within 11s (`duration` 1s + 10s grace) while sending with single to 127.0.0.1:5001, 4096 bytes sent: the sink stopped reading or the link stopped delivering; a slow link needs a longer `timeout`"
        );

        let counted = cfg(Limit::Iterations(10), None);
        assert_eq!(counted.deadline(), None);
        let mut b = fresh(&stop);
        b.deadline = counted.deadline();
        assert!(b.wait(tick(), ago(29)).is_ok());
        let e = b.wait(tick(), ago(31)).unwrap_err();
        let m = b.error(&counted, "sending with single to", e).to_string();
        assert!(m.contains("accepted no data for 30s"), "{m}");

        let mut b = fresh(&stop);
        b.deadline = None;
        b.phase = Some((ago(1), "READY"));
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        let m = b.error(&counted, "waiting for READY from", e).to_string();
        assert!(m.contains("no READY line in time"), "{m}");
        b.phase = Some((ago(1), "RESULT"));
        let m = b
            .error(&counted, "waiting for RESULT from", tick())
            .to_string();
        assert!(
            m.contains("no RESULT from the sink at 127.0.0.1:5001 within 60s of the last write"),
            "{m}"
        );

        let timed = cfg(Limit::Iterations(10), Some(Duration::from_secs(3)));
        assert_eq!(timed.deadline(), Some(Duration::from_secs(3)));
        let mut b = fresh(&stop);
        b.deadline = timed.deadline();
        b.t0 = Some(ago(4));
        let e = b.wait(tick(), Instant::now()).unwrap_err();
        let m = b.error(&timed, "sending with single to", e).to_string();
        assert!(m.contains("did not end within 3s (`timeout` 3s)"), "{m}");
    }

    #[test]
    fn a_timeout_shorter_than_the_duration_is_refused() {
        let e = cfg(
            Limit::Duration(Duration::from_secs(5)),
            Some(Duration::from_secs(5)),
        )
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`timeout` 5s is not longer than `duration` 5s"),
            "{e}"
        );
        let e = cfg(Limit::Iterations(1), Some(Duration::ZERO))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("`timeout` 0s"), "{e}");
    }
}
