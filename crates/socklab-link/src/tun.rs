//! The `tun` driver: a TUN device in each namespace of a [`Namespaces`] pair, and one thread
//! per direction that reads packets from one device, passes them through the impairment model
//! ([`socklab_impair::Emulator`]) and writes them to the other device at their release times.
//!
//! Offloads ([`Offload`], default [`Offload::Tso`]): the devices carry a virtio-net header, so
//! the kernel hands over TCP super-packets of up to 64 KiB with their checksums left to
//! compute. Each is cut into the MTU-sized segments the wire would carry before the model sees
//! it ([`super::vnet::split`]): the model decides per segment, exactly as without offloads.
//! Segments released at the same instant that continue each other are written to the far
//! device as one super-packet again ([`super::vnet::groups`]), as GRO would receive them.
//!
//! The model sees each segment's own IP header, so a queue discipline hashes it to its flow
//! and `ecn` marks it CE (with its IPv4 header checksum updated); a marked segment differs
//! from its neighbours in TOS/traffic class and is never joined with them.
//!
//! Hot path per read: one `read` into a reused buffer, a copy of each segment into a recycled
//! buffer, the model, one `write`/`writev` per released run. Each packet's release lag is
//! measured from its own due time ([`Emulator::poll_release`]). With `--capture` the model's
//! observer is on and its events go to the capture's [`Tracker`]; otherwise it stays off. A thread sleeps in `ppoll` until
//! a packet arrives, the next release time or a wake-up (a new spec, a capture window, stop),
//! with nanosecond resolution.

use std::fs::File;
use std::io::IoSlice;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use socklab_impair::{Emulator, LinkSpec, Stats};
use socklab_sys::netns::{read_append, thread_sched, wait_readable_or_woken, Waker};

use super::capture::{CaptureTap, Tracker};
use super::ns::{ip, Namespaces, Side, PREFIX};
use super::timing::{LagHist, Levers, SchedClass, SpinSizer, ValidRule, FIFO_PRIORITY};
use super::vnet::{self, VnetHdr, GSO_TCPV4, GSO_TCPV6, HDR_LEN};
use super::{DirReport, LinkReport};
use crate::LinkError;

pub use super::offload::{Offload, OFFLOAD_ENV};

/// The TUN device's name in both namespaces.
pub const TUN_NAME: &str = "sl-tun";
/// Default MTU of the emulated link (Ethernet's).
pub const DEFAULT_MTU: u32 = 1500;
/// Longest sleep of a forwarding thread (it is woken for a new spec, a mark or stop; this only
/// bounds how stale an idle link's published counters can be).
const MAX_SLEEP: Duration = Duration::from_millis(200);
/// Reads per wake-up before releasing due packets.
const READ_BATCH: usize = 64;
/// Segments admitted per wake-up before releasing due packets (with TSO, one or two
/// super-packets): 64 gave the same or more throughput than 128 and the least release lag
/// with no impairment (mean 8 µs against 14 µs, and 81–91 µs with 512; docs/benchmarks.md).
const SEGMENT_BATCH: usize = 64;
/// A read batch ends once a release is this overdue: the batch then waits, not the packet.
const BATCH_LAG: Duration = Duration::from_micros(100);
/// Largest packet read from a device with offloads: a 64 KiB super-packet and its header.
const READ_BUF: usize = HDR_LEN + 65_536 + 256;

struct Direction {
    /// Bumped when `next_spec` holds a new spec.
    generation: AtomicU64,
    next_spec: Mutex<Option<(LinkSpec, u64)>>,
    report: Mutex<DirReport>,
    tid: AtomicU32,
    /// Capture window packets arriving now belong to (see [`TunLink::mark`]).
    want_run: AtomicU32,
    /// Bumped by each mark; the thread answers with its counters at that instant.
    mark_seq: AtomicU64,
    boundary: Mutex<Option<(u64, DirReport)>>,
    waker: Waker,
    /// A packet released later than this (ns) counts as late ([`ValidRule::lag_ns`]).
    tolerance_ns: AtomicU64,
    /// The thread's scheduling class ([`SchedClass::code`]).
    sched: AtomicU8,
}

