//! The link keys: an emulated link under a workload (bulk, pingpong, transfer). The keys, their
//! parser and printer are `socklab_link`'s (one link type, one parser); this file adapts
//! them to the lab's [`Key`] descriptors and errors, and checks what a link demands of a
//! workload. The client runs on the link's client side, the self-started server on its server
//! side (a namespace, or behind a relay on loopback with `udp-proxy`).

use std::time::Duration;

use socklab_link::LinkKeyError;
use socklab_link::{LinkConfig, KEYS as NET_KEYS};
use socklab_units::format_duration;

use crate::model::params::{Key, Params};
use crate::workload::key::Target;
use crate::LabError;

/// An emulated link under a workload.
pub type LinkParams = LinkConfig;

const fn key(i: usize) -> Key {
    Key::new(NET_KEYS[i].0, NET_KEYS[i].1, NET_KEYS[i].2)
}

/// `link_driver` (its flag is `--driver`).
pub const DRIVER: Key = key(2).flag("driver");
/// `link_mtu` (its flag is `--mtu`).
pub const MTU: Key = key(3).flag("mtu");
/// `link_seed`.
pub const SEED: Key = key(4);
/// `link_valid`.
pub const VALID: Key = key(5);

/// The link keys (those of `socklab_link::KEYS`). `link` comes first: the others need it.
pub const KEYS: &[Key] = &[key(0), key(1), DRIVER, MTU, SEED, VALID];

/// Reads the link keys; `None` when `link` is absent (then the others must be too).
pub fn parse(p: &Params) -> Result<Option<LinkParams>, LabError> {
    LinkConfig::from_keys(
        p.get("link"),
        p.get("link_back"),
        p.get("link_driver"),
        p.get("link_mtu"),
        p.get("link_seed"),
        p.get("link_valid"),
    )
    .map_err(|e| match e {
        LinkKeyError::NeedsLink { .. } => LabError::Plan(e.to_string()),
        LinkKeyError::Value { key, value, reason } => {
            LabError::param(key, &value, reason.to_string())
        }
    })
}

/// Prints the link keys of `link` into `p`.
pub fn print(p: &mut Params, link: &Option<LinkParams>) {
    for (k, v) in link.iter().flat_map(LinkConfig::to_keys) {
        p.set(k, v);
    }
}

/// A link needs the server started by socklab (it runs on the link's server side); udp-proxy
/// relays datagrams only.
pub fn check_target(link: &Option<LinkParams>, to: &Target, udp: bool) -> Result<(), LabError> {
    let Some(l) = link else { return Ok(()) };
    if matches!(to, Target::Addr(_)) {
        return Err(LabError::Plan(
            "link needs to = self: socklab starts the server in the emulated link's server namespace".into(),
        ));
    }
    if !l.driver.carries_tcp() && !udp {
        return Err(LabError::Plan(
            "link_driver udp-proxy relays UDP only; TCP needs tun or netem (root): a TCP proxy would hide loss from TCP".into(),
        ));
    }
    Ok(())
}

/// Longest a TCP client of a workload waits for its connect, whatever the link's delay.
pub const MAX_CONNECT_WAIT: Duration = Duration::from_secs(65);
/// Largest round trip of a link's base delays (both directions) a TCP workload accepts: a
/// handshake needs one, and beyond this the connect would outlast [`MAX_CONNECT_WAIT`].
pub const MAX_HANDSHAKE_DELAY: Duration = Duration::from_secs(30);

