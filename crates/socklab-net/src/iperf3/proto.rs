//! iperf3's wire format, sans I/O: the cookie, the one-byte states, the length-prefixed JSON
//! messages, the parameters a client sends and the results both sides exchange.
//!
//! Learnt from iperf3's public source (esnet/iperf `src/iperf_api.h`, `src/iperf.h`,
//! `src/iperf_util.c`, `src/iperf_api.c`: `make_cookie`, `JSON_write`/`JSON_read`,
//! `send_parameters`/`get_parameters`, `send_results`/`get_results`) and from Debian's iperf3
//! 3.12 on loopback (strace); notes in docs/interop.md, section "iperf3". The code is ours.

use serde::{Deserialize, Serialize};

/// Bytes of a cookie on the wire: 36 characters and a NUL.
pub const COOKIE_LEN: usize = 37;

/// The characters of a cookie iperf3 3.12 makes (`make_cookie`: random characters of a
/// lower-case base32 alphabet; the string is in Debian's libiperf.so.0).
pub const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Whether `b` may be in a cookie. Older iperf3 3.x built the cookie from the host name, the
/// time and `random()` in hex, cut to 36 bytes (esnet/iperf `src/iperf_util.c`, 2017), so
/// any printable ASCII byte but a space is accepted; [`COOKIE_ALPHABET`] is what 3.12 sends.
pub fn cookie_byte(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// The largest JSON message accepted (iperf3's own limit is far larger; ours is what a
/// parameter or results message of 128 streams needs, with room).
pub const MAX_JSON: usize = 64 * 1024;

/// The most streams a test may ask for (iperf3's own limit, `-P` at most 128).
pub const MAX_PARALLEL: u32 = 128;

/// The largest block (`-l`) served; iperf3 refuses TCP blocks over 1 MiB itself
/// (`MAX_BLOCKSIZE`), so this is room, not a new limit.
pub const MAX_LEN: u64 = 16 << 20;

/// The smallest UDP datagram (`len`) iperf3 sends: its 64-bit header (`MIN_UDP_BLOCKSIZE`).
pub const MIN_UDP_LEN: u64 = 16;
/// The largest: an IPv4 datagram's payload (`MAX_UDP_BLOCKSIZE`, 65535 - 8 - 20).
pub const MAX_UDP_LEN: u64 = 65_507;
/// UDP streams one test may have (`parallel`).
pub const MAX_UDP_PARALLEL: u32 = 64;

/// The longest test (`-t`) served: a day.
pub const MAX_TIME_S: u64 = 86_400;

/// The largest `window` (`-w`) served: iperf3's own `MAX_TCP_BUFFER`, 512 MiB.
pub const MAX_WINDOW: u64 = 512 << 20;

/// Bytes of a congestion-control name, its NUL included (`TCP_CA_NAME_MAX`).
pub const CA_NAME_MAX: usize = 16;

/// A test's cookie: what ties its streams to its control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; 36]);

impl Cookie {
    /// Parses the 37 bytes a connection starts with.
    pub fn parse(bytes: &[u8]) -> Result<Cookie, String> {
        if bytes.len() != COOKIE_LEN {
            return Err(format!(
                "iperf3 cookie of {} bytes: it is {COOKIE_LEN} (36 characters and a NUL)",
                bytes.len()
            ));
        }
        if bytes[36] != 0 {
            return Err("iperf3 cookie not ended by a NUL at byte 37".into());
        }
        if let Some(&b) = bytes[..36].iter().find(|&&b| !cookie_byte(b)) {
            return Err(format!(
                "iperf3 cookie has byte 0x{b:02x}: its 36 bytes are printable ASCII, no space"
            ));
        }
        let mut c = [0u8; 36];
        c.copy_from_slice(&bytes[..36]);
        Ok(Cookie(c))
    }

    /// The cookie as text (36 characters).
    pub fn as_str(&self) -> &str {
        // The alphabet is ASCII, checked by `parse`.
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

/// Whether the first bytes of a connection may be an iperf3 cookie (all of them so far
/// printable and no space, and a NUL at byte 37 if it has come). A socklab line has a space
/// at byte 8 (`SOCKLAB BULK/1 …`), so the two never overlap.
pub fn may_be_cookie(head: &[u8]) -> bool {
    !head.is_empty()
        && head.iter().enumerate().all(|(i, b)| {
            if i < 36 {
                cookie_byte(*b)
            } else {
                i == 36 && *b == 0
            }
        })
}

/// The one-byte states of iperf3's control connection (`iperf_api.h`; the byte is a signed
/// char, the two refusals are negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// 1: the streams may send.
    TestStart,
    /// 2: the test runs.
    TestRunning,
    /// 4: the client's test is over.
    TestEnd,
    /// 9: send your parameters.
    ParamExchange,
    /// 10: connect your streams.
    CreateStreams,
    /// 11: the server ends the test.
    ServerTerminate,
    /// 12: the client ends the test.
    ClientTerminate,
    /// 13: exchange results.
    ExchangeResults,
    /// 14: display results.
    DisplayResults,
    /// 16: the client is done.
    IperfDone,
    /// -1: the server is busy or refuses the cookie.
    AccessDenied,
    /// -2: the server failed; an error number follows (two 4-byte integers).
    ServerError,
}

impl State {
    /// The byte on the wire.
    pub fn byte(self) -> u8 {
        match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => (-1i8) as u8,
            State::ServerError => (-2i8) as u8,
        }
    }

    /// The state of a byte; one iperf3 defines but a server never receives (3, 5–8, 15) is
    /// refused like an unknown one.
    pub fn from_byte(b: u8) -> Result<State, String> {
        Ok(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            v => return Err(format!("unknown iperf3 state byte {v}")),
        })
    }
}

