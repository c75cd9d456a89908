//! [`RoleArgs`]: the one place the library writes (and reads back) a command line of the
//! socklab binary. Every role the lab starts as a process (a server child here or in the
//! link's namespace, a role on another host over SSH) is a typed [`Role`], an optional
//! [`Listen`] and `until_eof`; [`RoleArgs::to_argv`] prints it in the binary's flags and
//! [`RoleArgs::from_argv`] reads such a line back (the two round-trip, tested below).

use std::net::IpAddr;

use socklab_link::capture::CaptureConfig;
use socklab_link::LinkConfig;
use socklab_net::load::LoadConfig;
use socklab_net::server::{Design, Handler};
use socklab_transfer::Proto;

use crate::model::params::Params;
use crate::LabError;

/// What the started process does.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// `sink`: the bulk receiver.
    Sink,
    /// `sink --udp`: the UDP bulk receiver, one `REPORT` line per test.
    UdpSink {
        /// Its receive buffer (a size as text, e.g. `4M`).
        rcvbuf: String,
        /// Its counts per interval (a duration as text), when a time series is asked for.
        interval: Option<String>,
    },
    /// `echo`: the pingpong server.
    Echo {
        /// Datagrams instead of TCP.
        udp: bool,
        /// Server-side socket options (an option set as text, e.g. `nodelay+quickack`).
        opts: String,
    },
    /// `serve`: one server design.
    Serve {
        /// The design.
        design: Design,
        /// The protocol it speaks.
        handler: Handler,
        /// Its workers.
        workers: usize,
        /// HTTP body bytes.
        body: usize,
    },
    /// `transfer serve`: the file-transfer receiver.
    TransferServe {
        /// Its transport.
        proto: Proto,
        /// The directory it receives into.
        dir: String,
        /// End after one session.
        once: bool,
        /// Remove `dir` when it ends (a directory it made up on another host).
        remove_dir_at_exit: bool,
        /// The TCP congestion control of its connections.
        tcp_cc: Option<String>,
    },
    /// `hosts rep`: one repetition of a workload's client side on a client host.
    Rep {
        /// The workload.
        kind: String,
        /// Its parameters.
        params: Params,
        /// The cell's label (for errors).
        label: String,
    },
    /// `netem daemon`: the process that keeps the lasting link `name`.
    NetemDaemon {
        /// The link's name.
        name: String,
        /// The link.
        link: Box<LinkConfig>,
        /// Its packets into a pcapng file (an absolute path: the daemon has its own cwd).
        capture: Option<CaptureConfig>,
    },
    /// `hosts probe`: what `hosts check` measures on a host (it listens on all addresses).
    Probe,
    /// `--version`: which socklab a host runs.
    Version,
    /// `hosts generate`: a load generator's share of the load, from an agreed start.
    Generate {
        /// Its share of the load.
        config: Box<LoadConfig>,
        /// When to start, nanoseconds since the epoch by that host's clock.
        start_at: i128,
    },
}

/// Where a server role listens, and what it says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// The address it binds.
    pub bind: IpAddr,
    /// Its port (0: any free port).
    pub port: u16,
    /// Print `LISTENING <addr>` (and its other child lines) on stdout.
    pub announce: bool,
    /// Say nothing on stderr.
    pub quiet: bool,
}

impl Listen {
    /// How the lab starts its servers: on `bind`, any free port, announced, quiet.
    pub fn announced(bind: IpAddr) -> Listen {
        Listen {
            bind,
            port: 0,
            announce: true,
            quiet: true,
        }
    }

    /// Its flags.
    pub fn to_argv(&self) -> Vec<String> {
        let mut a = vec![
            "--bind".to_string(),
            self.bind.to_string(),
            "--port".into(),
            self.port.to_string(),
        ];
        if self.announce {
            a.push("--announce".into());
        }
        if self.quiet {
            a.push("--quiet".into());
        }
        a
    }
}

/// A whole command line of the socklab binary for one role (without the program itself).
#[derive(Debug, Clone, PartialEq)]
pub struct RoleArgs {
    /// What it does.
    pub role: Role,
    /// Where it listens (a server role), when the lab chooses.
    pub listen: Option<Listen>,
    /// `--until-eof`: it stops when its stdin ends and reports its own rusage (a role on
    /// another host).
    pub until_eof: bool,
}

/// The flag that makes a role stop at the end of its stdin.
const UNTIL_EOF: &str = "--until-eof";

