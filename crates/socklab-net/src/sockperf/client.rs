//! `pingpong --to sockperf://HOST:PORT`: socklab's ping-pong client speaking sockperf, to time
//! an unmodified `sockperf sr`. Every message is `size` bytes with sockperf's header (sequence
//! number from 1, client and pong-request flags); the reply is the server's answer, checked
//! by [`wire::check_reply`]. TCP: one connection, one message in flight. UDP: a connected
//! socket; an unanswered message is sent again after `timeout`, up to `retries` times, then
//! counted lost; an answer to an earlier message is counted late and discarded.

use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use socklab_sys::ioerr::is_timeout;
use socklab_units::format_duration;

use super::wire::{self, Header, HEADER_LEN, MAX_TCP_MESSAGE, MAX_UDP_MESSAGE};
use crate::aligned::AlignedBuf;
use crate::pingpong::{record, PingConfig, PingResult, Reply};
use crate::sockopt::Side;
use crate::NetError;

/// Stop is polled before every 64th round trip.
const STOP_EVERY: u64 = 64;

/// Checks `cfg` ([`PingConfig::validate`]) and what sockperf framing adds to it.
pub fn validate(cfg: &PingConfig) -> Result<(), NetError> {
    cfg.validate()?;
    let max = if cfg.udp {
        MAX_UDP_MESSAGE
    } else {
        MAX_TCP_MESSAGE
    };
    let bad = |m: String| Err(NetError::Invalid(m));
    if !(HEADER_LEN..=max).contains(&cfg.size) {
        return bad(format!(
            "`size` {} does not fit sockperf: its messages are {HEADER_LEN} to {max} bytes over {}",
            cfg.size,
            if cfg.udp { "UDP" } else { "TCP" }
        ));
    }
    if cfg.reply != Reply::Echo {
        return bad(format!(
            "`reply` {} with sockperf://: the reply is sockperf's answer; drop `reply`",
            cfg.reply
        ));
    }
    if cfg.new_connection_per_message {
        return bad("`new_connection` with sockperf://: sockperf keeps one connection; drop `new_connection`".into());
    }
    Ok(())
}

/// Runs one repetition against the sockperf server at `cfg.to`.
pub fn run(cfg: &PingConfig, stop: &dyn Fn() -> bool) -> Result<PingResult, NetError> {
    validate(cfg)?;
    let mut msg = AlignedBuf::zeroed(cfg.size);
    let mut reply = AlignedBuf::zeroed(cfg.size + 1);
    let (msg, reply) = (msg.as_mut_slice(), reply.as_mut_slice());
    let domain = Domain::for_address(cfg.to);
    let (ty, proto) = if cfg.udp {
        (Type::DGRAM, Protocol::UDP)
    } else {
        (Type::STREAM, Protocol::TCP)
    };
    let sock = Socket::new(domain, ty, Some(proto)).map_err(|e| NetError::io("socket", e))?;
    cfg.opts.apply_client(&sock)?;
    let mut res = PingResult::new();
    let t = Instant::now();
    let connected = if cfg.udp {
        sock.connect(&cfg.to.into())
    } else {
        sock.connect_timeout(&cfg.to.into(), cfg.connect_timeout)
    };
    connected.map_err(|e| {
        NetError::io(
            format!(
                "cannot connect to {} (is `sockperf sr` running there?)",
                cfg.to
            ),
            e,
        )
    })?;
    if !cfg.udp {
        record(&mut res.connect_ns, t.elapsed());
        res.connects = 1;
    }
    res.effective = cfg.opts.read_back(&sock, Side::Client);
    sock.set_read_timeout(Some(cfg.timeout))
        .map_err(|e| NetError::io("SO_RCVTIMEO", e))?;
    let t0 = Instant::now();
    if cfg.udp {
        udp(cfg, stop, &sock.into(), msg, reply, &mut res)?;
    } else {
        tcp(
            cfg,
            stop,
            &mut sock.into(),
            msg,
            &mut reply[..cfg.size],
            &mut res,
        )?;
    }
    res.total_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    Ok(res)
}

