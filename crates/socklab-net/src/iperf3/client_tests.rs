//! The iperf3 client core driven by hand, and against the sink's server core (both sans I/O).

use std::time::{Duration, Instant};

use super::*;
use crate::iperf3::proto::{Params, StreamResult};
use crate::iperf3::server::{self, Server};

fn params(parallel: u32) -> ClientParams {
    ClientParams {
        tcp: true,
        time: 1,
        parallel,
        len: 131072,
        pacing_timer: 1000,
        ..ClientParams::default()
    }
}

fn drain(c: &mut Client) -> Vec<Action> {
    std::iter::from_fn(|| c.poll_action()).collect()
}

fn results(ids: &[i64], bytes: u64) -> Results {
    Results {
        cpu_util_total: 2.0,
        cpu_util_user: 0.5,
        cpu_util_system: 1.5,
        sender_has_retransmits: -1,
        congestion_used: None,
        server_output_text: None,
        streams: ids
            .iter()
            .map(|&id| StreamResult {
                id,
                bytes,
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

fn framed(json: &[u8]) -> Vec<u8> {
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json);
    v
}

fn failure(actions: &[Action]) -> ClientError {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Fail(e) => Some(e.clone()),
            _ => None,
        })
        .expect("a Fail action")
}

#[test]
fn cookies_are_36_characters_of_iperf3s_alphabet_and_differ_by_seed() {
    let a = make_cookie(1);
    let b = make_cookie(2);
    assert_ne!(a, b);
    assert!(a.0.iter().all(|c| COOKIE_ALPHABET.contains(c)));
    // What the server's parser (the sink's) accepts.
    let wire = cookie_bytes(&a);
    assert_eq!(Cookie::parse(&wire), Ok(a));
    assert_eq!(stream_id(0), 1);
    assert_eq!(stream_id(1), 3);
    assert_eq!(stream_id(4), 6);
}

#[test]
fn the_parameters_are_what_an_iperf3_server_reads() {
    let mut p = params(4);
    p.reverse = true;
    p.congestion = Some("cubic".into());
    let framed = crate::iperf3::proto::frame(&p);
    let json = &framed[4..];
    let text = std::str::from_utf8(json).unwrap();
    assert_eq!(
        text,
        r#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":4,"reverse":true,"len":131072,"congestion":"cubic","pacing_timer":1000}"#
    );
    // The sink's parser (every key iperf3 3.x sends, unknown ones refused) reads them.
    let back = Params::parse(json).unwrap();
    assert_eq!((back.parallel, back.reverse, back.time), (4, true, 1));
}

/// The whole exchange, one state byte at a time, as 3.12's server sends them.
#[test]
fn a_test_goes_from_the_cookie_to_iperf_done() {
    let t0 = Instant::now();
    let mut c = Client::new(t0, make_cookie(7), &params(2));
    let a = drain(&mut c);
    assert_eq!(
        a,
        vec![Action::Send(cookie_bytes(&make_cookie(7)).to_vec())]
    );
    assert_eq!(c.phase(), Phase::Params);
    assert_eq!(c.poll_timeout(), Some(t0 + STEP_WAIT));

    c.control_bytes(t0, &[9]);
    let a = drain(&mut c);
    assert!(matches!(&a[..], [Action::Send(p)] if p[4] == b'{'), "{a:?}");
    c.control_bytes(t0, &[10]);
    let a = drain(&mut c);
    assert_eq!(
        a,
        vec![Action::ConnectStreams {
            cookie: cookie_bytes(&make_cookie(7)),
            count: 2
        }]
    );
    assert_eq!(
        c.poll_timeout(),
        None,
        "connecting is the caller's to bound"
    );
    // TEST_START and TEST_RUNNING come in one read, before the caller says it is done.
    c.control_bytes(t0, &[1, 2]);
    assert!(drain(&mut c).is_empty());
    c.streams_connected(t0);
    assert_eq!(drain(&mut c), vec![Action::StartStreams]);
    assert_eq!(c.phase(), Phase::Flowing);
    assert_eq!(c.poll_timeout(), None);

    c.end_test(t0);
    assert_eq!(drain(&mut c), vec![Action::Send(vec![4])]);
    c.control_bytes(t0, &[13]);
    assert_eq!(drain(&mut c), vec![Action::WantResults]);
    let ours = results(&[1, 3], 1000);
    c.results(t0, &ours);
    assert_eq!(
        drain(&mut c),
        vec![Action::Send(crate::iperf3::proto::frame(&ours))]
    );
    // The server's results in two pieces, then DISPLAY_RESULTS.
    let json = br#"{"cpu_util_total":3.5,"cpu_util_user":1,"cpu_util_system":2.5,"sender_has_retransmits":18446744073709551615,"streams":[{"id":1,"bytes":990,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.0},{"id":3,"bytes":1000,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.0}]}"#;
    let msg = framed(json);
    c.control_bytes(t0, &msg[..10]);
    assert_eq!(c.phase(), Phase::ServerResults);
    let mut rest = msg[10..].to_vec();
    rest.push(14);
    c.control_bytes(t0, &rest);
    let a = drain(&mut c);
    assert_eq!(a[0], Action::Send(vec![16]));
    let Action::Done(server) = &a[1] else {
        panic!("{a:?}")
    };
    assert_eq!(server.cpu_util_total, 3.5);
    assert_eq!(server.streams[0].bytes, 990);
    assert_eq!(server.streams[1].id, 3);
    assert_eq!(c.phase(), Phase::Done);
    assert_eq!(c.abort(), None);
}

#[test]
fn a_busy_server_is_one_line_naming_it() {
    let t0 = Instant::now();
    let mut c = Client::new(t0, make_cookie(1), &params(1));
    drain(&mut c);
    c.control_bytes(t0, &[0xff]);
    let e = failure(&drain(&mut c));
    assert_eq!(e, ClientError::Busy);
    assert_eq!(
        e.message("10.0.0.1:5201"),
        "iperf3 server at 10.0.0.1:5201 is busy with another test"
    );
    assert_eq!(c.phase(), Phase::Failed);
}

#[test]
fn a_server_error_carries_iperf3s_number_and_errno() {
    let t0 = Instant::now();
    let mut c = Client::new(t0, make_cookie(1), &params(1));
    drain(&mut c);
    c.control_bytes(t0, &[9]);
    drain(&mut c);
    // -2, then the two integers in two reads.
    c.control_bytes(t0, &[0xfe, 0, 0, 0]);
    assert!(drain(&mut c).is_empty());
    c.control_bytes(t0, &[13, 0, 0, 0, 2]);
    let e = failure(&drain(&mut c));
    assert_eq!(e, ClientError::ServerError { code: 13, errno: 2 });
    let m = e.message("h:1");
    assert!(
        m.starts_with(
            "iperf3 server at h:1 failed the test: iperf3 error 13, errno 2: No such file"
        ),
        "{m}"
    );
    assert!(!m.contains('\n'));
}

#[test]
fn terminate_close_unknown_bytes_and_turns_out_of_order_each_fail_in_one_line() {
    let t0 = Instant::now();
    let fresh = || {
        let mut c = Client::new(t0, make_cookie(3), &params(1));
        drain(&mut c);
        c
    };
    let mut c = fresh();
    c.control_bytes(t0, &[11]);
    assert_eq!(failure(&drain(&mut c)), ClientError::Terminated);

    let mut c = fresh();
    c.control_closed();
    let e = failure(&drain(&mut c));
    assert_eq!(
        e.message("h:1"),
        "iperf3 server at h:1 closed the control connection while socklab waited for PARAM_EXCHANGE"
    );

    let mut c = fresh();
    c.control_bytes(t0, &[77]);
    let m = failure(&drain(&mut c)).message("h:1");
    assert_eq!(m, "iperf3 server at h:1: unknown iperf3 state byte 77");

    let mut c = fresh();
    c.control_bytes(t0, &[14]);
    let m = failure(&drain(&mut c)).message("h:1");
    assert!(
        m.contains("out of turn while waiting for PARAM_EXCHANGE"),
        "{m}"
    );

    // A results message that is no results message.
    let mut c = fresh();
    for b in [9u8, 10] {
        c.control_bytes(t0, &[b]);
    }
    c.streams_connected(t0);
    c.control_bytes(t0, &[1, 2]);
    c.end_test(t0);
    c.control_bytes(t0, &[13]);
    c.results(t0, &results(&[1], 5));
    drain(&mut c);
    c.control_bytes(t0, &framed(b"{\"x\":1}"));
    let m = failure(&drain(&mut c)).message("h:1");
    assert!(
        m.starts_with("iperf3 server at h:1: iperf3 results refused"),
        "{m}"
    );
    // Nothing more after a failure.
    c.control_bytes(t0, &[14]);
    assert!(drain(&mut c).is_empty());
}

#[test]
fn every_wait_has_a_deadline_and_says_what_did_not_come() {
    let t0 = Instant::now();
    let mut c = Client::new(t0, make_cookie(1), &params(1));
    drain(&mut c);
    c.tick(t0 + STEP_WAIT - Duration::from_millis(1));
    assert!(drain(&mut c).is_empty());
    c.tick(t0 + STEP_WAIT);
    let m = failure(&drain(&mut c)).message("h:1");
    assert_eq!(m, "iperf3 server at h:1 sent no PARAM_EXCHANGE within 10s");

    // After TEST_END.
    let mut c = Client::new(t0, make_cookie(1), &params(1));
    for b in [9u8, 10] {
        c.control_bytes(t0, &[b]);
    }
    c.streams_connected(t0);
    c.control_bytes(t0, &[1, 2]);
    let t1 = t0 + Duration::from_secs(60);
    c.end_test(t1);
    assert_eq!(c.poll_timeout(), Some(t1 + STEP_WAIT));
    drain(&mut c);
    c.tick(t1 + STEP_WAIT);
    let m = failure(&drain(&mut c)).message("h:1");
    assert!(m.contains("sent no EXCHANGE_RESULTS"), "{m}");
    // Giving up before the end tells the server.
    let mut c = Client::new(t0, make_cookie(1), &params(1));
    assert_eq!(c.abort(), Some(vec![12]));
}

/// socklab's client core against the sink's iperf3 server core, bytes passed by hand: the
/// two agree on the whole exchange, the stream ids and both results messages.
#[test]
fn the_client_core_completes_a_test_with_the_sinks_server_core() {
    let t0 = Instant::now();
    let mut p = params(3);
    p.reverse = true;
    let mut c = Client::new(t0, make_cookie(42), &p);
    let mut s = Server::new(t0);
    let (mut to_server, mut to_client): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
    let mut server_saw: Option<Results> = None;
    let mut client_got: Option<Results> = None;
    for _ in 0..50 {
        while let Some(a) = c.poll_action() {
            match a {
                Action::Send(b) => to_server.extend(b),
                Action::ConnectStreams { cookie, count } => {
                    assert_eq!(count, 3);
                    // The control bytes so far reach the server before the streams connect.
                    s.control_bytes(t0, &std::mem::take(&mut to_server));
                    let ck = Cookie::parse(&cookie).unwrap();
                    for i in 0..count {
                        assert_eq!(s.stream_connected(t0, &ck), Ok(stream_id(i)));
                    }
                    c.streams_connected(t0);
                }
                Action::StartStreams => c.end_test(t0),
                Action::WantResults => c.results(t0, &results(&[1, 3, 4], 777)),
                Action::Done(r) => client_got = Some(*r),
                Action::Fail(e) => panic!("{}", e.message("sink")),
            }
        }
        while let Some(a) = s.poll_action() {
            match a {
                server::Action::Send(b) => to_client.extend(b),
                server::Action::StartStreams { reverse } => assert!(reverse),
                server::Action::StopStreams => {
                    s.streams_stopped(t0, results(&[1, 3, 4], 888));
                }
                server::Action::Done(r) => server_saw = Some(*r),
                server::Action::Fail(w) => panic!("{w}"),
            }
        }
        if !to_server.is_empty() {
            s.control_bytes(t0, &std::mem::take(&mut to_server));
        }
        if !to_client.is_empty() {
            c.control_bytes(t0, &std::mem::take(&mut to_client));
        }
        if client_got.is_some() && server_saw.is_some() {
            break;
        }
    }
    let got = client_got.expect("the client got the server's results");
    assert_eq!(got.streams.iter().map(|s| s.bytes).sum::<u64>(), 3 * 888);
    let saw = server_saw.expect("the server got the client's results and IPERF_DONE");
    assert_eq!(saw.streams.len(), 3);
    assert_eq!(saw.streams[2].bytes, 777);
    assert_eq!(c.phase(), Phase::Done);
}