impl Direction {
    fn new(spec: LinkSpec, seed: u64) -> Result<Direction, LinkError> {
        Ok(Direction {
            generation: AtomicU64::new(0),
            next_spec: Mutex::new(Some((spec, seed))),
            report: Mutex::new(DirReport::default()),
            tid: AtomicU32::new(0),
            want_run: AtomicU32::new(0),
            mark_seq: AtomicU64::new(0),
            boundary: Mutex::new(None),
            waker: Waker::new().map_err(|e| LinkError::io("eventfd", e))?,
            tolerance_ns: AtomicU64::new(ValidRule::default().lag_ns),
            sched: AtomicU8::new(SchedClass::Unknown.code()),
        })
    }

    /// The published counters with the thread's CPU time so far.
    fn with_cpu(&self, mut r: DirReport) -> DirReport {
        // The class is the thread's from its start, before it first publishes a report.
        r.sched = SchedClass::from_code(self.sched.load(Ordering::Acquire));
        let tid = self.tid.load(Ordering::Acquire);
        if tid != 0 {
            if let Some((cpu, wait)) = thread_sched(tid) {
                r.cpu_ns = cpu.as_nanos() as u64;
                r.runq_wait_ns = Some(wait.as_nanos() as u64);
            }
        }
        r
    }
}

/// A running TUN link.
#[derive(Debug)]
pub struct TunLink {
    dirs: [Arc<Direction>; 2],
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    offload: Offload,
    levers: Levers,
}

impl std::fmt::Debug for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direction").finish_non_exhaustive()
    }
}

fn open_in(ns: &Namespaces, side: Side, mtu: u32, offload: Offload) -> Result<File, LinkError> {
    let guard = ns.enter(side)?;
    let dev = socklab_sys::netns::open_tun_with(TUN_NAME, offload.options()).map_err(|e| {
        LinkError::Link(format!(
            "cannot create the TUN device in {}: {e} (is /dev/net/tun there? modprobe tun)",
            ns.name(side)
        ))
    })?;
    // No IPv6 on the link: router solicitations and MLD reports would cross the emulator and
    // blur its counts. /proc/sys/net is the opening thread's namespace: we are inside.
    let _ = std::fs::write(
        format!("/proc/sys/net/ipv6/conf/{TUN_NAME}/disable_ipv6"),
        "1",
    );
    drop(guard);
    let name = ns.name(side);
    let mtu_s = mtu.to_string();
    ip(&["-n", &name, "link", "set", TUN_NAME, "mtu", &mtu_s, "up"])?;
    let addr = format!("{}/{PREFIX}", side.addr());
    ip(&["-n", &name, "addr", "add", &addr, "dev", TUN_NAME])?;
    Ok(dev)
}

