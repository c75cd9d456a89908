//! The echo server answering sockperf framing over TCP (issue 27 part 3), byte by byte:
//! only pong requests are answered, with the client bit cleared; a message split over several
//! writes is answered once whole; a header over the limit closes the connection with a
//! one-line reason; socklab's own ASCII clients are still echoed. Every wait is bounded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use socklab_net::echo::{ConnEnd, EchoConfig, EchoEvent, EchoServer};
use socklab_net::sockperf::wire::{Header, FLAG_CLIENT, FLAG_PONG};

const WAIT: Duration = Duration::from_secs(10);

fn msg(seq: u64, flags: u16, len: usize) -> Vec<u8> {
    let mut m = vec![0x5a; len];
    Header {
        seq,
        flags,
        len: len as u32,
    }
    .write(&mut m);
    m
}

/// Serves until the returned flag is set; the events come on the channel.
fn start() -> (SocketAddr, Arc<AtomicBool>, mpsc::Receiver<EchoEvent>) {
    let server = EchoServer::bind(EchoConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..EchoConfig::default()
    })
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s2 = stop.clone();
    std::thread::spawn(move || {
        let _ = server.serve(&|| s2.load(Ordering::SeqCst), &mut |e| {
            let _ = tx.send(e.clone());
        });
    });
    (addr, stop, rx)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    // Each write its own segment where it can: the server sees the split message in pieces.
    c.set_nodelay(true).unwrap();
    c
}

#[test]
fn only_pong_requests_are_answered_and_a_bad_header_closes_the_connection() {
    let (addr, stop, events) = start();
    let mut c = connect(addr);
    // Under-load: 1 and 3 want no reply, 2 does; 2 is split in the middle of its header.
    let two = msg(2, FLAG_CLIENT | FLAG_PONG, 100);
    c.write_all(&msg(1, FLAG_CLIENT, 64)).unwrap();
    c.write_all(&two[..5]).unwrap();
    c.write_all(&two[5..]).unwrap();
    c.write_all(&msg(3, FLAG_CLIENT, 14)).unwrap();
    let mut got = vec![0u8; 100];
    c.read_exact(&mut got).unwrap();
    assert_eq!(got, msg(2, FLAG_PONG, 100));
    // A header over the limit (1 MiB - 1): a one-line reason and a close.
    c.write_all(&msg(4, FLAG_CLIENT | FLAG_PONG, 14)[..10])
        .unwrap();
    c.write_all(&(2u32 << 20).to_be_bytes()).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "nothing answered after the bad header");
    let closed = std::iter::from_fn(|| events.recv_timeout(WAIT).ok())
        .find(|e| matches!(e, EchoEvent::Closed { .. }))
        .expect("a Closed event");
    let EchoEvent::Closed { end, messages, .. } = closed else {
        unreachable!()
    };
    assert_eq!(messages, 3);
    assert_eq!(
        end,
        ConnEnd::Aborted(
            "sockperf header says 2097152 bytes: a message is 14 to 1048575 bytes".into()
        )
    );
    // socklab's own clients (printable ASCII) are echoed byte for byte, as before.
    let mut c = connect(addr);
    let ascii = b"00000001asdadqwDSDQWD13123ewadSADASDA";
    c.write_all(ascii).unwrap();
    let mut back = vec![0u8; ascii.len()];
    c.read_exact(&mut back).unwrap();
    assert_eq!(back, ascii);
    stop.store(true, Ordering::SeqCst);
}
