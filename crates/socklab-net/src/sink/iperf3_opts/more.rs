//! The options of an iperf3 client the sink puts in effect on its streams beside `window`
//! and `congestion` (issue 27 part 1): `nodelay` (`-N`, `TCP_NODELAY`), `TOS` (`-S`,
//! `IP_TOS`, or `IPV6_TCLASS` on an IPv6 stream), `dont_fragment` (`IP_MTU_DISCOVER` =
//! `IP_PMTUDISC_DO`), and on the sink's sending streams the pacing rate of `bandwidth` (`-b`)
//! and `fqrate` (`--fq-rate`) as `SO_MAX_PACING_RATE`. Each is read back from the kernel; a
//! value that did not take is refused with iperf3's `IEUNIMP`, naming the key.

use std::os::fd::AsFd;

use socket2::SockRef;
use socklab_sys::sockopt::{get, max_pacing_rate, set, set_max_pacing_rate, IntOpt};

use crate::iperf3::options::{tcp_pacing, ServerError};
use crate::iperf3::proto::Params;
use crate::iperf3::refusal::IE_UNIMP;

/// `IP_PMTUDISC_DO` / `IPV6_PMTUDISC_DO`: the DF bit set, the path MTU probed, no fragments.
const PMTUDISC_DO: i32 = 2;

fn refused(key: &str, what: &str, e: std::io::Error) -> ServerError {
    ServerError {
        code: IE_UNIMP,
        errno: 0,
        why: format!("iperf3 `{key}`: setting {what} on the sink's stream failed: {e}"),
    }
}

/// Whether the stream speaks IPv4 on the wire (an IPv4 socket, or an IPv6 one with a
/// v4-mapped address): its options are then `IP_…` ones.
fn ipv4(sock: &SockRef<'_>) -> bool {
    match sock.local_addr().ok().and_then(|a| a.as_socket()) {
        Some(std::net::SocketAddr::V6(a)) => a.ip().to_ipv4_mapped().is_some(),
        _ => true,
    }
}

/// Sets `nodelay`, `TOS` and `dont_fragment` where asked and reads each back: one line per
/// option for the sink's output, e.g. `TCP_NODELAY 1 (nodelay asked)`.
pub(super) fn apply(sock: &SockRef<'_>, p: &Params) -> Result<Vec<String>, ServerError> {
    let fd = sock.as_fd();
    let mut out = Vec::new();
    let v4 = ipv4(sock);
    // `asked`: the client's value, as it sent it; `val`: what is set.
    let mut one = |key: &str, asked: u64, opt: IntOpt, name: &str, val: i32, want: Option<i32>| {
        set(fd, opt, val).map_err(|e| refused(key, name, e))?;
        let got = get(fd, opt).map_err(|e| refused(key, name, e))?;
        if want.is_some_and(|w| w != got) {
            return Err(ServerError {
                code: IE_UNIMP,
                errno: 0,
                why: format!("iperf3 `{key}` {val}: the kernel runs the stream with {name} {got}"),
            });
        }
        out.push(format!("{name} {got} ({key} {asked} asked)"));
        Ok(())
    };
    if p.nodelay {
        one("nodelay", 1, IntOpt::TcpNoDelay, "TCP_NODELAY", 1, Some(1))?;
    }
    if let Some(tos) = p.tos {
        // TCP keeps the two ECN bits of `IP_TOS` for itself: what is read back is shown.
        let (opt, name) = if v4 {
            (IntOpt::IpTos, "IP_TOS")
        } else {
            (IntOpt::Ipv6TClass, "IPV6_TCLASS")
        };
        one("TOS", tos, opt, name, tos as i32, None)?;
    }
    if p.dont_fragment.is_some_and(|d| d != 0) {
        let (opt, name) = if v4 {
            (IntOpt::IpMtuDiscover, "IP_MTU_DISCOVER")
        } else {
            (IntOpt::Ipv6MtuDiscover, "IPV6_MTU_DISCOVER")
        };
        one(
            "dont_fragment",
            1,
            opt,
            name,
            PMTUDISC_DO,
            Some(PMTUDISC_DO),
        )?;
    }
    Ok(out)
}

/// Lifts a stream's pacing when the sink is done sending on it: what is still queued then
/// leaves at once, so a tiny rate a client asked for never keeps a closed stream's buffer in
/// the kernel for days (the queue of an orphaned socket drains at the pacing rate).
pub(crate) fn unpace(sock: &SockRef<'_>) {
    let _ = set_max_pacing_rate(sock.as_fd(), u64::MAX);
}

/// On a stream the sink sends on: `SO_MAX_PACING_RATE` at the rate of `bandwidth` and
/// `fqrate` (the lower), read back; the line for the sink's output, `None` without a rate.
pub(crate) fn pace(sock: &SockRef<'_>, p: &Params) -> Result<Option<String>, ServerError> {
    let Some(rate) = tcp_pacing(p) else {
        return Ok(None);
    };
    let fd = sock.as_fd();
    let key = if p.fqrate.is_some_and(|f| f > 0 && f / 8 == rate) {
        "fqrate"
    } else {
        "bandwidth"
    };
    set_max_pacing_rate(fd, rate).map_err(|e| refused(key, "SO_MAX_PACING_RATE", e))?;
    let got = max_pacing_rate(fd).map_err(|e| refused(key, "SO_MAX_PACING_RATE", e))?;
    if got != rate {
        return Err(ServerError {
            code: IE_UNIMP,
            errno: 0,
            why: format!(
                "iperf3 `{key}`: SO_MAX_PACING_RATE {rate} bytes/s asked, the kernel runs {got}"
            ),
        });
    }
    Ok(Some(format!(
        "SO_MAX_PACING_RATE {got} bytes/s on each sending stream ({key} {} bit/s asked)",
        rate * 8
    )))
}
