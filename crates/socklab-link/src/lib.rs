//! `socklab-link`: emulated links with netem's impairments on live sockets, behind one [`EmulatedLink`] whatever the driver
//! ([`LinkConfig`] is what to build: parsed from the lab's keys or the CLI's flags by
//! [`LinkConfig::from_keys`], printed back by [`LinkConfig::to_keys`]). The namespace drivers
//! join two network namespaces (`sl-<tag>-c`, `sl-<tag>-s`):
//!
//! - `tun` ([`tun::TunLink`], the default): a TUN device in each namespace; socklab's own
//!   forwarding threads carry packets through the [`socklab_impair`] model. Works on kernels
//!   without `sch_netem`.
//! - `netem` ([`netem`]): a veth pair and the kernel's `tc netem`, where a probe shows the
//!   kernel has it (`--driver auto` picks it then).
//! - `udp-proxy` ([`udpproxy`]): no namespaces, no root; UDP only. The server runs on
//!   this host and [`EmulatedLink::route`] puts an impairing relay on loopback in front of it.
//!
//! The client side gets `10.77.0.1` ("client"), the server side `10.77.0.2` ("server").

pub mod capacity;
pub mod capture;
pub mod check;
pub mod check_compare;
pub mod check_model;
pub mod check_row;
pub mod check_run;
pub mod error;
pub mod netem;
pub mod ns;
pub mod offload;
pub mod pcapng;
pub mod report;
pub mod timing;
pub mod tun;
pub mod udpproxy;
pub mod vnet;

use std::net::SocketAddr;

pub use socklab_impair::{LinkSpec, Stats};

pub use ns::{Namespaces, Side, CLIENT_ADDR, SERVER_ADDR};
pub use report::{DirReport, LinkReport};
pub use timing::ValidRule;

pub use error::{LinkError, LinkKeyError, LinkValueError, MtuError, ParseNameError};

/// The impairments of both directions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkPair {
    /// Client → server.
    pub forward: LinkSpec,
    /// Server → client.
    pub backward: LinkSpec,
}

/// Parses one direction's spec; `none` (or nothing) is the link without impairment.
pub fn parse_spec(s: &str) -> Result<LinkSpec, socklab_impair::ParseSpecError> {
    match s.trim() {
        "" | "none" => Ok(LinkSpec::default()),
        t => t.parse(),
    }
}

/// One direction's spec as text, `none` for the link without impairment (the inverse of
/// [`parse_spec`]).
pub fn spec_text(s: &LinkSpec) -> String {
    let t = s.to_string();
    if t.is_empty() {
        "none".into()
    } else {
        t
    }
}

/// Checks a link MTU: 576 (IPv4's minimum) to 65535.
pub fn check_mtu(mtu: u32) -> Result<u32, MtuError> {
    if (576..=65535).contains(&mtu) {
        Ok(mtu)
    } else {
        Err(MtuError)
    }
}

impl LinkPair {
    /// `link` for both directions, or `link` forward and `back` backward.
    pub fn parse(link: &str, back: Option<&str>) -> Result<LinkPair, LinkError> {
        let parse = |flag: &str, s: &str| {
            parse_spec(s).map_err(|e| LinkError::Invalid(format!("bad {flag} \"{s}\": {e}")))
        };
        let forward = parse("`link`", link)?;
        let backward = match back {
            Some(b) => parse("`link_back`", b)?,
            None => forward.clone(),
        };
        Ok(LinkPair { forward, backward })
    }

    /// Both directions as text: `SPEC` when they are equal, else `SPEC / back: SPEC`.
    pub fn describe(&self) -> String {
        if self.forward == self.backward {
            spec_text(&self.forward)
        } else {
            format!(
                "{} / back: {}",
                spec_text(&self.forward),
                spec_text(&self.backward)
            )
        }
    }
}

/// Which driver makes the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Driver {
    /// `netem` where the kernel has it, else `tun`.
    #[default]
    Auto,
    /// socklab's own emulator between TUN devices.
    Tun,
    /// The kernel's netem on a veth pair.
    Netem,
    /// An impairing UDP relay on loopback (no namespaces).
    UdpProxy,
}

