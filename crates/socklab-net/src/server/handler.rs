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
//!   8 KiB `431`, and the connection is closed after that reply. Message framing follows RFC
//!   9112 §6.3: a request's `Content-Length` body is read and discarded before the reply (never
//!   buffered; over [`HTTP_MAX_REQUEST_BODY`] gets `413`), so a body is never taken for the
//!   next request. A repeated, listed, signed or non-decimal `Content-Length`, one with
//!   `Transfer-Encoding`, a header line that is not `name: value` (a space before the colon,
//!   obs-fold, a bare CR) gets `400`; `Transfer-Encoding` alone (chunked or any other) gets
//!   `501`: a load-test server reads no chunked bodies. Each of these closes the connection.
//!   The head is parsed by `httparse` (hyper's parser), in place when a read holds all of it,
//!   else from a per-connection copy of at most [`HTTP_MAX_HEAD`] bytes; more than
//!   [`HTTP_MAX_HEADERS`] header lines get `431`.

use std::fmt;
use std::mem::MaybeUninit;
use std::str::FromStr;
use std::sync::Arc;

use crate::{NetError, ParseNameError};

/// Largest byte count a `stevens` request may ask for (the classic server's `MAXN`).
pub const STEVENS_MAX: usize = 16384;
/// Longest `stevens` request line, `\n` included.
pub const STEVENS_MAX_LINE: usize = 32;
/// Largest HTTP request head (request line and headers).
pub const HTTP_MAX_HEAD: usize = 8192;
/// Most header lines in an HTTP request head (hyper's default); more get `431`.
pub const HTTP_MAX_HEADERS: usize = 100;
/// Default HTTP body size (the benchmarks' 100-byte file).
pub const HTTP_DEFAULT_BODY: usize = 100;
/// Largest HTTP body `--body` accepts.
pub const HTTP_MAX_BODY: usize = 64 << 20;
/// Largest request body (`Content-Length`) the HTTP handler reads and discards; a larger one
/// gets `413` and the connection is closed unread.
pub const HTTP_MAX_REQUEST_BODY: u64 = 64 << 10;

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
const HTTP_413: &[u8] = b"HTTP/1.1 413 Content Too Large\r\nServer: socklab\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const HTTP_501: &[u8] = b"HTTP/1.1 501 Not Implemented\r\nServer: socklab\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
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
            head: Vec::new(),
            body_left: 0,
            after_body: (Out::None, false),
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

/// What a complete HTTP request head says, as far as the reply goes.
#[derive(Debug, Clone, Copy)]
struct Head {
    /// Bytes of the head, up to and including its empty line.
    len: usize,
    method: Method,
    http10: bool,
    /// `Connection:` said close / keep-alive.
    conn_close: bool,
    conn_keepalive: bool,
    /// Framing (RFC 9112 §6.3): the `Content-Length`, whether a `Transfer-Encoding` came, and
    /// whether a `Content-Length` was bad or repeated.
    content_length: Option<u64>,
    transfer_encoding: bool,
    malformed: bool,
}

