//! Library messages in the command's words: the libraries name a parameter by its key in
//! backticks (`` `timeout` 0s: … ``, the words of an experiment file); the binary prints it as
//! the flag that sets it (`--timeout 0s: …`). One function, [`in_flags`], does it for every
//! library error the binary prints. A key's flag comes from its descriptor ([`Key::flag`]):
//! the command's workload keys, then the link keys; a key without a flag of its own is the key
//! with dashes, but for [`NO_FLAG`].

use socklab_lab::model::params::Key;
use socklab_lab::workload::{link, load, pingpong};

/// The key descriptors of one command: its workloads' keys (a key's flag is its own).
pub type Keys = &'static [&'static [Key]];

/// Keys without a flag of their own (no descriptor, or one marked `no_flag`) that a command
/// sets through another flag: load's `conn_requests` is `socklab load --loops` (http, echo).
const NO_FLAG: &[(&str, &str)] = &[("conn_requests", "--loops")];

/// `socklab load`'s keys (`handler` is `--protocol`; it is `serve --handler` elsewhere).
pub const LOAD: Keys = &[load::KEYS];

/// `socklab pingpong`'s keys (`new_connection` is `--new-connection-per-message`).
pub const PINGPONG: Keys = &[pingpong::KEYS];

/// The flag of `key`: its descriptor's among `keys` (a command's, see `keys_of` in main.rs) or the
/// link keys', else [`NO_FLAG`]'s, else the key with dashes (`link_seed` → `--link-seed`).
pub fn flag(key: &str, keys: &[&[Key]]) -> String {
    let mut described = keys.iter().chain(&[link::KEYS]).flat_map(|ks| ks.iter());
    if let Some(k) = described.find(|k| k.name == key && !k.no_flag) {
        return format!("--{}", k.flag_name());
    }
    match NO_FLAG.iter().find(|(k, _)| *k == key) {
        Some((_, f)) => f.to_string(),
        None => format!("--{}", key.replace('_', "-")),
    }
}

/// `msg` with every marked key (`` `read_size` ``) replaced by its flag (`--read-size`);
/// other backticked text is left as it is (see [`socklab_lab::key_marks`]).
pub fn in_flags(msg: &str, keys: &[&[Key]]) -> String {
    socklab_lab::key_marks::map_keys(msg, |k| flag(k, keys))
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_lab::workload::{bulk, rrul, transfer, udp};

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

    #[test]
    fn a_flag_comes_from_the_key_descriptor() {
        // Every workload key of a command with a flag of its own, and every link key, prints
        // as its descriptor's flag.
        let commands: [Keys; 5] = [
            LOAD,
            PINGPONG,
            &[bulk::KEYS, udp::KEYS],
            &[transfer::KEYS],
            &[rrul::KEYS],
        ];
        for keys in commands {
            let described = keys.iter().flat_map(|ks| ks.iter()).chain(link::KEYS);
            for k in described.filter(|k| !k.no_flag) {
                let want = format!("--{}", k.flag_name());
                assert_eq!(flag(k.name, keys), want, "{}", k.name);
            }
        }
        assert_eq!(
            flag("link_mtu", &[]),
            format!("--{}", link::MTU.flag_name())
        );
        assert_eq!(in_flags("`body` 0", LOAD), "--body 0");
    }

    #[test]
    fn the_exceptions_are_only_keys_without_a_flag_of_their_own() {
        let all = [
            bulk::KEYS,
            udp::KEYS,
            pingpong::KEYS,
            transfer::KEYS,
            load::KEYS,
            rrul::KEYS,
            link::KEYS,
        ];
        for (key, _) in NO_FLAG {
            let flagged = all
                .iter()
                .flat_map(|ks| ks.iter())
                .any(|k| k.name == *key && !k.no_flag);
            assert!(
                !flagged,
                "{key} has a flag of its own: drop it from NO_FLAG"
            );
        }
    }
}
