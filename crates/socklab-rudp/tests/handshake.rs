//! The handshake and what a hostile or broken peer can make an endpoint do.

use std::net::SocketAddr;

use proptest::prelude::*;
use socklab_rudp::{wire, Config, Connection, Event, Server, ServerAction};

const NOW: u64 = 1_000_000_000;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Runs the client until it has an Initial to send and returns it.
fn initial(client: &mut Connection) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let n = client.poll_transmit(NOW, &mut buf).expect("an Initial");
    buf.truncate(n);
    buf
}

#[test]
fn a_spoofed_initial_gets_one_small_challenge_and_creates_no_state() {
    let mut server = Server::new(Config::default(), [1u8; 32]);
    let mut client = Connection::client(Config::default(), 42, NOW);
    let init = initial(&mut client);
    assert!(init.len() >= wire::MIN_INITIAL_SIZE);
    let mut out = vec![0u8; 2048];
    // The "victim" address is whatever the attacker wrote as source.
    match server.handle_datagram(NOW, addr("192.0.2.7:53"), &init, &mut out) {
        ServerAction::Reply(n) => assert!(n * 3 < init.len(), "challenge {n} bytes"),
        other => panic!("expected a challenge, got {other:?}"),
    }
    assert_eq!(server.challenges(), 1);
    // An Initial shorter than the minimum is not answered (no amplification at all).
    let mut short = init.clone();
    short.truncate(600);
    assert!(matches!(
        server.handle_datagram(NOW, addr("192.0.2.7:53"), &short, &mut out),
        ServerAction::Drop
    ));
}

fn handshake(server: &mut Server, from: SocketAddr) -> (Connection, Vec<u8>) {
    let mut client = Connection::client(Config::default(), 7, NOW);
    let init = initial(&mut client);
    let mut out = vec![0u8; 2048];
    let ServerAction::Reply(n) = server.handle_datagram(NOW, from, &init, &mut out) else {
        panic!("no challenge");
    };
    client.handle_datagram(NOW + 1_000_000, &out[..n]);
    assert_eq!(client.poll_event(), Some(Event::Connected));
    assert!(client.is_established());
    let mut buf = vec![0u8; 2048];
    let n = client
        .poll_transmit(NOW + 1_000_000, &mut buf)
        .expect("a packet carrying CONNECT");
    buf.truncate(n);
    (client, buf)
}

#[test]
fn the_cookie_proves_the_address_and_creates_the_connection() {
    let mut server = Server::new(Config::default(), [1u8; 32]);
    let real = addr("127.0.0.1:4000");
    let (_client, connect) = handshake(&mut server, real);
    let mut out = vec![0u8; 2048];
    // From another address, the same packet is refused.
    assert!(matches!(
        server.handle_datagram(NOW, addr("127.0.0.2:4000"), &connect, &mut out),
        ServerAction::Drop
    ));
    // Another server secret refuses it too.
    let mut other = Server::new(Config::default(), [2u8; 32]);
    assert!(matches!(
        other.handle_datagram(NOW, real, &connect, &mut out),
        ServerAction::Drop
    ));
    // After two cookie periods it has expired.
    assert!(matches!(
        server.handle_datagram(NOW + 30_000_000_000, real, &connect, &mut out),
        ServerAction::Drop
    ));
    match server.handle_datagram(NOW + 2_000_000, real, &connect, &mut out) {
        ServerAction::Accept(mut conn) => {
            assert_eq!(conn.cid(), 7);
            assert_eq!(conn.poll_event(), Some(Event::Connected));
        }
        other => panic!("expected a connection, got {other:?}"),
    }
}

