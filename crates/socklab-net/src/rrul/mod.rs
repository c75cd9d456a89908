//! Latency under load (`socklab rrul`, flent's "Realtime Response Under Load", socklab's
//! way): over one path, TCP and UDP ping-pong probes at a fixed rate, first alone (the idle
//! phase), then beside `streams` TCP streams each way (the loaded phase: a `BULK/2` bidir test
//! of [`crate::bulk`], the same code as `socklab bulk --bidir`). The probes run from the start
//! of the repetition to the end of the loaded test, on threads of their own; each probe is
//! placed in a phase by the time it was sent: the idle phase is `[0, idle)`, the loaded phase
//! the bulk test's `duration` from its start (the barrier after every stream connected).
//!
//! The statistics (percentiles per phase, the latency added, loss) are in [`log`], pure.

pub mod log;
pub mod probe;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::bulk::{BulkConfig, BulkResult, Flow, Limit};
use crate::series::Sampling;
use crate::NetError;
use log::{ProbeLog, Schedule};
use probe::Prober;

/// Shortest probe interval.
pub const MIN_PROBE_INTERVAL: Duration = Duration::from_millis(1);

/// Longest idle or loaded phase.
pub const MAX_PHASE: Duration = Duration::from_secs(3600);

/// Everything that defines one rrul repetition.
#[derive(Debug, Clone)]
pub struct RrulConfig {
    /// The TCP echo server of the probes.
    pub tcp_echo: SocketAddr,
    /// The UDP echo server of the probes.
    pub udp_echo: SocketAddr,
    /// The loaded phase: a bidir bulk test against a sink (its `to`, `streams`, `cc`, limit
    /// and sampling are this test's).
    pub bulk: BulkConfig,
    /// The idle phase's length.
    pub idle: Duration,
    /// Time between probes (of each kind).
    pub probe_interval: Duration,
    /// An answer later than this is late (UDP: lost); also how long the probers wait for the
    /// outstanding answers after the last probe.
    pub probe_timeout: Duration,
}

impl RrulConfig {
    /// A configuration with `socklab rrul`'s defaults against these servers.
    pub fn new(sink: SocketAddr, tcp_echo: SocketAddr, udp_echo: SocketAddr) -> RrulConfig {
        RrulConfig {
            tcp_echo,
            udp_echo,
            bulk: BulkConfig {
                streams: 4,
                flow: Flow::Bidir,
                limit: Limit::Duration(Duration::from_secs(10)),
                sampling: Sampling {
                    interval: Some(Duration::from_millis(200)),
                    omit: None,
                },
                ..BulkConfig::new(sink)
            },
            idle: Duration::from_secs(2),
            probe_interval: Duration::from_millis(100),
            probe_timeout: Duration::from_secs(5),
        }
    }

    /// The loaded phase's length.
    pub fn duration(&self) -> Duration {
        match self.bulk.limit {
            Limit::Duration(d) => d,
            _ => Duration::ZERO,
        }
    }

    /// Checks the parameters, naming the bad value and the fix.
    pub fn validate(&self) -> Result<(), NetError> {
        let bad = |m: String| Err(NetError::Invalid(m));
        if self.probe_interval.is_zero() {
            return bad(
                "`probe_interval` 0s: probes need time between them, e.g. `probe_interval` 100ms"
                    .into(),
            );
        }
        if self.probe_interval < MIN_PROBE_INTERVAL {
            return bad("`probe_interval`: use 1ms or more, e.g. `probe_interval` 100ms".into());
        }
        if self.probe_timeout.is_zero() {
            return bad("`probe_timeout` 0s: wait some time for an answer, e.g. 5s".into());
        }
        if self.idle > MAX_PHASE {
            return bad("`idle`: at most 1h".into());
        }
        match self.bulk.limit {
            Limit::Duration(d) if d.is_zero() => {
                return bad(
                    "`duration` 0s: the loaded phase needs some time, e.g. `duration` 10s".into(),
                )
            }
            Limit::Duration(d) if d > MAX_PHASE => return bad("`duration`: at most 1h".into()),
            Limit::Duration(_) => {}
            _ => return bad("rrul's loaded phase is bounded by `duration`".into()),
        }
        if self.bulk.flow != Flow::Bidir {
            return bad("rrul's loaded phase runs streams both ways".into());
        }
        self.bulk.validate()
    }
}

