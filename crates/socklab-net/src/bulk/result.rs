//! What a bulk test measured: each stream's figures and the test's totals.

use socklab_sys::tcp::TcpInfo;
use socklab_sys::usage::Usage;
use socklab_sys::zerocopy::Completions;

use crate::series::{Direction, SeriesOutput};

/// What one stream of a test measured, from both of its ends.
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    /// Stream number (up streams first, then down).
    pub index: u32,
    /// Which way its data flowed.
    pub direction: Direction,
    /// Bytes the sending end wrote.
    pub bytes: u64,
    /// Bytes the receiving end read (checked equal to `bytes`).
    pub received: u64,
    /// Rounds sent.
    pub rounds: u64,
    /// Send system calls of the sending end.
    pub writes: u64,
    /// `read()` calls of the receiving end that returned data.
    pub reads: u64,
    /// Seconds from the test's start until the receiver had read every byte of this stream.
    pub seconds: f64,
    /// Seconds from the start until the last send call of this stream returned.
    pub send_seconds: f64,
    /// CPU of the sending end's stream thread.
    pub sender_cpu: Usage,
    /// CPU of the receiving end's stream thread.
    pub receiver_cpu: Usage,
    /// `TCP_INFO` of the sending socket at the end (down streams: the fields the sink
    /// reported: retransmissions, cwnd, RTT, minimum RTT, MSS).
    pub tcp: TcpInfo,
    /// Congestion control of the sending socket, read back.
    pub cc: String,
    /// `SO_SNDBUF` of the sending socket, read back.
    pub sndbuf: usize,
    /// `SO_RCVBUF` of the receiving socket.
    pub rcvbuf: usize,
    /// `SO_MAX_PACING_RATE` of the sending socket read back, bytes/s (`None`: unlimited).
    pub pacing: Option<u64>,
    /// The CPU the client's thread of this stream ran on (read back), when pinned.
    pub cpu: Option<usize>,
    /// The CPU the sink's thread of this stream ran on (read back), when pinned.
    pub server_cpu: Option<usize>,
    /// `MSG_ZEROCOPY` completions (zerocopy strategy, up streams).
    pub zerocopy: Option<Completions>,
    /// `Some(true)` when verification was asked and the receiver's hash matches.
    pub verified: Option<bool>,
    /// The client's socket options of this stream as its socket reports them (`opts`).
    pub client_opts: Vec<(String, String)>,
    /// The sink's socket options of this stream as it reported them (`None`: it reported none).
    pub server_opts: Option<Vec<(String, String)>>,
    /// Its options not in effect, `side:option: kernel reports VALUE` (see
    /// [`crate::sockopt::OptSet::off`]).
    pub opts_off: Vec<String>,
}

impl StreamStats {
    /// Throughput of the stream in Gbit/s (end to end, over its own time).
    pub fn gbps(&self) -> f64 {
        gbps(self.bytes, self.seconds)
    }
}

fn gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds / 1e9
    } else {
        0.0
    }
}

/// Jain's fairness index of `xs`: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one takes
/// everything. `None` for fewer than two values or all zero.
pub fn jain_fairness(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    (xs.len() >= 2 && sq > 0.0).then(|| sum * sum / (xs.len() as f64 * sq))
}

