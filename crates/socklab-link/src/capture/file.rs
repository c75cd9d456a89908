//! The capture file: [`Capture`] owns it and its writer thread; [`CaptureTap`] hands records
//! to it from the forwarding threads without waiting.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::super::pcapng;
use super::{CaptureConfig, Record, DIRS};
use crate::LinkError;

/// Records in flight to the writer thread before forwarding threads stop capturing.
const CHANNEL: usize = 16_384;
/// The smallest size cap.
const MIN_LIMIT: u64 = 128 * 1024;

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
                "; NOT captured: {} (the writer fell behind) + {} (the size cap, `capture_limit`)",
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
    pub fn create(cfg: &CaptureConfig, label: &str) -> Result<Capture, LinkError> {
        if cfg.snaplen < 20 {
            return Err(LinkError::Invalid(format!(
                "`capture_snaplen` {}: keep at least 20 bytes (an IP header); 65535 keeps whole packets",
                cfg.snaplen
            )));
        }
        if cfg.limit_bytes < MIN_LIMIT {
            return Err(LinkError::Invalid(format!(
                "`capture_limit` {}: give at least 128K",
                cfg.limit_bytes
            )));
        }
        let file = open_new(&cfg.path, cfg.force)?;
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
            unlisted: 0,
            isb_max: isb_max(),
            buf: Vec::with_capacity(1 << 16),
            error: None,
        };
        let sh = shared.clone();
        let writer = std::thread::Builder::new()
            .name("sl-capture".into())
            .spawn(move || w.run(rx, &sh))
            .map_err(|e| LinkError::io("spawn capture writer", e))?;
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
    pub fn finish(mut self) -> Result<CaptureSummary, LinkError> {
        self.close()
    }

    fn close(&mut self) -> Result<CaptureSummary, LinkError> {
        drop(self.tx.take());
        let Some(w) = self.writer.take() else {
            return Ok(CaptureSummary::default());
        };
        let mut s = w
            .join()
            .map_err(|_| LinkError::Link("the capture writer panicked".into()))?
            .map_err(LinkError::Link)?;
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
    /// Packets of windows whose interface block did not fit under the cap (in no interface's
    /// counts: the last interface's statistics comment tells them).
    unlisted: u64,
    /// The largest statistics block of one interface: kept free under the cap per interface.
    isb_max: u64,
    buf: Vec<u8>,
    error: Option<String>,
}

/// The statistics comment of an interface: `late` packets the writer fell behind on, `over`
/// past the cap, `unlisted` of later windows that got no interface (told on the last one).
fn stats_comment(late: u64, over: u64, unlisted: u64) -> String {
    let mut s = String::new();
    if late.saturating_add(over) > 0 {
        s = format!(
            "{} packets not captured: {late} because the capture writer fell behind the emulator, {over} because the file reached its size cap (`capture_limit`)",
            late.saturating_add(over)
        );
    }
    if unlisted > 0 {
        if !s.is_empty() {
            s += "; ";
        }
        s += &format!(
            "{unlisted} packets of later capture windows not captured: their interface blocks did not fit under the size cap (`capture_limit`)"
        );
    }
    s
}

/// An upper bound of one interface's statistics block (every number at its widest).
fn isb_max() -> u64 {
    let st = pcapng::IfStats {
        start_ns: u64::MAX,
        end_ns: u64::MAX,
        received: u64::MAX,
        dropped: u64::MAX,
        comment: stats_comment(u64::MAX, u64::MAX, 0),
    };
    pcapng::interface_stats(&mut Vec::new(), u32::MAX, u64::MAX, &st) as u64
}

/// The room the last interface's comment on unlisted packets takes beyond [`isb_max`].
fn unlisted_max() -> u64 {
    let a = stats_comment(u64::MAX, u64::MAX, u64::MAX).len();
    (a - stats_comment(u64::MAX, u64::MAX, 0).len() + 4) as u64
}

