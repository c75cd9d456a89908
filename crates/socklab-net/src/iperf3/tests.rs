//! The iperf3 core driven by hand: each transition, and hostile input refused in one line.

use std::time::{Duration, Instant};

use super::proto::*;
use super::server::*;

const COOKIE: &[u8; 37] = b"jidniyjwdf57o4zdhuzm5nobkuc3rmosqp6w\0";
/// What Debian's iperf3 3.12 sends for `-c … -t 1 -P 2 -l 1000` (strace on loopback).
const PARAMS_312: &str = r#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":2,"len":1000,"pacing_timer":1000,"client_version":"3.12"}"#;
/// What 3.12 sends as a receiver's results (its -1 as an unsigned 64-bit number).
const RESULTS_312: &str = r#"{"cpu_util_total":15.8,"cpu_util_user":0.06,"cpu_util_system":15.7,"sender_has_retransmits":18446744073709551615,"congestion_used":"bbr","streams":[{"id":1,"bytes":4210000,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.003508}]}"#;

fn framed(json: &str) -> Vec<u8> {
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json.as_bytes());
    v
}

fn drain(s: &mut Server) -> Vec<Action> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

fn state(s: State) -> Action {
    Action::Send(vec![s.byte()])
}

fn fail_reason(actions: &[Action]) -> String {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Fail(w) => Some(w.clone()),
            _ => None,
        })
        .expect("a Fail action")
}

fn ours(ids: &[i64]) -> Results {
    Results {
        cpu_util_total: 1.0,
        cpu_util_user: 0.5,
        cpu_util_system: 0.5,
        sender_has_retransmits: -1,
        congestion_used: None,
        server_output_text: None,
        streams: ids
            .iter()
            .map(|&id| StreamResult {
                id,
                bytes: 1000,
                retransmits: -1,
                jitter: 0.0,
                errors: 0,
                packets: 0,
                start_time: 0.0,
                end_time: 1.0,
            })
            .collect(),
    }
}

/// A test through to `TEST_RUNNING`, with the given parameters.
fn running(params: &str) -> (Server, Instant) {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.control_bytes(t0, &COOKIE[..10]);
    assert!(drain(&mut s).is_empty(), "half a cookie waits");
    s.control_bytes(t0, &COOKIE[10..]);
    assert_eq!(drain(&mut s), vec![state(State::ParamExchange)]);
    let p = framed(params);
    s.control_bytes(t0, &p[..3]);
    assert!(drain(&mut s).is_empty(), "half a length waits");
    s.control_bytes(t0, &p[3..]);
    assert_eq!(drain(&mut s), vec![state(State::CreateStreams)]);
    assert_eq!(s.phase(), Phase::Streams);
    let c = Cookie::parse(COOKIE).unwrap();
    let n = s.params().unwrap().streams();
    for k in 0..n {
        let id = s.stream_connected(t0, &c).unwrap();
        assert_eq!(id, if k == 0 { 1 } else { k as i64 + 2 });
    }
    let reverse = s.params().unwrap().reverse;
    assert_eq!(
        drain(&mut s),
        vec![
            Action::StartStreams { reverse },
            state(State::TestStart),
            state(State::TestRunning)
        ]
    );
    (s, t0)
}

#[test]
fn a_whole_test_of_two_streams_goes_through_every_state() {
    let (mut s, t0) = running(PARAMS_312);
    assert_eq!(s.stream_ids(), &[1, 3]);
    s.control_bytes(t0, &[State::TestEnd.byte()]);
    assert_eq!(drain(&mut s), vec![Action::StopStreams]);
    s.streams_stopped(t0, ours(&[1, 3]));
    assert_eq!(drain(&mut s), vec![state(State::ExchangeResults)]);
    s.control_bytes(t0, &framed(RESULTS_312));
    let a = drain(&mut s);
    assert_eq!(a.len(), 2);
    let Action::Send(ref msg) = a[0] else {
        panic!("{a:?}")
    };
    let back = Results::parse(&msg[4..]).unwrap();
    assert_eq!(back, ours(&[1, 3]));
    assert_eq!(
        json_len([msg[0], msg[1], msg[2], msg[3]]).unwrap(),
        msg.len() - 4
    );
    assert_eq!(a[1], state(State::DisplayResults));
    s.control_bytes(t0, &[State::IperfDone.byte()]);
    let a = drain(&mut s);
    let [Action::Done(client)] = a.as_slice() else {
        panic!("{a:?}")
    };
    assert_eq!(client.sender_has_retransmits, -1);
    assert_eq!(client.streams[0].retransmits, -1);
    assert_eq!(s.phase(), Phase::Done);
}

