//! A server child's threads, memory and descriptors, read from /proc, for the tests that
//! bound what hostile peers may cost it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A field of /proc/PID/status (`Threads`, `VmRSS` in kB); 0 when unreadable.
pub fn status(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The open descriptors of PID.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// The peak threads and VmRSS (kB) of PID, sampled every 20 ms until [`Peaks::stop`].
pub struct Peaks {
    on: Arc<AtomicBool>,
    sampler: JoinHandle<(u64, u64)>,
}

impl Peaks {
    pub fn start(pid: u32) -> Peaks {
        let on = Arc::new(AtomicBool::new(true));
        let sampling = on.clone();
        let sampler = std::thread::spawn(move || {
            let (mut threads, mut rss) = (0, 0);
            while sampling.load(Ordering::Relaxed) {
                threads = threads.max(status(pid, "Threads"));
                rss = rss.max(status(pid, "VmRSS"));
                std::thread::sleep(Duration::from_millis(20));
            }
            (threads, rss)
        });
        Peaks { on, sampler }
    }

    /// (peak threads, peak VmRSS in kB).
    pub fn stop(self) -> (u64, u64) {
        self.on.store(false, Ordering::Relaxed);
        self.sampler.join().unwrap()
    }
}
