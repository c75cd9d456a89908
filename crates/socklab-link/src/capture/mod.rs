//! `--capture FILE.pcapng`: every packet entering the emulator, both directions, with the
//! emulator's decision about it in its pcapng comment.
//!
//! - [`Tracker`] (pure, one per direction, in the forwarding thread) follows each packet from
//!   [`Emulator::enqueue`](socklab_impair::Emulator::enqueue) to the release or loss of each
//!   of its copies, from the model's own per-packet events
//!   ([`Emulator::observe`](socklab_impair::Emulator::observe),
//!   [`Event`](socklab_impair::Event)): every decision at the instant the model takes it,
//!   including those taken at dequeue (the queue discipline's drops and marks) and the wait
//!   at the bottleneck. When the packet's fate is complete it becomes a [`Record`].
//! - [`Capture`] owns the file and a writer thread; forwarding threads hand records to it
//!   through a bounded channel ([`CaptureTap::send`]) and never wait: a record that does not
//!   fit is counted as not captured, and the counts are written in the file's interface
//!   statistics and returned in the [`CaptureSummary`].
//!
//! The file: one section; per capture window (a repetition, or the whole link) and direction
//! one interface (`c2s` / `s2c` with the window's label as description), raw IP, nanosecond
//! timestamps of the packet's arrival at the emulator; each packet's comment is
//! [`Record::comment`]; at the end one statistics block per interface.

use std::path::PathBuf;

use socklab_impair::{Event, EventKind, PacketMap};

mod file;

pub use file::{check_path, read_comments, Capture, CaptureSummary, CaptureTap};

/// Default snap length: whole packets.
pub const DEFAULT_SNAPLEN: u32 = 65535;
/// Default size cap of a capture file: 1 GiB.
pub const DEFAULT_LIMIT: u64 = 1 << 30;
/// The direction names, as interfaces and in comments.
pub const DIRS: [&str; 2] = ["c2s", "s2c"];

/// What to capture and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    /// The pcapng file: created new; a symbolic link or an existing file is refused.
    pub path: PathBuf,
    /// Bytes kept of each packet (at least 20: an IP header).
    pub snaplen: u32,
    /// Largest file, every block counted; packets past it are counted, not written.
    pub limit_bytes: u64,
    /// `capture_force`: an existing regular file is replaced (never a link or anything else).
    pub force: bool,
}

impl CaptureConfig {
    /// A capture into `path` with the default snap length and size cap.
    pub fn new(path: impl Into<PathBuf>) -> CaptureConfig {
        CaptureConfig {
            path: path.into(),
            snaplen: DEFAULT_SNAPLEN,
            limit_bytes: DEFAULT_LIMIT,
            force: false,
        }
    }
}

/// What happened to one delivered copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopyFate {
    /// Its time in the link: the release time the model scheduled minus the packet's arrival,
    /// ns.
    pub queued_ns: u64,
    /// The part of it spent waiting at the bottleneck (the rate, trace or queue discipline)
    /// before its transmission started, ns (the wait `link_*_qdelay_*` summarise).
    pub qdelay_ns: u64,
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
    /// A loss event marked it Congestion Experienced instead (`ecn`).
    pub ecn_marked: bool,
    /// Copies dropped because the queue held `limit` packets.
    pub queue_dropped: u32,
    /// Copies the queue discipline dropped, each with its time in the queue, ns.
    pub aqm_dropped: Vec<u64>,
    /// A second copy was made.
    pub duplicated: bool,
    /// A bit was flipped.
    pub corrupted: bool,
    /// Copies sent at once by `reorder`.
    pub reordered: u32,
    /// Copies the queue discipline marked Congestion Experienced instead of dropping them,
    /// each with its time in the queue so far, ns.
    pub aqm_marked: Vec<u64>,
    /// Each delivered copy, in release order.
    pub copies: Vec<CopyFate>,
    /// Copies still queued when the capture ended.
    pub unreleased: u32,
}

