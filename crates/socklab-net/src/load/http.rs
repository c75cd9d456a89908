//! HTTP/1.1 for the load generator: the request it sends and a sans-IO reply parser.
//!
//! The parser takes reply bytes in pieces of any size (a read may end anywhere, even inside
//! `\r\n`) and keeps no copy of the head beyond one short line buffer, so it costs no
//! allocation. What it understands, and what it does not:
//!
//! - the status line `HTTP/1.x SSS reason`; a status outside 200..=299 is a bad reply;
//! - `Content-Length` (the body is exactly that long); `204` and `304` have no body;
//! - `Connection: close`, or an `HTTP/1.0` reply without `Connection: keep-alive` (RFC 9112
//!   §9.3: the reply is the connection's last, [`ReplyParser::keep_alive`]);
//! - `Transfer-Encoding` (any coding: `chunked`, and `identity` too, which RFC 9112 no longer
//!   knows and under which §6.3 would read to the close, not `Content-Length`), or a 2xx reply
//!   without `Content-Length`, is refused as a bad reply: the generator drives static files of
//!   known size (nginx, socklab's own servers) and does not read bodies delimited by the end
//!   of the connection;
//! - a head longer than [`MAX_HEAD`] bytes, a line that is not `Name: value`, or two
//!   different `Content-Length` values are bad replies.

use std::fmt;

/// Longest reply head accepted.
pub const MAX_HEAD: usize = 64 << 10;

/// Longest line (status line or header) kept for inspection; longer header lines are checked
/// by their first bytes only, which is enough for the headers the parser reads.
const LINE_KEEP: usize = 128;

/// The request bytes: `GET path HTTP/1.1`, `Host:`, and `Connection: close` when `close`.
pub fn request(path: &str, host: &str, close: bool) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes()
}

/// Why a reply was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadReply {
    /// The status line is not `HTTP/1.x NNN ...`.
    StatusLine,
    /// A status outside 2xx.
    Status(u16),
    /// A header line without a colon, or an unparsable `Content-Length`.
    Header,
    /// A transfer coding, chunked or other (not supported: see the module documentation).
    Chunked,
    /// A 2xx reply with a body but no `Content-Length`.
    NoLength,
    /// The head is longer than [`MAX_HEAD`].
    HeadTooLong,
}

impl fmt::Display for BadReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadReply::StatusLine => f.write_str("malformed status line"),
            BadReply::Status(s) => write!(f, "status {s}"),
            BadReply::Header => f.write_str("malformed header"),
            BadReply::Chunked => f.write_str("transfer-coded (chunked) body (unsupported)"),
            BadReply::NoLength => f.write_str("no Content-Length"),
            BadReply::HeadTooLong => f.write_str("head too long"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the head; `line_no` 0 is the status line.
    Head,
    /// Reading the body; `remaining` bytes to go.
    Body,
    /// The reply is complete.
    Done,
}

/// Progress through one HTTP reply. [`ReplyParser::reset`] makes it ready for the next.
#[derive(Debug, Clone)]
pub struct ReplyParser {
    state: State,
    line: [u8; LINE_KEEP],
    line_len: usize,
    /// Bytes of the current line seen (may exceed `LINE_KEEP`).
    line_seen: usize,
    line_no: usize,
    head_len: usize,
    fields: Fields,
    remaining: u64,
}

impl Default for ReplyParser {
    fn default() -> Self {
        ReplyParser::new()
    }
}

impl ReplyParser {
    /// A parser at the start of a reply.
    pub fn new() -> ReplyParser {
        ReplyParser {
            state: State::Head,
            line: [0; LINE_KEEP],
            line_len: 0,
            line_seen: 0,
            line_no: 0,
            head_len: 0,
            fields: Fields::default(),
            remaining: 0,
        }
    }

