//! The measuring commands' flags, built from their workloads' keys with clap's builder API:
//! a flag is defined once, by its key (name, short form, list, switch, presets, help, modes).
//! A new key of a workload is a new flag of its command, with no other file touched. The
//! shared plan flags (--reps, --warmup, --once, --order, --name) come with them, with the command's
//! defaults.

use std::marker::PhantomData;

use clap::parser::ValueSource;
use clap::{builder::ArgPredicate, Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use socklab_lab::flags::{Given, PlanFlags};
use socklab_lab::model::params::{Key, Modes};

/// A measuring command's flags: its keys, and the defaults of its plan flags.
pub trait FlagTable {
    /// Measured repetitions per cell by default.
    const REPS: usize;
    /// The experiment's name by default.
    const NAME: &'static str;
    /// Keys of which at most one may be given.
    const EXCLUSIVE: &'static [&'static str] = &[];
    /// Warm-up repetitions per cell by default.
    const WARMUP: usize = 1;
    /// The defaults the help shows where the command's differ from the workload's (`""`:
    /// none shown).
    const DEFAULTS: &'static [(&'static str, &'static str)] = &[];
    /// The keys with a flag, in the order their lists vary (the first slowest).
    fn keys() -> Vec<Key>;
}

/// The keys of several workloads as one table: each key once (the first definition), its
/// modes the union of the modes of the tables that hold it; keys without a flag left out.
pub fn merged(tables: &[(&[Key], Modes)]) -> Vec<Key> {
    let mut out: Vec<Key> = Vec::new();
    for (keys, mode) in tables {
        for k in keys.iter().filter(|k| !k.no_flag || !k.presets.is_empty()) {
            match out.iter_mut().find(|o| o.name == k.name) {
                Some(o) => o.modes = o.modes.or(*mode),
                None => out.push(k.modes(*mode)),
            }
        }
    }
    out
}

/// The values of a measuring command's key flags, and its plan flags.
#[derive(Debug, Clone)]
pub struct KeyFlags<T> {
    /// The keys given on the command line, in the table's order (presets resolved).
    pub given: Vec<Given>,
    /// Measured repetitions per configuration.
    pub reps: usize,
    /// Warm-up repetitions per configuration.
    pub warmup: usize,
    /// Whether --reps was given (a one-off command may run differently without it).
    pub reps_given: bool,
    /// Run order.
    pub order: String,
    /// Experiment name in the store.
    pub name: String,
    table: PhantomData<T>,
}

impl<T> KeyFlags<T> {
    /// The values given for `key`, if any.
    pub fn values(&self, key: &str) -> Option<&[String]> {
        self.given
            .iter()
            .find(|g| g.key.name == key)
            .map(|g| g.values.as_slice())
    }

    /// The one value given for `key`, if any.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.values(key).and_then(|v| v.first()).map(String::as_str)
    }
}

impl<T> KeyFlags<T> {
    /// The plan flags as the lab takes them (`seed`: of `--order random`).
    pub fn plan_flags(&self, seed: u64) -> PlanFlags {
        PlanFlags {
            reps: self.reps,
            warmup: self.warmup,
            order: self.order.clone(),
            seed,
            name: self.name.clone(),
            command: socklab_lab::session::command_line(),
        }
    }
}

/// A text built once per process for clap (which holds `&'static str`).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The clap argument of `key`'s own flag; `default` is the default the help shows.
fn key_arg(key: &Key, default: Option<&str>) -> Arg {
    let mut help = match (key.modes.has(Modes::TCP), key.modes.has(Modes::UDP)) {
        (false, true) => format!("UDP (--udp): {}", key.help_text()),
        _ => key.help_text().to_string(),
    };
    if key.list {
        help.push_str(" (list allowed)");
    }
    let default = default.or(key.default_is_value().then_some(key.default));
    if let Some(d) = default.filter(|d| !d.is_empty() && !key.switch) {
        help.push_str(&format!(" [default: {d}]"));
    }
    let mut arg = Arg::new(key.name).long(leak(key.flag_name())).help(help);
    if let Some(c) = key.short {
        arg = arg.short(c);
    }
    if key.switch {
        return arg.action(ArgAction::SetTrue);
    }
    arg = arg.value_name(match key.value_name {
        Some(v) => v,
        None => leak(key.name.to_uppercase()),
    });
    if key.list {
        arg.value_delimiter(',').action(ArgAction::Append)
    } else {
        arg.action(ArgAction::Set)
    }
}

