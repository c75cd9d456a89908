//! The keywords of netem's syntax (`spec.rs`'s grammar): the tokenizer stops a value at
//! them, and the parse errors list them. At the bottom of the crate, so both can name them.

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
