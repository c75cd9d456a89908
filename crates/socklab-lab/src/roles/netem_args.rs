//! The emulated link as a command gives it ([`LinkFlags`]: `netem` and the measuring
//! commands), and `netem`'s own commands: checked before they build anything, then run (the
//! roles in [`super::netem`]), or on a dry run the line that says what they would do. Each
//! error names its key in backticks (the binary prints it as the flag).

use std::path::{Path, PathBuf};

use socklab_link::ns::{self, Side};
use socklab_link::LinkKeyError;
use socklab_link::{check_mtu, Driver};

pub use socklab_link::capture::{Capture, CaptureConfig, DEFAULT_SNAPLEN};
pub use socklab_link::{LinkConfig, LinkError};
pub use socklab_net::NetError;

use super::netem::{self, net};
use super::{install_interrupt_flag, RoleError};
use crate::plan::{Axis, Group};

fn usage(m: impl Into<String>) -> RoleError {
    RoleError::Usage(m.into())
}

/// The link keys as given (text, unchecked), and the capture of its packets.
#[derive(Debug, Clone, Default)]
pub struct LinkFlags {
    /// Impairments in netem syntax, both directions (a comma list: an axis).
    pub link: Option<String>,
    /// Impairments of the server → client direction, if different.
    pub link_back: Option<String>,
    /// auto, tun, netem, udp-proxy.
    pub driver: String,
    /// Seed of the emulator's random decisions.
    pub link_seed: u64,
    /// MTU of the emulated link.
    pub mtu: u32,
    /// When a repetition counts (SHARE LAG).
    pub link_valid: String,
    /// The pcapng file its packets go into.
    pub capture: Option<PathBuf>,
    /// Bytes kept of each captured packet.
    pub capture_snaplen: u32,
    /// Largest capture file (a size as text).
    pub capture_limit: String,
    /// Replace an existing regular capture file (never a link).
    pub capture_force: bool,
}

impl LinkFlags {
    /// The link configuration (`tag`: a lasting link's name), parsed by
    /// [`LinkConfig::from_keys`] like a workload's keys.
    pub fn config(&self, tag: Option<String>) -> Result<LinkConfig, RoleError> {
        // The MTU and the seed are typed already: checked and passed as they are.
        let cfg = LinkConfig::from_keys(
            Some(self.link.as_deref().unwrap_or("")),
            self.link_back.as_deref(),
            Some(&self.driver),
            None,
            None,
            Some(&self.link_valid),
        )
        .map_err(|e| match e {
            LinkKeyError::Value { key, value, reason } => usage(match key {
                "link_driver" => format!("`link_driver` {reason}"),
                k => format!("bad `{k}` \"{value}\": {reason}"),
            }),
            other => usage(other.to_string()),
        })?
        .expect("link is given");
        let mtu =
            check_mtu(self.mtu).map_err(|e| usage(format!("`link_mtu` {}: {e}", self.mtu)))?;
        Ok(LinkConfig {
            tag,
            mtu,
            seed: self.link_seed,
            ..cfg
        })
    }

    /// `capture` and its bounds, checked (`None` without `capture`).
    pub fn capture_config(&self) -> Result<Option<CaptureConfig>, RoleError> {
        let Some(path) = &self.capture else {
            return Ok(None);
        };
        if path.extension().and_then(|e| e.to_str()) != Some("pcapng") {
            return Err(usage(format!(
                "`capture` {}: name the file FILE.pcapng (it is written as pcapng)",
                path.display()
            )));
        }
        if self.capture_snaplen < 20 {
            return Err(usage(format!(
                "`capture_snaplen` {}: keep at least 20 bytes (an IP header); 65535 keeps whole packets",
                self.capture_snaplen
            )));
        }
        let limit = socklab_units::parse_size(&self.capture_limit)
            .map_err(|e| usage(format!("`capture_limit` {}: {e}", self.capture_limit)))?;
        if limit < 128 * 1024 {
            return Err(usage(format!(
                "`capture_limit` {}: give at least 128K",
                self.capture_limit
            )));
        }
        socklab_link::capture::check_path(path, self.capture_force)
            .map_err(|e| usage(e.to_string()))?;
        Ok(Some(CaptureConfig {
            path: path.clone(),
            snaplen: self.capture_snaplen,
            limit_bytes: limit,
            force: self.capture_force,
        }))
    }

