//! Workloads: what one cell of an experiment runs. Each parses from and prints to [`Params`].
//!
//! | workload | keys |
//! |---|---|
//! | `bulk` | `to strategy nbufs bufsize iterations/duration/bytes cc nodelay sndbuf read_size verify seed` |
//! | `pipe` | `size bytes` |
//! | `memcpy` | `size bytes` |
//! | `transfer` | `proto tcp_cc workload large small files timeout seed` |
//! | `load` | `to design workers handler body clients loops bytes connections duration rate new_connection threads timeout` |

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use socklab_net::bulk::{BulkConfig, Limit};
use socklab_net::units::{format_duration, format_size, parse_duration, parse_size};
use socklab_net::Strategy;

use crate::params::{parse_bool, parse_count, parse_usize, Params};
use crate::LabError;
use socklab_net::link::{Driver, LinkPair};

/// Where a bulk test sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A sink socklab starts itself as a child process on an ephemeral loopback port.
    SelfSink,
    /// A sink somebody else started.
    Addr(SocketAddr),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::SelfSink => f.write_str("self"),
            Target::Addr(a) => write!(f, "{a}"),
        }
    }
}

/// Parses `self` or `host:port`.
pub fn parse_target(s: &str) -> Result<Target, String> {
    let t = s.trim();
    if t.is_empty() || t == "self" {
        return Ok(Target::SelfSink);
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(Target::Addr(a));
    }
    if !t.contains(':') {
        return Err("missing port: write HOST:PORT, e.g. 127.0.0.1:5001".into());
    }
    match t.to_socket_addrs() {
        Ok(mut it) => it
            .next()
            .map(Target::Addr)
            .ok_or_else(|| "the name resolves to no address".into()),
        Err(e) => Err(format!(
            "cannot resolve: {e}; write HOST:PORT, e.g. 127.0.0.1:5001"
        )),
    }
}

/// The parameters of a bulk-throughput test: the socket layer's configuration, and where to
/// send (the address in `cfg` is filled in when the run starts).
#[derive(Debug, Clone)]
pub struct BulkSpec {
    /// The sink.
    pub to: Target,
    /// Everything else (strategy, sizes, limit, options).
    pub cfg: BulkConfig,
    /// The emulated link between client and sink, if any.
    pub link: Option<LinkParams>,
}

impl PartialEq for BulkSpec {
    fn eq(&self, o: &Self) -> bool {
        // Compare through the canonical text, which covers every parameter.
        self.to == o.to
            && Workload::Bulk(self.clone()).params() == Workload::Bulk(o.clone()).params()
    }
}

/// Parameters of a reference measurement (`pipe`, `memcpy`).
#[derive(Debug, Clone, PartialEq)]
pub struct RefSpec {
    /// Transfer size per operation.
    pub size: usize,
    /// Total bytes.
    pub bytes: u64,
}

/// The parameters of a request/response (ping-pong) test.
#[derive(Debug, Clone)]
pub struct PingSpec {
    /// The echo server (`self`: socklab starts one, with the server-side options).
    pub to: Target,
    /// Everything else (size, count, options, UDP timeout and retries).
    pub cfg: socklab_net::pingpong::PingConfig,
    /// The emulated link between client and echo server, if any.
    pub link: Option<LinkParams>,
}

impl PartialEq for PingSpec {
    fn eq(&self, o: &Self) -> bool {
        Workload::PingPong(self.clone()).params() == Workload::PingPong(o.clone()).params()
    }
}

/// An emulated link under a workload: the client runs in the client namespace, the
/// self-started server in the server namespace (or, with `udp-proxy`, behind a relay).
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

