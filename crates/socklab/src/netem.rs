//! `socklab netem`: emulated links from the command line. The checks and the roles are the
//! lab's (`socklab_lab::roles::netem_args`, `roles::netem`); this prints.

use socklab_lab::roles::netem_args::{self as args, CaptureConfig, LinkFlags};

use crate::cli::{LinkArgs, NetemArgs, NetemCommand};
use crate::dryrun;
use crate::failure::Failure;

impl LinkArgs {
    /// The flags as the lab takes them.
    pub fn flags(&self) -> LinkFlags {
        LinkFlags {
            link: self.link.clone(),
            link_back: self.link_back.clone(),
            driver: self.driver.clone(),
            link_seed: self.link_seed,
            mtu: self.mtu,
            link_valid: self.link_valid.clone(),
            capture: self.capture.clone(),
            capture_snaplen: self.capture_snaplen,
            capture_limit: self.capture_limit.clone(),
            capture_force: self.capture_force,
        }
    }

    /// [`LinkArgs::capture_config`] for a measuring command, whose link needs `--link`.
    pub fn workload_capture(&self) -> Result<Option<CaptureConfig>, Failure> {
        Ok(self.flags().workload_capture()?)
    }

    /// Adds the link keys to a workload group.
    pub fn add_to(&self, group: &mut socklab_lab::plan::Group) {
        self.flags().add_to(group)
    }
}

pub fn netem(a: NetemArgs, dry: bool) -> Result<(), Failure> {
    let said = match a.action {
        None => args::across(&a.link.flags(), a.server.as_deref(), &a.cmd, a.json, dry)?,
        Some(NetemCommand::Up { name, link, json }) => args::up(&name, &link.flags(), json, dry)?,
        Some(NetemCommand::Down { name, json }) => args::down(&name, json, dry)?,
        Some(NetemCommand::Exec { name, side, cmd }) => args::exec(&name, &side, &cmd, dry)?,
        Some(NetemCommand::List { json }) => args::list(json, dry)?,
        Some(NetemCommand::Check {
            link,
            packets,
            size,
            json,
        }) => socklab_lab::roles::netem_check::check(&link.flags(), packets, size, json, dry)?,
        Some(NetemCommand::Cleanup { all, json }) => args::cleanup(all, json, dry)?,
        Some(NetemCommand::Daemon { name, link }) => args::daemon(&name, &link.flags())?,
    };
    dry_run(said)
}

/// A command without a plan that the lab checked: on a dry run, its line.
pub(crate) fn dry_run(said: Option<String>) -> Result<(), Failure> {
    said.map_or(Ok(()), |s| dryrun::print_checked(&s))
}
