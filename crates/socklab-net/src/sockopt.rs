//! Socket options as data: each parses from and prints to the same text (`nodelay`,
//! `sndbuf=64K`, `server:cc=bbr`), is applied at the right moment on the right side, and is
//! read back with `getsockopt` so the effective value is stored with the result. An option the
//! kernel refuses is an error naming the option and the errno, never a silent no-op.
//!
//! A set of options is written `a+b+c` (`baseline` is the empty set). A prefix `client:` or
//! `server:` limits an option to one side; without one it applies to both.

use std::fmt;
use std::os::fd::AsFd;
use std::str::FromStr;

use socket2::Socket;
use socklab_sys::sockopt::{get, set, IntOpt};

use crate::{NetError, SockOptError};
use socklab_units::{format_size, parse_size};

/// One socket option with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SockOpt {
    /// `TCP_NODELAY`: disable Nagle's algorithm.
    NoDelay,
    /// `TCP_QUICKACK`, re-armed after every receive (the kernel clears it).
    QuickAck,
    /// `SO_KEEPALIVE`, optionally with `TCP_KEEPIDLE`/`TCP_KEEPINTVL`/`TCP_KEEPCNT` (`keepalive=60/10/5`).
    KeepAlive(Option<(u32, u32, u32)>),
    /// TCP Fast Open: server queue (`TCP_FASTOPEN`) and client `TCP_FASTOPEN_CONNECT`.
    FastOpen,
    /// `SO_REUSEADDR`.
    ReuseAddr,
    /// `SO_REUSEPORT`.
    ReusePort,
    /// `TCP_CORK`.
    Cork,
    /// `SO_SNDBUF` in bytes.
    SndBuf(usize),
    /// `SO_RCVBUF` in bytes.
    RcvBuf(usize),
    /// `TCP_CONGESTION`.
    Cc(String),
    /// `TCP_NOTSENT_LOWAT` in bytes.
    NotsentLowat(usize),
    /// `SO_BUSY_POLL` in microseconds.
    BusyPoll(u32),
    /// `TCP_MAXSEG` in bytes.
    Mss(u32),
}

/// Every option name, for error messages and help.
pub const NAMES: &[&str] = &[
    "nodelay",
    "quickack",
    "keepalive",
    "fastopen",
    "reuseaddr",
    "reuseport",
    "cork",
    "sndbuf=SIZE",
    "rcvbuf=SIZE",
    "cc=NAME",
    "notsent-lowat=SIZE",
    "busy-poll=USEC",
    "mss=BYTES",
];

/// Which end of a connection an option applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The connecting side.
    Client,
    /// The accepting side.
    Server,
    /// Both.
    Both,
}

/// An option and the side it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptSpec {
    /// The option.
    pub opt: SockOpt,
    /// Where.
    pub side: Side,
}

/// A set of options (`baseline` when empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptSet(pub Vec<OptSpec>);

