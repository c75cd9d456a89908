//! The core's paths for iperf3's options, driven by hand: `--bidir` roles by accept order,
//! a check refused with `SERVER_ERROR`, the bounds of `window` and `congestion`, the omitted
//! start, the results and the server output.

use std::time::{Duration, Instant};

use super::options::*;
use super::proto::*;
use super::results::*;
use super::server::*;

const COOKIE: &[u8; 37] = b"jidniyjwdf57o4zdhuzm5nobkuc3rmosqp6w\0";
/// What Debian's iperf3 3.12 sends for `-t 2 -O 1 --bidir -w 128K -C cubic -Z --cport 40123
/// --get-server-output -P 2 -l 64K` (`iperf3 -s -d` on loopback).
const PARAMS_BIDIR: &str = r#"{"tcp":true,"omit":1,"time":2,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"window":131072,"len":65536,"pacing_timer":1000,"congestion":"cubic","get_server_output":1,"zerocopy":1,"client_version":"3.12"}"#;

fn framed(json: &str) -> Vec<u8> {
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json.as_bytes());
    v
}

fn drain(s: &mut Server) -> Vec<Action> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

fn at_streams(s: &mut Server, t0: Instant, params: &str) -> Vec<Action> {
    s.control_bytes(t0, COOKIE);
    s.control_bytes(t0, &framed(params));
    drain(s)
}

#[test]
fn the_parameters_of_every_option_parse_and_bidir_doubles_the_streams() {
    let p = Params::parse(PARAMS_BIDIR.as_bytes()).unwrap();
    assert_eq!(
        (p.omit, p.window, p.congestion.as_deref(), p.zerocopy),
        (1, Some(131072), Some("cubic"), Some(1))
    );
    assert_eq!(p.get_server_output, Some(1));
    assert_eq!(p.streams(), 4, "two sending and two receiving");
    let both = PARAMS_BIDIR.replace(
        "\"bidirectional\":true",
        "\"bidirectional\":true,\"reverse\":true",
    );
    let why = Params::parse(both.as_bytes()).unwrap_err();
    assert!(why.contains("`bidirectional` and `reverse`"), "{why}");
}

#[test]
fn window_and_congestion_out_of_bounds_are_refused_by_name() {
    let cases = [
        (
            PARAMS_BIDIR.replace("\"window\":131072", "\"window\":1073741824"),
            "window 1073741824",
        ),
        (
            PARAMS_BIDIR.replace("\"window\":131072", "\"window\":0"),
            "window 0",
        ),
        (
            PARAMS_BIDIR.replace("\"cubic\"", "\"a-very-long-congestion-name\""),
            "congestion \"a-very-long-congestion-name\"",
        ),
        (
            PARAMS_BIDIR.replace("\"cubic\"", "\"cu bic\""),
            "congestion \"cu bic\"",
        ),
    ];
    for (json, want) in cases {
        let why = Params::parse(json.as_bytes()).unwrap_err();
        assert!(why.contains(want) && !why.contains('\n'), "{json}: {why}");
    }
}

#[test]
fn bidir_streams_take_their_roles_by_accept_order_not_by_arrival() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    let a = at_streams(&mut s, t0, PARAMS_BIDIR);
    assert_eq!(
        a.last(),
        Some(&Action::Send(vec![State::CreateStreams.byte()]))
    );
    let c = Cookie::parse(COOKIE).unwrap();
    // Accepted as 10, 11, 12, 13 (the client's two sending streams first); their threads
    // read the cookies in another order.
    let mut tickets = Vec::new();
    for accepted in [12u64, 10, 13, 11] {
        tickets.push((accepted, s.stream_joined(t0, &c, accepted).unwrap()));
        if tickets.len() < 4 {
            assert_eq!(s.stream_role(tickets[0].1), None, "roles wait for all");
        }
    }
    let a = drain(&mut s);
    assert_eq!(a[0], Action::StartStreams { reverse: false });
    let mut roles: Vec<(u64, Role)> = tickets
        .iter()
        .map(|&(acc, t)| (acc, s.stream_role(t).unwrap()))
        .collect();
    roles.sort_by_key(|r| r.0);
    let want = [(1, false), (3, false), (4, true), (5, true)];
    for ((_, role), (id, sends)) in roles.iter().zip(want) {
        assert_eq!((role.id, role.sends), (id, sends), "{roles:?}");
    }
    assert_eq!(s.phase(), Phase::Running);
}

