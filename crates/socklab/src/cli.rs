//! Command-line definitions (clap derive). Parsing only: checked values go to `socklab-lab`.

use socklab_lab::model::params::{Key, Modes};
use socklab_lab::workload::{bulk, link, pingpong, udp, Spec};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod keys;
mod transfer_args;
pub use keys::{merged, FlagTable, KeyFlags};
pub use transfer_args::{TransferArgs, TransferCommand, TransferSendArgs, TransferServeArgs};

#[derive(Debug, Parser)]
#[command(
    name = "socklab",
    version,
    about = "A Linux socket performance laboratory",
    long_about = "A Linux socket performance laboratory: bulk throughput by write strategy and buffer size, with statistics over repetitions, every result stored in SQLite, and reports.",
    after_help = concat!(
        "Examples:\n",
        "  socklab lab --quick           # the quick suites: tables, a report (~3 min)\n",
        "  socklab bulk --strategy write,writev,single --nbufs 15,30,60 \\\n",
        "      --bufsize 100,50,25 --iterations 20000\n",
        "  socklab sink --port 5001      # a server that reads and counts\n",
        "  socklab results list          # what the database holds\n",
        "  socklab --dry-run lab         # the plan and its time, nothing run\n",
        "\n",
        "Every command takes --dry-run: the arguments and the plan (cells, runs, time bounds) are checked and printed, nothing is measured. A plan that will run for minutes says so before it starts.\n\nExit codes: 0 success; 1 a run or I/O failed; 2 bad command line or parameter; 130 interrupted (finished repetitions are kept)."
    )
)]
pub struct Cli {
    /// Check the command line and print what would run (an experiment's cells, runs and time
    /// bounds; a server's address), then exit without measuring, listening or changing
    /// anything. It does not check the machine (root, a server at --to, the database).
    #[arg(long, global = true)]
    pub dry_run: bool,
    /// (internal) A role started by a controller on another host: stop as on SIGTERM when
    /// stdin ends (the SSH session closed), and print the process's rusage (`USAGE`) at exit.
    #[arg(long, global = true, hide = true)]
    pub until_eof: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a TCP server that reads and counts bytes and read() calls (--udp: the receiver of
    /// `socklab bulk --udp`).
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab sink --port 5001\n",
        "  socklab sink --port 5001 --read-size 1500   # count reads as seed 003's did\n",
        "  socklab sink --udp --port 5001              # the receiver of bulk --udp\n",
        "\n",
        "Raw clients (any program that connects and writes) are counted too. Protocol: a socklab client sends one request line, the sink answers READY, the client streams and shuts down its write half, the sink answers RESULT with bytes, reads, CPU time and (on request) the stream's BLAKE3 hash. Clients are served at once, each on its own thread (--max-conns); an idle or stalled client costs only its own connection (--idle-timeout). Ctrl-C or SIGTERM (repeated too) stops it within about 200 ms; a third one exits at once. See docs/sink-protocol.md."
    )
    )]
    Sink(SinkArgs),
    /// Measure bulk throughput: TCP by write strategy and buffer size, or UDP at a paced rate
    /// (--udp: loss, reordering, jitter, one-way delay).
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab bulk --to 127.0.0.1:5001 --strategy writev --nbufs 100 \\\n",
        "      --bufsize 15 --iterations 20000\n",
        "  socklab bulk --strategy write,writev,single --nbufs 15,30,60,100 \\\n",
        "      --bufsize 100,50,25,15 --reps 10      # 132 runs of 2 s: over 4 min\n",
        "  socklab bulk --sweep bufsize=1K..512K --reps 10 --json   # about 4 min\n",
        "  socklab bulk --strategy single,sendfile,splice,zerocopy --bufsize 128K \\\n",
        "      --duration 5s --reference             # over 2 min\n",
        "  socklab bulk --udp --rate 1G --size 1472 --link \"loss 2% delay 10ms 2ms\" \\\n",
        "      --driver udp-proxy      # loss, jitter, reordering, one-way delay\n",
        "  socklab bulk --udp --rate max              # the highest rate without loss\n",
        "  socklab bulk --interval 100ms --omit 2s --duration 10s --reps 3\n",
        "  socklab bulk --streams 4 --duration 10s    # iperf3 -P 4\n",
        "  socklab bulk --reverse                     # the sink sends (iperf3 -R)\n",
        "  socklab bulk --bidir                       # both ways at once\n",
        "  socklab bulk --cc cubic,bbr --pacing-rate 500M --affinity 0 \\\n",
        "      --server-affinity 1\n",
        "\n",
        "Lists: --nbufs and --bufsize lists of equal length are paired (15x100, 30x50, …); --cross takes every combination instead. Other lists (--strategy, --cc, --streams, --pacing-rate, --opts) are crossed. --streams N runs N connections (each its own thread on both ends, all started at once); --reverse makes the sink send, --bidir both (N each way); each stream's Gbit/s and Jain's fairness are stored beside the total (every stream's bytes over the span to the last stream's end). Without --to a sink is started as a child process on a free loopback port. A run lasts --duration (default 2s), --iterations or --bytes; --dry-run prints the plan and its time. --interval prints a line per interval as the run goes (JSON lines with --json) and stores the time series (socklab results series); --omit leaves the start out of the summary (iperf3 -O). A repetition still running 10 s past its --duration (plus the link's round trips; --timeout sets another bound), or whose sink accepts nothing for 30 s, is stored as failed and the others go on. Ctrl-C or SIGTERM (also twice, as 'timeout' sends) stops within 200 ms and keeps every finished repetition; a third exits at once. With --udp the sender is paced at --rate (default 1G) and socklab starts the receiver (socklab sink --udp); over --link the emulator's own counts are stored beside the receiver's. See docs/bulk.md.\n\nExit codes: 0 success; 1 a run failed; 2 bad parameter; 130 interrupted."
    )
    )]
    Bulk(Box<BulkArgs>),
    /// Run an echo server (TCP, or UDP with --udp) for request/response tests.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab echo --port 7000\n",
        "  socklab echo --port 7000 --udp\n",
        "  socklab echo --port 7000 --opts nodelay+quickack   # server-side options\n",
        "\n",
        "It echoes exactly what it receives (one thread per TCP connection). On Ctrl-C it prints `user time = U, sys time = S`."
    )
    )]
    Echo(EchoArgs),
    /// Measure request/response round trips, per socket-option configuration.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab pingpong --to 127.0.0.1:7000 --size 64 --count 500 --reps 1000\n",
        "  socklab pingpong --opts baseline,nodelay,quickack,keepalive,fastopen \\\n",
        "      --reps 200\n",
        "  socklab pingpong --udp --timeout 50ms --retries 3\n",
        "  socklab pingpong --new-connection-per-message --opts baseline,fastopen\n",
        "  socklab pingpong --to 127.0.0.1:8080 --reply any --timeout 2s\n",
        "\n",
        "Options: nodelay, quickack, keepalive[=IDLE/INTVL/CNT], fastopen, reuseaddr, reuseport, cork, sndbuf=SIZE, rcvbuf=SIZE, cc=NAME, notsent-lowat=SIZE, busy-poll=USEC, mss=BYTES; combine with + (nodelay+quickack); prefix client: or server: for one side. Each is read back with getsockopt and stored. Without --to an echo server is started per option set.\n\nExit codes: 0 success; 1 a run failed; 2 bad parameter; 130 interrupted."
    )
    )]
    Pingpong(Box<PingArgs>),
    /// Transfer files over TCP or socklab's reliable UDP transport (seed 004): a server, a
    /// client, or (without a subcommand) both sides spawned and measured as an experiment.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab transfer serve --proto rudp --port 9000 --dir ./incoming\n",
        "  socklab transfer send --proto rudp --to 127.0.0.1:9000 FILE...\n",
        "  socklab transfer --proto tcp,rudp --workload seed-004 --reps 10\n",
        "  socklab transfer --proto tcp,rudp --tcp-cc bbr --timeout 30s \\\n",
        "      --link \"rate 100mbit limit 2000 delay 50ms loss 10%\" \\\n",
        "      --link-back \"delay 50ms\" --reps 5 --warmup 0    # as root; under 1 min\n",
        "  socklab transfer --proto tcp --workload custom --file-sizes 1M,10K,10K\n",
        "\n",
        "Without a subcommand both sides are spawned per repetition (the server as a child 'socklab transfer serve --once' into a temporary directory), every received file is compared with what was sent, and the results are stored like bulk's. Lists (--proto, --tcp-cc, --link) are crossed; --tcp-cc applies to tcp only (rudp records n/a). seed-004 is 10 large (987000 B = 658 packets of 1500 B) and 10 small (10500 B = 7 packets) files, interleaved; see docs/transfer.md. Under heavy loss CUBIC can take minutes per transfer (at 10% loss and 100 ms RTT it does not move seed-004's 10 MB within the 60 s --timeout): a repetition past its --timeout is stored as failed; --dry-run prints the plan's time bounds.\n\nExit codes: 0 success; 1 a run failed (or a repetition failed: it is stored with failed = 1); 2 bad parameter; 130 interrupted."
    )
    )]
    Transfer(Box<TransferArgs>),
    /// Run an experiment file (TOML): a matrix, repeated, interleaved, resumable.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab run experiments/writev.toml\n",
        "  socklab run experiments/writev.toml --resume    # continue a killed run\n",
        "  socklab run experiments/writev.toml --resume --reps 40   # add repetitions\n",
        "  socklab run experiments/bufsize.toml --quick\n",
        "  socklab run experiments/lossy.toml --dry-run    # its cells, runs and time\n",
        "\n",
        "The file format is documented in experiments/writev.toml and docs/experiments.md.\n\nExit codes: 0 success; 1 a run failed; 2 bad file or parameter; 130 interrupted (finished repetitions are kept; --resume continues)."
    )
    )]
    Run(RunArgs),
    /// Write the report (HTML with inline SVG, Markdown, CSV) from the results database.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab report            # every experiment in socklab.db, socklab-report/\n",
        "  socklab report --db lab.db --out report/ --experiment 3,4",
    )
    )]
    Report(ReportArgs),
    /// Read the results database: list experiments, show one, export repetitions.
    #[command(subcommand)]
    Results(ResultsCommand),
    /// Run built-in suites that reproduce the seeds' tables, and write a report.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab lab --quick          # every suite, short (~3 min), then a report\n",
        "  socklab lab --suite writev   # one suite, full length\n",
        "  socklab lab --list           # the suites and what each reproduces\n",
        "  socklab lab --dry-run        # every suite's cells, runs and time",
    )
    )]
    Lab(LabArgs),
    /// Emulate an impaired link (delay, jitter, loss, duplication, corruption, reordering,
    /// rate) between two network namespaces, and run commands across it.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab netem --link \"delay 50ms 10ms distribution normal loss 5%\" \\\n",
        "      --server 'socklab sink --port 5001' -- socklab bulk --to server:5001\n",
        "  socklab netem --link \"loss 1%\" --server 'socklab echo --port 7000' \\\n",
        "      -- socklab pingpong --to server:7000 --count 100 --reps 3\n",
        "  socklab netem up --link \"loss 10%\" --name lab1     # a lasting link\n",
        "  socklab netem exec lab1 server -- socklab echo --port 7000 &\n",
        "  socklab netem exec lab1 client -- socklab pingpong --to server:7000\n",
        "  socklab netem down lab1\n",
        "  socklab netem check --link \"loss 5% delay 20ms\"   # configured vs measured\n",
        "  socklab netem check --link \"loss 5%\" --json     # the same, machine-readable\n",
        "  socklab netem --link \"loss 2%\" --capture link.pcapng \\\n",
        "      --server 'socklab echo --port 7000' -- socklab pingpong --to server:7000\n",
        "  socklab netem cleanup       # leftovers of killed runs (everything named sl-)\n",
        "\n",
        "The command after -- runs in the client namespace; it must be installed (socklab's own pingpong, bulk or transfer always are). The spec is netem's own syntax (paste the arguments of 'tc qdisc add dev X root netem …', slot and ecn included), plus socklab's fifo (jitter without reordering), fixcsum (corruption that reaches the application), aqm codel|fq_codel|pie (a queue discipline at the rate), trace FILE (a Mahimahi trace) and rate schedules (rate 100mbit@0s 10mbit@5s); see docs/impairment.md. --link applies to both directions unless --link-back is given. Inside the namespaces the names client (10.77.0.1) and server (10.77.0.2) resolve. --capture FILE.pcapng (on every command that takes --link; tun driver) records every packet entering the emulator with its decision (dropped, aqm-marked, queued_ns=…) in the packet's comment; see docs/impairment.md.\n\nDrivers: tun (socklab's own emulator between TUN devices, needs root), netem (the kernel's tc netem on veth, where the kernel has it), auto (netem if present, else tun), udp-proxy (no root, UDP only: socklab pingpong --udp --link … --driver udp-proxy).\n\nExit codes: the command's own; 1 the link failed; 2 bad spec or argument; 130 interrupted."
    )
    )]
    Netem(Box<NetemArgs>),
    /// Run one of the server designs of UNP ch. 30 (or a modern one) until SIGINT/SIGTERM.
    #[command(after_help = crate::serve::AFTER_HELP)]
    Serve(Box<crate::serve::ServeArgs>),
    /// Latency under load (flent's RRUL): TCP and UDP probes idle, then beside TCP streams
    /// up and down, over an emulated link; the latency the load added, throughput each way.
    #[command(after_help = crate::rrul::AFTER_HELP)]
    Rrul(Box<crate::rrul::RrulArgs>),
    /// Load-test a server (wrk2/ab-class): stevens, echo or HTTP; closed or open loop.
    #[command(after_help = crate::load::AFTER_HELP)]
    Load(Box<crate::load::LoadArgs>),
    /// Hosts reached over OpenSSH: check them (version, facts, clock offset), install socklab.
    #[command(subcommand)]
    Hosts(crate::hosts::HostsCommand),
}

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
    /// When a repetition counts: SHARE LAG, valid when at most SHARE of the packets leave the
    /// emulator more than LAG after their scheduled time (others are marked invalid).
    #[arg(long = "link-valid", default_value = link::VALID.default, value_name = "SHARE LAG")]
    pub link_valid: String,
    /// Record every packet entering the emulator, both directions, into this pcapng file, the
    /// emulator's decision (dropped, duplicated, corrupted, reordered, queued time, ECN mark)
    /// in each packet's comment (tun driver; one capture window per repetition).
    #[arg(long, value_name = "FILE.pcapng")]
    pub capture: Option<PathBuf>,
    /// Bytes kept of each captured packet (65535: whole packets).
    #[arg(long, value_name = "BYTES", default_value_t = socklab_lab::roles::netem_args::DEFAULT_SNAPLEN)]
    pub capture_snaplen: u32,
    /// Largest capture file; packets past it are counted, not written.
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    pub capture_limit: String,
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
    /// Keep the repetitions marked invalid (emu_valid = 0: the emulated link could not keep
    /// up) in the statistics, run once; by default each is re-run (at most 2 × reps attempts
    /// per cell), left out and counted, "n = 3 (+2 invalid, retried)".
    #[arg(long)]
    pub keep_invalid: bool,
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
    /// Connections served at once (each on its own thread); one more is refused with
    /// `ERROR sink busy`.
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
    /// Print `LISTENING <addr>` on stdout once listening (for scripts and the runner; with
    /// --udp also one `REPORT {json}` line per test).
    #[arg(long)]
    pub announce: bool,
    /// Do not log each connection (each test) on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `socklab bulk`'s key flags: the bulk workload's keys (TCP) and the udp workload's
/// (`--udp`), each once.
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
    pub hosts: crate::hosts::HostArgs,
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
    /// Export every repetition of an experiment (default: the newest).
    #[command(
        after_help = "Examples:\n  socklab results export --csv > runs.csv\n  socklab results export 3 --format json"
    )]
    Export {
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
    pub hosts: crate::hosts::HostArgs,
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
    /// Where the roles run (another host over SSH).
    #[command(flatten)]
    pub hosts: crate::hosts::HostArgs,
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
    /// Directory for the report: index.html (inline SVG), report.md, results.csv.
    #[arg(long, default_value = "socklab-report", value_name = "DIR")]
    pub out: PathBuf,
    /// Keep the repetitions marked invalid (emu_valid = 0: the emulated link could not keep
    /// up) in the statistics, run once; by default each is re-run (at most 2 × reps attempts
    /// per cell), left out and counted, "n = 3 (+2 invalid, retried)".
    #[arg(long)]
    pub keep_invalid: bool,
    /// Where the roles run (another host over SSH).
    #[command(flatten)]
    pub hosts: crate::hosts::HostArgs,
    #[command(flatten)]
    pub db: DbArg,
}
