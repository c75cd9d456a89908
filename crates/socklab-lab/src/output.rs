//! What experiments look like to people and programs: the human table, JSON, CSV, and the
//! Markdown report. Everything here reads [`ExperimentStats`], which come from the store.

use std::fmt::Write as _;

use serde_json::json;

pub use crate::columns::{summary_table, TOP_MEAN};
use crate::columns::{summary_table_with, Columns};
use crate::markdown::{md_code, md_lines, md_text};
use crate::model::stats::ExperimentStats;
use crate::store::Store;
use crate::summary::experiment_stats_with;
use crate::table::{num, Table};
use crate::workload::judge::MIN_N_VERDICT;
use crate::workload::{metric, report_tables};
use crate::LabError;
use socklab_stats::BIMODAL_GAP_RATIO;

/// The explanation of the summary table's columns (the same as the Markdown report's).
pub const COLUMNS_NOTE: &str = "Columns: the mean of the primary metric (throughput, total µs of a repetition's round trips for ping-pong, total seconds of a file transfer; each column of a rate, size or latency in the one unit its header names, e.g. Mbit/s when every cell is below 1 Gbit/s, ms from 1 ms) over the measured repetitions with its 95% confidence interval: ±half-width of the Student-t interval, or *lo–hi* when the metric is strictly positive in every repetition and that symmetric interval would reach below zero; then the Student-t interval of the logarithms, back-transformed (exp(m ± h), asymmetric, never below zero); for counts that cannot be negative but include zeros (no logarithm exists), the Student-t interval truncated at zero (*0–hi*); sample standard deviation, min, median and max; *vs best* (or *vs baseline*) is the difference of means from the best (or the baseline) cell of the same workload (a bulk TLS cell's from its plain twin, the same cell with tls=off), marked (ns) when Welch's t-test finds it not significant at p < 0.05, and (n<5) when either cell has fewer than 5 repetitions (no verdict: the interval is too wide to decide); a comparison where either cell's repetitions fall into two clusters (sorted, split at the largest gap: each side ≥ 2 values, the gap over 3× the larger range of the two sides and over 5% of the median) is marked *bimodal*, shows the difference of medians and the Mann–Whitney U test's p (*MW p*, exact without ties), and is significant only when Mann–Whitney and Welch both find p < 0.05. Other columns are means: over an emulated link first TCP's final smoothed RTT (*rtt*) and the mean wait in the link's queue client to server (*qdelay*); send calls (*writes*), receiver read() calls (*reads*), bytes per read, sender and receiver CPU as a percentage of elapsed time, with `tls` their CPU per byte moved (ns/B, = CPU seconds per GB) and the streams' mean TLS handshake (ms), TCP retransmissions, Jain's *fairness* index over the streams of a test of several; for file transfers goodput (Mbit/s), retransmissions (*retx*: TCP segments or rudp packets), rudp's spurious retransmissions, the final smoothed RTT and the fraction of *failed* repetitions. *n* is the number of measured repetitions in the statistics: *(+k invalid)* when k more were marked invalid (emu_valid = 0: the emulated link could not keep up) and left out, *(+k invalid, retried)* when each was re-run (a cell runs until it has n valid repetitions, at most 2n attempts; *short of n after 2n attempts* when they did not give n), *(incl. k invalid)* when `keep_invalid` kept them (and nothing was re-run).";

/// The line under the human table that explains an interval printed `lo–hi`.
const CI_LINE: &str = "±95% CI: Student t; lo–hi = Student t of the logarithms, back-transformed (a positive metric whose ±interval would reach below 0), or 0–hi = Student t truncated at 0 (a count with zeros); JSON and CSV print the same interval as ci95_lo/ci95_hi\n";

