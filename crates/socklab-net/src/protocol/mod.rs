//! The sink's control lines (see `docs/sink-protocol.md`).
//!
//! ```text
//! client → sink   SOCKLAB BULK/1 read_size=131072 verify=1\n
//! sink → client   READY read_size=131072 rcvbuf=131072\n        (or ERROR <reason>\n, then close)
//! client → sink   <the stream>, then shutdown(SHUT_WR)
//! sink → client   RESULT bytes=… reads=… user_us=… sys_us=… elapsed_ns=… hash=<hex|->\n, then close
//! ```
//!
//! Several streams of one test, and streams the sink sends on, speak `BULK/2` ([`multi`]): a
//! control connection and one data connection per stream. A `BULK/1` client (one stream, the
//! client sends) is served as it always was.
//!
//! A client that does not start with `SOCKLAB ` is a raw client (`nc`, `dd | nc`, iperf-style
//! checks): the sink just counts its bytes and reads and answers nothing. Lines are ASCII,
//! at most [`MAX_LINE`] bytes; unknown `key=value` pairs are ignored so newer peers can add keys.

pub mod multi;

/// The first word of every socklab control line sent by a client.
pub const MAGIC: &str = "SOCKLAB ";
/// The longest control line accepted.
pub const MAX_LINE: usize = 512;
/// Largest read size a client may ask the sink for.
pub const MAX_READ_SIZE: usize = 64 << 20;

pub(crate) fn pairs(rest: &str) -> impl Iterator<Item = (&str, &str)> {
    rest.split_ascii_whitespace()
        .filter_map(|tok| tok.split_once('='))
}

pub(crate) fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("bad value '{}' for {key}", truncate(v)))
}

/// The client's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Bytes per `read()` the sink should use.
    pub read_size: usize,
    /// Whether the sink should hash the stream.
    pub verify: bool,
}

impl Hello {
    /// The line, with its newline.
    pub fn emit(&self) -> String {
        format!(
            "{MAGIC}BULK/1 read_size={} verify={}\n",
            self.read_size,
            u8::from(self.verify)
        )
    }

    /// Parses a line (newline optional).
    pub fn parse(line: &str) -> Result<Hello, String> {
        let rest = line
            .trim_end()
            .strip_prefix(MAGIC)
            .ok_or("not a socklab request")?;
        let rest = rest.strip_prefix("BULK/1").ok_or_else(|| {
            format!(
                "unsupported request '{}': this sink speaks BULK/1, BULK/2 and JOIN/2",
                truncate(rest.split_whitespace().next().unwrap_or(""))
            )
        })?;
        let mut h = Hello {
            read_size: 128 * 1024,
            verify: false,
        };
        for (k, v) in pairs(rest) {
            match k {
                "read_size" => h.read_size = num(k, v)?,
                "verify" => h.verify = num::<u8>(k, v)? != 0,
                _ => {}
            }
        }
        if h.read_size == 0 || h.read_size > MAX_READ_SIZE {
            return Err(format!(
                "read_size {} out of range 1..={MAX_READ_SIZE}",
                h.read_size
            ));
        }
        Ok(h)
    }
}

/// The sink's answer to a [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// The read size the sink will use.
    pub read_size: usize,
    /// The sink socket's receive buffer (`SO_RCVBUF`).
    pub rcvbuf: usize,
}

impl Ready {
    /// The line, with its newline.
    pub fn emit(&self) -> String {
        format!(
            "READY read_size={} rcvbuf={}\n",
            self.read_size, self.rcvbuf
        )
    }

    /// Parses a line; an `ERROR …` line becomes `Err(reason)`.
    pub fn parse(line: &str) -> Result<Ready, String> {
        let line = line.trim_end();
        if let Some(reason) = line.strip_prefix("ERROR ") {
            return Err(format!("sink refused: {}", refused(reason)));
        }
        let rest = line
            .strip_prefix("READY")
            .ok_or_else(|| format!("expected READY, got '{}'", truncate(line)))?;
        let mut r = Ready {
            read_size: 0,
            rcvbuf: 0,
        };
        for (k, v) in pairs(rest) {
            match k {
                "read_size" => r.read_size = num(k, v)?,
                "rcvbuf" => r.rcvbuf = num(k, v)?,
                _ => {}
            }
        }
        Ok(r)
    }
}

/// What the sink measured for one test.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SinkResult {
    /// Bytes received.
    pub bytes: u64,
    /// `read()` calls that returned data (the seed's "#reads").
    pub reads: u64,
    /// Sink user CPU during the connection, µs.
    pub user_us: u64,
    /// Sink system CPU during the connection, µs.
    pub sys_us: u64,
    /// From READY sent to EOF seen, ns.
    pub elapsed_ns: u64,
    /// BLAKE3 of the stream, hex, when the client asked for verification.
    pub hash: Option<String>,
}

