//! The `udp` workload's rate-search table (`rate = max`): the rate the short trials found,
//! the search criterion (`max_loss`, a bound on the trials' loss), and what the full-length
//! test at that rate then lost, so a criterion of 0 % never reads as the test's loss.

use crate::model::stats::ExperimentStats;
use crate::table::{num, Table};
use crate::workload::ReportTable;

/// The caption of [`search_table`].
pub const SEARCH_NOTE: &str = "`rate = max`: short trials (`trial` long) search the highest offered rate whose trial lost at most `max_loss` of its datagrams; then one test of the full `duration` runs at that rate and is what the other columns measure. `max_loss` is the criterion of the trials, not a bound on the full test: a longer test at the same rate can lose more (queues fill, the receiver falls behind), and *held* says whether it stayed within the criterion.";

/// Per `udp` cell that searched (`max_gbps` stored): the found rate, the loss of the trial
/// that passed at it, the criterion, the full test's loss and whether it held. `None` when no
/// cell searched.
pub fn search_table(st: &ExperimentStats) -> Option<Table> {
    let cells: Vec<_> = st
        .cells
        .iter()
        .filter(|c| c.cell.workload == "udp" && c.metrics.contains_key("max_gbps"))
        .collect();
    if cells.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "config",
        "n",
        "found Gbit/s",
        "criterion: trial loss ≤",
        "trial loss %",
        "full test loss %",
        "held",
    ]);
    for c in cells {
        let mean = |k: &str| c.metrics.get(k).map(|s| s.mean);
        let criterion = c.cell.config.get("max_loss").unwrap_or("0%").to_string();
        let limit = criterion
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .unwrap_or(0.0);
        let full = c.metrics.get("loss_pct");
        let held = match full {
            // Every repetition's full test within the criterion.
            Some(s) if s.max <= limit + 1e-12 => "yes".to_string(),
            Some(s) => format!(
                "no: the full test lost up to {}% (over {criterion})",
                num(s.max)
            ),
            None => "-".to_string(),
        };
        let f = |v: Option<f64>| v.map_or_else(|| "-".into(), num);
        t.row(vec![
            c.cell.label.clone(),
            c.n_text(st.keep_invalid),
            f(mean("max_gbps")),
            criterion,
            f(mean("trial_loss_pct")),
            f(full.map(|s| s.mean)),
            held,
        ]);
    }
    Some(t)
}

/// [`search_table`] as the workload's report table.
pub fn tables(st: &ExperimentStats) -> Vec<ReportTable> {
    search_table(st)
        .map(|table| ReportTable {
            title: "Rate search (rate = max)",
            text_heading:
                "rate search (rate = max: max_loss bounds the trials, not the full test):",
            class: "udp-search",
            note: SEARCH_NOTE,
            table,
        })
        .into_iter()
        .collect()
}