    /// [`LinkFlags::capture_config`] for a measuring command, whose link needs `link`.
    pub fn workload_capture(&self) -> Result<Option<CaptureConfig>, RoleError> {
        if self.capture.is_some() && self.link.is_none() {
            return Err(usage(
                "`capture` records the emulated link's packets: add `link` (`link` none: the link without impairment)",
            ));
        }
        if self.capture.is_some() && !matches!(self.driver.trim(), "auto" | "tun") {
            return Err(usage(format!(
                "`capture` records what socklab's own emulator does: use `link_driver` tun (not {})",
                self.driver
            )));
        }
        self.capture_config()
    }

    /// The capture of a netem command (its window 0 labelled `label`); `None` without
    /// `capture`. Only the tun driver can capture.
    pub fn open_capture(&self, label: &str) -> Result<Option<Capture>, RoleError> {
        let Some(cfg) = self.capture_config()? else {
            return Ok(None);
        };
        Ok(Some(Capture::create(&cfg, label).map_err(net)?))
    }

    /// Adds the link keys to a workload group: one value fixed, a comma-separated list as an
    /// axis (`link` "loss 0%,loss 5%,loss 10%").
    pub fn add_to(&self, group: &mut Group) {
        let Some(link) = &self.link else { return };
        let vals: Vec<String> = link.split(',').map(|v| v.trim().to_string()).collect();
        if vals.len() == 1 {
            group.fixed.set("link", vals[0].clone());
        } else {
            group.axes.push(Axis::single("link", vals));
        }
        if let Some(b) = &self.link_back {
            group.fixed.set("link_back", b.clone());
        }
        group.fixed.set("link_driver", self.driver.clone());
        group.fixed.set("link_mtu", self.mtu.to_string());
        group.fixed.set("link_seed", self.link_seed.to_string());
        group.fixed.set("link_valid", self.link_valid.clone());
    }
}

/// The program `cmd` names, found as `sh` would find it (a path, or a name in `PATH`).
pub fn find_program(cmd: &str) -> Option<PathBuf> {
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| runnable(p))
}

/// The command to run across a link must exist before a link is built for it.
pub fn check_program(cmd: &str) -> Result<(), RoleError> {
    if find_program(cmd).is_some() {
        return Ok(());
    }
    let hint = match cmd {
        "ping" => " (Debian: apt install iputils-ping)",
        "nc" => " (Debian: apt install netcat-openbsd)",
        "iperf3" => " (Debian: apt install iperf3)",
        _ => "",
    };
    Err(usage(format!(
        "'{cmd}' is not installed (not found in PATH){hint}: install it, or run a command that is, e.g. -- socklab pingpong `to` server:7000 with `server` 'socklab echo `port` 7000'"
    )))
}

/// `netem -- CMD`, checked: the link, and what a dry run says.
pub fn check_across(
    link: &LinkFlags,
    server: Option<&str>,
    cmd: &[String],
) -> Result<(LinkConfig, String), RoleError> {
    if cmd.is_empty() {
        return Err(usage(
            "give the command to run after --, e.g. socklab netem `link` \"loss 5%\" `server` 'socklab echo `port` 7000' -- socklab pingpong `to` server:7000; or use 'socklab netem up' for a lasting link",
        ));
    }
    let cfg = link.config(None)?;
    if cfg.driver == Driver::UdpProxy {
        return Err(usage("`link_driver` udp-proxy makes no namespaces to run a command in: use it with a UDP workload (socklab pingpong `udp` `link` … `link_driver` udp-proxy), or use `link_driver` tun"));
    }
    check_program(&cmd[0])?;
    link.capture_config()?;
    let dry = format!(
        "socklab netem would build a link ({}){} and run '{}' in the client namespace",
        link.link.as_deref().unwrap_or("no impairment"),
        server
            .map(|s| format!(", start '{s}' in the server namespace"))
            .unwrap_or_default(),
        cmd.join(" ")
    );
    Ok((cfg, dry))
}