/// What one bulk test measured.
#[derive(Debug, Clone, Default)]
pub struct BulkResult {
    /// Bytes of every stream.
    pub bytes: u64,
    /// Rounds of every stream.
    pub rounds: u64,
    /// Send system calls of every sending end.
    pub syscalls: u64,
    /// Receiver `read()` calls of every stream.
    pub reads: u64,
    /// Seconds from the start to the last stream's end (end to end).
    pub seconds: f64,
    /// Seconds from the start until the last send call of any stream returned.
    pub send_seconds: f64,
    /// CPU of the sending ends' stream threads, summed.
    pub sender_cpu: Usage,
    /// CPU of the receiving ends' stream threads, summed.
    pub receiver_cpu: Usage,
    /// `TCP_INFO` of stream 0's sending socket at the end.
    pub tcp: TcpInfo,
    /// Congestion control of stream 0's sending socket (read back).
    pub cc: String,
    /// `SO_SNDBUF` of stream 0's sender.
    pub sndbuf: usize,
    /// `SO_RCVBUF` of stream 0's receiver.
    pub rcvbuf: usize,
    /// `MSG_ZEROCOPY` completions of the up streams, summed.
    pub zerocopy: Option<Completions>,
    /// `Some(true)` when verification was asked and every stream's hashes match.
    pub verified: Option<bool>,
    /// The interval time series of every stream, and its cost (empty unless sampling was on).
    pub series: SeriesOutput,
    /// Each stream's figures, by index.
    pub streams: Vec<StreamStats>,
    /// Stream 0's client socket options, read back (`opts`; empty without).
    pub client_opts: Vec<(String, String)>,
    /// Stream 0's sink socket options, as the sink reported them.
    pub server_opts: Option<Vec<(String, String)>>,
    /// The options not in effect on some stream, `side:option: kernel reports VALUE`, once
    /// each (empty: every option asked for is in effect on every stream).
    pub opts_off: Vec<String>,
    /// When the streams started (the barrier: every connection had its READY), on this
    /// machine's monotonic clock; `None` for a result not made by a run. A caller running
    /// something beside the test (the rrul probes) places the test on its own timeline by it.
    pub started: Option<std::time::Instant>,
    /// The streams' TLS (`tls`; `None`: plain TCP).
    pub tls: Option<TlsStats>,
}

/// What the TLS of a test's streams agreed on and cost to set up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsStats {
    /// The version (`1.3`, `1.2`), as stream 0 negotiated it.
    pub version: String,
    /// The cipher suite, e.g. `TLS13_AES_256_GCM_SHA384`.
    pub cipher: String,
    /// Each stream's handshake, seconds, by index: from the client's first byte of it to its
    /// last flight written, after the stream's READY and before the test's start (so it is
    /// not in the stream's time or CPU).
    pub handshake_s: Vec<f64>,
}

impl BulkResult {
    /// Throughput in Gbit/s: every stream's bytes over the span from the start to the last
    /// stream's end.
    pub fn gbps(&self) -> f64 {
        gbps(self.bytes, self.seconds)
    }