/// The length in front of a JSON message (4 bytes, big-endian), checked against [`MAX_JSON`].
pub fn json_len(prefix: [u8; 4]) -> Result<usize, String> {
    let n = u32::from_be_bytes(prefix) as usize;
    if n == 0 {
        return Err("iperf3 JSON message of length 0".into());
    }
    if n > MAX_JSON {
        return Err(format!(
            "iperf3 JSON message of {n} bytes: at most {MAX_JSON} are accepted"
        ));
    }
    Ok(n)
}

/// A JSON message framed for the wire: its length, then its text.
pub fn frame<T: Serialize>(msg: &T) -> Vec<u8> {
    // Our own types serialize without error (no maps with non-string keys, no NaN checks).
    let text = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + text.len());
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(&text);
    out
}

/// The parameters an iperf3 client sends (`send_parameters`). Every field iperf3 3.x sends
/// is known; an unknown one is refused by name, so a client never gets a test that ignored
/// what it asked for.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// TCP (`-t` default protocol).
    #[serde(default)]
    pub tcp: bool,
    /// UDP (`-u`).
    #[serde(default)]
    pub udp: bool,
    /// SCTP (`--sctp`).
    #[serde(default)]
    pub sctp: bool,
    /// Seconds omitted at the start (`-O`).
    #[serde(default)]
    pub omit: u64,
    /// Seconds of the test (`-t`); 0 when `-n` or `-k` bounds it.
    #[serde(default)]
    pub time: u64,
    /// Bytes of the test (`-n`).
    #[serde(default)]
    pub num: u64,
    /// Blocks of the test (`-k`).
    #[serde(default)]
    pub blockcount: u64,
    /// Streams (`-P`).
    #[serde(default)]
    pub parallel: u32,
    /// The sink sends (`-R`).
    #[serde(default)]
    pub reverse: bool,
    /// Both send (`--bidir`).
    #[serde(default)]
    pub bidirectional: bool,
    /// Socket buffer (`-w`).
    #[serde(default)]
    pub window: Option<u64>,
    /// Block size (`-l`).
    #[serde(default)]
    pub len: u64,
    /// Target rate in bits/s (`-b`).
    #[serde(default)]
    pub bandwidth: Option<u64>,
    /// Fair-queue rate (`--fq-rate`).
    #[serde(default)]
    pub fqrate: Option<u64>,
    /// Pacing timer in µs.
    #[serde(default)]
    pub pacing_timer: Option<u64>,
    /// Burst (`-b rate/burst`).
    #[serde(default)]
    pub burst: Option<u64>,
    /// MSS (`-M`).
    #[serde(default, rename = "MSS")]
    pub mss: Option<u64>,
    /// `TCP_NODELAY` (`-N`).
    #[serde(default)]
    pub nodelay: bool,
    /// IP TOS (`-S`).
    #[serde(default, rename = "TOS")]
    pub tos: Option<u64>,
    /// IPv6 flow label (`-L`).
    #[serde(default)]
    pub flowlabel: Option<u64>,
    /// Congestion control (`-C`).
    #[serde(default)]
    pub congestion: Option<String>,
    /// The congestion control used.
    #[serde(default)]
    pub congestion_used: Option<String>,
    /// A title (`-T`).
    #[serde(default)]
    pub title: Option<String>,
    /// Extra data (`--extra-data`).
    #[serde(default)]
    pub extra_data: Option<String>,
    /// The client wants the server's output (`--get-server-output`).
    #[serde(default)]
    pub get_server_output: Option<u64>,
    /// 64-bit UDP counters.
    #[serde(default)]
    pub udp_counters_64bit: Option<u64>,
    /// Repeating payload (`--repeating-payload`).
    #[serde(default)]
    pub repeating_payload: Option<u64>,
    /// Zero copy (`-Z`).
    #[serde(default)]
    pub zerocopy: Option<u64>,
    /// Don't fragment (`--dont-fragment`).
    #[serde(default)]
    pub dont_fragment: Option<u64>,
    /// The server's CPU affinity (`-A n,m`).
    #[serde(default)]
    pub server_affinity: Option<u64>,
    /// Authentication token (`--username`); refused: the sink has no users.
    #[serde(default)]
    pub authtoken: Option<String>,
    /// The client's version (3.12: `"3.12"`).
    #[serde(default)]
    pub client_version: Option<String>,
}

