//! Command-line definitions (clap derive). Parsing only: checked values go to `socklab-lab`.

use socklab_lab::model::params::{Key, Modes};
use socklab_lab::workload::{bulk, link, pingpong, udp, Spec};
use std::path::PathBuf;

use clap::{Args, Subcommand};

mod host_args;
mod keys;
mod transfer_args;
pub use host_args::{HostArgs, SshArgs};
pub use keys::{merged, FlagTable, KeyFlags};
pub use transfer_args::{TransferArgs, TransferCommand, TransferSendArgs, TransferServeArgs};

/// The emulated link shared by `netem` and the measuring commands.
#[derive(Debug, Args, Clone)]
pub struct LinkArgs {
    /// Impairments in netem syntax, both directions (client → server and back), e.g.
    /// "delay 50ms 10ms distribution normal loss 5% rate 100mbit", "rate 20mbit aqm fq_codel",
    /// "trace ./lte-down.trace".
    #[arg(long, value_name = "SPEC")]
    pub link: Option<String>,
    /// Impairments of the server → client direction, if different ("" for none).
    #[arg(long, value_name = "SPEC", requires = "link")]
    pub link_back: Option<String>,
    /// auto (netem where the kernel has it, else tun), tun, netem, udp-proxy.
    #[arg(long, default_value = link::DRIVER.default)]
    pub driver: String,
    /// Seed of the emulator's random decisions (the same seed repeats the same decisions).
    #[arg(long = "link-seed", default_value = link::SEED.default, value_name = "N")]
    pub link_seed: u64,
    /// MTU of the emulated link.
    #[arg(long, default_value = link::MTU.default)]
    pub mtu: u32,
    /// When a repetition counts: valid when at most SHARE of the packets leave LAG late.
    #[arg(long = "link-valid", default_value = link::VALID.default, value_name = "SHARE LAG")]
    pub link_valid: String,
    /// Record every packet entering the emulator (tun driver) into this new pcapng file, the
    /// emulator's decision in each packet's comment; one capture window per repetition.
    #[arg(long, value_name = "FILE.pcapng")]
    pub capture: Option<PathBuf>,
    /// Bytes kept of each captured packet (65535: whole packets).
    #[arg(long, value_name = "BYTES", default_value_t = socklab_lab::roles::netem_args::DEFAULT_SNAPLEN)]
    pub capture_snaplen: u32,
    /// Largest capture file; packets past it are counted, not written.
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    pub capture_limit: String,
    /// Replace an existing regular capture file (a link or anything else is always refused).
    #[arg(long)]
    pub capture_force: bool,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct NetemArgs {
    #[command(subcommand)]
    pub action: Option<NetemCommand>,
    #[command(flatten)]
    pub link: LinkArgs,
    /// A shell command to start in the server namespace first (stopped at the end), e.g.
    /// 'socklab sink --port 5001'; socklab waits until it listens.
    #[arg(long, value_name = "CMD")]
    pub server: Option<String>,
    /// Print the emulator's accounting at the end as one JSON object on stderr (stdout is
    /// the command's).
    #[arg(long)]
    pub json: bool,
    /// The command to run in the client namespace.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum NetemCommand {
    /// Create a lasting link named NAME (namespaces sl-NAME-c, sl-NAME-s) and return.
    Up {
        /// The link's name: a letter, then letters, digits or dashes.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        link: LinkArgs,
        /// Print what was started as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a lasting link.
    Down {
        /// The link's name.
        name: String,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a command in one end of a lasting link.
    Exec {
        /// The link's name.
        name: String,
        /// client or server.
        side: String,
        /// The command.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// List links and namespaces socklab created.
    List {
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build a link, measure it, and print configured against measured values.
    Check {
        #[command(flatten)]
        link: LinkArgs,
        /// Datagrams per direction.
        #[arg(long, default_value_t = 10_000)]
        packets: u64,
        /// Datagram payload size in bytes.
        #[arg(long, default_value_t = 200)]
        size: usize,
        /// Print configured against measured values, the probes' raw counts and the emulator's
        /// accounting as one JSON object (see docs/impairment.md).
        #[arg(long)]
        json: bool,
    },
    /// Remove everything named sl- that socklab left (namespaces of dead runs, their files,
    /// sl- interfaces); --all also stops running links.
    Cleanup {
        /// Also remove the links of running socklab processes.
        #[arg(long)]
        all: bool,
        /// Print what was removed and kept as JSON.
        #[arg(long)]
        json: bool,
    },
    /// (internal) The process that keeps a lasting link.
    #[command(hide = true)]
    Daemon {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        link: LinkArgs,
    },
}

#[derive(Debug, Args)]
pub struct DbArg {
    /// The results database (SQLite).
    #[arg(long, value_name = "PATH", default_value = "socklab.db", global = true)]
    pub db: PathBuf,
}

/// How to print an experiment's statistics (default: the human table).
#[derive(Debug, Args)]
pub struct SummaryFormat {
    /// Print the statistics as JSON on stdout.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the statistics as CSV on stdout (one row per configuration and metric).
    #[arg(long)]
    pub csv: bool,
    /// Print live JSON events on stdout as the run goes (iperf3's; docs/json-stream.md).
    #[arg(long, conflicts_with_all = ["json", "csv"])]
    pub json_stream: bool,
    /// Keep the repetitions marked invalid (emu_valid = 0: the emulated link could not keep
    /// up) in the statistics, run once; by default each is re-run (at most 2 × reps attempts
    /// per cell), left out and counted, "n = 3 (+2 invalid, retried)".
    #[arg(long)]
    pub keep_invalid: bool,
    /// The human table's columns: metric names, e.g. gbps,rtt_us,link_fwd_qdelay_mean_us.
    #[arg(long, value_name = "NAME,…", conflicts_with_all = ["json", "csv"])]
    pub columns: Option<socklab_lab::columns::Columns>,
}

#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, short, default_value_t = 5001)]
    pub port: u16,
    /// Address to listen on (default: all, IPv4 and IPv6).
    #[arg(long, default_value = "::")]
    pub bind: String,
    /// Bytes per read() for raw clients (socklab clients choose their own).
    #[arg(long, default_value = bulk::READ_SIZE.default, value_name = "SIZE")]
    pub read_size: String,
    /// Drop a connection silent for this long.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub idle_timeout: String,
    /// Connections served at once (a thread each); one more is refused (`ERROR sink busy`).
    #[arg(long, default_value_t = socklab_lab::roles::sink::DEFAULT_MAX_CONNS, value_name = "N")]
    pub max_conns: usize,
    /// Receive UDP datagrams of `socklab bulk --udp` instead: count each test's arrivals,
    /// losses, copies, reordering, jitter and one-way delay, and report it.
    #[arg(long, conflicts_with = "read_size")]
    pub udp: bool,
    /// UDP: SO_RCVBUF of the socket (SO_RCVBUFFORCE as root).
    #[arg(long, value_name = "SIZE", default_value = udp::RCVBUF.default)]
    pub rcvbuf: String,
    /// UDP: counts per interval in each test's report (`off`: none).
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,
    /// Store each iperf3 test it finishes in this results database (`socklab results`).
    #[arg(long, value_name = "PATH", conflicts_with = "udp")]
    pub db: Option<PathBuf>,
    /// Print `LISTENING <addr>` on stdout once listening (--udp: also a `REPORT {json}` per test).
    #[arg(long)]
    pub announce: bool,
    /// Do not log each connection (each test) on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `socklab bulk`'s key flags: the bulk workload's keys (TCP) and udp's (`--udp`), each once.
#[derive(Debug, Clone)]
pub struct BulkFlags;

impl FlagTable for BulkFlags {
    const REPS: usize = 5;
    const NAME: &'static str = "bulk";
    const EXCLUSIVE: &'static [&'static str] = <bulk::BulkSpec as Spec>::EXCLUSIVE;
    fn keys() -> Vec<Key> {
        merged(&[(bulk::KEYS, Modes::TCP), (udp::KEYS, Modes::UDP)])
    }
}

#[derive(Debug, Args)]
pub struct BulkArgs {
    /// An emulated link between client and server (see `socklab netem --help`).
    #[command(flatten)]
    pub link: LinkArgs,
    /// UDP bulk: a paced datagram sender against a UDP receiver socklab starts; counts loss,
    /// duplicates, reordering (RFC 4737), jitter (RFC 3550) and one-way delay.
    #[arg(long)]
    pub udp: bool,
    /// The workload's keys as flags, and the plan flags (--reps, --warmup, --order, --name).
    #[command(flatten)]
    pub keys: KeyFlags<BulkFlags>,
    /// Take every combination of --nbufs and --bufsize instead of pairing them.
    #[arg(long)]
    pub cross: bool,
    /// Vary a parameter over a range: KEY=FROM..TO, doubling (or :xN to multiply, :+N to add).
    #[arg(long, value_name = "KEY=FROM..TO")]
    pub sweep: Vec<String>,
    /// Add pipe and memcpy reference rows at the same transfer sizes (seed 000).
    #[arg(long)]
    pub reference: bool,
    #[command(flatten)]
    pub format: SummaryFormat,
    /// Where the roles run (another host over SSH).
    #[command(flatten)]
    pub hosts: crate::cli::HostArgs,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Subcommand)]
pub enum ResultsCommand {
    /// List the experiments in the database.
    #[command(after_help = "Example:\n  socklab results list --db socklab.db")]
    List {
        #[command(flatten)]
        db: DbArg,
    },
    /// Show an experiment's statistics (default: the newest).
    #[command(after_help = "Examples:\n  socklab results show\n  socklab results show 3 --json")]
    Show {
        /// Experiment id.
        id: Option<i64>,
        #[command(flatten)]
        format: SummaryFormat,
        #[command(flatten)]
        db: DbArg,
    },
    /// Export an experiment's time series (--interval runs), tidy: one row per interval per
    /// stream per repetition (default: the newest experiment).
    #[command(
        after_help = "Examples:\n  socklab results series --csv > series.csv\n  socklab results series 7 --json"
    )]
    Series {
        /// Experiment id.
        id: Option<i64>,
        /// Output format: csv or json.
        #[arg(long, default_value = "csv")]
        format: String,
        /// Shorthand for --format csv.
        #[arg(long)]
        csv: bool,
        /// Shorthand for --format json.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        #[command(flatten)]
        db: DbArg,
    },
    /// Export an experiment's repetitions (default: the newest), or its statistics (Prometheus).
    #[command(
        after_help = "Examples:\n  socklab results export --csv > runs.csv\n  socklab results export 3 --format json\n  socklab results export --all --prometheus > socklab.prom  # node_exporter\n\nSee docs/export.md."
    )]
    Export(ExportArgs),
}

