//! `BULK/2`: one test of several TCP connections, in either direction (see
//! `docs/sink-protocol.md`).
//!
//! ```text
//! control   client → sink  SOCKLAB BULK/2 test=<hex> up=U down=D read_size=… verify=… [send keys] [cpus=…] [opts=…]
//! control   sink → client  READY test=<hex> streams=N                  (or ERROR <reason>, close)
//! data i    client → sink  SOCKLAB JOIN/2 test=<hex> index=i            (i < N; 0..U up, U..N down)
//! data i    sink → client  READY index=i dir=up|down rcvbuf=… sndbuf=… cc=… pacing=… cpu=… [opts=…]
//! control   client → sink  GO                                          (every stream has joined)
//! data i    up: client sends, FIN; the sink reads to end of stream, then closes
//!           down: the sink sends, FIN; the client reads to end of stream, then closes
//! control   sink → client  RESULT index=i bytes=… …                    (one per stream as it ends;
//!                          or FAILED index=i <reason>), then close
//! ```
//!
//! Everything the sink does for a test is bounded by what these lines say, within fixed caps:
//! at most [`MAX_STREAMS`] streams, a down stream ends after its rounds or its duration (at most
//! [`MAX_SEND_DURATION`]), a join names a test that exists and a free index.

use std::time::Duration;

use super::{num, pairs, parse_hash, refused, truncate, MAGIC, MAX_READ_SIZE};
use crate::cpus::CpuList;
use crate::sockopt::OptSet;
use crate::Strategy;

/// Most streams (connections) one test may have.
pub const MAX_STREAMS: u32 = 128;
/// Longest a down stream may be asked to send (iperf3's `-t` allows a day too).
pub const MAX_SEND_DURATION: Duration = Duration::from_secs(86_400);
/// Most rounds a down stream may be asked to send.
pub const MAX_ROUNDS: u64 = 1 << 40;
/// Largest round (`nbufs × bufsize`) a down stream may send.
pub const MAX_ROUND: usize = 1 << 30;

/// A test id as it appears in the lines: 16 hex digits.
pub fn test_id_text(id: u64) -> String {
    format!("{id:016x}")
}

fn parse_id(v: &str) -> Result<u64, String> {
    if v.is_empty() || v.len() > 16 {
        return Err(format!("bad test id '{}'", truncate(v)));
    }
    u64::from_str_radix(v, 16).map_err(|_| format!("bad test id '{}'", truncate(v)))
}

/// A congestion-control name as the kernel takes it (at most 15 of `[A-Za-z0-9_]`).
pub fn is_cc_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 15 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// When a down stream stops sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendEnd {
    /// After this many rounds.
    Rounds(u64),
    /// After this long from GO (checked after every round).
    Duration(Duration),
}

/// How the sink sends on a test's down streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendSpec {
    /// Write strategy.
    pub strategy: Strategy,
    /// Buffers per round.
    pub nbufs: usize,
    /// Bytes per buffer.
    pub bufsize: usize,
    /// Seed of the payload.
    pub seed: u64,
    /// Congestion control of the sending sockets.
    pub cc: String,
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// `SO_SNDBUF` (`None`: autotuning).
    pub sndbuf: Option<usize>,
    /// `SO_MAX_PACING_RATE`, bytes/s (`None`: unlimited).
    pub pacing: Option<u64>,
    /// When to stop.
    pub end: SendEnd,
}

/// The control connection's request: a test of `up + down` streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestHello {
    /// The test's id, chosen by the client; data connections name it.
    pub test: u64,
    /// Streams the client sends on (indices `0..up`).
    pub up: u32,
    /// Streams the sink sends on (indices `up..up + down`).
    pub down: u32,
    /// Bytes per `read()` at the sink on up streams.
    pub read_size: usize,
    /// Hash every stream (the sink hashes what it reads on up streams).
    pub verify: bool,
    /// How the sink sends on down streams (required when `down > 0`).
    pub send: Option<SendSpec>,
    /// CPUs of the sink's stream threads, round-robin by stream index.
    pub cpus: Option<CpuList>,
    /// Socket options (`bulk --opts`): the sink applies the server side's to every stream's
    /// connection once it has joined, and reads them back in its READY.
    pub opts: Option<OptSet>,
    /// TLS on every stream (`bulk` with `tls`): after its READY, each stream's connection
    /// carries a TLS handshake (the sink the server, with its certificate of the run), then
    /// the stream's bytes encrypted. The control connection stays plain.
    pub tls: Option<socklab_tls::TlsVersion>,
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "-".to_string(), T::to_string)
}