#[test]
fn reverse_and_forward_roles() {
    let p =
        Params::parse(br#"{"tcp":true,"time":1,"parallel":3,"len":10,"reverse":true}"#).unwrap();
    assert!((0..3).all(|k| sink_sends(&p, k)));
    let p = Params::parse(br#"{"tcp":true,"time":1,"parallel":3,"len":10}"#).unwrap();
    assert!((0..3).all(|k| !sink_sends(&p, k)));
    assert_eq!((0..4).map(stream_id).collect::<Vec<_>>(), vec![1, 3, 4, 5]);
}

fn no_such_cc(p: &Params) -> Result<(), ServerError> {
    match p.congestion.as_deref() {
        Some("nosuch") => Err(ServerError {
            code: IESETCONGESTION,
            errno: 2,
            why: "iperf3 `congestion` \"nosuch\": this kernel cannot use it".into(),
        }),
        _ => Ok(()),
    }
}

#[test]
fn a_refused_check_sends_server_error_with_iperf3s_numbers_and_no_streams() {
    let t0 = Instant::now();
    let mut s = Server::with_check(t0, no_such_cc);
    let json = PARAMS_BIDIR.replace("\"cubic\"", "\"nosuch\"");
    let a = at_streams(&mut s, t0, &json);
    assert_eq!(a[0], Action::Send(vec![State::ParamExchange.byte()]));
    assert_eq!(
        a[1],
        Action::Send(vec![0xfe, 0, 0, 0, 134, 0, 0, 0, 2]),
        "SERVER_ERROR (-2), IESETCONGESTION, ENOENT"
    );
    let Action::Fail(why) = &a[2] else {
        panic!("{a:?}")
    };
    assert!(why.contains("nosuch") && !why.contains('\n'), "{why}");
    assert_eq!(a.len(), 3, "no CREATE_STREAMS: {a:?}");
    assert_eq!(s.phase(), Phase::Failed);
    let c = Cookie::parse(COOKIE).unwrap();
    assert!(s.stream_joined(t0, &c, 1).is_err());
    // The same check passes a test it can run.
    let mut s = Server::with_check(t0, no_such_cc);
    let a = at_streams(&mut s, t0, PARAMS_BIDIR);
    assert_eq!(
        a.last(),
        Some(&Action::Send(vec![State::CreateStreams.byte()]))
    );
}

#[test]
fn the_omitted_start_is_in_no_figure() {
    let t0 = Instant::now();
    let s = Duration::from_millis;
    let mut m = Meter::new(t0, Duration::from_secs(1));
    assert!(!m.moved(t0 + s(100), 1000));
    assert!(!m.moved(t0 + s(900), 5000));
    assert!(m.omitting());
    assert_eq!((m.bytes(), m.seconds()), (0, 0.0));
    assert!(
        m.moved(t0 + s(1200), 300),
        "this call ends the omitted period"
    );
    assert!(!m.moved(t0 + s(1500), 200), "once");
    assert!(!m.moved(t0 + s(1700), 0), "the clock alone moves no figure");
    assert_eq!(m.bytes(), 500);
    assert!(
        (m.seconds() - 0.5).abs() < 1e-9,
        "from the omit end: {}",
        m.seconds()
    );
    let r = m.result(4, 7);
    assert_eq!(
        (r.id, r.bytes, r.retransmits, r.start_time),
        (4, 500, 7, 0.0)
    );
    // A stream that ended while omitted counts nothing.
    let mut m = Meter::new(t0, Duration::from_secs(2));
    m.moved(t0 + s(100), 1 << 20);
    assert_eq!((m.bytes(), m.seconds()), (0, 0.0));
    // No omit: everything counts from the start.
    let mut m = Meter::new(t0, Duration::ZERO);
    assert!(!m.moved(t0 + s(250), 10));
    assert_eq!(m.bytes(), 10);
    assert!((m.seconds() - 0.25).abs() < 1e-9);
}

fn ended(id: i64, sends: bool, bytes: u64) -> Ended {
    Ended {
        result: StreamResult {
            id,
            bytes,
            retransmits: if sends { 3 } else { -1 },
            jitter: 0.0,
            errors: 0,
            packets: 0,
            start_time: 0.0,
            end_time: 2.0,
        },
        sends,
        how: if sends { "sendfile" } else { "read" },
        cpu: (Duration::from_millis(100), Duration::from_millis(300)),
    }
}

#[test]
fn bidir_results_carry_both_directions_the_congestion_and_the_server_output() {
    let p = Params::parse(PARAMS_BIDIR.as_bytes()).unwrap();
    let applied = Applied {
        congestion: Some("cubic".into()),
        sndbuf: 262144,
        rcvbuf: 262144,
        more: vec!["TCP_NODELAY 1 (nodelay 1 asked)".into()],
    };
    let t = Test {
        params: &p,
        peer: "127.0.0.1:40000",
        applied: Some(&applied),
        wall: 2.0,
    };
    let streams = [
        ended(5, true, 400),
        ended(1, false, 100),
        ended(4, true, 300),
        ended(3, false, 200),
    ];
    let r = build(&t, &streams);
    assert_eq!(r.sender_has_retransmits, 1, "the sink sent on half of them");
    assert_eq!(r.congestion_used.as_deref(), Some("cubic"));
    assert_eq!(
        r.streams
            .iter()
            .map(|s| (s.id, s.bytes))
            .collect::<Vec<_>>(),
        vec![(1, 100), (3, 200), (4, 300), (5, 400)]
    );
    assert!((r.cpu_util_total - 80.0).abs() < 1e-9, "4 × 0.4 s of 2 s");
    let text = r.server_output_text.as_deref().unwrap();
    for want in [
        "4 streams (2 receive, 2 send), the first 1 s omitted",
        "congestion cubic, SO_SNDBUF 262144, SO_RCVBUF 262144 (window 131072 asked",
        "stream 4 send: 300 bytes in 2.000 s",
        "3 retransmits (sendfile)",
        "stream 1 receive: 100 bytes in 2.000 s",
        "receive total: 300 bytes",
        "send total: 700 bytes in 2.000 s = 0.000 Gbit/s, 6 retransmits",
        "zerocopy: applies to sending",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    // On the wire, and back as a client would read it.
    let f = frame(&r);
    let v: serde_json::Value = serde_json::from_slice(&f[4..]).unwrap();
    assert_eq!(v["server_output_text"].as_str(), Some(text));
    assert_eq!(v["congestion_used"], "cubic");
    assert_eq!(Results::parse(&f[4..]).unwrap(), r);
    // Not asked: no output; a receiving test: no retransmits.
    let p = Params::parse(br#"{"tcp":true,"time":1,"parallel":1,"len":10}"#).unwrap();
    let r = build(
        &Test {
            params: &p,
            peer: "x",
            applied: None,
            wall: 0.0,
        },
        &[ended(1, false, 5)],
    );
    assert_eq!(
        (r.sender_has_retransmits, &r.server_output_text),
        (-1, &None)
    );
    assert_eq!((r.cpu_util_total, &r.congestion_used), (0.0, &None));
    let v: serde_json::Value = serde_json::from_slice(&frame(&r)[4..]).unwrap();
    assert!(v.get("server_output_text").is_none() && v.get("congestion_used").is_none());
}
