//! Experiment files (TOML): a matrix of parameters over a workload, repeated, in an order.
//!
//! ```toml
//! name = "writev"                       # required
//! description = "{iterations} rounds …"  # {key}: the plan's value of key (or reps, warmup, cells)
//! workload = "bulk"                     # bulk, pipe, memcpy
//! reps = 10                             # measured repetitions per cell
//! warmup = 1                            # warm-up repetitions per cell (stored, not counted)
//! order = "interleaved"                 # interleaved (default), random, sequential
//! seed = 1                              # seeds `order = "random"`
//!
//! [fixed]                               # parameters of every cell
//! iterations = 20000
//!
//! [matrix]                              # each key a list; lists are crossed
//! strategy = ["write", "writev", "single"]
//! "nbufs+bufsize" = [[15, 100], [30, 50], [60, 25]]   # keys joined by + vary together
//!
//! [quick]                               # what `--quick` changes
//! reps = 3
//! description = "…"                     # when the words change too, not only the numbers
//! fixed = { iterations = 2000 }
//! matrix = { strategy = ["write", "single"] }   # replaces the matrix entries of these keys
//!
//! [[group]]                             # more cells, of any workload, in the same experiment
//! workload = "pipe"
//! fixed = { bytes = "256M" }
//! matrix = { size = ["1K", "64K"] }
//! quick = { fixed = { bytes = "64M" } }
//! ```
//!
//! Every mistake is one error naming the file, the line, the key, and the valid choices.

use std::borrow::Cow;

use socklab_units::text::quote;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::describe;
use crate::model::params::{normalize_key, Params};
use crate::plan::{Axis, Group, Order, Plan, MAX_REPS, MAX_WARMUP};
use crate::workload::{kind as workload_kind_of, kinds, Workload};
use crate::LabError;

/// One group of cells as written in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileGroup {
    /// The cells.
    pub group: Group,
    /// Fixed parameters `--quick` overrides.
    pub quick_fixed: Params,
    /// Matrix entries `--quick` replaces (an axis with the same keys).
    pub quick_axes: Vec<Axis>,
}

/// A parsed experiment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentFile {
    /// Name (also what `--resume` looks for in the store).
    pub name: String,
    /// Description for the report: `{key}` placeholders are filled from the plan that runs
    /// ([`crate::describe::fill`]).
    pub description: String,
    /// Measured repetitions per cell.
    pub reps: usize,
    /// Warm-up repetitions per cell.
    pub warmup: usize,
    /// Run order.
    pub order: Order,
    /// Groups of cells.
    pub groups: Vec<FileGroup>,
    /// `reps` under `--quick`.
    pub quick_reps: Option<usize>,
    /// `warmup` under `--quick`.
    pub quick_warmup: Option<usize>,
    /// `description` under `--quick`.
    pub quick_description: Option<String>,
    /// `[hosts]`: where the roles run (the command line's `--server-host` & co. win).
    pub hosts: crate::hosts::HostPlan,
}

struct Ctx<'a> {
    origin: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|&b| b == b'\n')
            .count()
            + 1
    }

    fn err(&self, offset: usize, msg: impl std::fmt::Display) -> LabError {
        // Whatever it quotes of the file: escaped, and the whole cut to a bound.
        let msg = socklab_units::text::line(&msg.to_string());
        LabError::Plan(format!("{}:{}: {msg}", self.origin, self.line(offset)))
    }
}

type Entry<'t, 'i> = (&'t Spanned<Cow<'i, str>>, &'t Spanned<DeValue<'i>>);

/// Entries of a table in file order.
fn entries<'t, 'i>(t: &'t DeTable<'i>) -> Vec<Entry<'t, 'i>> {
    let mut v: Vec<Entry<'t, 'i>> = t.iter().collect();
    v.sort_by_key(|(k, _)| k.span().start);
    v
}

