//! What a server says on a connection, as a sans-IO state machine shared by every design.
//!
//! A design reads bytes, hands them to [`Session::receive`], writes [`Session::pending`] and
//! reports what it wrote with [`Session::sent`], and closes when [`Session::should_close`] says
//! so. Replies come from one [`Replies`] built at start-up and shared by every worker: a
//! request costs no allocation (the echo handler keeps one buffer per connection).
//!
//! - `stevens` — UNP's protocol (seed 002, `client.c`): a request is an ASCII decimal byte
//!   count and `\n` (a `\r` before it is accepted); the reply is exactly that many bytes.
//!   Several requests per connection are allowed; the client closes first. A count outside
//!   1..=16384, a line that is not a number, or a line longer than 32 bytes gets one
//!   `ERROR …\n` line and the connection is closed (the classic servers exit; ours keep serving).
//! - `echo` — every byte back, as read.
//! - `discard` — reads and forgets.
//! - `http` — HTTP/1.1 `GET` (or `HEAD`) of one fixed body, keep-alive unless the client asks
//!   for `Connection: close` (or speaks HTTP/1.0 without `keep-alive`; with it, the response
//!   says `Connection: keep-alive`, RFC 9112 §9.3, so `ab -k` works); pipelined requests are
//!   answered in order. A malformed request gets `400`, another method `405`, headers over
//!   8 KiB `431`, and the connection is closed after that reply.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::{NetError, ParseNameError};

/// Largest byte count a `stevens` request may ask for (the classic server's `MAXN`).
pub const STEVENS_MAX: usize = 16384;
/// Longest `stevens` request line, `\n` included.
pub const STEVENS_MAX_LINE: usize = 32;
/// Largest HTTP request head (request line and headers).
pub const HTTP_MAX_HEAD: usize = 8192;
/// Default HTTP body size (the benchmarks' 100-byte file).
pub const HTTP_DEFAULT_BODY: usize = 100;
/// Largest HTTP body `--body` accepts.
pub const HTTP_MAX_BODY: usize = 64 << 20;

/// The application protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Handler {
    /// Count line in, that many bytes out (UNP's `web_child`).
    Stevens,
    /// Bytes back as read.
    Echo,
    /// Read and forget.
    Discard,
    /// HTTP/1.1 GET of a fixed body.
    Http,
}

impl Handler {
    /// Every handler.
    pub const ALL: [Handler; 4] = [
        Handler::Stevens,
        Handler::Echo,
        Handler::Discard,
        Handler::Http,
    ];

    /// The handler's name as written.
    pub fn name(self) -> &'static str {
        match self {
            Handler::Stevens => "stevens",
            Handler::Echo => "echo",
            Handler::Discard => "discard",
            Handler::Http => "http",
        }
    }
}

impl fmt::Display for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Handler {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Handler, ParseNameError> {
        let t = s.trim().to_ascii_lowercase();
        Handler::ALL
            .into_iter()
            .find(|h| h.name() == t)
            .ok_or_else(|| {
                ParseNameError::unknown("handler", s, "use one of stevens, echo, discard, http")
            })
    }
}

/// The canned replies, built once and shared by every worker.
#[derive(Debug)]
pub struct Replies {
    handler: Handler,
    /// `STEVENS_MAX` bytes of a repeating pattern: a `stevens` reply of n bytes is its first n.
    pattern: Box<[u8]>,
    /// The full HTTP 200 responses (head and body) and their head lengths (a `HEAD` request
    /// gets only the head), indexed by [`Conn`].
    http_ok: [(Box<[u8]>, usize); 3],
}

/// What a 200 response says about the connection (RFC 9112 §9.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    /// HTTP/1.1 persistence, the default: no `Connection` header.
    Persist = 0,
    /// `Connection: keep-alive`: an HTTP/1.0 client asked to keep the connection, and only
    /// this header tells it the server agreed (without it the client waits for the close).
    KeepAlive = 1,
    /// `Connection: close`: the last response on the connection.
    Close = 2,
}

const HTTP_400: &[u8] = b"HTTP/1.1 400 Bad Request\r\nServer: socklab\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const HTTP_405: &[u8] = b"HTTP/1.1 405 Method Not Allowed\r\nServer: socklab\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const HTTP_431: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nServer: socklab\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const STEVENS_BAD_COUNT: &[u8] =
    b"ERROR count out of range: send a decimal byte count in 1..=16384 and a newline\n";