fn protocol(cfg: &PingConfig, i: u64, what: impl std::fmt::Display) -> NetError {
    NetError::Protocol {
        peer: cfg.to.to_string(),
        detail: format!("round trip {} of {}: {what}", i + 1, cfg.count),
    }
}

fn tcp(
    cfg: &PingConfig,
    stop: &dyn Fn() -> bool,
    sock: &mut TcpStream,
    msg: &mut [u8],
    reply: &mut [u8],
    res: &mut PingResult,
) -> Result<(), NetError> {
    for i in 0..cfg.count {
        if i % STOP_EVERY == 0 && stop() {
            return Err(NetError::Interrupted);
        }
        wire::stamp_client(msg, i + 1);
        let t = Instant::now();
        let trip = sock.write_all(msg).and_then(|()| sock.read_exact(reply));
        let rtt = t.elapsed();
        let gone = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
            )
        };
        let what = match trip {
            Err(e) if is_timeout(&e) => format!(
                "no answer within the timeout of {} (a slower server needs a longer `timeout`)",
                format_duration(cfg.timeout)
            ),
            Err(e) if gone(&e) => format!(
                "sockperf closed the connection ({e}; a `sockperf sr` without -m takes at most {MAX_UDP_MESSAGE} bytes: start it with -m {})",
                cfg.size
            ),
            Err(e) => {
                let context = format!("round trip {} with {}", i + 1, cfg.to);
                return Err(NetError::io(context, e));
            }
            Ok(()) if rtt > cfg.timeout => format!(
                "the answer came after {}, past the timeout of {}",
                format_duration(rtt),
                format_duration(cfg.timeout)
            ),
            Ok(()) => String::new(),
        };
        if !what.is_empty() {
            return Err(protocol(cfg, i, what));
        }
        wire::check_reply(msg, reply).map_err(|e| protocol(cfg, i, e))?;
        record(&mut res.rtt_ns, rtt);
        res.completed += 1;
    }
    Ok(())
}

fn udp(
    cfg: &PingConfig,
    stop: &dyn Fn() -> bool,
    sock: &UdpSocket,
    msg: &mut [u8],
    reply: &mut [u8],
    res: &mut PingResult,
) -> Result<(), NetError> {
    let set_timeout = |d: Duration| {
        sock.set_read_timeout(Some(d))
            .map_err(|e| NetError::io("SO_RCVTIMEO", e))
    };
    for i in 0..cfg.count {
        if i % STOP_EVERY == 0 && stop() {
            return Err(NetError::Interrupted);
        }
        let seq = i + 1;
        wire::stamp_client(msg, seq);
        let t = Instant::now();
        let mut tries = 0u32;
        let answered = 'tries: loop {
            loop {
                match sock.send(msg) {
                    Ok(_) => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(NetError::io(format!("send to {}", cfg.to), e)),
                }
            }
            // The socket waits `timeout` (set once in `run`); only after a late answer is it
            // shortened to what is left of this try, and then set back: no system call per
            // round trip beyond the send and the receive.
            let deadline = Instant::now() + cfg.timeout;
            let mut shortened = false;
            let got = loop {
                let n = match sock.recv(reply) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if is_timeout(&e) => break None,
                    Err(e) => return Err(NetError::io(format!("receive from {}", cfg.to), e)),
                };
                let now = Instant::now();
                match Header::parse(&reply[..n], MAX_UDP_MESSAGE) {
                    // An answer to an earlier try or message: late, discarded.
                    Ok(h) if h.seq < seq => {
                        res.late += 1;
                        let left = deadline.saturating_duration_since(now);
                        if left.is_zero() {
                            break None;
                        }
                        set_timeout(left)?;
                        shortened = true;
                    }
                    _ => {
                        wire::check_reply(msg, &reply[..n]).map_err(|e| protocol(cfg, i, e))?;
                        break Some(now);
                    }
                }
            };
            if shortened {
                set_timeout(cfg.timeout)?;
            }
            if got.is_some() {
                break 'tries got;
            }
            if tries >= cfg.retries {
                break None;
            }
            tries += 1;
            res.retries_sent += 1;
        };
        match answered {
            Some(at) => {
                record(&mut res.rtt_ns, at.duration_since(t));
                res.completed += 1;
            }
            None => res.lost += 1,
        }
    }
    Ok(())
}