/// Whether a capture may be created at `path` (see [`Capture::create`]): a symbolic link or
/// anything but a regular file is refused, an existing file too unless `force`; `Ok(true)`
/// when an existing file is to be replaced. Callers check it before anything runs.
pub fn check_path(path: &Path, force: bool) -> Result<bool, LinkError> {
    let shown = path.display();
    let bad = |m: String| Err(LinkError::Invalid(m));
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => bad(format!(
            "`capture` {shown}: is a symbolic link, which is never followed; name a new file (not a link)"
        )),
        Ok(m) if !m.file_type().is_file() => bad(format!(
            "`capture` {shown}: exists and is not a regular file; name a new file"
        )),
        Ok(_) if !force => bad(format!(
            "`capture` {shown}: the file exists; name a new file, or add `capture_force` to replace it"
        )),
        Ok(_) => Ok(true),
        Err(_) => Ok(false),
    }
}

/// Creates the capture file: never through a symbolic link, never over an existing file but
/// with `force`, which replaces a regular file only. `create_new` is `O_CREAT | O_EXCL`, which
/// fails on any name that exists, a link (even a dangling one) included, and never follows it:
/// a link planted between the check and the open is refused too.
fn open_new(path: &Path, force: bool) -> Result<std::fs::File, LinkError> {
    let shown = path.display();
    if check_path(path, force)? {
        std::fs::remove_file(path).map_err(|e| {
            LinkError::Invalid(format!("`capture` {shown}: cannot replace it: {e}"))
        })?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            LinkError::Invalid(if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!("`capture` {shown}: something was created there meanwhile; name a new file")
            } else {
                format!("`capture` {shown}: cannot create it: {e}")
            })
        })
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

    /// The room the file must keep for the statistics of `n` interfaces.
    fn kept(&self, n: usize) -> u64 {
        n as u64 * self.isb_max + unlisted_max()
    }

    /// The interface of window `run`, direction `dir`: its block written when first needed,
    /// `None` when it (with its statistics) does not fit under the cap.
    fn iface(&mut self, run: u32, dir: usize) -> Option<u32> {
        if let Some(&i) = self.index.get(&(run, dir)) {
            return Some(i);
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
        if self.written + self.buf.len() as u64 + self.kept(self.ifaces.len() + 1) > self.limit {
            self.buf.clear();
            return None;
        }
        self.emit();
        self.ifaces.push(Iface {
            stats: pcapng::IfStats::default(),
            written: 0,
            over_limit: 0,
            key: (run, dir),
        });
        self.index.insert((run, dir), i);
        Some(i)
    }

    fn record(&mut self, r: &Record) {
        let Some(i) = self.iface(r.run, r.dir) else {
            self.unlisted += 1;
            self.over_limit += 1;
            return;
        };
        let f = &mut self.ifaces[i as usize];
        if f.stats.start_ns == 0 {
            f.stats.start_ns = r.t_ns;
        }
        f.stats.end_ns = f.stats.end_ns.max(r.t_ns);
        let comment = r.comment();
        pcapng::packet(&mut self.buf, i, r.t_ns, &r.data, r.original_len, &comment);
        if self.written + self.buf.len() as u64 + self.kept(self.ifaces.len()) > self.limit {
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
        let mut keys: Vec<_> = behind.iter().collect();
        keys.sort();
        for (key, n) in keys {
            if !self.index.contains_key(key) && self.iface(key.0, key.1).is_none() {
                self.unlisted += n;
            }
        }
        let last = self.ifaces.len().saturating_sub(1);
        for i in 0..self.ifaces.len() {
            let f = &self.ifaces[i];
            let late = behind.get(&f.key).copied().unwrap_or(0);
            let missing = late + f.over_limit;
            let mut st = f.stats.clone();
            st.received = f.written + missing;
            st.dropped = missing;
            let unlisted = if i == last { self.unlisted } else { 0 };
            st.comment = stats_comment(late, f.over_limit, unlisted);
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
pub fn read_comments(path: &Path) -> Result<Vec<(String, String, String)>, LinkError> {
    let bytes = std::fs::read(path).map_err(|e| LinkError::io("read capture", e))?;
    let blocks = pcapng::read(&bytes).map_err(|e| LinkError::Link(e.to_string()))?;
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
                limit_bytes: MIN_LIMIT,
                force: false,
            },
            "outside",
        )
        .unwrap();
        let tap = c.tap().unwrap();
        let w = c.window("cell 1 rep 1");
        assert_eq!(w, 1);
        for n in 1..=120 {
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
        assert_eq!(s.packets + s.over_limit, 120);
        assert!(s.bytes <= MIN_LIMIT);
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

    fn cfg(path: &Path, force: bool) -> CaptureConfig {
        CaptureConfig {
            path: path.to_path_buf(),
            snaplen: 2000,
            limit_bytes: MIN_LIMIT,
            force,
        }
    }

    /// Issue 26 item 4: a planted link is never followed and an existing file never
    /// overwritten; `capture_force` replaces a regular file only.
    #[test]
    fn links_and_existing_files_are_refused_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = dir.path().join("link.pcapng");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let dangling = dir.path().join("dangling.pcapng");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        let err = |p: &Path, force| {
            Capture::create(&cfg(p, force), "x")
                .unwrap_err()
                .to_string()
        };
        for force in [false, true] {
            for p in [&link, &dangling] {
                let e = err(p, force);
                assert!(
                    e.contains("is a symbolic link") && e.contains(&p.display().to_string()),
                    "{e}"
                );
                assert!(!e.contains('\n'), "{e}");
            }
            let e = err(dir.path(), force);
            assert!(e.contains("not a regular file"), "{e}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!dir.path().join("nowhere").exists());
        let e = err(&victim, false);
        assert!(
            e.contains("the file exists") && e.contains("`capture_force`"),
            "{e}"
        );
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // Forced: the regular file is replaced by a capture.
        Capture::create(&cfg(&victim, true), "x")
            .unwrap()
            .finish()
            .unwrap();
        assert!(pcapng::read(&std::fs::read(&victim).unwrap()).is_ok());
        // A new name needs no force.
        let new = dir.path().join("new.pcapng");
        Capture::create(&cfg(&new, false), "x")
            .unwrap()
            .finish()
            .unwrap();
        assert!(new.exists());
    }

    /// Issue 26 item 4: 400 windows of a few packets each (interface blocks with long labels,
    /// and their statistics at the end) stay under the cap; what did not fit is counted.
    #[test]
    fn many_windows_stay_under_the_size_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.pcapng");
        let c = Capture::create(&cfg(&path, false), "outside").unwrap();
        let tap = c.tap().unwrap();
        let mut sent = 0;
        for rep in 1..=400u32 {
            let w = c.window(&format!(
                "cell {} rep {rep}: link = loss 5% delay 20ms rate 100mbit limit 1000 aqm fq_codel ecn",
                rep % 7
            ));
            for dir in [0, 1] {
                sent += 1;
                tap.send(Record {
                    dir,
                    run: w,
                    number: sent,
                    t_ns: 1_700_000_000_000_000_000 + sent,
                    original_len: 100,
                    data: vec![0x45; 100],
                    dropped: true,
                    ..Record::default()
                });
            }
        }
        drop(tap);
        let s = c.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, s.bytes);
        assert!(
            s.bytes <= MIN_LIMIT,
            "{} bytes over a cap of {MIN_LIMIT}",
            s.bytes
        );
        assert_eq!(s.packets + s.over_limit, sent);
        assert!(s.over_limit > 0, "{s:?}");
        let blocks = pcapng::read(&bytes).unwrap();
        let last = blocks
            .iter()
            .rev()
            .find_map(|b| match b {
                pcapng::Block::Stats { comment, .. } => comment.clone(),
                _ => None,
            })
            .unwrap_or_default();
        assert!(last.contains("later capture windows"), "{last}");
    }
}