fn parse_opt<T: std::str::FromStr>(k: &str, v: &str) -> Result<Option<T>, String> {
    if v == "-" {
        Ok(None)
    } else {
        num(k, v).map(Some)
    }
}

impl TestHello {
    /// Streams in all.
    pub fn streams(&self) -> u32 {
        self.up + self.down
    }

    /// Whether stream `index` is a down stream (the sink sends).
    pub fn is_down(&self, index: u32) -> bool {
        index >= self.up
    }

    /// The line, with its newline.
    pub fn emit(&self) -> String {
        let mut s = format!(
            "{MAGIC}BULK/2 test={} up={} down={} read_size={} verify={}",
            test_id_text(self.test),
            self.up,
            self.down,
            self.read_size,
            u8::from(self.verify)
        );
        if let Some(p) = &self.send {
            s.push_str(&format!(
                " strategy={} nbufs={} bufsize={} seed={} cc={} nodelay={} sndbuf={} pacing={}",
                p.strategy,
                p.nbufs,
                p.bufsize,
                p.seed,
                p.cc,
                u8::from(p.nodelay),
                opt(&p.sndbuf),
                opt(&p.pacing)
            ));
            match p.end {
                SendEnd::Rounds(n) => s.push_str(&format!(" rounds={n}")),
                SendEnd::Duration(d) => s.push_str(&format!(" duration_us={}", d.as_micros())),
            }
        }
        if let Some(c) = &self.cpus {
            s.push_str(&format!(" cpus={c}"));
        }
        if let Some(o) = &self.opts {
            s.push_str(&format!(" opts={o}"));
        }
        if let Some(v) = self.tls {
            s.push_str(&format!(" tls={v}"));
        }
        s.push('\n');
        s
    }

    /// Parses a line (newline optional), checking every bound.
    pub fn parse(line: &str) -> Result<TestHello, String> {
        let rest = line
            .trim_end()
            .strip_prefix(MAGIC)
            .and_then(|r| r.strip_prefix("BULK/2"))
            .ok_or("not a BULK/2 request")?;
        let mut h = TestHello {
            test: 0,
            up: 0,
            down: 0,
            read_size: 128 * 1024,
            verify: false,
            send: None,
            cpus: None,
            opts: None,
            tls: None,
        };
        let mut seen_test = false;
        let (mut strategy, mut nbufs, mut bufsize, mut seed) = (None, None, None, 1u64);
        let (mut cc, mut nodelay, mut sndbuf, mut pacing) = (None, false, None, None);
        let (mut rounds, mut duration_us) = (None, None);
        for (k, v) in pairs(rest) {
            match k {
                "test" => {
                    h.test = parse_id(v)?;
                    seen_test = true;
                }
                "up" => h.up = num(k, v)?,
                "down" => h.down = num(k, v)?,
                "read_size" => h.read_size = num(k, v)?,
                "verify" => h.verify = num::<u8>(k, v)? != 0,
                "strategy" => {
                    strategy = Some(v.parse::<Strategy>().map_err(|e| e.to_string())?);
                }
                "nbufs" => nbufs = Some(num::<usize>(k, v)?),
                "bufsize" => bufsize = Some(num::<usize>(k, v)?),
                "seed" => seed = num(k, v)?,
                "cc" => cc = Some(v.to_string()),
                "nodelay" => nodelay = num::<u8>(k, v)? != 0,
                "sndbuf" => sndbuf = parse_opt::<usize>(k, v)?,
                "pacing" => pacing = parse_opt::<u64>(k, v)?,
                "rounds" => rounds = Some(num::<u64>(k, v)?),
                "duration_us" => duration_us = Some(num::<u64>(k, v)?),
                "cpus" => h.cpus = Some(v.parse::<CpuList>()?),
                "opts" => h.opts = Some(v.parse::<OptSet>().map_err(|e| e.to_string())?),
                "tls" => h.tls = Some(socklab_tls::TlsVersion::parse(v)?),
                _ => {}
            }
        }
        if !seen_test {
            return Err("BULK/2 without test=".into());
        }
        let n = u64::from(h.up) + u64::from(h.down);
        if n == 0 || n > u64::from(MAX_STREAMS) {
            return Err(format!(
                "{n} streams: a test has 1 to {MAX_STREAMS} streams"
            ));
        }
        if h.read_size == 0 || h.read_size > MAX_READ_SIZE {
            return Err(format!(
                "read_size {} out of range 1..={MAX_READ_SIZE}",
                h.read_size
            ));
        }
        if h.down > 0 {
            let (Some(strategy), Some(nbufs), Some(bufsize)) = (strategy, nbufs, bufsize) else {
                return Err("down streams need strategy=, nbufs= and bufsize=".into());
            };
            if nbufs == 0
                || bufsize == 0
                || nbufs.checked_mul(bufsize).is_none_or(|r| r > MAX_ROUND)
            {
                return Err(format!(
                    "nbufs={nbufs} bufsize={bufsize}: a round is 1 byte to {MAX_ROUND} bytes"
                ));
            }
            let cc = cc.ok_or("down streams need cc=")?;
            if !is_cc_name(&cc) {
                return Err(format!(
                    "cc '{}' is not a congestion-control name",
                    truncate(&cc)
                ));
            }
            if sndbuf == Some(0) || sndbuf.is_some_and(|s| s > 1 << 30) {
                return Err("sndbuf out of range 1..=1G".into());
            }
            if pacing == Some(0) {
                return Err("pacing=0: give a rate in bytes/s, or - for none".into());
            }
            let end = match (rounds, duration_us) {
                (Some(r), None) if (1..=MAX_ROUNDS).contains(&r) => SendEnd::Rounds(r),
                (None, Some(us))
                    if us > 0 && Duration::from_micros(us) <= MAX_SEND_DURATION =>
                {
                    SendEnd::Duration(Duration::from_micros(us))
                }
                (None, None) => {
                    return Err(
                        "down streams need an end: rounds= or duration_us= (the sink never sends without one)"
                            .into(),
                    )
                }
                _ => {
                    return Err(format!(
                        "down streams take one of rounds= (1..={MAX_ROUNDS}) or duration_us= (up to {} s)",
                        MAX_SEND_DURATION.as_secs()
                    ))
                }
            };
            h.send = Some(SendSpec {
                strategy,
                nbufs,
                bufsize,
                seed,
                cc,
                nodelay,
                sndbuf,
                pacing,
                end,
            });
        }
        Ok(h)
    }
}

