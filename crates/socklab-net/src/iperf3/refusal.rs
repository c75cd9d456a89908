//! How the sink tells an iperf3 client why its test was refused (issue 27 part 4), in words
//! the client itself prints.
//!
//! iperf3's own server, when it fails, sends the state `SERVER_ERROR` (-2) and then two 4-byte
//! big-endian integers: its error number (`i_errno`, the `IE…` enumeration of `iperf_api.h`)
//! and the system's `errno` (0 for none). The client reads both and prints the text of that
//! error number (`iperf_strerror`, which appends `strerror(errno)` for the numbers that are
//! about a system call): 3.12 as `iperf3: error - <text>`, later clients as `SERVER ERROR -
//! <text>` (esnet/iperf `src/iperf_client_api.c`, `iperf_handle_message_client`, tags 3.12
//! and master; the server side is `cleanup_server` in `src/iperf_server_api.c`; seen with
//! Debian's 3.12 on loopback). A client that connects while the
//! server is busy gets the single byte `ACCESS_DENIED` (-1) and prints "the server is busy
//! running a test. try again later" (`iperf_accept`). The error numbers below have kept their
//! values from iperf3 3.0 to 3.16 (checked in each tag's `iperf_api.h`), so any 3.x client
//! prints the same text. The sink's own one-line reason goes to its log; the client gets the
//! nearest of iperf3's own reasons.

use super::proto::State;

/// Where a test was when it failed, as far as the reason sent matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading the cookie or the parameters.
    Handshake,
    /// Waiting for the streams.
    Streams,
    /// The test runs, or its streams are stopping.
    Running,
    /// Reading the client's results.
    Results,
    /// Waiting for `IPERF_DONE`.
    Display,
}

/// `IEDURATION`: "test duration too long".
pub const IE_DURATION: i32 = 5;
/// `IENUMSTREAMS`: "number of parallel streams too large".
pub const IE_NUM_STREAMS: i32 = 6;
/// `IEBLOCKSIZE`: "block size too large".
pub const IE_BLOCK_SIZE: i32 = 7;
/// `IEUNIMP`: "an option you are trying to set is not implemented yet".
pub const IE_UNIMP: i32 = 13;
/// `IEMESSAGE`: "received an unknown control message".
pub const IE_MESSAGE: i32 = 110;
/// `IERECVMESSAGE`: "unable to receive control message".
pub const IE_RECV_MESSAGE: i32 = 112;
/// `IERECVPARAMS`: "unable to receive parameters from client".
pub const IE_RECV_PARAMS: i32 = 114;
/// `IERECVRESULTS`: "unable to receive results".
pub const IE_RECV_RESULTS: i32 = 117;
/// `IEAUTHTEST`: "test authorization failed".
pub const IE_AUTH_TEST: i32 = 142;
/// `IESTREAMACCEPT`: "unable to accept stream connection".
pub const IE_STREAM_ACCEPT: i32 = 204;

/// Linux's `EINVAL` ("Invalid argument").
pub const EINVAL: i32 = 22;
/// Linux's `EPROTO` ("Protocol error").
pub const EPROTO: i32 = 71;
/// Linux's `EMSGSIZE` ("Message too long").
pub const EMSGSIZE: i32 = 90;
/// Linux's `ETIMEDOUT` ("Connection timed out").
pub const ETIMEDOUT: i32 = 110;

/// The bytes of a `SERVER_ERROR`: the state, then `code` and `errno`, big-endian.
pub fn server_error(code: i32, errno: i32) -> Vec<u8> {
    let mut b = vec![State::ServerError.byte()];
    b.extend_from_slice(&code.to_be_bytes());
    b.extend_from_slice(&errno.to_be_bytes());
    b
}

/// The byte of an `ACCESS_DENIED` (the sink is at its `max_conns`, or a stream came that its
/// test does not want).
pub fn access_denied() -> [u8; 1] {
    [State::AccessDenied.byte()]
}