/// `netem up NAME`, checked: the lasting link, its capture, and what a dry run says.
pub fn check_up(
    name: &str,
    link: &LinkFlags,
) -> Result<(LinkConfig, Option<CaptureConfig>, String), RoleError> {
    ns::check_name(name).map_err(net)?;
    let cfg = link.config(Some(name.to_string()))?;
    let capture = link.capture_config()?;
    if cfg.driver == Driver::UdpProxy {
        return Err(usage(
            "a lasting link needs `link_driver` tun, netem or auto",
        ));
    }
    let dry = format!(
        "socklab netem up would start the link {name} (namespaces {} and {})",
        ns::ns_name(name, Side::Client),
        ns::ns_name(name, Side::Server)
    );
    Ok((cfg, capture, dry))
}

/// `netem down NAME`, checked: what a dry run says.
pub fn check_down(name: &str) -> Result<String, RoleError> {
    ns::check_name(name).map_err(net)?;
    Ok(format!("socklab netem down would remove the link {name}"))
}

/// `netem exec NAME SIDE -- CMD`, checked: the side, and what a dry run says.
pub fn check_exec(name: &str, side: &str, cmd: &[String]) -> Result<(Side, String), RoleError> {
    ns::check_name(name).map_err(net)?;
    let side = side.parse::<Side>().map_err(|e| usage(e.to_string()))?;
    let n = ns::ns_name(name, side);
    check_program(&cmd[0])?;
    Ok((
        side,
        format!("socklab netem exec would run '{}' in {n}", cmd.join(" ")),
    ))
}

/// `netem -- CMD` (see [`netem::run_across`]); on a dry run, the line to print.
pub fn across(
    link: &LinkFlags,
    server: Option<&str>,
    cmd: &[String],
    json: bool,
    dry: bool,
) -> Result<Option<String>, RoleError> {
    let (cfg, said) = check_across(link, server, cmd)?;
    if dry {
        return Ok(Some(said));
    }
    install_interrupt_flag()?;
    let capture = link.open_capture(&format!("socklab netem -- {}", cmd.join(" ")))?;
    netem::run_across(&cfg, capture, server, cmd, json)?;
    Ok(None)
}

/// `netem up NAME`; on a dry run, the line to print.
pub fn up(
    name: &str,
    link: &LinkFlags,
    json: bool,
    dry: bool,
) -> Result<Option<String>, RoleError> {
    let (cfg, capture, said) = check_up(name, link)?;
    if dry {
        return Ok(Some(said));
    }
    netem::up(name, &cfg, capture, json)?;
    Ok(None)
}

/// `netem daemon NAME`: the process that keeps a lasting link.
pub fn daemon(name: &str, link: &LinkFlags) -> Result<Option<String>, RoleError> {
    let cfg = link.config(Some(name.to_string()))?;
    let capture = link.open_capture(&format!("lasting link {name}"))?;
    netem::daemon(name, &cfg, capture)?;
    Ok(None)
}

/// `netem down NAME`; on a dry run, the line to print.
pub fn down(name: &str, json: bool, dry: bool) -> Result<Option<String>, RoleError> {
    let said = check_down(name)?;
    if dry {
        return Ok(Some(said));
    }
    netem::down(name, json)?;
    Ok(None)
}

/// `netem exec NAME SIDE -- CMD`; on a dry run, the line to print.
pub fn exec(
    name: &str,
    side: &str,
    cmd: &[String],
    dry: bool,
) -> Result<Option<String>, RoleError> {
    let (side, said) = check_exec(name, side, cmd)?;
    if dry {
        return Ok(Some(said));
    }
    netem::exec(name, side, cmd)?;
    Ok(None)
}

