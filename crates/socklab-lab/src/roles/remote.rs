//! What a role started on another host does: `--until-eof` (stop when the controller closes
//! stdin, or the SSH session carrying it dies), its rusage as its last line, and the two
//! roles only remote hosts run: one repetition of a workload's client side (`hosts rep`) and
//! a load generator's share (`hosts generate`).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use socklab_net::childline::{own_usage, ChildLine};
use socklab_net::load::LoadConfig;
use socklab_sys::process::{install_interrupt_flag, interrupt_flag, interrupted, kill, Signal};

use super::{out, RoleError};
use crate::hosts::client::{to_json, SAMPLE};
use crate::model::params::Params;
use crate::resources::Resources;
use crate::workload::Workload;
use crate::LabError;

/// `--until-eof`: when stdin ends (the controller closed it, or the SSH session carrying it
/// died), the role stops as on SIGTERM; a role that does not stop is signalled again (the
/// third signal exits at once) and finally killed. The watching is done by a forked process,
/// not a thread, so the role stays single-threaded (the fork and prefork designs fork their
/// workers later, which a second thread would forbid); it dies with the role.
pub fn stop_at_end_of_stdin() {
    use socklab_sys::procs::{die_with_parent, exit_now, fork, Forked};
    let role = std::process::id();
    match fork() {
        Ok(Forked::Parent(_)) => {}
        Ok(Forked::Child) => {
            if die_with_parent(role).is_err() {
                exit_now(0);
            }
            watch_stdin(role);
            // Killed with the role (PR_SET_PDEATHSIG); never exits before it.
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        Err(_) => {
            let spawned = std::thread::Builder::new()
                .name("until-eof".into())
                .spawn(move || watch_stdin(role));
            if let Err(e) = spawned {
                eprintln!("socklab: warning: cannot watch stdin ({e}): this role will not stop with its SSH session");
            }
        }
    }
}

/// Reads stdin to its end, then signals `role`: SIGTERM, again, a third time (which exits at
/// once), then SIGKILL.
fn watch_stdin(role: u32) {
    let mut buf = [0u8; 512];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    for wait in [5, 2, 2] {
        let _ = kill(role, Signal::Term);
        std::thread::sleep(Duration::from_secs(wait));
    }
    let _ = kill(role, Signal::Kill);
}

/// The role's last line for its controller: its rusage, itself and reaped children.
pub fn report_usage() {
    let line = ChildLine::Usage(own_usage());
    let _ = out(&format!("{line}\n"));
}

/// The client role (`hosts rep`): runs one repetition of `kind` with `params` (its `to` an
/// address: the client side only) on this host until its end or SIGINT/SIGTERM, and prints
/// its sample (`SAMPLE {json}`). `exe` is this socklab binary, for the servers it starts.
pub fn rep(exe: PathBuf, kind: &str, params: &Params, label: &str) -> Result<(), LabError> {
    install_interrupt_flag().map_err(|e| LabError::Child(e.to_string()))?;
    serve_rep(exe, kind, params, label, &interrupted)
}

/// [`rep`] with its own stop.
pub fn serve_rep(
    exe: PathBuf,
    kind: &str,
    params: &Params,
    label: &str,
    stop: &dyn Fn() -> bool,
) -> Result<(), LabError> {
    let w = Workload::from_params(kind, params)?;
    let mut res = Resources::new(exe);
    let s = w.run(&mut res, label, stop);
    let _ = res.finish();
    let line = to_json(&s?).to_string();
    let mut o = std::io::stdout().lock();
    writeln!(o, "{SAMPLE}{line}")
        .and_then(|()| o.flush())
        .map_err(|e| LabError::Child(format!("cannot print the sample: {e}")))
}

/// The generator role (`hosts generate`): waits for `start_at_ns` (this host's clock), runs
/// `cfg` until its bound or SIGINT/SIGTERM, and prints its report (`LOAD {json}`).
pub fn generate(cfg: &LoadConfig, start_at_ns: i128) -> Result<(), RoleError> {
    install_interrupt_flag()?;
    crate::hosts::generators::serve_generator(cfg, start_at_ns, interrupt_flag())
        .map_err(RoleError::Run)
}
