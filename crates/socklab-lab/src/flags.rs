//! Command-line values as experiment data: the one mapper from a measuring command's
//! (key, values) pairs to a group of its plan. A command's flags are its workloads' keys (see
//! [`Key`]: flag name, short form, list, switch, presets, modes); the binary parses them (clap,
//! built from the keys) and hands the values here. The flags that are not one key each are
//! rules of this mapper: `--sweep` ([`sweep_values`]), `--cross` (a pair of lists crossed, not
//! zipped), `--order` ([`parse_order`]); a key outside the command's mode is found by
//! [`outside_mode`].

use socklab_units::{format_size, parse_size};

use crate::model::params::{normalize_key, Key, Modes, Params, Preset};
use crate::plan::{Axis, Group, Order};
use crate::workload::Workload;
use crate::LabError;

mod plan;
pub mod usage;
pub use plan::PlanFlags;

/// The values a command line gave for one key: a flag's values (a comma list split), a
/// switch's `true`, or a preset's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// The key, with its flag.
    pub key: Key,
    /// The flag that gave them, as written (`--bufsize`, or a preset's `--reverse`).
    pub flag: String,
    /// Its values (one: fixed; several: an axis).
    pub values: Vec<String>,
}

impl Given {
    /// `key` given `values`.
    pub fn new(key: Key, values: impl IntoIterator<Item = impl Into<String>>) -> Given {
        Given {
            key,
            flag: flag_of(&key),
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// `key` set by its preset flag `preset`.
    pub fn preset(key: Key, preset: &Preset) -> Given {
        Given {
            key,
            flag: format!("--{}", preset.flag),
            // A preset of a list key may set an axis (`--tls` is `tls=off,on`).
            values: match key.list {
                true => preset.value.split(',').map(str::to_string).collect(),
                false => vec![preset.value.to_string()],
            },
        }
    }
}

/// The mapper's rules beside the keys: the flags that are not one key each.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rules<'a> {
    /// `KEY=FROM..TO[:xF|:+S]` sweeps: each an axis that replaces the key's value.
    pub sweeps: &'a [String],
    /// Two list keys whose lists go together, point by point (bulk's nbufs and bufsize),
    /// when both have several values.
    pub pair: Option<(&'a str, &'a str)>,
    /// Take every combination of the pair instead.
    pub cross: bool,
}

/// A key's flag as written on the command line (`--read-size`).
pub fn flag_of(key: &Key) -> String {
    format!("--{}", key.flag_name())
}

/// The first given key that does not belong to `mode` (e.g. a TCP key with bulk's UDP mode).
pub fn outside_mode(given: &[Given], mode: Modes) -> Option<&Given> {
    given.iter().find(|g| !g.key.modes.has(mode))
}

/// `--order`: interleaved, random (seeded by `seed`) or sequential.
pub fn parse_order(s: &str, seed: u64) -> Result<Order, LabError> {
    match s {
        "interleaved" => Ok(Order::Interleaved),
        "random" => Ok(Order::Random(seed)),
        "sequential" => Ok(Order::Sequential),
        _ => Err(LabError::Plan(format!(
            "`order` '{}': choose interleaved, random or sequential",
            socklab_units::text::quote(s)
        ))),
    }
}

/// A list as experiment data: one value is a fixed parameter, several an axis.
pub fn list_axis(key: &str, vals: &[String], axes: &mut Vec<Axis>, fixed: &mut Params) {
    if vals.len() == 1 {
        fixed.set(key, vals[0].clone());
    } else {
        axes.push(Axis::single(key, vals.iter().cloned()));
    }
}

/// The one mapper: the given keys of workload `kind` as a group of its plan. A value given
/// once is fixed; a list of several is an axis (in the order given, the first varying
/// slowest); the pair's lists come after the other lists, zipped unless crossed; each sweep
/// replaces its key's value with an axis, after the others.
pub fn group(kind: &str, given: &[Given], rules: &Rules) -> Result<Group, LabError> {
    let keys = Workload::keys(kind);
    let sweeps = rules
        .sweeps
        .iter()
        .map(|s| sweep_values(s, &keys))
        .collect::<Result<Vec<_>, _>>()?;
    let swept = |k: &str| sweeps.iter().any(|(key, _)| key == k);
    let values = |name: &str| {
        given
            .iter()
            .find(|g| g.key.name == name)
            .filter(|g| g.values.len() > 1 && !swept(name))
    };
    let zipped = match rules.pair {
        Some((a, b)) if !rules.cross => values(a).zip(values(b)),
        _ => None,
    };
    let in_pair = |name: &str| rules.pair.is_some_and(|(a, b)| name == a || name == b);
    let mut fixed = Params::new();
    let mut axes = Vec::new();
    let (others, paired): (Vec<&Given>, Vec<&Given>) =
        given.iter().partition(|g| !in_pair(g.key.name));
    for g in others.into_iter().chain(paired) {
        if swept(g.key.name) {
            continue;
        }
        match zipped {
            Some((a, b)) if g.key.name == a.key.name => {
                let both = [a.values.clone(), b.values.clone()];
                let axis = Axis::zipped(&[a.key.name, b.key.name], &both).map_err(|e| {
                    LabError::Plan(format!(
                        "{}/{}: {e} (or `cross` for every combination)",
                        flag_of(&a.key),
                        flag_of(&b.key)
                    ))
                })?;
                axes.push(axis);
            }
            Some((_, b)) if g.key.name == b.key.name => {}
            _ => list_axis(g.key.name, &g.values, &mut axes, &mut fixed),
        }
    }
    for (key, vals) in sweeps {
        fixed.remove(&key);
        axes.retain(|x| !x.keys.contains(&key));
        axes.push(Axis::single(&key, vals));
    }
    let mut group = Group::new(kind, fixed);
    group.axes = axes;
    Ok(group)
}

/// Expands `KEY=FROM..TO[:xF|:+S]` into values: doubling, or times F, or plus S. The values
/// of a size key (see [`Key::size`] in `keys`) print with K/M/G.
pub fn sweep_values(spec: &str, keys: &[Key]) -> Result<(String, Vec<String>), LabError> {
    let bad = |why: &str| {
        LabError::Plan(format!(
            "`sweep` '{}': {why}; write KEY=FROM..TO, e.g. bufsize=1K..512K, nbufs=10..100:+10",
            socklab_units::text::quote(spec)
        ))
    };
    let (key, range) = spec.split_once('=').ok_or_else(|| bad("missing '='"))?;
    let key = normalize_key(key);
    let (range, step) = match range.split_once(':') {
        Some((r, s)) => (r, Some(s)),
        None => (range, None),
    };
    let (from, to) = range.split_once("..").ok_or_else(|| bad("missing '..'"))?;
    let from = parse_size(from).map_err(|e| bad(&e))?;
    let to = parse_size(to).map_err(|e| bad(&e))?;
    if from == 0 || to < from {
        return Err(bad(
            "the range must start at 1 or more and not run backwards",
        ));
    }
    let mut vals = Vec::new();
    let mut v = from;
    while v <= to {
        vals.push(v);
        if vals.len() > 1000 {
            return Err(bad("more than 1000 values"));
        }
        v = match step {
            None => v.saturating_mul(2),
            Some(s) if s.starts_with('x') => {
                let f: u64 = s[1..].parse().map_err(|_| bad("bad factor"))?;
                if f < 2 {
                    return Err(bad("the factor must be 2 or more"));
                }
                v.saturating_mul(f)
            }
            Some(s) if s.starts_with('+') => {
                let d = parse_size(&s[1..]).map_err(|e| bad(&e))?;
                if d == 0 {
                    return Err(bad("the step must be 1 or more"));
                }
                v.saturating_add(d)
            }
            Some(_) => return Err(bad("the step is :xFACTOR or :+STEP")),
        };
        if v == u64::MAX {
            break;
        }
    }
    let is_size = keys.iter().any(|k| k.name == key && k.size);
    let text = |n: u64| {
        if is_size {
            format_size(n)
        } else {
            n.to_string()
        }
    };
    let vals = vals.into_iter().map(text).collect();
    Ok((key, vals))
}

/// `socklab transfer`'s groups: the keys given, one group per protocol (in the order given,
/// repeats dropped); `tcp_cc` varies for tcp and quic (quinn's controller; rudp records n/a).
pub fn transfer_groups(given: &[Given]) -> Result<Vec<Group>, LabError> {
    use crate::workload::transfer::{PROTO, TCP_CC};
    let split = [PROTO.name, TCP_CC.name];
    let rest: Vec<Given> = given
        .iter()
        .filter(|g| !split.contains(&g.key.name))
        .cloned()
        .collect();
    let base = group("transfer", &rest, &Rules::default())?;
    let listed = |key: &Key| match given.iter().find(|g| g.key.name == key.name) {
        Some(g) => g.values.clone(),
        None => key.default.split(',').map(str::to_string).collect(),
    };
    let mut protos: Vec<String> = Vec::new();
    for p in listed(&PROTO) {
        if !protos.contains(&p) {
            protos.push(p);
        }
    }
    let mut groups = Vec::new();
    for p in protos {
        let mut g = base.clone();
        g.fixed.set("proto", p.as_str());
        if matches!(p.trim(), "tcp" | "quic") {
            list_axis("tcp_cc", &listed(&TCP_CC), &mut g.axes, &mut g.fixed);
        }
        groups.push(g);
    }
    Ok(groups)
}

#[cfg(test)]
mod tests;