impl SockOpt {
    /// The option's name as written.
    pub fn name(&self) -> &'static str {
        match self {
            SockOpt::NoDelay => "nodelay",
            SockOpt::QuickAck => "quickack",
            SockOpt::KeepAlive(_) => "keepalive",
            SockOpt::FastOpen => "fastopen",
            SockOpt::ReuseAddr => "reuseaddr",
            SockOpt::ReusePort => "reuseport",
            SockOpt::Cork => "cork",
            SockOpt::SndBuf(_) => "sndbuf",
            SockOpt::RcvBuf(_) => "rcvbuf",
            SockOpt::Cc(_) => "cc",
            SockOpt::NotsentLowat(_) => "notsent-lowat",
            SockOpt::BusyPoll(_) => "busy-poll",
            SockOpt::Mss(_) => "mss",
        }
    }

    /// Whether the kernel's read-back `back` (as [`read_one`] prints it) shows this option in
    /// effect: on/off options read non-zero; `sndbuf`/`rcvbuf` read twice the value (Linux
    /// doubles it for its bookkeeping; a value capped by `net.core.wmem_max`/`rmem_max` or
    /// raised to the minimum reads otherwise); `mss` reads at most the value (a connected
    /// socket reports the MSS in use, less the TCP options); the others read the value itself.
    pub fn in_effect(&self, back: &str) -> bool {
        let num = || back.trim().parse::<u64>().ok();
        match self {
            SockOpt::NoDelay
            | SockOpt::QuickAck
            | SockOpt::Cork
            | SockOpt::FastOpen
            | SockOpt::ReuseAddr
            | SockOpt::ReusePort => num().is_some_and(|v| v != 0),
            SockOpt::KeepAlive(None) => back.split('/').next().is_some_and(|v| v != "0"),
            SockOpt::KeepAlive(Some((i, v, c))) => back == format!("1/{i}/{v}/{c}"),
            SockOpt::SndBuf(n) | SockOpt::RcvBuf(n) => num() == Some(2 * *n as u64),
            SockOpt::Mss(n) => num().is_some_and(|v| v > 0 && v <= u64::from(*n)),
            SockOpt::NotsentLowat(n) => num() == Some(*n as u64),
            SockOpt::BusyPoll(n) => num() == Some(u64::from(*n)),
            SockOpt::Cc(c) => back == c,
        }
    }

    /// Whether the option can be set on a connected socket (an accepted one): not the
    /// listener's and connect's own (`fastopen`, `reuseaddr`, `reuseport`).
    pub fn on_connected(&self) -> bool {
        !matches!(
            self,
            SockOpt::FastOpen | SockOpt::ReuseAddr | SockOpt::ReusePort
        )
    }

    /// True for options that exist only for TCP.
    pub fn tcp_only(&self) -> bool {
        !matches!(
            self,
            SockOpt::ReuseAddr
                | SockOpt::ReusePort
                | SockOpt::SndBuf(_)
                | SockOpt::RcvBuf(_)
                | SockOpt::BusyPoll(_)
        )
    }
}

impl fmt::Display for SockOpt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SockOpt::KeepAlive(Some((i, v, c))) => write!(f, "keepalive={i}/{v}/{c}"),
            SockOpt::SndBuf(n) | SockOpt::RcvBuf(n) | SockOpt::NotsentLowat(n) => {
                write!(f, "{}={}", self.name(), format_size(*n as u64))
            }
            SockOpt::Cc(c) => write!(f, "cc={c}"),
            SockOpt::BusyPoll(n) | SockOpt::Mss(n) => write!(f, "{}={n}", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

fn bad(s: &str, why: impl fmt::Display) -> SockOptError {
    SockOptError::Value {
        option: s.to_string(),
        reason: why.to_string(),
    }
}

impl FromStr for SockOpt {
    type Err = SockOptError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let (name, value) = match t.split_once('=') {
            Some((n, v)) => (
                n.trim().to_ascii_lowercase().replace('_', "-"),
                Some(v.trim()),
            ),
            None => (t.to_ascii_lowercase().replace('_', "-"), None),
        };
        let need = || value.ok_or_else(|| bad(s, format!("needs a value, e.g. {name}=64K")));
        let size = |min: u64, max: u64| -> Result<usize, SockOptError> {
            let n = parse_size(need()?).map_err(|e| bad(s, e))?;
            if n < min || n > max {
                return Err(bad(
                    s,
                    format!("out of range {}..={}", format_size(min), format_size(max)),
                ));
            }
            Ok(n as usize)
        };
        let flag = |o: SockOpt| match value {
            None => Ok(o),
            Some(_) => Err(bad(s, format!("{name} takes no value"))),
        };
        match name.as_str() {
            "nodelay" => flag(SockOpt::NoDelay),
            "quickack" => flag(SockOpt::QuickAck),
            "fastopen" => flag(SockOpt::FastOpen),
            "reuseaddr" => flag(SockOpt::ReuseAddr),
            "reuseport" => flag(SockOpt::ReusePort),
            "cork" => flag(SockOpt::Cork),
            "keepalive" => match value {
                None => Ok(SockOpt::KeepAlive(None)),
                Some(v) => {
                    let parts: Vec<Result<u32, _>> =
                        v.split('/').map(|p| p.trim().parse::<u32>()).collect();
                    match parts.as_slice() {
                        [Ok(i), Ok(iv), Ok(c)] if *i >= 1 && *iv >= 1 && *c >= 1 && *i <= 32767 && *iv <= 32767 && *c <= 127 => {
                            Ok(SockOpt::KeepAlive(Some((*i, *iv, *c))))
                        }
                        _ => Err(bad(s, "write keepalive=IDLE/INTERVAL/COUNT in seconds, e.g. keepalive=60/10/5")),
                    }
                }
            },
            "sndbuf" => size(1, 1 << 30).map(SockOpt::SndBuf),
            "rcvbuf" => size(1, 1 << 30).map(SockOpt::RcvBuf),
            "notsent-lowat" => size(1, u32::MAX as u64).map(SockOpt::NotsentLowat),
            "busy-poll" => {
                let n: u32 = need()?
                    .parse()
                    .map_err(|_| bad(s, "microseconds, e.g. busy-poll=50"))?;
                Ok(SockOpt::BusyPoll(n))
            }
            "mss" => {
                let n: u32 = need()?
                    .parse()
                    .map_err(|_| bad(s, "bytes, e.g. mss=1400"))?;
                if !(88..=65535).contains(&n) {
                    return Err(bad(s, "out of range 88..=65535"));
                }
                Ok(SockOpt::Mss(n))
            }
            "cc" => {
                let c = need()?;
                if c.is_empty()
                    || c.len() > 15
                    || !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err(bad(s, "not a congestion-control name (see /proc/sys/net/ipv4/tcp_available_congestion_control)"));
                }
                Ok(SockOpt::Cc(c.to_string()))
            }
            _ => Err(SockOptError::Unknown {
                option: s.to_string(),
                names: NAMES.join(", "),
            }),
        }
    }
}

