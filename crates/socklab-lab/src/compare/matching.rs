//! Which cells of A and B are the same configuration: equal workload and configuration once
//! the keys named by `ignore` are left out. Cells without a partner are listed, never dropped
//! silently; a configuration that two cells of one side share once keys are ignored is an
//! error (which pair would be compared is then a guess).

use std::collections::{BTreeMap, BTreeSet};

use super::source::{Side, SideCell};
use crate::LabError;

/// The cells of A and B paired by configuration, and those without a partner.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched<'a> {
    /// Pairs (A's cell, B's cell), in A's order.
    pub pairs: Vec<(&'a SideCell, &'a SideCell)>,
    /// A's cells without a partner in B.
    pub only_a: Vec<&'a SideCell>,
    /// B's cells without a partner in A.
    pub only_b: Vec<&'a SideCell>,
}

/// A cell's configuration without the ignored keys, with its workload.
fn key(c: &SideCell, ignore: &[String]) -> (String, BTreeMap<String, String>) {
    let config = c
        .config
        .iter()
        .filter(|(k, _)| !ignore.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (c.workload.clone(), config)
}

/// Pairs the cells of `a` and `b` whose configurations are equal but for `ignore`.
///
/// Errors (bad input): a key in `ignore` that no cell has (naming the keys there are), two
/// cells of one side equal once `ignore` is applied, no pair at all (naming the keys the first
/// cells differ in).
pub fn match_cells<'a>(
    a: &'a Side,
    b: &'a Side,
    ignore: &[String],
) -> Result<Matched<'a>, LabError> {
    let known: BTreeSet<&str> = a
        .cells
        .iter()
        .chain(&b.cells)
        .flat_map(|c| c.config.keys().map(String::as_str))
        .collect();
    let unknown: Vec<&str> = ignore
        .iter()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(LabError::Plan(format!(
            "`ignore` names {}, which no cell has; the keys are: {}",
            unknown.join(", "),
            known.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    for side in [a, b] {
        let mut seen = BTreeMap::new();
        for c in &side.cells {
            if let Some(other) = seen.insert(key(c, ignore), &c.label) {
                return Err(LabError::Plan(format!(
                    "cells '{other}' and '{}' of {} are the same configuration once `ignore` leaves out {}: compare them one pair at a time (ignore fewer keys)",
                    c.label,
                    side.name,
                    ignore.join(", ")
                )));
            }
        }
    }
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    let mut used = vec![false; b.cells.len()];
    for ca in &a.cells {
        let ka = key(ca, ignore);
        match b.cells.iter().position(|cb| key(cb, ignore) == ka) {
            Some(i) => {
                used[i] = true;
                pairs.push((ca, &b.cells[i]));
            }
            None => only_a.push(ca),
        }
    }
    let only_b = b
        .cells
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(c, _)| c)
        .collect();
    if pairs.is_empty() {
        return Err(LabError::Plan(no_common(a, b, ignore)));
    }
    Ok(Matched {
        pairs,
        only_a,
        only_b,
    })
}

/// Why nothing matched: the keys the first cells differ in (or their workloads).
fn no_common(a: &Side, b: &Side, ignore: &[String]) -> String {
    let (Some(ca), Some(cb)) = (a.cells.first(), b.cells.first()) else {
        return "no common cells: a side holds no cells".into();
    };
    if ca.workload != cb.workload {
        return format!(
            "no common cells: {} ran {}, {} ran {}",
            a.name, ca.workload, b.name, cb.workload
        );
    }
    let keys: BTreeSet<&String> = ca.config.keys().chain(cb.config.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| !ignore.contains(k) && ca.config.get(*k) != cb.config.get(*k))
        .map(|k| {
            let v = |c: &SideCell| c.config.get(k).cloned().unwrap_or_else(|| "-".into());
            format!("{k} ({} vs {})", v(ca), v(cb))
        })
        .collect();
    format!(
        "no common cells: the configurations differ in {}; add the keys to `ignore` to compare them anyway",
        differ.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(label: &str, kv: &[(&str, &str)]) -> SideCell {
        SideCell {
            workload: "bulk".into(),
            label: label.into(),
            config: kv
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            values: BTreeMap::new(),
        }
    }

    fn side(name: &str, cells: Vec<SideCell>) -> Side {
        Side {
            name: name.into(),
            cells,
        }
    }

    #[test]
    fn cells_pair_by_configuration_and_the_rest_are_listed() {
        let a = side(
            "A",
            vec![
                cell("x", &[("bufsize", "128K"), ("opts", "a")]),
                cell("y", &[("bufsize", "128K"), ("opts", "b")]),
            ],
        );
        let b = side(
            "B",
            vec![
                cell("y2", &[("bufsize", "128K"), ("opts", "b")]),
                cell("z", &[("bufsize", "128K"), ("opts", "c")]),
            ],
        );
        let m = match_cells(&a, &b, &[]).unwrap();
        assert_eq!(m.pairs.len(), 1);
        assert_eq!(
            (m.pairs[0].0.label.as_str(), m.pairs[0].1.label.as_str()),
            ("y", "y2")
        );
        assert_eq!(m.only_a[0].label, "x");
        assert_eq!(m.only_b[0].label, "z");
    }

    #[test]
    fn ignored_keys_make_different_configurations_match() {
        let a = side(
            "A",
            vec![cell("big", &[("bufsize", "128K"), ("opts", "a")])],
        );
        let b = side(
            "B",
            vec![cell("small", &[("bufsize", "2K"), ("opts", "a")])],
        );
        let e = match_cells(&a, &b, &[]).unwrap_err().to_string();
        assert!(
            e.contains("bufsize (128K vs 2K)") && e.contains("`ignore`"),
            "{e}"
        );
        let m = match_cells(&a, &b, &["bufsize".into()]).unwrap();
        assert_eq!(m.pairs.len(), 1);
        assert!(m.only_a.is_empty() && m.only_b.is_empty());
    }

    #[test]
    fn an_unknown_ignored_key_names_the_keys_there_are() {
        let a = side("A", vec![cell("x", &[("bufsize", "128K")])]);
        let e = match_cells(&a, &a.clone(), &["bufsise".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bufsise") && e.contains("the keys are: bufsize"),
            "{e}"
        );
    }

    #[test]
    fn two_cells_of_a_side_that_become_equal_are_an_error() {
        let a = side(
            "A",
            vec![
                cell("x", &[("bufsize", "128K")]),
                cell("y", &[("bufsize", "2K")]),
            ],
        );
        let e = match_cells(&a, &a.clone(), &["bufsize".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'x' and 'y'"), "{e}");
    }

    #[test]
    fn different_workloads_never_match() {
        let a = side("A", vec![cell("x", &[])]);
        let mut b = side("B", vec![cell("x", &[])]);
        b.cells[0].workload = "pingpong".into();
        let e = match_cells(&a, &b, &[]).unwrap_err().to_string();
        assert!(e.contains("ran bulk") && e.contains("ran pingpong"), "{e}");
    }
}
