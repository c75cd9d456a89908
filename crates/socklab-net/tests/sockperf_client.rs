//! `pingpong --to sockperf://` over UDP against a scripted sockperf server (issue 27 part 3):
//! an unanswered try is sent again and the answer to the retry completes the round trip; a
//! stale answer to an earlier message is counted late and the client goes on waiting for its
//! own; a message no try of which is answered is lost. Loopback only; the server thread is
//! bounded by its script and by a read timeout.

use std::net::UdpSocket;
use std::time::Duration;

use socklab_net::pingpong::PingConfig;
use socklab_net::sockperf::client;
use socklab_net::sockperf::wire::{Header, FLAG_CLIENT, FLAG_PONG, MAX_UDP_MESSAGE};

const SIZE: usize = 64;

/// sockperf's answer to `m` (client bit cleared).
fn answer(m: &[u8]) -> Vec<u8> {
    let mut a = m.to_vec();
    let h = Header::parse(m, MAX_UDP_MESSAGE).unwrap();
    Header {
        flags: h.flags & !FLAG_CLIENT,
        ..h
    }
    .write(&mut a);
    a
}

#[test]
fn retries_late_answers_and_losses_are_counted_over_udp() {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let to = server.local_addr().unwrap();
    let retries = 2;
    let script = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut recv = || {
            let (n, from) = server.recv_from(&mut buf).unwrap();
            let h = Header::parse(&buf[..n], MAX_UDP_MESSAGE).unwrap();
            assert_eq!(h.flags, FLAG_CLIENT | FLAG_PONG);
            (buf[..n].to_vec(), h.seq, from)
        };
        // Message 1: the first try goes unanswered, the retry is answered.
        let (_, seq, _) = recv();
        assert_eq!(seq, 1);
        let (one, seq, from) = recv();
        assert_eq!(seq, 1);
        server.send_to(&answer(&one), from).unwrap();
        // Message 2: a stale answer to message 1 first (late), then its own.
        let (two, seq, from) = recv();
        assert_eq!(seq, 2);
        server.send_to(&answer(&one), from).unwrap();
        server.send_to(&answer(&two), from).unwrap();
        // Message 3: every try unanswered (lost).
        for _ in 0..=retries {
            assert_eq!(recv().1, 3);
        }
    });
    let cfg = PingConfig {
        to,
        udp: true,
        size: SIZE,
        count: 3,
        timeout: Duration::from_millis(200),
        retries,
        ..PingConfig::default()
    };
    let res = client::run(&cfg, &|| false).unwrap();
    script.join().unwrap();
    assert_eq!(res.completed, 2);
    assert_eq!(res.late, 1);
    assert_eq!(res.lost, 1);
    assert_eq!(res.retries_sent, 1 + u64::from(retries));
    assert_eq!(res.rtt_ns.len(), 2);
}
