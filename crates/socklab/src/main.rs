//! `socklab`: argument parsing and printing only; the work is done in the library crates.

mod cli;
mod commands;
mod dryrun;
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

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::commands::Failure;

/// clap's error in one line (bad input is a one-line error): its message and tips, the usage
/// line, and where the help is.
fn one_line(rendered: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for l in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if l.starts_with("For more information") {
            continue;
        }
        let l = l.strip_prefix("error: ").unwrap_or(l);
        match l.strip_prefix("Usage: ") {
            Some(u) => parts.push(format!("usage: {u} (see --help)")),
            None => parts.push(l.to_string()),
        }
    }
    parts.join("; ")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = e.exit_code();
            if e.use_stderr() {
                eprintln!("socklab: error: {}", one_line(&e.render().to_string()));
            } else {
                // --help, --version.
                let _ = e.print();
            }
            return ExitCode::from(code as u8);
        }
    };
    let dry = cli.dry_run;
    // The key descriptors that give the flags of the keys a library error names.
    let keys = flags::keys_of(&cli.command);
    if cli.until_eof {
        socklab_lab::roles::remote::stop_at_end_of_stdin();
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