/// `socklab results export` arguments.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Experiment id.
    pub id: Option<i64>,
    /// Output format: csv, json, or prometheus (the statistics: mean and 95% CI per cell).
    #[arg(long, default_value = "csv")]
    pub format: String,
    /// Shorthand for --format csv.
    #[arg(long)]
    pub csv: bool,
    /// Shorthand for --format json.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Shorthand for --format prometheus (Prometheus' text exposition format).
    #[arg(long, conflicts_with_all = ["csv", "json"])]
    pub prometheus: bool,
    /// Every experiment, not only one.
    #[arg(long, conflicts_with = "id")]
    pub all: bool,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, short, default_value_t = 7000)]
    pub port: u16,
    /// Address to listen on (default: all, IPv4 and IPv6).
    #[arg(long, default_value = "::")]
    pub bind: String,
    /// Echo datagrams instead of TCP streams.
    #[arg(long)]
    pub udp: bool,
    /// Server-side socket options, e.g. nodelay+quickack.
    #[arg(long, default_value = "baseline")]
    pub opts: String,
    /// Drop a TCP connection silent for this long.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub idle_timeout: String,
    /// Print `LISTENING <addr>` on stdout once listening.
    #[arg(long)]
    pub announce: bool,
    /// Do not log connections on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `socklab pingpong`'s key flags: the ping-pong workload's keys.