/// What the bytes of a request head come to so far.
#[derive(Debug)]
enum Parsed {
    /// Not complete yet.
    Partial,
    Done(Head),
    /// Refused with this reply (the connection closes after it).
    Refuse(&'static [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Head,
    Other,
    Bad,
}

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
    /// A request head split across reads, kept until it is complete (at most
    /// `HTTP_MAX_HEAD + 1` bytes; empty when heads come whole).
    head: Vec<u8>,
    /// Request body bytes still to discard before `after_body` (the reply and its close flag)
    /// is sent.
    body_left: u64,
    after_body: (Out, bool),
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
        if self.body_left > 0 {
            return self.skip_body(data);
        }
        if self.head.is_empty() {
            // The usual case: the whole head is in this read, parsed in place.
            let view = &data[..data.len().min(HTTP_MAX_HEAD + 1)];
            return match parse_lines(view) {
                Parsed::Partial => {
                    self.head.extend_from_slice(view);
                    view.len()
                }
                Parsed::Refuse(r) => {
                    self.reply(Out::Static(r), true);
                    view.len()
                }
                Parsed::Done(h) => h.len + self.answer(h, &data[h.len..]),
            };
        }
        // The rest of a split head: what it comes to changes only with a newline.
        let old = self.head.len();
        let take = data.len().min(HTTP_MAX_HEAD + 1 - old);
        self.head.extend_from_slice(&data[..take]);
        if !data[..take].contains(&b'\n') && self.head.len() <= HTTP_MAX_HEAD {
            return take;
        }
        match parse_lines(&self.head) {
            Parsed::Partial => take,
            Parsed::Refuse(r) => {
                self.release_head();
                self.reply(Out::Static(r), true);
                take
            }
            Parsed::Done(h) => {
                // The head did not end in what was kept before (that was partial).
                let used = h.len.saturating_sub(old);
                self.release_head();
                used + self.answer(h, &data[used..])
            }
        }
    }

    /// Forgets a split head, keeping a small buffer for the next.
    fn release_head(&mut self) {
        self.head.clear();
        if self.head.capacity() > 1024 {
            self.head = Vec::new();
        }
    }

    /// Answers a complete request head, or starts discarding its body (of which `rest` may
    /// hold some); returns how much of `rest` it consumed.
    fn answer(&mut self, h: Head, rest: &[u8]) -> usize {
        // RFC 9112 §9.3: `close` ends the connection; an HTTP/1.0 request persists only with
        // `keep-alive`, and then the response must say `keep-alive` too.
        let conn = if h.conn_close || (h.http10 && !h.conn_keepalive) {
            Conn::Close
        } else if h.http10 {
            Conn::KeepAlive
        } else {
            Conn::Persist
        };
        // RFC 9112 §6.3: a message whose framing is in doubt is answered and the connection
        // closed, so that nothing after it is read as a request.
        let refuse = if h.method == Method::Bad
            || h.malformed
            || (h.transfer_encoding && h.content_length.is_some())
        {
            Some(HTTP_400)
        } else if h.transfer_encoding {
            Some(HTTP_501)
        } else if h.method == Method::Other {
            Some(HTTP_405)
        } else if h.content_length.unwrap_or(0) > HTTP_MAX_REQUEST_BODY {
            Some(HTTP_413)
        } else {
            None
        };
        if let Some(r) = refuse {
            self.reply(Out::Static(r), true);
            return 0;
        }
        let ok = Out::Http {
            conn,
            head_only: h.method == Method::Head,
        };
        self.after_body = (ok, conn == Conn::Close);
        self.body_left = h.content_length.unwrap_or(0);
        if self.body_left == 0 {
            self.requests += 1;
            self.reply(ok, conn == Conn::Close);
            return 0;
        }
        self.skip_body(rest)
    }

    /// Discards request body bytes; the reply follows the body's last byte.
    fn skip_body(&mut self, data: &[u8]) -> usize {
        let n = usize::try_from(self.body_left).map_or(data.len(), |b| b.min(data.len()));
        self.body_left -= n as u64;
        if self.body_left == 0 {
            let (out, close) = self.after_body;
            self.requests += 1;
            self.reply(out, close);
        }
        n
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

/// [`parse_head`] of `buf` up to its last newline (all of it past `HTTP_MAX_HEAD`): what a
/// head comes to depends on whole lines only, so it is the same however the bytes were split
/// across reads (a bad byte in a line is found when the line ends).
fn parse_lines(buf: &[u8]) -> Parsed {
    if buf.len() > HTTP_MAX_HEAD {
        return parse_head(buf);
    }
    match buf.iter().rposition(|&b| b == b'\n') {
        Some(i) => parse_head(&buf[..=i]),
        None => Parsed::Partial,
    }
}

/// Parses a request head from the start of `buf` (at most `HTTP_MAX_HEAD + 1` bytes: a
/// longer head is `431`). `httparse` refuses what RFC 9112 says a server must refuse in the
/// head's syntax (whitespace before a colon, obs-fold, a bare CR, a line without a colon, a
/// bad request line); the framing headers are checked here.
fn parse_head(buf: &[u8]) -> Parsed {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; HTTP_MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) if n <= HTTP_MAX_HEAD => n,
        Ok(httparse::Status::Partial) if buf.len() <= HTTP_MAX_HEAD => return Parsed::Partial,
        Ok(_) | Err(httparse::Error::TooManyHeaders) => return Parsed::Refuse(HTTP_431),
        Err(_) => return Parsed::Refuse(HTTP_400),
    };
    let method = match req.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        Some(m) if m.bytes().all(|b| b.is_ascii_uppercase()) => Method::Other,
        _ => Method::Bad,
    };
    let mut h = Head {
        len,
        method,
        http10: req.version == Some(0),
        conn_close: false,
        conn_keepalive: false,
        content_length: None,
        transfer_encoding: false,
        malformed: false,
    };
    for f in req.headers.iter() {
        let value = trim_ows(f.value);
        if f.name.eq_ignore_ascii_case("content-length") {
            // One decimal value, once (§6.3 item 5: duplicates and lists are refused, not
            // merged).
            match content_length(value) {
                Some(n) if h.content_length.is_none() => h.content_length = Some(n),
                _ => h.malformed = true,
            }
        } else if f.name.eq_ignore_ascii_case("transfer-encoding") {
            h.transfer_encoding = true;
        } else if f.name.eq_ignore_ascii_case("connection") {
            for tok in value.split(|&b| b == b',') {
                let tok = trim_ows(tok);
                if tok.eq_ignore_ascii_case(b"close") {
                    h.conn_close = true;
                } else if tok.eq_ignore_ascii_case(b"keep-alive") {
                    h.conn_keepalive = true;
                }
            }
        }
    }
    Parsed::Done(h)
}