#[test]
fn reverse_asks_the_sink_to_send() {
    let p = PARAMS_312.replace("\"parallel\":2", "\"parallel\":1,\"reverse\":true");
    let (s, _) = running(&p);
    assert!(s.params().unwrap().reverse);
}

#[test]
fn a_test_end_before_the_streams_are_all_there_is_out_of_turn() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    s.control_bytes(t0, &framed(PARAMS_312));
    drain(&mut s);
    s.control_bytes(t0, &[State::TestEnd.byte()]);
    assert!(fail_reason(&drain(&mut s)).contains("TestEnd out of turn in phase Streams"));
    let c = Cookie::parse(COOKIE).unwrap();
    assert!(
        s.stream_connected(t0, &c).is_err(),
        "a failed test takes no streams"
    );
}

#[test]
fn a_bad_cookie_is_refused_in_one_line() {
    let mut s = Server::new(Instant::now());
    s.control_bytes(Instant::now(), b"GET / HTTP/1.1\r\n");
    let a = drain(&mut s);
    assert_eq!(a.len(), 1, "nothing is sent to a stranger: {a:?}");
    let why = fail_reason(&a);
    assert!(
        why.contains("not an iperf3 cookie") && !why.contains('\n'),
        "{why}"
    );
    let mut no_nul = *COOKIE;
    no_nul[36] = b'a';
    assert!(Cookie::parse(&no_nul).unwrap_err().contains("NUL"));
    assert!(Cookie::parse(&COOKIE[..36])
        .unwrap_err()
        .contains("36 bytes"));
    let mut ctl = *COOKIE;
    ctl[0] = 0x01;
    assert!(Cookie::parse(&ctl).unwrap_err().contains("0x01"));
    // Older 3.x clients: host name, time and hex, cut to 36 bytes.
    assert!(Cookie::parse(b"Lab-Host.1499000000.123456.1a2b3c4de\0").is_ok());
    assert!(COOKIE[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
    assert!(!may_be_cookie(b"SOCKLAB BULK/2"));
    assert!(may_be_cookie(&COOKIE[..5]) && may_be_cookie(COOKIE));
}

#[test]
fn a_one_megabyte_length_prefix_is_refused_before_it_is_read() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    drain(&mut s);
    s.control_bytes(t0, &(1u32 << 20).to_be_bytes());
    let a = drain(&mut s);
    // SERVER_ERROR, "unable to receive parameters from client", EMSGSIZE (issue 27 part 4).
    assert_eq!(a[0], Action::Send(vec![0xfe, 0, 0, 0, 114, 0, 0, 0, 90]));
    let why = fail_reason(&a);
    assert!(
        why.contains("1048576 bytes") && why.contains("65536"),
        "{why}"
    );
    assert_eq!(s.phase(), Phase::Failed);
    s.control_bytes(t0, &[0; 100]);
    assert!(drain(&mut s).is_empty(), "a failed test reads nothing more");
}

#[test]
fn an_unknown_state_byte_is_refused_and_stops_the_streams() {
    let (mut s, t0) = running(PARAMS_312);
    s.control_bytes(t0, &[99]);
    let a = drain(&mut s);
    assert_eq!(a[0], Action::StopStreams);
    assert_eq!(fail_reason(&a), "unknown iperf3 state byte 99");
    let (mut s, t0) = running(PARAMS_312);
    s.control_bytes(t0, &[State::IperfDone.byte()]);
    assert!(fail_reason(&drain(&mut s)).contains("out of turn"));
}

#[test]
fn parameters_out_of_bounds_or_unknown_are_refused_by_name() {
    let cases = [
        (
            PARAMS_312.replace("\"omit\":0", "\"omit\":0,\"frobnicate\":1"),
            "frobnicate",
        ),
        (
            PARAMS_312.replace("\"time\":1", "\"time\":\"one\""),
            "invalid type",
        ),
        (
            PARAMS_312.replace("\"parallel\":2", "\"parallel\":500"),
            "parallel 500",
        ),
        (PARAMS_312.replace("\"len\":1000", "\"len\":0"), "len 0"),
        (
            PARAMS_312.replace("\"tcp\":true", "\"sctp\":true"),
            "`sctp` is not served",
        ),
        (
            PARAMS_312.replace("\"tcp\":true", "\"tcp\":true,\"udp\":true"),
            "one of them",
        ),
        (
            PARAMS_312
                .replace("\"tcp\":true", "\"udp\":true")
                .replace("1000", "8"),
            "len 8 for UDP",
        ),
        (PARAMS_312.replace("\"time\":1", "\"time\":0"), "no bound"),
        ("{\"tcp\":".to_string(), "EOF"),
    ];
    for (json, want) in cases {
        let why = Params::parse(json.as_bytes()).unwrap_err();
        assert!(why.contains(want) && !why.contains('\n'), "{json}: {why}");
    }
    let p = Params::parse(PARAMS_312.as_bytes()).unwrap();
    assert_eq!(
        (p.parallel, p.len, p.time, p.client_version.as_deref()),
        (2, 1000, 1, Some("3.12"))
    );
}

#[test]
fn a_stream_with_a_foreign_cookie_or_one_too_many_is_refused_alone() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    s.control_bytes(t0, &framed(PARAMS_312));
    drain(&mut s);
    let other = Cookie::parse(b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\0").unwrap();
    assert!(s
        .stream_connected(t0, &other)
        .unwrap_err()
        .contains("belongs to no test"));
    let c = Cookie::parse(COOKIE).unwrap();
    s.stream_connected(t0, &c).unwrap();
    s.stream_connected(t0, &c).unwrap();
    assert!(s.stream_connected(t0, &c).unwrap_err().contains("complete"));
    assert_eq!(s.phase(), Phase::Running, "the test goes on");
}

#[test]
fn every_wait_has_a_deadline() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.tick(t0 + HANDSHAKE_TIMEOUT + Duration::from_millis(1));
    assert!(fail_reason(&drain(&mut s)).contains("cookie and parameters"));

    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    s.control_bytes(t0, &framed(PARAMS_312));
    s.tick(t0 + STREAMS_TIMEOUT + Duration::from_millis(1));
    assert!(fail_reason(&drain(&mut s)).contains("streams to connect"));

    let (mut s, t0) = running(PARAMS_312);
    s.tick(t0 + Duration::from_secs(1) + RUN_GRACE - Duration::from_millis(1));
    assert!(drain(&mut s).is_empty());
    s.tick(t0 + Duration::from_secs(1) + RUN_GRACE + Duration::from_millis(1));
    assert!(fail_reason(&drain(&mut s)).contains("TEST_END"));

    let (mut s, t0) = running(PARAMS_312);
    s.control_bytes(t0, &[State::TestEnd.byte()]);
    s.streams_stopped(t0, ours(&[1, 3]));
    s.tick(t0 + RESULTS_TIMEOUT + Duration::from_millis(1));
    assert!(fail_reason(&drain(&mut s)).contains("results exchange"));
}

#[test]
fn a_closed_control_connection_or_client_terminate_ends_the_test() {
    let (mut s, _) = running(PARAMS_312);
    s.control_closed();
    assert!(fail_reason(&drain(&mut s)).contains("closed its control connection"));
    let (mut s, t0) = running(PARAMS_312);
    s.control_bytes(t0, &[State::ClientTerminate.byte()]);
    assert!(fail_reason(&drain(&mut s)).contains("CLIENT_TERMINATE"));
}

#[test]
fn state_bytes_round_trip_and_results_refuse_garbage() {
    for b in 0..=255u8 {
        if let Ok(s) = State::from_byte(b) {
            assert_eq!(s.byte(), b);
        }
    }
    assert_eq!(State::AccessDenied.byte(), 0xff);
    assert!(
        State::from_byte(3).is_err(),
        "RESULT_REQUEST is never sent to a server"
    );
    assert!(Results::parse(b"{}").unwrap_err().contains("missing field"));
    assert!(Results::parse(br#"{"cpu_util_total":1,"cpu_util_user":1,"cpu_util_system":1,"sender_has_retransmits":7.5,"streams":[]}"#).is_err());
}