/// The parameters every cell of a workload shares (for the table's caption); prefixed by the
/// workload when the experiment mixes workloads: `bulk: cc=cubic …; pipe: bytes=256M`.
pub fn common_config(st: &ExperimentStats) -> String {
    let mut workloads: Vec<&str> = st.cells.iter().map(|c| c.cell.workload.as_str()).collect();
    workloads.dedup();
    let mixed = workloads.len() > 1;
    workloads
        .iter()
        .filter_map(|w| {
            let cells: Vec<_> = st.cells.iter().filter(|c| c.cell.workload == *w).collect();
            let common: Vec<String> = cells[0]
                .cell
                .config
                .0
                .iter()
                .filter(|(k, v)| cells.iter().all(|c| c.cell.config.0.get(*k) == Some(v)))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            match (common.is_empty(), mixed) {
                (true, _) => None,
                (false, true) => Some(format!("{w}: {}", common.join(" "))),
                (false, false) => Some(common.join(" ")),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The human output of a finished experiment.
pub fn human(st: &ExperimentStats) -> String {
    human_with(st, None)
}

/// [`human`], its summary table with the columns `pick` names (default: the workloads' own).
pub fn human_with(st: &ExperimentStats, pick: Option<&Columns>) -> String {
    let e = &st.experiment;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "experiment {} '{}' ({}, {} reps + {} warm-up per cell, {})",
        e.id, e.name, e.status, e.reps, e.warmup, e.run_order
    );
    let common = common_config(st);
    if !common.is_empty() {
        let _ = writeln!(out, "fixed: {common}");
    }
    out.push_str(&summary_table_with(st, pick).to_text());
    for t in report_tables(st) {
        let _ = writeln!(out, "{}", t.text_heading);
        out.push_str(&t.table.to_text());
    }
    let has_baseline = st
        .cells
        .first()
        .and_then(|c| st.baseline(&c.cell.workload))
        .is_some();
    out.push_str(CI_LINE);
    let twins = (0..st.cells.len()).any(|i| st.twin_of(i).is_some());
    out.push_str(if has_baseline && twins {
        "vs baseline: difference of means from the baseline cell, a TLS cell's from its plain twin (the same cell with tls=off)"
    } else if has_baseline {
        "vs baseline: difference of means from the baseline cell"
    } else {
        "vs best / vs top mean: difference of means from the cell with the top mean, called best only when it is significantly better than every other cell"
    });
    out.push_str("; (ns) = not significant (Welch's t-test, p >= 0.05); (n<5) = too few repetitions for a verdict; bimodal: this cell / reference / both = whose repetitions form two clusters: medians, Mann–Whitney (MW) and Welch must both find p < 0.05\n");
    out
}

/// JSON of an experiment: metadata, host, facts, every cell's configuration, summaries and
/// comparison (the summary table's `vs` column), and the workloads' own tables.
pub fn to_json(st: &ExperimentStats) -> serde_json::Value {
    let cells: Vec<serde_json::Value> = st
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let metrics: serde_json::Map<String, serde_json::Value> = c
                .metrics
                .iter()
                .map(|(k, s)| {
                    let mut v = serde_json::to_value(s).unwrap_or_default();
                    v["unit"] = json!(metric(k).unit);
                    // Every repetition's value, so that this JSON is a baseline for `compare`.
                    v["values"] = json!(c.values.get(k));
                    (k.clone(), v)
                })
                .collect();
            json!({
                "index": c.cell.idx,
                "label": c.cell.label,
                "workload": c.cell.workload,
                "config": c.cell.config.0,
                "n": c.n,
                "invalid": c.invalid,
                "attempts": c.attempts,
                "retried": c.retried,
                "retries_exhausted": c.retries_exhausted(),
                "metrics": metrics,
                "comparison": crate::output_json::comparison(st, i),
            })
        })
        .collect();
    json!({
        "schema": "socklab.experiment/1",
        "experiment": st.experiment,
        "host": st.host.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        "facts": st.facts.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        "cells": cells,
        "tables": crate::output_json::tables(st),
    })
}

/// A text cell of a CSV file: quoted when it holds `,`, `"` or a line break, and a text that a
/// spreadsheet would read as a formula (a leading `=`, `+`, `-`, `@`, tab or CR) prefixed with
/// `'`, as OWASP's CSV-injection guidance advises. A number stays as written (`-1.5`, `+3`).
pub(crate) fn csv_field(s: &str) -> String {
    let number = s.parse::<f64>().is_ok_and(f64::is_finite)
        && s.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c));
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']) && !number;
    let s = if formula {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// Tidy CSV of the summaries: one row per cell and metric. `ci95_lo`/`ci95_hi` are the
/// interval the report draws, `ci95_method` names it (as in the JSON).
pub fn summary_csv(st: &ExperimentStats) -> String {
    let mut out = String::from(
        "experiment,cell,label,workload,metric,unit,n,mean,sd,ci95_lo,ci95_hi,min,median,max,ci95_method\n",
    );
    for c in &st.cells {
        for (k, s) in &c.metrics {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                st.experiment.id,
                c.cell.idx,
                csv_field(&c.cell.label),
                csv_field(&c.cell.workload),
                csv_field(k),
                csv_field(metric(k).unit),
                s.n,
                s.mean,
                opt(s.sd),
                opt(s.ci95().map(|c| c.0)),
                opt(s.ci95().map(|c| c.1)),
                s.min,
                s.median,
                s.max,
                s.ci95_method().map_or("", |m| m.as_str())
            );
        }
    }
    out
}