impl SinkResult {
    /// The line, with its newline.
    pub fn emit(&self) -> String {
        format!(
            "RESULT bytes={} reads={} user_us={} sys_us={} elapsed_ns={} hash={}\n",
            self.bytes,
            self.reads,
            self.user_us,
            self.sys_us,
            self.elapsed_ns,
            self.hash.as_deref().unwrap_or("-")
        )
    }

    /// Parses a line.
    pub fn parse(line: &str) -> Result<SinkResult, String> {
        let line = line.trim_end();
        let rest = line
            .strip_prefix("RESULT")
            .ok_or_else(|| format!("expected RESULT, got '{}'", truncate(line)))?;
        let mut r = SinkResult::default();
        let mut seen_bytes = false;
        for (k, v) in pairs(rest) {
            match k {
                "bytes" => {
                    r.bytes = num(k, v)?;
                    seen_bytes = true;
                }
                "reads" => r.reads = num(k, v)?,
                "user_us" => r.user_us = num(k, v)?,
                "sys_us" => r.sys_us = num(k, v)?,
                "elapsed_ns" => r.elapsed_ns = num(k, v)?,
                "hash" if v != "-" => r.hash = Some(parse_hash(v)?),
                _ => {}
            }
        }
        if !seen_bytes {
            return Err("RESULT without bytes=".into());
        }
        Ok(r)
    }
}

/// A sink's `ERROR` reason for a message: escaped, cut at a few lines' worth.
pub(crate) fn refused(reason: &str) -> String {
    socklab_units::text::clip(reason, 300)
}

/// A peer's text for a message: control bytes escaped, cut to a readable length.
pub(crate) fn truncate(s: &str) -> String {
    socklab_units::text::quote(s)
}

/// A `hash=` value: 64 hex digits (a BLAKE3 digest).
pub(crate) fn parse_hash(v: &str) -> Result<String, String> {
    if v.len() != 64 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("bad hash '{}'", truncate(v)));
    }
    Ok(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lines_round_trip() {
        let h = Hello {
            read_size: 1500,
            verify: true,
        };
        assert_eq!(Hello::parse(&h.emit()).unwrap(), h);
        let r = Ready {
            read_size: 1500,
            rcvbuf: 131072,
        };
        assert_eq!(Ready::parse(&r.emit()).unwrap(), r);
        let s = SinkResult {
            bytes: 30_000_000,
            reads: 20_121,
            user_us: 1,
            sys_us: 2,
            elapsed_ns: 3,
            hash: Some("ab".repeat(32)),
        };
        assert_eq!(SinkResult::parse(&s.emit()).unwrap(), s);
        let s2 = SinkResult { hash: None, ..s };
        assert_eq!(SinkResult::parse(&s2.emit()).unwrap(), s2);
    }

    /// A hostile peer's line comes back escaped and cut, whichever side quotes it.
    #[test]
    fn quoted_peer_text_is_escaped_and_cut() {
        let hostile = format!("\x1b]0;owned\x07\r{}", "x".repeat(100_000));
        for e in [
            Ready::parse(&format!("ERROR {hostile}")).unwrap_err(),
            Ready::parse(&hostile).unwrap_err(),
            Hello::parse(&format!("SOCKLAB BULK/1 read_size={hostile}")).unwrap_err(),
            Hello::parse(&format!("SOCKLAB {hostile}")).unwrap_err(),
            super::multi::TestReady::parse(&format!("ERROR {hostile}")).unwrap_err(),
            super::multi::Join::parse(&format!("SOCKLAB JOIN/2 test={hostile} index=1"))
                .unwrap_err(),
        ] {
            assert!(!e.chars().any(char::is_control), "{e:?}");
            assert!(e.contains("\\x1b]0;owned\\x07"), "{e:?}");
            assert!(e.len() < 400, "{} bytes", e.len());
        }
    }

    #[test]
    fn bad_lines_are_errors() {
        assert!(Hello::parse("GET / HTTP/1.1").is_err());
        assert!(Hello::parse("SOCKLAB PING/9")
            .unwrap_err()
            .contains("PING/9"));
        assert!(Hello::parse("SOCKLAB BULK/1 read_size=0")
            .unwrap_err()
            .contains("out of range"));
        assert!(Hello::parse("SOCKLAB BULK/1 read_size=abc").is_err());
        assert!(Ready::parse("ERROR read_size too big")
            .unwrap_err()
            .contains("refused"));
        assert!(SinkResult::parse("RESULT reads=3").is_err());
        assert!(SinkResult::parse("RESULT bytes=1 hash=zz").is_err());
        // Unknown keys are ignored for forward compatibility.
        assert_eq!(
            Hello::parse("SOCKLAB BULK/1 read_size=10 future=1")
                .unwrap()
                .read_size,
            10
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let _ = Hello::parse(&s);
            let _ = Ready::parse(&s);
            let _ = SinkResult::parse(&s);
        }
    }
}
