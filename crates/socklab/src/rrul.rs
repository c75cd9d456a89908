//! `socklab rrul`: latency under load (flent's RRUL, socklab's way) as a plan of `rrul` cells,
//! one per `--link` (and per `--streams`, `--cc`), stored and printed like `socklab bulk`.

use clap::Args;
use socklab_lab::model::params::{Key, Modes};
use socklab_lab::plan::Plan;
use socklab_lab::session::open_store;
use socklab_lab::workload::rrul::{self, command};

use crate::cli::{merged, DbArg, FlagTable, KeyFlags, LinkArgs, SummaryFormat};
use crate::commands::run_and_print;
use crate::dryrun;
use crate::failure::Failure;

/// The examples and notes under `socklab rrul --help`.
pub const AFTER_HELP: &str = concat!(
    "Examples:\n",
    "  socklab rrul --link \"rate 20mbit limit 3000\" \\\n",
    "      --link \"rate 20mbit limit 3000 aqm codel\"   # as root: bloat, cured\n",
    "  socklab rrul --link \"rate 20mbit delay 5ms limit 300\" --streams 2 \\\n",
    "      --idle 1s --duration 4s --reps 3 --warmup 0\n",
    "  socklab rrul --duration 2s --idle 1s --reps 1   # loopback, no root\n",
    "  socklab lab --suite rrul      # as root; about 6 min\n",
    "\n",
    "Each repetition probes the path alone first (--idle: a 64-byte ping-pong on one TCP connection with TCP_NODELAY and one on a UDP socket, every --probe-interval), then beside --streams TCP streams up and as many down (--duration; the same BULK/2 bidir test as socklab bulk --bidir), and reports the probes' round trips idle and loaded (p50, p99), the latency the load added (loaded - idle; the primary metric is the TCP probes' median), the throughput each way and the UDP probes' loss. A UDP probe not answered within --probe-timeout is lost. The sink and the echo servers run on the link's server side. --link may be given several times (or as a comma list): one cell each; --link-back applies to all. The link needs the tun or netem driver (root): udp-proxy relays UDP only. The time series (throughput each way, the probes' RTT) is stored (socklab results series) and drawn in the report as flent does. See docs/rrul.md.\n\n",
    "Exit codes: 0 success; 1 a run failed; 2 bad parameter; 130 interrupted."
);

/// `socklab rrul`'s key flags: the rrul workload's keys.
#[derive(Debug, Clone)]
pub struct RrulFlags;

impl FlagTable for RrulFlags {
    const REPS: usize = 3;
    const NAME: &'static str = "rrul";
    fn keys() -> Vec<Key> {
        merged(&[(rrul::KEYS, Modes::ALL)])
    }
}

/// `socklab rrul` arguments.
#[derive(Debug, Args)]
pub struct RrulArgs {
    /// The emulated link (netem syntax; none: loopback); repeat it or give a list: a cell each.
    #[arg(long, value_name = "SPEC")]
    pub link: Vec<String>,
    /// Impairments of the server → client direction, if different ("" for none).
    #[arg(long, value_name = "SPEC")]
    pub link_back: Option<String>,
    /// auto (netem where the kernel has it, else tun), tun, netem (udp-proxy relays UDP only).
    #[arg(long, default_value = "auto")]
    pub driver: String,
    /// Seed of the emulator's random decisions.
    #[arg(long = "link-seed", default_value_t = 1, value_name = "N")]
    pub link_seed: u64,
    /// MTU of the emulated link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// When a repetition counts: valid when at most SHARE of the packets leave LAG late.
    #[arg(
        long = "link-valid",
        default_value = "1% 1ms",
        value_name = "SHARE LAG"
    )]
    pub link_valid: String,
    /// Record every packet entering the emulator into this pcapng file (tun driver).
    #[arg(long, value_name = "FILE.pcapng")]
    pub capture: Option<std::path::PathBuf>,
    /// Bytes kept of each captured packet.
    #[arg(long, value_name = "BYTES", default_value_t = command::CAPTURE_SNAPLEN)]
    pub capture_snaplen: u32,
    /// Largest capture file.
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    pub capture_limit: String,
    /// Replace the capture file if it exists as a regular file (never a link).
    #[arg(long)]
    pub capture_force: bool,
    /// The workload's keys as flags, and the plan flags (--reps, --warmup, --order, --name).
    #[command(flatten)]
    pub keys: KeyFlags<RrulFlags>,
    /// Seed of --order random.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub format: SummaryFormat,
    #[command(flatten)]
    pub db: DbArg,
}

impl RrulArgs {
    /// The link flags in the shape the other commands share (the links joined as one list).
    fn link_args(&self) -> LinkArgs {
        LinkArgs {
            link: (!self.link.is_empty()).then(|| self.link.join(",")),
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
}

/// The plan of `socklab rrul`.
pub fn plan(a: &RrulArgs) -> Result<Plan, Failure> {
    let mut group = command::group(&a.keys.given, !a.link.is_empty(), a.link_back.is_some())?;
    a.link_args().add_to(&mut group);
    Ok(a.keys.plan_flags(a.seed).plan(&[group])?)
}

/// `socklab rrul`.
pub fn rrul(a: RrulArgs, dry: bool) -> Result<(), Failure> {
    let plan = plan(&a)?;
    let capture = a.link_args().workload_capture()?;
    if dry {
        return dryrun::print_plan(&dryrun::keeping_invalid(plan, a.format.keep_invalid));
    }
    let mut store = open_store(&a.db.db)?;
    let hosts = socklab_lab::hosts::HostPlan::default();
    run_and_print(&plan, &mut store, &hosts, &a.format, capture.as_ref()).map(|_| ())
}
