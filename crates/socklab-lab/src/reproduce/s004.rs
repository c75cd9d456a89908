//! Seed 004: file transfer over TCP and a reliable UDP transport under netem rules.

use super::published::{S004_LOSS0, S004_TIMES};
use super::*;

/// Whether the link text `link` is the seed's condition `cond` (as named in
/// [`S004_TIMES`]). Links are stored canonically (`delay 50ms loss 5% rate 100mbit limit 2000`).
fn is(link: &str, cond: &str) -> bool {
    let words: Vec<&str> = link.split_whitespace().collect();
    let pair = |k: &str, v: &str| words.windows(2).any(|w| w[0] == k && w[1] == v);
    let has = |k: &str| words.contains(&k);
    let jitter = words
        .windows(3)
        .any(|w| w[0] == "delay" && w[1] == "100ms" && w[2].ends_with("ms"));
    match cond.split_once(' ') {
        _ if cond == "no rule" => {
            !has("loss") && !has("duplicate") && !has("corrupt") && !pair("delay", "100ms")
        }
        Some(("delay", "100ms uniform")) => {
            jitter && (!has("distribution") || pair("distribution", "uniform"))
        }
        Some(("delay", "100ms normal")) => jitter && pair("distribution", "normal"),
        Some((k, v)) => pair(k, v),
        None => false,
    }
}

/// The cell of `proto` (and `tcp_cc` for TCP) under condition `cond`.
fn cell(st: &ExperimentStats, proto: &str, cc: Option<&str>, cond: &str) -> Option<usize> {
    st.cells.iter().position(|c| {
        let p = &c.cell.config;
        c.cell.workload == "transfer"
            && p.get("proto") == Some(proto)
            && cc.is_none_or(|cc| p.get("tcp_cc") == Some(cc))
            && p.get("link").is_some_and(|l| is(l, cond))
    })
}

/// Repetitions of cell `i` that failed (not finished within the timeout, or wrong data).
fn failures(st: &ExperimentStats, i: Option<usize>) -> usize {
    i.map_or(0, |i| {
        values(st, i, "failed").iter().filter(|v| **v > 0.0).count()
    })
}

/// `a` (faster, by the seed) against `b` under `cond`, with the failures of each side.
struct Side {
    diff: Result<Diff, String>,
    failed_a: usize,
    failed_b: usize,
    what: String,
}

fn side(
    st: &ExperimentStats,
    a: (&str, Option<&str>),
    b: (&str, Option<&str>),
    cond: &str,
) -> Side {
    let name = |(p, cc): (&str, Option<&str>)| match cc {
        Some(cc) => format!("{} {cc} {cond}", p.to_uppercase()),
        None => format!("{p} {cond}"),
    };
    let (ia, ib) = (cell(st, a.0, a.1, cond), cell(st, b.0, b.1, cond));
    let (fa, fb) = (failures(st, ia), failures(st, ib));
    let what = [(fa, name(a)), (fb, name(b))]
        .iter()
        .filter(|(k, _)| *k > 0)
        .map(|(k, n)| format!("{k} repetition(s) of {n} did not finish and are not in its mean"))
        .collect::<Vec<_>>()
        .join("; ");
    Side {
        diff: Diff::cells(st, "total_s", (&name(a), ia), (&name(b), ib)),
        failed_a: fa,
        failed_b: fb,
        what,
    }
}

/// Judges "`a` is faster than `b`" in every side; a side whose unfinished repetitions could
/// have changed the verdict makes it not comparable (a mean over the finished repetitions
/// only flatters the cell that failed).
fn faster(claim: &str, sides: Vec<Side>) -> Finding {
    let (fa, fb) = (
        sides.iter().any(|s| s.failed_a > 0),
        sides.iter().any(|s| s.failed_b > 0),
    );
    let notes: Vec<String> = sides
        .iter()
        .map(|s| s.what.clone())
        .filter(|w| !w.is_empty())
        .collect();
    let f = judge(
        claim,
        sides.into_iter().map(|s| s.diff).collect(),
        Expect::Less,
    );
    let spoiled = match f.verdict {
        Verdict::Reproduced => fa,
        Verdict::Contradicted => fb,
        Verdict::NotReproduced => fa || fb,
        Verdict::NotComparable => false,
    };
    if spoiled {
        Finding {
            verdict: Verdict::NotComparable,
            why: format!("{}; so no verdict ({})", notes.join("; "), f.why),
            more: None,
            ..f
        }
    } else if notes.is_empty() {
        f
    } else {
        Finding {
            why: format!("{} ({})", f.why, notes.join("; ")),
            ..f
        }
    }
}