impl Params {
    /// Parses and bounds a parameter message; `Err` is a one-line reason.
    pub fn parse(json: &[u8]) -> Result<Params, String> {
        let p: Params = serde_json::from_slice(json).map_err(|e| {
            let e = e.to_string();
            format!(
                "iperf3 parameters refused: {}",
                e.lines().next().unwrap_or("")
            )
        })?;
        p.check()?;
        Ok(p)
    }

    fn check(&self) -> Result<(), String> {
        let refuse = |why: String| Err(format!("iperf3 parameters refused: {why}"));
        if self.sctp || self.tcp == self.udp {
            return refuse("a test is `tcp` or `udp`, one of them (`sctp` is not served)".into());
        }
        if self.bidirectional && self.reverse {
            return refuse("`bidirectional` and `reverse` together (iperf3 refuses both)".into());
        }
        check_options(self).or_else(refuse)?;
        if let Some(why) = unserved(self) {
            return refuse(why);
        }
        if self.authtoken.is_some() {
            return refuse("the sink has no users (`authtoken` is not accepted)".into());
        }
        if self.parallel == 0 || self.parallel > MAX_PARALLEL {
            return refuse(format!("parallel {} (1..={MAX_PARALLEL})", self.parallel));
        }
        if self.len == 0 || self.len > MAX_LEN {
            return refuse(format!("len {} (1..={MAX_LEN})", self.len));
        }
        if self.time > MAX_TIME_S || self.omit > MAX_TIME_S {
            return refuse(format!("time {} s (at most {MAX_TIME_S})", self.time));
        }
        if self.time == 0 && self.num == 0 && self.blockcount == 0 {
            return refuse("no bound: time, num and blockcount are all 0".into());
        }
        if self.udp && !(MIN_UDP_LEN..=MAX_UDP_LEN).contains(&self.len) {
            let (lo, hi) = (MIN_UDP_LEN, MAX_UDP_LEN);
            return refuse(format!(
                "len {} for UDP ({lo}..={hi}, iperf3's own)",
                self.len
            ));
        }
        if self.udp && self.parallel > MAX_UDP_PARALLEL {
            let n = MAX_UDP_PARALLEL;
            return refuse(format!("parallel {} for UDP (at most {n})", self.parallel));
        }
        Ok(())
    }

    /// The number of streams: `parallel`, twice over with `bidirectional` (half of them
    /// sending, half receiving).
    pub fn streams(&self) -> u32 {
        if self.bidirectional {
            self.parallel * 2
        } else {
            self.parallel
        }
    }
}

/// Bounds of the options the sink applies; `Err` is the reason, naming the key.
fn check_options(p: &Params) -> Result<(), String> {
    if let Some(w) = p.window {
        if w == 0 || w > MAX_WINDOW {
            return Err(format!("window {w} (1..={MAX_WINDOW})"));
        }
    }
    if let Some(tos) = p.tos {
        if tos > 255 {
            return Err(format!("TOS {tos} (0..=255, one byte)"));
        }
    }
    if let Some(cc) = &p.congestion {
        let ok =
            !cc.is_empty() && cc.len() < CA_NAME_MAX && cc.bytes().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(format!(
                "congestion {:?} (a kernel algorithm name: 1 to {} printable characters)",
                cc.chars().take(40).collect::<String>(),
                CA_NAME_MAX - 1
            ));
        }
    }
    Ok(())
}

