//! `--capture FILE.pcapng`: every packet entering the emulator, both directions, with the
//! emulator's decision about it in its pcapng comment.
//!
//! - [`Tracker`] (pure, one per direction, in the forwarding thread) follows each packet from
//!   [`Emulator::enqueue`](socklab_impair::Emulator::enqueue) to the release or loss of each
//!   of its copies: its decisions come from the model's counters around the `enqueue` call,
//!   its copies from [`Emulator::copies_queued`](socklab_impair::Emulator::copies_queued) and
//!   [`Emulator::poll_transmit_copy`](socklab_impair::Emulator::poll_transmit_copy). When the
//!   packet's fate is complete it becomes a [`Record`].
//! - [`Capture`] owns the file and a writer thread; forwarding threads hand records to it
//!   through a bounded channel ([`CaptureTap::send`]) and never wait: a record that does not
//!   fit is counted as not captured, and the counts are written in the file's interface
//!   statistics and returned in the [`CaptureSummary`].
//!
//! The file: one section; per capture window (a repetition, or the whole link) and direction
//! one interface (`c2s` / `s2c` with the window's label as description), raw IP, nanosecond
//! timestamps of the packet's arrival at the emulator; each packet's comment is
//! [`Record::comment`]; at the end one statistics block per interface.

use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use socklab_impair::Stats;

use super::pcapng;
use crate::NetError;

/// Default snap length: whole packets.
pub const DEFAULT_SNAPLEN: u32 = 65535;
/// Default size cap of a capture file: 1 GiB.
pub const DEFAULT_LIMIT: u64 = 1 << 30;
/// Records in flight to the writer thread before forwarding threads stop capturing.
const CHANNEL: usize = 16_384;
/// Room kept below the size cap for the statistics blocks written at the end.
const RESERVE: u64 = 64 * 1024;
/// The direction names, as interfaces and in comments.
pub const DIRS: [&str; 2] = ["c2s", "s2c"];

/// What to capture and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    /// The pcapng file (created or truncated).
    pub path: PathBuf,
    /// Bytes kept of each packet (at least 20: an IP header).
    pub snaplen: u32,
    /// Largest file; packets past it are counted, not written.
    pub limit_bytes: u64,
}

impl CaptureConfig {
    /// A capture into `path` with the default snap length and size cap.
    pub fn new(path: impl Into<PathBuf>) -> CaptureConfig {
        CaptureConfig {
            path: path.into(),
            snaplen: DEFAULT_SNAPLEN,
            limit_bytes: DEFAULT_LIMIT,
        }
    }
}

/// What happened to one delivered copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopyFate {
    /// Release time the model scheduled minus arrival time, ns.
    pub queued_ns: u64,
    /// The copy left with ECN CE set where the packet arrived without it.
    pub ecn_ce: bool,
    /// Writing it to the far device failed (it is lost).
    pub write_failed: bool,
}

/// One packet as it entered the emulator, and the emulator's decisions about it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// 0 client → server, 1 server → client.
    pub dir: usize,
    /// Capture window the packet arrived in (0: outside any repetition).
    pub run: u32,
    /// The packet's number in its direction (from 1, since the link started).
    pub number: u64,
    /// Arrival, ns since the Unix epoch.
    pub t_ns: u64,
    /// The packet's length.
    pub original_len: u32,
    /// Its first `snaplen` bytes, as they arrived.
    pub data: Vec<u8>,
    /// Lost (the loss model).
    pub dropped: bool,
    /// Copies dropped because the queue held `limit` packets.
    pub queue_dropped: u32,
    /// A second copy was made.
    pub duplicated: bool,
    /// A bit was flipped.
    pub corrupted: bool,
    /// Copies sent at once by `reorder`.
    pub reordered: u32,
    /// Each delivered copy, in release order.
    pub copies: Vec<CopyFate>,
    /// Copies still queued when the capture ended.
    pub unreleased: u32,
}