impl Driver {
    /// The name users type.
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Auto => "auto",
            Driver::Tun => "tun",
            Driver::Netem => "netem",
            Driver::UdpProxy => "udp-proxy",
        }
    }

    /// Whether the link can carry TCP: `udp-proxy` relays UDP datagrams only (a TCP proxy
    /// would terminate the connections and hide loss from TCP's congestion control).
    pub fn carries_tcp(self) -> bool {
        self != Driver::UdpProxy
    }

    /// Whether the driver makes namespaces (and needs root): all but `udp-proxy`.
    pub fn uses_namespaces(self) -> bool {
        self != Driver::UdpProxy
    }
}

impl std::str::FromStr for Driver {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Driver, ParseNameError> {
        match s.trim() {
            "auto" => Ok(Driver::Auto),
            "tun" => Ok(Driver::Tun),
            "netem" => Ok(Driver::Netem),
            "udp-proxy" | "udpproxy" => Ok(Driver::UdpProxy),
            other => Err(ParseNameError::unknown(
                "driver",
                other,
                "use auto, tun, netem or udp-proxy",
            )),
        }
    }
}

impl std::fmt::Display for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An emulated link: what the CLI's flags, the lab's keys and the namespace drivers all speak.
/// Parsed from the lab's keys by [`LinkConfig::from_keys`], printed back by
/// [`LinkConfig::to_keys`]; one direction's impairment by [`parse_spec`] / [`spec_text`].
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Namespace tag (`None`: a fresh `<pid>-<n>`; namespace drivers only, not a key).
    pub tag: Option<String>,
    /// Driver.
    pub driver: Driver,
    /// Impairments.
    pub pair: LinkPair,
    /// Seed of the model (`tun` and `udp-proxy`: forward `seed`, backward `seed + 1`).
    pub seed: u64,
    /// MTU of the link.
    pub mtu: u32,
    /// When a run over the link counts (`link_valid`).
    pub valid: ValidRule,
}

/// The keys of an emulated link under a workload: (name, default, doc).
pub const KEYS: &[(&str, &str, &str)] = &[
    (
        "link",
        "(none)",
        "impairments in netem syntax (plus socklab's aqm, trace and rate schedules), both directions, e.g. 'delay 50ms loss 5%' or 'rate 20mbit aqm fq_codel' ('none': the emulated link without impairment)",
    ),
    (
        "link_back",
        "= link",
        "impairments of the server -> client direction, if different",
    ),
    (
        "link_driver",
        "auto",
        "auto, tun, netem or udp-proxy (UDP only)",
    ),
    ("link_mtu", "1500", "MTU of the emulated link"),
    ("link_seed", "1", "seed of the emulator's random decisions"),
    (
        "link_valid",
        "1% 1ms",
        "when a repetition over the link counts: SHARE LAG, valid when at most SHARE of the packets leave more than LAG after their scheduled time (and at most SHARE are dropped by the kernel in front of the emulator); others are marked invalid (emu_valid = 0)",
    ),
];