impl Role {
    /// Its subcommand and its own flags.
    pub fn to_argv(&self) -> Vec<String> {
        let s = |x: &str| x.to_string();
        match self {
            Role::Sink => vec![s("sink")],
            Role::UdpSink { rcvbuf, interval } => {
                let mut a = vec![s("sink"), s("--udp"), s("--rcvbuf"), rcvbuf.clone()];
                if let Some(i) = interval {
                    a.extend([s("--interval"), i.clone()]);
                }
                a
            }
            Role::Echo { udp, opts } => {
                let mut a = vec![s("echo"), s("--opts"), opts.clone()];
                if *udp {
                    a.push(s("--udp"));
                }
                a
            }
            Role::Serve {
                design,
                handler,
                workers,
                body,
            } => vec![
                s("serve"),
                s("--design"),
                s(design.name()),
                s("--handler"),
                s(handler.name()),
                s("--workers"),
                workers.to_string(),
                s("--body"),
                body.to_string(),
            ],
            Role::TransferServe {
                proto,
                dir,
                once,
                remove_dir_at_exit,
                tcp_cc,
            } => {
                let mut a = vec![
                    s("transfer"),
                    s("serve"),
                    s("--proto"),
                    s(proto.as_str()),
                    s("--dir"),
                    dir.clone(),
                ];
                if *once {
                    a.push(s("--once"));
                }
                if *remove_dir_at_exit {
                    a.push(s("--remove-dir-at-exit"));
                }
                if let Some(cc) = tcp_cc {
                    a.extend([s("--tcp-cc"), cc.clone()]);
                }
                a
            }
            Role::Rep {
                kind,
                params,
                label,
            } => vec![
                s("hosts"),
                s("rep"),
                s("--kind"),
                kind.clone(),
                s("--params"),
                serde_json::to_string(params).unwrap_or_default(),
                s("--label"),
                label.clone(),
            ],
            Role::NetemDaemon {
                name,
                link,
                capture,
            } => {
                let mut a = vec![s("netem"), s("daemon"), s("--name"), name.clone()];
                for (k, v) in link.to_keys() {
                    a.extend([s(link_flag(k)), v]);
                }
                if let Some(c) = capture {
                    a.extend([
                        s("--capture"),
                        c.path.display().to_string(),
                        s("--capture-snaplen"),
                        c.snaplen.to_string(),
                        s("--capture-limit"),
                        c.limit_bytes.to_string(),
                    ]);
                    if c.force {
                        a.push(s("--capture-force"));
                    }
                }
                a
            }
            Role::Probe => vec![s("hosts"), s("probe")],
            Role::Version => vec![s("--version")],
            Role::Generate { config, start_at } => vec![
                s("hosts"),
                s("generate"),
                s("--config"),
                serde_json::to_string(config).unwrap_or_default(),
                s("--start-at"),
                start_at.to_string(),
            ],
        }
    }

    /// Its name as the user knows it (`sink`, `transfer serve`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Role::Sink | Role::UdpSink { .. } => "sink",
            Role::Echo { .. } => "echo",
            Role::Serve { .. } => "serve",
            Role::TransferServe { .. } => "transfer serve",
            Role::Rep { .. } => "hosts rep",
            Role::NetemDaemon { .. } => "netem daemon",
            Role::Probe => "hosts probe",
            Role::Version => "--version",
            Role::Generate { .. } => "hosts generate",
        }
    }
}

impl From<Role> for RoleArgs {
    fn from(role: Role) -> RoleArgs {
        RoleArgs {
            role,
            listen: None,
            until_eof: false,
        }
    }
}

impl RoleArgs {
    /// The command line: the role's subcommand and flags, then the address flags, then
    /// `--until-eof`.
    pub fn to_argv(&self) -> Vec<String> {
        let mut a = self.role.to_argv();
        if let Some(l) = &self.listen {
            a.extend(l.to_argv());
        }
        if self.until_eof {
            a.push(UNTIL_EOF.into());
        }
        a
    }