impl fmt::Display for OptSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.side {
            Side::Both => write!(f, "{}", self.opt),
            Side::Client => write!(f, "client:{}", self.opt),
            Side::Server => write!(f, "server:{}", self.opt),
        }
    }
}

impl FromStr for OptSpec {
    type Err = SockOptError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let (side, rest) = if let Some(r) = t.strip_prefix("client:") {
            (Side::Client, r)
        } else if let Some(r) = t.strip_prefix("server:") {
            (Side::Server, r)
        } else {
            (Side::Both, t)
        };
        Ok(OptSpec {
            opt: rest.parse()?,
            side,
        })
    }
}

impl fmt::Display for OptSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("baseline");
        }
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join("+"))
    }
}

impl FromStr for OptSet {
    type Err = SockOptError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() || t == "baseline" || t == "none" {
            return Ok(OptSet::default());
        }
        let mut v: Vec<OptSpec> = Vec::new();
        for part in t.split('+') {
            let spec: OptSpec = part.parse()?;
            if v.iter().any(|o| {
                o.opt.name() == spec.opt.name()
                    && (o.side == spec.side || o.side == Side::Both || spec.side == Side::Both)
            }) {
                return Err(SockOptError::Twice {
                    name: spec.opt.name(),
                    set: t.to_string(),
                });
            }
            v.push(spec);
        }
        Ok(OptSet(v))
    }
}

fn refused(opt: &SockOpt, source: std::io::Error) -> NetError {
    let hint = match (opt, source.raw_os_error()) {
        (SockOpt::Cc(c), _) => format!(
            " (available here: {}; load a module with `modprobe tcp_{c}` or choose another cc)",
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                .unwrap_or_default()
                .trim()
        ),
        (SockOpt::BusyPoll(_), Some(1)) => {
            " (SO_BUSY_POLL above net.core.busy_read needs CAP_NET_ADMIN: run as root)".into()
        }
        _ => String::new(),
    };
    let value = opt.to_string();
    NetError::SockOpt {
        option: opt.name(),
        value: value
            .split_once('=')
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| "1".into()),
        source,
        hint,
    }
}

/// Sets an integer option and, for on/off options, checks the kernel now reports it on.
fn set_checked(
    s: &Socket,
    o: &SockOpt,
    opt: IntOpt,
    value: i32,
    check: bool,
) -> Result<(), NetError> {
    set(s.as_fd(), opt, value).map_err(|e| refused(o, e))?;
    if check {
        let got = get(s.as_fd(), opt).map_err(|e| refused(o, e))?;
        if (got != 0) != (value != 0) {
            return Err(NetError::Invalid(format!(
                "option {o}: set to {value} but the kernel reports {got}"
            )));
        }
    }
    Ok(())
}

