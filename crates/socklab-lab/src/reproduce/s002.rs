//! Seed 002: Stevens' figure 27.1 on Linux, server CPU time per design.

use super::published::S002_SERVERS;
use super::*;

const SOURCE: &str = "Seed 002 (002_a59d09d9824d06b3.txt), \"Preliminary results\": user and system time per server program in three runs (Pentium III 450 MHz, Red Hat 6.2; dual Pentium III 650 MHz, non-SMP kernel; the same, SMP kernel), \"repeatable to about 10% accuracy\".";

/// The seed's user + sys seconds per run, by design.
fn totals(design: &str) -> Option<[f64; 3]> {
    let runs = S002_SERVERS.iter().find(|s| s.0 == design)?.2?;
    Some(runs.map(|(u, s)| u + s))
}

/// The CPU metric of a design experiment: per connection, else per request.
fn metric(st: &ExperimentStats) -> &'static str {
    if st
        .cells
        .iter()
        .any(|c| c.metrics.contains_key("cpu_us_per_conn"))
    {
        "cpu_us_per_conn"
    } else {
        "cpu_us_per_req"
    }
}

fn table(st: &ExperimentStats, ours_header: &str, m: &str) -> Table {
    let mut table = Table::new(&[
        "design",
        "seed program",
        "seed: user + sys s (run 1 / 2 / 3)",
        ours_header,
    ]);
    for (design, program, _) in S002_SERVERS {
        let seed = totals(design).map_or_else(
            || "N/A (Linux could not run or account it then)".to_string(),
            |t| t.map(|x| format!("{x:.1}")).join(" / "),
        );
        table.row(vec![
            design.to_string(),
            program.to_string(),
            seed,
            ours(st, find(st, "load", &[("design", design)]), m),
        ]);
    }
    table
}

/// The designs experiment beside seed 002.
pub fn designs(st: &ExperimentStats) -> Comparison {
    let m = metric(st);
    let cell = |d: &str| find(st, "load", &[("design", d)]);
    let measured: Vec<&str> = S002_SERVERS
        .iter()
        .filter(|s| s.2.is_some())
        .map(|s| s.0)
        .collect();
    let against = |x: &str| -> Vec<Result<Diff, String>> {
        measured
            .iter()
            .filter(|d| **d != x)
            .map(|d| Diff::cells(st, m, (x, cell(x)), (d, cell(d))))
            .collect()
    };
    // The seed's cheapest pool design in each run.
    let pool: Vec<&str> = measured
        .iter()
        .copied()
        .filter(|d| *d != "iterative" && *d != "fork")
        .collect();
    let cheapest: Vec<String> = (0..3)
        .map(|run| {
            pool.iter()
                .filter_map(|d| Some((d, totals(d)?[run])))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(d, _)| format!("run {}: {d}", run + 1))
                .unwrap_or_default()
        })
        .collect();
    let mut ranked: Vec<(&str, f64)> = pool
        .iter()
        .filter_map(|d| Some((*d, st.cells[cell(d)?].metrics.get(m)?.mean)))
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let ours_order = if ranked.is_empty() {
        "no pool design measured here".to_string()
    } else {
        format!(
            "ours by mean: {}",
            ranked.iter().map(|r| r.0).collect::<Vec<_>>().join(" < ")
        )
    };
    let findings = vec![
        judge(
            "one process per connection (fork, serv01) costs the most CPU of the seed's designs, in all three of its runs",
            against("fork"),
            Expect::Greater,
        ),
        judge(
            "the iterative server (serv00) costs the least CPU, in all three runs",
            against("iterative"),
            Expect::Less,
        ),
        Finding::new(
            "the order among the pool designs (prefork and prethread)",
            Verdict::NotComparable,
            format!(
                "the seed's own runs order them differently (cheapest: {}) and it says its figures repeat to about 10%, so it publishes no order among them to reproduce; {ours_order}",
                cheapest.join(", ")
            ),
        ),
    ];
    Comparison {
        seed: "002",
        source: SOURCE,
        note: "The seed's figures are whole-run seconds on Pentium III machines, ours CPU per connection here: absolute values are not comparable, the order of the designs by CPU is.".into(),
        table: table(st, &format!("ours: {m} (mean, 95% CI, n)"), m),
        findings,
    }
}

/// The designs under HTTP keep-alive: not the seed's workload.
pub fn designs_http(st: &ExperimentStats) -> Comparison {
    let m = metric(st);
    Comparison {
        seed: "002",
        source: SOURCE,
        note: "Another workload than the seed's: its figures are listed for reference only.".into(),
        table: table(st, &format!("ours: {m} under HTTP keep-alive (mean, 95% CI, n)"), m),
        findings: vec![Finding::new(
            "the order of the server designs by CPU",
            Verdict::NotComparable,
            "the seed's servers answered Stevens' client, one new connection per request; this experiment keeps 32 HTTP connections alive, so its CPU per request measures something else (see the designs experiment for the seed's workload)",
        )],
    }
}