/// A scalar as parameter text.
fn scalar(ctx: &Ctx<'_>, key: &str, v: &Spanned<DeValue<'_>>) -> Result<String, LabError> {
    Ok(match v.get_ref() {
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) => i.as_str().replace('_', ""),
        DeValue::Float(f) => f.as_str().replace('_', ""),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::Array(_) => {
            return Err(ctx.err(
                v.span().start,
                format!("'{key}' takes one value here; lists go under [matrix]"),
            ))
        }
        DeValue::Table(_) | DeValue::Datetime(_) => {
            return Err(ctx.err(
                v.span().start,
                format!("'{key}' must be a string, number or boolean"),
            ))
        }
    })
}

fn table<'t, 'i>(
    ctx: &Ctx<'_>,
    key: &str,
    v: &'t Spanned<DeValue<'i>>,
) -> Result<&'t DeTable<'i>, LabError> {
    match v.get_ref() {
        DeValue::Table(t) => Ok(t),
        _ => Err(ctx.err(
            v.span().start,
            format!("'{key}' must be a table, e.g. [{key}]"),
        )),
    }
}

/// A whole number in `min..=max` (`max`: the key's stated limit, named when exceeded).
fn count(
    ctx: &Ctx<'_>,
    key: &str,
    v: &Spanned<DeValue<'_>>,
    min: usize,
    max: usize,
) -> Result<usize, LabError> {
    match v.get_ref() {
        DeValue::Integer(i) => {
            let text = i.as_str().replace('_', "");
            let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
            match text.parse::<usize>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                Ok(n) if n > max => Err(ctx.err(
                    v.span().start,
                    format!("'{key}' = {text}: at most {max}; give a smaller number"),
                )),
                Err(_) if digits && max < usize::MAX => Err(ctx.err(
                    v.span().start,
                    format!("'{key}' = {text}: at most {max}; give a smaller number"),
                )),
                _ => Err(ctx.err(
                    v.span().start,
                    format!("'{key}' must be a whole number of at least {min}"),
                )),
            }
        }
        _ => Err(ctx.err(
            v.span().start,
            format!("'{key}' must be a whole number, e.g. {key} = 5"),
        )),
    }
}

fn string(ctx: &Ctx<'_>, key: &str, v: &Spanned<DeValue<'_>>) -> Result<String, LabError> {
    match v.get_ref() {
        DeValue::String(s) => Ok(s.to_string()),
        _ => Err(ctx.err(
            v.span().start,
            format!("'{key}' must be a string in quotes"),
        )),
    }
}

/// Checks one parameter of `kind` on its own, so a bad key or value is reported at its line.
fn check_param(
    ctx: &Ctx<'_>,
    kind: &str,
    key: &Spanned<Cow<'_, str>>,
    value: &str,
    at: usize,
) -> Result<(), LabError> {
    let k = normalize_key(key.get_ref());
    let valid: Vec<&str> = Workload::keys(kind).iter().map(|k| k.name).collect();
    if !valid.contains(&k.as_str()) {
        return Err(ctx.err(
            key.span().start,
            format!(
                "unknown parameter '{}' for workload {kind}: valid keys are {}",
                quote(key.get_ref()),
                valid.join(", ")
            ),
        ));
    }
    // Limits of bulk are exclusive: check each alone, with the key it depends on if any.
    // Some keys need others to be checked alone (a link key needs link, a mode's key its mode).
    let context = workload_kind_of(kind).map(|w| w.context(&k, value));
    let p = context.unwrap_or_default().with(&k, value);
    Workload::from_params(kind, &p)
        .map(drop)
        .map_err(|e| ctx.err(at, e))
}

fn params(
    ctx: &Ctx<'_>,
    kind: &str,
    key: &str,
    v: &Spanned<DeValue<'_>>,
) -> Result<Params, LabError> {
    let mut p = Params::new();
    for (k, val) in entries(table(ctx, key, v)?) {
        let text = scalar(ctx, k.get_ref(), val)?;
        check_param(ctx, kind, k, &text, val.span().start)?;
        p.set(k.get_ref(), text);
    }
    Ok(p)
}