    /// Throughput of one direction's streams over the span to that direction's last end;
    /// `None` when the test had no stream that way.
    pub fn gbps_of(&self, d: Direction) -> Option<f64> {
        let mine = || self.streams.iter().filter(|s| s.direction == d);
        let end = mine()
            .map(|s| s.seconds)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))?;
        Some(gbps(mine().map(|s| s.bytes).sum(), end))
    }

    /// Jain's fairness index over every stream's Gbit/s (`None` with one stream).
    pub fn fairness(&self) -> Option<f64> {
        let x: Vec<f64> = self.streams.iter().map(StreamStats::gbps).collect();
        jain_fairness(&x)
    }

    /// Totals from the streams (in index order); stream 0 gives the settings.
    pub fn from_streams(streams: Vec<StreamStats>, series: SeriesOutput) -> BulkResult {
        let add = |a: Usage, b: &Usage| Usage {
            user: a.user + b.user,
            sys: a.sys + b.sys,
            nvcsw: a.nvcsw + b.nvcsw,
            nivcsw: a.nivcsw + b.nivcsw,
            maxrss_kib: a.maxrss_kib.max(b.maxrss_kib),
        };
        let first = streams.first().cloned().unwrap_or_default();
        let zerocopy = streams
            .iter()
            .filter_map(|s| s.zerocopy)
            .reduce(|a, b| Completions {
                completed: a.completed + b.completed,
                copied: a.copied + b.copied,
            });
        let verified = streams
            .iter()
            .map(|s| s.verified)
            .reduce(|a, b| Some(a? && b?))
            .flatten();
        let mut opts_off: Vec<String> = Vec::new();
        for o in streams.iter().flat_map(|s| &s.opts_off) {
            if !opts_off.contains(o) {
                opts_off.push(o.clone());
            }
        }
        BulkResult {
            client_opts: first.client_opts,
            server_opts: first.server_opts,
            opts_off,
            bytes: streams.iter().map(|s| s.bytes).sum(),
            rounds: streams.iter().map(|s| s.rounds).sum(),
            syscalls: streams.iter().map(|s| s.writes).sum(),
            reads: streams.iter().map(|s| s.reads).sum(),
            seconds: streams.iter().map(|s| s.seconds).fold(0.0, f64::max),
            send_seconds: streams.iter().map(|s| s.send_seconds).fold(0.0, f64::max),
            sender_cpu: streams
                .iter()
                .map(|s| &s.sender_cpu)
                .fold(Usage::default(), add),
            receiver_cpu: streams
                .iter()
                .map(|s| &s.receiver_cpu)
                .fold(Usage::default(), add),
            tcp: first.tcp,
            cc: first.cc,
            sndbuf: first.sndbuf,
            rcvbuf: first.rcvbuf,
            zerocopy,
            verified,
            series,
            streams,
            started: None,
            tls: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn stream(index: u32, direction: Direction, bytes: u64, seconds: f64) -> StreamStats {
        StreamStats {
            index,
            direction,
            bytes,
            received: bytes,
            seconds,
            verified: Some(true),
            sender_cpu: Usage {
                user: Duration::from_millis(10),
                sys: Duration::from_millis(20),
                ..Usage::default()
            },
            ..StreamStats::default()
        }
    }

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_a_hog() {
        assert_eq!(jain_fairness(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain_fairness(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert!((jain_fairness(&[1.0, 3.0]).unwrap() - 16.0 / 20.0).abs() < 1e-12);
        assert_eq!(jain_fairness(&[3.0]), None);
        assert_eq!(jain_fairness(&[0.0, 0.0]), None);
    }

    #[test]
    fn totals_are_every_stream_over_the_span_to_the_last_end() {
        let r = BulkResult::from_streams(
            vec![
                stream(0, Direction::Up, 1_000_000_000, 1.0),
                stream(1, Direction::Up, 500_000_000, 0.5),
                stream(2, Direction::Down, 250_000_000, 2.0),
            ],
            SeriesOutput::default(),
        );
        assert_eq!(r.bytes, 1_750_000_000);
        assert_eq!(r.seconds, 2.0);
        assert!((r.gbps() - 7.0).abs() < 1e-12);
        // Up: 1.5 GB over the up streams' last end (1 s); down: 0.25 GB over 2 s.
        assert!((r.gbps_of(Direction::Up).unwrap() - 12.0).abs() < 1e-12);
        assert!((r.gbps_of(Direction::Down).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(r.sender_cpu.cpu(), Duration::from_millis(90));
        assert_eq!(r.verified, Some(true));
        // Stream Gbit/s 8, 8, 1.
        assert!((r.fairness().unwrap() - 17.0 * 17.0 / (3.0 * 129.0)).abs() < 1e-12);
        let one = BulkResult::from_streams(
            vec![stream(0, Direction::Up, 10, 1.0)],
            SeriesOutput::default(),
        );
        assert_eq!(one.fairness(), None);
        assert_eq!(one.gbps_of(Direction::Down), None);
        let mut bad = stream(1, Direction::Up, 10, 1.0);
        bad.verified = Some(false);
        let r = BulkResult::from_streams(
            vec![stream(0, Direction::Up, 10, 1.0), bad],
            SeriesOutput::default(),
        );
        assert_eq!(r.verified, Some(false));
    }
}