/// When an option is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    Listener,
    Accepted,
    Client,
    /// A connected socket taking every option it can (the bulk sink's accepted sockets).
    Connected,
}

fn apply_one(s: &Socket, o: &SockOpt, at: Moment) -> Result<(), NetError> {
    use Moment::*;
    match (o, at) {
        (SockOpt::NoDelay, Accepted | Client | Connected) => {
            set_checked(s, o, IntOpt::TcpNoDelay, 1, true)
        }
        (SockOpt::QuickAck, Accepted | Client | Connected) => {
            set_checked(s, o, IntOpt::TcpQuickAck, 1, false)
        }
        (SockOpt::Cork, Accepted | Client | Connected) => {
            set_checked(s, o, IntOpt::TcpCork, 1, true)
        }
        (SockOpt::KeepAlive(p), Accepted | Client | Connected) => {
            set_checked(s, o, IntOpt::SoKeepAlive, 1, true)?;
            if let Some((idle, intvl, cnt)) = p {
                set_checked(s, o, IntOpt::TcpKeepIdle, *idle as i32, false)?;
                set_checked(s, o, IntOpt::TcpKeepIntvl, *intvl as i32, false)?;
                set_checked(s, o, IntOpt::TcpKeepCnt, *cnt as i32, false)?;
            }
            Ok(())
        }
        (SockOpt::FastOpen, Listener) => set_checked(s, o, IntOpt::TcpFastOpen, 16, false),
        (SockOpt::FastOpen, Client) => set_checked(s, o, IntOpt::TcpFastOpenConnect, 1, true),
        (SockOpt::ReuseAddr, Listener | Client) => set_checked(s, o, IntOpt::SoReuseAddr, 1, true),
        (SockOpt::ReusePort, Listener | Client) => set_checked(s, o, IntOpt::SoReusePort, 1, true),
        (SockOpt::SndBuf(n), Listener | Client | Connected) => {
            set_checked(s, o, IntOpt::SoSndBuf, *n as i32, false)
        }
        (SockOpt::RcvBuf(n), Listener | Client | Connected) => {
            set_checked(s, o, IntOpt::SoRcvBuf, *n as i32, false)
        }
        (SockOpt::Mss(n), Listener | Client | Connected) => {
            set_checked(s, o, IntOpt::TcpMaxSeg, *n as i32, false)
        }
        (SockOpt::NotsentLowat(n), Accepted | Client | Connected) => {
            set_checked(s, o, IntOpt::TcpNotsentLowat, *n as i32, false)
        }
        (SockOpt::BusyPoll(n), Accepted | Client | Connected) => {
            set_checked(s, o, IntOpt::SoBusyPoll, *n as i32, false)
        }
        (SockOpt::Cc(c), _) => s
            .set_tcp_congestion(c.as_bytes())
            .map_err(|e| refused(o, e)),
        _ => Ok(()),
    }
}

/// Reads an option back from a socket: the effective value as text.
pub fn read_one(s: &Socket, o: &SockOpt, side: Side) -> Result<String, std::io::Error> {
    let fd = s.as_fd();
    Ok(match o {
        SockOpt::NoDelay => get(fd, IntOpt::TcpNoDelay)?.to_string(),
        SockOpt::QuickAck => get(fd, IntOpt::TcpQuickAck)?.to_string(),
        SockOpt::Cork => get(fd, IntOpt::TcpCork)?.to_string(),
        SockOpt::KeepAlive(_) => format!(
            "{}/{}/{}/{}",
            get(fd, IntOpt::SoKeepAlive)?,
            get(fd, IntOpt::TcpKeepIdle)?,
            get(fd, IntOpt::TcpKeepIntvl)?,
            get(fd, IntOpt::TcpKeepCnt)?
        ),
        SockOpt::FastOpen if side == Side::Client => {
            get(fd, IntOpt::TcpFastOpenConnect)?.to_string()
        }
        SockOpt::FastOpen => get(fd, IntOpt::TcpFastOpen)?.to_string(),
        SockOpt::ReuseAddr => get(fd, IntOpt::SoReuseAddr)?.to_string(),
        SockOpt::ReusePort => get(fd, IntOpt::SoReusePort)?.to_string(),
        SockOpt::SndBuf(_) => get(fd, IntOpt::SoSndBuf)?.to_string(),
        SockOpt::RcvBuf(_) => get(fd, IntOpt::SoRcvBuf)?.to_string(),
        SockOpt::Mss(_) => get(fd, IntOpt::TcpMaxSeg)?.to_string(),
        SockOpt::NotsentLowat(_) => get(fd, IntOpt::TcpNotsentLowat)?.to_string(),
        SockOpt::BusyPoll(_) => get(fd, IntOpt::SoBusyPoll)?.to_string(),
        SockOpt::Cc(_) => String::from_utf8_lossy(&s.tcp_congestion()?)
            .trim_end_matches('\0')
            .to_string(),
    })
}