/// The connect timeout of a TCP workload over `link`: `base`, plus twice the round trip of the
/// link's delays (a SYN lost once is sent again after about that long). Refuses a link whose
/// delays alone make a connect take longer than [`MAX_HANDSHAKE_DELAY`], naming the delay: the
/// connect would otherwise time out and read as a server that is not listening.
pub fn connect_timeout(
    p: &Params,
    link: &Option<LinkParams>,
    base: Duration,
) -> Result<Duration, LabError> {
    let Some(l) = link else { return Ok(base) };
    let rtt_ns = l
        .pair
        .forward
        .delay_ns
        .saturating_add(l.pair.backward.delay_ns);
    let rtt = Duration::from_nanos(rtt_ns);
    if rtt > MAX_HANDSHAKE_DELAY {
        let (key, value) = match p.get("link_back") {
            Some(b) if l.pair.backward.delay_ns > l.pair.forward.delay_ns => ("link_back", b),
            _ => ("link", p.get("link").unwrap_or_default()),
        };
        return Err(LabError::param(
            key,
            value,
            format!(
                "a TCP handshake over this link takes at least {} (its delays both ways); the most socklab accepts is {}, so that a connect completes within its {} wait (a lost SYN sent again included): give smaller delays",
                format_duration(rtt),
                format_duration(MAX_HANDSHAKE_DELAY),
                format_duration(MAX_CONNECT_WAIT)
            ),
        ));
    }
    Ok(base + rtt * 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_print_and_name_the_bad_value() {
        let p = Params::new()
            .with("link", "delay 5ms loss 1%")
            .with("link_mtu", "9000");
        let l = parse(&p).unwrap().unwrap();
        assert_eq!(l.mtu, 9000);
        let mut back = Params::new();
        print(&mut back, &Some(l.clone()));
        assert_eq!(back.get("link"), Some("delay 5ms loss 1%"));
        assert_eq!(back.get("link_back"), None, "printed only when it differs");
        assert_eq!(parse(&back).unwrap(), Some(l));
        assert_eq!(parse(&Params::new()).unwrap(), None);
        let e = parse(&Params::new().with("link_seed", "3")).unwrap_err();
        assert!(e.to_string().starts_with("link_seed needs link"), "{e}");
        let e = parse(&Params::new().with("link", "none").with("link_mtu", "100")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "link_mtu = '100': use 576 to 65535 (1500 is Ethernet's)"
        );
    }

    #[test]
    fn the_validity_rule_is_a_key_stored_when_not_the_default() {
        let p = Params::new()
            .with("link", "rate 20mbit")
            .with("link_valid", "0.5% 2ms");
        let l = parse(&p).unwrap().unwrap();
        assert_eq!(l.valid.to_string(), "0.5% 2ms");
        let mut back = Params::new();
        print(&mut back, &Some(l.clone()));
        assert_eq!(back.get("link_valid"), Some("0.5% 2ms"));
        assert_eq!(parse(&back).unwrap(), Some(l));
        // The default is not printed: plans stored before the key read back the same.
        let mut back = Params::new();
        print(
            &mut back,
            &parse(&Params::new().with("link", "none")).unwrap(),
        );
        assert_eq!(back.get("link_valid"), None);
        let e = parse(&Params::new().with("link", "none").with("link_valid", "1ms"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("link_valid") && e.contains("e.g. '1% 1ms'") && !e.contains('\n'),
            "{e}"
        );
        let e = parse(&Params::new().with("link_valid", "1% 1ms")).unwrap_err();
        assert!(e.to_string().starts_with("link_valid needs link"), "{e}");
    }

    #[test]
    fn the_connect_timeout_covers_the_links_delay_or_the_delay_is_refused() {
        let base = Duration::from_secs(5);
        assert_eq!(connect_timeout(&Params::new(), &None, base).unwrap(), base);
        let p = Params::new().with("link", "delay 2s");
        let l = parse(&p).unwrap();
        // 2 s each way: a 4 s round trip, twice, over the base.
        assert_eq!(
            connect_timeout(&p, &l, base).unwrap(),
            Duration::from_secs(13)
        );
        // Jitter is not counted: item 9's "delay 10ms 100000s" still runs (and is bounded by
        // its own deadlines).
        let p = Params::new().with("link", "delay 10ms 100000s");
        let l = parse(&p).unwrap();
        assert!(connect_timeout(&p, &l, base).unwrap() < Duration::from_secs(6));
        let p = Params::new().with("link", "delay 100000s");
        let e = connect_timeout(&p, &parse(&p).unwrap(), base)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "link = 'delay 100000s': a TCP handshake over this link takes at least 200000s"
            ),
            "{e}"
        );
        assert!(e.contains("the most socklab accepts is 30s"), "{e}");
        let p = Params::new()
            .with("link", "delay 1ms")
            .with("link_back", "delay 40s");
        let e = connect_timeout(&p, &parse(&p).unwrap(), base)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("link_back = 'delay 40s'"), "{e}");
    }
}
