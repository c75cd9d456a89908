//! Seed 003: many write()s vs writev() vs one write(), three nbufs × bufsize pairs, #reads.

use super::published::S003_RUNS;
use super::*;

const PAIRS: [(u32, u32); 3] = [(15, 100), (30, 50), (60, 25)];

fn cell(
    st: &ExperimentStats,
    strategy: &str,
    (nbufs, bufsize): (u32, u32),
) -> (String, Option<usize>) {
    let (n, b) = (nbufs.to_string(), bufsize.to_string());
    (
        format!("{strategy} {nbufs}x{bufsize}"),
        find(
            st,
            "bulk",
            &[("strategy", strategy), ("nbufs", &n), ("bufsize", &b)],
        ),
    )
}

fn diff(
    st: &ExperimentStats,
    metric: &str,
    a: (&str, (u32, u32)),
    b: (&str, (u32, u32)),
) -> Result<Diff, String> {
    let (na, ia) = cell(st, a.0, a.1);
    let (nb, ib) = cell(st, b.0, b.1);
    Diff::cells(st, metric, (&na, ia), (&nb, ib))
}

/// The writev experiment beside seed 003.
pub fn writev(st: &ExperimentStats) -> Comparison {
    let mut table = Table::new(&[
        "cell",
        "seed: Gbps",
        "seed: #reads",
        "ours: Gbit/s (mean, 95% CI, n)",
        "ours: reads",
    ]);
    for (strategy, nbufs, bufsize, _, reads, gbps) in S003_RUNS {
        let (label, i) = cell(st, strategy, (nbufs, bufsize));
        table.row(vec![
            label,
            format!("{gbps:.6}"),
            reads.to_string(),
            ours(st, i, "gbps"),
            ours(st, i, "reads"),
        ]);
    }
    let mut findings = Vec::new();
    let vs_others = |metric: &str| {
        PAIRS
            .iter()
            .flat_map(|&p| {
                [
                    diff(st, metric, ("write", p), ("writev", p)),
                    diff(st, metric, ("write", p), ("single", p)),
                ]
            })
            .collect::<Vec<_>>()
    };
    findings.push(judge(
        "many write()s give the least throughput, below writev() and one write() at every nbufs x bufsize",
        vs_others("gbps"),
        Expect::Less,
    ));
    findings.push(judge(
        "writev() and one write() perform roughly the same (the seed's text; its own 60x25 row reads 1.84 vs 7.42 Gbps)",
        PAIRS
            .iter()
            .map(|&p| diff(st, "gbps", ("writev", p), ("single", p)))
            .collect(),
        Expect::Same,
    ));
    findings.push(judge(
        "more, smaller buffers per round slow many write()s and writev() down (15x100 > 30x50 > 60x25)",
        ["write", "writev"]
            .iter()
            .flat_map(|s| {
                [
                    diff(st, "gbps", (s, PAIRS[0]), (s, PAIRS[1])),
                    diff(st, "gbps", (s, PAIRS[1]), (s, PAIRS[2])),
                ]
            })
            .collect(),
        Expect::Greater,
    ));
    findings.push(judge(
        "for one write(), the nbufs x bufsize combination does not matter (the seed's text; its own figures read 4.11, 3.77, 7.42 Gbps)",
        vec![
            diff(st, "gbps", ("single", PAIRS[0]), ("single", PAIRS[1])),
            diff(st, "gbps", ("single", PAIRS[1]), ("single", PAIRS[2])),
            diff(st, "gbps", ("single", PAIRS[0]), ("single", PAIRS[2])),
        ],
        Expect::Same,
    ));
    findings.push(judge(
        "many write()s make the receiver call read() more often than writev() or one write() (seed: 22978-29018 vs 20024-22076 reads for 20000 rounds)",
        vs_others("reads"),
        Expect::Greater,
    ));
    Comparison {
        seed: "003",
        source: "Seed 003 (003_f4727d314ff665bb.txt), \"Performance evaluation\": the client sending to csslab9, 20000 iterations per run, one run per cell; \"Discussion\" (2) and (3) for the findings.",
        note: "The seed ran between two lab VMs over their network, once per cell; this experiment runs on loopback here. Absolute throughput is not comparable; the ranking of the strategies, the effect of the buffer split and the read() counts are.".into(),
        table,
        findings,
    }
}