/// CSV of every repetition of experiments `ids`: one row per repetition, configuration keys
/// (`cfg_` prefix) and metrics as columns, as a pandas user expects.
pub fn samples_csv(store: &Store, ids: &[i64]) -> Result<String, LabError> {
    let mut rows = Vec::new();
    for &id in ids {
        let cells = store.cells(id)?;
        for s in store.samples(id)? {
            if let Some(c) = cells.iter().find(|c| c.id == s.cell_id) {
                rows.push((id, c.clone(), s));
            }
        }
    }
    let mut cfg_keys: Vec<String> = rows
        .iter()
        .flat_map(|(_, c, _)| c.config.0.keys().cloned())
        .collect();
    cfg_keys.sort();
    cfg_keys.dedup();
    let mut metric_keys: Vec<String> = rows
        .iter()
        .flat_map(|(_, _, s)| s.metrics.keys().cloned())
        .collect();
    metric_keys.sort();
    metric_keys.dedup();
    let mut out = String::from("experiment,cell,label,workload,rep,warmup,started_at,wall_s");
    for k in &cfg_keys {
        let _ = write!(out, ",{}", csv_field(&format!("cfg_{k}")));
    }
    for k in &metric_keys {
        let _ = write!(out, ",{}", csv_field(k));
    }
    out.push('\n');
    for (id, c, s) in &rows {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{}",
            id,
            c.idx,
            csv_field(&c.label),
            csv_field(&c.workload),
            s.rep,
            u8::from(s.warmup),
            s.started_at,
            s.wall_s
        );
        for k in &cfg_keys {
            let _ = write!(
                out,
                ",{}",
                csv_field(c.config.0.get(k).map(String::as_str).unwrap_or(""))
            );
        }
        for k in &metric_keys {
            let _ = write!(
                out,
                ",{}",
                s.metrics.get(k).map(|v| v.to_string()).unwrap_or_default()
            );
        }
        out.push('\n');
    }
    Ok(out)
}

/// JSON of every repetition (one object per repetition).
pub fn samples_json(store: &Store, experiment: i64) -> Result<serde_json::Value, LabError> {
    let cells = store.cells(experiment)?;
    let rows: Vec<serde_json::Value> = store
        .samples(experiment)?
        .into_iter()
        .filter_map(|s| {
            let c = cells.iter().find(|c| c.id == s.cell_id)?;
            Some(json!({
                "experiment": experiment,
                "cell": c.idx,
                "label": c.label,
                "workload": c.workload,
                "config": c.config.0,
                "rep": s.rep,
                "warmup": s.warmup,
                "started_at": s.started_at,
                "wall_s": s.wall_s,
                "metrics": s.metrics,
                "extra": s.extra,
            }))
        })
        .collect();
    Ok(serde_json::Value::Array(rows))
}

/// A Markdown report of several experiments, generated from the store alone.
pub fn markdown_report(store: &Store, ids: &[i64], title: &str) -> Result<String, LabError> {
    markdown_report_with(store, ids, title, false)
}