impl OptSet {
    fn on(&self, side: Side) -> impl Iterator<Item = &SockOpt> {
        self.0
            .iter()
            .filter(move |o| o.side == Side::Both || o.side == side)
            .map(|o| &o.opt)
    }

    /// Checks the set fits the protocol: TCP-only options with UDP are an error.
    pub fn validate(&self, udp: bool) -> Result<(), NetError> {
        if udp {
            if let Some(o) = self.0.iter().find(|o| o.opt.tcp_only()) {
                return Err(NetError::Invalid(format!(
                    "option {} applies to TCP only: drop it or run without `udp`",
                    o.opt
                )));
            }
        }
        Ok(())
    }

    /// Server side, before `bind()` and `listen()`.
    pub fn apply_listener(&self, s: &Socket) -> Result<(), NetError> {
        self.on(Side::Server)
            .try_for_each(|o| apply_one(s, o, Moment::Listener))
    }

    /// Server side, on each accepted connection.
    pub fn apply_accepted(&self, s: &Socket) -> Result<(), NetError> {
        self.on(Side::Server)
            .try_for_each(|o| apply_one(s, o, Moment::Accepted))
    }

    /// Client side, before `connect()`.
    pub fn apply_client(&self, s: &Socket) -> Result<(), NetError> {
        self.on(Side::Client)
            .try_for_each(|o| apply_one(s, o, Moment::Client))
    }

    /// `side`'s options on a connected socket (the bulk sink's accepted sockets, once a
    /// stream has named its test): every option but those of a listener or a connect
    /// ([`SockOpt::on_connected`]), which are skipped.
    pub fn apply_connected(&self, s: &Socket, side: Side) -> Result<(), NetError> {
        self.on(side)
            .try_for_each(|o| apply_one(s, o, Moment::Connected))
    }

    /// `side`'s options that cannot apply on a connected socket ([`SockOpt::on_connected`]).
    pub fn not_on_connected(&self, side: Side) -> Vec<&SockOpt> {
        self.on(side).filter(|o| !o.on_connected()).collect()
    }

    /// `side`'s options that `back` (its [`OptSet::read_back`], or what a peer reported) does
    /// not show in effect ([`SockOpt::in_effect`]), each as `option: kernel reports VALUE`
    /// (`not reported` when `back` lacks it).
    pub fn off(&self, side: Side, back: &[(String, String)]) -> Vec<String> {
        self.on(side)
            .filter_map(|o| {
                let got = back.iter().find(|(k, _)| k == o.name()).map(|(_, v)| v);
                match got {
                    Some(v) if o.in_effect(v) => None,
                    Some(v) => Some(format!("{o}: kernel reports {v}")),
                    None => Some(format!("{o}: not reported")),
                }
            })
            .collect()
    }

    /// Whether `TCP_QUICKACK` must be re-armed after every receive on `side`.
    pub fn rearm_quickack(&self, side: Side) -> bool {
        self.on(side).any(|o| *o == SockOpt::QuickAck)
    }