fn given_here(m: &ArgMatches, id: &str) -> bool {
    m.value_source(id) == Some(ValueSource::CommandLine)
}

impl<T: FlagTable> FromArgMatches for KeyFlags<T> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for key in T::keys() {
            if !key.no_flag && given_here(m, key.name) {
                if key.switch {
                    given.push(Given::new(key, ["true"]));
                } else {
                    let vals = m.get_many::<String>(key.name).into_iter().flatten();
                    given.push(Given::new(key, vals.cloned()));
                }
            }
            for p in key.presets {
                if m.get_flag(p.flag) {
                    given.push(Given::preset(key, p));
                }
            }
        }
        let text = |id: &str| m.get_one::<String>(id).cloned().unwrap_or_default();
        Ok(KeyFlags {
            given,
            reps: m.get_one::<usize>("reps").copied().unwrap_or(T::REPS),
            reps_given: given_here(m, "reps"),
            warmup: m.get_one::<usize>("warmup").copied().unwrap_or(T::WARMUP),
            order: text("order"),
            name: text("name"),
            table: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<T: FlagTable> Args for KeyFlags<T> {
    fn augment_args(mut cmd: Command) -> Command {
        for key in T::keys() {
            let own = !key.no_flag;
            if own {
                let shown = T::DEFAULTS.iter().find(|(n, _)| *n == key.name);
                let mut arg = key_arg(&key, shown.map(|(_, d)| *d));
                if T::EXCLUSIVE.contains(&key.name) {
                    let others = T::EXCLUSIVE.iter().filter(|n| **n != key.name);
                    arg = arg.conflicts_with_all(others);
                }
                cmd = cmd.arg(arg);
            }
            for (i, p) in key.presets.iter().enumerate() {
                let mut arg = Arg::new(p.flag)
                    .long(p.flag)
                    .help(p.help)
                    .action(ArgAction::SetTrue);
                if let Some(c) = p.short {
                    arg = arg.short(c);
                }
                // Two values of one key: the presets exclude each other and the key's flag.
                let mut others: Vec<&str> = key.presets[i + 1..].iter().map(|o| o.flag).collect();
                if own {
                    others.push(key.name);
                }
                cmd = cmd.arg(arg.conflicts_with_all(others));
            }
        }
        cmd.arg(
            Arg::new("reps")
                .long("reps")
                .value_name("N")
                .short('r')
                .help("Measured repetitions per configuration")
                .value_parser(clap::value_parser!(usize))
                .default_value(leak(T::REPS.to_string()))
                .default_value_if("once", ArgPredicate::IsPresent, "1"),
        )
        .arg(
            Arg::new("warmup")
                .long("warmup")
                .value_name("N")
                .help("Warm-up repetitions per configuration (stored, excluded from statistics)")
                .value_parser(clap::value_parser!(usize))
                .default_value(leak(T::WARMUP.to_string()))
                .default_value_if("once", ArgPredicate::IsPresent, "0"),
        )
        .arg(
            Arg::new("once")
                .long("once")
                .help("One measured run, no warm-up (--reps 1 --warmup 0), as iperf3 runs")
                .action(ArgAction::SetTrue)
                .conflicts_with_all(["reps", "warmup"]),
        )
        .arg(
            Arg::new("order")
                .long("order")
                .value_name("ORDER")
                .help("Run order: interleaved (A B C A B C), random (seeded), sequential")
                .default_value("interleaved"),
        )
        .arg(
            Arg::new("name")
                .long("name")
                .value_name("NAME")
                .help("Experiment name in the store")
                .default_value(T::NAME),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_lab::model::params::Preset;

    #[derive(Debug, Clone)]
    struct Table;
    const DIR: &[Preset] = &[
        Preset::new("reverse", "down", "the sink sends").short('R'),
        Preset::new("bidir", "bidir", "both ways"),
    ];
    impl FlagTable for Table {
        const REPS: usize = 5;
        const NAME: &'static str = "t";
        const EXCLUSIVE: &'static [&'static str] = &["iterations", "duration"];
        fn keys() -> Vec<Key> {
            merged(&[
                (
                    &[
                        Key::new("strategy", "single", "how").short('s').list(),
                        Key::new("iterations", "", "rounds"),
                        Key::new("duration", "2s", "time"),
                        Key::new("nodelay", "false", "TCP_NODELAY").switch(),
                        Key::new("direction", "up", "which way")
                            .no_flag()
                            .presets(DIR),
                    ],
                    Modes::TCP,
                ),
                (
                    &[
                        Key::new("duration", "2s", "time"),
                        Key::new("drain", "auto", "wait").no_flag(),
                    ],
                    Modes::UDP,
                ),
            ])
        }
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        keys: KeyFlags<Table>,
    }

    fn parse(args: &[&str]) -> Result<KeyFlags<Table>, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).map(|c| c.keys)
    }

    #[test]
    fn flags_come_from_keys_lists_switches_presets_and_plan_defaults() {
        let k = parse(&["-s", "write,writev", "--nodelay", "-R", "--duration", "1s"]).unwrap();
        let shown: Vec<_> = k
            .given
            .iter()
            .map(|g| (g.key.name, g.values.join(",")))
            .collect();
        assert_eq!(
            shown,
            [
                ("strategy", "write,writev".to_string()),
                ("duration", "1s".into()),
                ("nodelay", "true".into()),
                ("direction", "down".into())
            ]
        );
        assert!(k.given[1].key.modes.has(Modes::UDP) && k.given[1].key.modes.has(Modes::TCP));
        assert!(!k.given[0].key.modes.has(Modes::UDP));
        assert_eq!(
            (k.reps, k.warmup, k.order.as_str(), k.name.as_str()),
            (5, 1, "interleaved", "t")
        );
        assert_eq!(k.value("duration"), Some("1s"));
        let none = parse(&["--reps", "2"]).unwrap();
        assert!(none.given.is_empty() && none.reps == 2);
        // --once: one run, no warm-up; with --reps or --warmup it is a usage error.
        let once = parse(&["--once"]).unwrap();
        assert_eq!((once.reps, once.warmup, once.reps_given), (1, 0, false));
        for other in [&["--reps", "3"][..], &["--warmup", "0"][..]] {
            let e = parse(&[&["--once"][..], other].concat()).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
        }
    }

    /// Every key of the measuring commands' workloads is a flag of its command, with no list
    /// of flags anywhere: a new key (bulk's `opts`) is a new flag.
    #[test]
    fn every_workload_key_with_a_flag_is_an_argument_of_its_command() {
        use clap::CommandFactory;
        use socklab_lab::workload::{bulk, load, pingpong, rrul, transfer, udp};
        let cli = crate::Cli::command();
        for (sub, keys) in [
            ("bulk", bulk::KEYS),
            ("bulk", udp::KEYS),
            ("pingpong", pingpong::KEYS),
            ("rrul", rrul::KEYS),
            ("transfer", transfer::KEYS),
            ("load", load::KEYS),
        ] {
            let cmd = cli.find_subcommand(sub).unwrap();
            for key in keys {
                let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
                if !key.no_flag {
                    assert!(
                        longs.contains(&key.flag_name().as_str()),
                        "{sub} --{}",
                        key.flag_name()
                    );
                }
                for p in key.presets {
                    assert!(longs.contains(&p.flag), "{sub} --{}", p.flag);
                }
            }
        }
    }

    #[test]
    fn exclusive_keys_and_presets_of_one_key_conflict_and_flagless_keys_have_none() {
        for args in [
            &["--iterations", "5", "--duration", "1s"][..],
            &["--reverse", "--bidir"][..],
            &["--drain", "1s"][..],
            &["--direction", "down"][..],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
