//! `socklab serve --handler http` and message framing (RFC 9112 §6.3; issue 26 item 8), for
//! every design: a request's `Content-Length` body is read, never taken for the next request;
//! a repeated `Content-Length`, one with `Transfer-Encoding`, `Transfer-Encoding` alone and a
//! body over the limit get one error reply (400, 400, 501, 413) and the connection is closed;
//! pipelined requests with bodies are answered in order. Real processes over loopback; every
//! wait bounded (socket timeouts, the server's stop).

mod serve_support;

use std::io::{Read, Write};
use std::net::SocketAddr;

use serve_support::{connect, for_designs, Server, CLASSIC};

/// Every design: the classic ones, then the event designs.
fn designs() -> Vec<&'static str> {
    CLASSIC
        .iter()
        .copied()
        .chain([
            "epoll",
            "epoll-shared",
            "epoll-exclusive",
            "reuseport",
            "uring",
            "tokio",
        ])
        .collect()
}

/// Sends `req`, reads until the server closes (a reset after the reply counts as a close: the
/// server may close with a refused body unread); returns the statuses of the responses.
fn statuses(addr: SocketAddr, req: &[u8]) -> Result<Vec<String>, String> {
    let mut s = connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.write_all(req).map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => {
                return Err(format!(
                    "waiting for the server to close: {e} (after {:?})",
                    String::from_utf8_lossy(&got)
                ))
            }
        }
    }
    // The bodies are the 10 bytes `abcdefghij`: every `HTTP/1.1 ` starts a response.
    Ok(String::from_utf8_lossy(&got)
        .split("HTTP/1.1 ")
        .skip(1)
        .map(|r| r.get(..3).unwrap_or(r).to_string())
        .collect())
}

const CLOSE: &[u8] = b"GET /last HTTP/1.1\r\nConnection: close\r\n\r\n";

fn framing(design: &str) -> Result<(), String> {
    let server = Server::start(
        design,
        &["--workers", "2", "--handler", "http", "--body", "10"],
    );
    let addr = server.addr;
    let expect = |what: &str, req: &[u8], want: &[&str]| -> Result<(), String> {
        let got = statuses(addr, req)?;
        if got != want {
            return Err(format!("{what}: responses {got:?}, want {want:?}"));
        }
        Ok(())
    };
    // A body that looks like a request is a body: one response for it, then the next request.
    let mut smuggle =
        b"GET / HTTP/1.1\r\nContent-Length: 26\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n".to_vec();
    smuggle.extend_from_slice(CLOSE);
    expect(
        "a GET with a request as its body",
        &smuggle,
        &["200", "200"],
    )?;
    expect(
        "a repeated Content-Length",
        b"GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        &["400"],
    )?;
    expect(
        "two different Content-Length values",
        b"GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 28\r\n\r\nhello",
        &["400"],
    )?;
    expect(
        "Content-Length with Transfer-Encoding",
        b"GET / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        &["400"],
    )?;
    expect(
        "Transfer-Encoding: chunked",
        b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        &["501"],
    )?;
    expect(
        "a body over the limit",
        b"GET / HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n",
        &["413"],
    )?;
    // Pipelined requests, with and without bodies, in one write: answered in order.
    let mut pipe = Vec::new();
    for i in 0..20 {
        if i % 2 == 0 {
            pipe.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        } else {
            pipe.extend_from_slice(b"HEAD / HTTP/1.1\r\nContent-Length: 4\r\n\r\nGET ");
        }
    }
    pipe.extend_from_slice(CLOSE);
    expect("21 pipelined requests", &pipe, &["200"; 21])?;
    let stopped = server.stop();
    if stopped.requests() != 23 {
        return Err(format!("{} requests counted, want 23", stopped.requests()));
    }
    Ok(())
}

#[test]
fn every_design_reads_request_bodies_and_refuses_doubtful_framing() {
    for_designs(&designs(), 4, framing);
}
