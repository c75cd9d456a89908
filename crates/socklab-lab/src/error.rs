//! Errors of the lab layer. Each names the bad value and, where there is one, the fix.

use std::path::PathBuf;

use socklab_units::text::{self, quote};

/// An error in a parameter, a plan, the store or a run.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A parameter value does not parse or is out of range.
    #[error("{} = '{}': {}", quote(key), quote(value), text::line(reason))]
    Param {
        /// The key.
        key: String,
        /// The bad value.
        value: String,
        /// Why, and what to write instead.
        reason: String,
    },
    /// A key that the workload does not know.
    #[error(
        "unknown parameter '{}' for workload {workload}: valid keys are {valid}",
        quote(key)
    )]
    UnknownKey {
        /// The key.
        key: String,
        /// The workload.
        workload: String,
        /// The valid keys, comma-separated.
        valid: String,
    },
    /// A plan that cannot be built.
    #[error("{0}")]
    Plan(String),
    /// The results database could not be opened or written.
    #[error("results database '{path}': {reason}")]
    Store {
        /// The database path.
        path: PathBuf,
        /// What went wrong and what to do.
        reason: String,
    },
    /// `--db` names something socklab will not use as its store (not a regular file, another
    /// program's SQLite database): a bad argument, nothing was written.
    #[error("results database '{path}': {reason}")]
    NotAStore {
        /// The path given.
        path: PathBuf,
        /// What it is and what to do.
        reason: String,
    },
    /// A run failed.
    #[error("{cell}: {source}")]
    Run {
        /// The cell's label.
        cell: String,
        /// The cause.
        source: socklab_net::NetError,
    },
    /// The emulated link or another network resource failed.
    #[error(transparent)]
    Net(#[from] socklab_net::NetError),
    /// The server child process could not be managed.
    #[error("{0}")]
    Child(String),
    /// A host of the experiment could not be reached or used (SSH failed, the host was lost, a
    /// version mismatch, a role that could not start there).
    #[error("host {host}: {reason}")]
    Host {
        /// The host as the user named it.
        host: String,
        /// What went wrong and the fix.
        reason: String,
    },
    /// Some repetitions failed; each is stored with `failed = 1` and its reason, and every
    /// other repetition ran.
    #[error("{failed} repetition(s) of experiment {experiment} failed and are stored with failed = 1 (the others ran); the first: {first}")]
    Failed {
        /// Experiment id.
        experiment: i64,
        /// How many repetitions failed.
        failed: usize,
        /// The first failure, with its cell.
        first: String,
    },
    /// An experiment without a time series was asked for one.
    #[error("experiment {0} holds no intervals: run with `interval` (e.g. socklab bulk `interval` 100ms), then socklab results series ID")]
    NoSeries(i64),
    /// The run was interrupted by Ctrl-C or SIGTERM; finished repetitions are stored. The
    /// counts are the store's (what `socklab results list` shows as samples, and the warm-ups
    /// beside them), this run's and any earlier run's of the experiment together.
    #[error("interrupted: experiment {experiment} holds {measured} measured repetition{}{}", plural(*.measured), warmups_text(*.warmups))]
    Interrupted {
        /// Experiment id.
        experiment: i64,
        /// Measured repetitions stored (warm-ups not counted).
        measured: usize,
        /// Warm-up repetitions stored (not in the statistics).
        warmups: usize,
    },
    /// A server the plan names (`to`) could not be reached before the run started: nothing
    /// was run or stored.
    #[error("cannot connect to {addr} (`to`): {source}; {hint}; nothing was run or stored")]
    Unreachable {
        /// The server's address.
        addr: std::net::SocketAddr,
        /// What the kernel said.
        source: std::io::Error,
        /// What to start there.
        hint: &'static str,
    },
    /// An I/O error writing a report or export.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// The results database to read does not exist.
    #[error("results database '{}' does not exist: run an experiment first, or name the file with `db` PATH", .0.display())]
    NoStore(PathBuf),
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// ` (and N warm-ups, not in the statistics)`, or nothing without warm-ups.
fn warmups_text(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(" (and {n} warm-up{}, not in the statistics)", plural(n)),
    }
}

impl LabError {
    /// Builds a [`LabError::Param`].
    pub fn param(key: &str, value: &str, reason: impl Into<String>) -> LabError {
        LabError::Param {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    /// A failed run of the cell `label`.
    pub fn run(label: &str, source: socklab_net::NetError) -> LabError {
        LabError::Run {
            cell: label.to_string(),
            source,
        }
    }

    /// Builds a [`LabError::NotAStore`].
    pub fn not_a_store(path: &std::path::Path, reason: impl std::fmt::Display) -> LabError {
        LabError::NotAStore {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }

    /// Builds a store error from anything displayable.
    pub fn store(path: &std::path::Path, reason: impl std::fmt::Display) -> LabError {
        LabError::Store {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }
}

/// An emulated link's error as the [`socklab_net::NetError`] it was before the link had its
/// crate: the same variant and the same text, so [`LabError::Net`], [`LabError::run`] and the
/// binary's matches on them keep working (the conversion at the lab's boundary).
pub fn link_error(e: socklab_link::LinkError) -> socklab_net::NetError {
    use socklab_link::LinkError as L;
    use socklab_net::NetError as N;
    match e {
        L::Connect { addr, source } => N::Connect { addr, source },
        L::Bind { addr, source, hint } => N::Bind { addr, source, hint },
        L::Invalid(m) => N::Invalid(m),
        L::Io { context, source } => N::Io { context, source },
        L::Link(m) => N::Link(m),
    }
}

impl From<socklab_link::LinkError> for LabError {
    fn from(e: socklab_link::LinkError) -> LabError {
        LabError::Net(link_error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_error_reaches_the_lab_with_its_text_and_variant() {
        let e = socklab_link::LinkError::Link("tc: netem missing".into());
        let text = e.to_string();
        let lab: LabError = e.into();
        assert!(matches!(lab, LabError::Net(socklab_net::NetError::Link(_))));
        assert_eq!(lab.to_string(), text);
        let bind = socklab_link::LinkError::bind(
            "127.0.0.1:1".parse().unwrap(),
            std::io::Error::from_raw_os_error(socklab_sys::errno::EACCES),
        );
        let text = bind.to_string();
        assert_eq!(link_error(bind).to_string(), text);
    }
}