const STEVENS_GARBAGE: &[u8] =
    b"ERROR not a count: send a decimal byte count in 1..=16384 and a newline\n";
const STEVENS_TOO_LONG: &[u8] =
    b"ERROR request line too long: send a decimal byte count in 1..=16384 and a newline\n";

impl Replies {
    /// Replies for `handler`; `body` is the HTTP body size (ignored by the others).
    pub fn new(handler: Handler, body: usize) -> Result<Arc<Replies>, NetError> {
        if body > HTTP_MAX_BODY {
            return Err(NetError::Invalid(format!(
                "`body` {body} is too large: use at most {HTTP_MAX_BODY} bytes"
            )));
        }
        let pattern: Box<[u8]> = (0..STEVENS_MAX).map(|i| b'a' + (i % 26) as u8).collect();
        let http_ok = [Conn::Persist, Conn::KeepAlive, Conn::Close].map(|c| http_response(body, c));
        Ok(Arc::new(Replies {
            handler,
            pattern,
            http_ok,
        }))
    }

    /// The handler these replies are for.
    pub fn handler(&self) -> Handler {
        self.handler
    }

    /// A new connection's state.
    pub fn session(&self) -> Session {
        Session {
            handler: self.handler,
            out: Out::None,
            off: 0,
            close_after: false,
            closing: false,
            line: [0; STEVENS_MAX_LINE],
            line_len: 0,
            head_len: 0,
            http: HttpScan::default(),
            echo: if self.handler == Handler::Echo {
                Vec::with_capacity(ECHO_CAP)
            } else {
                Vec::new()
            },
            requests: 0,
        }
    }
}

fn http_response(body: usize, conn: Conn) -> (Box<[u8]>, usize) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nServer: socklab\r\nContent-Type: application/octet-stream\r\nContent-Length: {body}\r\n{}\r\n",
        match conn {
            Conn::Persist => "",
            Conn::KeepAlive => "Connection: keep-alive\r\n",
            Conn::Close => "Connection: close\r\n",
        }
    );
    let mut v = head.into_bytes();
    let head_len = v.len();
    v.extend((0..body).map(|i| b'a' + (i % 26) as u8));
    (v.into_boxed_slice(), head_len)
}

/// Largest chunk the echo handler holds before it must be written back.
const ECHO_CAP: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    None,
    /// The first n bytes of the pattern.
    Stevens(usize),
    /// A static error line.
    Static(&'static [u8]),
    /// A 200 response; `head_only` for HEAD.
    Http {
        conn: Conn,
        head_only: bool,
    },
    /// The echo buffer.
    Echo,
}

/// Progress through one HTTP request head, without storing it.
#[derive(Debug, Default, Clone)]
struct HttpScan {
    /// Bytes of the current line seen (for the request line: the method and version checks).
    line_no: usize,
    /// Request line fields, once parsed.
    method: Method,
    http10: bool,
    /// `Connection:` header said close / keep-alive.
    conn_close: bool,
    conn_keepalive: bool,
    /// The current line, up to 256 bytes (longer header lines are skipped, a longer request
    /// line is still checked for its method and version from what fits).
    cur: Vec<u8>,
    cur_overflow: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Method {
    #[default]
    Unknown,
    Get,
    Head,
    Other,
    Bad,
}

const HTTP_LINE_KEEP: usize = 256;

/// One connection's protocol state. See the module documentation for the protocol rules.
#[derive(Debug)]
pub struct Session {
    handler: Handler,
    out: Out,
    off: usize,
    /// Close once the pending reply is written.
    close_after: bool,
    /// The pending reply was the last one: close now that it is written.
    closing: bool,
    line: [u8; STEVENS_MAX_LINE],
    line_len: usize,
    head_len: usize,
    http: HttpScan,
    echo: Vec<u8>,
    requests: u64,
}

impl Session {
    /// Takes request bytes; returns how many it consumed. It stops consuming as soon as a reply
    /// is pending (write it, then offer the rest again: pipelined requests are answered in
    /// order), and after an error reply it consumes nothing more.
    pub fn receive(&mut self, data: &[u8]) -> usize {
        if self.out != Out::None || self.closing || self.close_after {
            // A reply is pending, or the connection is ending: wait.
            return if self.handler == Handler::Discard {
                data.len()
            } else {
                0
            };
        }
        match self.handler {
            Handler::Discard => data.len(),
            Handler::Echo => {
                let n = data.len().min(ECHO_CAP);
                self.echo.clear();
                self.echo.extend_from_slice(&data[..n]);
                if n > 0 {
                    self.out = Out::Echo;
                    self.off = 0;
                }
                n
            }
            Handler::Stevens => self.receive_stevens(data),
            Handler::Http => self.receive_http(data),
        }
    }

