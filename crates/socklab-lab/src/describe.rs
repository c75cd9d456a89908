//! Descriptions true for what ran. An experiment file's description may name the plan's values
//! as placeholders (`{loops}`, `{duration}`, `{reps}` …), filled from the plan actually built
//! (the full one or the `--quick` one), so the stored description never states a parameter the
//! run did not use.

use crate::model::params::normalize_key;
use crate::plan::Plan;

/// Fills the placeholders of `template` from `plan`: `{reps}`, `{warmup}`, `{cells}`, and
/// `{key}` for a parameter with one value in every cell that has it. `{{` and `}}` are braces.
pub fn fill(template: &str, plan: &Plan) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let at = &rest[i..];
        if at.starts_with("{{") || at.starts_with("}}") {
            out.push_str(&at[..1]);
            rest = &at[2..];
            continue;
        }
        let end = match at.find('}') {
            Some(end) if at.starts_with('{') => end,
            _ => {
                return Err(format!(
                    "a lone '{}': write {{key}} for a value of the plan, or double the brace",
                    &at[..1]
                ))
            }
        };
        out.push_str(&value(&at[1..end], plan)?);
        rest = &at[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The text of placeholder `name` in `plan`.
fn value(name: &str, plan: &Plan) -> Result<String, String> {
    match name {
        "reps" => return Ok(plan.reps.to_string()),
        "warmup" => return Ok(plan.warmup.to_string()),
        "cells" => return Ok(plan.cells.len().to_string()),
        _ => {}
    }
    let key = normalize_key(name);
    let params: Vec<_> = plan.cells.iter().map(|c| c.workload.params()).collect();
    let mut values: Vec<&str> = params.iter().filter_map(|p| p.get(&key)).collect();
    values.dedup();
    values.sort_unstable();
    values.dedup();
    match values.as_slice() {
        [one] => Ok(one.to_string()),
        [] => {
            let mut keys: Vec<&str> = params
                .iter()
                .flat_map(|p| p.0.keys().map(String::as_str))
                .collect();
            keys.sort_unstable();
            keys.dedup();
            Err(format!(
                "unknown placeholder {{{name}}}: use reps, warmup, cells or a parameter of the plan ({})",
                keys.join(", ")
            ))
        }
        many => Err(format!(
            "placeholder {{{name}}} has {} values in this plan ({}): write them out, or give [quick] a description of its own",
            many.len(),
            many.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::file;
    use crate::suites::SUITES;

    fn plan() -> Plan {
        file::parse(
            "name = \"d\"\nworkload = \"memcpy\"\nreps = 4\n[fixed]\nbytes = \"1M\"\n[matrix]\nsize = [\"1K\", \"2K\"]\n[quick]\nreps = 2\nfixed = { bytes = \"64K\" }\n",
            "d.toml",
        )
        .unwrap()
        .plan(false, "")
        .unwrap()
    }

    #[test]
    fn placeholders_take_the_values_of_the_plan() {
        let p = plan();
        assert_eq!(
            fill(
                "{bytes} per rep, {reps}+{warmup} reps of {cells} cells, {{x}}",
                &p
            )
            .unwrap(),
            "1M per rep, 4+1 reps of 2 cells, {x}"
        );
        let e = fill("{byte} each", &p).unwrap_err();
        assert!(
            e.starts_with("unknown placeholder {byte}: use reps, warmup, cells or a parameter of the plan (bytes, size)"),
            "{e}"
        );
        let e = fill("sizes {size}", &p).unwrap_err();
        assert!(
            e.starts_with("placeholder {size} has 2 values in this plan (1K, 2K)"),
            "{e}"
        );
        assert!(fill("a { b", &p).unwrap_err().starts_with("a lone '{'"));
        assert!(fill("a } b", &p).unwrap_err().starts_with("a lone '}'"));
    }

    /// Numbers in a text: runs of digits, with a decimal part (`27.1`).
    fn numbers(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let chars: Vec<char> = text.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            let decimal_point =
                c == '.' && !cur.is_empty() && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() || decimal_point {
                cur.push(c);
            } else if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
        out.extend((!cur.is_empty()).then_some(cur));
        out
    }

    /// The numbers of a plan, per key: every number in a parameter of a cell (`5s` gives 5, a
    /// link rule `rate 100mbit … loss 10%` 100 and 10), and `reps`, `warmup`, `cells`.
    fn plan_numbers(p: &Plan) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (k, n) in [
            ("reps", p.reps),
            ("warmup", p.warmup),
            ("cells", p.cells.len()),
        ] {
            out.entry(k.into()).or_default().insert(n.to_string());
        }
        for c in &p.cells {
            for (k, v) in &c.workload.params().0 {
                out.entry(k.clone()).or_default().extend(numbers(v));
            }
        }
        out
    }

    /// The numbers that belong to one variant only: a value of a key in one plan and not the
    /// other's (`loops` 500 and 50, `duration` 5s and 1s).
    fn variant_numbers(full: &Plan, quick: &Plan) -> BTreeSet<String> {
        let (a, b) = (plan_numbers(full), plan_numbers(quick));
        let none = BTreeSet::new();
        a.keys()
            .chain(b.keys())
            .flat_map(|k| {
                let (x, y) = (a.get(k).unwrap_or(&none), b.get(k).unwrap_or(&none));
                x.symmetric_difference(y).cloned().collect::<Vec<_>>()
            })
            .collect()
    }

    /// Numbers in descriptions that are not parameters of the plan: the seeds' numbers, the
    /// book's figure, the protocol version, counts of listed designs and a metric's value.
    const REFERENCES: &[&str] = &[
        "Seed 000",
        "Seed 001",
        "Seed 002",
        "Seed 003",
        "Seed 004",
        "seed 000",
        "seed 001",
        "seed 002",
        "seed 003",
        "seed 004",
        "fig. 27.1",
        "HTTP/1.1",
        "prefork x 4",
        "prethread x 3",
        "epoll x 3",
        "rebind ok = 1",
        "3 nbufs/bufsize pairs",
    ];

    /// `text` with its references and placeholders blanked.
    fn literal(text: &str, used: &mut Vec<&'static str>) -> String {
        let mut t = text.to_string();
        for r in REFERENCES {
            if t.contains(r) {
                used.push(r);
                t = t.replace(r, " ");
            }
        }
        let mut out = String::new();
        for (i, part) in t.split('{').enumerate() {
            out.push_str(if i == 0 {
                part
            } else {
                part.split_once('}').map_or(part, |p| p.1)
            });
            out.push(' ');
        }
        out
    }

    /// The numbers of `text` that `plan` does not explain.
    fn unexplained(text: &str, plan: &Plan, used: &mut Vec<&'static str>) -> Vec<String> {
        let known: BTreeSet<String> = plan_numbers(plan).into_values().flatten().collect();
        numbers(&literal(text, used))
            .into_iter()
            .filter(|n| !known.contains(n))
            .collect()
    }

    /// The variant numbers of an experiment file (see [`variant_numbers`]), after checking its
    /// descriptions against both variants.
    fn check_file(name: &str, text: &str, used: &mut Vec<&'static str>) -> BTreeSet<String> {
        let f = file::parse(text, name).unwrap_or_else(|e| panic!("{e}"));
        let (full, quick) = (f.plan(false, "").unwrap(), f.plan(true, "").unwrap());
        for p in [&full, &quick] {
            assert!(!p.description.is_empty(), "{name}: no description");
            let bad = unexplained(&p.description, p, used);
            assert!(
                bad.is_empty(),
                "{name}: the description states {bad:?}, which the plan does not run: {}",
                p.description
            );
        }
        let variant = variant_numbers(&full, &quick);
        if f.quick_description.is_none() {
            let bad: Vec<String> = numbers(&literal(&f.description, used))
                .into_iter()
                .filter(|n| variant.contains(n))
                .collect();
            assert!(
                bad.is_empty(),
                "{name}: the description writes {bad:?} out, a value of one variant only: use a placeholder ({{key}}): {}",
                f.description
            );
        }
        variant
    }

    /// Item 10 of issue 15: every experiment file's description (`experiments/*.toml`, the
    /// suites' files among them), in the full and the `--quick` variant, states only numbers
    /// of the plan that runs; a description both variants share writes the values that differ
    /// between them as placeholders (the quick designs suite runs 50 loops and 1 s, not 500 and
    /// 5 s); its placeholders are all known (parse fails otherwise); and a suite's `reproduces`
    /// (`socklab lab --list`, the same for both variants) states no value of one variant only.
    #[test]
    fn every_suite_description_states_the_parameters_of_the_variant_that_runs() {
        let mut used = Vec::new();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).unwrap();
                check_file(&p.display().to_string(), &text, &mut used);
                n += 1;
            }
        }
        assert!(n >= 9, "{n} experiment files");
        for s in SUITES {
            let mut specific = BTreeSet::new();
            for (name, text) in s.files {
                specific.extend(check_file(name, text, &mut used));
            }
            let bad: Vec<String> = numbers(&literal(s.reproduces, &mut used))
                .into_iter()
                .filter(|n| specific.contains(n))
                .collect();
            assert!(
                bad.is_empty(),
                "suite {}: 'reproduces' states {bad:?}, a value of one variant only: {}",
                s.name,
                s.reproduces
            );
        }
        let stale: Vec<&&str> = REFERENCES.iter().filter(|r| !used.contains(r)).collect();
        assert!(stale.is_empty(), "references no text uses: {stale:?}");
    }

    #[test]
    fn numbers_are_runs_of_digits() {
        assert_eq!(
            numbers("fig. 27.1: 10 clients x 500, 4000-byte, 5s."),
            ["27.1", "10", "500", "4000", "5"]
        );
    }
}