    /// Reads back a command line that [`RoleArgs::to_argv`] wrote.
    pub fn from_argv(argv: &[String]) -> Result<RoleArgs, LabError> {
        let line = || argv.join(" ");
        let bad = |why: String| LabError::Child(format!("role command line '{}': {why}", line()));
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        let (cmd, rest) = match words.as_slice() {
            ["transfer", "serve", rest @ ..] => ("transfer serve", rest),
            ["hosts", "rep", rest @ ..] => ("hosts rep", rest),
            ["hosts", "generate", rest @ ..] => ("hosts generate", rest),
            ["hosts", "probe", rest @ ..] => ("hosts probe", rest),
            ["netem", "daemon", rest @ ..] => ("netem daemon", rest),
            ["--version"] => ("--version", &[][..]),
            [cmd @ ("sink" | "echo" | "serve"), rest @ ..] => (*cmd, rest),
            _ => {
                return Err(bad(
                    "not a role (sink, echo, serve, transfer serve, hosts rep|generate|probe, --version)".into(),
                ))
            }
        };
        let mut flags = Flags::read(rest).map_err(bad)?;
        let value = |flags: &mut Flags, name: &str| -> Result<String, LabError> {
            flags
                .value(name)
                .ok_or_else(|| bad(format!("{name} is missing")))
        };
        let parse_err = |name: &str, v: &str, e: String| bad(format!("{name} '{v}': {e}"));
        let role = match cmd {
            "sink" if flags.switch("--udp") => Role::UdpSink {
                rcvbuf: value(&mut flags, "--rcvbuf")?,
                interval: flags.value("--interval"),
            },
            "sink" => Role::Sink,
            "echo" => Role::Echo {
                udp: flags.switch("--udp"),
                opts: value(&mut flags, "--opts")?,
            },
            "serve" => {
                let (d, h) = (
                    value(&mut flags, "--design")?,
                    value(&mut flags, "--handler")?,
                );
                let (w, b) = (
                    value(&mut flags, "--workers")?,
                    value(&mut flags, "--body")?,
                );
                Role::Serve {
                    design: d
                        .parse()
                        .map_err(|e| parse_err("--design", &d, format!("{e}")))?,
                    handler: h
                        .parse()
                        .map_err(|e| parse_err("--handler", &h, format!("{e}")))?,
                    workers: w
                        .parse()
                        .map_err(|e| parse_err("--workers", &w, format!("{e}")))?,
                    body: b
                        .parse()
                        .map_err(|e| parse_err("--body", &b, format!("{e}")))?,
                }
            }
            "transfer serve" => {
                let p = value(&mut flags, "--proto")?;
                Role::TransferServe {
                    proto: p
                        .parse()
                        .map_err(|e| parse_err("--proto", &p, format!("{e}")))?,
                    dir: value(&mut flags, "--dir")?,
                    once: flags.switch("--once"),
                    remove_dir_at_exit: flags.switch("--remove-dir-at-exit"),
                    tcp_cc: flags.value("--tcp-cc"),
                }
            }
            "hosts rep" => {
                let p = value(&mut flags, "--params")?;
                Role::Rep {
                    kind: value(&mut flags, "--kind")?,
                    params: serde_json::from_str(&p)
                        .map_err(|e| parse_err("--params", &p, e.to_string()))?,
                    label: value(&mut flags, "--label")?,
                }
            }
            "hosts probe" => Role::Probe,
            "netem daemon" => {
                let name = value(&mut flags, "--name")?;
                let keys: Vec<Option<String>> = LINK_KEYS
                    .iter()
                    .map(|k| flags.value(link_flag(k)))
                    .collect();
                let link = LinkConfig::from_keys(
                    Some(keys[0].as_deref().unwrap_or("")),
                    keys[1].as_deref(),
                    keys[2].as_deref(),
                    keys[3].as_deref(),
                    keys[4].as_deref(),
                    keys[5].as_deref(),
                )
                .map_err(|e| bad(e.to_string()))?
                .map(|l| LinkConfig {
                    tag: Some(name.clone()),
                    ..l
                })
                .ok_or_else(|| bad("--link is missing".into()))?;
                let capture = match flags.value("--capture") {
                    None => None,
                    Some(path) => {
                        let (n, l) = (
                            value(&mut flags, "--capture-snaplen")?,
                            value(&mut flags, "--capture-limit")?,
                        );
                        Some(CaptureConfig {
                            path: path.into(),
                            snaplen: n
                                .parse()
                                .map_err(|e| parse_err("--capture-snaplen", &n, format!("{e}")))?,
                            limit_bytes: l
                                .parse()
                                .map_err(|e| parse_err("--capture-limit", &l, format!("{e}")))?,
                            force: flags.switch("--capture-force"),
                        })
                    }
                };
                Role::NetemDaemon {
                    name,
                    link: Box::new(link),
                    capture,
                }
            }
            "--version" => Role::Version,
            _ => {
                let (c, s) = (
                    value(&mut flags, "--config")?,
                    value(&mut flags, "--start-at")?,
                );
                Role::Generate {
                    config: serde_json::from_str(&c)
                        .map_err(|e| parse_err("--config", &c, e.to_string()))?,
                    start_at: s
                        .parse()
                        .map_err(|e| parse_err("--start-at", &s, format!("{e}")))?,
                }
            }
        };
        let listen = match flags.value("--bind") {
            None => None,
            Some(b) => {
                let p = value(&mut flags, "--port")?;
                Some(Listen {
                    bind: b
                        .parse()
                        .map_err(|e| parse_err("--bind", &b, format!("{e}")))?,
                    port: p
                        .parse()
                        .map_err(|e| parse_err("--port", &p, format!("{e}")))?,
                    announce: flags.switch("--announce"),
                    quiet: flags.switch("--quiet"),
                })
            }
        };
        let until_eof = flags.switch(UNTIL_EOF);
        if let Some(left) = flags.0.first() {
            return Err(bad(format!("'{}' is not a flag of {cmd}", left.0)));
        }
        Ok(RoleArgs {
            role,
            listen,
            until_eof,
        })
    }
}