    /// The effective values of `side`'s options, as the kernel reports them.
    pub fn read_back(&self, s: &Socket, side: Side) -> Vec<(String, String)> {
        self.on(side)
            .map(|o| {
                let v = read_one(s, o, side).unwrap_or_else(|e| format!("error: {e}"));
                (o.name().to_string(), v)
            })
            .collect()
    }
}

/// Re-arms `TCP_QUICKACK` (the kernel clears it after it has been used).
pub fn rearm_quickack(s: &Socket) -> std::io::Result<()> {
    set(s.as_fd(), IntOpt::TcpQuickAck, 1)
}

/// The kernel's TCP Fast Open counters (`TcpExt` of `/proc/net/netstat`, this network
/// namespace): compare before and after a run to see whether TFO was really used.
pub fn tfo_counters() -> Vec<(String, u64)> {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = text.lines();
    while let Some(h) = lines.next() {
        let Some(v) = lines.next() else { break };
        if !h.starts_with("TcpExt:") {
            continue;
        }
        return h
            .split_whitespace()
            .zip(v.split_whitespace())
            .skip(1)
            .filter(|(k, _)| k.starts_with("TCPFastOpen"))
            .filter_map(|(k, v)| v.parse().ok().map(|n| (k.to_string(), n)))
            .collect();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};

    #[test]
    fn options_round_trip_through_text() {
        for t in [
            "baseline",
            "nodelay",
            "nodelay+quickack",
            "keepalive=60/10/5",
            "server:sndbuf=64K+client:cc=reno",
            "fastopen+reuseaddr+reuseport+cork",
            "notsent-lowat=16K+busy-poll=50+mss=1400",
            "rcvbuf=1M",
        ] {
            let s: OptSet = t.parse().unwrap();
            assert_eq!(s.to_string(), t);
        }
        let e = "nodelayy".parse::<OptSet>().unwrap_err().to_string();
        assert!(
            e.contains("unknown option 'nodelayy'") && e.contains("quickack"),
            "{e}"
        );
        assert!("sndbuf=0"
            .parse::<OptSet>()
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        assert!("sndbuf"
            .parse::<OptSet>()
            .unwrap_err()
            .to_string()
            .contains("needs a value"));
        assert!("nodelay=1"
            .parse::<OptSet>()
            .unwrap_err()
            .to_string()
            .contains("takes no value"));
        assert!("cc=no/such"
            .parse::<OptSet>()
            .unwrap_err()
            .to_string()
            .contains("not a congestion-control name"));
        assert!("nodelay+nodelay"
            .parse::<OptSet>()
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!("keepalive=1/2".parse::<OptSet>().is_err());
        assert!("nodelay"
            .parse::<OptSet>()
            .unwrap()
            .validate(true)
            .unwrap_err()
            .to_string()
            .contains("TCP only"));
        assert!("sndbuf=64K"
            .parse::<OptSet>()
            .unwrap()
            .validate(true)
            .is_ok());
    }

    fn tcp() -> Socket {
        Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap()
    }

    #[test]
    fn every_option_is_really_set() {
        let set: OptSet = "nodelay+cork+keepalive=60/10/5+fastopen+reuseaddr+reuseport+sndbuf=64K+rcvbuf=128K+cc=reno+notsent-lowat=16K+mss=1400".parse().unwrap();
        let s = tcp();
        set.apply_client(&s).unwrap();
        let back: std::collections::BTreeMap<String, String> =
            set.read_back(&s, Side::Client).into_iter().collect();
        assert_eq!(back["nodelay"], "1");
        assert_eq!(back["cork"], "1");
        assert_eq!(back["keepalive"], "1/60/10/5");
        assert_eq!(back["fastopen"], "1", "TCP_FASTOPEN_CONNECT");
        assert_eq!(back["reuseaddr"], "1");
        assert_eq!(back["reuseport"], "1");
        assert_eq!(
            back["sndbuf"],
            (2 * 65536).to_string(),
            "the kernel doubles SO_SNDBUF"
        );
        assert_eq!(back["rcvbuf"], (2 * 131072).to_string());
        assert_eq!(back["cc"], "reno");
        assert_eq!(back["notsent-lowat"], "16384");
        assert_eq!(back["mss"], "1400");
        // The listener gets the Fast Open queue.
        let l = tcp();
        "fastopen"
            .parse::<OptSet>()
            .unwrap()
            .apply_listener(&l)
            .unwrap();
        assert_eq!(
            read_one(&l, &SockOpt::FastOpen, Side::Server).unwrap(),
            "16"
        );
        // Sides: a server-only option is not applied on the client.
        let c = tcp();
        "server:nodelay"
            .parse::<OptSet>()
            .unwrap()
            .apply_client(&c)
            .unwrap();
        assert_eq!(read_one(&c, &SockOpt::NoDelay, Side::Client).unwrap(), "0");
        let q: OptSet = "quickack".parse().unwrap();
        assert!(q.rearm_quickack(Side::Client) && q.rearm_quickack(Side::Server));
        assert!(!"server:quickack"
            .parse::<OptSet>()
            .unwrap()
            .rearm_quickack(Side::Client));
    }

    #[test]
    fn in_effect_compares_the_read_back_with_what_was_asked() {
        let o = |t: &str| t.parse::<SockOpt>().unwrap();
        assert!(o("nodelay").in_effect("1") && !o("nodelay").in_effect("0"));
        assert!(o("sndbuf=64K").in_effect("131072"), "Linux doubles it");
        assert!(!o("sndbuf=64M").in_effect("8388608"), "capped by wmem_max");
        assert!(!o("rcvbuf=1").in_effect("2304"), "raised to the minimum");
        assert!(o("cc=reno").in_effect("reno") && !o("cc=bbr").in_effect("cubic"));
        assert!(o("mss=1400").in_effect("1388"), "less the timestamp option");
        assert!(!o("mss=1400").in_effect("65483"));
        assert!(o("keepalive=60/10/5").in_effect("1/60/10/5"));
        assert!(!o("keepalive=60/10/5").in_effect("1/7200/75/9"));
        assert!(
            o("keepalive").in_effect("1/7200/75/9") && !o("keepalive").in_effect("0/7200/75/9")
        );
        assert!(o("notsent-lowat=16K").in_effect("16384"));
        assert!(!o("busy-poll=50").in_effect("error: Operation not permitted"));
        let set: OptSet = "nodelay+client:sndbuf=64K+server:cc=reno".parse().unwrap();
        let back = vec![
            ("nodelay".to_string(), "1".to_string()),
            ("sndbuf".to_string(), "4608".to_string()),
        ];
        assert_eq!(
            set.off(Side::Client, &back),
            vec!["sndbuf=64K: kernel reports 4608".to_string()]
        );
        assert_eq!(
            set.off(Side::Server, &back),
            vec!["cc=reno: not reported".to_string()]
        );
    }

    #[test]
    fn a_connected_socket_takes_every_option_but_the_listeners() {
        let set: OptSet = "server:nodelay+server:sndbuf=64K+server:mss=1400+server:cc=reno"
            .parse()
            .unwrap();
        let s = tcp();
        set.apply_connected(&s, Side::Server).unwrap();
        assert!(set
            .off(Side::Server, &set.read_back(&s, Side::Server))
            .is_empty());
        assert!(set.not_on_connected(Side::Server).is_empty());
        let l: OptSet = "fastopen+client:reuseaddr+server:reuseport"
            .parse()
            .unwrap();
        let names: Vec<&str> = l
            .not_on_connected(Side::Server)
            .iter()
            .map(|o| o.name())
            .collect();
        assert_eq!(names, ["fastopen", "reuseport"]);
        // Skipped, not applied: the socket keeps its default.
        l.apply_connected(&s, Side::Server).unwrap();
        assert_eq!(
            read_one(&s, &SockOpt::ReusePort, Side::Server).unwrap(),
            "0"
        );
    }

    #[test]
    fn a_refused_option_names_the_option_and_the_errno() {
        let e = "cc=nosuchcc"
            .parse::<OptSet>()
            .unwrap()
            .apply_client(&tcp())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cc=nosuchcc refused") && e.contains("os error"),
            "{e}"
        );
    }

    #[test]
    fn fast_open_counters_are_readable() {
        let c = tfo_counters();
        assert!(c.iter().any(|(k, _)| k == "TCPFastOpenActive"), "{c:?}");
    }
}
