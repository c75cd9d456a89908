//! `socklab`: argument parsing and printing only; the work is done in the library crates.

mod cli;
mod commands;
mod dryrun;
mod hosts;
mod load;
mod netem;
mod progress;
mod serve;
mod transfer;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::commands::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = e.exit_code();
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    let dry = cli.dry_run;
    if cli.until_eof {
        hosts::stop_at_end_of_stdin();
    }
    let result = match cli.command {
        Command::Sink(a) => commands::sink(a, dry),
        Command::Bulk(a) => commands::bulk(*a, dry),
        Command::Echo(a) => commands::echo(a, dry),
        Command::Pingpong(a) => commands::pingpong(*a, dry),
        Command::Transfer(a) => transfer::transfer(*a, dry),
        Command::Run(a) => commands::run(a, dry),
        Command::Report(a) => commands::report(a, dry),
        Command::Results(r) => commands::results(r, dry),
        Command::Lab(a) => commands::lab(a, dry),
        Command::Netem(a) => netem::netem(*a, dry),
        Command::Serve(a) => serve::serve(*a, dry),
        Command::Load(a) => load::load(*a, dry),
        Command::Hosts(h) => hosts::hosts(h, dry),
    };
    if cli.until_eof && result.is_ok() {
        hosts::report_usage();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Exit(code)) => ExitCode::from(code),
        Err(f) => {
            eprintln!("socklab: error: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}
