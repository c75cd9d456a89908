//! TIME_WAIT and `SO_REUSEADDR`, measured (`socklab lab --suite states`).
//!
//! A listener on a loopback port accepts `connections` clients; after one byte each way, the
//! `closer` side closes first (the active close). socklab then counts the sockets per TCP state
//! on each side of that port (from `/proc/net/tcp` and `/proc/net/tcp6`), closes the listener
//! and immediately binds a new one to the same port, with or without `SO_REUSEADDR`: without
//! it, the server's TIME_WAIT sockets make the bind fail with `EADDRINUSE`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::NetError;

/// Which side closes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closer {
    /// The server closes first: TIME_WAIT lands on the server's port.
    Server,
    /// The client closes first (Stevens' protocol): TIME_WAIT lands on the clients.
    Client,
}

impl std::str::FromStr for Closer {
    type Err = crate::ParseNameError;
    fn from_str(s: &str) -> Result<Self, crate::ParseNameError> {
        match s.trim() {
            "server" => Ok(Closer::Server),
            "client" => Ok(Closer::Client),
            _ => Err(crate::ParseNameError::Closer {
                value: s.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for Closer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Closer::Server => "server",
            Closer::Client => "client",
        })
    }
}

/// One run's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatesConfig {
    /// Connections to open and close.
    pub connections: usize,
    /// Who closes first.
    pub closer: Closer,
    /// `SO_REUSEADDR` on the listeners.
    pub reuseaddr: bool,
}

/// What a run saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatesResult {
    /// Sockets per state on the server's side while every connection is open.
    pub during_server: BTreeMap<String, u64>,
    /// Sockets per state on the client side while every connection is open.
    pub during_client: BTreeMap<String, u64>,
    /// Sockets per state whose local port is the server's port (the server side).
    pub server_states: BTreeMap<String, u64>,
    /// Sockets per state whose remote port is the server's port (the client side).
    pub client_states: BTreeMap<String, u64>,
    /// Whether re-binding the port right after succeeded.
    pub rebind_ok: bool,
    /// The errno of a failed re-bind.
    pub rebind_errno: Option<i32>,
}

/// TCP state names by the kernel's number (`include/net/tcp_states.h`).
pub fn state_name(n: u8) -> &'static str {
    match n {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        _ => "UNKNOWN",
    }
}

/// One socket of `/proc/net/tcp{,6}`: local port, remote port, state.
pub fn parse_proc_tcp(text: &str) -> Vec<(u16, u16, u8)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let local = f.nth(1)?;
            let remote = f.next()?;
            let state = f.next()?;
            let port = |a: &str| u16::from_str_radix(a.rsplit(':').next()?, 16).ok();
            Some((
                port(local)?,
                port(remote)?,
                u8::from_str_radix(state, 16).ok()?,
            ))
        })
        .collect()
}

/// Counts the sockets between `port` and the client ports `clients`, split into the server
/// side (local port `port`) and the client side (remote port `port`). Only the demonstration's
/// own connections count: another program's socket that happens to use the same port number
/// (a TIME_WAIT left by an earlier connection from that ephemeral port, say) does not.
pub fn count_states(port: u16, clients: &[u16]) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let mut sockets = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        sockets.extend(parse_proc_tcp(
            &std::fs::read_to_string(f).unwrap_or_default(),
        ));
    }
    tally(&sockets, port, clients)
}

/// [`count_states`] over parsed `(local port, remote port, state)` entries.
fn tally(
    sockets: &[(u16, u16, u8)],
    port: u16,
    clients: &[u16],
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let mut server = BTreeMap::new();
    let mut client = BTreeMap::new();
    for &(local, remote, state) in sockets {
        // Remote port 0: the listener itself.
        if local == port && (remote == 0 || clients.contains(&remote)) {
            *server.entry(state_name(state).to_string()).or_insert(0) += 1;
        } else if remote == port && clients.contains(&local) {
            *client.entry(state_name(state).to_string()).or_insert(0) += 1;
        }
    }
    (server, client)
}

