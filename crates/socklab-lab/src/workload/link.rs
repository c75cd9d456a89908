//! The link keys: an emulated link under a workload (bulk, pingpong, transfer). The keys, their
//! parser and printer are `socklab_net::link`'s (one link type, one parser); this file adapts
//! them to the lab's [`Key`] descriptors and errors, and checks what a link demands of a
//! workload. The client runs on the link's client side, the self-started server on its server
//! side (a namespace, or behind a relay on loopback with `udp-proxy`).

use socklab_net::error::LinkKeyError;
use socklab_net::link::{LinkConfig, KEYS as NET_KEYS};

use crate::params::{Key, Params};
use crate::workload::key::Target;
use crate::LabError;

/// An emulated link under a workload.
pub type LinkParams = LinkConfig;

const fn key(i: usize) -> Key {
    Key::new(NET_KEYS[i].0, NET_KEYS[i].1, NET_KEYS[i].2)
}

/// `link_driver`.
pub const DRIVER: Key = key(2);
/// `link_mtu`.
pub const MTU: Key = key(3);
/// `link_seed`.
pub const SEED: Key = key(4);

/// The link keys (those of `socklab_net::link::KEYS`). `link` comes first: the others need it.
pub const KEYS: &[Key] = &[key(0), key(1), DRIVER, MTU, SEED];

/// Reads the link keys; `None` when `link` is absent (then the others must be too).
pub fn parse(p: &Params) -> Result<Option<LinkParams>, LabError> {
    LinkConfig::from_keys(
        p.get("link"),
        p.get("link_back"),
        p.get("link_driver"),
        p.get("link_mtu"),
        p.get("link_seed"),
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
}
