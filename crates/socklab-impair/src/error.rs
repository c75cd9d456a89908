//! [`ParseSpecError`]: why a netem link spec did not parse, with the word at fault and the fix.
//!
//! The messages are part of the interface (tests and users read them): each names the keyword
//! and, where there is one, the bad value, then says what to write instead. What the user
//! wrote is quoted escaped and cut ([`socklab_units::text`]): a spec or a trace line may hold
//! any bytes, and a message must not carry them to a terminal.

use crate::keywords::KEYWORD_LIST;
use socklab_units::text::{line, quote};

/// A one-line description of what is wrong with a spec and how to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseSpecError {
    /// A keyword that needs a value came last or was followed by another keyword.
    #[error(
        "{}: expected {what} after it, e.g. {}",
        quote(keyword),
        quote(example)
    )]
    MissingValue {
        /// The keyword (with its sub-keyword, e.g. `loss random`).
        keyword: String,
        /// What kind of value it takes, e.g. "a time".
        what: String,
        /// An example of a correct use, e.g. `delay 50ms`.
        example: String,
    },
    /// A value did not parse or is out of range.
    #[error("{} {}: {fix}", quote(context), quote(value))]
    BadValue {
        /// The keyword and the value's role, e.g. `delay jitter`.
        context: String,
        /// The value as written.
        value: String,
        /// What is wrong and what to write instead.
        fix: String,
    },
    /// A word that is not a keyword.
    #[error("unknown keyword '{}': expected {}", quote(keyword), KEYWORD_LIST)]
    UnknownKeyword {
        /// The word as written.
        keyword: String,
    },
    /// A number-taking keyword's value and its unit written apart (`delay 50 ms`).
    #[error(
        "`{}`: write the value and its unit together: `{}`",
        quote(written),
        quote(together)
    )]
    DetachedUnit {
        /// The words as written, from the keyword to the unit (`delay 50 ms`).
        written: String,
        /// The value and unit as they should be written (`50ms`).
        together: String,
    },
    /// `gap` without `reorder`.
    #[error("gap {gap}: gap needs reorder, e.g. reorder 25% gap {gap}")]
    GapWithoutReorder {
        /// The gap given.
        gap: u32,
    },
    /// `distribution` came last.
    #[error("distribution: expected uniform, normal, pareto or paretonormal after it")]
    MissingDistribution,
    /// `loss` came last.
    #[error("loss: expected a percentage, gemodel or state after it, e.g. loss 5%")]
    MissingLoss,
    /// `loss` followed by another keyword.
    #[error(
        "loss: expected a percentage, gemodel or state before '{}', e.g. loss 5%",
        quote(keyword)
    )]
    LossBeforeKeyword {
        /// The keyword that followed `loss`.
        keyword: String,
    },
    /// `loss gemodel` without its first probability.
    #[error("loss gemodel: expected p [r [1-h [1-k]]], e.g. loss gemodel 1% 10% 70% 0.1%")]
    MissingGemodel,
    /// `loss state` without its first probability.
    #[error(
        "loss state: expected p13 [p31 [p32 [p23 [p14]]]], e.g. loss state 1% 10% 5% 20% 0.1%"
    )]
    MissingState,
    /// `loss state` whose transition probabilities out of a state add up to more than 100%.
    #[error(
        "loss state: p13 + p14 and p31 + p32 must each be at most 100% (got {}% and {}%)",
        .p13_p14 * 100.0,
        .p31_p32 * 100.0
    )]
    StateOver100 {
        /// p13 + p14, as a probability.
        p13_p14: f64,
        /// p31 + p32, as a probability.
        p31_p32: f64,
    },
    /// A word that belongs to another keyword, written on its own.
    #[error("{}: it belongs after {owner}", quote(word))]
    Misplaced {
        /// The word as written.
        word: String,
        /// The keyword it belongs to, with an example.
        owner: &'static str,
    },
    /// Keywords that do not go together, or one that needs another.
    #[error("{}: {}", quote(what), line(fix))]
    Combination {
        /// The keywords.
        what: String,
        /// Why and what to write instead.
        fix: String,
    },
    /// A trace file that cannot be used.
    #[error("trace {}: {}", quote(path), line(reason))]
    Trace {
        /// The path as written.
        path: String,
        /// What is wrong (with the line, for a bad line) and what to do.
        reason: String,
    },
}

/// The only floats in it are sums of parsed probabilities (0 to 2, never NaN).
impl Eq for ParseSpecError {}

impl ParseSpecError {
    /// The message (same as `Display`).
    pub fn message(&self) -> String {
        self.to_string()
    }
}
