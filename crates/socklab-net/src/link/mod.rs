//! Emulated links with netem's impairments, behind one [`EmulatedLink`] whatever the driver
//! ([`LinkConfig`] is what to build: parsed from the lab's keys or the CLI's flags by
//! [`LinkConfig::from_keys`], printed back by [`LinkConfig::to_keys`]). The namespace drivers
//! join two network namespaces (`sl-<tag>-c`, `sl-<tag>-s`):
//!
//! - `tun` ([`tun::TunLink`], the default): a TUN device in each namespace; socklab's own
//!   forwarding threads carry packets through the [`socklab_impair`] model. Works on kernels
//!   without `sch_netem`.
//! - `netem` ([`netem`]): a veth pair and the kernel's `tc netem`, where a probe shows the
//!   kernel has it (`--driver auto` picks it then).
//! - `udp-proxy` ([`crate::udpproxy`]): no namespaces, no root; UDP only. The server runs on
//!   this host and [`EmulatedLink::route`] puts an impairing relay on loopback in front of it.
//!
//! The client side gets `10.77.0.1` ("client"), the server side `10.77.0.2` ("server").

pub mod capacity;
pub mod capture;
pub mod check;
pub mod check_compare;
pub mod check_model;
pub mod netem;
pub mod ns;
pub mod pcapng;
pub mod tun;
pub mod vnet;

use std::net::SocketAddr;

pub use socklab_impair::{LinkSpec, Stats};

pub use ns::{Namespaces, Side, CLIENT_ADDR, SERVER_ADDR};

use crate::{LinkKeyError, LinkValueError, MtuError, NetError, ParseNameError};

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
    pub fn parse(link: &str, back: Option<&str>) -> Result<LinkPair, NetError> {
        let parse = |flag: &str, s: &str| {
            parse_spec(s).map_err(|e| NetError::Invalid(format!("bad {flag} \"{s}\": {e}")))
        };
        let forward = parse("--link", link)?;
        let backward = match back {
            Some(b) => parse("--link-back", b)?,
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

/// One direction's accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirReport {
    /// The model's counters.
    pub stats: Stats,
    /// Packets released more than [`tun::LAG_TOLERANCE`] after their scheduled time.
    pub late: u64,
    /// Worst release lag, ns.
    pub max_lag_ns: u64,
    /// Sum of release lags, ns (mean = sum / delivered).
    pub lag_sum_ns: u64,
    /// Writes into the far device that failed.
    pub write_errors: u64,
    /// Packets the kernel dropped because the emulator did not read them in time (the TUN
    /// device's queue overflowed), or netem's own drops with the netem driver.
    pub kernel_drops: u64,
    /// CPU time of the forwarding thread, ns.
    pub cpu_ns: u64,
}

impl DirReport {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &DirReport) -> DirReport {
        DirReport {
            stats: self.stats.since(&earlier.stats),
            late: self.late.saturating_sub(earlier.late),
            // A maximum cannot be differenced: keep `self`'s, which the drivers take since
            // the link was last specified (every repetition in the lab).
            max_lag_ns: self.max_lag_ns,
            lag_sum_ns: self.lag_sum_ns.saturating_sub(earlier.lag_sum_ns),
            write_errors: self.write_errors.saturating_sub(earlier.write_errors),
            kernel_drops: self.kernel_drops.saturating_sub(earlier.kernel_drops),
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
        }
    }

    /// One direction as JSON: the model's counters (the bottleneck's too: aqm drops and marks,
    /// loss ECN marks, the wait at the bottleneck), the driver's (kernel drops, failed writes,
    /// late packets, release lag) and the forwarding thread's CPU time.
    pub fn to_json(&self) -> serde_json::Value {
        let s = &self.stats;
        serde_json::json!({
            "packets_in": s.packets_in,
            "dropped": s.dropped,
            "duplicated": s.duplicated,
            "corrupted": s.corrupted,
            "reordered": s.reordered,
            "queue_dropped": s.queue_dropped,
            "delivered": s.delivered,
            "bytes_in": s.bytes_in,
            "bytes_out": s.bytes_out,
            "aqm_dropped": s.aqm_dropped,
            "aqm_marked": s.aqm_marked,
            "ecn_marked": s.loss_marked,
            "qdelay_mean_us": s.mean_queue_delay_ns() / 1000.0,
            "qdelay_max_us": s.queue_delay_max_ns as f64 / 1000.0,
            "kernel_drops": self.kernel_drops,
            "write_errors": self.write_errors,
            "late": self.late,
            "lag_mean_us": self.mean_lag_us(),
            "lag_max_us": self.max_lag_ns as f64 / 1000.0,
            "cpu_ns": self.cpu_ns,
            "cpu_ns_per_packet": if s.packets_in == 0 { 0.0 } else { self.cpu_ns as f64 / s.packets_in as f64 },
        })
    }

    /// Fraction of delivered packets that were late.
    pub fn late_fraction(&self) -> f64 {
        if self.stats.delivered == 0 {
            0.0
        } else {
            self.late as f64 / self.stats.delivered as f64
        }
    }

    /// Fraction of arriving packets the kernel dropped before the emulator read them.
    pub fn kernel_drop_fraction(&self) -> f64 {
        let total = self.stats.packets_in + self.kernel_drops;
        if total == 0 {
            0.0
        } else {
            self.kernel_drops as f64 / total as f64
        }
    }

    /// Mean release lag, µs.
    pub fn mean_lag_us(&self) -> f64 {
        if self.stats.delivered == 0 {
            0.0
        } else {
            self.lag_sum_ns as f64 / self.stats.delivered as f64 / 1000.0
        }
    }
}

