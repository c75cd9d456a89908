//! The plans of the one-off measuring commands: the plan flags (name, repetitions, warm-up,
//! order) and bulk's own rules (nbufs and bufsize paired, the reference rows); where the
//! client runs, the CPUs it may use.

use socklab_net::cpus::CpuList;
use socklab_units::format_size;

use crate::flags::{self, Given, PlanFlags, Rules};
use crate::model::params::Params;
use crate::plan::{Axis, Group, Plan};
use crate::workload::Workload;
use crate::LabError;

/// The seed of a random order: the command's `seed` (bulk's is the payload's too), else 1.
pub fn order_seed(text: Option<&str>) -> Result<u64, LabError> {
    match text {
        None => Ok(1),
        Some(t) => t.parse().map_err(|_| {
            LabError::Plan(format!("`seed` '{t}': give a whole number, e.g. `seed` 1"))
        }),
    }
}

/// `socklab bulk`'s group (TCP): the keys given, `nbufs` and `bufsize` lists paired unless
/// `cross`, the sweeps.
pub fn bulk_group(given: &[Given], sweeps: &[String], cross: bool) -> Result<Group, LabError> {
    let rules = Rules {
        sweeps,
        pair: Some(("nbufs", "bufsize")),
        cross,
    };
    flags::group("bulk", given, &rules)
}

/// `socklab bulk`'s plan (TCP) of `group`; with `reference`, pipe and memcpy rows at the same
/// transfer sizes.
pub fn bulk_plan(group: Group, head: &PlanFlags, reference: bool) -> Result<Plan, LabError> {
    let mut groups = vec![group];
    let plan = head.plan(&groups)?;
    if !reference {
        return Ok(plan);
    }
    let mut sizes: Vec<u64> = plan
        .cells
        .iter()
        .filter_map(|c| match &c.workload {
            Workload::Bulk(b) => Some((b.cfg.nbufs * b.cfg.bufsize) as u64),
            _ => None,
        })
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let sizes: Vec<String> = sizes.into_iter().map(format_size).collect();
    for kind in ["pipe", "memcpy"] {
        groups.push(
            Group::new(kind, Params::new().with("bytes", "512M"))
                .axis(Axis::single("size", sizes.iter().cloned())),
        );
    }
    head.plan(&groups)
}

/// `key` (`affinity`) names CPUs this process may run on: checked where the client runs.
pub fn check_local_cpus(key: &str, list: Option<&str>) -> Result<(), LabError> {
    let Some(text) = list else {
        return Ok(());
    };
    let list: CpuList = text
        .parse()
        .map_err(|e: String| LabError::Plan(format!("`{key}` {e}")))?;
    let allowed = socklab_sys::sched::thread_affinity().unwrap_or_default();
    if let Some(bad) = list.cpus().iter().find(|c| !allowed.contains(c)) {
        return Err(LabError::Plan(format!(
            "`{key}` {text}: CPU {bad} is not one this process may run on (here: {}); choose among those",
            CpuList::from_vec(allowed)
        )));
    }
    Ok(())
}