#[derive(Debug, Clone)]
pub struct PingFlags;

impl FlagTable for PingFlags {
    const REPS: usize = 10;
    const NAME: &'static str = "pingpong";
    /// The option sets vary slowest: they are what the command compares.
    fn keys() -> Vec<Key> {
        let mut keys = merged(&[(pingpong::KEYS, Modes::ALL)]);
        keys.sort_by_key(|k| k.name != "opts");
        keys
    }
}

#[derive(Debug, Args)]
pub struct PingArgs {
    /// An emulated link between client and server (see `socklab netem --help`).
    #[command(flatten)]
    pub link: LinkArgs,
    /// The workload's keys as flags, and the plan flags (--reps, --warmup, --order, --name).
    #[command(flatten)]
    pub keys: KeyFlags<PingFlags>,
    /// Seed of --order random.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub format: SummaryFormat,
    /// Where the roles run (another host over SSH).
    #[command(flatten)]
    pub hosts: crate::cli::HostArgs,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The experiment file (TOML).
    pub file: PathBuf,
    /// Continue the newest stored experiment of this file: run only the missing repetitions.
    #[arg(long)]
    pub resume: bool,
    /// Use the file's [quick] settings (fewer repetitions, shorter runs).
    #[arg(long)]
    pub quick: bool,
    /// Override the measured repetitions per cell (with --resume: add repetitions).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Override the warm-up repetitions per cell.
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Flag cells whose coefficient of variation exceeds this (0.10 = 10%).
    #[arg(long, default_value_t = 0.10, value_name = "CV")]
    pub noise_cv: f64,
    #[command(flatten)]
    pub format: SummaryFormat,
    /// Use the file's [hosts] ssh_config and remote_socklab: they run programs as you.
    #[arg(long)]
    pub trust_ssh_config: bool,
    /// Where the roles run (another host over SSH).
    #[command(flatten)]
    pub hosts: crate::cli::HostArgs,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Directory to write index.html, report.md and results.csv into.
    #[arg(long, default_value = "socklab-report", value_name = "DIR")]
    pub out: PathBuf,
    /// Experiments to include (default: all).
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub experiment: Vec<i64>,
    /// Report title.
    #[arg(long, default_value = "socklab report")]
    pub title: String,
    /// Keep the repetitions marked invalid (emu_valid = 0: the emulated link could not keep
    /// up) in the statistics; by default they are left out and counted, "n = 3 (+2 invalid)".
    #[arg(long)]
    pub keep_invalid: bool,
    /// Add the comparison of A with B (as `socklab compare A B`) as a section.
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub compare: Vec<String>,
    /// Configuration keys the comparison leaves out when it matches cells (compare's --ignore).
    #[arg(long, value_delimiter = ',', value_name = "KEY", requires = "compare")]
    pub compare_ignore: Vec<String>,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A, the baseline: an experiment id in --db, DB:ID, or a JSON file (results export --json).
    pub a: String,
    /// B, compared with A: as A.
    pub b: String,
    /// Configuration keys left out when cells are matched (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "KEY")]
    pub ignore: Vec<String>,
    /// Only these metrics, all gated (default: every metric; the primary one and latency gated).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub metric: Vec<String>,
    /// Exit 1 when a gated metric is significantly worse by more than this (e.g. 5%).
    #[arg(long, value_name = "PCT", allow_hyphen_values = true)]
    pub threshold: Option<String>,
    /// The whole comparison as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Args)]
pub struct LabArgs {
    /// Short runs: the whole lab in a few minutes.
    #[arg(long)]
    pub quick: bool,
    /// Run only these suites (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub suite: Vec<String>,
    /// List the suites and what each reproduces.
    #[arg(long)]
    pub list: bool,
    /// Continue each suite's newest stored experiment: only the repetitions it misses run.
    #[arg(long)]
    pub resume: bool,
    /// Directory for the report: index.html (inline SVG), report.md, results.csv.
    #[arg(long, default_value = "socklab-report", value_name = "DIR")]
    pub out: PathBuf,
    /// Keep the repetitions marked invalid (emu_valid = 0) in the statistics (see bulk --help).
    #[arg(long)]
    pub keep_invalid: bool,
    /// Print live JSON events of every experiment on stdout (docs/json-stream.md).
    #[arg(long)]
    pub json_stream: bool,
    /// Where the roles run (another host over SSH).
    #[command(flatten)]
    pub hosts: crate::cli::HostArgs,
    #[command(flatten)]
    pub db: DbArg,
}