    /// Ready for the next reply.
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.line_len = 0;
        self.line_seen = 0;
        self.line_no = 0;
        self.head_len = 0;
        self.fields = Fields::default();
        self.remaining = 0;
    }

    /// The status code, once the status line is in (0 before).
    pub fn status(&self) -> u16 {
        self.fields.status
    }

    /// False when the connection ends after this reply (RFC 9112 §9.3): the server said
    /// `Connection: close`, or replied `HTTP/1.0` without `Connection: keep-alive`.
    pub fn keep_alive(&self) -> bool {
        !self.fields.close && (!self.fields.http10 || self.fields.keep_alive)
    }

    /// True once the whole reply is in.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Takes the next reply bytes. Returns `Ok(Some(n))` when the reply completed after the
    /// first `n` bytes of `data` (the rest is not part of it), `Ok(None)` when all of `data` was
    /// used and more is needed, or why the reply is bad.
    pub fn feed(&mut self, data: &[u8]) -> Result<Option<usize>, BadReply> {
        let mut i = 0;
        while i < data.len() {
            match self.state {
                State::Done => return Ok(Some(i)),
                State::Body => {
                    let take =
                        (data.len() - i).min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                    i += take;
                    self.remaining -= take as u64;
                    if self.remaining == 0 {
                        self.state = State::Done;
                    }
                }
                State::Head => {
                    let rest = &data[i..];
                    let Some(p) = rest.iter().position(|&b| b == b'\n') else {
                        // An incomplete line: keep what fits for later.
                        self.head_len += rest.len();
                        if self.head_len > MAX_HEAD {
                            return Err(BadReply::HeadTooLong);
                        }
                        let keep = rest.len().min(LINE_KEEP - self.line_len);
                        self.line[self.line_len..self.line_len + keep]
                            .copy_from_slice(&rest[..keep]);
                        self.line_len += keep;
                        self.line_seen += rest.len();
                        i = data.len();
                        continue;
                    };
                    self.head_len += p + 1;
                    if self.head_len > MAX_HEAD {
                        return Err(BadReply::HeadTooLong);
                    }
                    i += p + 1;
                    let (mut line, truncated) = if self.line_seen == 0 {
                        // The whole line is in this piece: parse it in place, no copy.
                        (&rest[..p.min(LINE_KEEP)], p > LINE_KEEP)
                    } else {
                        let keep = p.min(LINE_KEEP - self.line_len);
                        self.line[self.line_len..self.line_len + keep]
                            .copy_from_slice(&rest[..keep]);
                        self.line_len += keep;
                        self.line_seen += p;
                        (&self.line[..self.line_len], self.line_seen > self.line_len)
                    };
                    if !truncated {
                        if let [head @ .., b'\r'] = line {
                            line = head;
                        }
                    }
                    let no = self.line_no;
                    let end = head_line(&mut self.fields, no, line, truncated)?;
                    self.line_no += 1;
                    self.line_len = 0;
                    self.line_seen = 0;
                    if end {
                        self.end_of_head()?;
                    }
                }
            }
        }
        Ok(if self.state == State::Done {
            Some(i)
        } else {
            None
        })
    }

    fn end_of_head(&mut self) -> Result<(), BadReply> {
        let len = if self.fields.status == 204 {
            0
        } else {
            self.fields.content_length.ok_or(BadReply::NoLength)?
        };
        self.remaining = len;
        self.state = if len == 0 { State::Done } else { State::Body };
        Ok(())
    }
}

/// What the head said so far.
#[derive(Debug, Clone, Copy, Default)]
struct Fields {
    status: u16,
    content_length: Option<u64>,
    close: bool,
    /// The status line said `HTTP/1.0`.
    http10: bool,
    /// A `Connection: keep-alive` header.
    keep_alive: bool,
}

/// One head line (without its `\n`, and without its `\r` unless `truncated`): line `no`, 0 being
/// the status line. Returns true at the empty line that ends the head.
fn head_line(f: &mut Fields, no: usize, line: &[u8], truncated: bool) -> Result<bool, BadReply> {
    if no == 0 {
        status_line(f, line)?;
        return Ok(false);
    }
    if line.is_empty() && !truncated {
        return Ok(true);
    }
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return Err(BadReply::Header);
    };
    let name = &line[..colon];
    if name.is_empty() || name.iter().any(|&b| b == b' ' || b == b'\t') {
        return Err(BadReply::Header);
    }
    let value = trim(&line[colon + 1..]);
    if name.eq_ignore_ascii_case(b"content-length") {
        if truncated {
            return Err(BadReply::Header);
        }
        let n = parse_u64(value).ok_or(BadReply::Header)?;
        if f.content_length.is_some_and(|c| c != n) {
            return Err(BadReply::Header);
        }
        f.content_length = Some(n);
    } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
        // RFC 9112 §6.3: any Transfer-Encoding overrides Content-Length.
        return Err(BadReply::Chunked);
    } else if name.eq_ignore_ascii_case(b"connection") {
        f.close |= contains_token(value, b"close");
        f.keep_alive |= contains_token(value, b"keep-alive");
    }
    Ok(false)
}

