//! Hostile clients against the iperf3 core (issue 27 part 4): deadlines that a trickle of
//! bytes does not put off, and refusals in the words an iperf3 client prints.

use std::time::{Duration, Instant};

use super::proto::*;
use super::refusal::{self, server_error};
use super::server::*;

const COOKIE: &[u8; 37] = b"jidniyjwdf57o4zdhuzm5nobkuc3rmosqp6w\0";
const PARAMS: &str = r#"{"tcp":true,"time":1,"parallel":1,"len":1000}"#;

fn drain(s: &mut Server) -> Vec<Action> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

fn framed(json: &str) -> Vec<u8> {
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json.as_bytes());
    v
}

/// Before: every read that returned bytes skipped the clock, so a client sending one byte of
/// a 64 KiB parameter message every 50 ms held its test (and thread) for an hour.
#[test]
fn a_trickle_of_parameter_bytes_does_not_put_off_the_deadline() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    s.control_bytes(t0, &(60_000u32).to_be_bytes());
    drain(&mut s);
    let mut t = t0;
    while t < t0 + HANDSHAKE_TIMEOUT {
        s.control_bytes(t, b" ");
        assert!(drain(&mut s).is_empty(), "nothing yet at {:?}", t - t0);
        t += Duration::from_millis(50);
    }
    s.control_bytes(t, b" ");
    let a = drain(&mut s);
    assert_eq!(
        a,
        vec![
            Action::Send(server_error(refusal::IE_RECV_PARAMS, refusal::ETIMEDOUT)),
            Action::Fail(
                "iperf3 client timed out: waited too long for the cookie and parameters".into()
            )
        ]
    );
}

#[test]
fn a_trickle_of_results_bytes_does_not_put_off_the_deadline() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    s.control_bytes(t0, &framed(PARAMS));
    let c = Cookie::parse(COOKIE).unwrap();
    s.stream_connected(t0, &c).unwrap();
    s.control_bytes(t0, &[State::TestEnd.byte()]);
    let ours = Results::parse(br#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":-1,"streams":[]}"#).unwrap();
    s.streams_stopped(t0, ours);
    s.control_bytes(t0, &(60_000u32).to_be_bytes());
    drain(&mut s);
    s.control_bytes(t0 + RESULTS_TIMEOUT, b" ");
    let a = drain(&mut s);
    assert_eq!(
        a[0],
        Action::Send(server_error(refusal::IE_RECV_RESULTS, refusal::ETIMEDOUT))
    );
    assert!(matches!(&a[1], Action::Fail(w) if w.contains("results exchange")));
}

/// A client that gives up gets nothing more (it is gone); one that breaks the protocol gets
/// SERVER_ERROR with "received an unknown control message" and EPROTO.
#[test]
fn an_unknown_state_gets_a_server_error_and_a_closed_client_nothing() {
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    s.control_bytes(t0, &framed(PARAMS));
    drain(&mut s);
    s.control_bytes(t0, &[77]);
    let a = drain(&mut s);
    assert_eq!(
        a[0],
        Action::Send(server_error(refusal::IE_MESSAGE, refusal::EPROTO))
    );
    let mut s = Server::new(t0);
    s.control_bytes(t0, COOKIE);
    drain(&mut s);
    s.control_closed();
    assert!(matches!(drain(&mut s)[..], [Action::Fail(_)]));
}
