//! `socklab netem`: emulated links from the command line.

use socklab_link::capture::{Capture, CaptureConfig};
use socklab_link::ns::{self, Side};
use socklab_link::{check_mtu, Driver, LinkConfig};
use socklab_link::{LinkError, LinkKeyError};
use socklab_net::NetError;
use socklab_sys::process::install_interrupt_flag;

use crate::cli::{LinkArgs, NetemArgs, NetemCommand};
use crate::commands::{out, usage, Failure};
use crate::dryrun;
use socklab_lab::roles;
pub(crate) use socklab_lab::roles::netem::{accounting, close_capture, describe};

impl From<NetError> for Failure {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Invalid(m) => Failure::Usage(m),
            NetError::Interrupted => Failure::Interrupted("interrupted".into()),
            other => Failure::Run(other.to_string()),
        }
    }
}

impl From<LinkError> for Failure {
    fn from(e: LinkError) -> Self {
        match e {
            LinkError::Invalid(m) => Failure::Usage(m),
            other => Failure::Run(other.to_string()),
        }
    }
}

impl LinkArgs {
    /// The link configuration (`tag`: a lasting link's name), parsed by
    /// [`LinkConfig::from_keys`] like a workload's keys; errors name the flag.
    pub fn config(&self, tag: Option<String>) -> Result<LinkConfig, Failure> {
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
                "link_driver" => format!("--driver {reason}"),
                k => format!("bad {} \"{value}\": {reason}", flag_of(k)),
            }),
            other => usage(other.to_string()),
        })?
        .expect("link is given");
        let mtu = check_mtu(self.mtu).map_err(|e| usage(format!("--mtu {}: {e}", self.mtu)))?;
        Ok(LinkConfig {
            tag,
            mtu,
            seed: self.link_seed,
            ..cfg
        })
    }

    /// `--capture` and its bounds, checked (`None` without `--capture`).
    pub fn capture_config(&self) -> Result<Option<CaptureConfig>, Failure> {
        let Some(path) = &self.capture else {
            return Ok(None);
        };
        if path.extension().and_then(|e| e.to_str()) != Some("pcapng") {
            return Err(usage(format!(
                "--capture {}: name the file FILE.pcapng (it is written as pcapng)",
                path.display()
            )));
        }
        if self.capture_snaplen < 20 {
            return Err(usage(format!(
                "--capture-snaplen {}: keep at least 20 bytes (an IP header); 65535 keeps whole packets",
                self.capture_snaplen
            )));
        }
        let limit = socklab_units::parse_size(&self.capture_limit)
            .map_err(|e| usage(format!("--capture-limit {}: {e}", self.capture_limit)))?;
        if limit < 128 * 1024 {
            return Err(usage(format!(
                "--capture-limit {}: give at least 128K",
                self.capture_limit
            )));
        }
        Ok(Some(CaptureConfig {
            path: path.clone(),
            snaplen: self.capture_snaplen,
            limit_bytes: limit,
        }))
    }

    /// [`LinkArgs::capture_config`] for a measuring command, whose link needs `--link`.
    pub fn workload_capture(&self) -> Result<Option<CaptureConfig>, Failure> {
        if self.capture.is_some() && self.link.is_none() {
            return Err(usage(
                "--capture records the emulated link's packets: add --link (--link none: the link without impairment)",
            ));
        }
        if self.capture.is_some() && !matches!(self.driver.trim(), "auto" | "tun") {
            return Err(usage(format!(
                "--capture records what socklab's own emulator does: use --driver tun (not {})",
                self.driver
            )));
        }
        self.capture_config()
    }

    /// Adds the link keys to a workload group: one value fixed, a comma-separated list as an
    /// axis (`--link "loss 0%,loss 5%,loss 10%"`).
    pub fn add_to(&self, group: &mut socklab_lab::plan::Group) {
        let Some(link) = &self.link else { return };
        let vals: Vec<String> = link.split(',').map(|v| v.trim().to_string()).collect();
        if vals.len() == 1 {
            group.fixed.set("link", vals[0].clone());
        } else {
            group
                .axes
                .push(socklab_lab::plan::Axis::single("link", vals));
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

/// The flag of a link key ([`socklab_link::KEYS`]).
fn flag_of(key: &str) -> &'static str {
    match key {
        "link" => "--link",
        "link_back" => "--link-back",
        "link_driver" => "--driver",
        "link_mtu" => "--mtu",
        "link_seed" => "--link-seed",
        "link_valid" => "--link-valid",
        other => unreachable!("not a link key: {other}"),
    }
}

pub fn netem(a: NetemArgs, dry: bool) -> Result<(), Failure> {
    match a.action {
        None => run_across(&a.link, a.server.as_deref(), &a.cmd, a.json, dry),
        Some(NetemCommand::Up { name, link, json }) => up(&name, &link, json, dry),
        Some(NetemCommand::Down { name, json }) => down(&name, json, dry),
        Some(NetemCommand::Exec { name, side, cmd }) => exec(&name, &side, &cmd, dry),
        Some(NetemCommand::List { .. }) if dry => {
            dryrun::print_checked("socklab netem list would list the sl- namespaces")
        }
        Some(NetemCommand::List { json }) => Ok(roles::netem::list(json)?),
        Some(NetemCommand::Check {
            link,
            packets,
            size,
            json,
        }) => crate::netem_check::check(&link, packets, size, json, dry),
        Some(NetemCommand::Cleanup { .. }) if dry => dryrun::print_checked(
            "socklab netem cleanup would remove the leftovers named sl- of dead runs",
        ),
        Some(NetemCommand::Cleanup { all, json }) => Ok(roles::netem::cleanup(all, json)?),
        Some(NetemCommand::Daemon { name, link }) => daemon(&name, &link),
    }
}

/// Pretty JSON and a newline on stdout.
pub(crate) fn out_json(v: &serde_json::Value) -> Result<(), Failure> {
    out(&format!(
        "{}\n",
        serde_json::to_string_pretty(v).unwrap_or_default()
    ))
}

/// `--capture` of a netem command: the capture (its window 0 labelled `label`) and a tap for
/// the link; `None` without `--capture`. Only the tun driver can capture.
pub(crate) fn open_capture(link_args: &LinkArgs, label: &str) -> Result<Option<Capture>, Failure> {
    let Some(cfg) = link_args.capture_config()? else {
        return Ok(None);
    };
    Ok(Some(Capture::create(&cfg, label)?))
}

/// The program `cmd` names, found as `sh` would find it (a path, or a name in `PATH`).
fn find_program(cmd: &str) -> Option<std::path::PathBuf> {
    let runnable = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.contains('/') {
        let p = std::path::PathBuf::from(cmd);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| runnable(p))
}

/// The command to run across a link must exist before a link is built for it.
fn check_program(cmd: &str) -> Result<(), Failure> {
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
        "'{cmd}' is not installed (not found in PATH){hint}: install it, or run a command that is, e.g. -- socklab pingpong --to server:7000 with --server 'socklab echo --port 7000'"
    )))
}

