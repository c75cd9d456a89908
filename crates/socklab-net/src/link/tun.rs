//! The `tun` driver: a TUN device in each namespace of a [`Namespaces`] pair, and one thread
//! per direction that reads packets from one device, passes them through the impairment model
//! ([`socklab_impair::Emulator`]) and writes them to the other device at their release times.
//!
//! Hot path per packet: one `read` into a recycled buffer (no allocation, no zeroing), the
//! model, one `write`. A thread sleeps in `ppoll` until a packet arrives or the next release
//! time, with nanosecond resolution.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socklab_impair::{Emulator, LinkSpec, Stats};
use socklab_sys::netns::{read_append, thread_cpu, wait_readable};

use super::ns::{ip, Namespaces, Side, PREFIX};
use super::{add_stats, DirReport, LinkReport};
use crate::NetError;

/// The TUN device's name in both namespaces.
pub const TUN_NAME: &str = "sl-tun";
/// Default MTU of the emulated link (Ethernet's).
pub const DEFAULT_MTU: u32 = 1500;
/// A packet released later than this after its scheduled time counts as late.
pub const LAG_TOLERANCE: Duration = Duration::from_millis(1);
/// Longest sleep of a forwarding thread, so it notices a stop or a new spec.
const MAX_SLEEP: Duration = Duration::from_millis(20);
/// Packets read per wake-up before releasing due ones.
const READ_BATCH: usize = 64;

struct Direction {
    /// Bumped when `next_spec` holds a new spec.
    generation: AtomicU64,
    next_spec: Mutex<Option<(LinkSpec, u64)>>,
    report: Mutex<DirReport>,
    tid: AtomicU32,
}

impl Direction {
    fn new(spec: LinkSpec, seed: u64) -> Direction {
        Direction {
            generation: AtomicU64::new(0),
            next_spec: Mutex::new(Some((spec, seed))),
            report: Mutex::new(DirReport::default()),
            tid: AtomicU32::new(0),
        }
    }
}

/// A running TUN link.
#[derive(Debug)]
pub struct TunLink {
    dirs: [Arc<Direction>; 2],
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direction").finish_non_exhaustive()
    }
}