/// The link's keys, in [`LinkConfig::from_keys`]' order.
const LINK_KEYS: [&str; 6] = [
    "link",
    "link_back",
    "link_driver",
    "link_mtu",
    "link_seed",
    "link_valid",
];

/// The flag of a link key ([`LinkConfig::to_keys`]).
fn link_flag(key: &str) -> &'static str {
    match key {
        "link" => "--link",
        "link_back" => "--link-back",
        "link_driver" => "--driver",
        "link_mtu" => "--mtu",
        "link_seed" => "--link-seed",
        _ => "--link-valid",
    }
}

/// Flags as read from a command line: each with its value, or none (a switch).
struct Flags(Vec<(String, Option<String>)>);

impl Flags {
    /// The flags that take no value.
    const SWITCHES: &'static [&'static str] = &[
        "--udp",
        "--once",
        "--remove-dir-at-exit",
        "--capture-force",
        "--announce",
        "--quiet",
        UNTIL_EOF,
    ];

    fn read(words: &[&str]) -> Result<Flags, String> {
        let mut flags = Vec::new();
        let mut it = words.iter();
        while let Some(w) = it.next() {
            if !w.starts_with("--") {
                return Err(format!("'{w}' is not a flag"));
            }
            if Self::SWITCHES.contains(w) {
                flags.push((w.to_string(), None));
            } else {
                let v = it.next().ok_or_else(|| format!("{w} has no value"))?;
                flags.push((w.to_string(), Some(v.to_string())));
            }
        }
        Ok(Flags(flags))
    }

    /// Takes the value of `name`.
    fn value(&mut self, name: &str) -> Option<String> {
        let i = self.0.iter().position(|(n, v)| n == name && v.is_some())?;
        self.0.remove(i).1
    }

    /// Takes the switch `name`: whether it was there.
    fn switch(&mut self, name: &str) -> bool {
        match self.0.iter().position(|(n, v)| n == name && v.is_none()) {
            Some(i) => {
                self.0.remove(i);
                true
            }
            None => false,
        }
    }
}

/// Command lines the library shows a user (a suite's command, a hint in a message), in the
/// binary's flags: this module is the one place a library spells them.
pub mod shown {
    use super::{Role, RoleArgs};

    /// `socklab lab [--quick] --suite NAME`: how a built-in suite runs (stored as the plan's
    /// command).
    pub fn lab_suite(name: &str, quick: bool) -> String {
        let quick = if quick { " --quick" } else { "" };
        format!("socklab lab{quick} --suite {name}")
    }

    /// `socklab lab [--quick]`: the quick lab's command (its report's title).
    pub fn lab(quick: bool) -> String {
        if quick {
            "socklab lab --quick".into()
        } else {
            "socklab lab".into()
        }
    }

    /// `socklab results export ID --json > FILE`: how to save a baseline with every
    /// repetition (what `socklab compare` reads).
    pub fn export_json() -> String {
        "socklab results export ID --json > FILE".into()
    }

    /// `bulk --reference` (without the program): a bulk run's memcpy reference.
    pub fn bulk_reference() -> String {
        "bulk --reference".into()
    }

