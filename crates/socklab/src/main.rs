//! `socklab`: argument parsing and printing only; the work is done in the library crates.

mod cli;
mod commands;
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
    let result = match cli.command {
        Command::Sink(a) => commands::sink(a),
        Command::Bulk(a) => commands::bulk(*a),
        Command::Echo(a) => commands::echo(a),
        Command::Pingpong(a) => commands::pingpong(*a),
        Command::Transfer(a) => transfer::transfer(*a),
        Command::Run(a) => commands::run(a),
        Command::Report(a) => commands::report(a),
        Command::Results(r) => commands::results(r),
        Command::Lab(a) => commands::lab(a),
        Command::Netem(a) => netem::netem(*a),
        Command::Serve(a) => serve::serve(*a),
        Command::Load(a) => load::load(*a),
    };
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
