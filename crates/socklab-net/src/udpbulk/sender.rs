//! The paced UDP sender: datagrams at their intended times ([`Pacer`]), several per system
//! call when several are due: one `send` of up to 64 datagrams cut by the kernel (UDP GSO,
//! `UDP_SEGMENT`) or one `sendmmsg`. Then the FIN datagrams, a few milliseconds apart. Every
//! loop is bounded by the test's duration (and each blocking send by a 100 ms timeout).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socklab_sys::errno;
use socklab_sys::mmsg::{send_batch, MAX_BATCH};
use socklab_sys::sockopt::{set, IntOpt};
use socklab_sys::usage::{getrusage, Usage, Who};

use super::pacer::Pacer;
use super::wire::{Fin, Header, HEADER_LEN, MAX_DATAGRAM};
use crate::NetError;

/// Whether to send with UDP GSO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gso {
    /// Where the kernel takes it on this path (off after a refusal).
    #[default]
    Auto,
    /// Always (an error where the kernel refuses).
    On,
    /// Never: `sendmmsg`.
    Off,
}

impl Gso {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Gso::Auto => "auto",
            Gso::On => "on",
            Gso::Off => "off",
        }
    }
}

impl std::str::FromStr for Gso {
    type Err = String;
    fn from_str(s: &str) -> Result<Gso, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Gso::Auto),
            "on" | "true" | "yes" => Ok(Gso::On),
            "off" | "false" | "no" => Ok(Gso::Off),
            _ => Err("choose auto, on or off".into()),
        }
    }
}

/// One test to send.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// The receiver (or a relay in front of it).
    pub to: SocketAddr,
    /// Offered rate, bits of UDP payload per second.
    pub rate_bps: u64,
    /// Bytes of UDP payload per datagram ([`HEADER_LEN`] to [`MAX_DATAGRAM`]).
    pub size: usize,
    /// How long to send.
    pub duration: Duration,
    /// GSO.
    pub gso: Gso,
    /// Most datagrams per system call (1 to 64).
    pub batch: usize,
    /// `SO_SNDBUF` to ask for (`None`: the kernel's default).
    pub sndbuf: Option<usize>,
    /// The test id.
    pub test_id: u64,
    /// FIN datagrams sent at the end.
    pub fins: u32,
    /// Gap between FIN datagrams.
    pub fin_gap: Duration,
    /// How long the receiver waits after the first FIN (carried in the FIN datagrams).
    pub drain: Duration,
}

impl SendConfig {
    /// A test of `size`-byte datagrams at `rate_bps` to `to` for `duration`, with the
    /// defaults: GSO auto, batches of 64, 5 FINs 5 ms apart, 100 ms drain, 4 MiB send buffer.
    pub fn new(to: SocketAddr, rate_bps: u64, size: usize, duration: Duration) -> SendConfig {
        SendConfig {
            to,
            rate_bps,
            size,
            duration,
            gso: Gso::Auto,
            batch: MAX_BATCH,
            sndbuf: Some(4 << 20),
            test_id: new_test_id(),
            fins: 5,
            fin_gap: Duration::from_millis(5),
            drain: Duration::from_millis(100),
        }
    }

    /// Checks the sizes.
    pub fn validate(&self) -> Result<(), NetError> {
        if !(HEADER_LEN..=MAX_DATAGRAM).contains(&self.size) {
            return Err(NetError::Invalid(format!(
                "size {}: a datagram holds {HEADER_LEN} to {MAX_DATAGRAM} bytes of UDP payload (1472 fills a 1500-byte MTU)",
                self.size
            )));
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(NetError::Invalid(format!(
                "batch {}: use 1 to {MAX_BATCH}",
                self.batch
            )));
        }
        Ok(())
    }
}

