//! The options of an iperf3 test that change what the sink's streams do, sans I/O: which
//! stream sends (`reverse`, `bidirectional`), the bounds of `window` and `congestion`, and the
//! `SERVER_ERROR` a server sends when it cannot run a test as asked.
//!
//! Learnt from esnet/iperf 3.12: `src/iperf_server_api.c` (`iperf_run_server`: with
//! `--bidir` the first `parallel` streams accepted receive and the next `parallel` send;
//! `TCP_CONGESTION` set on each accepted stream), `src/iperf_client_api.c`
//! (`iperf_handle_message_client`: `CREATE_STREAMS` connects the sending streams first;
//! `SERVER_ERROR` is followed by two 4-byte big-endian integers, iperf3's error number and
//! `errno`), `src/iperf_api.h` and `src/iperf_error.c` (the error numbers and their text),
//! `src/iperf_tcp.c` (`iperf_tcp_listen`: `SO_RCVBUF`/`SO_SNDBUF`, read back, `IESETBUF2`
//! when the kernel gave less). Notes in docs/interop.md, section "iperf3".

use super::proto::{Params, State};

/// iperf3's `IEINITTEST` (101): "test initialization failed" (the client appends
/// `strerror(errno)`).
pub const IEINITTEST: i32 = 101;
/// iperf3's `IESETBUF` (124): "unable to set socket buffer size" (the client appends
/// `strerror(errno)`).
pub const IESETBUF: i32 = 124;
/// iperf3's `IESETCONGESTION` (134): "unable to set TCP_CONGESTION: Supplied congestion
/// control algorithm not supported on this host" (no `errno` text is appended).
pub const IESETCONGESTION: i32 = 134;
/// iperf3's `IESETBUF2` (141): "socket buffer size not set correctly".
pub const IESETBUF2: i32 = 141;

/// A test the server cannot run as asked: `SERVER_ERROR`, iperf3's error number (the client
/// prints its text) and an `errno`; `why` is the sink's own one-line reason, for its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    /// iperf3's error number (`i_errno`), e.g. [`IESETCONGESTION`].
    pub code: i32,
    /// The `errno` the client appends for the errors that carry one (0: none).
    pub errno: i32,
    /// The sink's reason, one line, naming the value.
    pub why: String,
}

impl ServerError {
    /// The bytes on the control connection: `SERVER_ERROR` (-2), then the two integers.
    pub fn wire(&self) -> Vec<u8> {
        let mut b = vec![State::ServerError.byte()];
        b.extend_from_slice(&self.code.to_be_bytes());
        b.extend_from_slice(&self.errno.to_be_bytes());
        b
    }
}

/// What the I/O checks once a test's parameters are read, before its streams are created
/// (the sink: can this kernel give the `window` and the `congestion` asked for?).
pub type ParamCheck = fn(&Params) -> Result<(), ServerError>;

/// Whether the sink sends on the stream accepted `position`-th (from 0) of a test: all of
/// them with `reverse`; with `bidirectional` those after the first `parallel` (the client
/// connects its sending streams first, and iperf3's server takes the first `parallel` it
/// accepts as its receiving ones); none otherwise.
pub fn sink_sends(p: &Params, position: usize) -> bool {
    if p.bidirectional {
        position >= p.parallel as usize
    } else {
        p.reverse
    }
}

/// iperf3's id of the stream accepted `position`-th (from 0): 1, 3, 4, 5 …
/// (`iperf_add_stream` starts at 1 and then counts from 2 past the streams it has).
pub fn stream_id(position: usize) -> i64 {
    if position == 0 {
        1
    } else {
        position as i64 + 2
    }
}

/// The byte at `i` of the data the sink sends: iperf3's repeating pattern `0123456789…`
/// with `repeating_payload` (`fill_with_repeating_pattern` in esnet/iperf
/// `src/iperf_util.c`), else the sink's own counter pattern (iperf3's server sends random
/// bytes; the sink's pattern is as opaque to the client, which reads and discards them).
pub fn payload_byte(i: usize, repeating: bool) -> u8 {
    if repeating {
        b'0' + (i % 10) as u8
    } else {
        (i % 251) as u8
    }
}

/// The TCP pacing rate, bytes per second, the sink sets (`SO_MAX_PACING_RATE`) on each of
/// its sending streams: the lower of `bandwidth` (`-b`, bits/s per stream; iperf3 paces it
/// with its own timer, every `pacing_timer` µs) and `fqrate` (`--fq-rate`, bits/s, which
/// iperf3 sets as `SO_MAX_PACING_RATE` itself, divided by 8). `None`: no rate asked.
pub fn tcp_pacing(p: &Params) -> Option<u64> {
    let rates = [p.bandwidth, p.fqrate];
    let bits = rates.iter().flatten().filter(|&&r| r > 0).min()?;
    Some((bits / 8).max(1))
}

/// Lines for the sink's output about the client's options that concern its sending:
/// what the sink did with them.
pub fn notes(p: &Params) -> Vec<String> {
    let sends = p.reverse || p.bidirectional;
    let mut out = Vec::new();
    if p.repeating_payload.is_some_and(|r| r != 0) && sends {
        out.push("repeating_payload: the sink sends iperf3's pattern 0123456789…".into());
    }
    let timer = p.pacing_timer.unwrap_or(0);
    if sends && (p.bandwidth.is_some() || p.fqrate.is_some()) {
        let how = if p.udp {
            "the sink schedules each datagram at the rate"
        } else {
            "the kernel paces each stream (SO_MAX_PACING_RATE)"
        };
        out.push(format!(
            "pacing_timer {timer} µs: the client's own timer granularity; {how}, with no timer of that granularity"
        ));
    }
    out
}