    fn reply(&mut self, out: Out, close: bool) {
        self.out = out;
        self.off = 0;
        self.close_after = close;
    }

    fn receive_stevens(&mut self, data: &[u8]) -> usize {
        for (i, &b) in data.iter().enumerate() {
            if b == b'\n' {
                let mut line = &self.line[..self.line_len];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                self.line_len = 0;
                match parse_count(line) {
                    Some(n) if (1..=STEVENS_MAX).contains(&n) => {
                        self.requests += 1;
                        self.reply(Out::Stevens(n), false);
                    }
                    Some(_) => self.reply(Out::Static(STEVENS_BAD_COUNT), true),
                    None => self.reply(Out::Static(STEVENS_GARBAGE), true),
                }
                return i + 1;
            }
            if self.line_len == STEVENS_MAX_LINE - 1 {
                self.line_len = 0;
                self.reply(Out::Static(STEVENS_TOO_LONG), true);
                return i + 1;
            }
            self.line[self.line_len] = b;
            self.line_len += 1;
        }
        data.len()
    }

    fn receive_http(&mut self, data: &[u8]) -> usize {
        if self.http.cur.capacity() == 0 {
            self.http.cur = Vec::with_capacity(HTTP_LINE_KEEP);
        }
        for (i, &b) in data.iter().enumerate() {
            self.head_len += 1;
            if self.head_len > HTTP_MAX_HEAD {
                self.reply(Out::Static(HTTP_431), true);
                return i + 1;
            }
            if b != b'\n' {
                if self.http.cur.len() < HTTP_LINE_KEEP {
                    self.http.cur.push(b);
                } else {
                    self.http.cur_overflow = true;
                }
                continue;
            }
            // End of a line.
            let mut line = std::mem::take(&mut self.http.cur);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let first = self.http.line_no == 0;
            self.http.line_no += 1;
            if first {
                if line.is_empty() {
                    // Empty lines before a request line are ignored (RFC 9112 §2.2).
                    self.http.line_no = 0;
                    self.head_len = 0;
                } else {
                    self.http.method =
                        request_line(&line, self.http.cur_overflow, &mut self.http.http10);
                }
            } else if line.is_empty() {
                // End of the head.
                line.clear();
                self.http.cur = line;
                let r = self.finish_http();
                return i + 1 + r;
            } else if !self.http.cur_overflow {
                header(
                    &line,
                    &mut self.http.conn_close,
                    &mut self.http.conn_keepalive,
                );
            }
            self.http.cur_overflow = false;
            line.clear();
            self.http.cur = line;
        }
        data.len()
    }

    /// Answers a complete request head; returns 0 (a hook for consumed-count bookkeeping).
    fn finish_http(&mut self) -> usize {
        let method = self.http.method;
        // RFC 9112 §9.3: `close` ends the connection; an HTTP/1.0 request persists only with
        // `keep-alive`, and then the response must say `keep-alive` too.
        let conn = if self.http.conn_close || (self.http.http10 && !self.http.conn_keepalive) {
            Conn::Close
        } else if self.http.http10 {
            Conn::KeepAlive
        } else {
            Conn::Persist
        };
        let close = conn == Conn::Close;
        let cur = std::mem::take(&mut self.http.cur);
        self.http = HttpScan {
            cur,
            ..HttpScan::default()
        };
        self.head_len = 0;
        match method {
            Method::Get | Method::Head => {
                self.requests += 1;
                self.reply(
                    Out::Http {
                        conn,
                        head_only: method == Method::Head,
                    },
                    close,
                );
            }
            Method::Other => self.reply(Out::Static(HTTP_405), true),
            Method::Bad | Method::Unknown => self.reply(Out::Static(HTTP_400), true),
        }
        0
    }