/// The receiver acknowledges everything but never reads: the sender stops at exactly the
/// credit of the Challenge (no more bytes however long it waits, probes included), and resumes
/// once the receiver reads and grants more.
#[test]
fn flow_control_stops_the_sender_at_the_receivers_credit() {
    const WINDOW: u64 = 65_536;
    let config = Config {
        recv_window: WINDOW,
        ..Config::default()
    };
    let mut server = Server::new(config.clone(), [1u8; 32]);
    let from = addr("127.0.0.1:4000");
    let mut client = Connection::client(config, 9, NOW);
    let init = initial(&mut client);
    let mut out = vec![0u8; 2048];
    let ServerAction::Reply(n) = server.handle_datagram(NOW, from, &init, &mut out) else {
        panic!()
    };
    client.handle_datagram(NOW, &out[..n]);
    client.write(1, 0, &vec![5u8; 1 << 20]).unwrap();
    assert_eq!(client.peer_credit_left(), WINDOW);
    let mut conn: Option<Box<Connection>> = None;
    let mut t = NOW;
    // 1 ms steps, 0.5 ms one-way delay (delivered within the step): 3 s in all.
    let mut step = |client: &mut Connection, conn: &mut Option<Box<Connection>>, t: u64| {
        let mut buf = vec![0u8; 2048];
        while let Some(n) = client.poll_transmit(t, &mut buf) {
            match conn {
                Some(c) => c.handle_datagram(t + 500_000, &buf[..n]),
                None => match server.handle_datagram(t + 500_000, from, &buf[..n], &mut out) {
                    ServerAction::Accept(c) => *conn = Some(c),
                    other => panic!("{other:?}"),
                },
            }
        }
        if let Some(c) = conn {
            c.handle_timeout(t + 500_000);
            while let Some(n) = c.poll_transmit(t + 500_000, &mut buf) {
                client.handle_datagram(t + 1_000_000, &buf[..n]);
            }
        }
        client.handle_timeout(t + 1_000_000);
    };
    for _ in 0..3_000 {
        step(&mut client, &mut conn, t);
        t += 1_000_000;
    }
    let receiver = conn.as_mut().expect("the server accepted the connection");
    // Everything sent was acknowledged, and the sender stopped exactly at the credit.
    assert!(client.is_established() && !receiver.is_closed());
    assert_eq!(client.stats().stream_bytes_sent, WINDOW);
    assert_eq!(client.peer_credit_left(), 0);
    assert_eq!(receiver.stats().stream_bytes_received, WINDOW);
    assert_eq!(receiver.stats().duplicate_stream_bytes, 0);
    // Reading grants more credit; the sender goes on (and never beyond what was granted).
    let mut buf = vec![0u8; 1 << 16];
    let mut read = 0u64;
    while let Some(c) = receiver.read(&mut buf) {
        assert_eq!((c.stream, c.offset), (1, read));
        read += c.len as u64;
    }
    assert_eq!(read, WINDOW);
    for _ in 0..3_000 {
        step(&mut client, &mut conn, t);
        t += 1_000_000;
    }
    let receiver = conn.as_mut().unwrap();
    assert_eq!(client.stats().stream_bytes_sent, 2 * WINDOW);
    assert_eq!(receiver.stats().stream_bytes_received, 2 * WINDOW);
    assert_eq!(client.peer_credit_left(), 0);
    assert!(!receiver.is_closed() && !client.is_closed());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]

    /// Random datagrams, and valid ones truncated or with a flipped bit, never panic, never
    /// deliver data, and count as invalid.
    #[test]
    fn garbage_is_dropped_without_effect(garbage in proptest::collection::vec(any::<u8>(), 0..1500), cut in 0usize..1500, bit in 0usize..12_000) {
        let mut server = Server::new(Config::default(), [1u8; 32]);
        let from = addr("127.0.0.1:4000");
        let (mut client, mut connect) = handshake(&mut server, from);
        let mut out = vec![0u8; 2048];
        let ServerAction::Accept(mut conn) = server.handle_datagram(NOW, from, &connect, &mut out) else {
            panic!("no connection")
        };
        while conn.poll_event().is_some() {}
        let before = conn.stats().invalid_datagrams;
        let mut bad = garbage.clone();
        // Make the connection id match so the packet reaches the parser proper.
        if bad.len() >= 9 {
            bad[1..9].copy_from_slice(&7u64.to_le_bytes());
        }
        conn.handle_datagram(NOW, &bad);
        let mut truncated = connect.clone();
        truncated.truncate(cut.min(connect.len() - 1));
        conn.handle_datagram(NOW, &truncated);
        let i = bit % (connect.len() * 8);
        connect[i / 8] ^= 1 << (i % 8);
        conn.handle_datagram(NOW, &connect);
        client.handle_datagram(NOW, &bad);
        let mut buf = [0u8; 2048];
        prop_assert!(conn.read(&mut buf).is_none());
        prop_assert!(conn.stats().invalid_datagrams >= before + 2);
        prop_assert!(!conn.is_closed());
    }
}