impl Record {
    /// The packet's pcapng comment: words separated by one space, in this order: the
    /// direction (`c2s`/`s2c`), `#N` (its number), then `dropped` (loss), `queue-dropped`
    /// (once per copy), `duplicated`, `corrupted`, `reordered` (once per copy), then per
    /// delivered copy `queued_ns=N` followed by `ecn-ce` / `write-failed` when they apply, and
    /// `unreleased` per copy still queued at the end. E.g. `c2s #42 duplicated queued_ns=0
    /// queued_ns=0`, `s2c #7 dropped`.
    pub fn comment(&self) -> String {
        let mut s = format!("{} #{}", DIRS[self.dir.min(1)], self.number);
        if self.dropped {
            s += " dropped";
        }
        for _ in 0..self.queue_dropped {
            s += " queue-dropped";
        }
        if self.duplicated {
            s += " duplicated";
        }
        if self.corrupted {
            s += " corrupted";
        }
        for _ in 0..self.reordered {
            s += " reordered";
        }
        for c in &self.copies {
            s += &format!(" queued_ns={}", c.queued_ns);
            if c.ecn_ce {
                s += " ecn-ce";
            }
            if c.write_failed {
                s += " write-failed";
            }
        }
        for _ in 0..self.unreleased {
            s += " unreleased";
        }
        s
    }
}

/// The ECN field of an IPv4/IPv6 packet (3 = CE).
pub fn ecn(p: &[u8]) -> u8 {
    match p.first().map(|b| b >> 4) {
        Some(4) => p.get(1).map_or(0, |b| b & 3),
        Some(6) => p.get(1).map_or(0, |b| (b >> 4) & 3),
        _ => 0,
    }
}

/// A packet between [`Tracker::begin`] and [`Tracker::end`].
#[derive(Debug)]
pub struct Arrival {
    rec: Record,
    ecn: u8,
}

#[derive(Debug)]
struct Open {
    rec: Record,
    ecn: u8,
    /// Arrival on the forwarding thread's clock, ns.
    at: u64,
    remaining: u32,
}

/// Follows one direction's packets through the model (see the module doc). Pure: times are
/// the forwarding thread's (ns since the link's start); `wall_ns` maps them to the Unix epoch.
#[derive(Debug)]
pub struct Tracker {
    dir: usize,
    snaplen: usize,
    wall_ns: u64,
    next: u64,
    open: HashMap<u64, Open>,
    /// (model, copy) → packet number.
    copies: HashMap<(u32, u64), u64>,
}

impl Tracker {
    /// A tracker of direction `dir` keeping `snaplen` bytes per packet; the forwarding
    /// thread's time 0 is `wall_ns` ns after the Unix epoch.
    pub fn new(dir: usize, snaplen: u32, wall_ns: u64) -> Tracker {
        Tracker {
            dir,
            snaplen: snaplen as usize,
            wall_ns,
            next: 0,
            open: HashMap::new(),
            copies: HashMap::new(),
        }
    }

    /// A packet arrives (call before handing it to the model, which may change it).
    pub fn begin(&mut self, run: u32, now_ns: u64, packet: &[u8]) -> Arrival {
        self.next += 1;
        Arrival {
            rec: Record {
                dir: self.dir,
                run,
                number: self.next,
                t_ns: self.wall_ns + now_ns,
                original_len: packet.len() as u32,
                data: packet[..packet.len().min(self.snaplen)].to_vec(),
                ..Record::default()
            },
            ecn: ecn(packet),
        }
    }