fn open_in(ns: &Namespaces, side: Side, mtu: u32) -> Result<File, NetError> {
    let guard = ns.enter(side)?;
    let dev = socklab_sys::netns::open_tun(TUN_NAME).map_err(|e| {
        NetError::Link(format!(
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

impl TunLink {
    /// Creates the TUN devices in `ns` (client `10.77.0.1`, server `10.77.0.2`) and starts
    /// forwarding: `forward` impairs client → server, `backward` server → client (seeded
    /// `seed` and `seed + 1`). `mtu` is checked by the caller ([`super::check_mtu`]).
    pub fn start(
        ns: &Namespaces,
        forward: LinkSpec,
        backward: LinkSpec,
        seed: u64,
        mtu: u32,
    ) -> Result<TunLink, NetError> {
        let client = open_in(ns, Side::Client, mtu)?;
        let server = open_in(ns, Side::Server, mtu)?;
        let dirs = [
            Arc::new(Direction::new(forward, seed)),
            Arc::new(Direction::new(backward, seed.wrapping_add(1))),
        ];
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let client2 = client
            .try_clone()
            .map_err(|e| NetError::io("dup TUN descriptor", e))?;
        let server2 = server
            .try_clone()
            .map_err(|e| NetError::io("dup TUN descriptor", e))?;
        let mut threads = Vec::new();
        for (i, (rx, tx)) in [(client, server), (server2, client2)]
            .into_iter()
            .enumerate()
        {
            let dir = dirs[i].clone();
            let stop = stop.clone();
            let name = if i == 0 { "sl-link-c2s" } else { "sl-link-s2c" };
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || forward_loop(&rx, &tx, &dir, &stop, epoch, mtu as usize))
                .map_err(|e| NetError::io("spawn link thread", e))?;
            threads.push(t);
        }
        Ok(TunLink {
            dirs,
            stop,
            threads,
        })
    }

    /// Replaces both directions' impairments; packets still queued are released at once.
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
        }
    }

    /// Counters so far (cumulative since start).
    pub fn report(&self) -> LinkReport {
        let get = |d: &Direction| {
            let mut r = d.report.lock().map(|g| g.clone()).unwrap_or_default();
            let tid = d.tid.load(Ordering::Acquire);
            if tid != 0 {
                if let Some(cpu) = thread_cpu(tid) {
                    r.cpu_ns = cpu.as_nanos() as u64;
                }
            }
            r
        };
        LinkReport {
            forward: get(&self.dirs[0]),
            backward: get(&self.dirs[1]),
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

/// Writes a released packet to the far device and recycles its buffer; returns 1 when the
/// write failed (the packet is lost), else 0.
fn send(mut tx: &File, p: Vec<u8>, pool: &mut Vec<Vec<u8>>) -> u64 {
    let failed = tx.write(&p).is_err();
    pool.push(p);
    u64::from(failed)
}

/// One direction: read `rx`, model, write `tx`, until `stop`.
fn forward_loop(
    rx: &File,
    tx: &File,
    dir: &Direction,
    stop: &AtomicBool,
    epoch: Instant,
    mtu: usize,
) {
    dir.tid
        .store(socklab_sys::netns::gettid(), Ordering::Release);
    // Wake on time: release lag would otherwise include the default 50 µs timer slack.
    let _ = socklab_sys::netns::set_timer_slack(1_000);
    let now = || epoch.elapsed().as_nanos() as u64;
    let mut generation = u64::MAX;
    let mut emu = Emulator::new(LinkSpec::default(), 0);
    // Models replaced by a new spec, releasing what they hold on their own schedule: a packet
    // is never delivered early because the link was re-specified (an early SYN would teach TCP
    // a round trip of microseconds, and BBR would then starve the connection).
    let mut draining: Vec<Emulator> = Vec::new();
    let mut base = Stats::default();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut late = 0u64;
    let mut max_lag = 0u64;
    let mut lag_sum = 0u64;
    let mut write_errors = 0u64;
    let tol = LAG_TOLERANCE.as_nanos() as u64;
    while !stop.load(Ordering::Acquire) {
        let g = dir.generation.load(Ordering::Acquire);
        if g != generation {
            generation = g;
            if let Some((spec, seed)) = dir.next_spec.lock().ok().and_then(|mut s| s.take()) {
                // New packets go to the new model; the old one keeps releasing what it holds
                // at the times it scheduled.
                draining.push(std::mem::replace(&mut emu, Emulator::new(spec, seed)));
            }
        }
        let next = draining
            .iter()
            .chain(std::iter::once(&emu))
            .filter_map(Emulator::poll_timeout)
            .min();
        let sleep = match next {
            Some(t) => Duration::from_nanos(t.saturating_sub(now())).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        // A packet already due: just try a non-blocking read, then release it.
        let readable = sleep.is_zero() || wait_readable(rx.as_fd(), Some(sleep)).unwrap_or(false);
        if readable {
            for _ in 0..READ_BATCH {
                let mut buf = pool.pop().unwrap_or_else(|| Vec::with_capacity(mtu));
                buf.clear();
                buf.reserve(mtu);
                match read_append(rx.as_fd(), &mut buf) {
                    Ok(n) if n > 0 => emu.enqueue(now(), buf),
                    _ => {
                        pool.push(buf);
                        break;
                    }
                }
            }
        }
        let t = now();
        for e in draining.iter_mut().chain(std::iter::once(&mut emu)) {
            // The lag is measured from each packet's own release time (the next time the
            // model names may be one of its internal decisions, not a release).
            while let Some((due, p)) = e.poll_release(t) {
                let lag = t.saturating_sub(due);
                lag_sum += lag;
                max_lag = max_lag.max(lag);
                if lag > tol {
                    late += 1;
                }
                write_errors += send(tx, p, &mut pool);
            }
        }
        // A drained model's counts join the base.
        draining.retain(|e| {
            let holding = e.poll_timeout().is_some();
            if !holding {
                add_stats(&mut base, e.stats());
            }
            holding
        });
        if let Ok(mut r) = dir.report.lock() {
            let mut s = base.clone();
            for e in &draining {
                add_stats(&mut s, e.stats());
            }
            add_stats(&mut s, emu.stats());
            r.stats = s;
            r.late = late;
            r.max_lag_ns = max_lag;
            r.lag_sum_ns = lag_sum;
            r.write_errors = write_errors;
        }
    }
}