/// The keys of an emulated link (bulk and pingpong).
pub const LINK_KEYS: &[KeyDoc] = &[
    (
        "link",
        "(none)",
        "impairments in netem syntax, both directions, e.g. 'delay 50ms loss 5%' ('none': the emulated link without impairment)",
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
fn parse_link(p: &Params) -> Result<Option<LinkParams>, LabError> {
    let Some(forward) = p.parse_opt("link", parse_spec_text)? else {
        if let Some(k) = LINK_KEYS[1..].iter().find(|(k, _, _)| p.get(k).is_some()) {
            return Err(LabError::Plan(format!(
                "{} needs link: add link = \"…\" (netem syntax, or none)",
                k.0
            )));
        }
        return Ok(None);
    };
    let backward = p.parse_or("link_back", forward.clone(), parse_spec_text)?;
    let driver = p.parse_or("link_driver", Driver::Auto, |s| s.parse())?;
    let mtu = p.parse_or("link_mtu", 1500u32, |s| match s.trim().parse::<u32>() {
        Ok(m @ 576..=65535) => Ok(m),
        _ => Err("use 576 to 65535 (1500 is Ethernet's)".to_string()),
    })?;
    let seed = p.parse_or("link_seed", 1, parse_count)?;
    Ok(Some(LinkParams {
        pair: LinkPair { forward, backward },
        driver,
        mtu,
        seed,
    }))
}

fn set_link(p: &mut Params, link: &Option<LinkParams>) {
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

/// A link needs the server started by socklab (it runs in the server namespace).
fn check_link_target(link: &Option<LinkParams>, to: &Target, udp: bool) -> Result<(), LabError> {
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

/// What a cell runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// Request/response round trips against an echo server.
    PingPong(PingSpec),
    /// TIME_WAIT and SO_REUSEADDR: who holds TIME_WAIT, and whether the port can be re-bound.
    States(socklab_net::states::StatesConfig),
    /// TCP bulk throughput.
    Bulk(BulkSpec),
    /// Pipe bandwidth between two threads.
    Pipe(RefSpec),
    /// Memory copy bandwidth.
    Memcpy(RefSpec),
    /// Files over TCP or the reliable UDP transport (seed 004).
    Transfer(TransferSpec),
    /// A server design under load (seed 002).
    Load(crate::loadspec::LoadSpec),
}

pub use socklab_net::transfer::Proto;

/// Seed 004's file sizes: its packets carried 1500 bytes, a large file was 658 packets and a
/// small one 7, so 658 × 1500 = 987000 and 7 × 1500 = 10500 bytes.
pub const SEED004_LARGE: u64 = 658 * 1500;
/// See [`SEED004_LARGE`].
pub const SEED004_SMALL: u64 = 7 * 1500;
/// Most files one transfer may carry.
pub const MAX_FILES: usize = 1000;
/// Most bytes one transfer may carry (its files are generated on disk).
pub const MAX_TRANSFER_BYTES: u64 = 16 << 30;

/// The files of a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSet {
    /// Seed 004: 10 large and 10 small files, interleaved (large-0, small-0, large-1, …).
    Seed004 {
        /// Bytes of each large file.
        large: u64,
        /// Bytes of each small file.
        small: u64,
    },
    /// Files of these sizes, named file-0, file-1, ….
    Custom(Vec<u64>),
}

impl FileSet {
    /// The files' names and sizes, in the order they are sent.
    pub fn entries(&self) -> Vec<(String, u64)> {
        match self {
            FileSet::Seed004 { large, small } => (0..10)
                .flat_map(|i| {
                    [
                        (format!("large-{i}"), *large),
                        (format!("small-{i}"), *small),
                    ]
                })
                .collect(),
            FileSet::Custom(sizes) => sizes
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("file-{i}"), *s))
                .collect(),
        }
    }
}

/// Parses `1M,10K,…` (file sizes).
pub fn parse_sizes(s: &str) -> Result<Vec<u64>, String> {
    let v: Vec<u64> = s
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(parse_size)
        .collect::<Result<_, _>>()?;
    if v.is_empty() || v.len() > MAX_FILES {
        return Err(format!("give 1 to {MAX_FILES} file sizes, e.g. 1M,10K"));
    }
    Ok(v)
}