fn matrix(ctx: &Ctx<'_>, kind: &str, v: &Spanned<DeValue<'_>>) -> Result<Vec<Axis>, LabError> {
    let mut axes = Vec::new();
    for (k, val) in entries(table(ctx, "matrix", v)?) {
        let keys: Vec<&str> = k.get_ref().split('+').map(str::trim).collect();
        let DeValue::Array(items) = val.get_ref() else {
            return Err(ctx.err(
                val.span().start,
                format!(
                    "matrix key '{}' needs a list, e.g. {} = [1, 2, 3]",
                    k.get_ref(),
                    k.get_ref()
                ),
            ));
        };
        if items.is_empty() {
            return Err(ctx.err(
                val.span().start,
                format!("matrix key '{}' has an empty list", k.get_ref()),
            ));
        }
        let mut points = Vec::new();
        for item in items.iter() {
            let values: Vec<String> = if keys.len() == 1 {
                vec![scalar(ctx, keys[0], item)?]
            } else {
                let DeValue::Array(tuple) = item.get_ref() else {
                    return Err(ctx.err(item.span().start, format!("'{}' varies {} keys together: each entry is a list of {} values, e.g. [15, 100]", k.get_ref(), keys.len(), keys.len())));
                };
                if tuple.len() != keys.len() {
                    return Err(ctx.err(
                        item.span().start,
                        format!(
                            "'{}' needs {} values per entry, this one has {}",
                            k.get_ref(),
                            keys.len(),
                            tuple.len()
                        ),
                    ));
                }
                tuple
                    .iter()
                    .zip(&keys)
                    .map(|(t, key)| scalar(ctx, key, t))
                    .collect::<Result<_, _>>()?
            };
            for (key, value) in keys.iter().zip(&values) {
                let spanned_key = Spanned::new(k.span(), Cow::Borrowed(*key));
                check_param(ctx, kind, &spanned_key, value, item.span().start)?;
            }
            points.push(values);
        }
        axes.push(Axis {
            keys: keys.iter().map(|k| normalize_key(k)).collect(),
            points,
        });
    }
    Ok(axes)
}

fn workload_kind(ctx: &Ctx<'_>, v: &Spanned<DeValue<'_>>) -> Result<String, LabError> {
    let k = string(ctx, "workload", v)?;
    if workload_kind_of(&k).is_none() {
        return Err(ctx.err(
            v.span().start,
            format!(
                "unknown workload '{}': choose one of {}",
                quote(&k),
                kinds().join(", ")
            ),
        ));
    }
    Ok(k)
}

/// A group's tables: `workload`, `fixed`, `matrix`, `quick`; `top`: the file's own group,
/// whose `[quick]` also holds the experiment's `reps`, `warmup` and `description`.
fn group(ctx: &Ctx<'_>, kind: &str, t: &[Entry<'_, '_>], top: bool) -> Result<FileGroup, LabError> {
    let mut g = Group::new(kind, Params::new());
    let mut quick_fixed = Params::new();
    let mut quick_axes = Vec::new();
    for (k, v) in t {
        match k.get_ref().as_ref() {
            "fixed" => g.fixed = params(ctx, kind, "fixed", v)?,
            "matrix" => g.axes = matrix(ctx, kind, v)?,
            "quick" => {
                for (qk, qv) in entries(table(ctx, "quick", v)?) {
                    match qk.get_ref().as_ref() {
                        "fixed" => quick_fixed = params(ctx, kind, "quick.fixed", qv)?,
                        "matrix" => quick_axes = matrix(ctx, kind, qv)?,
                        "reps" | "warmup" | "description" if top => {}
                        other @ ("reps" | "warmup" | "description") => return Err(ctx.err(qk.span().start, format!("'{other}' in a [[group]]'s quick applies to the whole experiment: set it in the top-level [quick]"))),
                        other => return Err(ctx.err(qk.span().start, format!("unknown key '{}' in [quick]: valid keys are {}", quote(other), quick_keys(top)))),
                    }
                }
            }
            _ => {}
        }
    }
    Ok(FileGroup {
        group: g,
        quick_fixed,
        quick_axes,
    })
}

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "workload",
    "reps",
    "warmup",
    "order",
    "seed",
    "fixed",
    "matrix",
    "quick",
    "group",
    "hosts",
];
const GROUP_KEYS: &[&str] = &["workload", "fixed", "matrix", "quick"];

