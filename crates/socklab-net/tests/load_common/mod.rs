//! What the load tests share: socklab's own server protocols over a blocking stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};

use socklab_net::server::handler::{Handler, Replies};

/// socklab's sans-IO session ([`socklab_net::server::handler::Session`]) over a blocking
/// stream, until the client closes, the session says close, or (on a read timeout) `stop`.
pub fn serve_session(mut s: TcpStream, h: Handler, stop: &AtomicBool) {
    let replies = Replies::new(h, 100).unwrap();
    let mut sess = replies.session();
    let mut buf = vec![0u8; 16384];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(_) if !stop.load(Ordering::Relaxed) => continue,
            Err(_) => return,
        };
        let mut data = &buf[..n];
        loop {
            let used = sess.receive(data);
            data = &data[used..];
            let wrote = sess.has_pending();
            while sess.has_pending() {
                let p = sess.pending(&replies);
                if s.write_all(p).is_err() {
                    return;
                }
                let len = p.len();
                sess.sent(len, &replies);
            }
            if sess.should_close() {
                return;
            }
            if data.is_empty() || (used == 0 && !wrote) {
                break;
            }
        }
    }
}
