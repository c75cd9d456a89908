//! `socklab load`: the load generator (wrk2/ab-class) against a stevens, echo or HTTP server.

use clap::Args;
use socklab_lab::model::params::{Key, Modes};
use socklab_lab::plan::Group;
use socklab_lab::session::{open_store, reach_targets};
use socklab_lab::workload::load::{self, command, text};

use crate::cli::{merged, FlagTable, KeyFlags, SummaryFormat};
use crate::commands::{run_and_print, run_observed};
use crate::failure::{out, Failure};
use crate::progress::{LiveLines, OneRun};

/// `socklab load`'s key flags: the load workload's keys that a one-off run against a server
/// takes (the server's own keys, design and workers, have no flag here), with the command's
/// defaults.
#[derive(Debug, Clone)]
pub struct LoadFlags;

impl FlagTable for LoadFlags {
    const REPS: usize = 1;
    const WARMUP: usize = 0;
    const NAME: &'static str = "load";
    const DEFAULTS: &'static [(&'static str, &'static str)] = &[
        ("to", ""),
        ("handler", "stevens with --clients, http otherwise"),
        ("clients", ""),
        ("loops", ""),
        ("bytes", "100"),
        ("connections", "10"),
        ("requests", ""),
        (
            "duration",
            "10s when no --requests/--loops; otherwise a 5-minute cap",
        ),
        ("threads", "the number of CPUs"),
        ("source_addrs", "1"),
    ];
    fn keys() -> Vec<Key> {
        merged(&[(load::KEYS, Modes::ALL)])
    }
}

/// `socklab load` arguments.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The workload's keys as flags (--to is required), and the plan flags: --reps N repeats
    /// the run (mean, sd and 95% CI per metric; without it one run, printed like wrk/ab),
    /// --warmup (with --reps), --name.
    #[command(flatten)]
    pub keys: KeyFlags<LoadFlags>,
    /// Where the roles run: load generators on other hosts (--generators), over SSH.
    #[command(flatten)]
    pub hosts: crate::cli::HostArgs,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the report as CSV (a header and one row).
    #[arg(long)]
    pub csv: bool,
    /// Print live JSON events on stdout as the run goes (iperf3's; docs/json-stream.md).
    #[arg(long, conflicts_with_all = ["json", "csv"])]
    pub json_stream: bool,
    /// Keep the repetitions marked invalid (emu_valid = 0) in the statistics (see bulk --help).
    #[arg(long)]
    pub keep_invalid: bool,
    /// The results database (SQLite) the run is stored in.
    #[arg(long, value_name = "PATH", default_value = "socklab.db")]
    pub db: std::path::PathBuf,
}

/// The command's help epilogue.
pub const AFTER_HELP: &str = concat!(
    "Examples:\n",
    "  socklab load --to 127.0.0.1:8080 --connections 32 --duration 10s\n",
    "  socklab load --to 127.0.0.1:8080 --connections 32 --rate 20000 \\\n",
    "      --duration 30s                  # open loop (wrk2)\n",
    "  socklab load --to 127.0.0.1:9999 --clients 5 --loops 500 --bytes 4000\n",
    "  socklab load --to 127.0.0.1:7000 --protocol echo --bytes 64 \\\n",
    "      --requests 100000 --json\n",
    "  socklab load --to 127.0.0.1:8080 --new-connection-per-request \\\n",
    "      --source-addrs 8 --duration 10s\n",
    "  socklab load --to 127.0.0.1:8080 --connections 32 --duration 5s \\\n",
    "      --reps 10                        # repeated: mean and 95% CI\n",
    "  socklab load --to 127.0.0.1:8080 --duration 10s --interval 1s\n",
    "\n",
    "The first is closed loop over keep-alive HTTP (wrk), the third Stevens' client.c. Failures are counted by kind (connect, read, write, timeout, bad reply); requests in flight when the run ends are not counted. Open loop reports latency from the intended send time (corrected) and from the actual send (uncorrected). The generator's own lag and CPU are reported; a warning says when the client was the bottleneck. Every run is an experiment in --db (socklab results, socklab report). See docs/load.md.\n\nExit codes: 0 success; 1 no request completed, the run stopped early (ephemeral ports exhausted) or could not start; 2 bad argument; 130 interrupted (what was measured is printed)."
);

pub fn load(args: LoadArgs, dry: bool) -> Result<(), Failure> {
    let k = &args.keys;
    let one = command::one_off(&k.given, k.reps_given.then_some(k.reps), k.warmup)?;
    args.hosts.check_to(Some(&one.to))?;
    let hosts = args.hosts.plan()?;
    let plan = k.plan_flags(1).plan(&[Group::new("load", one.params)])?;
    let plan = crate::dryrun::keeping_invalid(plan, args.keep_invalid);
    if dry {
        return crate::dryrun::print_plan(&plan);
    }
    command::ensure_descriptors(one.connections)?;
    reach_targets(&plan, &hosts)?;
    let mut store = open_store(&args.db)?;
    if k.reps_given || args.json_stream {
        let format = SummaryFormat {
            json: args.json,
            csv: args.csv,
            json_stream: args.json_stream,
            keep_invalid: args.keep_invalid,
            columns: None,
        };
        return run_and_print(&plan, &mut store, &hosts, &format, None).map(|_| ());
    }
    // One repetition, no warm-up, through the Runner into the store; printed from the store.
    let live = LiveLines::for_format(args.json, args.csv);
    let mut observer = OneRun::new(!args.json && !args.csv).with_live(live);
    let id = run_observed(&plan, &mut store, &hosts, None, &mut observer).map_err(|(_, f)| f)?;
    let format = text::Format {
        json: args.json,
        csv: args.csv,
        intervals: one.intervals,
    };
    let done = text::finish(&mut store, id, format)?;
    out(&done.text)?;
    match done.end {
        text::End::Done => Ok(()),
        text::End::Failed(why) => Err(Failure::Run(why)),
        text::End::Interrupted(why) => Err(Failure::Interrupted(why)),
    }
}