/// Nanoseconds since the Unix epoch now.
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl TunLink {
    /// Creates the TUN devices in `ns` (client `10.77.0.1`, server `10.77.0.2`) and starts
    /// forwarding: `forward` impairs client → server, `backward` server → client (seeded
    /// `seed` and `seed + 1`). `mtu` is checked by the caller ([`super::check_mtu`]). With
    /// `capture`, every packet is recorded ([`super::capture`]).
    pub fn start(
        ns: &Namespaces,
        forward: LinkSpec,
        backward: LinkSpec,
        seed: u64,
        mtu: u32,
        capture: Option<CaptureTap>,
    ) -> Result<TunLink, LinkError> {
        let offload = Offload::from_env()?;
        let levers = Levers::from_env()?;
        // Process-wide and kept for its life (munlockall would unlock another link's pages).
        let mlocked = levers.mlock && socklab_sys::sched::lock_memory().is_ok();
        let client = open_in(ns, Side::Client, mtu, offload)?;
        let server = open_in(ns, Side::Server, mtu, offload)?;
        let dirs = [
            Arc::new(Direction::new(forward, seed)?),
            Arc::new(Direction::new(backward, seed.wrapping_add(1))?),
        ];
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let epoch_wall = wall_ns();
        let client2 = client
            .try_clone()
            .map_err(|e| LinkError::io("dup TUN descriptor", e))?;
        let server2 = server
            .try_clone()
            .map_err(|e| LinkError::io("dup TUN descriptor", e))?;
        let mut threads = Vec::new();
        for (i, (rx, tx)) in [(client, server), (server2, client2)]
            .into_iter()
            .enumerate()
        {
            let dir = dirs[i].clone();
            let stop = stop.clone();
            let name = if i == 0 { "sl-link-c2s" } else { "sl-link-s2c" };
            let tap = capture.clone();
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let tracker = tap
                        .as_ref()
                        .map(|t| Tracker::new(i, t.snaplen(), epoch_wall));
                    Forwarder {
                        rx: &rx,
                        tx: &tx,
                        dir: &dir,
                        epoch,
                        mtu: mtu as usize,
                        offload,
                        levers,
                        mlocked,
                        capture: tap.zip(tracker),
                        segs: Vec::new(),
                        runs: Vec::new(),
                        failed: Vec::new(),
                    }
                    .run(&stop)
                })
                .map_err(|e| LinkError::io("spawn link thread", e))?;
            threads.push(t);
        }
        // The threads name themselves (tid) and their scheduling class first thing: wait for
        // that (bounded), so a report or a pin right after start sees both, however late a
        // busy machine schedules them.
        let t0 = Instant::now();
        while dirs
            .iter()
            .any(|d| d.sched.load(Ordering::Acquire) == SchedClass::Unknown.code())
            && t0.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(TunLink {
            dirs,
            stop,
            threads,
            offload,
            levers,
        })
    }

    /// The levers the release threads were started with.
    pub fn levers(&self) -> Levers {
        self.levers
    }

    /// Judges release lag by `rule` from now on (a packet later than its lag is late).
    pub fn set_rule(&self, rule: ValidRule) {
        for d in &self.dirs {
            d.tolerance_ns.store(rule.lag_ns, Ordering::Release);
        }
    }

    /// Pins both release threads to `cpus` (see [`super::timing::spare_cpus`]).
    pub fn pin(&self, cpus: &[usize]) -> std::io::Result<()> {
        for d in &self.dirs {
            let tid = d.tid.load(Ordering::Acquire);
            if tid != 0 {
                socklab_sys::sched::set_affinity_of(tid, cpus)?;
            }
        }
        Ok(())
    }

    /// The offload mode the devices run with.
    pub fn offload(&self) -> Offload {
        self.offload
    }

    /// Replaces both directions' impairments; packets already queued are released by the old
    /// model at the times it scheduled.
    pub fn set(&self, forward: LinkSpec, backward: LinkSpec, seed: u64) {
        for (d, (spec, s)) in self
            .dirs
            .iter()
            .zip([(forward, seed), (backward, seed.wrapping_add(1))])
        {
            if let Ok(mut g) = d.next_spec.lock() {
                *g = Some((spec, s));
            }
            d.generation.fetch_add(1, Ordering::Release);
            d.waker.wake();
        }
    }

    /// Counters so far (cumulative since start).
    pub fn report(&self) -> LinkReport {
        let get =
            |d: &Direction| d.with_cpu(d.report.lock().map(|g| g.clone()).unwrap_or_default());
        LinkReport {
            forward: get(&self.dirs[0]),
            backward: get(&self.dirs[1]),
            rule: ValidRule::default(),
        }
    }

    /// Starts capture window `run` (0: outside any window) in both directions and returns the
    /// counters at the instant each thread switched: every packet counted before belongs to
    /// the windows before, every one after to `run`, so a window's counts and its captured
    /// comments agree exactly. Waits for the threads (they are woken; at most 2 s).
    pub fn mark(&self, run: u32) -> LinkReport {
        let seqs: Vec<u64> = self
            .dirs
            .iter()
            .map(|d| {
                d.want_run.store(run, Ordering::Release);
                let s = d.mark_seq.fetch_add(1, Ordering::AcqRel) + 1;
                d.waker.wake();
                s
            })
            .collect();
        let t0 = Instant::now();
        let mut got: [Option<DirReport>; 2] = [None, None];
        while got.iter().any(Option::is_none) && t0.elapsed() < Duration::from_secs(2) {
            for (i, d) in self.dirs.iter().enumerate() {
                if got[i].is_none() {
                    if let Ok(b) = d.boundary.lock() {
                        if let Some((_, r)) = b.as_ref().filter(|(s, _)| *s >= seqs[i]) {
                            got[i] = Some(r.clone());
                        }
                    }
                }
            }
            if got.iter().any(Option::is_none) {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let now = self.report();
        let [f, b] = got;
        LinkReport {
            forward: self.dirs[0].with_cpu(f.unwrap_or(now.forward)),
            backward: self.dirs[1].with_cpu(b.unwrap_or(now.backward)),
            rule: ValidRule::default(),
        }
    }

    /// Stops forwarding and returns the final counters.
    pub fn stop(mut self) -> LinkReport {
        let r = self.report();
        self.halt();
        r
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        for d in &self.dirs {
            d.waker.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for TunLink {
    fn drop(&mut self) {
        self.halt();
    }
}

/// One model and what its packets look like inside it.
struct Model {
    emu: Emulator,
    /// Its number (a link re-specified runs a new model; capture tells packets apart by it).
    id: u32,
    /// Checksums are computed in full on the way in (the model may corrupt packets, and the
    /// receiver must see that); else they stay partial and leave with `NEEDS_CSUM`.
    complete: bool,
}

impl Model {
    /// `observed`: the model records its per-packet events (only when capturing: off, it pays
    /// one untaken branch per decision).
    fn new(spec: LinkSpec, seed: u64, id: u32, observed: bool) -> Model {
        let complete = spec.corrupt > 0.0;
        let mut emu = Emulator::new(spec, seed);
        emu.observe(observed);
        Model { emu, id, complete }
    }
}

/// A released packet on its way out.
struct Out {
    packet: Vec<u8>,
}

impl AsRef<[u8]> for Out {
    fn as_ref(&self) -> &[u8] {
        &self.packet
    }
}

/// Most iovecs of one write: the virtio header, the joined header and the payloads of at most
/// [`vnet::MAX_RUN`] segments.
const MAX_IOV: usize = vnet::MAX_RUN + 2;

/// Counters of the thread besides the model's.
#[derive(Default)]
struct Counts {
    late: u64,
    max_lag: u64,
    lag_sum: u64,
    hist: LagHist,
    write_errors: u64,
}

/// One direction's thread: read `rx`, model, write `tx`.
struct Forwarder<'a> {
    rx: &'a File,
    tx: &'a File,
    dir: &'a Direction,
    epoch: Instant,
    mtu: usize,
    offload: Offload,
    levers: Levers,
    mlocked: bool,
    capture: Option<(CaptureTap, Tracker)>,
    /// Scratch, kept to avoid allocating per read or write.
    segs: Vec<Vec<u8>>,
    runs: Vec<std::ops::Range<usize>>,
    failed: Vec<bool>,
}

impl Forwarder<'_> {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(mut self, stop: &AtomicBool) {
        self.dir
            .tid
            .store(socklab_sys::netns::gettid(), Ordering::Release);
        // Wake on time: release lag would otherwise include the default 50 µs timer slack.
        let _ = socklab_sys::netns::set_timer_slack(1_000);
        // The real-time class where permitted (root): a busy machine cannot then keep the
        // thread waiting for a CPU past a release time. Refused (EPERM): the normal class.
        let fifo = self.levers.fifo
            && socklab_sys::sched::set_fifo(FIFO_PRIORITY).is_ok()
            && socklab_sys::sched::is_fifo();
        let class = if fifo {
            SchedClass::Fifo
        } else {
            SchedClass::Other
        };
        self.dir.sched.store(class.code(), Ordering::Release);
        let mut spin = SpinSizer::new(self.levers.spin_cap);
        self.calibrate(&mut spin);
        let mut generation = u64::MAX;
        let mut models = 0u32;
        let observed = self.capture.is_some();
        let mut cur = Model::new(LinkSpec::default(), 0, 0, observed);
        // Models replaced by a new spec, releasing what they hold on their own schedule: a
        // packet is never delivered early because the link was re-specified (an early SYN
        // would teach TCP a round trip of microseconds, and BBR would then starve the
        // connection).
        let mut draining: Vec<Model> = Vec::new();
        let mut base = Stats::default();
        let mut pool: Vec<Vec<u8>> = Vec::new();
        let mut rbuf: Vec<u8> = Vec::with_capacity(READ_BUF.max(self.mtu + HDR_LEN));
        let mut outs: Vec<Out> = Vec::new();
        let mut hdr = Vec::with_capacity(128);
        let mut c = Counts::default();
        let mut run = 0u32;
        let mut mark_seen = 0u64;
        while !stop.load(Ordering::Acquire) {
            let tol = self.dir.tolerance_ns.load(Ordering::Relaxed);
            let g = self.dir.generation.load(Ordering::Acquire);
            if g != generation {
                generation = g;
                if let Some((spec, seed)) =
                    self.dir.next_spec.lock().ok().and_then(|mut s| s.take())
                {
                    models += 1;
                    draining.push(std::mem::replace(
                        &mut cur,
                        Model::new(spec, seed, models, observed),
                    ));
                    // Maxima are reported since the link was last specified (the lab does
                    // so for every repetition): the worst release lag starts afresh.
                    c.max_lag = 0;
                }
            }
            let m = self.dir.mark_seq.load(Ordering::Acquire);
            if m != mark_seen {
                mark_seen = m;
                run = self.dir.want_run.load(Ordering::Acquire);
                let r = self.publish(&base, &draining, &cur, &c, &spin);
                if let Ok(mut b) = self.dir.boundary.lock() {
                    *b = Some((m, r));
                }
            }
            let next = draining
                .iter()
                .chain(std::iter::once(&cur))
                .filter_map(|m| m.emu.poll_timeout())
                .min();
            // Sleep until the spin window before the next release time, then spin to it.
            let now = self.now();
            let wait = spin.plan(now, next, MAX_SLEEP);
            // A packet already due: just try a non-blocking read, then release it.
            let readable = wait.sleep_ns == 0 || {
                let sleep = Duration::from_nanos(wait.sleep_ns);
                let r = wait_readable_or_woken(self.rx.as_fd(), &self.dir.waker, sleep)
                    .unwrap_or(false);
                // Ended on its timeout (not a packet, not a wake-up): how late it woke.
                let (woke, due) = (self.now(), now + wait.sleep_ns);
                if !r && woke >= due {
                    spin.record(woke - due);
                }
                r
            };
            if readable {
                self.read_batch(&mut cur, &mut pool, &mut rbuf, run, next);
            }
            if let Some(t) = wait.spin_until {
                let n = self.now();
                if n < t && t - n <= spin.window_ns() {
                    while self.now() < t {
                        std::hint::spin_loop();
                    }
                }
            }
            let t = self.now();
            for model in draining.iter_mut().chain(std::iter::once(&mut cur)) {
                // The lag is measured from each packet's own release time (the next time the
                // model names may be one of its internal decisions, not a release).
                while let Some((due, packet)) = model.emu.poll_release(t) {
                    let lag = t.saturating_sub(due);
                    c.lag_sum += lag;
                    c.hist.record(lag);
                    c.max_lag = c.max_lag.max(lag);
                    if lag > tol {
                        c.late += 1;
                    }
                    outs.push(Out { packet });
                }
                self.failed.clear();
                if !outs.is_empty() {
                    c.write_errors += self.write_out(model, &outs, &mut hdr);
                }
                if let Some((tap, tracker)) = self.capture.as_mut() {
                    // The model's decisions since the last arrival (those it takes at its own
                    // times: dequeues, opportunities, slots) and the releases just written.
                    tracker.released(
                        model.id,
                        model.emu.drain_events(),
                        outs.iter()
                            .zip(&self.failed)
                            .map(|(o, &f)| (&o.packet[..], f)),
                        &mut |r| tap.send(r),
                    );
                }
                pool.extend(outs.drain(..).map(|o| o.packet));
            }
            // A drained model's counts join the base.
            draining.retain(|m| {
                let holding = m.emu.poll_timeout().is_some();
                if !holding {
                    // Its worst wait belonged to the spec it ran under (see `max_lag`).
                    base.add_counts(m.emu.stats());
                }
                holding
            });
            let r = self.publish(&base, &draining, &cur, &c, &spin);
            if let Ok(mut g) = self.dir.report.lock() {
                *g = r;
            }
        }
        if let Some((tap, tracker)) = self.capture.as_mut() {
            for r in tracker.finish() {
                tap.send(r);
            }
        }
    }

    /// Sizes the spin window before the first packet: a few short timed sleeps, each
    /// measured (about 1 ms in all; ended early by a packet or a wake-up, not counted).
    fn calibrate(&self, spin: &mut SpinSizer) {
        if spin.window_ns() == 0 && self.levers.spin_cap.is_zero() {
            return;
        }
        const PROBE: Duration = Duration::from_micros(100);
        for _ in 0..8 {
            let t0 = self.now();
            if wait_readable_or_woken(self.rx.as_fd(), &self.dir.waker, PROBE).unwrap_or(true) {
                return;
            }
            let due = t0 + PROBE.as_nanos() as u64;
            let woke = self.now();
            if woke >= due {
                spin.record(woke - due);
            }
        }
    }

    fn publish(
        &self,
        base: &Stats,
        draining: &[Model],
        cur: &Model,
        c: &Counts,
        spin: &SpinSizer,
    ) -> DirReport {
        let mut s = base.clone();
        // A model replaced by a new spec still releases what it holds; its counts join the
        // repetition's, but its worst wait belongs to the spec it ran under (the maximum is
        // reported since the link was last specified): adding it here leaked the previous
        // cell's worst wait into every report taken while it drained.
        for m in draining {
            s.add_counts(m.emu.stats());
        }
        s.add(cur.emu.stats());
        DirReport {
            stats: s,
            late: c.late,
            max_lag_ns: c.max_lag,
            lag_sum_ns: c.lag_sum,
            lag_hist: c.hist.clone(),
            write_errors: c.write_errors,
            wall_ns: self.now(),
            sched: SchedClass::from_code(self.dir.sched.load(Ordering::Relaxed)),
            spin_ns: spin.window_ns(),
            mlocked: self.mlocked,
            ..DirReport::default()
        }
    }

    /// Reads what the device holds (a bounded batch) into the model `m`.
    /// Stops early once a release is more than [`BATCH_LAG`] overdue (`due`: the draining
    /// models' next time; `m`'s own is asked after each read): reading never holds a due
    /// packet back by more than that and one read.
    fn read_batch(
        &mut self,
        m: &mut Model,
        pool: &mut Vec<Vec<u8>>,
        rbuf: &mut Vec<u8>,
        run: u32,
        due: Option<u64>,
    ) {
        let mut admitted = 0;
        let lag = BATCH_LAG.as_nanos() as u64;
        for _ in 0..READ_BATCH {
            if admitted >= SEGMENT_BATCH {
                break;
            }
            if admitted > 0 && self.levers.batch_cap {
                let next = due.into_iter().chain(m.emu.poll_timeout()).min();
                if next.is_some_and(|t| self.now() > t + lag) {
                    break;
                }
            }
            if self.offload == Offload::Off {
                let mut buf = pool.pop().unwrap_or_else(|| Vec::with_capacity(self.mtu));
                buf.clear();
                buf.reserve(self.mtu);
                match read_append(self.rx.as_fd(), &mut buf) {
                    Ok(n) if n > 0 => {
                        self.admit(m, buf, run);
                        admitted += 1;
                    }
                    _ => {
                        pool.push(buf);
                        break;
                    }
                }
                continue;
            }
            rbuf.clear();
            match read_append(self.rx.as_fd(), rbuf) {
                Ok(n) if n > HDR_LEN => {}
                _ => break,
            }
            let Some(h) = VnetHdr::parse(rbuf) else { break };
            let p = &rbuf[HDR_LEN..];
            let gso = h.gso_type & !vnet::GSO_ECN;
            if gso == GSO_TCPV4 || gso == GSO_TCPV6 {
                let mut segs = std::mem::take(&mut self.segs);
                let mtu = self.mtu;
                let split = vnet::split(
                    &h,
                    p,
                    &mut || pool.pop().unwrap_or_else(|| Vec::with_capacity(mtu)),
                    &mut |s| segs.push(s),
                );
                admitted += segs.len();
                for s in segs.drain(..) {
                    self.admit(m, s, run);
                }
                self.segs = segs;
                if split.is_ok() {
                    continue;
                }
            }
            let mut buf = pool.pop().unwrap_or_else(|| Vec::with_capacity(self.mtu));
            buf.clear();
            buf.extend_from_slice(p);
            self.admit(m, buf, run);
            admitted += 1;
        }
    }

    /// Hands one packet to the model (its checksum in the model's form), recording it when
    /// capturing.
    fn admit(&mut self, m: &mut Model, mut buf: Vec<u8>, run: u32) {
        if self.offload != Offload::Off {
            if m.complete {
                vnet::complete_checksum(&mut buf);
            } else {
                vnet::make_partial(&mut buf);
            }
        }
        let t = self.now();
        let Some((tap, tracker)) = self.capture.as_mut() else {
            m.emu.enqueue(t, buf);
            return;
        };
        let a = tracker.begin(run, t, &buf);
        m.emu.enqueue(t, buf);
        tracker.enqueued(a, m.id, m.emu.drain_events(), &mut |r| tap.send(r));
    }

    /// Writes the packets `m` released now (`self.failed` says, per packet, whether its write
    /// failed); returns how many were lost to failed writes.
    fn write_out(&mut self, m: &Model, outs: &[Out], hdr: &mut Vec<u8>) -> u64 {
        if self.offload == Offload::Off {
            for o in outs.iter() {
                let bad = socklab_sys::io::write(self.tx.as_fd(), &o.packet).is_err();
                self.failed.push(bad);
            }
        } else {
            self.runs.clear();
            if self.offload == Offload::Tso && !m.complete {
                vnet::groups_into(outs, &mut self.runs);
            } else {
                self.runs.extend((0..outs.len()).map(|i| i..i + 1));
            }
            for r in &self.runs {
                let run = &outs[r.clone()];
                let ok = match vnet::joined_header(run, hdr) {
                    Some((vh, hl)) => {
                        let vb = vh.emit();
                        let mut iov = [IoSlice::new(&[]); MAX_IOV];
                        iov[0] = IoSlice::new(&vb);
                        iov[1] = IoSlice::new(hdr);
                        for (slot, o) in iov[2..].iter_mut().zip(run) {
                            *slot = IoSlice::new(&o.packet[hl..]);
                        }
                        socklab_sys::io::writev(self.tx.as_fd(), &iov[..run.len() + 2]).is_ok()
                    }
                    None => {
                        let p = &run[0].packet;
                        let vb = VnetHdr::for_packet(p, !m.complete).emit();
                        let iov = [IoSlice::new(&vb), IoSlice::new(p)];
                        socklab_sys::io::writev(self.tx.as_fd(), &iov).is_ok()
                    }
                };
                self.failed.extend(std::iter::repeat_n(!ok, r.len()));
            }
        }
        self.failed.iter().map(|&bad| u64::from(bad)).sum()
    }
}