/// [`markdown_report`], with the repetitions marked invalid kept when `keep_invalid`.
pub fn markdown_report_with(
    store: &Store,
    ids: &[i64],
    title: &str,
    keep_invalid: bool,
) -> Result<String, LabError> {
    let mut out = format!("# {}\n\n", md_text(title));
    let _ = writeln!(
        out,
        "Generated by socklab {} from {}.\n",
        env!("CARGO_PKG_VERSION"),
        md_code(&store.path().display().to_string())
    );
    let all = ids
        .iter()
        .map(|&id| experiment_stats_with(store, id, keep_invalid))
        .collect::<Result<Vec<_>, _>>()?;
    // The first screen: each experiment's headline figure and each seed finding's verdict.
    out.push_str(&crate::glance::glance(&all).markdown());
    let mut host_written = false;
    for st in all {
        if !host_written {
            out.push_str("## Host\n\n");
            let mut t = Table::new(&["fact", "value"]);
            t.left = vec![true, true];
            for (k, v) in &st.host {
                t.row(vec![k.clone(), v.clone()]);
            }
            out.push_str(&t.to_markdown());
            out.push('\n');
            host_written = true;
        }
        let e = &st.experiment;
        let _ = writeln!(
            out,
            "<a id=\"exp-{id}\"></a>\n\n## {} (experiment {id})\n",
            md_text(&e.name),
            id = e.id
        );
        if !e.description.is_empty() {
            let _ = writeln!(out, "{}\n", md_lines(&e.description));
        }
        let _ = writeln!(
            out,
            "Status **{}**; {} repetitions per cell after {} warm-up, order {}; started {}.\n\nCommand: {}\n",
            md_text(&e.status),
            e.reps,
            e.warmup,
            md_text(&e.run_order),
            md_text(&e.created_at),
            md_code(&e.command)
        );
        let common = common_config(&st);
        if !common.is_empty() {
            let _ = writeln!(out, "Fixed parameters: {}\n", md_code(&common));
        }
        out.push_str(&summary_table(&st).to_markdown());
        out.push('\n');
        for t in report_tables(&st) {
            let _ = writeln!(out, "{}\n", t.note);
            out.push_str(&t.table.to_markdown());
            out.push('\n');
        }
        out.push_str(&crate::reproduce::seed_markdown(&st));
        out.push_str(&notes(&md_labels(&st)));
        if !st.facts.is_empty() {
            out.push_str("\nExperiment facts:\n\n");
            out.push_str(&crate::facts::table(&st.facts).to_markdown());
            out.push('\n');
        }
    }
    out.push_str(COLUMNS_NOTE);
    out.push('\n');
    Ok(out)
}

/// `st` with its cells' labels and values escaped for Markdown ([`md_text`]), for the notes,
/// which quote them inside Markdown of their own (the HTML report escapes them itself).
fn md_labels(st: &ExperimentStats) -> ExperimentStats {
    let mut st = st.clone();
    for c in &mut st.cells {
        c.cell.label = md_text(&c.cell.label);
        for v in c.cell.config.0.values_mut() {
            *v = md_text(v);
        }
    }
    st
}