    /// The model took the packet: `before` and `after` are its counters around `enqueue`,
    /// `copies` the copies it queued (`copies_queued` before + 1 ..= after), `model` which
    /// model instance (a link re-specified runs a new one), `now_ns` the arrival time given to
    /// `enqueue`. The record when the packet's fate is already complete (no copy queued).
    pub fn end(
        &mut self,
        a: Arrival,
        now_ns: u64,
        model: u32,
        before: &Stats,
        after: &Stats,
        copies: Range<u64>,
    ) -> Option<Record> {
        let mut rec = a.rec;
        let d = |f: fn(&Stats) -> u64| f(after).saturating_sub(f(before));
        rec.dropped = d(|s| s.dropped) > 0;
        rec.queue_dropped = d(|s| s.queue_dropped) as u32;
        rec.duplicated = d(|s| s.duplicated) > 0;
        rec.corrupted = d(|s| s.corrupted) > 0;
        rec.reordered = d(|s| s.reordered) as u32;
        let n = copies.end.saturating_sub(copies.start) as u32;
        if n == 0 {
            return Some(rec);
        }
        for c in copies {
            self.copies.insert((model, c), rec.number);
        }
        self.open.insert(
            rec.number,
            Open {
                rec,
                ecn: a.ecn,
                at: now_ns,
                remaining: n,
            },
        );
        None
    }

    /// Copy `copy` of model `model`, scheduled for `due_ns`, left as `packet` (`write_failed`:
    /// writing it failed). The record when it was the packet's last copy.
    pub fn released(
        &mut self,
        model: u32,
        copy: u64,
        due_ns: u64,
        packet: &[u8],
        write_failed: bool,
    ) -> Option<Record> {
        let number = self.copies.remove(&(model, copy))?;
        let o = self.open.get_mut(&number)?;
        o.rec.copies.push(CopyFate {
            queued_ns: due_ns.saturating_sub(o.at),
            ecn_ce: ecn(packet) == 3 && o.ecn != 3,
            write_failed,
        });
        o.remaining -= 1;
        if o.remaining > 0 {
            return None;
        }
        self.open.remove(&number).map(|o| o.rec)
    }

    /// The packets still in the model (their unreleased copies counted), in arrival order;
    /// the tracker is empty afterwards.
    pub fn finish(&mut self) -> Vec<Record> {
        self.copies.clear();
        let mut v: Vec<Record> = self
            .open
            .drain()
            .map(|(_, mut o)| {
                o.rec.unreleased = o.remaining;
                o.rec
            })
            .collect();
        v.sort_by_key(|r| r.number);
        v
    }

    /// Packets whose fate is still open.
    pub fn open(&self) -> usize {
        self.open.len()
    }
}

enum Msg {
    /// A capture window starts: its number and label.
    Window(u32, String),
    Record(Record),
}

#[derive(Debug, Default)]
struct Shared {
    /// Records the channel could not take, per (window, direction).
    behind: Mutex<HashMap<(u32, usize), u64>>,
    behind_total: AtomicU64,
}

/// Hands records to a [`Capture`]'s writer; cloned into each forwarding thread.
#[derive(Debug, Clone)]
pub struct CaptureTap {
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
    snaplen: u32,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

impl CaptureTap {
    /// Queues a record for the file without waiting; when the writer is behind, the record is
    /// counted as not captured.
    pub fn send(&self, r: Record) {
        let key = (r.run, r.dir);
        match self.tx.try_send(Msg::Record(r)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.shared.behind_total.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut m) = self.shared.behind.lock() {
                    *m.entry(key).or_default() += 1;
                }
            }
        }
    }

    /// Bytes kept of each packet.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }
}

/// What a finished capture holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureSummary {
    /// The file.
    pub path: PathBuf,
    /// Packets written.
    pub packets: u64,
    /// Packets not written because the writer fell behind the forwarding threads.
    pub behind: u64,
    /// Packets not written because the file reached its size cap.
    pub over_limit: u64,
    /// The file's size.
    pub bytes: u64,
}

impl CaptureSummary {
    /// One line for stderr.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "capture: {} packets in {} ({:.1} MB)",
            self.packets,
            self.path.display(),
            self.bytes as f64 / 1e6
        );
        if self.behind + self.over_limit > 0 {
            s += &format!(
                "; NOT captured: {} (the writer fell behind) + {} (the size cap, --capture-limit)",
                self.behind, self.over_limit
            );
        }
        s
    }
}