impl LinkConfig {
    /// Builds a link from the values of [`KEYS`] (`None`: the key is absent). `Ok(None)` when
    /// `link` is absent and so are the others; a link key without `link` is an error.
    pub fn from_keys(
        link: Option<&str>,
        link_back: Option<&str>,
        driver: Option<&str>,
        mtu: Option<&str>,
        seed: Option<&str>,
        valid: Option<&str>,
    ) -> Result<Option<LinkConfig>, LinkKeyError> {
        fn value<T, E: Into<LinkValueError>>(
            key: &'static str,
            v: Option<&str>,
            default: T,
            parse: impl Fn(&str) -> Result<T, E>,
        ) -> Result<T, LinkKeyError> {
            match v {
                None => Ok(default),
                Some(v) => parse(v).map_err(|e| LinkKeyError::Value {
                    key,
                    value: v.to_string(),
                    reason: e.into(),
                }),
            }
        }
        let Some(link) = link else {
            let others = [link_back, driver, mtu, seed, valid];
            if let Some(((key, _, _), _)) = KEYS[1..].iter().zip(others).find(|(_, v)| v.is_some())
            {
                return Err(LinkKeyError::NeedsLink { key });
            }
            return Ok(None);
        };
        let forward = value("link", Some(link), LinkSpec::default(), parse_spec)?;
        let backward = value("link_back", link_back, forward.clone(), parse_spec)?;
        let driver = value("link_driver", driver, Driver::Auto, str::parse)?;
        let mtu = value("link_mtu", mtu, tun::DEFAULT_MTU, |s| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| MtuError)
                .and_then(check_mtu)
        })?;
        let seed = value("link_seed", seed, 1, |s| {
            socklab_units::parse_size(s).map_err(LinkValueError::Seed)
        })?;
        let valid = value("link_valid", valid, ValidRule::default(), |s| {
            s.parse::<ValidRule>().map_err(LinkValueError::Valid)
        })?;
        Ok(Some(LinkConfig {
            tag: None,
            driver,
            pair: LinkPair { forward, backward },
            seed,
            mtu,
            valid,
        }))
    }

    /// The canonical values of [`KEYS`] (`link_back` only when it differs from `link`,
    /// `link_valid` only when not the default): what
    /// [`LinkConfig::from_keys`] reads back to `self` (without the tag).
    pub fn to_keys(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![("link", spec_text(&self.pair.forward))];
        if self.pair.backward != self.pair.forward {
            v.push(("link_back", spec_text(&self.pair.backward)));
        }
        v.push(("link_driver", self.driver.as_str().to_string()));
        v.push(("link_mtu", self.mtu.to_string()));
        v.push(("link_seed", self.seed.to_string()));
        // Only when not the default: plans stored before the key read back the same.
        if self.valid != ValidRule::default() {
            v.push(("link_valid", self.valid.to_string()));
        }
        v
    }
}

impl Default for LinkConfig {
    fn default() -> LinkConfig {
        LinkConfig {
            tag: None,
            driver: Driver::Auto,
            pair: LinkPair::default(),
            seed: 1,
            mtu: tun::DEFAULT_MTU,
            valid: ValidRule::default(),
        }
    }
}

/// One `udp-proxy` relay in front of one server.
struct Relay {
    target: SocketAddr,
    addr: SocketAddr,
    handle: crate::udpproxy::ProxyHandle,
}

enum Engine {
    Tun(tun::TunLink),
    Netem(netem::NetemLink),
    /// `udp-proxy`: one relay per server [`EmulatedLink::route`] was asked for.
    Proxy(Vec<Relay>),
}

/// A running emulated link, the same for every driver:
///
/// - start the server inside [`EmulatedLink::server_namespace`] (`None`: on this host, for
///   `udp-proxy`), listening on [`EmulatedLink::server_bind`];
/// - ask [`EmulatedLink::route`] where the client must send to reach that server;
/// - run the client inside [`EmulatedLink::enter_client`];
/// - read the accounting with [`EmulatedLink::report`] (diff two with [`LinkReport::since`]).
///
/// Namespace drivers (`tun`, `netem`) join two namespaces; dropping the link stops the emulator
/// and removes the namespaces (with whatever still runs inside). `udp-proxy` relays UDP on
/// loopback (no namespaces, no root); dropping it stops the relays.
pub struct EmulatedLink {
    // Declared before `ns`: the emulator stops before the namespaces go.
    engine: Engine,
    ns: Option<Namespaces>,
    driver: Driver,
    pair: LinkPair,
    seed: u64,
    rule: ValidRule,
}

impl std::fmt::Debug for EmulatedLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatedLink")
            .field("ns", &self.ns)
            .field("driver", &self.driver)
            .field("pair", &self.pair.describe())
            .finish_non_exhaustive()
    }
}

