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
use std::ops::Range;
use std::path::PathBuf;

use socklab_impair::Stats;

mod file;

pub use file::{read_comments, Capture, CaptureSummary, CaptureTap};

/// Default snap length: whole packets.
pub const DEFAULT_SNAPLEN: u32 = 65535;
/// Default size cap of a capture file: 1 GiB.
pub const DEFAULT_LIMIT: u64 = 1 << 30;
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
}
