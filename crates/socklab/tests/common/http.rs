//! A tiny HTTP/1.1 server for the load tests: keep-alive, a 100-byte body per request.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};

/// Serves HTTP/1.1 keep-alive (a 100-byte body) on 127.0.0.1 from threads, for the life of
/// the test process.
pub fn http_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                let mut line = String::new();
                loop {
                    line.clear();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line.trim().is_empty() => {
                            let mut reply =
                                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".to_vec();
                            reply.extend_from_slice(&[b'a'; 100]);
                            if w.write_all(&reply).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    addr
}
