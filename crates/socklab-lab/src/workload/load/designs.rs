//! Seed 002's server-design table.

use super::*;
use crate::table::ci_cell;

/// The server-design table (seed 002, Stevens' figure 27.1): per `load` cell with a
/// self-started server, the server's CPU time (mean and 95% CI), CPU per connection, the same
/// minus the `iterative` cell's (the book's way of removing the work every design does; the
/// column is there only when the experiment has an iterative cell), and
/// requests/s, latency, Jain's fairness over the workers and context switches. `None` when the
/// experiment has no such cells.
pub fn designs_table(st: &ExperimentStats) -> Option<Table> {
    let cells: Vec<_> = st
        .cells
        .iter()
        .filter(|c| c.cell.workload == LoadSpec::KIND && c.metrics.contains_key("srv_cpu_s"))
        .collect();
    if cells.is_empty() {
        return None;
    }
    let mean = |c: &CellStats, m: &str| c.metrics.get(m).map(|s| s.mean);
    let base = cells
        .iter()
        .find(|c| c.cell.config.get("design") == Some("iterative"))
        .and_then(|c| mean(c, "cpu_us_per_conn"));
    // The "- iterative" column only when the experiment has the iterative baseline.
    let mut headers = vec![
        "design",
        "workers",
        "n",
        "srv cpu s",
        "±95% CI",
        "cpu us/conn",
    ];
    if base.is_some() {
        headers.push("- iterative");
    }
    headers.extend([
        "req/s",
        "p50 us",
        "p99 us",
        "Jain",
        "vol csw",
        "invol csw",
        "errors",
    ]);
    let mut t = Table::new(&headers);
    let f = |v: Option<f64>| v.map(num).unwrap_or_else(|| "-".into());
    for c in cells {
        let cpu = c.metrics.get("srv_cpu_s");
        let per = mean(c, "cpu_us_per_conn");
        let mut row = vec![
            c.cell.config.get("design").unwrap_or("?").to_string(),
            c.cell.config.get("workers").unwrap_or("-").to_string(),
            c.n_text(st.keep_invalid),
            f(cpu.map(|s| s.mean)),
            cpu.map_or_else(|| "-".into(), ci_cell),
            f(per),
        ];
        if let Some(b) = base {
            row.push(per.map_or_else(|| "-".into(), |p| num(p - b)));
        }
        row.extend([
            f(mean(c, "req_per_s")),
            f(mean(c, "lat_p50_us")),
            f(mean(c, "lat_p99_us")),
            mean(c, "fairness").map_or_else(|| "-".into(), |j| format!("{j:.3}")),
            f(mean(c, "srv_nvcsw")),
            f(mean(c, "srv_nivcsw")),
            f(mean(c, "errors")),
        ]);
        t.row(row);
    }
    Some(t)
}

/// The caption of [`designs_table`].
pub const DESIGNS_NOTE: &str = "Server designs (seed 002, Stevens' figure 27.1): server CPU time (user + system of the `socklab serve` process and its reaped children, from wait4) per repetition, CPU per connection, and the same minus the *iterative* server's (the book subtracts the iterative baseline: what is left is the cost of the design itself); requests/s and response-time percentiles from socklab's load generator; *Jain* is the fairness of connections across the workers (1 = even).";

/// The caption of [`designs_table`] when the experiment has no iterative cell (so no column
/// subtracts it).
pub const DESIGNS_NOTE_NO_BASELINE: &str = "Server designs (seed 002, Stevens' figure 27.1): server CPU time (user + system of the `socklab serve` process and its reaped children, from wait4) per repetition and CPU per connection. The book subtracts the *iterative* server's CPU per connection to leave the cost of the design itself; this experiment has no iterative cell, so nothing is subtracted. Requests/s and response-time percentiles from socklab's load generator; *Jain* is the fairness of connections across the workers (1 = even).";
