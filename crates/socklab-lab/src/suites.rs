//! Built-in suites: named sets of experiments that reproduce the seeds' tables on this machine.
//! `quick` variants use fewer repetitions and shorter runs (the README's main command).

use crate::params::Params;
use crate::plan::{Axis, Group, Order, Plan};
use crate::LabError;

/// A built-in suite.
#[derive(Debug, Clone, Copy)]
pub struct Suite {
    /// Name used on the command line.
    pub name: &'static str,
    /// What it reproduces.
    pub reproduces: &'static str,
    /// Builds its plans (`quick` = the short variant).
    pub plans: fn(quick: bool) -> Result<Vec<Plan>, LabError>,
}

/// Buffer sizes of seed 000's table: 1 KiB to 512 KiB, doubling.
pub const SEED000_BUFSIZES: [&str; 10] = [
    "1K", "2K", "4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K",
];
/// Transfer sizes of seed 000's memcpy table (plus 64K for scale).
pub const SEED000_MEMCPY_SIZES: [&str; 10] =
    ["4", "8", "16", "32", "64", "128", "256", "512", "1K", "64K"];

fn writev_plans(quick: bool) -> Result<Vec<Plan>, LabError> {
    let pairs = Axis::zipped(
        &["nbufs", "bufsize"],
        &[
            vec!["15".into(), "30".into(), "60".into()],
            vec!["100".into(), "50".into(), "25".into()],
        ],
    )?;
    let g = Group::new(
        "bulk",
        Params::new()
            .with("iterations", "20000")
            .with("read_size", "1500")
            .with("cc", "cubic"),
    )
    .axis(Axis::single("strategy", ["write", "writev", "single"]))
    .axis(pairs);
    Ok(vec![Plan::build(
        "writev",
        "Seed 003: 20000 rounds of nbufs x bufsize = 1500 bytes, sent as many write()s, one writev() or one write() of a contiguous buffer; the sink reads 1500 bytes at a time and counts its read() calls (#reads).",
        &[g],
        if quick { 5 } else { 20 },
        1,
        Order::Interleaved,
        if quick { "socklab lab --quick (suite writev)" } else { "socklab lab --suite writev" },
    )?])
}

fn bufsize_plans(quick: bool) -> Result<Vec<Plan>, LabError> {
    let tcp = Group::new(
        "bulk",
        Params::new()
            .with("strategy", "write")
            .with("duration", if quick { "400ms" } else { "2s" })
            .with("cc", "cubic"),
    )
    .axis(Axis::single("bufsize", SEED000_BUFSIZES));
    let pipe = Group::new(
        "pipe",
        Params::new().with("bytes", if quick { "256M" } else { "2G" }),
    )
    .axis(Axis::single("size", SEED000_BUFSIZES));
    let memcpy = Group::new(
        "memcpy",
        Params::new().with("bytes", if quick { "256M" } else { "2G" }),
    )
    .axis(Axis::single("size", SEED000_MEMCPY_SIZES));
    let reps = if quick { 5 } else { 10 };
    let cmd = if quick {
        "socklab lab --quick (suite bufsize)"
    } else {
        "socklab lab --suite bufsize"
    };
    Ok(vec![
        Plan::build(
            "bufsize",
            "Seed 000: TCP throughput on loopback against the application's write size (one write() per buffer, 1 KiB to 512 KiB), next to a pipe between two threads with the same transfer size.",
            &[tcp, pipe],
            reps,
            1,
            Order::Interleaved,
            cmd,
        )?,
        Plan::build(
            "memcpy",
            "Seed 000: memory copy bandwidth against transfer size (each copy a real memcpy call).",
            &[memcpy],
            reps,
            1,
            Order::Interleaved,
            cmd,
        )?,
    ])
}

/// Every built-in suite.
pub const SUITES: &[Suite] = &[
    Suite {
        name: "writev",
        reproduces: "seed 003: write vs writev vs single write, 3 nbufs/bufsize pairs, with #reads",
        plans: writev_plans,
    },
    Suite {
        name: "bufsize",
        reproduces:
            "seed 000: throughput over buffer size 1K..512K, with pipe and memcpy references",
        plans: bufsize_plans,
    },
];

/// Looks up a suite, or says which exist.
pub fn suite(name: &str) -> Result<&'static Suite, LabError> {
    SUITES.iter().find(|s| s.name == name).ok_or_else(|| {
        LabError::Plan(format!(
            "unknown suite '{name}': choose one of {} (see `socklab lab --list`)",
            SUITES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_build_the_seed_tables() {
        let w = (suite("writev").unwrap().plans)(true).unwrap();
        assert_eq!(w[0].cells.len(), 9);
        let b = (suite("bufsize").unwrap().plans)(true).unwrap();
        assert_eq!(b[0].cells.len(), 20, "10 TCP sizes + 10 pipe sizes");
        assert_eq!(b[0].cells[0].label, "bulk bufsize=1K");
        assert_eq!(b[1].cells.len(), 10);
        assert!(suite("nope")
            .unwrap_err()
            .to_string()
            .contains("choose one of writev, bufsize"));
    }
}