fn status_line(f: &mut Fields, line: &[u8]) -> Result<(), BadReply> {
    // "HTTP/1.x SSS" then optionally " reason".
    if line.len() < 12
        || !line.starts_with(b"HTTP/1.")
        || !line[7].is_ascii_digit()
        || line[8] != b' '
        || (line.len() > 12 && line[12] != b' ')
    {
        return Err(BadReply::StatusLine);
    }
    let code = &line[9..12];
    if !code.iter().all(u8::is_ascii_digit) {
        return Err(BadReply::StatusLine);
    }
    f.status = code.iter().fold(0u16, |a, &d| a * 10 + u16::from(d - b'0'));
    f.http10 = line[7] == b'0';
    if !(200..300).contains(&f.status) {
        return Err(BadReply::Status(f.status));
    }
    Ok(())
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0')))
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| trim(t).eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NGINX: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 23 Nov 2026 07:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 5\r\nLast-Modified: Mon, 23 Nov 2026 07:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"x\"\r\nAccept-Ranges: bytes\r\n\r\nhello";

    fn whole(reply: &[u8]) -> Result<Option<usize>, BadReply> {
        ReplyParser::new().feed(reply)
    }

    #[test]
    fn request_bytes() {
        assert_eq!(
            request("/x", "127.0.0.1:80", false),
            b"GET /x HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n"
        );
        assert_eq!(
            request("/", "h", true),
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn nginx_reply_whole_and_byte_by_byte() {
        assert_eq!(whole(NGINX), Ok(Some(NGINX.len())));
        let mut p = ReplyParser::new();
        for (i, b) in NGINX.iter().enumerate() {
            let r = p.feed(std::slice::from_ref(b)).unwrap();
            assert_eq!(r.is_some(), i == NGINX.len() - 1, "at {i}");
        }
        assert!(p.is_done() && p.keep_alive());
        assert_eq!(p.status(), 200);
    }

    #[test]
    fn trailing_bytes_are_not_consumed() {
        let mut v = NGINX.to_vec();
        v.extend_from_slice(b"HTTP/1.1 200");
        assert_eq!(whole(&v), Ok(Some(NGINX.len())));
    }

    #[test]
    fn reset_parses_the_next_reply() {
        let mut p = ReplyParser::new();
        assert_eq!(p.feed(NGINX), Ok(Some(NGINX.len())));
        p.reset();
        assert_eq!(p.feed(NGINX), Ok(Some(NGINX.len())));
    }

    #[test]
    fn socklab_server_reply() {
        let r = b"HTTP/1.1 200 OK\r\nServer: socklab\r\nContent-Type: application/octet-stream\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc";
        let mut p = ReplyParser::new();
        assert_eq!(p.feed(r), Ok(Some(r.len())));
        assert!(!p.keep_alive());
    }

    #[test]
    fn bare_newlines_and_no_reason() {
        let r = b"HTTP/1.1 200\nContent-Length: 0\n\n";
        assert_eq!(whole(r), Ok(Some(r.len())));
        let r = b"HTTP/1.0 204 No Content\r\n\r\n";
        let mut p = ReplyParser::new();
        assert_eq!(p.feed(r), Ok(Some(r.len())));
        assert!(!p.keep_alive(), "HTTP/1.0 closes");
        // ...unless it says keep-alive (RFC 9112 §9.3), as an HTTP/1.0 server does for `ab -k`.
        let r = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n";
        let mut p = ReplyParser::new();
        assert_eq!(p.feed(r), Ok(Some(r.len())));
        assert!(p.keep_alive(), "HTTP/1.0 with keep-alive persists");
        p.reset();
        assert!(
            p.keep_alive(),
            "a reset parser forgets the previous reply's version"
        );
    }

    #[test]
    fn bad_replies() {
        let cases: &[(&[u8], BadReply)] = &[
            (
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
                BadReply::Status(404),
            ),
            (b"HTTP/1.1 500 X\r\n", BadReply::Status(500)),
            (b"HTTP/1.1 301 Moved\r\n", BadReply::Status(301)),
            (b"HTTP/2 200 OK\r\n", BadReply::StatusLine),
            (b"hello world\n", BadReply::StatusLine),
            (b"HTTP/1.1 2x0 OK\r\n", BadReply::StatusLine),
            (b"HTTP/1.1 2000 OK\r\n", BadReply::StatusLine),
            (b"HTTP/1.1 200 OK\r\nno colon here\r\n", BadReply::Header),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n",
                BadReply::Header,
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Length: \r\n", BadReply::Header),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n",
                BadReply::Header,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n",
                BadReply::Chunked,
            ),
            // Issue 26 item 8: `identity` with a length was read by the length, where RFC
            // 9112 §6.3 reads a transfer-coded body to the close.
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: identity\r\n\r\n",
                BadReply::Chunked,
            ),
            (b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", BadReply::NoLength),
        ];
        for (r, want) in cases {
            assert_eq!(whole(r), Err(*want), "{}", String::from_utf8_lossy(r));
        }
    }

    #[test]
    fn incomplete_replies_need_more() {
        for cut in [0, 5, 17, NGINX.len() - 6, NGINX.len() - 1] {
            assert_eq!(whole(&NGINX[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn head_too_long_is_refused() {
        let mut p = ReplyParser::new();
        p.feed(b"HTTP/1.1 200 OK\r\n").unwrap();
        let line = [b'a'; 1000];
        let mut r = Ok(None);
        for _ in 0..100 {
            r = p.feed(&line);
            if r.is_err() {
                break;
            }
        }
        assert_eq!(r, Err(BadReply::HeadTooLong));
    }

    #[test]
    fn long_header_lines_are_skipped() {
        let mut r = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
        r.extend(std::iter::repeat_n(b'z', 5000));
        r.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\nok");
        assert_eq!(whole(&r), Ok(Some(r.len())));
    }

    #[test]
    fn connection_header_tokens() {
        let r = b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n";
        let mut p = ReplyParser::new();
        assert_eq!(p.feed(r), Ok(Some(r.len())));
        assert!(!p.keep_alive());
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any split of a valid reply into pieces gives the same result as the whole.
            #[test]
            fn any_split_of_a_valid_reply(
                body_len in 0usize..300,
                cuts in proptest::collection::vec(0usize..2000, 0..12),
                extra_headers in 0usize..4,
                lf_only in any::<bool>(),
            ) {
                let eol = if lf_only { "\n" } else { "\r\n" };
                let mut head = format!("HTTP/1.1 200 OK{eol}");
                for k in 0..extra_headers {
                    head.push_str(&format!("X-H{k}: {}{eol}", "v".repeat(k * 70)));
                }
                head.push_str(&format!("Content-Length: {body_len}{eol}{eol}"));
                let mut reply = head.into_bytes();
                reply.extend(std::iter::repeat_n(b'b', body_len));
                let n = reply.len();
                reply.extend_from_slice(b"NEXT");
                let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (reply.len() + 1)).collect();
                cuts.push(reply.len());
                cuts.sort_unstable();
                let mut p = ReplyParser::new();
                let mut start = 0;
                let mut done_at = None;
                for c in cuts {
                    if c < start { continue; }
                    match p.feed(&reply[start..c]).unwrap() {
                        Some(k) => { done_at = Some(start + k); break; }
                        None => start = c,
                    }
                }
                prop_assert_eq!(done_at, Some(n));
            }

            /// Arbitrary bytes in arbitrary pieces never panic, and a completed reply never
            /// claims more bytes than it was given.
            #[test]
            fn arbitrary_bytes_never_panic(
                data in proptest::collection::vec(any::<u8>(), 0..600),
                cuts in proptest::collection::vec(0usize..600, 0..8),
            ) {
                let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (data.len() + 1)).collect();
                cuts.push(data.len());
                cuts.sort_unstable();
                let mut p = ReplyParser::new();
                let mut start = 0;
                for c in cuts {
                    if c < start { continue; }
                    match p.feed(&data[start..c]) {
                        Ok(Some(k)) => { prop_assert!(k <= c - start); break; }
                        Ok(None) => start = c,
                        Err(_) => break,
                    }
                }
            }
        }
    }
}