fn run_across(
    link_args: &LinkArgs,
    server: Option<&str>,
    cmd: &[String],
    json: bool,
    dry: bool,
) -> Result<(), Failure> {
    if cmd.is_empty() {
        return Err(usage(
            "give the command to run after --, e.g. socklab netem --link \"loss 5%\" --server 'socklab echo --port 7000' -- socklab pingpong --to server:7000; or use 'socklab netem up' for a lasting link",
        ));
    }
    let cfg = link_args.config(None)?;
    if cfg.driver == Driver::UdpProxy {
        return Err(usage("--driver udp-proxy makes no namespaces to run a command in: use it with a UDP workload (socklab pingpong --udp --link … --driver udp-proxy), or use --driver tun"));
    }
    check_program(&cmd[0])?;
    link_args.capture_config()?;
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem would build a link ({}){} and run '{}' in the client namespace",
            link_args.link.as_deref().unwrap_or("no impairment"),
            server
                .map(|s| format!(", start '{s}' in the server namespace"))
                .unwrap_or_default(),
            cmd.join(" ")
        ));
    }
    install_interrupt_flag()?;
    let capture = open_capture(link_args, &format!("socklab netem -- {}", cmd.join(" ")))?;
    Ok(roles::netem::run_across(&cfg, capture, server, cmd, json)?)
}

fn up(name: &str, link_args: &LinkArgs, json: bool, dry: bool) -> Result<(), Failure> {
    ns::check_name(name)?;
    let cfg = link_args.config(Some(name.to_string()))?;
    let capture = link_args.capture_config()?;
    if cfg.driver == Driver::UdpProxy {
        return Err(usage("a lasting link needs --driver tun, netem or auto"));
    }
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem up would start the link {name} (namespaces {} and {})",
            ns::ns_name(name, Side::Client),
            ns::ns_name(name, Side::Server)
        ));
    }
    Ok(roles::netem::up(name, &cfg, capture, json)?)
}

fn daemon(name: &str, link_args: &LinkArgs) -> Result<(), Failure> {
    let cfg = link_args.config(Some(name.to_string()))?;
    let capture = open_capture(link_args, &format!("lasting link {name}"))?;
    Ok(roles::netem::daemon(name, &cfg, capture)?)
}

fn down(name: &str, json: bool, dry: bool) -> Result<(), Failure> {
    ns::check_name(name)?;
    if dry {
        return dryrun::print_checked(&format!("socklab netem down would remove the link {name}"));
    }
    Ok(roles::netem::down(name, json)?)
}

fn exec(name: &str, side: &str, cmd: &[String], dry: bool) -> Result<(), Failure> {
    ns::check_name(name)?;
    let side = side.parse::<Side>().map_err(|e| usage(e.to_string()))?;
    let n = ns::ns_name(name, side);
    check_program(&cmd[0])?;
    if dry {
        return dryrun::print_checked(&format!(
            "socklab netem exec would run '{}' in {n}",
            cmd.join(" ")
        ));
    }
    Ok(roles::netem::exec(name, side, cmd)?)
}