impl Record {
    /// The packet's pcapng comment: words separated by one space, in this order: the
    /// direction (`c2s`/`s2c`), `#N` (its number), then `dropped` (loss), `ecn-marked` (a loss
    /// event marked it CE instead), `queue-dropped` (once per copy), `aqm-dropped
    /// sojourn_ns=N` (once per copy the queue discipline dropped), `duplicated`, `corrupted`,
    /// `reordered` (once per copy), `aqm-marked sojourn_ns=N` (once per copy it marked CE),
    /// then per delivered copy `queued_ns=N` (its time in the link), `qdelay_ns=N` when it
    /// waited at the bottleneck, `ecn-ce` / `write-failed` when they apply, and `unreleased`
    /// per copy still queued at the end. E.g. `c2s #42 duplicated queued_ns=0 queued_ns=0`,
    /// `s2c #7 dropped`, `c2s #9 aqm-marked sojourn_ns=5200000 queued_ns=5800000
    /// qdelay_ns=5200000 ecn-ce`.
    pub fn comment(&self) -> String {
        use std::fmt::Write;
        let mut s = format!("{} #{}", DIRS[self.dir.min(1)], self.number);
        if self.dropped {
            s += " dropped";
        }
        if self.ecn_marked {
            s += " ecn-marked";
        }
        for _ in 0..self.queue_dropped {
            s += " queue-dropped";
        }
        for ns in &self.aqm_dropped {
            let _ = write!(s, " aqm-dropped sojourn_ns={ns}");
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
        for ns in &self.aqm_marked {
            let _ = write!(s, " aqm-marked sojourn_ns={ns}");
        }
        for c in &self.copies {
            let _ = write!(s, " queued_ns={}", c.queued_ns);
            if c.qdelay_ns > 0 {
                let _ = write!(s, " qdelay_ns={}", c.qdelay_ns);
            }
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

/// The ECN field of an IPv4/IPv6 packet (3 = CE; 0 for anything else).
pub fn ecn(p: &[u8]) -> u8 {
    socklab_impair::ip::ecn(p).unwrap_or(0)
}

/// A packet between [`Tracker::begin`] and [`Tracker::enqueued`].
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
    /// Copies still in the model.
    live: u32,
}

/// Follows one direction's packets through the model (see the module doc). Pure: times are
/// the forwarding thread's (ns since the link's start); `wall_ns` maps them to the Unix epoch.
///
/// The model must be observed from its creation ([`Emulator::observe`]); its events are
/// handed over in the order it recorded them: after each `enqueue` ([`Tracker::enqueued`])
/// and after each round of `poll_release` ([`Tracker::released`]).
///
/// [`Emulator::observe`]: socklab_impair::Emulator::observe
#[derive(Debug)]
pub struct Tracker {
    dir: usize,
    snaplen: usize,
    wall_ns: u64,
    next: u64,
    open: PacketMap<u64, Open>,
    /// (model, the model's packet number) → capture number, while that copy is in the model.
    ids: PacketMap<(u32, u64), u64>,
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
            open: PacketMap::default(),
            ids: PacketMap::default(),
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

    /// Model `model` (a link re-specified runs a new one) took the packet `a`: `events` are
    /// the events it recorded since the last hand-over, its `Arrived` among them (the model
    /// may have taken decisions about earlier packets first). Records whose fate is complete
    /// go to `out`.
    pub fn enqueued(
        &mut self,
        a: Arrival,
        model: u32,
        events: impl IntoIterator<Item = Event>,
        out: &mut impl FnMut(Record),
    ) {
        let mut a = Some(a);
        for ev in events {
            self.apply(model, ev, &mut a, &mut std::iter::empty(), out);
        }
        debug_assert!(a.is_none(), "enqueue recorded no Arrived event");
    }

    /// The events model `model` recorded while it released `packets` (each as it left, and
    /// whether writing it to the far device failed), in release order: its `Released` events
    /// name them in the same order. Records whose fate is complete go to `out`.
    pub fn released<'p>(
        &mut self,
        model: u32,
        events: impl IntoIterator<Item = Event>,
        packets: impl IntoIterator<Item = (&'p [u8], bool)>,
        out: &mut impl FnMut(Record),
    ) {
        let mut packets = packets.into_iter();
        for ev in events {
            self.apply(model, ev, &mut None, &mut packets, out);
        }
    }

    fn apply<'p>(
        &mut self,
        model: u32,
        ev: Event,
        arrival: &mut Option<Arrival>,
        packets: &mut impl Iterator<Item = (&'p [u8], bool)>,
        out: &mut impl FnMut(Record),
    ) {
        let key = (model, ev.packet);
        if let EventKind::Arrived { .. } = ev.kind {
            let Some(a) = arrival.take() else { return };
            self.ids.insert(key, a.rec.number);
            self.open.insert(
                a.rec.number,
                Open {
                    rec: a.rec,
                    ecn: a.ecn,
                    at: ev.at_ns,
                    live: 1,
                },
            );
            return;
        }
        // A copy's last event (it left the model) takes its number off the map.
        let last = matches!(
            ev.kind,
            EventKind::Lost
                | EventKind::QueueDropped
                | EventKind::AqmDropped { .. }
                | EventKind::Released { .. }
        );
        let released = match ev.kind {
            EventKind::Released { .. } => packets.next(),
            _ => None,
        };
        let number = if last {
            self.ids.remove(&key)
        } else {
            self.ids.get(&key).copied()
        };
        let Some(number) = number else { return };
        let Some(o) = self.open.get_mut(&number) else {
            return;
        };
        let r = &mut o.rec;
        match ev.kind {
            EventKind::Arrived { .. } => {}
            EventKind::Duplicated { copy } => {
                r.duplicated = true;
                o.live += 1;
                self.ids.insert((model, copy), number);
            }
            EventKind::Lost => r.dropped = true,
            EventKind::LossMarked => r.ecn_marked = true,
            EventKind::Corrupted => r.corrupted = true,
            EventKind::QueueDropped => r.queue_dropped += 1,
            EventKind::Reordered => r.reordered += 1,
            EventKind::AqmDropped { sojourn_ns } => r.aqm_dropped.push(sojourn_ns),
            EventKind::AqmMarked { sojourn_ns } => r.aqm_marked.push(sojourn_ns),
            EventKind::Released { queued_ns } => {
                let (packet, write_failed) = released.unwrap_or((&[], false));
                r.copies.push(CopyFate {
                    queued_ns: ev.at_ns.saturating_sub(o.at),
                    qdelay_ns: queued_ns,
                    ecn_ce: ecn(packet) == 3 && o.ecn != 3,
                    write_failed,
                });
            }
        }
        if last {
            o.live -= 1;
            if o.live == 0 {
                if let Some(o) = self.open.remove(&number) {
                    out(o.rec);
                }
            }
        }
    }

    /// The packets still in the model (their unreleased copies counted), in arrival order;
    /// the tracker is empty afterwards.
    pub fn finish(&mut self) -> Vec<Record> {
        self.ids.clear();
        let mut v: Vec<Record> = self
            .open
            .drain()
            .map(|(_, mut o)| {
                o.rec.unreleased = o.live;
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
    use socklab_impair::{Emulator, LinkSpec, Stats};

    /// An IPv4 UDP packet of `len` bytes from port `sport`, ECN field `ecn`, valid header
    /// checksum.
    fn udp4(len: usize, sport: u16, ecn: u8) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[1] = ecn;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        let mut sum = 0u32;
        for c in p[..20].chunks_exact(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p
    }

    /// Drives an emulator and a tracker together like the forwarding thread does: `packets`
    /// packets of `len` bytes every `gap_ns`, each made by `make(i)`.
    fn drive_with(
        spec: &str,
        packets: u64,
        gap_ns: u64,
        seed: u64,
        drain: bool,
        make: impl Fn(u64) -> Vec<u8>,
    ) -> (Vec<Record>, Stats) {
        let spec: LinkSpec = spec.parse().unwrap();
        let mut e = Emulator::new(spec, seed);
        e.observe(true);
        let mut t = Tracker::new(0, 64, 1_000_000_000);
        let mut out = Vec::new();
        let mut now = 0u64;
        let mut rel: Vec<Vec<u8>> = Vec::new();
        let mut release = |e: &mut Emulator, t: &mut Tracker, now: u64, out: &mut Vec<Record>| {
            rel.clear();
            while let Some((_, p)) = e.poll_release(now) {
                rel.push(p);
            }
            t.released(
                0,
                e.drain_events(),
                rel.iter().map(|p| (&p[..], false)),
                &mut |r| out.push(r),
            );
        };
        for i in 0..packets {
            let p = make(i);
            let a = t.begin(1, now, &p);
            e.enqueue(now, p);
            t.enqueued(a, 0, e.drain_events(), &mut |r| out.push(r));
            now += gap_ns;
            release(&mut e, &mut t, now, &mut out);
        }
        if drain {
            while let Some(next) = e.poll_timeout() {
                now = now.max(next);
                release(&mut e, &mut t, now, &mut out);
            }
        }
        out.extend(t.finish());
        (out, e.stats().clone())
    }

    fn drive(spec: &str, packets: u64, seed: u64, drain: bool) -> (Vec<Record>, Stats) {
        drive_with(spec, packets, 10_000, seed, drain, |i| {
            let mut p = vec![0x45u8; 100];
            p[1] = (i % 3) as u8; // some ECT, never CE
            p
        })
    }

    fn count(recs: &[Record], w: &str) -> u64 {
        recs.iter()
            .map(|r| r.comment().split(' ').filter(|x| *x == w).count() as u64)
            .sum::<u64>()
    }

    /// Every packet once, numbered 1..=N; delivered + unreleased + every kind of drop is
    /// every copy.
    fn assert_accounted(recs: &[Record], st: &Stats, n: u64) {
        assert_eq!(recs.len() as u64, st.packets_in);
        let delivered: u64 = recs.iter().map(|r| r.copies.len() as u64).sum();
        let unreleased: u64 = recs.iter().map(|r| u64::from(r.unreleased)).sum();
        assert_eq!(delivered, st.delivered);
        assert_eq!(
            delivered + unreleased + st.dropped + st.queue_dropped + st.aqm_dropped,
            st.packets_in + st.duplicated
        );
        let mut nums: Vec<u64> = recs.iter().map(|r| r.number).collect();
        nums.sort_unstable();
        assert_eq!(nums, (1..=n).collect::<Vec<_>>());
    }

    #[test]
    fn records_agree_with_the_models_counts_exactly() {
        let (recs, st) = drive(
            "loss 10% duplicate 5% corrupt 2% reorder 5%",
            20_000,
            7,
            false,
        );
        assert_eq!(count(&recs, "dropped"), st.dropped);
        assert_eq!(count(&recs, "duplicated"), st.duplicated);
        assert_eq!(count(&recs, "corrupted"), st.corrupted);
        assert_eq!(count(&recs, "reordered"), st.reordered);
        assert_eq!(count(&recs, "queue-dropped"), st.queue_dropped);
        assert_accounted(&recs, &st, 20_000);
        assert!(st.dropped > 1500 && st.duplicated > 700, "{st:?}");
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

    /// The queue discipline's drops and marks (taken at dequeue, long after the arrival) and
    /// the bottleneck's wait are annotated exactly: the comments add up to the model's counts.
    #[test]
    fn aqm_drops_marks_and_waits_agree_with_the_models_counts() {
        // 1500-byte packets every 400 µs (30 Mbit/s) into 20 Mbit/s: a standing queue. Three
        // flows in a scrambled order, two ECN-capable (marked), the third not (dropped).
        for spec in [
            "rate 20mbit limit 100 aqm codel ecn",
            "rate 20mbit limit 100 aqm fq_codel ecn",
            "rate 20mbit limit 100 aqm pie ecn",
        ] {
            let (recs, st) = drive_with(spec, 20_000, 400_000, 3, true, |i| {
                let f = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60) % 3;
                udp4(1500, 40_000 + f as u16, [2, 1, 0][f as usize])
            });
            assert_accounted(&recs, &st, 20_000);
            assert_eq!(count(&recs, "aqm-dropped"), st.aqm_dropped, "{spec}");
            assert_eq!(count(&recs, "aqm-marked"), st.aqm_marked, "{spec}");
            assert_eq!(count(&recs, "queue-dropped"), st.queue_dropped, "{spec}");
            assert!(st.aqm_marked > 10 && st.aqm_dropped > 10, "{spec}: {st:?}");
            // Every mark reached the wire as CE on a packet that arrived without it.
            let ce = recs
                .iter()
                .flat_map(|r| &r.copies)
                .filter(|c| c.ecn_ce)
                .count() as u64;
            assert_eq!(ce, st.aqm_marked, "{spec}");
            // The waits: their sum is the model's, and each is within the copy's time in
            // the link.
            let waits: u64 = recs
                .iter()
                .flat_map(|r| &r.copies)
                .map(|c| c.qdelay_ns)
                .sum();
            assert!(recs
                .iter()
                .flat_map(|r| &r.copies)
                .all(|c| c.qdelay_ns <= c.queued_ns));
            assert_eq!(
                waits, st.queue_delay_sum_ns,
                "{spec}: every passed packet left"
            );
            // A sojourn is the time the copy had spent queued when the discipline decided:
            // CoDel decides at dequeue, above its 5 ms target; PIE on arrival (0).
            let pie = spec.contains("pie");
            assert!(
                recs.iter()
                    .flat_map(|r| r.aqm_dropped.iter().chain(&r.aqm_marked))
                    .all(|&s| if pie { s == 0 } else { s >= 5_000_000 }),
                "{spec}"
            );
        }
    }

    /// `slot` and a trace hold packets past the delay: the time in the link counts it.
    #[test]
    fn slot_waits_are_in_the_time_in_the_link() {
        let (recs, st) = drive("slot 10ms 10ms", 200, 1, true);
        assert_accounted(&recs, &st, 200);
        // Packets leave in slots 10 ms apart: many wait, none more than a slot.
        let q: Vec<u64> = recs.iter().map(|r| r.copies[0].queued_ns).collect();
        assert!(q.iter().any(|&x| x > 1_000_000), "{q:?}");
        assert!(q.iter().all(|&x| x <= 10_000_000), "{q:?}");
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
                ..CopyFate::default()
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
        let r = Record {
            number: 3,
            ecn_marked: true,
            aqm_dropped: vec![7],
            aqm_marked: vec![4],
            copies: vec![CopyFate {
                queued_ns: 9,
                qdelay_ns: 4,
                ecn_ce: true,
                write_failed: true,
            }],
            ..Record::default()
        };
        assert_eq!(
            r.comment(),
            "c2s #3 ecn-marked aqm-dropped sojourn_ns=7 aqm-marked sojourn_ns=4 queued_ns=9 qdelay_ns=4 ecn-ce write-failed"
        );
        assert_eq!(ecn(&udp4(40, 1, 3)), 3);
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[1] = 0x30;
        assert_eq!(ecn(&v6), 3);
        assert_eq!(ecn(&[]), 0);
    }
}