/// The sink's answer on the control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestReady {
    /// The test.
    pub test: u64,
    /// Its streams.
    pub streams: u32,
    /// The sink will answer each stream's TLS handshake (a test that asked for `tls`; a sink
    /// older than TLS leaves it out, and the client stops there).
    pub tls: bool,
}

impl TestReady {
    /// The line, with its newline.
    pub fn emit(&self) -> String {
        format!(
            "READY test={} streams={}{}\n",
            test_id_text(self.test),
            self.streams,
            if self.tls { " tls=1" } else { "" }
        )
    }

    /// Parses a line; an `ERROR …` line becomes `Err(reason)`.
    pub fn parse(line: &str) -> Result<TestReady, String> {
        let rest = ready_rest(line)?;
        let mut r = TestReady {
            test: 0,
            streams: 0,
            tls: false,
        };
        for (k, v) in pairs(rest) {
            match k {
                "test" => r.test = parse_id(v)?,
                "streams" => r.streams = num(k, v)?,
                "tls" => r.tls = num::<u8>(k, v)? != 0,
                _ => {}
            }
        }
        Ok(r)
    }
}

fn ready_rest(line: &str) -> Result<&str, String> {
    let line = line.trim_end();
    if let Some(reason) = line.strip_prefix("ERROR ") {
        return Err(format!("sink refused: {}", refused(reason)));
    }
    line.strip_prefix("READY")
        .ok_or_else(|| format!("expected READY, got '{}'", truncate(line)))
}

/// A data connection's request: stream `index` of test `test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Join {
    /// The test.
    pub test: u64,
    /// The stream.
    pub index: u32,
}

impl Join {
    /// The line, with its newline.
    pub fn emit(&self) -> String {
        format!(
            "{MAGIC}JOIN/2 test={} index={}\n",
            test_id_text(self.test),
            self.index
        )
    }

