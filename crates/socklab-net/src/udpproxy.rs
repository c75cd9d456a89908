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
use std::time::Instant;

use socklab_impair::{Emulator, LinkSpec, Stats};
use socklab_sys::io::poll_two_readable;

use crate::NetError;

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

impl UdpProxy {
    /// Binds the listening socket and a socket connected to the target.
    pub fn bind(cfg: ProxyConfig) -> Result<UdpProxy, NetError> {
        let front = UdpSocket::bind(cfg.listen).map_err(|e| NetError::bind(cfg.listen, e))?;
        let any: SocketAddr = if cfg.target.is_ipv6() {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        }
        .parse()
        .map_err(|_| NetError::Invalid("bad wildcard address".into()))?;
        let back = UdpSocket::bind(any).map_err(|e| NetError::bind(any, e))?;
        back.connect(cfg.target)
            .map_err(|source| NetError::Connect {
                addr: cfg.target,
                source,
            })?;
        for s in [&front, &back] {
            s.set_nonblocking(true)
                .map_err(|e| NetError::io("O_NONBLOCK", e))?;
        }
        Ok(UdpProxy { front, back, cfg })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.front.local_addr()
    }

    /// Relays until `stop()` (checked at least every 50 ms); returns both directions' counts.
    pub fn serve(&self, stop: &dyn Fn() -> bool) -> Result<ProxyStats, NetError> {
        let t0 = Instant::now();
        let now = || t0.elapsed().as_nanos() as u64;
        let mut fwd = Emulator::new(self.cfg.forward.clone(), self.cfg.seed);
        let mut bwd = Emulator::new(self.cfg.backward.clone(), self.cfg.seed.wrapping_add(1));
        let mut client: Option<SocketAddr> = None;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        while !stop() {
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
                    .map_err(|e| NetError::io("poll", e))?;
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
        }
        Ok(ProxyStats {
            forward: fwd.stats().clone(),
            backward: bwd.stats().clone(),
        })
    }
}

/// Starts a proxy on a free loopback port in a thread; returns its address and a handle that
/// stops it and yields its counts.
pub fn spawn(
    target: SocketAddr,
    forward: LinkSpec,
    backward: LinkSpec,
    seed: u64,
) -> Result<(SocketAddr, ProxyHandle), NetError> {
    let proxy = UdpProxy::bind(ProxyConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        target,
        forward,
        backward,
        seed,
    })?;
    let addr = proxy
        .local_addr()
        .map_err(|e| NetError::io("getsockname", e))?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let join =
        std::thread::spawn(move || proxy.serve(&|| s2.load(std::sync::atomic::Ordering::Relaxed)));
    Ok((
        addr,
        ProxyHandle {
            stop,
            join: Some(join),
        },
    ))
}

/// A running proxy thread.
#[derive(Debug)]
pub struct ProxyHandle {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    join: Option<std::thread::JoinHandle<Result<ProxyStats, NetError>>>,
}

impl ProxyHandle {
    /// Stops the proxy (within 50 ms) and returns its counts.
    pub fn stop(mut self) -> Result<ProxyStats, NetError> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match self.join.take().map(|j| j.join()) {
            Some(Ok(r)) => r,
            _ => Err(NetError::Invalid("the proxy thread panicked".into())),
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
