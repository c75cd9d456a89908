//! The ping-pong timeout bounds the whole reply (issue 26 item 7): a hostile server that
//! trickles its reply one byte at a time, each byte well within the timeout, cannot stretch a
//! round trip past it. The repetition fails with the timeout as its reason; no round trip is
//! stored. Loopback only; every server thread is bounded by its byte count and by the client
//! going away.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use socklab_net::pingpong::{self, PingConfig, Reply};
use socklab_net::NetError;

/// Bytes per message and per reply.
const SIZE: usize = 32;
/// The trickle: one byte of the reply every this long (each well within the timeout).
const DRIP: Duration = Duration::from_millis(300);
/// The client's timeout: the whole reply takes 31 × 300 ms = 9.3 s, so it must fail.
const TIMEOUT: Duration = Duration::from_secs(1);

/// A server that reads each `SIZE`-byte message and echoes it back one byte every [`DRIP`],
/// on every connection it accepts (up to `conns`). For each connection it reports, once the
/// client has gone away (a write failed or the next read saw the end), how many bytes of the
/// echo it had written.
fn trickling_server(conns: usize) -> (SocketAddr, mpsc::Receiver<usize>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        for _ in 0..conns {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(trickle(s));
            });
        }
    });
    (addr, rx, handle)
}

/// Echoes messages on `s` one byte every [`DRIP`] until the client goes away; returns the
/// bytes written. Bounded: at most 4 messages (37 s of dripping), each read at most 20 s.
fn trickle(mut s: TcpStream) -> usize {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.set_nodelay(true);
    let mut written = 0;
    let mut msg = [0u8; SIZE];
    for _ in 0..4 {
        if s.read_exact(&mut msg).is_err() {
            return written;
        }
        for b in msg {
            std::thread::sleep(DRIP);
            if s.write_all(&[b]).is_err() {
                return written;
            }
            written += 1;
        }
    }
    written
}

fn cfg(to: SocketAddr) -> PingConfig {
    PingConfig {
        to,
        size: SIZE,
        count: 2,
        timeout: TIMEOUT,
        reply: Reply::Echo,
        ..PingConfig::default()
    }
}

/// Runs `cfg` and checks that it fails with the whole-reply timeout of round trip 1 (the
/// per-read timeout of old let the reply take 9.3 s and stored it as a sample); returns the
/// error's text.
fn fails_on_the_timeout(cfg: &PingConfig) -> String {
    let r = pingpong::run(cfg, &|| false);
    let e = match r {
        Ok(r) => panic!(
            "a reply trickled over {:?} was stored as {} round trip(s), the longest {:.1} s",
            DRIP * (SIZE as u32 - 1),
            r.completed,
            r.rtt_ns.max() as f64 / 1e9
        ),
        Err(e) => e,
    };
    assert!(matches!(e, NetError::Protocol { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("round trip 1 was not complete within the timeout of 1s")
            && text.contains(&cfg.to.to_string()),
        "{text}"
    );
    text
}

/// Waits (bounded) for the server's report of how many bytes one connection got written
/// before the client went away: the client does not keep the connection after the timeout.
fn client_went_away(done: &mpsc::Receiver<usize>) -> usize {
    done.recv_timeout(Duration::from_secs(30))
        .expect("the client closes the connection after the timeout")
}

#[test]
fn a_trickled_reply_fails_the_repetition_at_the_timeout() {
    let (addr, done, handle) = trickling_server(1);
    let text = fails_on_the_timeout(&cfg(addr));
    // What had arrived is quoted: a few bytes of the echo, not all of it.
    assert!(text.contains("expected 32 bytes echoed, got"), "{text}");
    let written = client_went_away(&done);
    assert!(
        written < SIZE,
        "{written} bytes: the whole reply was awaited"
    );
    handle.join().unwrap();
}

#[test]
fn a_trickled_reply_fails_with_a_connection_per_message_too() {
    let (addr, done, handle) = trickling_server(1);
    let mut c = cfg(addr);
    c.new_connection_per_message = true;
    fails_on_the_timeout(&c);
    assert!(client_went_away(&done) < SIZE);
    handle.join().unwrap();
}

#[test]
fn a_fixed_size_reply_is_bounded_as_a_whole() {
    let (addr, done, handle) = trickling_server(1);
    let mut c = cfg(addr);
    c.reply = Reply::Bytes(SIZE);
    let text = fails_on_the_timeout(&c);
    assert!(text.contains("expected a 32-byte reply, got"), "{text}");
    assert!(client_went_away(&done) < SIZE);
    handle.join().unwrap();
}