/// Plain-language notes: the best cell, the noisy cells, differences that are not significant.
pub fn notes(st: &ExperimentStats) -> String {
    let mut out = String::new();
    let primary = st.primary();
    let m = metric(primary);
    let mut workloads: Vec<&str> = st.cells.iter().map(|c| c.cell.workload.as_str()).collect();
    workloads.dedup();
    for w in &workloads {
        if st.baseline(w).is_none() {
            best_note(&mut out, st, primary, w);
        }
    }
    let off: Vec<String> = (0..st.cells.len())
        .filter_map(|i| {
            let why = st.not_in_effect(i)?;
            Some(format!("**{}**: {why}", st.cells[i].cell.label))
        })
        .collect();
    if !off.is_empty() {
        let _ = writeln!(
            out,
            "- Not in effect (never named best): {}.",
            off.join("; ")
        );
    }
    let against = if workloads.iter().any(|w| st.baseline(w).is_some()) {
        "the baseline"
    } else if workloads.iter().all(|w| st.best(primary, w).is_some()) {
        "the best"
    } else {
        "the top mean"
    };
    let ns: Vec<&str> = st
        .cells
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            st.reference(primary, &c.cell.workload) != Some(*i)
                && matches!(st.vs_best(*i, primary), Some(v) if v.significant() == Some(false))
        })
        .map(|(_, c)| c.cell.label.as_str())
        .collect();
    if !ns.is_empty() {
        let _ = writeln!(
            out,
            "- Not significantly different from {against} (Welch's t-test, p >= 0.05): {}.",
            ns.join("; ")
        );
    }
    let sig: Vec<String> = st
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            if st.reference(primary, &c.cell.workload) == Some(i) {
                return None;
            }
            let v = st.vs_best(i, primary)?;
            let t = v.test.as_ref()?;
            (v.significant() == Some(true)).then(|| {
                format!(
                    "{} ({}, 95% CI of the difference {} to {} {})",
                    c.cell.label,
                    v.shown_text(),
                    num(t.ci95_lo),
                    num(t.ci95_hi),
                    m.unit
                )
            })
        })
        .collect();
    if !sig.is_empty() && against == "the baseline" {
        let _ = writeln!(
            out,
            "- Significantly different from the baseline: {}.",
            sig.join("; ")
        );
    }
    let compared = |i: usize, c: &&crate::model::stats::CellStats| {
        let v = st.vs_best(i, primary)?;
        (st.reference(primary, &c.cell.workload) != Some(i)).then_some(v)
    };
    let few: Vec<&str> = st
        .cells
        .iter()
        .enumerate()
        .filter(
            |(i, c)| matches!(compared(*i, c), Some(v) if v.test.is_some() && v.n < MIN_N_VERDICT),
        )
        .map(|(_, c)| c.cell.label.as_str())
        .collect();
    if !few.is_empty() {
        let _ = writeln!(
            out,
            "- Too few repetitions to decide (n<{MIN_N_VERDICT}: the interval is too wide for a verdict): {}.",
            few.join("; ")
        );
    }
    let bimodal: Vec<String> = st
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let v = compared(i, &c).filter(|v| v.bimodal)?;
            Some(format!(
                "{} (bimodal: {}; medians {}, Mann–Whitney p = {}, Welch p = {})",
                c.cell.label,
                v.bimodal_side(),
                v.shown_text().trim_end_matches(" median"),
                v.rank
                    .as_ref()
                    .map_or_else(|| "-".into(), |m| format!("{:.3}", m.p_value)),
                v.test
                    .as_ref()
                    .map_or_else(|| "-".into(), |w| format!("{:.3}", w.p_value)),
            ))
        })
        .collect();
    if !bimodal.is_empty() {
        let _ = writeln!(
            out,
            "- Bimodal: the repetitions of these comparisons fall into two clusters (a gap over {BIMODAL_GAP_RATIO}× the spread inside each, ≥ 2 values each), so means mislead; compared by medians and the Mann–Whitney U test beside Welch's, significant only when both agree: {}.",
            bimodal.join("; ")
        );
    }
    let noisy: Vec<String> = st
        .cells
        .iter()
        .filter_map(|c| {
            let cv = c.metrics.get(primary)?.cv?;
            (cv > NOISY_CV).then(|| format!("{} (cv {:.0}%)", c.cell.label, cv * 100.0))
        })
        .collect();
    if !noisy.is_empty() {
        let _ = writeln!(out, "- Noisy (coefficient of variation above {:.0}%): {}. More repetitions would narrow their intervals.", NOISY_CV * 100.0, noisy.join("; "));
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The note on the best cell of workload `w`: named only when it is significantly better
/// than every other cell; else which cells the top mean beats, and about how many repetitions
/// would decide.
fn best_note(out: &mut String, st: &ExperimentStats, primary: &str, w: &str) {
    let m = metric(primary);
    let Some(t) = st.top(primary, w) else {
        return;
    };
    let beaten = st.beaten(primary, w);
    if beaten.is_empty() {
        return;
    }
    let c = &st.cells[t];
    let at = format!("{} {}", num(c.metrics[primary].mean), m.unit);
    if st.best(primary, w) == Some(t) {
        let _ = writeln!(
            out,
            "- Best {w} cell: **{}** at {at}, significantly better than every other {w} cell (Welch's t-test, p < 0.05).",
            c.cell.label
        );
        return;
    }
    let wins: Vec<&str> = beaten
        .iter()
        .filter(|(_, sig)| *sig)
        .map(|(i, _)| st.cells[*i].cell.label.as_str())
        .collect();
    let beats = if wins.is_empty() {
        "it is significantly better than none of them".to_string()
    } else {
        format!("it is significantly better only than {}", wins.join("; "))
    };
    let need = st.needed_reps(primary, w).map_or_else(String::new, |n| {
        format!(
            " (the closest difference would need ≈ {n} repetitions per cell to show at this spread)"
        )
    });
    let _ = writeln!(
        out,
        "- No {w} cell is significantly better than the others at this n{need}: the top mean is **{}** at {at}, and {beats}.",
        c.cell.label
    );
}

/// Coefficient of variation above which a cell is flagged noisy.
pub const NOISY_CV: f64 = 0.10;