/// Both directions' accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkReport {
    /// Client → server.
    pub forward: DirReport,
    /// Server → client.
    pub backward: DirReport,
}

/// More than this fraction of late packets, or of packets the kernel dropped in front of the
/// emulator, makes a run invalid: the emulator could not keep up with what was asked of it.
pub const INVALID_FRACTION: f64 = 0.01;

impl LinkReport {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &LinkReport) -> LinkReport {
        LinkReport {
            forward: self.forward.since(&earlier.forward),
            backward: self.backward.since(&earlier.backward),
        }
    }

    /// The forwarding threads' CPU time per packet that entered the model (both directions;
    /// with offloads a packet is one MTU-sized segment), ns; 0 without packets.
    pub fn cpu_ns_per_packet(&self) -> f64 {
        let n = self.forward.stats.packets_in + self.backward.stats.packets_in;
        if n == 0 {
            0.0
        } else {
            (self.forward.cpu_ns + self.backward.cpu_ns) as f64 / n as f64
        }
    }

    /// The accounting as JSON (the shape `socklab netem … --json` prints; see
    /// docs/impairment.md): `{"forward": DIR, "backward": DIR, "cpu_ns_per_packet": x,
    /// "valid": bool, "invalid_reason": null | "…"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "forward": self.forward.to_json(),
            "backward": self.backward.to_json(),
            "cpu_ns_per_packet": self.cpu_ns_per_packet(),
            "valid": self.invalid_reason().is_none(),
            "invalid_reason": self.invalid_reason(),
        })
    }

    /// `None` when the emulator kept up; else why the run is invalid.
    pub fn invalid_reason(&self) -> Option<String> {
        let mut why = Vec::new();
        for (name, d) in [("forward", &self.forward), ("backward", &self.backward)] {
            if d.late_fraction() > INVALID_FRACTION {
                why.push(format!(
                    "{name}: {:.1} % of packets left more than {} ms late (max {:.1} ms)",
                    100.0 * d.late_fraction(),
                    tun::LAG_TOLERANCE.as_millis(),
                    d.max_lag_ns as f64 / 1e6
                ));
            }
            if d.kernel_drop_fraction() > INVALID_FRACTION {
                why.push(format!(
                    "{name}: the kernel dropped {:.1} % of packets before the emulator read them",
                    100.0 * d.kernel_drop_fraction()
                ));
            }
        }
        if why.is_empty() {
            None
        } else {
            Some(format!(
                "the emulator could not keep up ({}); ask less of it: set a 'rate' below what it can carry (see bench/netem-throughput)",
                why.join("; ")
            ))
        }
    }

    /// Named figures for the store: `link_fwd_in`, `link_fwd_dropped`, … (with an `aqm`, `ecn`
    /// or a bottleneck: `_aqm_dropped`, `_aqm_marked`, `_ecn_marked`, and the mean and worst
    /// wait at the bottleneck, `_qdelay_mean_us`, `_qdelay_max_us`) and `emu_cpu_s`,
    /// `emu_cpu_ns_per_packet`, `emu_max_lag_us`, `emu_late`, `emu_valid`.
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        let f = &self.forward;
        let b = &self.backward;
        vec![
            ("link_fwd_in", f.stats.packets_in as f64),
            ("link_fwd_dropped", f.stats.dropped as f64),
            ("link_fwd_duplicated", f.stats.duplicated as f64),
            ("link_fwd_corrupted", f.stats.corrupted as f64),
            ("link_fwd_reordered", f.stats.reordered as f64),
            ("link_fwd_queue_dropped", f.stats.queue_dropped as f64),
            ("link_fwd_kernel_drops", f.kernel_drops as f64),
            ("link_fwd_aqm_dropped", f.stats.aqm_dropped as f64),
            ("link_fwd_aqm_marked", f.stats.aqm_marked as f64),
            ("link_fwd_ecn_marked", f.stats.loss_marked as f64),
            (
                "link_fwd_qdelay_mean_us",
                f.stats.mean_queue_delay_ns() / 1000.0,
            ),
            (
                "link_fwd_qdelay_max_us",
                f.stats.queue_delay_max_ns as f64 / 1000.0,
            ),
            ("link_back_in", b.stats.packets_in as f64),
            ("link_back_dropped", b.stats.dropped as f64),
            ("link_back_duplicated", b.stats.duplicated as f64),
            ("link_back_corrupted", b.stats.corrupted as f64),
            ("link_back_reordered", b.stats.reordered as f64),
            ("link_back_queue_dropped", b.stats.queue_dropped as f64),
            ("link_back_kernel_drops", b.kernel_drops as f64),
            ("link_back_aqm_dropped", b.stats.aqm_dropped as f64),
            ("link_back_aqm_marked", b.stats.aqm_marked as f64),
            ("link_back_ecn_marked", b.stats.loss_marked as f64),
            (
                "link_back_qdelay_mean_us",
                b.stats.mean_queue_delay_ns() / 1000.0,
            ),
            (
                "link_back_qdelay_max_us",
                b.stats.queue_delay_max_ns as f64 / 1000.0,
            ),
            ("emu_cpu_s", (f.cpu_ns + b.cpu_ns) as f64 / 1e9),
            ("emu_cpu_ns_per_packet", self.cpu_ns_per_packet()),
            (
                "emu_max_lag_us",
                f.max_lag_ns.max(b.max_lag_ns) as f64 / 1000.0,
            ),
            ("emu_late", (f.late + b.late) as f64),
            (
                "emu_valid",
                f64::from(u8::from(self.invalid_reason().is_none())),
            ),
        ]
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
            let others = [link_back, driver, mtu, seed];
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
            crate::units::parse_size(s).map_err(LinkValueError::Seed)
        })?;
        Ok(Some(LinkConfig {
            tag: None,
            driver,
            pair: LinkPair { forward, backward },
            seed,
            mtu,
        }))
    }

    /// The canonical values of [`KEYS`] (`link_back` only when it differs from `link`): what
    /// [`LinkConfig::from_keys`] reads back to `self` (without the tag).
    pub fn to_keys(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![("link", spec_text(&self.pair.forward))];
        if self.pair.backward != self.pair.forward {
            v.push(("link_back", spec_text(&self.pair.backward)));
        }
        v.push(("link_driver", self.driver.as_str().to_string()));
        v.push(("link_mtu", self.mtu.to_string()));
        v.push(("link_seed", self.seed.to_string()));
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
        }
    }
}

