//! Library text in a command's words: the libraries mark a parameter by its key in
//! backticks (`` `timeout` ``); the binary swaps each mark for the flag that sets it. Here the
//! marks are found (the flags themselves are the binary's). clap's error is put on one line
//! by [`crate::flags::usage`].

/// Whether `s` is a key as the libraries mark it: a lower-case word of letters, digits and
/// underscores (so `` `socklab echo --port 7` `` or `` `modprobe tcp_bbr` `` stay as they are),
/// and not a TOML literal that a parser's message may quote (`` expected `true` ``).
pub fn is_key(s: &str) -> bool {
    !matches!(s, "true" | "false")
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `msg` with every marked key (`` `read_size` ``) replaced by `flag(key)`; other backticked
/// text is left as it is.
pub fn map_keys(msg: &str, flag: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else { break };
        let inner = &after[..close];
        out.push_str(&rest[..open]);
        if is_key(inner) {
            out.push_str(&flag(inner));
            rest = &after[close + 1..];
        } else {
            // Not a key: keep the opening backtick, and look again from the closing one
            // (which may open the next span).
            out.push('`');
            out.push_str(inner);
            rest = &after[close..];
            if let Some(next) = rest.strip_prefix('`') {
                out.push('`');
                rest = next;
            }
        }
    }
    out.push_str(rest);
    out
}
