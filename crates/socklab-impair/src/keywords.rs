//! The keywords of netem's syntax: what [`crate::words::Tokens`] stops a value at, and the list
//! an unknown keyword's message offers ([`crate::error`]). No dependencies, so the spec's
//! parts and its error can all use it.

pub(crate) const KEYWORDS: &[&str] = &[
    "delay",
    "distribution",
    "loss",
    "duplicate",
    "corrupt",
    "reorder",
    "gap",
    "rate",
    "limit",
    "fifo",
    "fixcsum",
    "slot",
    "ecn",
    "aqm",
    "trace",
];

pub(crate) const KEYWORD_LIST: &str =
    "delay, distribution, loss, duplicate, corrupt, reorder, gap, rate, limit, fifo, fixcsum, slot, ecn, aqm, trace";