    /// Parses a line (newline optional).
    pub fn parse(line: &str) -> Result<Join, String> {
        let rest = line
            .trim_end()
            .strip_prefix(MAGIC)
            .and_then(|r| r.strip_prefix("JOIN/2"))
            .ok_or("not a JOIN/2 request")?;
        let (mut test, mut index) = (None, None);
        for (k, v) in pairs(rest) {
            match k {
                "test" => test = Some(parse_id(v)?),
                "index" => index = Some(num(k, v)?),
                _ => {}
            }
        }
        match (test, index) {
            (Some(test), Some(index)) => Ok(Join { test, index }),
            _ => Err("JOIN/2 needs test= and index=".into()),
        }
    }
}

/// The sink's answer on a data connection: what it applied to its socket and thread.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinReady {
    /// The stream.
    pub index: u32,
    /// Whether the sink sends on it.
    pub down: bool,
    /// The sink socket's `SO_RCVBUF`.
    pub rcvbuf: usize,
    /// The sink socket's `SO_SNDBUF`.
    pub sndbuf: usize,
    /// Congestion control of the sink's socket, read back (a down stream's sender).
    pub cc: Option<String>,
    /// `SO_MAX_PACING_RATE` of the sink's socket, read back, bytes/s (`None`: unlimited).
    pub pacing: Option<u64>,
    /// The CPU the sink's stream thread is pinned to, read back (`None`: not pinned).
    pub cpu: Option<usize>,
    /// The server side's socket options as the sink's socket reports them (`name:value`,
    /// comma-separated; `-` for none), when the test asked for options (`None`: the sink
    /// reported none, e.g. one older than `opts`).
    pub opts: Option<Vec<(String, String)>>,
}

/// `name:value,…` of read-back options (`-` when empty); a value's blanks and commas become
/// `_` so the line keeps its `key=value` shape.
fn opts_text(kv: &[(String, String)]) -> String {
    if kv.is_empty() {
        return "-".into();
    }
    let clean = |v: &str| v.replace(|c: char| c.is_whitespace() || c == ',', "_");
    kv.iter()
        .map(|(k, v)| format!("{k}:{}", clean(v)))
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_opts_text(v: &str) -> Result<Vec<(String, String)>, String> {
    if v == "-" {
        return Ok(Vec::new());
    }
    v.split(',')
        .map(|kv| match kv.split_once(':') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("bad opts '{}'", truncate(v))),
        })
        .collect()
}

impl JoinReady {
    /// The line, with its newline.
    pub fn emit(&self) -> String {
        let opts = self
            .opts
            .as_ref()
            .map_or_else(String::new, |kv| format!(" opts={}", opts_text(kv)));
        format!(
            "READY index={} dir={} rcvbuf={} sndbuf={} cc={} pacing={} cpu={}{opts}\n",
            self.index,
            if self.down { "down" } else { "up" },
            self.rcvbuf,
            self.sndbuf,
            opt(&self.cc),
            opt(&self.pacing),
            opt(&self.cpu)
        )
    }

    /// Parses a line; an `ERROR …` line becomes `Err(reason)`.
    pub fn parse(line: &str) -> Result<JoinReady, String> {
        let rest = ready_rest(line)?;
        let mut r = JoinReady::default();
        for (k, v) in pairs(rest) {
            match k {
                "index" => r.index = num(k, v)?,
                "dir" => {
                    r.down = match v {
                        "up" => false,
                        "down" => true,
                        _ => return Err(format!("bad dir '{}'", truncate(v))),
                    }
                }
                "rcvbuf" => r.rcvbuf = num(k, v)?,
                "sndbuf" => r.sndbuf = num(k, v)?,
                "cc" if v != "-" => {
                    if !is_cc_name(v) {
                        return Err(format!("bad cc '{}'", truncate(v)));
                    }
                    r.cc = Some(v.to_string());
                }
                "pacing" => r.pacing = parse_opt(k, v)?,
                "cpu" => r.cpu = parse_opt(k, v)?,
                "opts" => r.opts = Some(parse_opts_text(v)?),
                _ => {}
            }
        }
        Ok(r)
    }
}

/// The control line that starts every stream at once.
pub const GO: &str = "GO\n";

/// The sender's `TCP_INFO` at the end of a down stream (the client cannot read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderTcp {
    /// `tcpi_total_retrans`.
    pub retrans: u32,
    /// `tcpi_snd_cwnd`.
    pub cwnd: u32,
    /// `tcpi_rtt`, µs.
    pub rtt_us: u32,
    /// `tcpi_min_rtt`, µs.
    pub min_rtt_us: u32,
    /// `tcpi_snd_mss`.
    pub mss: u32,
}

