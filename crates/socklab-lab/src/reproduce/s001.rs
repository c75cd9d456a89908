//! Seed 001: the time for 500 round trips per socket option.

use super::published::{S001_N, S001_OPTS};
use super::*;

const SOURCE: &str = "Seed 001 (001_d40a31dedc5d220b.txt), \"Таблица 1. Результаты исследования\" (time for 500 round trips of a 29-byte message, µs, 1000 repetitions per option) and its \"Выводы\" (conclusions).";

/// The seed's published mean and sd of option `ours`.
fn seed(opt: &str) -> Option<(&'static str, f64, f64)> {
    S001_OPTS
        .iter()
        .find(|o| o.0 == opt)
        .map(|o| (o.1, o.2, o.3))
}

/// Welch's t of the seed's own figures, `b` minus `a` (n = 1000 each).
fn seed_t(a: &str, b: &str) -> Option<f64> {
    let ((_, ma, sa), (_, mb, sb)) = (seed(a)?, seed(b)?);
    let n = S001_N as f64;
    Some((mb - ma) / (sa * sa / n + sb * sb / n).sqrt())
}

/// The sockopts experiment beside seed 001.
pub fn sockopts(st: &ExperimentStats) -> Comparison {
    let mut table = Table::new(&[
        "option",
        "seed: µs per 500 round trips (mean ± sd, n=1000)",
        "ours: µs (mean, 95% CI, n)",
        "ours: sd",
    ]);
    let cell = |opt: &str| find(st, "pingpong", &[("opts", opt)]);
    let sd = |i: Option<usize>| {
        i.and_then(|i| st.cells[i].metrics.get("total_us")?.sd)
            .map_or_else(|| "-".into(), num)
    };
    for opt in [
        "baseline",
        "keepalive",
        "nodelay",
        "quickack",
        "fastopen",
        "reuseaddr",
        "nodelay+quickack",
    ] {
        let published = seed(opt).map_or_else(
            || "not measured".to_string(),
            |(name, m, s)| format!("{name}: {m} ± {s}"),
        );
        table.row(vec![
            opt.to_string(),
            published,
            ours(st, cell(opt), "total_us"),
            sd(cell(opt)),
        ]);
    }
    let (fast, slow) = (
        ["nodelay", "quickack"],
        ["keepalive", "fastopen", "reuseaddr"],
    );
    let mut diffs = Vec::new();
    let mut t_min = f64::INFINITY;
    for f in fast {
        for s in slow {
            diffs.push(Diff::cells(st, "total_us", (f, cell(f)), (s, cell(s))));
            t_min = t_min.min(seed_t(f, s).unwrap_or(f64::NAN));
        }
    }
    let spreads: Vec<(String, f64)> = st
        .cells
        .iter()
        .filter(|c| seed(c.cell.config.get("opts").unwrap_or("")).is_some())
        .filter_map(|c| {
            Some((
                c.cell.config.get("opts")?.to_string(),
                c.metrics.get("total_us")?.sd?,
            ))
        })
        .collect();
    let smallest = spreads
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or_else(
            || "no spreads measured".to_string(),
            |(o, s)| {
                format!(
                    "ours: the smallest sd among the seed's five options is {o}'s ({})",
                    num(*s)
                )
            },
        );
    let findings = vec![
        judge(
            &format!("TCP_NODELAY and TCP_QUICKACK give the shortest times, each faster than SO_KEEPALIVE, TCP_FASTOPEN and SO_REUSEADDR (seed: 44701 and 45032 vs 47607, 53911, 56237 µs; its own table supports all six differences, Welch t ≥ {t_min:.1} at n=1000)"),
            diffs,
            Expect::Less,
        ),
        Finding::new(
            "TCP_QUICKACK has the smallest spread (seed: sd 9716 µs)",
            Verdict::NotComparable,
            format!("socklab has no test of spreads, so no verdict; {smallest}"),
        ),
    ];
    Comparison {
        seed: "001",
        source: SOURCE,
        note: "The seed ran client and server in one Ubuntu VM on loopback, as here, but on other hardware: absolute times are not comparable, the order of the options is. The seed has no run without options, so whether an option speeds the exchange up or slows it relative to the default is not in the seed; our baseline is listed for reference.".into(),
        table,
        findings,
    }
}

/// The fastopen experiment: seed 001 set TCP_FASTOPEN where it cannot act.
pub fn fastopen(st: &ExperimentStats) -> Comparison {
    let mut table = Table::new(&[
        "option",
        "seed: µs per 500 round trips on one connection (mean ± sd)",
        "ours: µs per 100 new connections (mean, 95% CI, n)",
    ]);
    for opt in ["baseline", "fastopen"] {
        let published = seed(opt).map_or_else(
            || "not measured".to_string(),
            |(name, m, s)| format!("{name}: {m} ± {s}"),
        );
        table.row(vec![
            opt.to_string(),
            published,
            ours(st, find(st, "pingpong", &[("opts", opt)]), "total_us"),
        ]);
    }
    Comparison {
        seed: "001",
        source: SOURCE,
        note: "Two different quantities: the seed's time is for 500 round trips over one connection, ours for 100 messages each on a new connection.".into(),
        table,
        findings: vec![Finding::new(
            "TCP_FASTOPEN slows the exchange down (seed: 53911 µs, against 44701 with TCP_NODELAY)",
            Verdict::NotComparable,
            "the seed set TCP_FASTOPEN on one long-lived connection, where it cannot act (Fast Open only carries data in the SYN of a new connection); this experiment opens a new connection per message, where it can",
        )],
    }
}