    /// The command line `args` (a program and its arguments, as this process got them) with
    /// `--resume` added unless it is there: the words of the command that continues an
    /// interrupted `socklab run` or `socklab lab`.
    pub fn resumed(args: impl Iterator<Item = String>) -> Vec<String> {
        let mut words: Vec<String> = args.collect();
        if !words.iter().skip(1).any(|w| w == "--resume") {
            words.push("--resume".into());
        }
        words
    }

    /// `socklab lab --list`: the built-in suites and which are available.
    pub fn lab_list() -> String {
        "socklab lab --list".into()
    }

    /// `socklab netem up --name NAME --link …`: starts the lasting link `name`.
    pub fn netem_up(name: &str) -> String {
        format!("socklab netem up --name {name} --link …")
    }

    /// `socklab netem cleanup --all`: also removes what a running socklab still holds.
    pub fn netem_cleanup_all() -> String {
        "socklab netem cleanup --all".into()
    }

    /// `PROGRAM --version` (a shell word for the program): which socklab a host runs.
    pub fn version(program: &str) -> String {
        let mut words = vec![program.to_string()];
        words.extend(RoleArgs::from(Role::Version).to_argv());
        words.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_lines_the_lab_starts_are_exactly_todays() {
        let sink = RoleArgs {
            role: Role::Sink,
            listen: Some(Listen::announced("127.0.0.1".parse().unwrap())),
            until_eof: false,
        };
        assert_eq!(
            sink.to_argv(),
            argv(&[
                "sink",
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--announce",
                "--quiet"
            ])
        );
        let serve = Role::Serve {
            design: Design::PreforkFlock,
            handler: Handler::Http,
            workers: 8,
            body: 100,
        };
        assert_eq!(
            serve.to_argv(),
            argv(&[
                "serve",
                "--design",
                "prefork-flock",
                "--handler",
                "http",
                "--workers",
                "8",
                "--body",
                "100"
            ])
        );
        let t = Role::TransferServe {
            proto: Proto::Rudp,
            dir: "/tmp/rx".into(),
            once: true,
            remove_dir_at_exit: true,
            tcp_cc: Some("bbr".into()),
        };
        assert_eq!(
            t.to_argv(),
            argv(&[
                "transfer",
                "serve",
                "--proto",
                "rudp",
                "--dir",
                "/tmp/rx",
                "--once",
                "--remove-dir-at-exit",
                "--tcp-cc",
                "bbr"
            ])
        );
        let rep = RoleArgs {
            role: Role::Rep {
                kind: "bulk".into(),
                params: Params::new().with("to", "10.0.0.2:5001"),
                label: "cell 1".into(),
            },
            listen: None,
            until_eof: true,
        };
        assert_eq!(
            rep.to_argv(),
            argv(&[
                "hosts",
                "rep",
                "--kind",
                "bulk",
                "--params",
                r#"{"to":"10.0.0.2:5001"}"#,
                "--label",
                "cell 1",
                "--until-eof"
            ])
        );
    }

    #[test]
    fn every_role_reads_back_as_written() {
        let bind: IpAddr = "::1".parse().unwrap();
        let config = Box::new(socklab_net::load::LoadConfig::new(
            "127.0.0.1:80".parse().unwrap(),
            socklab_net::load::LoadProtocol::Http,
        ));
        for role in [
            Role::Sink,
            Role::Probe,
            Role::NetemDaemon {
                name: "lab1".into(),
                link: Box::new(
                    LinkConfig::from_keys(
                        Some("delay 10ms loss 1%"),
                        Some("delay 5ms"),
                        Some("tun"),
                        Some("9000"),
                        Some("7"),
                        None,
                    )
                    .unwrap()
                    .map(|l| LinkConfig {
                        tag: Some("lab1".into()),
                        ..l
                    })
                    .unwrap(),
                ),
                capture: Some(CaptureConfig {
                    path: "/tmp/a b.pcapng".into(),
                    snaplen: 128,
                    limit_bytes: 1 << 20,
                    force: true,
                }),
            },
            Role::UdpSink {
                rcvbuf: "4M".into(),
                interval: Some("100ms".into()),
            },
            Role::Echo {
                udp: true,
                opts: "nodelay+quickack".into(),
            },
            Role::TransferServe {
                proto: Proto::Tcp,
                dir: "/srv/rx dir".into(),
                once: false,
                remove_dir_at_exit: false,
                tcp_cc: None,
            },
            Role::Generate {
                config,
                start_at: -5,
            },
        ] {
            for listen in [None, Some(Listen::announced(bind))] {
                for until_eof in [false, true] {
                    let a = RoleArgs {
                        role: role.clone(),
                        listen,
                        until_eof,
                    };
                    assert_eq!(RoleArgs::from_argv(&a.to_argv()).unwrap(), a);
                }
            }
        }
    }

    #[test]
    fn a_line_it_did_not_write_is_refused_naming_what() {
        let e = RoleArgs::from_argv(&argv(&["bulk", "--to", "x"])).unwrap_err();
        assert!(e.to_string().contains("not a role"), "{e}");
        let version = RoleArgs::from(Role::Version);
        assert_eq!(version.to_argv(), ["--version"]);
        assert_eq!(RoleArgs::from_argv(&version.to_argv()).unwrap(), version);
        let e = RoleArgs::from_argv(&argv(&["echo", "--udp"])).unwrap_err();
        assert!(e.to_string().contains("--opts is missing"), "{e}");
        let e = RoleArgs::from_argv(&argv(&["sink", "--mss", "1000"])).unwrap_err();
        assert!(
            e.to_string().contains("'--mss' is not a flag of sink"),
            "{e}"
        );
        let e = RoleArgs::from_argv(&argv(&["sink", "--bind"])).unwrap_err();
        assert!(e.to_string().contains("--bind has no value"), "{e}");
        let e = RoleArgs::from_argv(&argv(&[
            "serve",
            "--design",
            "nope",
            "--handler",
            "http",
            "--workers",
            "1",
            "--body",
            "1",
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("--design 'nope'"), "{e}");
    }

    fn designs() -> impl Strategy<Value = Design> {
        prop::sample::select(
            [
                "iterative",
                "fork",
                "prefork-flock",
                "thread",
                "epoll",
                "reuseport",
            ]
            .map(|n| n.parse::<Design>().unwrap())
            .to_vec(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_server_role_round_trips(
            design in designs(),
            http in any::<bool>(),
            workers in 1usize..512,
            body in 0usize..1_000_000,
            port in any::<u16>(),
            announce in any::<bool>(),
            quiet in any::<bool>(),
            until_eof in any::<bool>(),
            label in "[ -~]{0,20}",
            value in "[ -~]{0,20}",
            v6 in any::<bool>(),
        ) {
            let handler = if http { Handler::Http } else { Handler::Stevens };
            let bind: IpAddr = if v6 { "::".parse().unwrap() } else { "10.77.0.2".parse().unwrap() };
            let listen = Some(Listen { bind, port, announce, quiet });
            for role in [
                Role::Serve { design, handler, workers, body },
                Role::Rep {
                    kind: "pingpong".into(),
                    params: Params::new().with("opts", &value),
                    label: label.clone(),
                },
                Role::UdpSink { rcvbuf: value.clone(), interval: None },
            ] {
                let a = RoleArgs { role, listen, until_eof };
                prop_assert_eq!(RoleArgs::from_argv(&a.to_argv()).unwrap(), a);
            }
        }
    }

    #[test]
    fn shown_lines_are_the_binarys_command_lines() {
        assert_eq!(
            shown::lab_suite("writev", true),
            "socklab lab --quick --suite writev"
        );
        assert_eq!(
            shown::lab_suite("states", false),
            "socklab lab --suite states"
        );
        assert_eq!(shown::lab_list(), "socklab lab --list");
        assert_eq!(shown::lab(true), "socklab lab --quick");
        assert_eq!(shown::lab(false), "socklab lab");
        assert_eq!(shown::bulk_reference(), "bulk --reference");
        assert_eq!(
            shown::netem_up("lab1"),
            "socklab netem up --name lab1 --link …"
        );
        assert_eq!(shown::netem_cleanup_all(), "socklab netem cleanup --all");
        assert_eq!(shown::version("~/bin/socklab"), "~/bin/socklab --version");
    }

    #[test]
    fn the_resume_command_is_the_command_line_with_resume() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shown::resumed(words(&["socklab", "lab", "--quick"]).into_iter()),
            words(&["socklab", "lab", "--quick", "--resume"])
        );
        // Already resuming: the same command again.
        let again = words(&["./socklab", "run", "x.toml", "--resume"]);
        assert_eq!(shown::resumed(again.clone().into_iter()), again);
    }
}
