//! The rudp server's session table policy and its log of ended sessions, apart from the socket
//! loop in [`super::rudp`] so both are tested without sockets.
//!
//! - [`SessionLimits`] and [`admit`]: who gets a slot when a client proves its address. A full
//!   table (or a source address at its cap) makes room by evicting a session that makes no
//!   progress (finished ones first, then those that never sent a manifest, then the one idle
//!   longest); when every session progresses, the newcomer is refused with a reason the client
//!   prints ("server full").
//! - [`SessionLog`]: what ended sessions leave behind. A server that runs for days must not
//!   keep one record per session: the log keeps totals and the last few sessions only.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

use super::ServerSession;

/// Bounds of the rudp server's session table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLimits {
    /// Most sessions held at once.
    pub max_sessions: usize,
    /// Most sessions from one source IP address (ports do not count: one host may use many).
    pub max_per_source: usize,
    /// A session without progress for this long may be evicted to admit a new client.
    pub stall: Duration,
}

/// Default of [`SessionLimits::max_sessions`].
pub const MAX_SESSIONS: usize = 64;
/// Default of [`SessionLimits::max_per_source`]: a quarter of the table, so one address (or
/// one attacker) cannot fill it alone.
pub const MAX_SESSIONS_PER_SOURCE: usize = 16;
/// Default of [`SessionLimits::stall`].
pub const STALL: Duration = Duration::from_secs(2);

impl Default for SessionLimits {
    fn default() -> SessionLimits {
        SessionLimits {
            max_sessions: MAX_SESSIONS,
            max_per_source: MAX_SESSIONS_PER_SOURCE,
            stall: STALL,
        }
    }
}

/// What [`admit`] needs to know of a session in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The session's connection id.
    pub cid: u64,
    /// Its source address.
    pub ip: IpAddr,
    /// When it last made progress (ns, the server's clock).
    pub last_progress: u64,
    /// True once its manifest arrived (the application-level handshake is complete).
    pub manifest: bool,
    /// True when its transfer is over and it only waits for the close to complete.
    pub finished: bool,
}

/// [`admit`]'s decision for a new client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admission {
    /// There is room.
    Admit,
    /// Close the session with this connection id (it makes no progress), then admit.
    Evict(u64),
    /// No room: tell the client this reason.
    Refuse(String),
}

/// Decides whether a client from `ip` gets a session at `now`, given the sessions in the
/// table. Cost: two passes over at most `max_sessions` slots, only when a client proves its
/// address (never per data packet).
pub(crate) fn admit(
    limits: &SessionLimits,
    ip: IpAddr,
    now: u64,
    slots: impl Iterator<Item = Slot> + Clone,
) -> Admission {
    let stall = limits.stall.as_nanos() as u64;
    let idle = |s: &Slot| now.saturating_sub(s.last_progress);
    // Finished sessions first, then those without a manifest, then the longest idle.
    let victim = |candidates: &mut dyn Iterator<Item = Slot>| {
        candidates
            .filter(|s| s.finished || idle(s) >= stall)
            .min_by_key(|s| (!s.finished, s.manifest, std::cmp::Reverse(idle(s))))
            .map(|s| s.cid)
    };
    let from_ip = slots.clone().filter(|s| s.ip == ip).count();
    if from_ip >= limits.max_per_source {
        return match victim(&mut slots.filter(|s| s.ip == ip)) {
            Some(cid) => Admission::Evict(cid),
            None => Admission::Refuse(format!(
                "server full for {ip}: it has {from_ip} sessions making progress, the most one address may hold (the server's `max_sessions_per_source`); retry when one ends"
            )),
        };
    }
    let total = slots.clone().count();
    if total >= limits.max_sessions {
        return match victim(&mut slots.clone()) {
            Some(cid) => Admission::Evict(cid),
            None => Admission::Refuse(format!(
                "server full: all {total} sessions are making progress; retry when one ends"
            )),
        };
    }
    Admission::Admit
}

/// Totals of the sessions a server has seen end, and the last few of them in full.
#[derive(Debug, Clone, Default)]
pub struct SessionLog {
    /// Sessions that ended (finished, failed, evicted, or still open at the stop).
    pub sessions: u64,
    /// Of those, sessions with an error.
    pub failed: u64,
    /// Files verified and stored.
    pub files_ok: u64,
    /// Files announced and not stored (wrong hash, incomplete, refused).
    pub files_failed: u64,
    /// Bytes written into files.
    pub bytes: u64,
    /// Clients turned down because the table (or their address's share) was full of sessions
    /// making progress; each retry counts.
    pub refused: u64,
    /// Sessions closed without progress to make room for a new client.
    pub evicted: u64,
    /// Sessions closed because they made no progress for the idle timeout.
    pub idle_closed: u64,
    /// Sessions still open when the server stopped (counted in `sessions` too).
    pub open_at_stop: u64,
    /// QUIC handshakes that failed (undecryptable Initials, untrusted certificates, clients
    /// that vanished): not sessions, no state kept.
    pub handshakes_failed: u64,
    recent: VecDeque<ServerSession>,
    keep: usize,
}

/// Sessions [`SessionLog`] keeps in full by default.
pub const KEEP_RECENT: usize = 10;

impl SessionLog {
    /// An empty log keeping the last `keep` sessions in full.
    pub fn new(keep: usize) -> SessionLog {
        SessionLog {
            keep,
            ..SessionLog::default()
        }
    }

    /// A log of `sessions`, every one kept in full (a server that keeps them anyway).
    pub fn from_sessions(sessions: Vec<ServerSession>) -> SessionLog {
        let mut log = SessionLog::new(sessions.len());
        for s in sessions {
            log.record(s);
        }
        log
    }

