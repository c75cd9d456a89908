//! How a command ends ([`Failure`] and its exit code), and where the lab's text goes
//! ([`Terminal`]: stdout and stderr, keys written as flags).

use std::io::Write;

use socklab_lab::roles::RoleError;
use socklab_lab::session::{self, Printer};
use socklab_lab::LabError;

/// Why a command failed, and with which exit code.
#[derive(Debug)]
pub enum Failure {
    /// Bad command line or parameter (exit 2).
    Usage(String),
    /// A run or I/O failed (exit 1).
    Run(String),
    /// An experiment ran to its end but some repetitions failed; they are stored (exit 1).
    Partial(String),
    /// Interrupted (exit 130).
    Interrupted(String),
    /// stdout closed (e.g. `| head`): not an error.
    BrokenPipe,
    /// Exit with this code, saying nothing (a wrapped command's own exit code).
    Exit(u8),
}

impl Failure {
    pub fn message(&self) -> String {
        match self {
            Failure::Usage(m) | Failure::Run(m) | Failure::Partial(m) | Failure::Interrupted(m) => {
                socklab_lab::text::escape_lines(m) // no raw control byte reaches a terminal
            }
            Failure::BrokenPipe | Failure::Exit(_) => String::new(),
        }
    }
    pub fn code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Run(_) | Failure::Partial(_) => 1,
            Failure::Interrupted(_) => 130,
            Failure::BrokenPipe => 0,
            Failure::Exit(c) => *c,
        }
    }
}

impl From<LabError> for Failure {
    fn from(e: LabError) -> Self {
        let msg = e.to_string();
        match e {
            LabError::Param { .. }
            | LabError::UnknownKey { .. }
            | LabError::Plan(_)
            | LabError::NotAStore { .. } => Failure::Usage(msg),
            LabError::Interrupted { .. } => Failure::Interrupted(msg),
            LabError::Failed { .. } => Failure::Partial(msg),
            LabError::Io { context, source } if context == session::IO_AS_IS => source.into(),
            _ => Failure::Run(msg),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Run(e.to_string())
        }
    }
}

impl From<RoleError> for Failure {
    fn from(e: RoleError) -> Self {
        match e {
            RoleError::Usage(m) => Failure::Usage(m),
            RoleError::Run(m) => Failure::Run(m),
            RoleError::BrokenPipe => Failure::BrokenPipe,
            RoleError::Interrupted(m) => Failure::Interrupted(m),
            RoleError::Exit(c) => Failure::Exit(c),
        }
    }
}

pub fn out(s: &str) -> Result<(), Failure> {
    Ok(Terminal.out(s)?)
}

/// A library's text for people in this command's words: its keys as flags.
pub(crate) fn words(s: &str) -> String {
    crate::flags::in_flags(s, &[])
}

/// Where the lab's text goes: stdout and stderr, its notes in flags.
pub(crate) struct Terminal;

impl Printer for Terminal {
    fn out(&mut self, text: &str) -> std::io::Result<()> {
        let mut o = std::io::stdout().lock();
        o.write_all(text.as_bytes())?;
        o.flush()
    }
    fn err(&mut self, text: &str) {
        eprint!("{text}");
    }
    fn note(&mut self, line: &str) {
        eprintln!("{}", words(line));
    }
}
