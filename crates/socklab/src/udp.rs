//! `socklab sink --udp` (the UDP bulk receiver) and `socklab bulk --udp` (a plan of the `udp`
//! workload): calls and printing; the checks are in `socklab_lab::workload::udp::command` and
//! `socklab_lab::roles::udp_sink`.

use std::net::SocketAddr;

use socklab_lab::plan::Plan;
use socklab_lab::roles::{self, Say};
use socklab_lab::workload::udp::command::{self, TcpFlags};

use crate::cli::{BulkArgs, SinkArgs};
use crate::dryrun;
use crate::failure::Failure;
use socklab_lab::roles::checks::parse_bind;
use socklab_lab::session::order_seed;

/// `socklab sink --udp`.
pub fn sink(a: SinkArgs, dry: bool) -> Result<(), Failure> {
    let ip = parse_bind(&a.bind)?;
    let cfg = roles::udp_sink::config(SocketAddr::new(ip, a.port), &a.rcvbuf, &a.interval)?;
    if dry {
        let line = roles::udp_sink::dry_line(&cfg);
        return dryrun::print_checked(&format!("socklab sink --udp {line}"));
    }
    Ok(roles::udp_sink::run(cfg, Say::new(a.announce, a.quiet))?)
}

/// The flags of UDP bulk, when given without `--udp` (keys outside the TCP mode).
pub fn check_tcp(a: &BulkArgs) -> Result<(), Failure> {
    Ok(command::check_tcp(&a.keys.given)?)
}

/// `socklab bulk --udp`: a plan of the `udp` workload.
pub fn plan(a: &BulkArgs) -> Result<Plan, Failure> {
    let tcp = TcpFlags {
        cross: a.cross,
        reference: a.reference,
    };
    let mut group = command::bulk_group(&a.keys.given, &a.sweep, tcp)?;
    a.link.add_to(&mut group);
    Ok(a.keys.plan_flags(order_seed(None)?).plan(&[group])?)
}