    /// The next bytes to write (empty when nothing is pending).
    pub fn pending<'a>(&'a self, r: &'a Replies) -> &'a [u8] {
        let all: &[u8] = match self.out {
            Out::None => &[],
            Out::Stevens(n) => &r.pattern[..n],
            Out::Static(s) => s,
            Out::Http { conn, head_only } => {
                let (full, head) = &r.http_ok[conn as usize];
                if head_only {
                    &full[..*head]
                } else {
                    full
                }
            }
            Out::Echo => &self.echo,
        };
        &all[self.off.min(all.len())..]
    }

    /// Records that `n` bytes of [`Session::pending`] were written.
    pub fn sent(&mut self, n: usize, r: &Replies) {
        let left = self.pending(r).len();
        debug_assert!(n <= left, "sent {n} of {left} pending bytes");
        if n >= left {
            self.out = Out::None;
            self.off = 0;
            if self.close_after {
                self.closing = true;
            }
        } else {
            self.off += n;
        }
    }

    /// True once the connection should be closed by the server (after an error reply or a
    /// `Connection: close` response has been written in full).
    pub fn should_close(&self) -> bool {
        self.closing
    }

    /// True while a reply is pending.
    pub fn has_pending(&self) -> bool {
        self.out != Out::None
    }

    /// Requests answered with a success reply so far (echo and discard count none).
    pub fn requests(&self) -> u64 {
        self.requests
    }
}

fn parse_count(line: &[u8]) -> Option<usize> {
    let t = line.trim_ascii();
    if t.is_empty() || t.len() > 10 || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    t.iter().try_fold(0usize, |a, &d| {
        a.checked_mul(10)?.checked_add((d - b'0') as usize)
    })
}

fn request_line(line: &[u8], overflow: bool, http10: &mut bool) -> Method {
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    let (Some(m), Some(_target)) = (parts.next(), parts.next()) else {
        return Method::Bad;
    };
    if !overflow {
        match parts.next() {
            Some(b"HTTP/1.1") => *http10 = false,
            Some(b"HTTP/1.0") => *http10 = true,
            _ => return Method::Bad,
        }
        if parts.next().is_some() {
            return Method::Bad;
        }
    }
    match m {
        b"GET" => Method::Get,
        b"HEAD" => Method::Head,
        m if m.iter().all(|b| b.is_ascii_uppercase()) => Method::Other,
        _ => Method::Bad,
    }
}

fn header(line: &[u8], close: &mut bool, keepalive: &mut bool) {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return;
    };
    if !line[..colon].eq_ignore_ascii_case(b"connection") {
        return;
    }
    for tok in line[colon + 1..].split(|&b| b == b',') {
        let tok = tok.trim_ascii();
        if tok.eq_ignore_ascii_case(b"close") {
            *close = true;
        } else if tok.eq_ignore_ascii_case(b"keep-alive") {
            *keepalive = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in chunks of `chunk` bytes, writing replies in pieces of `wchunk`; returns
    /// everything written and whether the session asked to close.
    fn run(h: Handler, body: usize, input: &[u8], chunk: usize, wchunk: usize) -> (Vec<u8>, bool) {
        let r = Replies::new(h, body).unwrap();
        let mut s = r.session();
        let mut out = Vec::new();
        let mut rest = input;
        loop {
            while s.has_pending() {
                let p = s.pending(&r);
                let n = p.len().min(wchunk);
                out.extend_from_slice(&p[..n]);
                s.sent(n, &r);
            }
            if s.should_close() || rest.is_empty() {
                break;
            }
            let take = rest.len().min(chunk);
            let n = s.receive(&rest[..take]);
            rest = &rest[n..];
            if n == 0 && !s.has_pending() {
                break;
            }
        }
        (out, s.should_close())
    }

    #[test]
    fn stevens_replies_exactly_the_count_several_times() {
        for chunk in [1, 3, 100] {
            let (out, close) = run(Handler::Stevens, 0, b"4000\n1\r\n16384\n", chunk, 1000);
            assert_eq!(out.len(), 4000 + 1 + 16384, "chunk {chunk}");
            assert!(!close);
            assert_eq!(&out[..3], b"abc");
        }
    }

    #[test]
    fn stevens_bad_counts_get_an_error_and_close() {
        for bad in [
            &b"0\n"[..],
            b"16385\n",
            b"-5\n",
            b"abc\n",
            b"99999999999999999999\n",
            b"\n",
        ] {
            let (out, close) = run(Handler::Stevens, 0, bad, 7, 4096);
            assert!(out.starts_with(b"ERROR "), "{bad:?}: {out:?}");
            assert!(close, "{bad:?}");
        }
        let long = vec![b'1'; 100];
        let (out, close) = run(Handler::Stevens, 0, &long, 100, 4096);
        assert!(out.starts_with(b"ERROR request line too long"), "{out:?}");
        assert!(close);
        // Requests after an error are not answered.
        let (out, _) = run(Handler::Stevens, 0, b"0\n10\n", 100, 4096);
        assert!(out.starts_with(b"ERROR ") && !out.ends_with(b"abcdefghij"));
    }

    #[test]
    fn http_get_keepalive_pipelined_and_close() {
        let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n";
        let (out, close) = run(Handler::Http, 100, req, 5, 50);
        let text = String::from_utf8_lossy(&out);
        assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
        assert_eq!(text.matches("Content-Length: 100\r\n").count(), 2);
        assert!(!close);
        let (out, close) = run(
            Handler::Http,
            10,
            b"GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            64,
            64,
        );
        let text = String::from_utf8_lossy(&out);
        assert_eq!(text.matches("200 OK").count(), 1, "{text}");
        assert!(text.contains("Connection: close"));
        assert!(close);
        let (_, close) = run(Handler::Http, 10, b"GET / HTTP/1.0\r\n\r\n", 64, 64);
        assert!(close);
        let (out, close) = run(
            Handler::Http,
            10,
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            64,
            64,
        );
        assert!(!close);
        assert!(out.ends_with(b"abcdefghij"));
        // RFC 9112 §9.3: an HTTP/1.0 client (ab -k) keeps the connection only when the response
        // says so; without the header it waits for the close that never comes.
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("\r\nConnection: keep-alive\r\n"), "{text}");
        let (out, _) = run(
            Handler::Http,
            10,
            b"HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
            64,
            64,
        );
        assert!(String::from_utf8_lossy(&out).ends_with("Connection: keep-alive\r\n\r\n"));
        // HTTP/1.1 persistence needs no header; close is said when it happens.
        let (out, _) = run(Handler::Http, 10, b"GET / HTTP/1.1\r\n\r\n", 64, 64);
        assert!(!String::from_utf8_lossy(&out).contains("Connection:"));
        let (out, _) = run(Handler::Http, 10, b"GET / HTTP/1.0\r\n\r\n", 64, 64);
        assert!(String::from_utf8_lossy(&out).contains("Connection: close\r\n"));
        let (out, _) = run(Handler::Http, 10, b"HEAD / HTTP/1.1\r\n\r\n", 64, 64);
        assert!(out.ends_with(b"\r\n\r\n"));
    }

    #[test]
    fn http_errors_close() {
        for (req, code) in [
            (&b"garbage\r\n\r\n"[..], "400"),
            (b"POST / HTTP/1.1\r\n\r\n", "405"),
            (b"GET / HTTP/2.0\r\n\r\n", "400"),
            (b"get / HTTP/1.1\r\n\r\n", "400"),
        ] {
            let (out, close) = run(Handler::Http, 10, req, 3, 64);
            let text = String::from_utf8_lossy(&out);
            assert!(
                text.starts_with(&format!("HTTP/1.1 {code} ")),
                "{req:?}: {text}"
            );
            assert!(close);
        }
        let mut big = b"GET / HTTP/1.1\r\n".to_vec();
        while big.len() <= HTTP_MAX_HEAD {
            big.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        let (out, close) = run(Handler::Http, 10, &big, 1000, 64);
        assert!(out.starts_with(b"HTTP/1.1 431 "));
        assert!(close);
    }

    #[test]
    fn echo_and_discard() {
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let (out, close) = run(Handler::Echo, 0, &data, 7000, 3000);
        assert_eq!(out, data);
        assert!(!close);
        let (out, _) = run(Handler::Discard, 0, &data, 7000, 3000);
        assert!(out.is_empty());
    }

    #[test]
    fn names_round_trip() {
        for h in Handler::ALL {
            assert_eq!(h.name().parse::<Handler>().unwrap(), h);
        }
        assert!("ftp"
            .parse::<Handler>()
            .unwrap_err()
            .to_string()
            .contains("'ftp'"));
    }
}
