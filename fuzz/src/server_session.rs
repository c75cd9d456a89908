//! The servers' request parser (`socklab_net::server::Session`, every handler): any bytes, fed
//! in any chunk size, with replies written in any piece size, never panic, always make progress
//! (a chunk is consumed, or a reply is pending, or the session is closing), never consume more
//! than given, and once closing consume nothing more; a stevens reply is 1..=16384 bytes or one
//! ERROR line; the split of the input does not change what is written. For `http`, only the
//! last response may be a refusal (400, 405, 413, 431, 501 close the connection: RFC 9112
//! §6.3, a message whose framing is in doubt ends it).
use socklab_net::server::{Handler, Replies};

/// Feeds `data` in chunks of `chunk`, writes replies in pieces of `piece`; returns the bytes
/// written and whether the session closed.
fn session(h: Handler, data: &[u8], chunk: usize, piece: usize) -> (Vec<u8>, bool) {
    let r = Replies::new(h, 10).unwrap();
    let mut s = r.session();
    let mut out = Vec::new();
    let mut rest = data;
    loop {
        while s.has_pending() {
            let p = s.pending(&r);
            assert!(!p.is_empty(), "a pending reply has bytes");
            if h == Handler::Stevens {
                assert!(p.len() <= 16384 || p.starts_with(b"ERROR"));
            }
            let n = p.len().min(piece);
            out.extend_from_slice(&p[..n]);
            s.sent(n, &r);
        }
        if s.should_close() {
            assert_eq!(
                s.receive(rest),
                if h == Handler::Discard { rest.len() } else { 0 }
            );
            return (out, true);
        }
        if rest.is_empty() {
            return (out, false);
        }
        let take = rest.len().min(chunk);
        let n = s.receive(&rest[..take]);
        assert!(n <= take);
        assert!(n > 0 || s.has_pending() || s.should_close(), "no progress");
        rest = &rest[n..];
    }
}

/// One input of the target.
pub fn run(data: &[u8]) {
    let [sel, chunk, piece, data @ ..] = data else {
        return;
    };
    let h = Handler::ALL[usize::from(*sel) % Handler::ALL.len()];
    let chunk = usize::from(*chunk).max(1);
    let piece = usize::from(*piece).max(1);
    let whole = session(h, data, data.len().max(1), usize::MAX);
    let split = session(h, data, chunk, piece);
    assert_eq!(whole, split);
    if h == Handler::Http {
        // The 10-byte bodies (`abcdefghij`) hold no `HTTP/1.1 `: each one starts a response.
        let text = String::from_utf8_lossy(&whole.0);
        let codes: Vec<&str> = text.split("HTTP/1.1 ").skip(1).collect();
        if let [ok @ .., _last] = &codes[..] {
            assert!(ok.iter().all(|r| r.starts_with("200 ")), "{text}");
        }
        if codes.last().is_some_and(|r| !r.starts_with("200 ")) {
            assert!(whole.1, "a refusal closes: {text}");
        }
    }
}
