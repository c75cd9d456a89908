//! `socklab_rudp::Connection` and `Server` never panic on any datagrams: an established pair
//! exchanges data while arbitrary datagrams reach the client, the server's connection and the
//! stateless endpoint, with timers run in between.
//!
//! Input: a sequence of records `[flags u8][delay u8][len u8][bytes; len]`. `flags & 3` picks
//! the receiver (client, server connection, endpoint, both connections); `flags & 4` writes the
//! connection id into the bytes and `flags & 8` appends a valid CRC32C, so the fuzzer gets past
//! the checksum; `delay` advances the clock (ms) before the honest exchange runs again.
use std::net::SocketAddr;

use socklab_rudp::{crc32c::crc32c, Config, Connection, Server, ServerAction};

const CID: u64 = 0x0102_0304_0506_0708;

fn addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 4000))
}

/// Lets both ends send what they have and delivers it to the other.
fn exchange(client: &mut Connection, server: &mut Connection, now: u64) {
    let mut buf = vec![0u8; 2048];
    for _ in 0..64 {
        let mut moved = false;
        client.handle_timeout(now);
        server.handle_timeout(now);
        while let Some(n) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, &buf[..n]);
            moved = true;
        }
        while let Some(n) = server.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, &buf[..n]);
            moved = true;
        }
        let mut rbuf = [0u8; 4096];
        while client.read(&mut rbuf).is_some() {}
        while server.read(&mut rbuf).is_some() {}
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
        if !moved {
            break;
        }
    }
    if client.is_closed() {
        assert_eq!(client.poll_timeout(), None);
    }
}

/// One input of the target.
pub fn run(data: &[u8]) {
    let mut now = 1_000_000_000u64;
    let mut endpoint = Server::new(Config::default(), [5u8; 32]);
    let mut client = Connection::client(Config::default(), CID, now);
    let mut buf = vec![0u8; 2048];
    let mut out = vec![0u8; 2048];
    let n = client.poll_transmit(now, &mut buf).expect("initial");
    let ServerAction::Reply(m) = endpoint.handle_datagram(now, addr(), &buf[..n], &mut out) else {
        panic!("no challenge");
    };
    client.handle_datagram(now, &out[..m]);
    let n = client.poll_transmit(now, &mut buf).expect("connect");
    let ServerAction::Accept(mut server) =
        endpoint.handle_datagram(now, addr(), &buf[..n], &mut out)
    else {
        panic!("no connection");
    };
    let payload = vec![0x5a; 20_000];
    let _ = client.write(1, 0, &payload);
    let _ = server.write(2, 0, &payload[..5_000]);
    exchange(&mut client, &mut server, now);

    let mut rest = data;
    while rest.len() >= 3 {
        let (flags, delay, len) = (rest[0], rest[1], rest[2] as usize);
        let body = &rest[3..];
        let take = len.min(body.len());
        let mut d = body[..take].to_vec();
        rest = &body[take..];
        if flags & 4 != 0 && d.len() >= 9 {
            d[1..9].copy_from_slice(&CID.to_le_bytes());
        }
        if flags & 8 != 0 {
            let crc = crc32c(&d);
            d.extend_from_slice(&crc.to_le_bytes());
        }
        match flags & 3 {
            0 => client.handle_datagram(now, &d),
            1 => server.handle_datagram(now, &d),
            2 => {
                match endpoint.handle_datagram(now, addr(), &d, &mut out) {
                    ServerAction::Reply(r) => assert!(r * 3 < d.len()),
                    ServerAction::Accept(mut c) => {
                        // Only a valid cookie gets here; the new connection must work too.
                        c.handle_timeout(now);
                        let _ = c.poll_transmit(now, &mut buf);
                    }
                    ServerAction::Drop => {}
                }
            }
            _ => {
                client.handle_datagram(now, &d);
                server.handle_datagram(now, &d);
            }
        }
        now += u64::from(delay) * 1_000_000;
        exchange(&mut client, &mut server, now);
    }
    // Let the timers run out: no panic on the way to idle or closed.
    for _ in 0..8 {
        now += 3_000_000_000;
        exchange(&mut client, &mut server, now);
    }
}
