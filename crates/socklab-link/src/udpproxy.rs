//! The `udp-proxy` emulator driver: an impairing UDP relay that needs no root.
//!
//! Clients send to the proxy's listening address; the proxy forwards to one target, and the
//! target's replies back to the client that sent last. Each direction runs its own
//! [`socklab_impair::Emulator`] (the same sans-IO model the TUN driver uses), driven by the
//! monotonic clock: datagrams are released at their emulated times.
//!
//! A TCP proxy could not emulate loss for TCP: it would terminate the TCP connection on both
//! sides, so a "lost" segment would just be re-sent by the proxy's own kernel, never seen by the
//! endpoints' congestion control. Loss for TCP needs the TUN or netem drivers, which sit below
//! the endpoints' TCP.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socklab_impair::{Emulator, LinkSpec, Stats};
use socklab_sys::io::poll_two_readable;
use socklab_sys::sockopt::{set, IntOpt};

use crate::LinkError;

/// How the proxy relays and impairs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where clients send.
    pub listen: SocketAddr,
    /// Where datagrams go.
    pub target: SocketAddr,
    /// Impairment of client → target datagrams.
    pub forward: LinkSpec,
    /// Impairment of target → client datagrams.
    pub backward: LinkSpec,
    /// Seed of both directions' models (the backward one uses `seed + 1`).
    pub seed: u64,
}

/// Per-direction accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client → target.
    pub forward: Stats,
    /// Target → client.
    pub backward: Stats,
}

/// A bound proxy.
#[derive(Debug)]
pub struct UdpProxy {
    front: UdpSocket,
    back: UdpSocket,
    cfg: ProxyConfig,
}

/// Largest datagram relayed.
const MAX_DATAGRAM: usize = 65535;
/// Receive buffer of the relay's sockets, bytes.
const RELAY_BUFFER: i32 = 8 << 20;

impl UdpProxy {
    /// Binds the listening socket and a socket connected to the target.
    pub fn bind(cfg: ProxyConfig) -> Result<UdpProxy, LinkError> {
        let front = UdpSocket::bind(cfg.listen).map_err(|e| LinkError::bind(cfg.listen, e))?;
        let any: SocketAddr = if cfg.target.is_ipv6() {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        }
        .parse()
        .map_err(|_| LinkError::Invalid("bad wildcard address".into()))?;
        let back = UdpSocket::bind(any).map_err(|e| LinkError::bind(any, e))?;
        back.connect(cfg.target)
            .map_err(|source| LinkError::Connect {
                addr: cfg.target,
                source,
            })?;
        for s in [&front, &back] {
            s.set_nonblocking(true)
                .map_err(|e| LinkError::io("O_NONBLOCK", e))?;
            // Room for a burst while the relay thread waits for a CPU: a datagram the kernel
            // drops in front of the relay never meets the model, and its counts would not be
            // the link's. SO_RCVBUFFORCE passes net.core.rmem_max as root.
            if set(s.as_fd(), IntOpt::SoRcvBufForce, RELAY_BUFFER).is_err() {
                let _ = socket2::SockRef::from(s).set_recv_buffer_size(RELAY_BUFFER as usize);
            }
        }
        Ok(UdpProxy { front, back, cfg })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.front.local_addr()
    }

    /// Relays until `stop()` (checked at least every 50 ms); returns both directions' counts.
    pub fn serve(&self, stop: &dyn Fn() -> bool) -> Result<ProxyStats, LinkError> {
        self.serve_with(stop, None)
    }