/// The lossy experiment beside seed 004.
pub fn lossy(st: &ExperimentStats) -> Comparison {
    let mut table = Table::new(&[
        "condition",
        "seed: TCP s",
        "seed: UDP s",
        "seed: UDP Optimal s",
        "ours: TCP CUBIC s (mean, 95% CI, n)",
        "ours: TCP BBR s",
        "ours: rudp s",
        "ours: QUIC (quinn, CUBIC) s",
    ]);
    for (cond, tcp, udp, opt) in S004_TIMES {
        let o = |proto: &str, cc: Option<&str>| {
            let i = cell(st, proto, cc, cond);
            let k = failures(st, i);
            let s = ours(st, i, "total_s");
            if k > 0 {
                format!("{s}, {k} failed")
            } else {
                s
            }
        };
        table.row(vec![
            cond.to_string(),
            format!("≈{tcp}"),
            format!("≈{udp}"),
            opt.map_or_else(|| "not run".into(), |x| format!("≈{x}")),
            o("tcp", Some("cubic")),
            o("tcp", Some("bbr")),
            o("rudp", None),
            // The suite runs QUIC at the loss rates only.
            if cell(st, "quic", Some("cubic"), cond).is_none()
                && !cond.starts_with("loss")
                && cond != "no rule"
            {
                "not run".into()
            } else {
                o("quic", Some("cubic"))
            },
        ]);
    }
    let (tcp, rudp) = (("tcp", Some("cubic")), ("rudp", None));
    let quic = ("quic", Some("cubic"));
    let findings = vec![
        faster(
            &format!(
                "without loss TCP finishes first (seed, 2.1.3: TCP {} s vs UDP Optimal {} s and UDP {} s; 2.2.1 at loss 0%: {} vs {} and {} s)",
                S004_TIMES[0].1,
                S004_TIMES[0].3.unwrap_or(f64::NAN),
                S004_TIMES[0].2,
                S004_LOSS0.0,
                S004_LOSS0.2,
                S004_LOSS0.1
            ),
            vec![side(st, tcp, rudp, "no rule")],
        ),
        faster(
            "the UDP transport overtakes TCP as loss grows: at 15% loss it is faster (seed: UDP 41 s, UDP Optimal 32.5 s vs TCP 245 s)",
            vec![side(st, rudp, tcp, "loss 15%")],
        ),
        faster(
            "the crossover lies between 5% and 10% loss: TCP still faster at 5%, the UDP transport faster at 10% (seed: TCP 5 vs UDP Optimal 16 s; TCP 32 vs UDP Optimal 24 s, UDP 31 s)",
            vec![side(st, tcp, rudp, "loss 5%"), side(st, rudp, tcp, "loss 10%")],
        ),
        faster(
            "beyond the seed: its claim against the transport deployed for the same purpose, QUIC (quinn, CUBIC, one stream per file): rudp is faster at 10% and at 15% loss",
            vec![side(st, rudp, quic, "loss 10%"), side(st, rudp, quic, "loss 15%")],
        ),
    ];
    Comparison {
        seed: "004",
        source: "Seed 004 (004_5d4f7b56683b4305.txt), sections 2.1.3, 2.2.1, 2.3.1, 2.4.1 and 2.5.1: the average total download time of 20 files, as the text gives it (\"around\"), 30 runs per condition; the loss crossover from 2.2.1 and 2.2.4.",
        note: "The seed ran on a LAN without base delay and its own UDP protocol (fixed timeout); here the link is emulated at 100 Mbit/s with 100 ms RTT and the UDP transport is socklab's rudp (adaptive timeout). Absolute times are not comparable, and the crossover's place depends on the path; which transport is faster at each loss rate is judged against TCP CUBIC (Linux's default, as the seed's), and rudp against QUIC with the same controller.".into(),
        table,
        findings,
    }
}
