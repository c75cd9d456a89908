//! Library messages in the command's words: the libraries name a parameter by its key in
//! backticks (`` `timeout` 0s: … ``, the words of an experiment file); the binary prints it as
//! the flag that sets it (`--timeout 0s: …`). One function, [`in_flags`], does it for every
//! library error the binary prints.

/// Keys whose flag is not the key with dashes, in every command.
const FLAGS: &[(&str, &str)] = &[
    ("link_driver", "--driver"),
    ("link_mtu", "--mtu"),
    ("conn_requests", "--loops"),
];

/// `socklab load`'s keys whose flag has another name (`handler` is `serve --handler` too).
pub const LOAD: &[(&str, &str)] = &[
    ("handler", "--protocol"),
    ("new_connection", "--new-connection-per-request"),
];

/// `socklab pingpong`'s keys whose flag has another name.
pub const PINGPONG: &[(&str, &str)] = &[("new_connection", "--new-connection-per-message")];

/// The flag of `key`: the command's own exceptions (`extra`) first, then those of every
/// command, else the key with dashes (`link_seed` → `--link-seed`).
pub fn flag(key: &str, extra: &[(&str, &str)]) -> String {
    match extra.iter().chain(FLAGS).find(|(k, _)| *k == key) {
        Some((_, f)) => f.to_string(),
        None => format!("--{}", key.replace('_', "-")),
    }
}

/// Whether `s` is a key as the libraries mark it: a lower-case word of letters, digits and
/// underscores (so `` `socklab echo --port 7` `` or `` `modprobe tcp_bbr` `` stay as they are),
/// and not a TOML literal that a parser's message may quote (`` expected `true` ``).
fn is_key(s: &str) -> bool {
    !matches!(s, "true" | "false")
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `msg` with every marked key (`` `read_size` ``) replaced by its flag (`--read-size`);
/// other backticked text is left as it is.
pub fn in_flags(msg: &str, extra: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else { break };
        let inner = &after[..close];
        out.push_str(&rest[..open]);
        if is_key(inner) {
            out.push_str(&flag(inner, extra));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_becomes_its_flag_with_dashes() {
        assert_eq!(
            in_flags(
                "`timeout` 0s: give the test some time, e.g. `timeout` 30s",
                &[]
            ),
            "--timeout 0s: give the test some time, e.g. --timeout 30s"
        );
        assert_eq!(
            in_flags("`read_size` 0 is out of range", &[]),
            "--read-size 0 is out of range"
        );
        assert_eq!(flag("link_seed", &[]), "--link-seed");
    }

    #[test]
    fn exceptions_name_the_real_flag() {
        assert_eq!(in_flags("use `link_driver` tun", &[]), "use --driver tun");
        assert_eq!(in_flags("bad `link_mtu` 9", &[]), "bad --mtu 9");
        assert_eq!(
            in_flags("`conn_requests`/`requests` 0", LOAD),
            "--loops/--requests 0"
        );
        assert_eq!(flag("handler", LOAD), "--protocol");
        assert_eq!(flag("handler", &[]), "--handler");
        assert_eq!(
            flag("new_connection", PINGPONG),
            "--new-connection-per-message"
        );
        assert_eq!(flag("new_connection", LOAD), "--new-connection-per-request");
    }

    #[test]
    fn other_backticked_text_is_left_alone() {
        for m in [
            "is `socklab echo --port 7` running there?",
            "load a module with `modprobe tcp_bbr` or choose another `cc`",
            "see `memcpy.toml`",
            "`Timeout` is not a key",
            "expected `true` or `false`",
            "an unclosed ` stays",
            "",
            "no marks at all",
        ] {
            let want = m.replace("`cc`", "--cc");
            assert_eq!(in_flags(m, &[]), want, "{m}");
        }
    }

    #[test]
    fn a_span_that_is_not_a_key_does_not_eat_the_next_key() {
        assert_eq!(
            in_flags("start `socklab sink` or raise `timeout`", &[]),
            "start `socklab sink` or raise --timeout"
        );
        assert_eq!(in_flags("`a b``streams`", &[]), "`a b`--streams");
    }
}
