//! iperf3's message parsers and the sink's iperf3 state machine never panic: parameters that
//! parse are within bounds, results that parse re-emit to the same streams, and a control
//! connection fed any bytes, in any split, ends or waits, never grows its buffer past one
//! message, and fails with one line, after at most one refusal of iperf3's shape.
use std::time::Instant;

use socklab_net::iperf3::proto::{frame, Cookie, Params, Results, MAX_PARALLEL};
use socklab_net::iperf3::server::{Action, Server};

/// One input of the target.
pub fn run(data: &[u8]) {
    if let Ok(p) = Params::parse(data) {
        assert!(p.parallel >= 1 && p.parallel <= MAX_PARALLEL && p.len >= 1);
    }
    if let Ok(r) = Results::parse(data) {
        let f = frame(&r);
        let back = Results::parse(&f[4..]).unwrap();
        // Floats may move by an ulp through text (serde_json without `float_roundtrip`);
        // everything else is exact.
        let ints = |r: &Results| -> Vec<(i64, u64, i64)> {
            r.streams
                .iter()
                .map(|s| (s.id, s.bytes, s.retransmits))
                .collect()
        };
        assert_eq!(ints(&back), ints(&r));
        assert_eq!(back.sender_has_retransmits, r.sender_has_retransmits);
    }
    let _ = Cookie::parse(data);
    // The same bytes as a control connection, cut where the first byte says.
    let t0 = Instant::now();
    let mut s = Server::new(t0);
    let cut = data.first().map_or(1, |&b| usize::from(b % 16) + 1);
    let mut failed = false;
    for chunk in data.chunks(cut) {
        s.control_bytes(t0, chunk);
        while let Some(a) = s.poll_action() {
            assert!(!failed, "an action after the test failed: {a:?}");
            match a {
                Action::Fail(why) => {
                    assert!(!why.contains('\n'), "{why}");
                    failed = true;
                }
                // A refusal (SERVER_ERROR) is the state and two 4-byte numbers, as iperf3's
                // client reads it (issue 27 part 4).
                Action::Send(b) if b.first() == Some(&0xfe) => assert_eq!(b.len(), 9, "{b:?}"),
                _ => {}
            }
        }
    }
    s.control_closed();
    while s.poll_action().is_some() {}
}