/// A test id no other test of this host shares in practice: the clock, the process and a
/// counter, mixed.
pub fn new_test_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut z = now_ns()
        ^ (u64::from(std::process::id()) << 40)
        ^ NEXT
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `CLOCK_REALTIME`, ns since the epoch (the clock the receiver's kernel stamps arrivals with).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What the sender did.
#[derive(Debug, Clone, PartialEq)]
pub struct SendResult {
    /// The test id.
    pub test_id: u64,
    /// Data datagrams sent.
    pub datagrams: u64,
    /// FIN datagrams sent.
    pub fins: u64,
    /// Bytes of UDP payload sent in data datagrams.
    pub bytes: u64,
    /// Send system calls.
    pub calls: u64,
    /// Sends the kernel refused (full buffers, an ICMP error reported): sent again later.
    pub errors: u64,
    /// From the first to the last data send returning, s.
    pub seconds: f64,
    /// Whether UDP GSO carried the batches.
    pub gso: bool,
    /// Why GSO was turned off on the way (`gso = auto`), if it was.
    pub gso_note: Option<String>,
    /// The send buffer the kernel granted, bytes.
    pub sndbuf: usize,
    /// The sending thread's CPU time.
    pub cpu: Usage,
}

impl SendResult {
    /// Datagrams sent, FINs included (what the receiver's counts are held against).
    pub fn total(&self) -> u64 {
        self.datagrams + self.fins
    }

    /// The rate reached, bits of payload per second.
    pub fn bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    crate::error::is_timeout(e)
        || matches!(
            e.raw_os_error(),
            Some(errno::ENOBUFS | errno::ECONNREFUSED | errno::EINTR)
        )
}

/// Sends one test. `stop()` ends the data early (the FINs still go out).
pub fn send(cfg: &SendConfig, stop: &dyn Fn() -> bool) -> Result<SendResult, NetError> {
    cfg.validate()?;
    let any: SocketAddr = if cfg.to.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(any).map_err(|e| NetError::bind(any, e))?;
    sock.connect(cfg.to).map_err(|source| NetError::Connect {
        addr: cfg.to,
        source,
    })?;
    sock.set_write_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| NetError::io("SO_SNDTIMEO", e))?;
    let sref = socket2::SockRef::from(&sock);
    if let Some(b) = cfg.sndbuf {
        let v = i32::try_from(b).unwrap_or(i32::MAX);
        if set(sock.as_fd(), IntOpt::SoSndBufForce, v).is_err() {
            let _ = sref.set_send_buffer_size(b);
        }
    }
    let sndbuf = sref.send_buffer_size().unwrap_or(0);
    let size = cfg.size;
    // GSO: whole datagrams under the 64 KiB limit of one send.
    let gso_batch = (MAX_DATAGRAM / size).min(cfg.batch);
    let mut gso = cfg.gso != Gso::Off && gso_batch >= 2;
    let mut gso_note = None;
    if gso {
        if let Err(e) = set(sock.as_fd(), IntOpt::UdpSegment, size as i32) {
            if cfg.gso == Gso::On {
                return Err(NetError::SockOpt {
                    option: "gso",
                    value: "on".into(),
                    source: e,
                    hint: " (this kernel has no UDP GSO: use gso = auto or off)".into(),
                });
            }
            gso = false;
            gso_note = Some(format!("UDP_SEGMENT refused: {e}"));
        }
    }
    let batch = if gso { gso_batch } else { cfg.batch };
    let mut buf = vec![0u8; batch * size];
    let mut pacer = Pacer::new(cfg.rate_bps, size);
    let (mut calls, mut errors, mut seq) = (0u64, 0u64, 0u64);
    let cpu0 = getrusage(Who::Thread);
    let t0 = Instant::now();
    let end_ns = u64::try_from(cfg.duration.as_nanos()).unwrap_or(u64::MAX);
    let mut last_send = t0;
    loop {
        let elapsed = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if elapsed >= end_ns || stop() {
            break;
        }
        let due = pacer.due(elapsed).min(batch as u64) as usize;
        if due == 0 {
            let wait = pacer.next_due_ns().min(end_ns).saturating_sub(elapsed);
            std::thread::sleep(Duration::from_nanos(wait.min(10_000_000)));
            continue;
        }
        let send_ns = now_ns();
        for (i, d) in buf.chunks_mut(size).take(due).enumerate() {
            Header {
                test_id: cfg.test_id,
                seq: seq + i as u64,
                send_ns,
                fin: None,
            }
            .emit(d)
            .map_err(|e| NetError::Invalid(e.to_string()))?;
        }
        let out = &buf[..due * size];
        let r = if gso && due > 1 {
            socklab_sys::io::write(sock.as_fd(), out).map(|n| n / size)
        } else {
            send_batch(sock.as_fd(), out, size)
        };
        calls += 1;
        match r {
            Ok(n) => {
                seq += n as u64;
                pacer.sent(n as u64);
                last_send = Instant::now();
            }
            // A device without checksum offload on the path makes the kernel refuse GSO (EIO).
            Err(e) if gso && cfg.gso == Gso::Auto && e.raw_os_error() == Some(errno::EIO) => {
                gso = false;
                gso_note = Some(format!("the kernel refused a GSO send ({e}): sendmmsg"));
                let _ = set(sock.as_fd(), IntOpt::UdpSegment, 0);
            }
            Err(e) if gso && e.raw_os_error() == Some(errno::EIO) => {
                return Err(NetError::SockOpt {
                    option: "gso",
                    value: "on".into(),
                    source: e,
                    hint: " (a device on the path has no checksum offload: use gso = auto or off)"
                        .into(),
                })
            }
            Err(e) if is_transient(&e) => errors += 1,
            Err(e) => return Err(NetError::io(format!("send to {}", cfg.to), e)),
        }
    }
    let seconds = last_send.duration_since(t0).as_secs_f64();
    let datagrams = seq;
    let total = seq + u64::from(cfg.fins);
    let drain_ms = u32::try_from(cfg.drain.as_millis()).unwrap_or(u32::MAX);
    let mut fin = vec![0u8; size];
    let mut fins = 0;
    for k in 0..cfg.fins {
        if k > 0 {
            std::thread::sleep(cfg.fin_gap);
        }
        Header {
            test_id: cfg.test_id,
            seq: datagrams + u64::from(k),
            send_ns: now_ns(),
            fin: Some(Fin { total, drain_ms }),
        }
        .emit(&mut fin)
        .map_err(|e| NetError::Invalid(e.to_string()))?;
        match sock.send(&fin) {
            Ok(_) => fins += 1,
            Err(e) if is_transient(&e) => errors += 1,
            Err(e) => return Err(NetError::io(format!("send to {}", cfg.to), e)),
        }
        calls += 1;
    }
    Ok(SendResult {
        test_id: cfg.test_id,
        datagrams,
        fins,
        bytes: datagrams * size as u64,
        calls,
        errors,
        seconds,
        gso,
        gso_note,
        sndbuf,
        cpu: getrusage(Who::Thread).since(&cpu0),
    })
}