/// iperf3's error number and `errno` nearest to the sink's reason `why` for failing a test at
/// `stage`; `None` where the client is gone or ended the test itself (nothing to tell it).
pub fn code_for(stage: Stage, why: &str) -> Option<(i32, i32)> {
    if why.contains("closed its control connection") || why.contains("CLIENT_TERMINATE") {
        return None;
    }
    let timed_out = why.contains("timed out");
    Some(match stage {
        Stage::Handshake => {
            if timed_out {
                (IE_RECV_PARAMS, ETIMEDOUT)
            } else if why.contains("bytes: at most") {
                (IE_RECV_PARAMS, EMSGSIZE)
            } else if why.contains("unknown field") {
                // Before the others: serde lists every known field, `authtoken` too.
                (IE_UNIMP, 0)
            } else if why.contains("`authtoken`") {
                (IE_AUTH_TEST, 0)
            } else if why.contains("refused: parallel") {
                (IE_NUM_STREAMS, 0)
            } else if why.contains("refused: len") {
                (IE_BLOCK_SIZE, 0)
            } else if why.contains("refused: time") {
                (IE_DURATION, 0)
            } else if why.contains("served yet") || why.contains("not served") {
                (IE_UNIMP, 0)
            } else {
                (IE_RECV_PARAMS, EINVAL)
            }
        }
        Stage::Streams if timed_out => (IE_STREAM_ACCEPT, ETIMEDOUT),
        Stage::Running if timed_out => (IE_RECV_MESSAGE, ETIMEDOUT),
        Stage::Results | Stage::Display if timed_out => (IE_RECV_RESULTS, ETIMEDOUT),
        Stage::Results if why.contains("bytes: at most") => (IE_RECV_RESULTS, EMSGSIZE),
        Stage::Results => (IE_RECV_RESULTS, EINVAL),
        _ => (IE_MESSAGE, EPROTO),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iperf3::proto::Params;

    const PARAMS: &str = r#"{"tcp":true,"time":1,"parallel":1,"len":1000}"#;

    fn params_code(json: &str) -> Option<(i32, i32)> {
        code_for(
            Stage::Handshake,
            &Params::parse(json.as_bytes()).unwrap_err(),
        )
    }

    #[test]
    fn a_server_error_is_the_state_and_two_big_endian_numbers() {
        assert_eq!(
            server_error(IE_RECV_PARAMS, EMSGSIZE),
            [0xfe, 0, 0, 0, 114, 0, 0, 0, 90]
        );
        assert_eq!(access_denied(), [0xff]);
    }

    /// Each reason the core gives maps to the iperf3 error a client prints best.
    #[test]
    fn each_refusal_has_the_nearest_iperf3_error() {
        let p = |from: &str, to: &str| params_code(&PARAMS.replace(from, to));
        assert_eq!(
            p("\"parallel\":1", "\"parallel\":0"),
            Some((IE_NUM_STREAMS, 0))
        );
        assert_eq!(p("\"len\":1000", "\"len\":0"), Some((IE_BLOCK_SIZE, 0)));
        assert_eq!(p("\"time\":1", "\"time\":90000"), Some((IE_DURATION, 0)));
        assert_eq!(p("\"tcp\":true", "\"sctp\":true"), Some((IE_UNIMP, 0)));
        assert_eq!(p("\"len\":1000", "\"len\":1,\"x\":1"), Some((IE_UNIMP, 0)));
        assert_eq!(
            p("\"len\":1000", "\"len\":1,\"authtoken\":\"x\""),
            Some((IE_AUTH_TEST, 0))
        );
        assert_eq!(
            p("\"time\":1", "\"time\":0"),
            Some((IE_RECV_PARAMS, EINVAL))
        );
        assert_eq!(params_code("{"), Some((IE_RECV_PARAMS, EINVAL)));
        let big = crate::iperf3::proto::json_len((1u32 << 20).to_be_bytes()).unwrap_err();
        assert_eq!(
            code_for(Stage::Handshake, &big),
            Some((IE_RECV_PARAMS, EMSGSIZE))
        );
        let late = "iperf3 client timed out: waited too long for the streams to connect";
        assert_eq!(
            code_for(Stage::Streams, late),
            Some((IE_STREAM_ACCEPT, ETIMEDOUT))
        );
        let late = "iperf3 client timed out: waited too long for TEST_END";
        assert_eq!(
            code_for(Stage::Running, late),
            Some((IE_RECV_MESSAGE, ETIMEDOUT))
        );
        let late = "iperf3 client timed out: waited too long for the results exchange";
        assert_eq!(
            code_for(Stage::Results, late),
            Some((IE_RECV_RESULTS, ETIMEDOUT))
        );
        assert_eq!(
            code_for(Stage::Running, "unknown iperf3 state byte 99"),
            Some((IE_MESSAGE, EPROTO))
        );
        let gone = "iperf3 client closed its control connection in phase Running";
        assert_eq!(code_for(Stage::Running, gone), None);
    }
}