/// Why the sink cannot put a client's option in effect on its side, naming iperf3's key;
/// `None` when every option asked for is in effect or is the client's own (its sending:
/// `bandwidth`, `burst`, `fqrate`, `pacing_timer` when only the client sends). The reason
/// ends in "not served", which the client reads as iperf3's `IEUNIMP` ("an option you are
/// trying to set is not implemented yet"). Learnt from esnet/iperf 3.12 `src/iperf_tcp.c`
/// (`iperf_tcp_listen`: `TCP_MAXSEG` is set on a new listening socket before `accept`),
/// `src/iperf_server_api.c` (`server_affinity`: the whole server process is pinned).
pub fn unserved(p: &Params) -> Option<String> {
    let sends = p.reverse || p.bidirectional;
    let no = |key: &str, why: &str| Some(format!("`{key}` not served: {why}"));
    if p.mss.is_some() {
        return no(
            "MSS",
            "TCP_MAXSEG takes effect only on a listening socket before the connection is accepted, and the sink's listener is shared by every test",
        );
    }
    if p.flowlabel.is_some() {
        return no(
            "flowlabel",
            "the sink takes no IPv6 flow-label lease for a client's streams",
        );
    }
    if p.server_affinity.is_some() {
        return no(
            "server_affinity",
            "the sink serves several tests at once and pins no CPU at a client's word (pin the sink itself, e.g. with taskset)",
        );
    }
    if p.burst.is_some_and(|b| b > 0) && sends {
        return no(
            "burst",
            "the sink's sending streams are paced evenly (kernel pacing for TCP, per datagram for UDP), never in bursts",
        );
    }
    if p.udp {
        let shared = "one UDP socket serves every UDP test, so its socket options are the sink's";
        if p.omit > 0 {
            return no(
                "omit",
                "the sink's UDP counts do not leave out the first seconds yet",
            );
        }
        if p.window.is_some() {
            return no("window", shared);
        }
        if p.nodelay {
            return no("nodelay", "it is a TCP option");
        }
        if sends {
            for (key, asked) in [
                ("TOS", p.tos.is_some()),
                ("dont_fragment", p.dont_fragment.is_some_and(|d| d != 0)),
                ("fqrate", p.fqrate.is_some_and(|f| f > 0)),
            ] {
                if asked {
                    return no(key, shared);
                }
            }
        }
    }
    None
}

/// One stream's figures in a results message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// The stream's id (iperf3 numbers its streams 1, 3, 4, 5 … in connection order).
    pub id: i64,
    /// Bytes sent (by a sender) or received (by a receiver).
    pub bytes: u64,
    /// Retransmits, or -1 where not known (the receiver).
    pub retransmits: i64,
    /// UDP jitter in seconds (0 for TCP).
    pub jitter: f64,
    /// UDP errors (0 for TCP).
    pub errors: i64,
    /// UDP packets (0 for TCP).
    pub packets: i64,
    /// Seconds from the test start to the stream's start.
    #[serde(default)]
    pub start_time: f64,
    /// Seconds from the test start to the stream's end.
    #[serde(default)]
    pub end_time: f64,
}

/// A results message (`send_results`/`get_results`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// CPU of the process, % of one CPU over the test.
    pub cpu_util_total: f64,
    /// … in user mode.
    pub cpu_util_user: f64,
    /// … in system mode.
    pub cpu_util_system: f64,
    /// 1 when this side sent and knows retransmits; -1 otherwise (iperf3 3.12 sends -1 as an
    /// unsigned 64-bit number, 18446744073709551615, so it is read as either).
    #[serde(deserialize_with = "de_flag")]
    pub sender_has_retransmits: i64,
    /// The congestion control used, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// The server's own output, for a client that asked for it (`get_server_output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
    /// The streams.
    pub streams: Vec<StreamResult>,
}

fn de_flag<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = serde_json::Number::deserialize(d)?;
    if let Some(i) = v.as_i64() {
        Ok(i)
    } else if v.as_u64() == Some(u64::MAX) {
        Ok(-1)
    } else {
        Err(serde::de::Error::custom(format!(
            "sender_has_retransmits {v}"
        )))
    }
}

impl Results {
    /// Parses a results message a client sent (its own figures; the sink keeps them beside
    /// its own and never trusts them for its own). Stream `retransmits` may be `u64::MAX`
    /// for -1, like the flag.
    pub fn parse(json: &[u8]) -> Result<Results, String> {
        let mut v: serde_json::Value = serde_json::from_slice(json).map_err(|e| {
            format!(
                "iperf3 results refused: {}",
                e.to_string().lines().next().unwrap_or("")
            )
        })?;
        if let Some(streams) = v.get_mut("streams").and_then(|s| s.as_array_mut()) {
            if streams.len() > MAX_PARALLEL as usize {
                return Err(format!(
                    "iperf3 results refused: {} streams (at most {MAX_PARALLEL})",
                    streams.len()
                ));
            }
            for s in streams {
                if let Some(r) = s.get_mut("retransmits") {
                    if r.as_u64() == Some(u64::MAX) {
                        *r = serde_json::Value::from(-1);
                    }
                }
            }
        }
        serde_json::from_value(v).map_err(|e| {
            format!(
                "iperf3 results refused: {}",
                e.to_string().lines().next().unwrap_or("")
            )
        })
    }
}