/// The parameters of a file transfer (seed 004).
#[derive(Debug, Clone, PartialEq)]
pub struct TransferSpec {
    /// TCP or rudp.
    pub proto: Proto,
    /// Congestion control of the TCP sockets (both sides); `None` for rudp.
    pub tcp_cc: Option<String>,
    /// The files.
    pub files: FileSet,
    /// A repetition that has not finished after this long fails.
    pub timeout: Duration,
    /// Seed of the files' content.
    pub seed: u64,
    /// The emulated link between client and server, if any.
    pub link: Option<LinkParams>,
}

/// Checks a TCP congestion control name: cubic, bbr, reno, or one this kernel lists.
pub fn check_tcp_cc(s: &str) -> Result<String, String> {
    let t = s.trim();
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if ["cubic", "bbr", "reno"].contains(&t) || available.split_whitespace().any(|a| a == t) {
        Ok(t.to_string())
    } else {
        Err(format!(
            "choose cubic, bbr or reno (available here: {})",
            available.trim()
        ))
    }
}

/// Documentation of one key: name, default, meaning.
pub type KeyDoc = (&'static str, &'static str, &'static str);

/// The keys of the bulk workload.
pub const BULK_KEYS: &[KeyDoc] = &[
    (
        "to",
        "self",
        "sink address HOST:PORT, or self to start one on loopback",
    ),
    (
        "strategy",
        "single",
        "write, writev, single, sendmsg, sendfile, splice, zerocopy",
    ),
    ("nbufs", "1", "buffers per round"),
    ("bufsize", "128K", "bytes per buffer (K, M suffixes)"),
    (
        "iterations",
        "",
        "rounds to send (one of iterations, duration, bytes)",
    ),
    ("duration", "2s", "time to send"),
    ("bytes", "", "bytes to send, rounded up to whole rounds"),
    ("cc", "cubic", "congestion control of the sending socket"),
    ("nodelay", "false", "TCP_NODELAY on the sender"),
    (
        "sndbuf",
        "",
        "SO_SNDBUF of the sender (default: autotuning)",
    ),
    ("read_size", "128K", "bytes per read() at the sink"),
    (
        "verify",
        "false",
        "BLAKE3-hash the stream on both sides and compare",
    ),
    ("seed", "1", "seed of the payload pattern"),
];

/// The keys of the ping-pong workload.
pub const PINGPONG_KEYS: &[KeyDoc] = &[
    (
        "to",
        "self",
        "echo server HOST:PORT, or self to start one on loopback",
    ),
    ("udp", "false", "datagrams instead of a TCP connection"),
    ("size", "64", "bytes per message"),
    ("count", "500", "round trips per repetition (the seed: 500)"),
    (
        "opts",
        "baseline",
        "socket options: nodelay+quickack, server:sndbuf=64K, … (baseline: none)",
    ),
    (
        "timeout",
        "200ms",
        "UDP: wait this long for each reply before sending again",
    ),
    (
        "retries",
        "3",
        "UDP: sends again before a message counts as lost",
    ),
    (
        "new_connection",
        "false",
        "TCP: a new connection per message (where fastopen matters)",
    ),
];

/// The keys of the states workload.
pub const STATES_KEYS: &[KeyDoc] = &[
    (
        "connections",
        "100",
        "connections opened and closed per repetition",
    ),
    (
        "closer",
        "server",
        "the side that closes first: server or client",
    ),
    (
        "reuseaddr",
        "false",
        "SO_REUSEADDR on the listener and on the re-bound listener",
    ),
];

/// The keys of the reference workloads.
pub const REF_KEYS: &[KeyDoc] = &[
    ("size", "128K", "bytes per operation"),
    ("bytes", "1G", "total bytes to move"),
];

/// The keys of the transfer workload.
pub const TRANSFER_KEYS: &[KeyDoc] = &[
    (
        "proto",
        "tcp",
        "tcp or rudp (socklab's reliable transport over UDP)",
    ),
    (
        "tcp_cc",
        "cubic",
        "congestion control of both TCP sockets: cubic, bbr, reno (always set; n/a for rudp)",
    ),
    (
        "workload",
        "seed-004",
        "seed-004 (10 large + 10 small files, interleaved) or custom (sizes in files; the default when files is given)",
    ),
    (
        "large",
        "987000",
        "seed-004: bytes per large file (the seed: 658 packets of 1500 bytes)",
    ),
    (
        "small",
        "10500",
        "seed-004: bytes per small file (the seed: 7 packets of 1500 bytes)",
    ),
    ("files", "", "custom: file sizes, e.g. \"1M,10K,10K\""),
    (
        "timeout",
        "60s",
        "a repetition not finished by then fails (recorded as failed)",
    ),
    ("seed", "1", "seed of the files' pseudo-random content"),
];

/// The workload names.
pub const KINDS: &[&str] = &[
    "bulk", "pingpong", "states", "pipe", "memcpy", "transfer", "load",
];

fn check_keys(kind: &str, params: &Params) -> Result<(), LabError> {
    let keys = Workload::keys(kind);
    for k in params.0.keys() {
        if !keys.iter().any(|(name, _, _)| name == k) {
            return Err(LabError::UnknownKey {
                key: k.clone(),
                workload: kind.to_string(),
                valid: keys
                    .iter()
                    .map(|(n, _, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}

fn nonzero_usize(s: &str) -> Result<usize, String> {
    match parse_usize(s)? {
        0 => Err("must be at least 1".into()),
        v => Ok(v),
    }
}

impl Workload {
    /// Parses a workload of `kind` from its parameters (missing keys take their defaults).
    pub fn from_params(kind: &str, p: &Params) -> Result<Workload, LabError> {
        match kind {
            "bulk" => {
                check_keys(kind, p)?;
                let limits = ["iterations", "duration", "bytes"]
                    .iter()
                    .filter(|k| p.get(k).is_some())
                    .count();
                if limits > 1 {
                    return Err(LabError::Plan(
                        "give only one of iterations, duration and bytes".into(),
                    ));
                }
                let limit = if let Some(n) = p.parse_opt("iterations", parse_count)? {
                    Limit::Iterations(n)
                } else if let Some(b) = p.parse_opt("bytes", parse_size)? {
                    Limit::Bytes(b)
                } else {
                    Limit::Duration(p.parse_or(
                        "duration",
                        Duration::from_secs(2),
                        parse_duration,
                    )?)
                };
                let link = parse_link(p)?;
                let spec = BulkSpec {
                    link,
                    to: p.parse_or("to", Target::SelfSink, parse_target)?,
                    cfg: BulkConfig {
                        to: SocketAddr::from(([127, 0, 0, 1], 0)),
                        strategy: p.parse_or("strategy", Strategy::Single, |s| s.parse())?,
                        nbufs: p.parse_or("nbufs", 1, nonzero_usize)?,
                        bufsize: p.parse_or("bufsize", 128 * 1024, nonzero_usize)?,
                        limit,
                        cc: p.parse_or("cc", "cubic".to_string(), |s| {
                            Ok::<_, String>(s.trim().to_string())
                        })?,
                        nodelay: p.parse_or("nodelay", false, parse_bool)?,
                        sndbuf: p.parse_opt("sndbuf", nonzero_usize)?,
                        read_size: p.parse_or("read_size", 128 * 1024, nonzero_usize)?,
                        verify: p.parse_or("verify", false, parse_bool)?,
                        seed: p.parse_or("seed", 1, parse_count)?,
                        connect_timeout: Duration::from_secs(5),
                    },
                };
                // Check the combination now, before anything runs.
                check_link_target(&spec.link, &spec.to, false)?;
                spec.cfg
                    .validate()
                    .map_err(|e| LabError::Plan(e.to_string()))?;
                Ok(Workload::Bulk(spec))
            }
            "pingpong" => {
                check_keys(kind, p)?;
                let to = p.parse_or("to", Target::SelfSink, parse_target)?;
                let cfg = socklab_net::pingpong::PingConfig {
                    to: SocketAddr::from(([127, 0, 0, 1], 0)),
                    udp: p.parse_or("udp", false, parse_bool)?,
                    size: p.parse_or("size", 64, nonzero_usize)?,
                    count: p.parse_or("count", 500, parse_count)?,
                    opts: p.parse_or("opts", socklab_net::sockopt::OptSet::default(), |s| {
                        s.parse()
                    })?,
                    timeout: p.parse_or("timeout", Duration::from_millis(200), parse_duration)?,
                    retries: p.parse_or("retries", 3, |s| {
                        s.trim()
                            .parse::<u32>()
                            .map_err(|_| "a whole number, e.g. 3".to_string())
                    })?,
                    new_connection_per_message: p.parse_or("new_connection", false, parse_bool)?,
                    connect_timeout: Duration::from_secs(5),
                };
                cfg.validate().map_err(|e| LabError::Plan(e.to_string()))?;
                cfg.opts
                    .validate(cfg.udp)
                    .map_err(|e| LabError::Plan(e.to_string()))?;
                if matches!(to, Target::Addr(_))
                    && cfg
                        .opts
                        .0
                        .iter()
                        .any(|o| o.side != socklab_net::sockopt::Side::Client)
                {
                    return Err(LabError::Plan(format!(
                        "opts '{}' set server-side options, which only a self-started echo server can apply: omit --to, or prefix them client:",
                        cfg.opts
                    )));
                }
                let link = parse_link(p)?;
                check_link_target(&link, &to, cfg.udp)?;
                Ok(Workload::PingPong(PingSpec { to, cfg, link }))
            }
            "states" => {
                check_keys(kind, p)?;
                let cfg = socklab_net::states::StatesConfig {
                    connections: p.parse_or("connections", 100, |s| match parse_usize(s)? {
                        n @ 1..=10_000 => Ok(n),
                        _ => Err("use 1 to 10000".to_string()),
                    })?,
                    closer: p
                        .parse_or("closer", socklab_net::states::Closer::Server, |s| s.parse())?,
                    reuseaddr: p.parse_or("reuseaddr", false, parse_bool)?,
                };
                Ok(Workload::States(cfg))
            }
            "pipe" | "memcpy" => {
                check_keys(kind, p)?;
                let spec = RefSpec {
                    size: p.parse_or("size", 128 * 1024, nonzero_usize)?,
                    bytes: p.parse_or("bytes", 1 << 30, |s| match parse_size(s)? {
                        0 => Err("must be at least 1".to_string()),
                        v => Ok(v),
                    })?,
                };
                Ok(if kind == "pipe" {
                    Workload::Pipe(spec)
                } else {
                    Workload::Memcpy(spec)
                })
            }
            "transfer" => {
                check_keys(kind, p)?;
                Ok(Workload::Transfer(transfer_from_params(p)?))
            }
            "load" => {
                check_keys(kind, p)?;
                Ok(Workload::Load(crate::loadspec::from_params(p)?))
            }
            other => Err(LabError::Plan(format!(
                "unknown workload '{other}': choose one of {}",
                KINDS.join(", ")
            ))),
        }
    }

    /// The workload's name.
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Bulk(_) => "bulk",
            Workload::PingPong(_) => "pingpong",
            Workload::States(_) => "states",
            Workload::Pipe(_) => "pipe",
            Workload::Memcpy(_) => "memcpy",
            Workload::Transfer(_) => "transfer",
            Workload::Load(_) => "load",
        }
    }

    /// Every parameter with its effective value, in canonical text.
    pub fn params(&self) -> Params {
        let mut p = Params::new();
        match self {
            Workload::Bulk(BulkSpec { to, cfg: b, link }) => {
                set_link(&mut p, link);
                p.set("to", to.to_string());
                p.set("strategy", b.strategy.as_str());
                p.set("nbufs", b.nbufs.to_string());
                p.set("bufsize", format_size(b.bufsize as u64));
                match b.limit {
                    Limit::Iterations(n) => p.set("iterations", n.to_string()),
                    Limit::Duration(d) => p.set("duration", format_duration(d)),
                    Limit::Bytes(n) => p.set("bytes", format_size(n)),
                };
                p.set("cc", b.cc.clone());
                p.set("nodelay", b.nodelay.to_string());
                if let Some(s) = b.sndbuf {
                    p.set("sndbuf", format_size(s as u64));
                }
                p.set("read_size", format_size(b.read_size as u64));
                p.set("verify", b.verify.to_string());
                p.set("seed", b.seed.to_string());
            }
            Workload::PingPong(PingSpec { to, cfg, link }) => {
                set_link(&mut p, link);
                p.set("to", to.to_string());
                p.set("udp", cfg.udp.to_string());
                p.set("size", format_size(cfg.size as u64));
                p.set("count", cfg.count.to_string());
                p.set("opts", cfg.opts.to_string());
                if cfg.udp {
                    p.set("timeout", format_duration(cfg.timeout));
                    p.set("retries", cfg.retries.to_string());
                } else {
                    p.set("new_connection", cfg.new_connection_per_message.to_string());
                }
            }
            Workload::States(c) => {
                p.set("connections", c.connections.to_string());
                p.set("closer", c.closer.to_string());
                p.set("reuseaddr", c.reuseaddr.to_string());
            }
            Workload::Pipe(r) | Workload::Memcpy(r) => {
                p.set("size", format_size(r.size as u64));
                p.set("bytes", format_size(r.bytes));
            }
            Workload::Transfer(t) => {
                set_link(&mut p, &t.link);
                p.set("proto", t.proto.as_str());
                p.set("tcp_cc", t.tcp_cc.as_deref().unwrap_or(NOT_APPLICABLE));
                match &t.files {
                    FileSet::Seed004 { large, small } => {
                        p.set("workload", "seed-004");
                        p.set("large", format_size(*large));
                        p.set("small", format_size(*small));
                    }
                    FileSet::Custom(sizes) => {
                        p.set("workload", "custom");
                        let v: Vec<String> = sizes.iter().map(|s| format_size(*s)).collect();
                        p.set("files", v.join(","));
                    }
                }
                p.set("timeout", format_duration(t.timeout));
                p.set("seed", t.seed.to_string());
            }
            Workload::Load(l) => p = crate::loadspec::params(l),
        }
        p
    }

    /// Documentation of the keys of `kind`.
    pub fn keys(kind: &str) -> Vec<KeyDoc> {
        let (own, link): (&[KeyDoc], &[KeyDoc]) = match kind {
            "bulk" => (BULK_KEYS, LINK_KEYS),
            "pingpong" => (PINGPONG_KEYS, LINK_KEYS),
            "states" => (STATES_KEYS, &[]),
            "transfer" => (TRANSFER_KEYS, LINK_KEYS),
            "load" => (crate::loadspec::LOAD_KEYS, &[]),
            _ => (REF_KEYS, &[]),
        };
        own.iter().chain(link).copied().collect()
    }
}

/// The value of `tcp_cc` for rudp.
pub const NOT_APPLICABLE: &str = "n/a";

fn transfer_from_params(p: &Params) -> Result<TransferSpec, LabError> {
    let proto = p.parse_or("proto", Proto::Tcp, |s| s.parse())?;
    let tcp_cc = match proto {
        Proto::Tcp => Some(p.parse_or("tcp_cc", "cubic".to_string(), check_tcp_cc)?),
        Proto::Rudp => {
            p.parse_opt("tcp_cc", |s| match s.trim() {
                NOT_APPLICABLE => Ok(()),
                _ => Err(
                    "applies to proto = tcp only; leave it out for rudp (recorded as n/a)"
                        .to_string(),
                ),
            })?;
            None
        }
    };
    // files alone means custom.
    let default_kind = if p.get("files").is_some() {
        "custom"
    } else {
        "seed-004"
    };
    let kind = p.parse_or("workload", default_kind.to_string(), |s| match s.trim() {
        w @ ("seed-004" | "custom") => Ok(w.to_string()),
        _ => Err("choose seed-004 or custom (with files = \"1M,10K\")".to_string()),
    })?;
    let files = if kind == "custom" {
        for k in ["large", "small"] {
            if p.get(k).is_some() {
                return Err(LabError::Plan(format!(
                    "{k} applies to workload = seed-004; for custom give the sizes in files"
                )));
            }
        }
        FileSet::Custom(p.parse_opt("files", parse_sizes)?.ok_or_else(|| {
            LabError::Plan("workload = custom needs files = \"1M,10K,…\" (the file sizes)".into())
        })?)
    } else {
        if p.get("files").is_some() {
            return Err(LabError::Plan(
                "files applies to workload = custom; seed-004 takes large and small".into(),
            ));
        }
        FileSet::Seed004 {
            large: p.parse_or("large", SEED004_LARGE, parse_size)?,
            small: p.parse_or("small", SEED004_SMALL, parse_size)?,
        }
    };
    let timeout = p.parse_or(
        "timeout",
        Duration::from_secs(60),
        |s| match parse_duration(s)? {
            d if d.is_zero() || d > Duration::from_secs(24 * 3600) => {
                Err("give 1ms to 24h, e.g. 60s".to_string())
            }
            d => Ok(d),
        },
    )?;
    let link = parse_link(p)?;
    if let Some(l) = &link {
        if l.driver == Driver::UdpProxy {
            return Err(LabError::Plan(
                "link_driver udp-proxy cannot carry a transfer (TCP needs tun or netem, and both protocols are compared over the same link): use auto, tun or netem (root)".into(),
            ));
        }
    }
    let total: u64 = files.entries().iter().map(|(_, n)| *n).sum();
    if total > MAX_TRANSFER_BYTES {
        return Err(LabError::Plan(format!(
            "the files add up to {}: at most {} (they are written to a temporary directory); give smaller sizes",
            format_size(total),
            format_size(MAX_TRANSFER_BYTES)
        )));
    }
    Ok(TransferSpec {
        proto,
        tcp_cc,
        files,
        timeout,
        seed: p.parse_or("seed", 1, parse_count)?,
        link,
    })
}

impl BulkSpec {
    /// The socket-layer configuration for a sink at `to`.
    pub fn net_config(&self, to: SocketAddr) -> BulkConfig {
        BulkConfig {
            to,
            ..self.cfg.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_parses_with_defaults_and_prints_back_the_same_text() {
        let p = Params::new()
            .with("strategy", "writev")
            .with("nbufs", "100")
            .with("bufsize", "15")
            .with("iterations", "20000");
        let w = Workload::from_params("bulk", &p).unwrap();
        let full = w.params();
        assert_eq!(full.get("cc"), Some("cubic"));
        assert_eq!(full.get("to"), Some("self"));
        assert_eq!(full.get("iterations"), Some("20000"));
        assert_eq!(full.get("duration"), None);
        assert_eq!(Workload::from_params("bulk", &full).unwrap(), w);
    }

    #[test]
    fn bad_bulk_params_name_the_key_and_the_fix() {
        let e = |p: Params| Workload::from_params("bulk", &p).unwrap_err().to_string();
        assert!(
            e(Params::new().with("bufsize", "0")).starts_with("bufsize = '0': must be at least 1")
        );
        assert!(
            e(Params::new().with("strategy", "writeev")).contains("choose one of write, writev")
        );
        assert!(e(Params::new().with("nbuf", "3")).contains("unknown parameter 'nbuf'"));
        assert!(e(Params::new()
            .with("nbufs", "2000")
            .with("strategy", "writev"))
        .contains("IOV_MAX"));
        assert!(
            e(Params::new().with("iterations", "1").with("duration", "1s")).contains("only one of")
        );
        assert!(e(Params::new().with("to", "localhost")).contains("missing port"));
        assert!(Workload::from_params("bulkk", &Params::new())
            .unwrap_err()
            .to_string()
            .contains("unknown workload 'bulkk'"));
    }
}

#[cfg(test)]
mod transfer_tests {
    use super::*;

    fn parse(p: Params) -> Result<Workload, LabError> {
        Workload::from_params("transfer", &p)
    }

    #[test]
    fn transfer_defaults_are_seed_004_over_tcp_cubic_and_round_trip() {
        let w = parse(Params::new()).unwrap();
        let p = w.params();
        assert_eq!(p.get("proto"), Some("tcp"));
        assert_eq!(p.get("tcp_cc"), Some("cubic"));
        assert_eq!(p.get("workload"), Some("seed-004"));
        assert_eq!(p.get("timeout"), Some("60s"));
        assert_eq!(parse(p.clone()).unwrap(), w);
        let Workload::Transfer(t) = &w else {
            panic!("not a transfer")
        };
        let e = t.files.entries();
        assert_eq!(e.len(), 20);
        assert_eq!(e[0], ("large-0".to_string(), 987_000));
        assert_eq!(e[1], ("small-0".to_string(), 10_500));
        assert_eq!(e[19].0, "small-9");
    }

    #[test]
    fn transfer_rudp_custom_and_link_round_trip() {
        let w = parse(
            Params::new()
                .with("proto", "rudp")
                .with("workload", "custom")
                .with("files", "1M, 10K,7")
                .with("timeout", "5s")
                .with("seed", "9")
                .with("link", "delay 5ms loss 5%"),
        )
        .unwrap();
        let p = w.params();
        assert_eq!(p.get("tcp_cc"), Some("n/a"));
        assert_eq!(p.get("files"), Some("1M,10K,7"));
        assert_eq!(p.get("link"), Some("delay 5ms loss 5%"));
        assert_eq!(parse(p).unwrap(), w);
        let Workload::Transfer(t) = w else {
            panic!("not a transfer")
        };
        assert_eq!(
            t.files.entries(),
            vec![
                ("file-0".to_string(), 1 << 20),
                ("file-1".to_string(), 10 << 10),
                ("file-2".to_string(), 7)
            ]
        );
        let s = parse(
            Params::new()
                .with("tcp_cc", "bbr")
                .with("large", "100K")
                .with("small", "1500"),
        )
        .unwrap();
        assert_eq!(parse(s.params()).unwrap(), s);
    }

    #[test]
    fn bad_transfer_params_name_the_value_and_the_fix() {
        let e = |p: Params| parse(p).unwrap_err().to_string();
        assert!(e(Params::new().with("proto", "sctp")).contains("choose tcp or rudp"));
        assert!(e(Params::new().with("tcp_cc", "cubc")).contains("choose cubic, bbr or reno"));
        assert!(e(Params::new().with("proto", "rudp").with("tcp_cc", "bbr"))
            .contains("proto = tcp only"));
        assert!(e(Params::new().with("workload", "custom")).contains("needs files"));
        assert!(e(Params::new().with("workload", "seed-5")).contains("choose seed-004 or custom"));
        assert!(e(Params::new()
            .with("workload", "seed-004")
            .with("files", "1M"))
        .contains("workload = custom"));
        assert!(matches!(
            parse(Params::new().with("files", "1M"))
                .unwrap()
                .params()
                .get("workload"),
            Some("custom")
        ));
        assert!(e(Params::new().with("timeout", "0s")).contains("1ms to 24h"));
        assert!(e(Params::new().with("large", "2G")).contains("at most 16G"));
        assert!(
            e(Params::new().with("workload", "custom").with("files", "1Q"))
                .starts_with("files = '1Q'")
        );
        assert!(e(Params::new()
            .with("link", "loss 1%")
            .with("link_driver", "udp-proxy"))
        .contains("udp-proxy cannot carry"));
    }
}