    /// [`UdpProxy::serve`], publishing live counts to `ctl` and taking new specs from it.
    fn serve_with(
        &self,
        stop: &dyn Fn() -> bool,
        ctl: Option<&Control>,
    ) -> Result<ProxyStats, LinkError> {
        let t0 = Instant::now();
        let now = || t0.elapsed().as_nanos() as u64;
        // The relay carries datagrams, not IP packets: one flow each way, nothing to mark.
        let mut fwd = Emulator::new(self.cfg.forward.clone(), self.cfg.seed).udp_payloads();
        let mut bwd =
            Emulator::new(self.cfg.backward.clone(), self.cfg.seed.wrapping_add(1)).udp_payloads();
        let mut base = ProxyStats::default();
        let mut client: Option<SocketAddr> = None;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut generation = 0u64;
        while !stop() {
            if let Some(c) = ctl {
                let g = c.generation.load(Ordering::Acquire);
                if g != generation {
                    generation = g;
                    if let Some((f, b, seed)) = c.next.lock().ok().and_then(|mut n| n.take()) {
                        // Release what is queued under the old spec, then start afresh.
                        while let Some(p) = fwd.poll_transmit(u64::MAX) {
                            let _ = self.back.send(&p);
                        }
                        while let Some(p) = bwd.poll_transmit(u64::MAX) {
                            if let Some(c) = client {
                                let _ = self.front.send_to(&p, c);
                            }
                        }
                        // The old models' worst wait stays with the spec it ran under.
                        base.forward.add_counts(fwd.stats());
                        base.backward.add_counts(bwd.stats());
                        fwd = Emulator::new(f, seed).udp_payloads();
                        bwd = Emulator::new(b, seed.wrapping_add(1)).udp_payloads();
                    }
                    c.applied.store(g, Ordering::Release);
                }
            }
            // Sleep until a datagram arrives or the next emulated release, at most 50 ms.
            let next = [fwd.poll_timeout(), bwd.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let wait_ms = match next {
                Some(t) => (t.saturating_sub(now()) / 1_000_000).min(50) as i32,
                None => 50,
            };
            let (front_ready, back_ready) =
                poll_two_readable(self.front.as_fd(), self.back.as_fd(), wait_ms)
                    .map_err(|e| LinkError::io("poll", e))?;
            if front_ready {
                while let Ok((n, from)) = self.front.recv_from(&mut buf) {
                    client = Some(from);
                    fwd.enqueue(now(), buf[..n].to_vec());
                }
            }
            if back_ready {
                // ECONNREFUSED (nobody at the target yet) is not fatal: the datagram is gone.
                while let Ok(n) = self.back.recv(&mut buf) {
                    bwd.enqueue(now(), buf[..n].to_vec());
                }
            }
            let t = now();
            while let Some(p) = fwd.poll_transmit(t) {
                let _ = self.back.send(&p);
            }
            while let Some(p) = bwd.poll_transmit(t) {
                if let Some(c) = client {
                    let _ = self.front.send_to(&p, c);
                }
            }
            if let Some(c) = ctl {
                if let Ok(mut st) = c.stats.lock() {
                    *st = totals(&base, &fwd, &bwd);
                }
            }
        }
        let st = totals(&base, &fwd, &bwd);
        if let Some(c) = ctl {
            if let Ok(mut s) = c.stats.lock() {
                *s = st.clone();
            }
        }
        Ok(st)
    }
}

fn totals(base: &ProxyStats, fwd: &Emulator, bwd: &Emulator) -> ProxyStats {
    let mut st = base.clone();
    st.forward.add(fwd.stats());
    st.backward.add(bwd.stats());
    st
}

/// What a running proxy thread shares with its [`ProxyHandle`].
#[derive(Debug, Default)]
struct Control {
    stop: AtomicBool,
    /// Bumped when `next` holds new specs; `applied` follows once the relay switched.
    generation: AtomicU64,
    applied: AtomicU64,
    next: Mutex<Option<(LinkSpec, LinkSpec, u64)>>,
    /// Cumulative counts, updated every loop.
    stats: Mutex<ProxyStats>,
}

/// Starts a proxy on a free loopback port in a thread; returns its address and a handle that
/// stops it and yields its counts.
pub fn spawn(
    target: SocketAddr,
    forward: LinkSpec,
    backward: LinkSpec,
    seed: u64,
) -> Result<(SocketAddr, ProxyHandle), LinkError> {
    let proxy = UdpProxy::bind(ProxyConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        target,
        forward,
        backward,
        seed,
    })?;
    let addr = proxy
        .local_addr()
        .map_err(|e| LinkError::io("getsockname", e))?;
    let ctl = Arc::new(Control::default());
    let c2 = ctl.clone();
    let join = std::thread::spawn(move || {
        proxy.serve_with(&|| c2.stop.load(Ordering::Relaxed), Some(&c2))
    });
    Ok((
        addr,
        ProxyHandle {
            ctl,
            join: Some(join),
        },
    ))
}

/// A running proxy thread.
#[derive(Debug)]
pub struct ProxyHandle {
    ctl: Arc<Control>,
    join: Option<std::thread::JoinHandle<Result<ProxyStats, LinkError>>>,
}

/// How long [`ProxyHandle::reset`] waits for the relay to switch (it wakes every 50 ms).
const RESET_WAIT: Duration = Duration::from_secs(2);

impl ProxyHandle {
    /// Both directions' counts so far (cumulative since the start, across resets).
    pub fn stats(&self) -> ProxyStats {
        self.ctl.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Replaces both directions' models with fresh ones from `seed` (forward `seed`, backward
    /// `seed + 1`), as a new proxy would start; datagrams still queued are released at once.
    /// Returns once the relay has switched, so every datagram sent afterwards meets the new
    /// models. The address stays the same.
    pub fn reset(&self, forward: LinkSpec, backward: LinkSpec, seed: u64) -> Result<(), LinkError> {
        if let Ok(mut n) = self.ctl.next.lock() {
            *n = Some((forward, backward, seed));
        }
        let g = self.ctl.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let t0 = Instant::now();
        while self.ctl.applied.load(Ordering::Acquire) < g {
            if self.join.as_ref().is_none_or(|j| j.is_finished()) || t0.elapsed() > RESET_WAIT {
                return Err(LinkError::Link(
                    "the udp-proxy relay did not take its new impairments (its thread ended or hangs)"
                        .into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Stops the proxy (within 50 ms) and returns its counts.
    pub fn stop(mut self) -> Result<ProxyStats, LinkError> {
        self.ctl.stop.store(true, Ordering::Relaxed);
        match self.join.take().map(|j| j.join()) {
            Some(Ok(r)) => r,
            _ => Err(LinkError::Invalid("the proxy thread panicked".into())),
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.ctl.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