/// `a += b`, counter by counter.
pub(crate) fn add_stats(a: &mut Stats, b: &Stats) {
    a.add(b);
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
    pub fn start(cfg: &LinkConfig) -> Result<EmulatedLink, NetError> {
        EmulatedLink::start_with(cfg, None)
    }

    /// [`EmulatedLink::start`], recording every packet into `capture` ([`capture`]): only the
    /// `tun` driver can (`auto` then means `tun`).
    pub fn start_with(
        cfg: &LinkConfig,
        capture: Option<capture::CaptureTap>,
    ) -> Result<EmulatedLink, NetError> {
        check_mtu(cfg.mtu).map_err(|e| NetError::Invalid(format!("bad --mtu {}: {e}", cfg.mtu)))?;
        if capture.is_some() && !matches!(cfg.driver, Driver::Auto | Driver::Tun) {
            return Err(NetError::Invalid(format!(
                "--capture records what socklab's own emulator does: use --driver tun (not {})",
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
                return Err(NetError::Link(
                    "this kernel has no sch_netem ('tc qdisc add … netem' fails): use --driver tun (socklab's own emulator) or auto".into(),
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
        Ok(EmulatedLink {
            engine,
            ns: Some(ns),
            driver,
            pair: cfg.pair.clone(),
            seed: cfg.seed,
        })
    }

    /// The namespaces of a namespace driver; an error for `udp-proxy`, which makes none (use
    /// [`EmulatedLink::server_namespace`] and [`EmulatedLink::enter_client`], which work for
    /// every driver).
    pub fn namespaces(&self) -> Result<&Namespaces, NetError> {
        self.ns.as_ref().ok_or_else(|| {
            NetError::Invalid(
                "the udp-proxy driver makes no namespaces: use --driver tun or netem (root)".into(),
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
    pub fn route(&mut self, server: SocketAddr) -> Result<SocketAddr, NetError> {
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
    pub fn enter_client(&self) -> Result<ClientGuard, NetError> {
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
    pub fn set(&mut self, pair: &LinkPair) -> Result<(), NetError> {
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
    pub fn reseed(&mut self, seed: u64) -> Result<(), NetError> {
        let pair = self.pair.clone();
        self.respecify(&pair, seed)
    }

    /// New impairments and a new seed at once, with one restart of the models (a repetition
    /// that changes both restarts them once, not twice). The kernel's netem is changed only
    /// when the impairments change.
    pub fn respecify(&mut self, pair: &LinkPair, seed: u64) -> Result<(), NetError> {
        if let Engine::Netem(n) = &mut self.engine {
            if *pair != self.pair {
                let ns = self.ns.as_ref().ok_or_else(|| {
                    NetError::Link("the netem driver has lost its namespaces".into())
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

    /// Cumulative accounting so far (diff two with [`LinkReport::since`]); for `udp-proxy`
    /// the sum of its relays' counts (it has no lag, CPU or kernel-drop accounting).
    pub fn report(&self) -> LinkReport {
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
                    add_stats(&mut st.forward, &s.forward);
                    add_stats(&mut st.backward, &s.backward);
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
    pub fn stop(mut self) -> Result<LinkReport, NetError> {
        if let Engine::Proxy(relays) = &mut self.engine {
            let mut st = crate::udpproxy::ProxyStats::default();
            for r in std::mem::take(relays) {
                let s = r.handle.stop()?;
                add_stats(&mut st.forward, &s.forward);
                add_stats(&mut st.backward, &s.backward);
            }
            return Ok(st.into());
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
        assert!(e.starts_with("bad --link \"loss 150%\": loss 150%"), "{e}");
        let e = LinkPair::parse("", Some("jitter 3"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--link-back") && e.contains("jitter"), "{e}");
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
            ["link", "link_back", "link_driver", "link_mtu", "link_seed"]
        );
    }

    #[test]
    fn key_errors_name_the_key_the_value_and_the_fix() {
        let e = |kv: &[(&str, &str)]| keys(kv).unwrap_err().to_string();
        for k in ["link_back", "link_driver", "link_mtu", "link_seed"] {
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