fn quick_keys(top: bool) -> &'static str {
    if top {
        "reps, warmup, description, fixed, matrix"
    } else {
        "fixed, matrix"
    }
}

const HOSTS_KEYS: &[&str] = &[
    "server",
    "client",
    "server_addr",
    "generators",
    "ssh_config",
    "remote_socklab",
];

/// `[hosts]`: which host runs which role.
fn hosts(ctx: &Ctx<'_>, v: &Spanned<DeValue<'_>>) -> Result<crate::hosts::HostPlan, LabError> {
    let mut h = crate::hosts::HostPlan::default();
    for (k, v) in entries(table(ctx, "hosts", v)?) {
        let at = v.span().start;
        match k.get_ref().as_ref() {
            "server" => h.server = Some(string(ctx, "hosts.server", v)?),
            "client" => h.client = Some(string(ctx, "hosts.client", v)?),
            "server_addr" => {
                let a = string(ctx, "hosts.server_addr", v)?;
                h.server_addr = Some(a.parse().map_err(|_| {
                    ctx.err(at, format!("server_addr = '{a}' is not an IP address: give the address the clients reach the server host at"))
                })?);
            }
            "generators" => {
                let DeValue::Array(items) = v.get_ref() else {
                    return Err(ctx.err(at, "generators takes a list, e.g. generators = [\"lab1\", \"lab3\", \"local\"]"));
                };
                for i in items.iter() {
                    h.generators.push(string(ctx, "hosts.generators", i)?);
                }
            }
            "ssh_config" => {
                h.ssh.config = Some(string(ctx, "hosts.ssh_config", v)?.into());
            }
            "remote_socklab" => {
                h.ssh.remote_socklab = Some(string(ctx, "hosts.remote_socklab", v)?);
            }
            other => {
                return Err(ctx.err(
                    k.span().start,
                    format!(
                        "unknown key '{other}' in [hosts]: valid keys are {}",
                        HOSTS_KEYS.join(", ")
                    ),
                ))
            }
        }
    }
    h.check()
        .map_err(|e| ctx.err(v.span().start, format!("[hosts]: {e}")))?;
    Ok(h)
}

