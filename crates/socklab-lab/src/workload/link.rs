//! The link keys: an emulated link under a workload (bulk, pingpong, transfer). The client
//! runs in the link's client namespace, the self-started server in its server namespace (or,
//! with `udp-proxy`, behind a relay on loopback).

use socklab_net::link::{Driver, LinkConfig, LinkPair};

use crate::params::{parse_count, Key, Params};
use crate::workload::key::Target;
use crate::LabError;

/// An emulated link under a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkParams {
    /// Impairments per direction.
    pub pair: LinkPair,
    /// Which driver.
    pub driver: Driver,
    /// Link MTU.
    pub mtu: u32,
    /// Seed of the model.
    pub seed: u64,
}

impl LinkParams {
    /// The emulator's configuration.
    pub fn config(&self) -> LinkConfig {
        LinkConfig {
            tag: None,
            driver: self.driver,
            pair: self.pair.clone(),
            seed: self.seed,
            mtu: self.mtu,
        }
    }
}

/// The link keys. `link` comes first: the others need it.
pub const KEYS: &[Key] = &[
    Key::new(
        "link",
        "(none)",
        "impairments in netem syntax, both directions, e.g. 'delay 50ms loss 5%' ('none': the emulated link without impairment)",
    ),
    Key::new(
        "link_back",
        "= link",
        "impairments of the server -> client direction, if different",
    ),
    Key::new(
        "link_driver",
        "auto",
        "auto, tun, netem or udp-proxy (UDP only)",
    ),
    Key::new("link_mtu", "1500", "MTU of the emulated link"),
    Key::new("link_seed", "1", "seed of the emulator's random decisions"),
];

fn parse_spec_text(s: &str) -> Result<socklab_impair::LinkSpec, String> {
    let t = s.trim();
    if t.is_empty() || t == "none" {
        return Ok(socklab_impair::LinkSpec::default());
    }
    t.parse()
        .map_err(|e: socklab_impair::ParseSpecError| e.to_string())
}

fn spec_text(s: &socklab_impair::LinkSpec) -> String {
    let t = s.to_string();
    if t.is_empty() {
        "none".into()
    } else {
        t
    }
}

/// Reads the link keys; `None` when `link` is absent (then the others must be too).
pub fn parse(p: &Params) -> Result<Option<LinkParams>, LabError> {
    let Some(forward) = p.parse_opt("link", parse_spec_text)? else {
        if let Some(k) = KEYS[1..].iter().find(|k| p.get(k.name).is_some()) {
            return Err(LabError::Plan(format!(
                "{} needs link: add link = \"…\" (netem syntax, or none)",
                k.name
            )));
        }
        return Ok(None);
    };
    let backward = p.parse_or("link_back", forward.clone(), parse_spec_text)?;
    let driver = p.value(&KEYS[2], |s| s.parse::<Driver>())?;
    let mtu = p.value(&KEYS[3], |s| match s.trim().parse::<u32>() {
        Ok(m @ 576..=65535) => Ok(m),
        _ => Err("use 576 to 65535 (1500 is Ethernet's)".to_string()),
    })?;
    let seed = p.value(&KEYS[4], parse_count)?;
    Ok(Some(LinkParams {
        pair: LinkPair { forward, backward },
        driver,
        mtu,
        seed,
    }))
}

/// Prints the link keys of `link` into `p`.
pub fn print(p: &mut Params, link: &Option<LinkParams>) {
    if let Some(l) = link {
        p.set("link", spec_text(&l.pair.forward));
        if l.pair.backward != l.pair.forward {
            p.set("link_back", spec_text(&l.pair.backward));
        }
        p.set("link_driver", l.driver.as_str());
        p.set("link_mtu", l.mtu.to_string());
        p.set("link_seed", l.seed.to_string());
    }
}

/// A link needs the server started by socklab (it runs in the server namespace); udp-proxy
/// relays datagrams only.
pub fn check_target(link: &Option<LinkParams>, to: &Target, udp: bool) -> Result<(), LabError> {
    let Some(l) = link else { return Ok(()) };
    if matches!(to, Target::Addr(_)) {
        return Err(LabError::Plan(
            "link needs to = self: socklab starts the server in the emulated link's server namespace".into(),
        ));
    }
    if l.driver == Driver::UdpProxy && !udp {
        return Err(LabError::Plan(
            "link_driver udp-proxy relays UDP only; TCP needs tun or netem (root): a TCP proxy would hide loss from TCP".into(),
        ));
    }
    Ok(())
}
