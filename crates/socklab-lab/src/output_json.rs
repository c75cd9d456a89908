//! What the `--json` statistics carry beyond each cell's summaries, so that they hold every
//! figure the text prints (issue 28 part 4): the comparison column of the summary table (`vs
//! best`, `vs baseline`, `vs top mean`: the difference, its tests and its verdict) and the
//! workloads' own tables (streams, files, latency under load, server designs, rate search).

use serde_json::{json, Value};

use crate::model::stats::ExperimentStats;
use crate::table::Table;
use crate::workload::report_tables;

/// What the reference row of a workload without a baseline reads when its top mean is not
/// significantly better than every other cell (so it is not called the best).
pub const TOP_MEAN: &str = "top mean (not best)";

/// The comparison column's text for cell `i` on metric `primary`, as the summary table
/// prints it: `best`, `baseline`, [`TOP_MEAN`], `-` (a lone cell), `-3.2% (ns)`, `not in
/// effect; …`.
pub fn vs_text(st: &ExperimentStats, i: usize, primary: &str) -> String {
    let w = &st.cells[i].cell.workload;
    match st.vs_best(i, primary) {
        Some(_) if st.reference(primary, w) == Some(i) => {
            if st.baseline(w) == Some(i) {
                "baseline".into()
            } else if st.best(primary, w) == Some(i) {
                "best".into()
            } else if st.beaten(primary, w).is_empty() {
                // A lone cell is compared with nothing.
                "-".into()
            } else {
                TOP_MEAN.into()
            }
        }
        Some(v) if st.not_in_effect(i).is_some() => format!("not in effect; {}", v.text()),
        Some(v) => v.text(),
        None if st.not_in_effect(i).is_some() => "not in effect".into(),
        None => "-".into(),
    }
}

/// Cell `i`'s comparison on the primary metric as JSON: the table's `text`; the reference
/// cell it is compared with and what that cell is (`baseline`, `best`, `top_mean`); for a
/// compared cell the relative and absolute differences (of medians too), Welch's and
/// Mann–Whitney's p, and the `verdict` (`significant`, `not_significant`, `too_few_reps` below
/// 5 repetitions, `no_test` below 2); `not_in_effect` says why an option did nothing.
pub fn comparison(st: &ExperimentStats, i: usize) -> Value {
    let primary = st.primary();
    let w = &st.cells[i].cell.workload;
    let reference = st.reference_of(i, primary);
    let against = if st.twin_of(i).is_some() {
        "twin"
    } else if st.baseline(w).is_some() {
        "baseline"
    } else if st.best(primary, w).is_some() {
        "best"
    } else {
        "top_mean"
    };
    let mut v = json!({
        "metric": primary,
        "text": vs_text(st, i, primary),
        "reference_cell": reference.map(|r| st.cells[r].cell.idx),
        "against": reference.map(|_| against),
        "not_in_effect": st.not_in_effect(i),
    });
    if reference == Some(i) {
        v["is_reference"] = json!(true);
        return v;
    }
    if let Some(c) = st.vs_best(i, primary) {
        let verdict = match (c.significant(), &c.test) {
            (_, None) => "no_test",
            (None, _) => "too_few_reps",
            (Some(true), _) => "significant",
            (Some(false), _) => "not_significant",
        };
        v["is_reference"] = json!(false);
        v["rel_diff"] = json!(c.rel);
        v["diff"] = json!(c.diff);
        v["rel_diff_median"] = json!(c.rel_median);
        v["diff_median"] = json!(c.diff_median);
        v["welch_p"] = json!(c.test.as_ref().map(|t| t.p_value));
        v["diff_ci95_lo"] = json!(c.test.as_ref().map(|t| t.ci95_lo));
        v["diff_ci95_hi"] = json!(c.test.as_ref().map(|t| t.ci95_hi));
        v["mann_whitney_p"] = json!(c.rank.as_ref().map(|r| r.p_value));
        v["bimodal"] = json!(c.bimodal.then(|| c.bimodal_side()));
        v["n"] = json!(c.n);
        v["verdict"] = json!(verdict);
    }
    v
}

/// A table as JSON: its headers and rows, each cell as printed.
fn table_json(t: &Table) -> Value {
    json!({ "headers": t.headers, "rows": t.rows })
}

/// The workloads' own tables of `st` (as the text prints them under the summary table):
/// title, heading and cells as printed.
pub fn tables(st: &ExperimentStats) -> Value {
    Value::Array(
        report_tables(st)
            .iter()
            .map(|t| {
                let mut v = table_json(&t.table);
                v["title"] = json!(t.title);
                v["heading"] = json!(t.text_heading.trim_end_matches(':'));
                v
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::output::{summary_table, to_json};
    use crate::summary::experiment_stats;
    use crate::testkit::{lab, reps};

    /// Every figure of the text's comparison column is in the JSON, with its tests.
    #[test]
    fn the_json_carries_the_comparison_column_and_the_workload_tables() {
        let l = lab(
            "bulk",
            Params::new(),
            "bufsize",
            &["16K", "128K", "256K"],
            &[
                reps("gbps", &[10.0, 10.5, 9.5, 10.2, 9.8]),
                reps("gbps", &[20.0, 21.0, 19.0, 20.5, 19.5]),
                reps("gbps", &[19.0, 22.0, 18.0]),
            ],
        );
        let st = experiment_stats(&l.store, l.id).unwrap();
        let json = to_json(&st);
        let table = summary_table(&st);
        let col = table
            .headers
            .iter()
            .position(|h| h.starts_with("vs "))
            .unwrap();
        for (i, row) in table.rows.iter().enumerate() {
            let c = &json["cells"][i]["comparison"];
            assert_eq!(c["text"], row[col].as_str(), "{c}");
            assert_eq!(c["metric"], "gbps");
        }
        let (small, top, few) = (
            &json["cells"][0]["comparison"],
            &json["cells"][1]["comparison"],
            &json["cells"][2]["comparison"],
        );
        assert_eq!(top["is_reference"], true, "{top}");
        assert_eq!(small["reference_cell"], 1);
        assert_eq!(small["verdict"], "significant", "{small}");
        assert!(
            (small["rel_diff"].as_f64().unwrap() + 0.5).abs() < 0.01,
            "{small}"
        );
        assert!(small["welch_p"].as_f64().unwrap() < 0.05);
        assert!(small["mann_whitney_p"].is_number());
        assert_eq!(few["verdict"], "too_few_reps", "{few}");
        assert!(few["text"].as_str().unwrap().ends_with("(n<5)"), "{few}");
        // A workload table: none for one stream; streams give one.
        assert_eq!(json["tables"], json!([]));
        let l = lab(
            "bulk",
            Params::new().with("streams", "2"),
            "bufsize",
            &["64K"],
            &[vec![
                vec![("gbps", 10.0), ("gbps.s0", 4.0), ("gbps.s1", 6.0)],
                vec![("gbps", 12.0), ("gbps.s0", 5.0), ("gbps.s1", 7.0)],
            ]],
        );
        let st = experiment_stats(&l.store, l.id).unwrap();
        let json = to_json(&st);
        let t = &json["tables"][0];
        assert_eq!(t["title"], "Streams", "{t}");
        assert_eq!(t["headers"][2], "s0");
        assert_eq!(t["rows"][0][2], "4.500", "{t}");
    }
}