/// `netem list`; on a dry run, the line to print.
pub fn list(json: bool, dry: bool) -> Result<Option<String>, RoleError> {
    if dry {
        return Ok(Some(
            "socklab netem list would list the sl- namespaces".into(),
        ));
    }
    netem::list(json)?;
    Ok(None)
}

/// `netem cleanup`; on a dry run, the line to print.
pub fn cleanup(all: bool, json: bool, dry: bool) -> Result<Option<String>, RoleError> {
    if dry {
        return Ok(Some(
            "socklab netem cleanup would remove the leftovers named sl- of dead runs".into(),
        ));
    }
    netem::cleanup(all, json)?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> LinkFlags {
        LinkFlags {
            link: Some("loss 5%".into()),
            driver: "auto".into(),
            link_seed: 1,
            mtu: 1500,
            link_valid: "1% 1ms".into(),
            capture_snaplen: 65535,
            capture_limit: "1G".into(),
            ..LinkFlags::default()
        }
    }

    #[test]
    fn bad_link_values_name_their_key() {
        assert_eq!(flags().config(None).unwrap().mtu, 1500);
        let e = |f: LinkFlags| f.config(None).unwrap_err().to_string();
        assert!(e(LinkFlags { mtu: 9, ..flags() }).starts_with("`link_mtu` 9: "));
        assert!(e(LinkFlags {
            driver: "carrier-pigeon".into(),
            ..flags()
        })
        .starts_with("`link_driver` "));
        assert!(e(LinkFlags {
            link: Some("loss lots".into()),
            ..flags()
        })
        .starts_with("bad `link` \"loss lots\": "));
    }

    #[test]
    fn a_capture_is_checked_and_needs_the_link() {
        assert!(flags().workload_capture().unwrap().is_none());
        let cap = |c: &str, limit: &str| LinkFlags {
            capture: Some(PathBuf::from(c)),
            capture_limit: limit.into(),
            ..flags()
        };
        assert_eq!(
            cap("a.pcapng", "1M")
                .capture_config()
                .unwrap()
                .unwrap()
                .limit_bytes,
            1 << 20
        );
        let e = |f: LinkFlags| f.workload_capture().unwrap_err().to_string();
        assert!(e(cap("a.pcap", "1G")).starts_with("`capture` a.pcap: name the file"));
        assert!(e(cap("a.pcapng", "1K")).starts_with("`capture_limit` 1K: give at least"));
        assert!(e(LinkFlags {
            link: None,
            ..cap("a.pcapng", "1G")
        })
        .starts_with("`capture` records the emulated link's packets: add `link`"));
    }

    #[test]
    fn a_list_of_links_is_an_axis() {
        let mut g = Group::new("bulk", crate::model::params::Params::default());
        LinkFlags {
            link: Some("loss 0%, loss 5%".into()),
            ..flags()
        }
        .add_to(&mut g);
        assert_eq!(g.axes.len(), 1);
        assert_eq!(g.fixed.get("link_mtu"), Some("1500"));
    }

    #[test]
    fn a_command_that_is_not_installed_is_refused_before_a_link() {
        assert!(find_program("sh").is_some());
        let e = check_program("no-such-program-here")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("'no-such-program-here' is not installed"),
            "{e}"
        );
        assert!(check_across(&flags(), None, &[])
            .unwrap_err()
            .to_string()
            .starts_with("give the command to run after --"));
    }

    #[test]
    fn a_dry_run_checks_and_builds_nothing() {
        assert_eq!(
            down("lab1", false, true).unwrap().as_deref(),
            Some("socklab netem down would remove the link lab1")
        );
        assert!(down("Bad Name", false, true).is_err());
        let (_, said) = check_exec("lab1", "client", &["sh".into()]).unwrap();
        assert_eq!(said, "socklab netem exec would run 'sh' in sl-lab1-c");
        assert!(list(false, true).unwrap().is_some());
    }
}