/// Parses an experiment file; `origin` names it in errors (a path, or `suite writev`).
pub fn parse(text: &str, origin: &str) -> Result<ExperimentFile, LabError> {
    let ctx = Ctx { origin, text };
    let doc = DeTable::parse(text).map_err(|e| {
        let at = e.span().map(|s| s.start).unwrap_or(0);
        ctx.err(at, format!("not valid TOML: {}", e.message().trim()))
    })?;
    let top = entries(doc.get_ref());
    for (k, _) in &top {
        if !TOP_KEYS.contains(&k.get_ref().as_ref()) {
            return Err(ctx.err(
                k.span().start,
                format!(
                    "unknown key '{}': valid keys are {}",
                    quote(k.get_ref()),
                    TOP_KEYS.join(", ")
                ),
            ));
        }
    }
    let get = |name: &str| {
        top.iter()
            .find(|(k, _)| k.get_ref() == name)
            .map(|(_, v)| *v)
    };
    let name = match get("name") {
        Some(v) => string(&ctx, "name", v)?,
        None => return Err(ctx.err(0, "missing 'name': add e.g. name = \"my-experiment\"")),
    };
    if name.trim().is_empty() {
        return Err(ctx.err(get("name").map_or(0, |v| v.span().start), "'name' is empty"));
    }
    let description = get("description")
        .map(|v| string(&ctx, "description", v))
        .transpose()?
        .unwrap_or_default();
    let reps = get("reps")
        .map(|v| count(&ctx, "reps", v, 1, MAX_REPS))
        .transpose()?
        .unwrap_or(5);
    let warmup = get("warmup")
        .map(|v| count(&ctx, "warmup", v, 0, MAX_WARMUP))
        .transpose()?
        .unwrap_or(1);
    let seed = get("seed")
        .map(|v| count(&ctx, "seed", v, 0, usize::MAX))
        .transpose()?
        .unwrap_or(1) as u64;
    let order = match get("order") {
        None => Order::Interleaved,
        Some(v) => match string(&ctx, "order", v)?.as_str() {
            "interleaved" => Order::Interleaved,
            "random" => Order::Random(seed),
            "sequential" => Order::Sequential,
            other => {
                return Err(ctx.err(
                    v.span().start,
                    format!(
                        "unknown order '{}': choose interleaved, random or sequential",
                        quote(other)
                    ),
                ))
            }
        },
    };
    let (mut quick_reps, mut quick_warmup, mut quick_description) = (None, None, None);
    let description_at = get("description").map_or(0, |v| v.span().start);
    let mut quick_description_at = description_at;
    if let Some(q) = get("quick") {
        for (k, v) in entries(table(&ctx, "quick", q)?) {
            match k.get_ref().as_ref() {
                "reps" => quick_reps = Some(count(&ctx, "quick.reps", v, 1, MAX_REPS)?),
                "warmup" => quick_warmup = Some(count(&ctx, "quick.warmup", v, 0, MAX_WARMUP)?),
                "description" => {
                    quick_description = Some(string(&ctx, "quick.description", v)?);
                    quick_description_at = v.span().start;
                }
                // The top-level group reads them; without one they would be ignored.
                "fixed" | "matrix" if get("workload").is_some() => {}
                other => {
                    return Err(ctx.err(
                        k.span().start,
                        match other {
                            "fixed" | "matrix" => format!("[quick] {other} needs a workload at the top: put it in the quick of the [[group]] it changes"),
                            _ => format!("unknown key '{}' in [quick]: valid keys are {}", quote(other), quick_keys(true)),
                        },
                    ))
                }
            }
        }
    }

    let mut groups = Vec::new();
    match get("workload") {
        Some(w) => {
            let kind = workload_kind(&ctx, w)?;
            groups.push(group(&ctx, &kind, &top, true)?);
        }
        None => {
            if let Some((k, _)) = top
                .iter()
                .find(|(k, _)| matches!(k.get_ref().as_ref(), "fixed" | "matrix"))
            {
                return Err(ctx.err(
                    k.span().start,
                    format!(
                        "[{}] needs a workload: add e.g. workload = \"bulk\" at the top",
                        k.get_ref()
                    ),
                ));
            }
        }
    }
    if let Some(gs) = get("group") {
        let DeValue::Array(items) = gs.get_ref() else {
            return Err(ctx.err(
                gs.span().start,
                "'group' must be an array of tables: write [[group]]",
            ));
        };
        for item in items.iter() {
            let t = entries(table(&ctx, "group", item)?);
            for (k, _) in &t {
                if !GROUP_KEYS.contains(&k.get_ref().as_ref()) {
                    return Err(ctx.err(
                        k.span().start,
                        format!(
                            "unknown key '{}' in [[group]]: valid keys are {}",
                            quote(k.get_ref()),
                            GROUP_KEYS.join(", ")
                        ),
                    ));
                }
            }
            let Some((_, w)) = t.iter().find(|(k, _)| k.get_ref() == "workload") else {
                return Err(ctx.err(
                    item.span().start,
                    "[[group]] needs a workload, e.g. workload = \"pipe\"",
                ));
            };
            let kind = workload_kind(&ctx, w)?;
            groups.push(group(&ctx, &kind, &t, false)?);
        }
    }
    if groups.is_empty() {
        return Err(ctx.err(
            0,
            "no cells: add workload = \"bulk\" (and [fixed], [matrix]) or a [[group]]",
        ));
    }
    let hosts = match get("hosts") {
        Some(h) => hosts(&ctx, h)?,
        None => crate::hosts::HostPlan::default(),
    };
    let file = ExperimentFile {
        name,
        description,
        reps,
        warmup,
        order,
        groups,
        quick_reps,
        quick_warmup,
        quick_description,
        hosts,
    };
    // Combinations (e.g. nbufs beyond IOV_MAX with writev) surface now, not mid-run; so do
    // placeholders of the description that a variant's plan cannot fill.
    let full = file
        .unfilled_plan(false, origin)
        .map_err(|e| LabError::Plan(format!("{origin}: {e}")))?;
    describe::fill(&file.description, &full)
        .map_err(|e| ctx.err(description_at, format!("description: {e}")))?;
    let quick = file
        .unfilled_plan(true, origin)
        .map_err(|e| LabError::Plan(format!("{origin} (quick): {e}")))?;
    describe::fill(file.description_of(true), &quick)
        .map_err(|e| ctx.err(quick_description_at, format!("description (quick): {e}")))?;
    Ok(file)
}