/// A capture file being written (see the module doc).
#[derive(Debug)]
pub struct Capture {
    tx: Option<SyncSender<Msg>>,
    shared: Arc<Shared>,
    snaplen: u32,
    next_window: std::sync::atomic::AtomicU32,
    writer: Option<JoinHandle<Result<CaptureSummary, String>>>,
}

impl Capture {
    /// Creates the file and starts its writer; window 0 (packets outside any repetition)
    /// carries `label`.
    pub fn create(cfg: &CaptureConfig, label: &str) -> Result<Capture, NetError> {
        if cfg.snaplen < 20 {
            return Err(NetError::Invalid(format!(
                "--capture-snaplen {}: keep at least 20 bytes (an IP header); 65535 keeps whole packets",
                cfg.snaplen
            )));
        }
        if cfg.limit_bytes < 2 * RESERVE {
            return Err(NetError::Invalid(format!(
                "--capture-limit {}: give at least 128K",
                cfg.limit_bytes
            )));
        }
        let file = std::fs::File::create(&cfg.path).map_err(|e| {
            NetError::Invalid(format!(
                "--capture {}: cannot create it: {e}",
                cfg.path.display()
            ))
        })?;
        let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL);
        let shared = Arc::new(Shared::default());
        let w = Writer {
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            path: cfg.path.clone(),
            snaplen: cfg.snaplen,
            limit: cfg.limit_bytes,
            labels: HashMap::from([(0, label.to_string())]),
            ifaces: Vec::new(),
            index: HashMap::new(),
            written: 0,
            packets: 0,
            over_limit: 0,
            buf: Vec::with_capacity(1 << 16),
            error: None,
        };
        let sh = shared.clone();
        let writer = std::thread::Builder::new()
            .name("sl-capture".into())
            .spawn(move || w.run(rx, &sh))
            .map_err(|e| NetError::io("spawn capture writer", e))?;
        Ok(Capture {
            tx: Some(tx),
            shared,
            snaplen: cfg.snaplen,
            next_window: std::sync::atomic::AtomicU32::new(1),
            writer: Some(writer),
        })
    }

    /// A handle for a forwarding thread.
    pub fn tap(&self) -> Option<CaptureTap> {
        Some(CaptureTap {
            tx: self.tx.clone()?,
            shared: self.shared.clone(),
            snaplen: self.snaplen,
        })
    }

    /// Starts a new capture window labelled `label` (e.g. `cell 2 rep 1: link = loss 5%`);
    /// returns its number, which the link is then told ([`super::EmulatedLink::mark`]).
    pub fn window(&self, label: &str) -> u32 {
        let n = self.next_window.fetch_add(1, Ordering::Relaxed);
        if let Some(tx) = &self.tx {
            // Blocking: the window's label must reach the writer before its packets.
            let _ = tx.send(Msg::Window(n, label.to_string()));
        }
        n
    }

    /// Closes the file (after every tap is dropped: the links stopped) and returns what it
    /// holds.
    pub fn finish(mut self) -> Result<CaptureSummary, NetError> {
        self.close()
    }

    fn close(&mut self) -> Result<CaptureSummary, NetError> {
        drop(self.tx.take());
        let Some(w) = self.writer.take() else {
            return Ok(CaptureSummary::default());
        };
        let mut s = w
            .join()
            .map_err(|_| NetError::Link("the capture writer panicked".into()))?
            .map_err(NetError::Link)?;
        s.behind = self.shared.behind_total.load(Ordering::Relaxed);
        Ok(s)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

struct Iface {
    stats: pcapng::IfStats,
    written: u64,
    over_limit: u64,
    key: (u32, usize),
}

struct Writer {
    out: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    snaplen: u32,
    limit: u64,
    labels: HashMap<u32, String>,
    ifaces: Vec<Iface>,
    index: HashMap<(u32, usize), u32>,
    written: u64,
    packets: u64,
    over_limit: u64,
    buf: Vec<u8>,
    error: Option<String>,
}

impl Writer {
    fn emit(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(&self.buf) {
                self.error = Some(format!("writing {}: {e}", self.path.display()));
            }
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
    }

    fn iface(&mut self, run: u32, dir: usize) -> u32 {
        if let Some(&i) = self.index.get(&(run, dir)) {
            return i;
        }
        let i = self.ifaces.len() as u32;
        let label = self.labels.get(&run).cloned().unwrap_or_default();
        let what = if dir == 0 {
            "client -> server"
        } else {
            "server -> client"
        };
        pcapng::interface(
            &mut self.buf,
            DIRS[dir],
            &format!("{what} entering socklab's emulator; {label}"),
            self.snaplen,
        );
        self.emit();
        self.ifaces.push(Iface {
            stats: pcapng::IfStats::default(),
            written: 0,
            over_limit: 0,
            key: (run, dir),
        });
        self.index.insert((run, dir), i);
        i
    }

    fn record(&mut self, r: &Record) {
        let i = self.iface(r.run, r.dir);
        let f = &mut self.ifaces[i as usize];
        if f.stats.start_ns == 0 {
            f.stats.start_ns = r.t_ns;
        }
        f.stats.end_ns = f.stats.end_ns.max(r.t_ns);
        let comment = r.comment();
        pcapng::packet(&mut self.buf, i, r.t_ns, &r.data, r.original_len, &comment);
        if self.written + self.buf.len() as u64 + RESERVE > self.limit {
            self.buf.clear();
            self.ifaces[i as usize].over_limit += 1;
            self.over_limit += 1;
            return;
        }
        self.emit();
        self.ifaces[i as usize].written += 1;
        self.packets += 1;
    }

    fn run(mut self, rx: Receiver<Msg>, shared: &Shared) -> Result<CaptureSummary, String> {
        pcapng::section_header(
            &mut self.buf,
            &format!("socklab {}", env!("CARGO_PKG_VERSION")),
            "packets as they entered socklab's link emulator; each comment is the emulator's decision (see docs/impairment.md, Capture)",
        );
        self.emit();
        while let Ok(m) = rx.recv() {
            match m {
                Msg::Window(n, label) => {
                    self.labels.insert(n, label);
                }
                Msg::Record(r) => self.record(&r),
            }
        }
        // Every interface's counts, with what was not captured and why.
        let behind = shared.behind.lock().map(|m| m.clone()).unwrap_or_default();
        let end = self
            .ifaces
            .iter()
            .map(|f| f.stats.end_ns)
            .max()
            .unwrap_or(0);
        for key in behind.keys() {
            if !self.index.contains_key(key) {
                self.iface(key.0, key.1);
            }
        }
        for i in 0..self.ifaces.len() {
            let f = &self.ifaces[i];
            let late = behind.get(&f.key).copied().unwrap_or(0);
            let missing = late + f.over_limit;
            let mut st = f.stats.clone();
            st.received = f.written + missing;
            st.dropped = missing;
            if missing > 0 {
                st.comment = format!(
                    "{missing} packets not captured: {late} because the capture writer fell behind the emulator, {} because the file reached its size cap (--capture-limit)",
                    f.over_limit
                );
            }
            pcapng::interface_stats(&mut self.buf, i as u32, end, &st);
            self.emit();
        }
        if let Err(e) = self.out.flush() {
            self.error
                .get_or_insert(format!("writing {}: {e}", self.path.display()));
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok(CaptureSummary {
            path: self.path,
            packets: self.packets,
            behind: 0,
            over_limit: self.over_limit,
            bytes: self.written,
        })
    }
}

/// Reads a capture file back: each packet's (interface name, interface description, comment).
/// For tests and checks.
pub fn read_comments(path: &Path) -> Result<Vec<(String, String, String)>, NetError> {
    let bytes = std::fs::read(path).map_err(|e| NetError::io("read capture", e))?;
    let blocks = pcapng::read(&bytes).map_err(|e| NetError::Link(e.to_string()))?;
    let mut ifaces = Vec::new();
    let mut out = Vec::new();
    for b in blocks {
        match b {
            pcapng::Block::Interface {
                name, description, ..
            } => ifaces.push((name.unwrap_or_default(), description.unwrap_or_default())),
            pcapng::Block::Packet { iface, comment, .. } => {
                let (n, d) = ifaces.get(iface as usize).cloned().unwrap_or_default();
                out.push((n, d, comment.unwrap_or_default()));
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_impair::{Emulator, LinkSpec};

    /// Drives an emulator and a tracker together like the forwarding thread does.
    fn drive(spec: &str, packets: u64, seed: u64, drain: bool) -> (Vec<Record>, Stats) {
        let spec: LinkSpec = spec.parse().unwrap();
        let mut e = Emulator::new(spec, seed);
        let mut t = Tracker::new(0, 64, 1_000_000_000);
        let mut out = Vec::new();
        let mut now = 0u64;
        for i in 0..packets {
            let mut p = vec![0x45u8; 100];
            p[1] = (i % 3) as u8; // some ECT, never CE
            let a = t.begin(1, now, &p);
            let before = e.stats().clone();
            let c0 = e.copies_queued();
            e.enqueue(now, p);
            let after = e.stats().clone();
            out.extend(t.end(a, now, 0, &before, &after, c0 + 1..e.copies_queued() + 1));
            now += 10_000;
            while let Some(due) = e.poll_timeout().filter(|&d| d <= now) {
                let (copy, p) = e.poll_transmit_copy(now).unwrap();
                out.extend(t.released(0, copy, due, &p, false));
            }
        }
        if drain {
            while let Some(due) = e.poll_timeout() {
                let (copy, p) = e.poll_transmit_copy(due).unwrap();
                out.extend(t.released(0, copy, due, &p, false));
            }
        }
        out.extend(t.finish());
        (out, e.stats().clone())
    }

    #[test]
    fn records_agree_with_the_models_counts_exactly() {
        let (recs, st) = drive(
            "loss 10% duplicate 5% corrupt 2% reorder 5%",
            20_000,
            7,
            false,
        );
        assert_eq!(recs.len() as u64, st.packets_in);
        let count = |w: &str| {
            recs.iter()
                .map(|r| r.comment().split(' ').filter(|x| *x == w).count() as u64)
                .sum::<u64>()
        };
        assert_eq!(count("dropped"), st.dropped);
        assert_eq!(count("duplicated"), st.duplicated);
        assert_eq!(count("corrupted"), st.corrupted);
        assert_eq!(count("reordered"), st.reordered);
        assert_eq!(count("queue-dropped"), st.queue_dropped);
        let delivered: u64 = recs.iter().map(|r| r.copies.len() as u64).sum();
        let unreleased: u64 = recs.iter().map(|r| u64::from(r.unreleased)).sum();
        assert_eq!(delivered, st.delivered);
        assert_eq!(
            delivered + unreleased + st.dropped + st.queue_dropped,
            st.packets_in + st.duplicated
        );
        assert!(st.dropped > 1500 && st.duplicated > 700, "{st:?}");
        // Numbers are 1..=N, each once.
        let mut nums: Vec<u64> = recs.iter().map(|r| r.number).collect();
        nums.sort_unstable();
        assert_eq!(nums, (1..=20_000).collect::<Vec<_>>());
        assert!(recs
            .iter()
            .all(|r| r.data.len() == 64 && r.original_len == 100));
        assert!(recs.iter().all(|r| r.t_ns >= 1_000_000_000));
    }

    #[test]
    fn queued_time_is_the_models_delay() {
        let (recs, _) = drive("delay 30ms", 50, 1, true);
        assert_eq!(recs.len(), 50);
        for r in &recs {
            assert_eq!(
                r.copies,
                vec![CopyFate {
                    queued_ns: 30_000_000,
                    ..CopyFate::default()
                }]
            );
            assert_eq!(r.comment(), format!("c2s #{} queued_ns=30000000", r.number));
        }
        // 50 packets 10 µs apart and no time to release them: all still queued at the end.
        let (recs, _) = drive("delay 30ms", 50, 1, false);
        assert_eq!(recs.len(), 50);
        assert!(recs
            .iter()
            .all(|r| r.comment() == format!("c2s #{} unreleased", r.number)));
    }

    #[test]
    fn comments_read_as_documented() {
        let r = Record {
            dir: 1,
            number: 9,
            duplicated: true,
            queue_dropped: 1,
            copies: vec![CopyFate {
                queued_ns: 5,
                ecn_ce: true,
                write_failed: false,
            }],
            ..Record::default()
        };
        assert_eq!(
            r.comment(),
            "s2c #9 queue-dropped duplicated queued_ns=5 ecn-ce"
        );
        let r = Record {
            number: 1,
            dropped: true,
            ..Record::default()
        };
        assert_eq!(r.comment(), "c2s #1 dropped");
        assert_eq!(ecn(&[0x45, 0x03]), 3);
        assert_eq!(ecn(&[0x60, 0x30]), 3);
        assert_eq!(ecn(&[]), 0);
    }

    /// The writer: windows become interfaces, records packets with their comments, and what
    /// does not fit under the size cap is counted in the statistics.
    #[test]
    fn the_file_holds_windows_packets_and_what_was_not_captured() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcapng");
        let c = Capture::create(
            &CaptureConfig {
                path: path.clone(),
                snaplen: 2000,
                limit_bytes: 2 * RESERVE,
            },
            "outside",
        )
        .unwrap();
        let tap = c.tap().unwrap();
        let w = c.window("cell 1 rep 1");
        assert_eq!(w, 1);
        for n in 1..=60 {
            tap.send(Record {
                dir: (n % 2) as usize,
                run: if n <= 2 { 0 } else { w },
                number: n,
                t_ns: 1_700_000_000_000_000_000 + n,
                original_len: 1500,
                data: vec![0x45; 1500],
                dropped: n % 5 == 0,
                ..Record::default()
            });
        }
        drop(tap);
        let s = c.finish().unwrap();
        assert_eq!(s.behind, 0);
        assert!(s.packets > 5 && s.over_limit > 0, "{s:?}");
        assert_eq!(s.packets + s.over_limit, 60);
        assert!(s.bytes <= 2 * RESERVE);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, s.bytes);
        let blocks = pcapng::read(&bytes).unwrap();
        let names: Vec<String> = blocks
            .iter()
            .filter_map(|b| match b {
                pcapng::Block::Interface {
                    name, description, ..
                } => Some(format!(
                    "{} {}",
                    name.clone().unwrap(),
                    description.clone().unwrap()
                )),
                _ => None,
            })
            .collect();
        assert_eq!(names.len(), 4, "{names:?}");
        assert!(names[0].starts_with("s2c ") && names[0].ends_with("; outside"));
        assert!(names[2].starts_with("s2c ") && names[2].ends_with("; cell 1 rep 1"));
        let missing: u64 = blocks
            .iter()
            .filter_map(|b| match b {
                pcapng::Block::Stats { dropped, .. } => *dropped,
                _ => None,
            })
            .sum();
        assert_eq!(missing, s.over_limit);
        let comments = read_comments(&path).unwrap();
        assert_eq!(comments.len() as u64, s.packets);
        assert_eq!(comments[0].2, "s2c #1");
        assert_eq!(comments[0].0, "s2c");
    }
}
