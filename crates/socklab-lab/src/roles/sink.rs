//! The `sink` role (TCP): the bulk receiver's main loop.

use socklab_net::sink::{Sink, SinkConfig};
use socklab_sys::process::interrupted;
use socklab_units::format_size;

use super::{print_server_cpu, server_started, RoleError, Say};

/// Listens as `cfg` says and serves until SIGINT/SIGTERM; then (unless quiet) the CPU time
/// and the connections served.
pub fn run(cfg: SinkConfig, say: Say) -> Result<(), RoleError> {
    let read_size = cfg.read_size;
    let mut sink = Sink::bind(cfg)?;
    let addr = sink.local_addr()?;
    server_started(addr, say.announce)?;
    if !say.quiet {
        eprintln!(
            "socklab sink listening on {addr} (raw clients read {} bytes at a time; Ctrl-C stops)",
            format_size(read_size as u64)
        );
    }
    let quiet = say.quiet;
    let mut served = 0u64;
    sink.serve(&interrupted, &mut |r| {
        served += 1;
        if !quiet {
            eprintln!("{}", r.line());
        }
    })
    .map_err(|e| RoleError::Run(e.to_string()))?;
    if !quiet {
        print_server_cpu();
        eprintln!("connections served = {served}");
    }
    Ok(())
}
