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

/// A server with no room turns a proven client down with one CLOSE carrying
/// `CLOSE_SERVER_FULL` and its reason: the client's connection ends at once with that code
/// (not after its idle timeout), and the server keeps nothing, so the client's retry is
/// accepted afresh.
#[test]
fn a_refused_client_is_told_the_server_is_full_in_one_datagram() {
    use socklab_rudp::{CloseReason, CLOSE_SERVER_FULL};
    let mut server = Server::new(Config::default(), [1u8; 32]);
    let from = addr("127.0.0.1:4000");
    let (mut client, connect) = handshake(&mut server, from);
    let mut out = vec![0u8; 2048];
    let ServerAction::Accept(conn) =
        server.handle_datagram(NOW + 2_000_000, from, &connect, &mut out)
    else {
        panic!("the CONNECT was not accepted");
    };
    let n = server
        .refuse(NOW + 2_000_000, conn, "server full: 64 sessions", &mut out)
        .expect("a CLOSE to send");
    assert!(n < 100, "refusal of {n} bytes");
    assert_eq!(server.refused(), 1);
    client.handle_datagram(NOW + 3_000_000, &out[..n]);
    assert!(client.is_closed());
    assert_eq!(
        client.poll_event(),
        Some(Event::Closed(CloseReason::Peer {
            code: CLOSE_SERVER_FULL,
            reason: "server full: 64 sessions".into()
        }))
    );
    assert_eq!(client.poll_transmit(NOW + 3_000_000, &mut out), None);
    // Stateless: the same CONNECT is accepted again (and could be refused again).
    assert!(matches!(
        server.handle_datagram(NOW + 4_000_000, from, &connect, &mut out),
        ServerAction::Accept(_)
    ));
}

/// `last_progress` moves with new stream bytes and first acknowledgements of data, never with
/// PINGs, ACK-only packets or repeated data: what a server needs to tell a transfer from a
/// peer that only keeps its connection alive.
#[test]
fn pings_and_repeats_are_not_progress_new_data_is() {
    let mut server = Server::new(Config::default(), [1u8; 32]);
    let from = addr("127.0.0.1:4000");
    let (mut client, connect) = handshake(&mut server, from);
    let mut out = vec![0u8; 2048];
    let t0 = NOW + 2_000_000;
    let ServerAction::Accept(mut conn) = server.handle_datagram(t0, from, &connect, &mut out)
    else {
        panic!("the CONNECT was not accepted");
    };
    assert_eq!(conn.last_progress(), t0, "creation counts");
    // A PING every second for 20 s (a hand-made packet, as a hostile client sends it): the
    // connection stays open (its idle timer is reset), progress does not move.
    let ping = |pn: u64| {
        let mut b = vec![0u8; 64];
        let mut w = wire::PacketWriter::new(
            &mut b,
            wire::Header {
                ty: wire::PacketType::Data,
                cid: 7,
                pn,
            },
        )
        .unwrap();
        w.ping();
        let n = w.finish();
        b.truncate(n);
        b
    };
    let mut t = t0;
    for pn in 100..120 {
        t += 1_000_000_000;
        conn.handle_datagram(t, &ping(pn));
        conn.handle_timeout(t);
        while conn.poll_transmit(t, &mut out).is_some() {}
    }
    assert!(!conn.is_closed(), "PINGs keep the connection open");
    assert_eq!(conn.last_progress(), t0, "PINGs are not progress");
    // New stream bytes are (on a fresh server connection for the same client: this one
    // acknowledges the hand-made packet numbers, which the real client never sent).
    let ServerAction::Accept(mut conn) = server.handle_datagram(t0, from, &connect, &mut out)
    else {
        panic!("the CONNECT was not accepted again");
    };
    t += 1_000_000;
    client.write(1, 0, b"hello").unwrap();
    let mut data = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(n) = client.poll_transmit(t, &mut buf) {
        data.push(buf[..n].to_vec());
    }
    assert!(!data.is_empty());
    for d in &data {
        conn.handle_datagram(t, d);
    }
    assert_eq!(conn.last_progress(), t);
    // The same packets again (a replay) are not.
    for d in &data {
        conn.handle_datagram(t + 5_000_000, d);
    }
    assert_eq!(conn.last_progress(), t);
    // On the sender, the first acknowledgement of its data is progress.
    let before = client.last_progress();
    let t2 = t + 10_000_000;
    conn.handle_timeout(t2);
    let mut acked = false;
    while let Some(n) = conn.poll_transmit(t2, &mut buf) {
        client.handle_datagram(t2, &buf[..n]);
        acked = true;
    }
    assert!(acked, "the receiver acknowledged the data");
    assert!(before < t2 && client.last_progress() == t2);
}