/// What the sink measured on one stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamResult {
    /// The stream.
    pub index: u32,
    /// Bytes read (up) or sent (down).
    pub bytes: u64,
    /// `read()` calls that returned data (up).
    pub reads: u64,
    /// Send system calls (down).
    pub writes: u64,
    /// The stream thread's user CPU, µs.
    pub user_us: u64,
    /// The stream thread's system CPU, µs.
    pub sys_us: u64,
    /// Up: READY sent to end of stream; down: GO to the last send.
    pub elapsed_ns: u64,
    /// BLAKE3 of what was read (up, with verify).
    pub hash: Option<String>,
    /// The sending socket's figures (down).
    pub tcp: Option<SenderTcp>,
}

impl StreamResult {
    /// The line, with its newline.
    pub fn emit(&self) -> String {
        let mut s = format!(
            "RESULT index={} bytes={} reads={} writes={} user_us={} sys_us={} elapsed_ns={} hash={}",
            self.index,
            self.bytes,
            self.reads,
            self.writes,
            self.user_us,
            self.sys_us,
            self.elapsed_ns,
            self.hash.as_deref().unwrap_or("-")
        );
        if let Some(t) = &self.tcp {
            s.push_str(&format!(
                " retrans={} cwnd={} rtt_us={} min_rtt_us={} mss={}",
                t.retrans, t.cwnd, t.rtt_us, t.min_rtt_us, t.mss
            ));
        }
        s.push('\n');
        s
    }

    /// Parses a `RESULT index=…` line.
    pub fn parse(line: &str) -> Result<StreamResult, String> {
        let line = line.trim_end();
        let rest = line
            .strip_prefix("RESULT ")
            .ok_or_else(|| format!("expected RESULT, got '{}'", truncate(line)))?;
        let mut r = StreamResult::default();
        let (mut seen_index, mut seen_bytes) = (false, false);
        let mut tcp = SenderTcp::default();
        let mut has_tcp = false;
        for (k, v) in pairs(rest) {
            match k {
                "index" => {
                    r.index = num(k, v)?;
                    seen_index = true;
                }
                "bytes" => {
                    r.bytes = num(k, v)?;
                    seen_bytes = true;
                }
                "reads" => r.reads = num(k, v)?,
                "writes" => r.writes = num(k, v)?,
                "user_us" => r.user_us = num(k, v)?,
                "sys_us" => r.sys_us = num(k, v)?,
                "elapsed_ns" => r.elapsed_ns = num(k, v)?,
                "hash" if v != "-" => r.hash = Some(parse_hash(v)?),
                "retrans" | "cwnd" | "rtt_us" | "min_rtt_us" | "mss" => {
                    has_tcp = true;
                    let x: u32 = num(k, v)?;
                    match k {
                        "retrans" => tcp.retrans = x,
                        "cwnd" => tcp.cwnd = x,
                        "rtt_us" => tcp.rtt_us = x,
                        "min_rtt_us" => tcp.min_rtt_us = x,
                        _ => tcp.mss = x,
                    }
                }
                _ => {}
            }
        }
        if !seen_index || !seen_bytes {
            return Err("RESULT without index= or bytes=".into());
        }
        r.tcp = has_tcp.then_some(tcp);
        Ok(r)
    }
}

/// A control line of the sink after GO: one stream's result, or why it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamLine {
    /// `RESULT index=…`.
    Result(StreamResult),
    /// `FAILED index=i <reason>`.
    Failed {
        /// The stream.
        index: u32,
        /// Why.
        reason: String,
    },
}

impl StreamLine {
    /// The line, with its newline (a reason is cut to fit [`super::MAX_LINE`]).
    pub fn emit(&self) -> String {
        match self {
            StreamLine::Result(r) => r.emit(),
            StreamLine::Failed { index, reason } => {
                let reason: String = reason
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .take(400)
                    .collect();
                format!("FAILED index={index} {}\n", reason.trim())
            }
        }
    }

