//! Text that came from outside (a peer's line, a file, the command line) made safe to print:
//! control characters escaped, so no byte of it moves a terminal's cursor, rings its bell or
//! retitles its window, and a quote cut to a readable length.
//!
//! - [`escape`]: C0 controls, DEL, C1 controls and the Unicode bidirectional overrides become
//!   visible escapes (`\n`, `\r`, `\t`, `\x1b`, `\x7f`, `\u{202e}`); everything else is kept.
//! - [`escape_bytes`]: the same for bytes, and bytes that are not UTF-8 become `\xNN`.
//! - [`quote`] / [`quote_bytes`]: escaped and cut at [`QUOTE_CHARS`] characters, with
//!   `… (N bytes)` when cut; [`clip`] cuts at a bound of the caller's.
//!
//! A backslash is kept as it is: the output is for eyes, not to be read back, and escaping an
//! already escaped text again changes nothing.

use std::fmt::Write;

/// The characters of input a quote in a message keeps.
pub const QUOTE_CHARS: usize = 80;

/// The longest a log line of a server role may be, escaped (its quotes are cut shorter).
pub const LINE_CHARS: usize = 1000;

/// Whether `c` is written escaped: C0 controls, DEL, C1 controls, and the bidirectional
/// embedding, override and isolate characters (which reorder what a terminal shows).
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with every control character escaped (see the module's text); nothing cut.
pub fn escape(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// `bytes` as text when they are a text file's: UTF-8 with no control character but line
/// ends and tabs (`None` for a binary file, or one such as `/proc/self/environ` with NULs).
pub fn as_text(bytes: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(bytes).ok()?;
    let stray = s
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'));
    (!stray).then_some(s)
}

/// `s` escaped as by [`escape`] but for its line breaks (`\n`), kept: for a message of
/// several lines, whatever built it.
pub fn escape_lines(s: &str) -> String {
    s.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// `bytes` as text, control characters escaped and bytes that are not UTF-8 as `\xNN`.
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// `s` escaped and cut at `max` characters of its escaped form (an escape is never split),
/// followed by `… (N bytes)` (N: the length of `s`) when cut.
pub fn clip(s: &str, max: usize) -> String {
    clip_escaped(&escape(s), max, s.len())
}

/// [`clip`] for bytes (see [`escape_bytes`]).
pub fn clip_bytes(bytes: &[u8], max: usize) -> String {
    // Only the first bytes can show: escape no more than could.
    let head = &bytes[..bytes.len().min(max.saturating_mul(4).saturating_add(4))];
    clip_escaped(&escape_bytes(head), max, bytes.len())
}

/// `s` (a quote from input) escaped and cut at [`QUOTE_CHARS`] characters.
pub fn quote(s: &str) -> String {
    clip(s, QUOTE_CHARS)
}

/// `bytes` (a quote from input) escaped and cut at [`QUOTE_CHARS`] characters.
pub fn quote_bytes(bytes: &[u8]) -> String {
    clip_bytes(bytes, QUOTE_CHARS)
}

/// A log line (made of parts some of which came from outside) safe for a terminal: escaped
/// and cut at [`LINE_CHARS`].
pub fn line(s: &str) -> String {
    clip(s, LINE_CHARS)
}

fn clip_escaped(escaped: &str, max: usize, len: usize) -> String {
    let Some((cut, _)) = escaped.char_indices().nth(max) else {
        return escaped.to_string();
    };
    // Back up to before an escape the cut would split (`\x1`, `\u{20`).
    let head = &escaped[..cut];
    let keep = match head.rfind('\\') {
        Some(i) if !escape_is_whole(&head[i..]) => i,
        _ => cut,
    };
    format!("{}… ({len} bytes)", &head[..keep])
}

/// Whether `s`, which starts with a backslash, holds a whole escape (or is none of ours).
fn escape_is_whole(s: &str) -> bool {
    match s.as_bytes().get(1) {
        None => false,
        Some(b'x') => s.len() >= 4,
        Some(b'u') => s.contains('}'),
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_bytes_become_visible_escapes() {
        assert_eq!(escape("plain text, 50ms"), "plain text, 50ms");
        assert_eq!(
            escape("a\x1b[31mred\x07\r\n\t"),
            "a\\x1b[31mred\\x07\\r\\n\\t"
        );
        assert_eq!(escape("nul\0 del\x7f"), "nul\\x00 del\\x7f");
        assert_eq!(escape("c1\u{9b}2J"), "c1\\x9b2J");
        assert_eq!(escape("bidi\u{202e}cba"), "bidi\\u{202e}cba");
        assert_eq!(escape("µs → ünïcode"), "µs → ünïcode");
        assert_eq!(escape_lines("a\x1b\nb\r\n"), "a\\x1b\nb\\r\n");
        // Escaping escaped text changes nothing.
        let once = escape("x\x1by\u{85}");
        assert_eq!(escape(&once), once);
    }

    #[test]
    fn a_text_file_is_utf8_without_control_bytes() {
        assert_eq!(as_text(b"1\r\n2\t3\n"), Some("1\r\n2\t3\n"));
        assert_eq!(as_text(b"A=1\0B=2\0"), None);
        assert_eq!(as_text(b"\x1b[2J"), None);
        assert_eq!(as_text(b"\xff"), None);
    }

    #[test]
    fn bytes_that_are_not_utf8_become_hex() {
        assert_eq!(escape_bytes(b"ok\xff\xfe\x1b!"), "ok\\xff\\xfe\\x1b!");
        assert_eq!(escape_bytes("é".as_bytes()), "é");
        assert_eq!(quote_bytes(&[0u8; 3]), "\\x00\\x00\\x00");
    }

    #[test]
    fn a_long_quote_is_cut_and_says_how_long_it_was() {
        let long = "x".repeat(1 << 20);
        let q = quote(&long);
        assert_eq!(q, format!("{}… (1048576 bytes)", "x".repeat(QUOTE_CHARS)));
        assert_eq!(quote("short"), "short");
        assert_eq!(quote(&"y".repeat(QUOTE_CHARS)), "y".repeat(QUOTE_CHARS));
        // A cut never splits an escape.
        let q = clip("ab\x1bcd", 4);
        assert_eq!(q, "ab… (5 bytes)");
        let q = clip("ab\u{202e}cd", 6);
        assert_eq!(q, "ab… (7 bytes)");
        assert_eq!(clip_bytes(&[0x1b; 100], 8), "\\x1b\\x1b… (100 bytes)");
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn bound(max: usize, len: usize) -> usize {
            max + format!("… ({len} bytes)").chars().count()
        }

        proptest! {
            #[test]
            fn no_control_character_and_never_longer_than_the_bound(
                bytes in proptest::collection::vec(any::<u8>(), 0..600),
                max in 0usize..120,
            ) {
                for out in [clip_bytes(&bytes, max), clip(&String::from_utf8_lossy(&bytes), max)] {
                    prop_assert!(!out.chars().any(needs_escape), "{out:?}");
                    prop_assert!(out.chars().count() <= bound(max, 4 * bytes.len()), "{out:?}");
                }
            }

            #[test]
            fn any_string_is_escaped_and_bounded(s in "\\PC*|[\\x00-\\x{ff}\u{202a}-\u{202e}]{0,300}") {
                let out = quote(&s);
                prop_assert!(!out.chars().any(needs_escape), "{out:?}");
                prop_assert!(out.chars().count() <= bound(QUOTE_CHARS, s.len()));
                if s.chars().count() <= QUOTE_CHARS / 10 {
                    prop_assert!(!out.contains('…'));
                }
            }
        }
    }
}