fn listener(port: u16, reuseaddr: bool) -> std::io::Result<TcpListener> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(reuseaddr)?;
    s.bind(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Runs the demonstration once.
pub fn run(cfg: &StatesConfig) -> Result<StatesResult, NetError> {
    if cfg.connections == 0 || cfg.connections > 10_000 {
        return Err(NetError::Invalid(format!(
            "connections = {}: use 1 to 10000",
            cfg.connections
        )));
    }
    fn io(what: &'static str) -> impl Fn(std::io::Error) -> NetError {
        move |e| NetError::io(what, e)
    }
    let l = listener(0, cfg.reuseaddr).map_err(io("listen"))?;
    let port = l.local_addr().map_err(io("getsockname"))?.port();
    let mut pairs = Vec::with_capacity(cfg.connections);
    let mut clients = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections {
        let c = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(5),
        )
        .map_err(io("connect"))?;
        clients.push(c.local_addr().map_err(io("getsockname"))?.port());
        let (s, _) = l.accept().map_err(io("accept"))?;
        pairs.push((c, s));
    }
    let mut b = [0u8; 1];
    for (c, s) in &mut pairs {
        c.write_all(b"x").map_err(io("write"))?;
        s.read_exact(&mut b).map_err(io("read"))?;
        s.write_all(b"y").map_err(io("write"))?;
        c.read_exact(&mut b).map_err(io("read"))?;
    }
    let (during_server, during_client) = count_states(port, &clients);
    // The active close, then the passive side sees EOF and closes too.
    for (c, s) in pairs {
        let (first, mut second) = match cfg.closer {
            Closer::Server => (s, c),
            Closer::Client => (c, s),
        };
        drop(first);
        let _ = second.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = second.read(&mut b); // EOF
        drop(second);
    }
    drop(l);
    // Let the last FIN/ACKs cross the loopback before counting.
    std::thread::sleep(Duration::from_millis(50));
    let (server_states, client_states) = count_states(port, &clients);
    let (rebind_ok, rebind_errno) = match listener(port, cfg.reuseaddr) {
        Ok(_) => (true, None),
        Err(e) => (false, e.raw_os_error()),
    };
    Ok(StatesResult {
        during_server,
        during_client,
        server_states,
        client_states,
        rebind_ok,
        rebind_errno,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_lines_parse() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1B58 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n   1: 0100007F:1B58 0100007F:D3A2 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0\n";
        assert_eq!(parse_proc_tcp(text), vec![(7000, 0, 10), (7000, 54178, 6)]);
        assert_eq!(state_name(6), "TIME_WAIT");
    }

    #[test]
    fn only_the_demonstrations_own_connections_are_counted() {
        // Port 7000 with clients 40001 and 40002; a TIME_WAIT left on local port 7000 by an
        // earlier connection to 80 (another program's), and a socket of another client.
        let sockets = [
            (7000, 40001, 6),
            (40001, 7000, 2),
            (7000, 40002, 6),
            (7000, 80, 6),
            (7000, 0, 10),
            (7000, 50000, 1),
            (50000, 7000, 1),
        ];
        let (server, client) = tally(&sockets, 7000, &[40001, 40002]);
        assert_eq!(server.get("TIME_WAIT"), Some(&2), "{server:?}");
        assert_eq!(server.get("ESTABLISHED"), None, "{server:?}");
        assert_eq!(server.get("LISTEN"), Some(&1), "{server:?}");
        assert_eq!(client.get("SYN_SENT"), Some(&1), "{client:?}");
        assert_eq!(client.len(), 1, "{client:?}");
    }

    #[test]
    fn time_wait_lands_on_the_side_that_closes_first_and_blocks_rebind_without_reuseaddr() {
        let r = run(&StatesConfig {
            connections: 5,
            closer: Closer::Server,
            reuseaddr: false,
        })
        .unwrap();
        assert_eq!(r.during_server.get("ESTABLISHED"), Some(&5), "{r:?}");
        assert_eq!(r.during_server.get("LISTEN"), Some(&1), "{r:?}");
        assert_eq!(r.during_client.get("ESTABLISHED"), Some(&5), "{r:?}");
        assert_eq!(r.server_states.get("TIME_WAIT"), Some(&5), "{r:?}");
        assert!(!r.rebind_ok);
        assert_eq!(r.rebind_errno, Some(socklab_sys::errno::EADDRINUSE));
        let r = run(&StatesConfig {
            connections: 5,
            closer: Closer::Server,
            reuseaddr: true,
        })
        .unwrap();
        assert_eq!(r.server_states.get("TIME_WAIT"), Some(&5), "{r:?}");
        assert!(r.rebind_ok, "{r:?}");
        let r = run(&StatesConfig {
            connections: 5,
            closer: Closer::Client,
            reuseaddr: false,
        })
        .unwrap();
        assert_eq!(r.client_states.get("TIME_WAIT"), Some(&5), "{r:?}");
        assert_eq!(r.server_states.get("TIME_WAIT"), None, "{r:?}");
        assert!(r.rebind_ok, "{r:?}");
    }
}
