//! The live executor: runs cells against real sockets. Each workload runs itself
//! ([`Workload::run`]) against the plan's shared [`Resources`]: server children kept across
//! cells (a sink, echo servers), the emulated link, temporary directories; `finish` releases
//! them and returns their accounting (CPU time from `wait4`) as experiment facts.

use std::path::PathBuf;

use crate::hosts::HostPlan;
use crate::plan::Cell;
use crate::resources::Resources;
use crate::runner::{Executor, Sample};
use crate::series::LiveSink;
use crate::LabError;

/// How long a failed repetition waits to see whether its remote server's session is ending:
/// the client may see a broken pipe before the session's end is seen here.
const LOST_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs cells for real.
#[derive(Debug)]
pub struct LiveExecutor {
    res: Resources,
}

impl LiveExecutor {
    /// `exe` is the socklab binary to re-exec for servers (normally `std::env::current_exe()`).
    pub fn new(exe: PathBuf) -> LiveExecutor {
        LiveExecutor {
            res: Resources::new(exe),
        }
    }

    /// A live executor whose roles run on the hosts of `hosts`.
    pub fn with_hosts(exe: PathBuf, hosts: HostPlan) -> LiveExecutor {
        LiveExecutor {
            res: Resources::with_hosts(exe, hosts),
        }
    }
}

impl LiveExecutor {
    /// Records the emulated link's packets into a pcapng file ([`Resources::set_capture`]).
    pub fn set_capture(&mut self, cfg: socklab_link::capture::CaptureConfig) {
        self.res.set_capture(cfg);
    }
}

impl Executor for LiveExecutor {
    fn run(&mut self, cell: &Cell, stop: &dyn Fn() -> bool) -> Result<Sample, LabError> {
        self.run_rep(cell, 0, false, stop)
    }

    /// Runs the repetition; one that used the emulated link records the seed its models ran
    /// from (`link_run_seed` in the sample's facts).
    fn run_rep(
        &mut self,
        cell: &Cell,
        rep: usize,
        warmup: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        self.res.begin(cell.index, rep, warmup);
        let ran = cell
            .workload
            .run(&mut self.res, &cell.label, stop)
            .and_then(|s| match self.res.lost_server() {
                Some(e) => Err(e),
                None => Ok(s),
            })
            // A repetition that failed while its remote server's session was going down
            // (the client saw the broken pipe first): the lost host is the reason.
            .map_err(|e| match e {
                LabError::Run { .. } => self.res.lost_server_within(LOST_GRACE).unwrap_or(e),
                e => e,
            });
        let mut s = match ran {
            Ok(s) => s,
            // A host that cannot be reached, is lost or cannot run the role fails this
            // repetition (stored with the reason); the next one tries the host again.
            Err(LabError::Host { host, reason }) => {
                return Err(LabError::run(
                    &cell.label,
                    socklab_net::NetError::Invalid(format!("host {host}: {reason}")),
                ))
            }
            Err(e) => return Err(e),
        };
        if let Some(roles) = self.res.host_roles() {
            if !s.extra.is_object() {
                s.extra = serde_json::json!({});
            }
            s.extra["hosts"] = roles;
        }
        if let Some(seed) = self.res.take_run_seed() {
            if !s.extra.is_object() {
                s.extra = serde_json::json!({});
            }
            s.extra["link_run_seed"] = seed.into();
        }
        if let Some(why) = self.res.take_invalid_reason() {
            if !s.extra.is_object() {
                s.extra = serde_json::json!({});
            }
            s.extra["invalid_reason"] = why.into();
        }
        Ok(s)
    }

    fn set_live(&mut self, live: Option<LiveSink>) {
        self.res.set_live(live);
    }

    fn finish(&mut self) -> Result<Vec<(String, String)>, LabError> {
        self.res.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::plan::{Group, Order, Plan};

    /// The executor dispatches a cell to its workload and releases the resources at the end
    /// (memcpy: no socket, no child).
    #[test]
    fn a_cell_runs_its_workload_and_finish_releases_the_resources() {
        let g = Group::new(
            "memcpy",
            Params::new().with("size", "64K").with("bytes", "1M"),
        );
        let plan = Plan::build("t", "", &[g], 1, 0, Order::Interleaved, "").unwrap();
        let mut e = LiveExecutor::new(PathBuf::from("/nonexistent"));
        let s = e.run(&plan.cells[0], &|| false).unwrap();
        assert_eq!(s.get("bytes"), Some((1u64 << 20) as f64));
        assert_eq!(s.get("writes"), Some(16.0));
        assert!(s.get("gbps").is_some_and(|g| g > 0.0));
        assert!(
            e.finish().unwrap().is_empty(),
            "no server, no link: no facts"
        );
    }
}