    /// Counts an ended session into the totals and keeps it among the recent ones.
    pub fn record(&mut self, s: ServerSession) {
        self.sessions += 1;
        self.failed += u64::from(s.error.is_some());
        let ok = s.files.iter().filter(|f| f.ok).count() as u64;
        self.files_ok += ok;
        self.files_failed += s.files.len() as u64 - ok;
        self.bytes += s.bytes;
        if self.keep == 0 {
            return;
        }
        if self.recent.len() == self.keep {
            self.recent.pop_front();
        }
        self.recent.push_back(s);
    }

    /// The last sessions that ended, oldest first (at most the `keep` given to [`Self::new`]).
    pub fn recent(&self) -> impl ExactSizeIterator<Item = &ServerSession> {
        self.recent.iter()
    }

    /// The error of the most recent failed session kept in full.
    pub fn last_error(&self) -> Option<&str> {
        self.recent.iter().rev().find_map(|s| s.error.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn slot(cid: u64, ip: &str, last_progress: u64) -> Slot {
        Slot {
            cid,
            ip: ip.parse().unwrap(),
            last_progress,
            manifest: true,
            finished: false,
        }
    }

    fn limits(max_sessions: usize, max_per_source: usize) -> SessionLimits {
        SessionLimits {
            max_sessions,
            max_per_source,
            stall: Duration::from_secs(2),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn room_admits_and_a_full_table_of_progressing_sessions_refuses() {
        let l = limits(3, 3);
        let now = 100 * S;
        let two = [slot(1, "10.0.0.1", now), slot(2, "10.0.0.2", now)];
        assert_eq!(
            admit(&l, ip("10.0.0.3"), now, two.iter().copied()),
            Admission::Admit
        );
        let three = [two[0], two[1], slot(3, "10.0.0.3", now - S)];
        match admit(&l, ip("10.0.0.4"), now, three.iter().copied()) {
            Admission::Refuse(why) => assert!(why.starts_with("server full: all 3"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn eviction_prefers_finished_then_manifestless_then_the_longest_idle() {
        let l = limits(4, 4);
        let now = 100 * S;
        let mut slots = vec![
            slot(1, "10.0.0.1", now - 50 * S), // idle longest, has a manifest
            slot(2, "10.0.0.2", now - 3 * S),  // no manifest, stalled
            slot(3, "10.0.0.3", now),          // progressing
            slot(4, "10.0.0.4", now - S),      // not stalled yet
        ];
        slots[1].manifest = false;
        let pick = |slots: &[Slot]| admit(&l, ip("10.9.9.9"), now, slots.iter().copied());
        assert_eq!(pick(&slots), Admission::Evict(2));
        slots[3].finished = true; // finished beats everything, stalled or not
        assert_eq!(pick(&slots), Admission::Evict(4));
        slots[3].finished = false;
        slots[1].manifest = true;
        assert_eq!(pick(&slots), Admission::Evict(1));
        // PING-only sessions have an old last_progress however busy they look.
        slots[0].last_progress = now - S;
        slots[1].last_progress = now - S;
        assert!(matches!(pick(&slots), Admission::Refuse(_)));
    }

    #[test]
    fn one_address_gets_at_most_its_share_and_evicts_only_its_own() {
        let l = limits(10, 2);
        let now = 100 * S;
        let slots = [
            slot(1, "10.0.0.1", now),
            slot(2, "10.0.0.1", now),
            slot(3, "10.0.0.2", now - 60 * S), // another address's stalled session
        ];
        match admit(&l, ip("10.0.0.1"), now, slots.iter().copied()) {
            Admission::Refuse(why) => {
                assert!(why.contains("server full for 10.0.0.1") && why.contains("2 sessions"));
                assert!(why.contains("`max_sessions_per_source`"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            admit(&l, ip("10.0.0.2"), now, slots.iter().copied()),
            Admission::Admit
        );
        let mut own = slots;
        own[1].last_progress = now - 10 * S;
        assert_eq!(
            admit(&l, ip("10.0.0.1"), now, own.iter().copied()),
            Admission::Evict(2)
        );
    }

    fn session(i: u16, ok: bool) -> ServerSession {
        ServerSession {
            peer: std::net::SocketAddr::from(([127, 0, 0, 1], i)),
            cc: "rudp".into(),
            files: vec![super::super::FileOutcome {
                name: format!("f{i}"),
                size: 10,
                ok,
                detail: String::new(),
                skipped_bytes: 0,
            }],
            bytes: 10,
            total_ns: 1,
            error: (!ok).then(|| format!("failed {i}")),
        }
    }

    #[test]
    fn the_log_keeps_totals_of_all_and_only_the_last_few_in_full() {
        let mut log = SessionLog::new(3);
        for i in 0..1000u16 {
            log.record(session(i, i % 10 != 0));
        }
        assert_eq!(log.sessions, 1000);
        assert_eq!(
            (log.failed, log.files_ok, log.files_failed),
            (100, 900, 100)
        );
        assert_eq!(log.bytes, 10_000);
        let ports: Vec<u16> = log.recent().map(|s| s.peer.port()).collect();
        assert_eq!(ports, [997, 998, 999]);
        assert!(log.recent.capacity() < 8, "no growth with the count");
        assert_eq!(log.last_error(), None);
        log.record(session(1000, false));
        assert_eq!(log.last_error(), Some("failed 1000"));
        let all = SessionLog::from_sessions(vec![session(1, true), session(2, false)]);
        assert_eq!((all.sessions, all.recent().len()), (2, 2));
    }
}