impl ExperimentFile {
    /// The plan this file describes; `quick` applies its `[quick]` overrides. Its description
    /// is the variant's, placeholders filled from this plan.
    pub fn plan(&self, quick: bool, command: &str) -> Result<Plan, LabError> {
        let mut plan = self.unfilled_plan(quick, command)?;
        plan.description = describe::fill(self.description_of(quick), &plan)
            .map_err(|e| LabError::Plan(format!("description: {e}")))?;
        Ok(plan)
    }

    /// The description template of a variant.
    fn description_of(&self, quick: bool) -> &str {
        match &self.quick_description {
            Some(d) if quick => d,
            _ => &self.description,
        }
    }

    /// The plan, its description still a template.
    fn unfilled_plan(&self, quick: bool, command: &str) -> Result<Plan, LabError> {
        let groups: Vec<Group> = self
            .groups
            .iter()
            .map(|g| {
                let mut g2 = g.group.clone();
                if quick {
                    // A limit override replaces the group's other limits.
                    let exclusive =
                        workload_kind_of(&g.group.kind).map_or(&[][..], |k| k.exclusive);
                    if exclusive.iter().any(|k| g.quick_fixed.get(k).is_some()) {
                        for k in exclusive {
                            g2.fixed.remove(k);
                        }
                    }
                    g2.fixed = g2.fixed.merged(&g.quick_fixed);
                    for q in &g.quick_axes {
                        g2.axes.retain(|a| a.keys != q.keys);
                        g2.axes.push(q.clone());
                    }
                }
                g2
            })
            .collect();
        let (reps, warmup) = if quick {
            (
                self.quick_reps.unwrap_or(self.reps),
                self.quick_warmup.unwrap_or(self.warmup),
            )
        } else {
            (self.reps, self.warmup)
        };
        Plan::build(
            &self.name,
            &self.description,
            &groups,
            reps,
            warmup,
            self.order,
            command,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "writev"
description = "seed 003"
workload = "bulk"
reps = 4
warmup = 0

[fixed]
iterations = 20_000
read_size = "1500"

[matrix]
strategy = ["write", "writev", "single"]
"nbufs+bufsize" = [[15, 100], [30, 50], [60, 25]]

[quick]
reps = 2
fixed = { iterations = 100 }

[[group]]
workload = "pipe"
fixed = { bytes = "1M" }
matrix = { size = ["1K", "2K"] }
quick = { fixed = { bytes = "64K" } }
"#;

    #[test]
    fn a_full_file_parses_into_a_plan() {
        let f = parse(GOOD, "good.toml").unwrap();
        let p = f.plan(false, "cmd").unwrap();
        assert_eq!((p.reps, p.warmup, p.cells.len()), (4, 0, 11));
        assert_eq!(p.cells[0].label, "bulk strategy=write nbufs=15 bufsize=100");
        assert_eq!(
            p.cells[0].workload.params().get("iterations"),
            Some("20000")
        );
        let q = f.plan(true, "cmd").unwrap();
        assert_eq!(q.reps, 2);
        assert_eq!(q.cells[0].workload.params().get("iterations"), Some("100"));
        assert_eq!(q.cells[10].workload.params().get("bytes"), Some("64K"));
    }

    fn err(text: &str) -> String {
        parse(text, "x.toml").unwrap_err().to_string()
    }

    /// Item 10 of issue 15: the stored description is the one of the variant that runs, its
    /// placeholders filled from that variant's plan.
    #[test]
    fn descriptions_name_the_values_of_the_variant_that_runs() {
        let text = "name = \"d\"\ndescription = \"{size} x {bytes}, {reps} reps\"\nworkload = \"memcpy\"\nreps = 4\n[fixed]\nsize = \"1K\"\nbytes = \"1M\"\n[quick]\nreps = 2\nfixed = { bytes = \"64K\" }\n";
        let f = parse(text, "x.toml").unwrap();
        assert_eq!(f.plan(false, "").unwrap().description, "1K x 1M, 4 reps");
        assert_eq!(f.plan(true, "").unwrap().description, "1K x 64K, 2 reps");
        let own = text.replace("reps = 2\n", "reps = 2\ndescription = \"short: {bytes}\"\n");
        let f = parse(&own, "x.toml").unwrap();
        assert_eq!(f.plan(false, "").unwrap().description, "1K x 1M, 4 reps");
        assert_eq!(f.plan(true, "").unwrap().description, "short: 64K");
        let e = err(&text.replace("{bytes}", "{byte}"));
        assert!(
            e.starts_with("x.toml:2: description: unknown placeholder {byte}: use reps, warmup, cells or a parameter of the plan (bytes, size)"),
            "{e}"
        );
        let e = err(&own.replace("short: {bytes}", "short: {loops}"));
        assert!(
            e.starts_with("x.toml:10: description (quick): unknown placeholder {loops}"),
            "{e}"
        );
    }

    #[test]
    fn quick_keys_of_the_whole_experiment_are_not_ignored_elsewhere() {
        let e = err("name = \"a\"\n[[group]]\nworkload = \"memcpy\"\nquick = { reps = 2 }\n");
        assert!(
            e.starts_with("x.toml:4: 'reps' in a [[group]]'s quick applies to the whole experiment: set it in the top-level [quick]"),
            "{e}"
        );
        let e = err(
            "name = \"a\"\n[quick]\nfixed = { bytes = \"1M\" }\n[[group]]\nworkload = \"memcpy\"\n",
        );
        assert!(
            e.starts_with("x.toml:3: [quick] fixed needs a workload at the top"),
            "{e}"
        );
        let e = err("name = \"a\"\n[quick]\nrepz = 2\n[[group]]\nworkload = \"memcpy\"\n");
        assert_eq!(e, "x.toml:3: unknown key 'repz' in [quick]: valid keys are reps, warmup, description, fixed, matrix");
    }

    #[test]
    fn quick_matrix_replaces_the_axes_of_its_keys() {
        let f = parse(
            "name = \"q\"\nworkload = \"bulk\"\n[matrix]\nstrategy = [\"write\", \"writev\", \"single\"]\nnbufs = [1, 2]\n[quick]\nmatrix = { strategy = [\"single\"] }\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(f.plan(false, "").unwrap().cells.len(), 6);
        let q = f.plan(true, "").unwrap();
        assert_eq!(q.cells.len(), 2);
        assert!(q
            .cells
            .iter()
            .all(|c| c.workload.params().get("strategy") == Some("single")));
    }

    #[test]
    fn mistakes_name_the_file_line_key_and_choices() {
        assert_eq!(err("name = \"a\"\nreeps = 3\n"), "x.toml:2: unknown key 'reeps': valid keys are name, description, workload, reps, warmup, order, seed, fixed, matrix, quick, group, hosts");
        let e = err("name = \"a\"\nworkload = \"bulk\"\n[fixed]\nnbuf = 3\n");
        assert!(e.starts_with("x.toml:4: unknown parameter 'nbuf' for workload bulk: valid keys are to, strategy, nbufs"), "{e}");
        let e = err(
            "name = \"a\"\nworkload = \"bulk\"\n[matrix]\nstrategy = [\"write\",\n  \"writeev\"]\n",
        );
        assert!(e.starts_with("x.toml:5: strategy = 'writeev': unknown strategy 'writeev': choose one of write, writev"), "{e}");
        let e = err("name = \"a\"\nworkload = \"bulkk\"\n");
        assert_eq!(
            e,
            "x.toml:2: unknown workload 'bulkk': choose one of bulk, udp, pingpong, states, pipe, memcpy, transfer, load, rrul"
        );
        let e = err("name = \"a\"\nworkload = \"bulk\"\nreps = 0\n");
        assert_eq!(e, "x.toml:3: 'reps' must be a whole number of at least 1");
        // Issue 16 item 11: counts past their limit are refused at the line, the limit named.
        let e = err("name = \"a\"\nworkload = \"bulk\"\nreps = 99999999999\n");
        assert_eq!(
            e,
            "x.toml:3: 'reps' = 99999999999: at most 100000; give a smaller number"
        );
        let e = err("name = \"a\"\nworkload = \"bulk\"\n[quick]\nwarmup = 4_294_967_295\n");
        assert_eq!(
            e,
            "x.toml:4: 'quick.warmup' = 4294967295: at most 10000; give a smaller number"
        );
        let e = err("name = \"a\"\nworkload = \"bulk\"\norder = \"backwards\"\n");
        assert!(e.starts_with("x.toml:3: unknown order 'backwards'"), "{e}");
        let e =
            err("name = \"a\"\nworkload = \"bulk\"\n[matrix]\n\"nbufs+bufsize\" = [[1, 2], [3]]\n");
        assert!(
            e.starts_with("x.toml:4: 'nbufs+bufsize' needs 2 values per entry, this one has 1"),
            "{e}"
        );
        let e = err("name = \"a\"\nworkload = \"bulk\"\n[fixed]\nstrategy = [\"write\"]\n");
        assert!(
            e.contains("x.toml:4: 'strategy' takes one value here"),
            "{e}"
        );
        let e = err(
            "name = \"a\"\nworkload = \"bulk\"\n[fixed]\nstrategy = \"writev\"\nnbufs = 5000\n",
        );
        assert!(e.starts_with("x.toml: `nbufs` 5000 exceeds IOV_MAX"), "{e}");
        let e = err("name = 'a'\n[[group]]\nfixed = {}\n");
        assert!(e.starts_with("x.toml:2: [[group]] needs a workload"), "{e}");
        assert!(err("workload = \"bulk\"\n").contains("missing 'name'"));
        let e = err("name = \"a\"\nworkload = \"bulk\"\n[fixed\n");
        assert!(e.starts_with("x.toml:3: not valid TOML"), "{e}");
        let e = err("name = \"a\"\n[fixed]\niterations = 1\n");
        assert!(e.starts_with("x.toml:2: [fixed] needs a workload"), "{e}");
    }
}
