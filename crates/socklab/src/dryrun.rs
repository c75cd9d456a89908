//! `--dry-run`: prints what a command would run (the text is the lab's, see
//! [`socklab_lab::dryrun`]), its keys as this command's flags.

use socklab_lab::plan::Plan;

use crate::failure::{out, words, Failure};

pub(crate) use socklab_lab::dryrun::keeping_invalid;

/// Prints a dry run's plan: its cells, runs and time.
pub fn print_plan(plan: &Plan) -> Result<(), Failure> {
    out(&words(&socklab_lab::dryrun::plan_text(plan)))
}

/// Prints a dry run's line for a command without a plan (a server, a query).
pub fn print_checked(what: &str) -> Result<(), Failure> {
    out(&socklab_lab::dryrun::checked_text(what))
}