    /// Parses a line.
    pub fn parse(line: &str) -> Result<StreamLine, String> {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("FAILED index=") {
            let (i, reason) = rest.split_once(' ').unwrap_or((rest, ""));
            return Ok(StreamLine::Failed {
                index: num("index", i)?,
                reason: reason.trim().to_string(),
            });
        }
        StreamResult::parse(line).map(StreamLine::Result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Strategy;
    use proptest::prelude::*;

    fn hello() -> TestHello {
        TestHello {
            test: 0xdead_beef_0123_4567,
            up: 2,
            down: 2,
            read_size: 65536,
            verify: true,
            send: Some(SendSpec {
                strategy: Strategy::Writev,
                nbufs: 4,
                bufsize: 8192,
                seed: 9,
                cc: "cubic".into(),
                nodelay: true,
                sndbuf: Some(1 << 20),
                pacing: Some(62_500_000),
                end: SendEnd::Duration(Duration::from_millis(1500)),
            }),
            cpus: Some("0-1".parse().unwrap()),
            opts: None,
            tls: None,
        }
    }

    #[test]
    fn options_travel_in_the_request_and_their_read_back_in_ready() {
        let h = TestHello {
            opts: Some("client:nodelay+server:sndbuf=64K+cc=reno".parse().unwrap()),
            ..hello()
        };
        assert!(h
            .emit()
            .contains(" opts=client:nodelay+server:sndbuf=64K+cc=reno\n"));
        assert_eq!(TestHello::parse(&h.emit()).unwrap(), h);
        let e = TestHello::parse(&h.emit().replace("cc=reno", "cc=no/such")).unwrap_err();
        assert!(e.contains("not a congestion-control name"), "{e}");
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        let jr = JoinReady {
            opts: Some(vec![kv("sndbuf", "131072"), kv("keepalive", "1/60/10/5")]),
            ..JoinReady::default()
        };
        assert!(jr
            .emit()
            .ends_with(" opts=sndbuf:131072,keepalive:1/60/10/5\n"));
        assert_eq!(JoinReady::parse(&jr.emit()).unwrap(), jr);
        let none = JoinReady {
            opts: Some(Vec::new()),
            ..JoinReady::default()
        };
        assert!(none.emit().ends_with(" opts=-\n"));
        assert_eq!(JoinReady::parse(&none.emit()).unwrap(), none);
        // A value with blanks keeps the line's shape.
        let err = JoinReady {
            opts: Some(vec![kv(
                "busy-poll",
                "error: Operation not permitted, os 1",
            )]),
            ..JoinReady::default()
        };
        let back = JoinReady::parse(&err.emit()).unwrap().opts.unwrap();
        assert_eq!(
            back,
            [kv("busy-poll", "error:_Operation_not_permitted__os_1")]
        );
        // An older sink's READY has none.
        assert_eq!(JoinReady::parse("READY index=0 dir=up").unwrap().opts, None);
    }

    #[test]
    fn every_line_round_trips() {
        let h = hello();
        assert_eq!(TestHello::parse(&h.emit()).unwrap(), h);
        let mut r = h.clone();
        r.send.as_mut().unwrap().end = SendEnd::Rounds(77);
        r.send.as_mut().unwrap().sndbuf = None;
        r.send.as_mut().unwrap().pacing = None;
        r.cpus = None;
        assert_eq!(TestHello::parse(&r.emit()).unwrap(), r);
        let up_only = TestHello {
            down: 0,
            send: None,
            ..h.clone()
        };
        assert_eq!(TestHello::parse(&up_only.emit()).unwrap(), up_only);
        assert!(h.emit().len() < super::super::MAX_LINE);
        let t = TestReady {
            test: 5,
            streams: 4,
            tls: false,
        };
        assert_eq!(TestReady::parse(&t.emit()).unwrap(), t);
        let t = TestReady { tls: true, ..t };
        assert!(t.emit().ends_with(" tls=1\n"));
        assert_eq!(TestReady::parse(&t.emit()).unwrap(), t);
        let h12 = TestHello {
            tls: Some(socklab_tls::TlsVersion::Tls12),
            ..h.clone()
        };
        assert!(h12.emit().ends_with(" tls=1.2\n"));
        assert_eq!(TestHello::parse(&h12.emit()).unwrap(), h12);
        let e = TestHello::parse(&h12.emit().replace("tls=1.2", "tls=9")).unwrap_err();
        assert!(e.contains("unknown TLS version"), "{e}");
        let j = Join { test: 5, index: 3 };
        assert_eq!(Join::parse(&j.emit()).unwrap(), j);
        let jr = JoinReady {
            index: 3,
            down: true,
            rcvbuf: 1,
            sndbuf: 2,
            cc: Some("bbr".into()),
            pacing: Some(7),
            cpu: Some(1),
            opts: None,
        };
        assert_eq!(JoinReady::parse(&jr.emit()).unwrap(), jr);
        let jr0 = JoinReady::default();
        assert_eq!(JoinReady::parse(&jr0.emit()).unwrap(), jr0);
        let sr = StreamResult {
            index: 2,
            bytes: 10,
            reads: 3,
            writes: 4,
            user_us: 5,
            sys_us: 6,
            elapsed_ns: 7,
            hash: Some("ab".repeat(32)),
            tcp: Some(SenderTcp {
                retrans: 1,
                cwnd: 2,
                rtt_us: 3,
                min_rtt_us: 4,
                mss: 5,
            }),
        };
        let l = StreamLine::Result(sr.clone());
        assert_eq!(StreamLine::parse(&l.emit()).unwrap(), l);
        let l = StreamLine::Result(StreamResult {
            tcp: None,
            hash: None,
            ..sr
        });
        assert_eq!(StreamLine::parse(&l.emit()).unwrap(), l);
        let f = StreamLine::Failed {
            index: 1,
            reason: "aborted (connection reset)".into(),
        };
        assert_eq!(StreamLine::parse(&f.emit()).unwrap(), f);
    }

    #[test]
    fn bounds_are_checked_with_a_reason() {
        let e = |s: &str| TestHello::parse(s).unwrap_err();
        let base = "SOCKLAB BULK/2 test=1";
        assert!(e(&format!("{base} up=0")).contains("1 to 128 streams"));
        assert!(e(&format!("{base} up=1000000")).contains("1 to 128 streams"));
        assert!(e(&format!("{base} up=100 down=100")).contains("200 streams"));
        assert!(e("SOCKLAB BULK/2 up=1").contains("without test="));
        assert!(e(&format!("{base} down=1")).contains("need strategy="));
        let send = "strategy=single nbufs=1 bufsize=10 cc=cubic";
        assert!(e(&format!("{base} down=1 {send}")).contains("need an end"));
        assert!(e(&format!("{base} down=1 {send} rounds=0")).contains("one of rounds="));
        assert!(
            e(&format!("{base} down=1 {send} duration_us=99999999999")).contains("one of rounds=")
        );
        assert!(
            e(&format!("{base} down=1 {send} rounds=1 duration_us=5")).contains("one of rounds=")
        );
        assert!(e(&format!(
            "{base} down=1 strategy=single nbufs=2 bufsize=1073741824 cc=cubic rounds=1"
        ))
        .contains("a round is"));
        assert!(e(&format!(
            "{base} down=1 strategy=single nbufs=1 bufsize=1 cc=x/y rounds=1"
        ))
        .contains("not a congestion-control name"));
        assert!(e(&format!("{base} down=1 {send} rounds=1 pacing=0")).contains("pacing=0"));
        assert!(e(&format!("{base} up=1 cpus=9-1")).contains("runs backwards"));
        assert!(e(&format!("{base} up=1 read_size=0")).contains("read_size"));
        assert!(e("SOCKLAB BULK/2 test=zz up=1").contains("bad test id"));
        assert!(Join::parse("SOCKLAB JOIN/2 test=1").is_err());
        assert!(JoinReady::parse("ERROR unknown test")
            .unwrap_err()
            .contains("refused: unknown test"));
        assert!(StreamLine::parse("RESULT bytes=1").is_err());
        assert!(StreamLine::parse("FAILED index=x boom").is_err());
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,300}") {
            let _ = TestHello::parse(&s);
            let _ = TestReady::parse(&s);
            let _ = Join::parse(&s);
            let _ = JoinReady::parse(&s);
            let _ = StreamLine::parse(&s);
        }

        #[test]
        fn what_parses_re_emits_equal(
            up in 0u32..140, down in 0u32..3, rounds in 1u64..1000, verify: bool, test: u64,
        ) {
            let line = format!(
                "SOCKLAB BULK/2 test={test:x} up={up} down={down} verify={} strategy=write nbufs=1 bufsize=100 cc=reno rounds={rounds}",
                u8::from(verify)
            );
            if let Ok(h) = TestHello::parse(&line) {
                prop_assert_eq!(TestHello::parse(&h.emit()).unwrap(), h);
            }
        }
    }
}
