//! The live executor: runs cells against real sockets. Each workload runs itself
//! ([`Workload::run`]) against the plan's shared [`Resources`]: server children kept across
//! cells (a sink, echo servers), the emulated link, temporary directories; `finish` releases
//! them and returns their accounting (CPU time from `wait4`) as experiment facts.

use std::path::PathBuf;

use crate::plan::Cell;
use crate::resources::Resources;
use crate::runner::{Executor, Sample};
use crate::LabError;

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
}

impl Executor for LiveExecutor {
    fn run(&mut self, cell: &Cell, stop: &dyn Fn() -> bool) -> Result<Sample, LabError> {
        cell.workload.run(&mut self.res, &cell.label, stop)
    }

    fn finish(&mut self) -> Result<Vec<(String, String)>, LabError> {
        self.res.finish()
    }
}
