//! Reference bandwidths (seed 000): a pipe between two threads, and `memcpy`.
//!
//! They put the socket figures in context: loopback TCP can never beat a pipe of the same
//! transfer size by much, nor memory copy.

use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use socklab_sys::io as sysio;
use socklab_sys::usage::{getrusage, Usage, Who};

use crate::aligned::AlignedBuf;
use crate::partial::write_all_with;

/// One reference measurement.
#[derive(Debug, Clone, Copy)]
pub struct RefResult {
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// Operations (writes for the pipe, copies for memcpy).
    pub ops: u64,
    /// Reads at the pipe's receiving end (0 for memcpy).
    pub reads: u64,
    /// CPU of the whole process during the measurement.
    pub cpu: Usage,
}

impl RefResult {
    /// Gbit/s.
    pub fn gbps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds / 1e9
        } else {
            0.0
        }
    }
}

/// Copies `size` bytes at a time until `total` bytes are copied. The size is hidden from the
/// optimiser, so every copy is a real `memcpy` call, as in the seed's C program.
pub fn memcpy_bandwidth(size: usize, total: u64) -> RefResult {
    let size = size.max(1);
    let src: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut dst = vec![0u8; size];
    let n = total.div_ceil(size as u64).max(1);
    let cpu0 = getrusage(Who::Process);
    let t0 = Instant::now();
    for _ in 0..n {
        let len = std::hint::black_box(size);
        dst[..len].copy_from_slice(std::hint::black_box(&src[..len]));
        std::hint::black_box(&mut dst);
    }
    let seconds = t0.elapsed().as_secs_f64();
    RefResult {
        bytes: n * size as u64,
        seconds,
        ops: n,
        reads: 0,
        cpu: getrusage(Who::Process).since(&cpu0),
    }
}

/// The data caches of CPU 0 from sysfs (`/sys/devices/system/cpu/cpu0/cache/index*`), as
/// `(level, bytes)` sorted by level: the per-core (or shared) size of each level that holds
/// data. Empty when sysfs does not say.
pub fn data_caches() -> Vec<(u8, u64)> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut out: Vec<(u8, u64)> = (0..8)
        .filter_map(|i| {
            let read = |f: &str| std::fs::read_to_string(dir.join(format!("index{i}/{f}"))).ok();
            let kind = read("type")?;
            if kind.trim() == "Instruction" {
                return None;
            }
            let level: u8 = read("level")?.trim().parse().ok()?;
            let size = socklab_units::parse_size(read("size")?.trim()).ok()?;
            Some((level, size))
        })
        .collect();
    out.sort_unstable();
    out.dedup_by_key(|c| c.0);
    out
}

/// The smallest level of `caches` ([`data_caches`]) that holds `bytes` in at most half of it
/// (the rest is left to everything else the process and the machine touch: a working set the
/// size of a cache does not stay in it), or 0 (main memory) when none does; `None` when the
/// caches are unknown.
pub fn holding_level(caches: &[(u8, u64)], bytes: u64) -> Option<u8> {
    if caches.is_empty() {
        return None;
    }
    Some(
        caches
            .iter()
            .find(|(_, size)| bytes <= *size / 2)
            .map_or(0, |c| c.0),
    )
}

/// Pushes `total` bytes (page-aligned buffers on both ends) through a pipe from a writer thread (writes of `size`) to a reader
/// (reads of `size`) and times it from the first write to the reader's end of file.
pub fn pipe_bandwidth(size: usize, total: u64) -> io::Result<RefResult> {
    let size = size.max(1);
    let (r, w) = sysio::pipe()?;
    let n = total.div_ceil(size as u64).max(1);
    let cpu0 = getrusage(Who::Process);
    let t0 = Instant::now();
    let writer = std::thread::spawn(move || -> io::Result<u64> {
        let mut buf = AlignedBuf::zeroed(size);
        buf.as_mut_slice().fill(0x5a);
        let mut calls = 0;
        for _ in 0..n {
            calls += write_all_with(buf.as_slice(), |b| sysio::write(w.as_fd(), b))?;
        }
        Ok(calls)
    });
    let mut buf = AlignedBuf::zeroed(size);
    let mut bytes = 0u64;
    let mut reads = 0u64;
    loop {
        match sysio::read(r.as_fd(), buf.as_mut_slice()) {
            Ok(0) => break,
            Ok(k) => {
                bytes += k as u64;
                reads += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let ops = writer
        .join()
        .map_err(|_| io::Error::other("pipe writer thread panicked"))??;
    Ok(RefResult {
        bytes,
        seconds,
        ops,
        reads,
        cpu: getrusage(Who::Process).since(&cpu0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_move_exactly_what_they_claim() {
        let m = memcpy_bandwidth(1000, 1_000_000);
        assert_eq!(m.bytes, 1_000_000);
        assert_eq!(m.ops, 1000);
        let p = pipe_bandwidth(4096, 1 << 20).unwrap();
        assert_eq!(p.bytes, 1 << 20);
        assert_eq!(p.ops, 256);
        assert!(p.reads >= 1 && p.reads <= 256 * 2);
        // Rounded up to whole transfers.
        assert_eq!(memcpy_bandwidth(3, 10).bytes, 12);
    }

    #[test]
    fn the_holding_level_is_the_first_cache_large_enough() {
        let caches = [(1, 32 << 10), (2, 1 << 20), (3, 32 << 20)];
        assert_eq!(holding_level(&caches, 2 << 10), Some(1));
        assert_eq!(holding_level(&caches, 16 << 10), Some(1));
        assert_eq!(
            holding_level(&caches, 32 << 10),
            Some(2),
            "a full L1 is not in L1"
        );
        assert_eq!(holding_level(&caches, 256 << 10), Some(2));
        assert_eq!(holding_level(&caches, 16 << 20), Some(3));
        assert_eq!(holding_level(&caches, 32 << 20), Some(0), "the whole L3");
        assert_eq!(holding_level(&caches, 64 << 20), Some(0), "main memory");
        assert_eq!(holding_level(&[], 1), None);
    }
}
