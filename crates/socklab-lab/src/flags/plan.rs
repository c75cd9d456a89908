//! The plan flags every measuring command shares (`reps`, `warmup`, `order` and its seed,
//! `name`) as one value, and the plan of a command's groups built from them.

use crate::plan::{Group, Plan};
use crate::LabError;

use super::parse_order;

/// A command's plan flags, and its command line (stored with the experiment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFlags {
    /// Measured repetitions per cell.
    pub reps: usize,
    /// Warm-up repetitions per cell.
    pub warmup: usize,
    /// interleaved, random or sequential.
    pub order: String,
    /// The seed of `order` random.
    pub seed: u64,
    /// The experiment's name.
    pub name: String,
    /// The command line, as stored.
    pub command: String,
}

impl PlanFlags {
    /// The plan of `groups`: `order` checked, then the plan built from these flags.
    pub fn plan(&self, groups: &[Group]) -> Result<Plan, LabError> {
        let order = parse_order(&self.order, self.seed)?;
        Plan::build(
            &self.name,
            "",
            groups,
            self.reps,
            self.warmup,
            order,
            &self.command,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::plan::Order;

    fn flags(order: &str) -> PlanFlags {
        PlanFlags {
            reps: 2,
            warmup: 0,
            order: order.into(),
            seed: 7,
            name: "x".into(),
            command: "socklab rrul".into(),
        }
    }

    #[test]
    fn the_flags_build_the_plan_of_the_groups() {
        let g = Group::new("rrul", Params::new());
        let p = flags("random").plan(std::slice::from_ref(&g)).unwrap();
        assert_eq!(p.reps, 2);
        assert_eq!(p.warmup, 0);
        assert_eq!(p.order, Order::Random(7));
        assert!(flags("sideways").plan(&[g]).is_err());
    }
}