/// What one rrul repetition measured.
#[derive(Debug, Clone)]
pub struct RrulResult {
    /// The TCP probes.
    pub tcp: ProbeLog,
    /// The UDP probes.
    pub udp: ProbeLog,
    /// The loaded phase's streams (bytes each way, `TCP_INFO`, the time series).
    pub bulk: BulkResult,
    /// The idle phase, since the start of the repetition.
    pub idle: (Duration, Duration),
    /// The loaded phase, since the start of the repetition (the streams' start + duration).
    pub loaded: (Duration, Duration),
    /// Where the streams' time zero is on the repetition's clock.
    pub bulk_offset: Duration,
    /// Congestion control of the TCP probe connection, read back.
    pub probe_cc: String,
    /// How long the repetition ran, start to the last probe collected.
    pub elapsed: Duration,
}

/// Runs one repetition: connects the probes, probes alone for `idle`, then beside the bulk
/// test, then collects the outstanding answers. `stop()` is polled at least every 100 ms.
pub fn run(cfg: &RrulConfig, stop: &dyn Fn() -> bool) -> Result<RrulResult, NetError> {
    cfg.validate()?;
    let (tcp, probe_cc) = probe::connect_tcp(cfg.tcp_echo, &cfg.bulk.cc, cfg.bulk.connect_timeout)?;
    let udp = probe::bind_udp(cfg.udp_echo)?;
    let finish = AtomicBool::new(false);
    let halt = AtomicBool::new(false);
    let start = Instant::now();
    let prober = |to| Prober {
        to,
        schedule: Schedule {
            interval: cfg.probe_interval,
        },
        start,
        finish: &finish,
        bound: cfg.probe_timeout,
        halt: &halt,
    };
    let (tcp_p, udp_p) = (prober(cfg.tcp_echo), prober(cfg.udp_echo));
    std::thread::scope(|s| {
        let spawn = |name: &str| std::thread::Builder::new().name(name.into());
        let t = spawn("rrul-tcp")
            .spawn_scoped(s, || tcp_p.run_tcp(tcp))
            .map_err(|e| NetError::io("starting the TCP prober", e));
        let u = spawn("rrul-udp")
            .spawn_scoped(s, || udp_p.run_udp(udp))
            .map_err(|e| NetError::io("starting the UDP prober", e));
        let loaded = match (&t, &u) {
            (Ok(_), Ok(_)) => load(cfg, start, stop, &finish),
            _ => Err(NetError::Invalid("a prober did not start".into())),
        };
        finish.store(true, Ordering::SeqCst);
        if matches!(loaded, Err(NetError::Interrupted)) {
            halt.store(true, Ordering::SeqCst);
        }
        let join = |h: Result<std::thread::ScopedJoinHandle<'_, _>, NetError>| {
            h?.join()
                .unwrap_or_else(|_| Err(NetError::Invalid("a prober panicked".into())))
        };
        let (tcp, udp) = (join(t), join(u));
        let bulk = loaded?;
        let (tcp, udp) = (tcp?, udp?);
        let t0 = bulk.started.unwrap_or(start);
        let offset = t0.saturating_duration_since(start);
        Ok(RrulResult {
            tcp,
            udp,
            idle: (Duration::ZERO, cfg.idle),
            loaded: (offset, offset + cfg.duration()),
            bulk_offset: offset,
            bulk,
            probe_cc,
            elapsed: start.elapsed(),
        })
    })
}

/// The idle wait, then the loaded phase; the probers stop when the test ends.
fn load(
    cfg: &RrulConfig,
    start: Instant,
    stop: &dyn Fn() -> bool,
    finish: &AtomicBool,
) -> Result<BulkResult, NetError> {
    while start.elapsed() < cfg.idle {
        if stop() {
            return Err(NetError::Interrupted);
        }
        std::thread::sleep((cfg.idle - start.elapsed()).min(probe::WAKE));
    }
    let r = crate::bulk::run(&cfg.bulk, stop);
    finish.store(true, Ordering::SeqCst);
    r
}
