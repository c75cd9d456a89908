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
    after_help = include_str!("help/cli.txt")
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
        after_help = include_str!("help/sink.txt")
    )]
    Sink(SinkArgs),
    /// Measure bulk throughput: TCP by write strategy and buffer size, or UDP at a paced rate
    /// (--udp: loss, reordering, jitter, one-way delay).
    #[command(
        after_help = include_str!("help/bulk.txt")
    )]
    Bulk(Box<BulkArgs>),
    /// Run an echo server (TCP, or UDP with --udp) for request/response tests.
    #[command(
        after_help = include_str!("help/echo.txt")
    )]
    Echo(EchoArgs),
    /// Measure request/response round trips, per socket-option configuration.
    #[command(
        after_help = include_str!("help/pingpong.txt")
    )]
    Pingpong(Box<PingArgs>),
    /// Transfer files over TCP or socklab's reliable UDP transport (seed 004): a server, a
    /// client, or (without a subcommand) both sides spawned and measured as an experiment.
    #[command(
        after_help = include_str!("help/transfer.txt")
    )]
    Transfer(Box<TransferArgs>),
    /// Run an experiment file (TOML): a matrix, repeated, interleaved, resumable.
    #[command(
        after_help = include_str!("help/run.txt")
    )]
    Run(RunArgs),
    /// Write the report (HTML with inline SVG, Markdown, CSV) from the results database.
    #[command(
        after_help = include_str!("help/report.txt")
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
        after_help = include_str!("help/lab.txt")
    )]
    Lab(LabArgs),
    /// Emulate an impaired link (delay, jitter, loss, duplication, corruption, reordering,
    /// rate) between two network namespaces, and run commands across it.
    #[command(
        after_help = include_str!("help/netem.txt")
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