/// The calling thread inside the client side of a link until dropped (a no-op for
/// `udp-proxy`, whose client runs on this host).
#[derive(Debug)]
#[must_use = "the thread leaves the client namespace when the guard drops"]
pub struct ClientGuard(#[allow(dead_code)] Option<socklab_sys::netns::NetnsGuard>);

impl EmulatedLink {
    /// Starts the link: for namespace drivers creates the namespaces and starts the driver
    /// (`auto`: netem if the kernel has it, else tun); for `udp-proxy` nothing runs until
    /// [`EmulatedLink::route`].
    pub fn start(cfg: &LinkConfig) -> Result<EmulatedLink, LinkError> {
        EmulatedLink::start_with(cfg, None)
    }

    /// [`EmulatedLink::start`], recording every packet into `capture` ([`capture`]): only the
    /// `tun` driver can (`auto` then means `tun`).
    pub fn start_with(
        cfg: &LinkConfig,
        capture: Option<capture::CaptureTap>,
    ) -> Result<EmulatedLink, LinkError> {
        check_mtu(cfg.mtu)
            .map_err(|e| LinkError::Invalid(format!("bad `link_mtu` {}: {e}", cfg.mtu)))?;
        if capture.is_some() && !matches!(cfg.driver, Driver::Auto | Driver::Tun) {
            return Err(LinkError::Invalid(format!(
                "`capture` records what socklab's own emulator does: use `link_driver` tun (not {})",
                cfg.driver
            )));
        }
        let driver = match cfg.driver {
            Driver::Auto if capture.is_some() => Driver::Tun,
            Driver::UdpProxy => {
                return Ok(EmulatedLink {
                    engine: Engine::Proxy(Vec::new()),
                    ns: None,
                    driver: Driver::UdpProxy,
                    pair: cfg.pair.clone(),
                    seed: cfg.seed,
                    rule: cfg.valid,
                })
            }
            Driver::Auto if netem::kernel_has_netem() && netem::expressible(&cfg.pair).is_ok() => {
                Driver::Netem
            }
            Driver::Auto => Driver::Tun,
            d => d,
        };
        if driver == Driver::Netem {
            netem::expressible(&cfg.pair)?;
            if !netem::kernel_has_netem() {
                return Err(LinkError::Link(
                    "this kernel has no sch_netem ('tc qdisc add … netem' fails): use `link_driver` tun (socklab's own emulator) or auto".into(),
                ));
            }
        }
        let tag = cfg.tag.clone().unwrap_or_else(ns::fresh_tag);
        let ns = Namespaces::create(&tag)?;
        let engine = match driver {
            Driver::Netem => Engine::Netem(netem::NetemLink::start(&ns, &cfg.pair, cfg.mtu)?),
            _ => Engine::Tun(tun::TunLink::start(
                &ns,
                cfg.pair.forward.clone(),
                cfg.pair.backward.clone(),
                cfg.seed,
                cfg.mtu,
                capture,
            )?),
        };
        if let Engine::Tun(t) = &engine {
            t.set_rule(cfg.valid);
        }
        Ok(EmulatedLink {
            engine,
            ns: Some(ns),
            driver,
            pair: cfg.pair.clone(),
            seed: cfg.seed,
            rule: cfg.valid,
        })
    }

    /// The namespaces of a namespace driver; an error for `udp-proxy`, which makes none (use
    /// [`EmulatedLink::server_namespace`] and [`EmulatedLink::enter_client`], which work for
    /// every driver).
    pub fn namespaces(&self) -> Result<&Namespaces, LinkError> {
        self.ns.as_ref().ok_or_else(|| {
            LinkError::Invalid(
                "the udp-proxy driver makes no namespaces: use `link_driver` tun or netem (root)"
                    .into(),
            )
        })
    }

    /// Where the server must run: the server namespace, or `None` (this host's, for
    /// `udp-proxy`).
    pub fn server_namespace(&self) -> Option<&Namespaces> {
        self.ns.as_ref()
    }

    /// The address a server behind the link listens on: the link's server address
    /// (`10.77.0.2`) in the server namespace, loopback for `udp-proxy`.
    pub fn server_bind(&self) -> std::net::IpAddr {
        match self.ns {
            Some(_) => SERVER_ADDR.into(),
            None => std::net::Ipv4Addr::LOCALHOST.into(),
        }
    }

    /// The address the client must use to reach `server` across the link. Namespace drivers:
    /// `server` itself (the server namespace is one hop away). `udp-proxy`: a relay on
    /// loopback in front of `server` (started on first use, kept for later calls), whose
    /// models start afresh from the seed at every call, as a new relay would: every run sees
    /// the same random decisions.
    pub fn route(&mut self, server: SocketAddr) -> Result<SocketAddr, LinkError> {
        let Engine::Proxy(relays) = &mut self.engine else {
            return Ok(server);
        };
        let (f, b) = (self.pair.forward.clone(), self.pair.backward.clone());
        if let Some(r) = relays.iter().find(|r| r.target == server) {
            r.handle.reset(f, b, self.seed)?;
            return Ok(r.addr);
        }
        let (addr, handle) = crate::udpproxy::spawn(server, f, b, self.seed)?;
        relays.push(Relay {
            target: server,
            addr,
            handle,
        });
        Ok(addr)
    }

    /// Puts the calling thread into the client side until the guard drops: the client
    /// namespace for namespace drivers, nothing for `udp-proxy` (the client stays here). Threads
    /// spawned meanwhile inherit it.
    pub fn enter_client(&self) -> Result<ClientGuard, LinkError> {
        match &self.ns {
            Some(ns) => Ok(ClientGuard(Some(ns.enter(Side::Client)?))),
            None => Ok(ClientGuard(None)),
        }
    }

    /// The driver that runs (never `auto`).
    pub fn driver(&self) -> Driver {
        self.driver
    }

    /// The impairments now in force.
    pub fn pair(&self) -> &LinkPair {
        &self.pair
    }

    /// The impairments as text ([`LinkPair::describe`]).
    pub fn describe(&self) -> String {
        self.pair.describe()
    }

    /// Changes the impairments (no-op when unchanged); `udp-proxy` relays restart their
    /// models from the seed with the new impairments and keep their addresses.
    pub fn set(&mut self, pair: &LinkPair) -> Result<(), LinkError> {
        if *pair == self.pair {
            return Ok(());
        }
        self.respecify(pair, self.seed)
    }

    /// The seed the models run from now.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Restarts the models from `seed` (forward `seed`, backward `seed + 1`), so that each
    /// repetition draws its own random decisions: `tun` and `udp-proxy` take it; the kernel's
    /// netem draws its own and ignores it.
    pub fn reseed(&mut self, seed: u64) -> Result<(), LinkError> {
        let pair = self.pair.clone();
        self.respecify(&pair, seed)
    }

    /// New impairments and a new seed at once, with one restart of the models (a repetition
    /// that changes both restarts them once, not twice). The kernel's netem is changed only
    /// when the impairments change.
    pub fn respecify(&mut self, pair: &LinkPair, seed: u64) -> Result<(), LinkError> {
        if let Engine::Netem(n) = &mut self.engine {
            if *pair != self.pair {
                let ns = self.ns.as_ref().ok_or_else(|| {
                    LinkError::Link("the netem driver has lost its namespaces".into())
                })?;
                n.set(ns, pair)?;
            }
        }
        self.pair = pair.clone();
        self.seed = seed;
        let (f, b) = (&self.pair.forward, &self.pair.backward);
        match &mut self.engine {
            Engine::Tun(t) => t.set(f.clone(), b.clone(), seed),
            Engine::Netem(_) => {}
            Engine::Proxy(relays) => {
                for r in relays.iter() {
                    r.handle.reset(f.clone(), b.clone(), seed)?;
                }
            }
        }
        Ok(())
    }

    /// The rule runs over the link are judged by.
    pub fn rule(&self) -> ValidRule {
        self.rule
    }

    /// Judges runs by `rule` from now on (the `tun` threads count late packets by its lag).
    pub fn set_rule(&mut self, rule: ValidRule) {
        self.rule = rule;
        if let Engine::Tun(t) = &self.engine {
            t.set_rule(rule);
        }
    }

    /// Pins the `tun` driver's release threads away from `avoid` (the measured endpoints'
    /// CPUs) when the machine has a core to spare ([`timing::spare_cpus`]); returns the CPUs
    /// they now run on, `None` when no core is spare (or another driver: nothing is done).
    /// An empty `avoid` (endpoints not pinned) lets the threads run on every CPU the caller
    /// may use again, so a cell without pinned endpoints does not inherit an earlier cell's
    /// placement.
    pub fn place_away_from(&self, avoid: &[usize]) -> Result<Option<Vec<usize>>, LinkError> {
        let Engine::Tun(t) = &self.engine else {
            return Ok(None);
        };
        let online = socklab_sys::sched::thread_affinity()
            .map_err(|e| LinkError::io("sched_getaffinity", e))?;
        let placed = timing::spare_cpus(&online, avoid);
        t.pin(placed.as_deref().unwrap_or(&online))
            .map_err(|e| LinkError::io("sched_setaffinity", e))?;
        Ok(placed)
    }

    /// Cumulative accounting so far (diff two with [`LinkReport::since`]); for `udp-proxy`
    /// the sum of its relays' counts (it has no lag, CPU or kernel-drop accounting).
    pub fn report(&self) -> LinkReport {
        LinkReport {
            rule: self.rule,
            ..self.report_counts()
        }
    }

    fn report_counts(&self) -> LinkReport {
        match (&self.engine, &self.ns) {
            (Engine::Tun(t), Some(ns)) => {
                let mut r = t.report();
                r.forward.kernel_drops = tun_kernel_drops(ns, Side::Client);
                r.backward.kernel_drops = tun_kernel_drops(ns, Side::Server);
                r
            }
            (Engine::Netem(n), Some(ns)) => n.report(ns),
            (Engine::Proxy(relays), _) => {
                let mut st = crate::udpproxy::ProxyStats::default();
                for r in relays {
                    let s = r.handle.stats();
                    st.forward.add(&s.forward);
                    st.backward.add(&s.backward);
                }
                st.into()
            }
            _ => LinkReport::default(),
        }
    }

    /// Starts capture window `window` (a number from [`capture::Capture::window`]; 0: outside
    /// any window) and returns the cumulative accounting at that instant: with a capture, the
    /// `tun` threads switch windows and take their counts at the same instant, so the counts
    /// between two marks are exactly those of the packets captured in that window. Without a
    /// window (`None`) or another driver, [`EmulatedLink::report`].
    pub fn mark(&self, window: Option<u32>) -> LinkReport {
        match (&self.engine, &self.ns, window) {
            (Engine::Tun(t), Some(ns), Some(w)) => {
                let mut r = t.mark(w);
                r.forward.kernel_drops = tun_kernel_drops(ns, Side::Client);
                r.backward.kernel_drops = tun_kernel_drops(ns, Side::Server);
                r.rule = self.rule;
                r
            }
            _ => self.report(),
        }
    }

    /// The `tun` driver's offload mode (`None` for the other drivers).
    pub fn offload(&self) -> Option<tun::Offload> {
        match &self.engine {
            Engine::Tun(t) => Some(t.offload()),
            _ => None,
        }
    }

    /// Stops the emulator (and relays), removes the namespaces, returns the final accounting.
    pub fn stop(mut self) -> Result<LinkReport, LinkError> {
        if let Engine::Proxy(relays) = &mut self.engine {
            let mut st = crate::udpproxy::ProxyStats::default();
            for r in std::mem::take(relays) {
                let s = r.handle.stop()?;
                st.forward.add(&s.forward);
                st.backward.add(&s.backward);
            }
            return Ok(LinkReport {
                rule: self.rule,
                ..st.into()
            });
        }
        let r = self.report();
        let EmulatedLink { engine, ns, .. } = self;
        drop(engine);
        if let Some(mut ns) = ns {
            ns.remove()?;
        }
        Ok(r)
    }
}

/// The UDP proxy's counts as a link report (no lag or CPU accounting: the proxy has none).
impl From<crate::udpproxy::ProxyStats> for LinkReport {
    fn from(p: crate::udpproxy::ProxyStats) -> LinkReport {
        LinkReport {
            forward: DirReport {
                stats: p.forward,
                ..DirReport::default()
            },
            backward: DirReport {
                stats: p.backward,
                ..DirReport::default()
            },
            rule: ValidRule::default(),
        }
    }
}

/// Packets the kernel could not queue to the emulator on `side`'s TUN device (its transmit
/// drops), read with `ip -s`.
fn tun_kernel_drops(ns: &Namespaces, side: Side) -> u64 {
    let name = ns.name(side);
    ns::ip(&[
        "-j",
        "-s",
        "-n",
        &name,
        "link",
        "show",
        "dev",
        tun::TUN_NAME,
    ])
    .ok()
    .and_then(|out| tx_dropped(&out))
    .unwrap_or(0)
}

/// `stats64.tx.dropped` of the first interface in `ip -j -s link show` output.
pub fn tx_dropped(json: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get(0)?
        .get("stats64")?
        .get("tx")?
        .get("dropped")?
        .as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_parse_and_describe() {
        let p = LinkPair::parse("loss 5%", None).unwrap();
        assert_eq!(p.forward, p.backward);
        assert_eq!(p.describe(), "loss 5%");
        let p = LinkPair::parse("delay 10ms", Some("")).unwrap();
        assert_eq!(p.describe(), "delay 10ms / back: none");
        let e = LinkPair::parse("loss 150%", None).unwrap_err().to_string();
        assert!(e.starts_with("bad `link` \"loss 150%\": loss 150%"), "{e}");
        let e = LinkPair::parse("", Some("jitter 3"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`link_back`") && e.contains("jitter"), "{e}");
    }

    /// `from_keys` over (key, value) pairs in any order.
    fn keys(kv: &[(&str, &str)]) -> Result<Option<LinkConfig>, LinkKeyError> {
        let get = |k: &str| kv.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        LinkConfig::from_keys(
            get("link"),
            get("link_back"),
            get("link_driver"),
            get("link_mtu"),
            get("link_seed"),
            get("link_valid"),
        )
    }

    #[test]
    fn keys_parse_with_defaults_and_print_back_canonically() {
        assert_eq!(keys(&[]).unwrap(), None);
        let c = keys(&[("link", "loss 5%")]).unwrap().unwrap();
        assert_eq!(
            c,
            LinkConfig {
                pair: LinkPair::parse("loss 5%", None).unwrap(),
                ..LinkConfig::default()
            }
        );
        let printed = c.to_keys();
        assert_eq!(
            printed,
            vec![
                ("link", "loss 5%".to_string()),
                ("link_driver", "auto".to_string()),
                ("link_mtu", "1500".to_string()),
                ("link_seed", "1".to_string()),
            ]
        );
        // link_back only when it differs; `none` and empty are the link without impairment.
        for kv in [
            vec![("link", "delay 10ms"), ("link_back", "none")],
            vec![
                ("link", " none "),
                ("link_back", "loss 1%"),
                ("link_driver", "udpproxy"),
                ("link_mtu", "9000"),
                ("link_seed", "2K"),
                ("link_valid", "0.5%  2ms"),
            ],
            vec![("link", ""), ("link_driver", "tun")],
        ] {
            let c = keys(&kv).unwrap().unwrap();
            let out = c.to_keys();
            let back: Vec<(&str, &str)> = out.iter().map(|(k, v)| (*k, v.as_str())).collect();
            assert_eq!(keys(&back).unwrap().unwrap(), c, "{kv:?} -> {out:?}");
            assert_eq!(
                out.iter().any(|(k, _)| *k == "link_back"),
                c.pair.forward != c.pair.backward
            );
        }
        let c = keys(&[
            ("link", "none"),
            ("link_back", "loss 1%"),
            ("link_driver", "udpproxy"),
            ("link_seed", "2K"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.driver, Driver::UdpProxy);
        assert_eq!(c.seed, 2048);
        assert_eq!(c.to_keys()[0], ("link", "none".to_string()));
        assert_eq!(c.to_keys()[1], ("link_back", "loss 1%".to_string()));
        assert_eq!(c.to_keys()[2], ("link_driver", "udp-proxy".to_string()));
        let names: Vec<&str> = KEYS.iter().map(|k| k.0).collect();
        assert_eq!(
            names,
            [
                "link",
                "link_back",
                "link_driver",
                "link_mtu",
                "link_seed",
                "link_valid"
            ]
        );
        // The rule: printed back only when not the default.
        let c = keys(&[("link", "none"), ("link_valid", "5% 500us")])
            .unwrap()
            .unwrap();
        assert_eq!(c.valid.to_string(), "5% 500us");
        assert_eq!(
            c.to_keys().last().unwrap(),
            &("link_valid", "5% 500us".to_string())
        );
    }

    #[test]
    fn key_errors_name_the_key_the_value_and_the_fix() {
        let e = |kv: &[(&str, &str)]| keys(kv).unwrap_err().to_string();
        for k in [
            "link_back",
            "link_driver",
            "link_mtu",
            "link_seed",
            "link_valid",
        ] {
            assert_eq!(
                e(&[(k, "1")]),
                format!("{k} needs link: add link = \"…\" (netem syntax, or none)")
            );
        }
        assert_eq!(
            keys(&[("link_mtu", "9000"), ("link_back", "x")]).unwrap_err(),
            LinkKeyError::NeedsLink { key: "link_back" }
        );
        let m = e(&[("link", "loss 150%")]);
        assert!(m.starts_with("link = 'loss 150%': loss 150%"), "{m}");
        let m = e(&[("link", "none"), ("link_back", "jitter 3")]);
        assert!(
            m.starts_with("link_back = 'jitter 3': ") && m.contains("jitter"),
            "{m}"
        );
        assert_eq!(
            e(&[("link", "none"), ("link_driver", "ovs")]),
            "link_driver = 'ovs': unknown driver 'ovs': use auto, tun, netem or udp-proxy"
        );
        for bad in ["100", "70000", "big"] {
            assert_eq!(
                e(&[("link", "none"), ("link_mtu", bad)]),
                format!("link_mtu = '{bad}': use 576 to 65535 (1500 is Ethernet's)")
            );
        }
        let m = e(&[("link", "none"), ("link_valid", "1%")]);
        assert!(
            m.starts_with("link_valid = '1%': use SHARE LAG, e.g. '1% 1ms'"),
            "{m}"
        );
        let m = e(&[("link", "none"), ("link_valid", "1% 1m")]);
        assert!(m.starts_with("link_valid = '1% 1m': the lag '1m'"), "{m}");
        let m = e(&[("link", "none"), ("link_seed", "x")]);
        assert!(m.starts_with("link_seed = 'x': 'x' is not a size"), "{m}");
        assert!(matches!(
            keys(&[("link", "none"), ("link_seed", "x")]).unwrap_err(),
            LinkKeyError::Value {
                key: "link_seed",
                reason: LinkValueError::Seed(_),
                ..
            }
        ));
    }

    #[test]
    fn only_udp_proxy_refuses_tcp() {
        assert!(!Driver::UdpProxy.carries_tcp());
        for d in [Driver::Auto, Driver::Tun, Driver::Netem] {
            assert!(d.carries_tcp() && d.uses_namespaces());
        }
    }

    #[test]
    fn drivers_parse() {
        for d in [Driver::Auto, Driver::Tun, Driver::Netem, Driver::UdpProxy] {
            assert_eq!(d.as_str().parse::<Driver>().unwrap(), d);
        }
        assert!("ovs"
            .parse::<Driver>()
            .unwrap_err()
            .to_string()
            .contains("tun"));
    }

    #[test]
    fn reports_difference_and_validity() {
        let mut a = LinkReport::default();
        a.forward.stats.delivered = 1000;
        a.forward.late = 5;
        a.forward.cpu_ns = 10;
        let mut b = a.clone();
        b.forward.stats.delivered = 3000;
        b.forward.late = 105;
        b.forward.cpu_ns = 30;
        let d = b.since(&a);
        assert_eq!(d.forward.stats.delivered, 2000);
        assert_eq!(d.forward.late, 100);
        assert_eq!(d.forward.cpu_ns, 20);
        // 100 of 2000 late = 5 % > 1 %: invalid, and the reason says so.
        let why = d.invalid_reason().unwrap();
        assert!(why.contains("5.0 %") && why.contains("forward"), "{why}");
        assert_eq!(
            d.metrics()
                .iter()
                .find(|(k, _)| *k == "emu_valid")
                .unwrap()
                .1,
            0.0
        );
        let mut ok = d.clone();
        ok.forward.late = 10;
        assert!(ok.invalid_reason().is_none());
        ok.backward.kernel_drops = 50;
        ok.backward.stats.packets_in = 950;
        assert!(ok
            .invalid_reason()
            .unwrap()
            .contains("kernel dropped 5.0 %"));
    }

    #[test]
    fn tx_dropped_reads_ip_json() {
        let j =
            r#"[{"ifname":"sl-tun","stats64":{"rx":{"dropped":1},"tx":{"bytes":0,"dropped":42}}}]"#;
        assert_eq!(tx_dropped(j), Some(42));
        assert_eq!(tx_dropped("[]"), None);
        assert_eq!(tx_dropped("garbage"), None);
    }
}
