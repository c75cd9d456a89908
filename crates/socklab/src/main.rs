//! `socklab`: argument parsing and printing only; the work is done in the library crates.

mod cli;
mod commands;
mod dryrun;
mod failure;
mod flags;
mod hosts;
mod labcmds;
mod load;
mod netem;
mod progress;
mod rrul;
mod serve;
mod transfer;
mod udp;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cli::*;
use crate::failure::Failure;
use crate::flags::{Keys, LOAD, PINGPONG};
use socklab_lab::workload as wl;

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
        "Lists: --nbufs and --bufsize lists of equal length are paired (15x100, 30x50, …); --cross takes every combination instead. Other lists (--strategy, --cc, --streams, --pacing-rate, --opts) are crossed. --streams N runs N connections (each its own thread on both ends, all started at once); --reverse makes the sink send, --bidir both (N each way); each stream's Gbit/s and Jain's fairness are stored beside the total (every stream's bytes over the span to the last stream's end). Without --to a sink is started as a child process on a free loopback port. A run lasts --duration (default 2s), --iterations or --bytes; --dry-run prints the plan and its time. --interval prints a line per interval as the run goes (JSON lines with --json) and stores the time series (socklab results series); --omit leaves the start out of the summary (iperf3 -O). A repetition still running 10 s past its --duration (plus the link's round trips; --timeout sets another bound), or whose sink accepts nothing for 30 s, is stored as failed and the others go on. Ctrl-C or SIGTERM (also twice, as 'timeout' sends) stops within 200 ms and keeps every finished repetition; a third exits at once. With --udp the sender is paced at --rate (default 1G) and socklab starts the receiver (socklab sink --udp), or an iperf3 -s at --to iperf3://HOST receives (sends with --reverse); over --link the emulator's own counts are stored beside the receiver's. See docs/bulk.md.\n\nExit codes: 0 success; 1 a run failed; 2 bad parameter; 130 interrupted."
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
        "  socklab report --db lab.db --out report/ --experiment 3,4\n",
        "  socklab report --compare 3,4   # and a comparison of 3 (A) with 4 (B)",
    )
    )]
    Report(ReportArgs),
    /// Compare two experiments (ids, DB:ID or saved JSON) cell by cell: faster, slower, the
    /// same, or cannot tell; with --threshold, a CI gate.
    #[command(
        after_help = "Examples:\n  socklab compare 3 4 --ignore bufsize --threshold 5%   # ids in socklab.db\n  socklab compare base.json new.db:1 --metric gbps --json\n  socklab results export 3 --json > base.json   # a baseline\n\nExit codes: 0 no gated metric significantly worse beyond --threshold (or no threshold); 1 one is; 2 bad input. See docs/compare.md."
    )]
    Compare(CompareArgs),
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

/// The keys whose flags `command` takes (none for a command without workload keys).
pub fn keys_of(command: &Command) -> Keys {
    match command {
        Command::Bulk(_) => &[wl::bulk::KEYS, wl::udp::KEYS],
        Command::Pingpong(_) => PINGPONG,
        Command::Transfer(_) => &[wl::transfer::KEYS],
        Command::Load(_) => LOAD,
        Command::Rrul(_) => &[wl::rrul::KEYS],
        _ => &[],
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = e.exit_code();
            if e.use_stderr() {
                let line = socklab_lab::flags::usage::one_line(&e.render().to_string(), "--help");
                eprintln!("socklab: error: {line}");
            } else {
                // --help, --version.
                let _ = e.print();
            }
            return ExitCode::from(code as u8);
        }
    };
    let dry = cli.dry_run;
    // The key descriptors that give the flags of the keys a library error names.
    let keys = keys_of(&cli.command);
    if cli.until_eof {
        socklab_lab::roles::remote::stop_at_end_of_stdin();
    }
    let result = match cli.command {
        Command::Sink(a) => commands::sink(a, dry),
        Command::Bulk(a) => commands::bulk(*a, dry),
        Command::Echo(a) => commands::echo(a, dry),
        Command::Pingpong(a) => commands::pingpong(*a, dry),
        Command::Transfer(a) => transfer::transfer(*a, dry),
        Command::Run(a) => labcmds::run(a, dry),
        Command::Report(a) => labcmds::report(a, dry),
        Command::Compare(a) => labcmds::compare(a, dry),
        Command::Results(r) => labcmds::results(r, dry),
        Command::Lab(a) => labcmds::lab(a, dry),
        Command::Netem(a) => netem::netem(*a, dry),
        Command::Serve(a) => serve::serve(*a, dry),
        Command::Load(a) => load::load(*a, dry),
        Command::Rrul(a) => rrul::rrul(*a, dry),
        Command::Hosts(h) => hosts::hosts(h, dry),
    };
    if cli.until_eof && result.is_ok() {
        socklab_lab::roles::remote::report_usage();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Exit(code)) => ExitCode::from(code),
        Err(f) => {
            eprintln!("socklab: error: {}", flags::in_flags(&f.message(), keys));
            ExitCode::from(f.code())
        }
    }
}