/// `v` without leading and trailing spaces and tabs (OWS, RFC 9110 §5.6.3).
fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// A `Content-Length` value: 1*DIGIT that fits a `u64` (no sign, no list, no spaces inside).
fn content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0u64, |a, &d| {
        a.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
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

    /// The statuses of the responses in `out`, in order (the 10-byte bodies hold no `HTTP/`).
    fn statuses(out: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(out)
            .split("HTTP/1.1 ")
            .skip(1)
            .map(|r| r[..3].to_string())
            .collect()
    }

    /// A GET whose body looks like a request (issue 26 item 8: it was answered twice).
    const SMUGGLE: &[u8] =
        b"GET / HTTP/1.1\r\nContent-Length: 26\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n";

    #[test]
    fn http_content_length_body_is_read_not_parsed() {
        assert_eq!(
            SMUGGLE.len() - SMUGGLE.windows(4).position(|w| w == b"\r\n\r\n").unwrap() - 4,
            26
        );
        for chunk in [1, 7, 1000] {
            let (out, close) = run(Handler::Http, 10, SMUGGLE, chunk, 64);
            assert_eq!(statuses(&out), ["200"], "chunk {chunk}");
            assert!(!close);
            // The next request after the body is answered, once.
            let mut two = SMUGGLE.to_vec();
            two.extend_from_slice(
                b"HEAD / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n",
            );
            let (out, close) = run(Handler::Http, 10, &two, chunk, 64);
            assert_eq!(statuses(&out), ["200", "200", "200"], "chunk {chunk}");
            assert!(!close);
        }
        // A body up to the limit is discarded, then answered.
        let mut big = format!("GET / HTTP/1.1\r\nContent-Length: {HTTP_MAX_REQUEST_BODY}\r\n\r\n")
            .into_bytes();
        big.resize(big.len() + HTTP_MAX_REQUEST_BODY as usize, b'G');
        let (out, close) = run(Handler::Http, 10, &big, 4096, 64);
        assert_eq!(statuses(&out), ["200"]);
        assert!(!close);
        // No reply before the body's last byte.
        let r = Replies::new(Handler::Http, 10).unwrap();
        let mut s = r.session();
        let head = b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcd";
        assert_eq!(s.receive(head), head.len());
        assert!(!s.has_pending());
        assert_eq!(s.receive(b"eGET"), 1);
        assert!(s.has_pending());
        assert_eq!(s.requests(), 1);
    }

    #[test]
    fn http_doubtful_framing_is_refused_and_closed() {
        for (req, code) in [
            (&b"GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"[..], "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: 5 5\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length:\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello", "400"),
            (b"GET / HTTP/1.1\r\nX: y\r\n Content-Length: 5\r\n\r\nhello", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: 5\rX: y\r\n\r\nhello", "400"),
            (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "501"),
            (b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "501"),
            (b"GET / HTTP/1.1\r\nContent-Length: 65537\r\n\r\n", "413"),
            (b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", "405"),
        ] {
            for chunk in [1, 5, 1000] {
                let (out, close) = run(Handler::Http, 10, req, chunk, 64);
                let text = String::from_utf8_lossy(&out);
                assert_eq!(statuses(&out), [code], "{text}");
                assert!(close, "{text}");
            }
        }
        // A long header line is read whole: 300 zeros and a 5 are 5.
        let padded = format!(
            "GET / HTTP/1.1\r\nContent-Length: {}5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n",
            "0".repeat(300)
        );
        let (out, close) = run(Handler::Http, 10, padded.as_bytes(), 64, 64);
        assert_eq!(statuses(&out), ["200", "200"]);
        assert!(!close);
        // More header lines than `HTTP_MAX_HEADERS`: 431.
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for _ in 0..=HTTP_MAX_HEADERS {
            many.extend_from_slice(b"X: y\r\n");
        }
        many.extend_from_slice(b"\r\n");
        let (out, close) = run(Handler::Http, 10, &many, 100, 64);
        assert_eq!(statuses(&out), ["431"]);
        assert!(close);
        // A leading zero is still one decimal value.
        let (out, close) = run(
            Handler::Http,
            10,
            b"GET / HTTP/1.1\r\nContent-Length: \t005 \r\n\r\nhello",
            3,
            64,
        );
        assert_eq!(statuses(&out), ["200"]);
        assert!(!close);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        /// Feeds `input` in pieces cut at `cuts`, writing replies `wpiece` bytes at a time.
        fn run_cuts(input: &[u8], cuts: &[usize], wpiece: usize) -> (Vec<u8>, bool) {
            let r = Replies::new(Handler::Http, 10).unwrap();
            let mut s = r.session();
            let mut out = Vec::new();
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
            bounds.push(input.len());
            bounds.sort_unstable();
            let mut start = 0;
            for end in bounds {
                while start < end {
                    while s.has_pending() {
                        let p = s.pending(&r);
                        let n = p.len().min(wpiece);
                        out.extend_from_slice(&p[..n]);
                        s.sent(n, &r);
                    }
                    if s.should_close() {
                        return (out, true);
                    }
                    let n = s.receive(&input[start..end]);
                    assert!(n > 0 || s.has_pending(), "no progress");
                    start += n;
                }
            }
            while s.has_pending() {
                let p = s.pending(&r);
                let n = p.len().min(wpiece);
                out.extend_from_slice(&p[..n]);
                s.sent(n, &r);
            }
            (out, s.should_close())
        }

        /// One valid request: GET or HEAD, HTTP/1.1 or 1.0 keep-alive, CRLF or LF, with or
        /// without a body that looks like a request.
        fn request(kind: u8, body: usize) -> Vec<u8> {
            let eol = if kind & 4 == 0 { "\r\n" } else { "\n" };
            let method = if kind & 1 == 0 { "GET" } else { "HEAD" };
            let version = if kind & 2 == 0 {
                "HTTP/1.1"
            } else {
                "HTTP/1.0"
            };
            let mut r = format!("{method} /{kind} {version}{eol}Host: x{eol}");
            if kind & 2 != 0 {
                r.push_str(&format!("Connection: keep-alive{eol}"));
            }
            if body > 0 {
                r.push_str(&format!("Content-Length: {body}{eol}"));
            }
            r.push_str(eol);
            let mut r = r.into_bytes();
            r.extend(b"GET /no HTTP/1.1\r\n\r\n".iter().cycle().take(body));
            r
        }

        proptest! {
            /// Any byte split of a valid pipelined stream (bodies included) gives the same
            /// responses as the whole stream at once: one per request, all 200.
            #[test]
            fn any_split_of_a_pipelined_stream(
                reqs in proptest::collection::vec((0u8..8, 0usize..60), 1..8),
                cuts in proptest::collection::vec(0usize..4000, 0..16),
                wpiece in 1usize..200,
            ) {
                let stream: Vec<u8> = reqs.iter().flat_map(|&(k, b)| request(k, b)).collect();
                let whole = run_cuts(&stream, &[], usize::MAX);
                let split = run_cuts(&stream, &cuts, wpiece);
                prop_assert_eq!(&whole, &split);
                prop_assert!(!whole.1);
                let st = statuses(&whole.0);
                prop_assert_eq!(st.len(), reqs.len());
                prop_assert!(st.iter().all(|c| c == "200"));
            }

            /// A soup of request fragments (framing headers, odd line ends, digits, commas):
            /// any split gives what the whole gives, and only the last response may be a
            /// refusal, which closes.
            #[test]
            fn any_split_of_fragment_soup(
                parts in proptest::collection::vec(0usize..FRAGMENTS.len(), 0..60),
                cuts in proptest::collection::vec(0usize..4000, 0..16),
                wpiece in 1usize..200,
            ) {
                let stream: Vec<u8> = parts.iter().flat_map(|&i| FRAGMENTS[i].bytes()).collect();
                let whole = run_cuts(&stream, &[], usize::MAX);
                let split = run_cuts(&stream, &cuts, wpiece);
                prop_assert_eq!(&whole, &split);
                let st = statuses(&whole.0);
                if let [ok @ .., last] = &st[..] {
                    prop_assert!(ok.iter().all(|c| c == "200"));
                    prop_assert!(last == "200" || whole.1);
                }
            }
        }

        const FRAGMENTS: [&str; 24] = [
            "GET / HTTP/1.1\r\n",
            "HEAD / HTTP/1.0\r\n",
            "GET / HTTP/1.1\n",
            "POST / HTTP/1.1\r\n",
            "\r\n",
            "\n",
            "\r",
            " ",
            "\t",
            ":",
            ",",
            "0",
            "5",
            "12",
            "-",
            "+",
            "x",
            "Content-Length: ",
            "content-length:",
            "Transfer-Encoding: chunked\r\n",
            "Connection: close\r\n",
            "Connection: keep-alive\r\n",
            "Host: x\r\n",
            "GET /",
        ];
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
