//! Plans: a matrix of cells, each a workload with its parameters, and how often and in what
//! order to run them. A one-off command is a plan too (a matrix of one cell).

use crate::model::params::{normalize_key, Params};
use crate::model::record::{CellRecord, PlanRecord};
use crate::workload::Workload;
use crate::LabError;

/// One varied dimension of a matrix: one key, or several keys whose values go together
/// (zipped, like seed 003's nbufs/bufsize pairs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    /// The keys.
    pub keys: Vec<String>,
    /// One row of values per point; each row has one value per key.
    pub points: Vec<Vec<String>>,
}

impl Axis {
    /// An axis over one key.
    pub fn single(key: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Axis {
        Axis {
            keys: vec![normalize_key(key)],
            points: values.into_iter().map(|v| vec![v.into()]).collect(),
        }
    }

    /// Several keys varied together: `values[i]` is the list for `keys[i]`; all lists must have
    /// the same length.
    pub fn zipped(keys: &[&str], values: &[Vec<String>]) -> Result<Axis, LabError> {
        let n = values.first().map_or(0, Vec::len);
        if keys.len() != values.len() || values.iter().any(|v| v.len() != n) {
            let lens: Vec<String> = keys
                .iter()
                .zip(values)
                .map(|(k, v)| format!("{k} has {}", v.len()))
                .collect();
            return Err(LabError::Plan(format!(
                "paired lists must have the same length ({}): give equal-length lists, or one value to use everywhere",
                lens.join(", ")
            )));
        }
        Ok(Axis {
            keys: keys.iter().map(|k| normalize_key(k)).collect(),
            points: (0..n)
                .map(|i| values.iter().map(|v| v[i].clone()).collect())
                .collect(),
        })
    }
}

/// The order of runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// A B C A B C … (default): slow drifts of the machine hit every cell alike.
    #[default]
    Interleaved,
    /// Each round of cells shuffled, seeded.
    Random(u64),
    /// A A A B B B … (only for diagnosis: drift then masquerades as a difference).
    Sequential,
}

/// One configuration of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Position in the plan.
    pub index: usize,
    /// What runs.
    pub workload: Workload,
    /// The values that vary across the plan (`key=value …`), or the workload name.
    pub label: String,
}

/// A whole experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Name (suites and files name their experiments).
    pub name: String,
    /// What it reproduces or compares (for reports).
    pub description: String,
    /// The cells.
    pub cells: Vec<Cell>,
    /// Measured repetitions per cell.
    pub reps: usize,
    /// Unrecorded warm-up repetitions per cell (stored, flagged, excluded from statistics).
    pub warmup: usize,
    /// Run order.
    pub order: Order,
    /// The command line or file that made it.
    pub command: String,
    /// Whether a repetition marked invalid (`emu_valid = 0`: the emulated link could not keep
    /// up) is re-run until the cell has `reps` valid ones, at most `2 × reps` attempts
    /// (default); off with `--keep-invalid`, which counts the invalid ones instead.
    pub retry_invalid: bool,
}

/// A group of cells of one workload: fixed parameters and a matrix of axes (cross product).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Workload name.
    pub kind: String,
    /// Parameters common to every cell of the group.
    pub fixed: Params,
    /// Axes, crossed with each other.
    pub axes: Vec<Axis>,
}

impl Group {
    /// A group with no axes.
    pub fn new(kind: &str, fixed: Params) -> Group {
        Group {
            kind: kind.to_string(),
            fixed,
            axes: Vec::new(),
        }
    }

    /// Adds an axis.
    pub fn axis(mut self, a: Axis) -> Group {
        self.axes.push(a);
        self
    }

    /// The parameter sets of the group's cells: the cross product of its axes, first axis
    /// slowest.
    pub fn expand(&self) -> Vec<Params> {
        let mut out = vec![self.fixed.clone()];
        for axis in &self.axes {
            let mut next = Vec::with_capacity(out.len() * axis.points.len());
            for base in &out {
                for point in &axis.points {
                    let mut p = base.clone();
                    for (k, v) in axis.keys.iter().zip(point) {
                        p.set(k, v.clone());
                    }
                    next.push(p);
                }
            }
            out = next;
        }
        out
    }
}

/// Most cells one plan may hold (a guard against a typo that explodes the matrix).
pub const MAX_CELLS: usize = 10_000;
/// Most measured repetitions per cell (`reps`, `--reps`).
pub const MAX_REPS: usize = 100_000;
/// Most warm-up repetitions per cell (`warmup`, `--warmup`).
pub const MAX_WARMUP: usize = 10_000;
/// Most runs one plan may hold: cells x (repetitions + warm-up), the length of its schedule.
pub const MAX_RUNS: usize = 1_000_000;

/// Checks the repetition counts of a plan: `reps` in 1..=[`MAX_REPS`], `warmup` at most
/// [`MAX_WARMUP`], and `cells` x (`reps` + `warmup`) at most [`MAX_RUNS`]. Cheap: callers check
/// before building anything the counts size (the matrix, the schedule).
pub fn check_counts(cells: usize, reps: usize, warmup: usize) -> Result<(), LabError> {
    if reps == 0 {
        return Err(LabError::Plan(
            "`reps` 0: run at least one repetition (e.g. `reps` 5)".into(),
        ));
    }
    if reps > MAX_REPS {
        return Err(LabError::Plan(format!(
            "`reps` {reps}: at most {MAX_REPS} repetitions per cell (e.g. `reps` 30)"
        )));
    }
    if warmup > MAX_WARMUP {
        return Err(LabError::Plan(format!(
            "`warmup` {warmup}: at most {MAX_WARMUP} warm-up repetitions per cell (e.g. `warmup` 1)"
        )));
    }
    let runs = cells.saturating_mul(reps + warmup);
    if runs > MAX_RUNS {
        return Err(LabError::Plan(format!(
            "{cells} cell{} x ({reps} repetitions + {warmup} warm-up) = {runs} runs: at most {MAX_RUNS} runs per plan; vary fewer parameters or run fewer repetitions",
            if cells == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

/// The cells of `groups` before duplicates collapse (the sum over groups of the product of
/// their axes' lengths), refused above [`MAX_CELLS`] before anything is expanded.
fn check_matrix(groups: &[Group]) -> Result<(), LabError> {
    let mut total = 0usize;
    let mut shapes = Vec::new();
    for g in groups {
        let n = g
            .axes
            .iter()
            .fold(1usize, |n, a| n.saturating_mul(a.points.len()));
        total = total.saturating_add(n);
        if !g.axes.is_empty() {
            let dims: Vec<String> = g.axes.iter().map(|a| a.points.len().to_string()).collect();
            shapes.push(dims.join(" x "));
        }
    }
    if total > MAX_CELLS {
        let shown = if total == usize::MAX {
            "more than 18446744073709551614".to_string()
        } else {
            total.to_string()
        };
        return Err(LabError::Plan(format!(
            "the matrix has {shown} cells ({}): at most {MAX_CELLS}; vary fewer parameters",
            shapes.join(" + ")
        )));
    }
    Ok(())
}

impl Plan {
    /// Builds a plan from groups: expands, parses every cell (all errors surface now, before
    /// anything runs), removes duplicates and labels cells by what varies.
    pub fn build(
        name: &str,
        description: &str,
        groups: &[Group],
        reps: usize,
        warmup: usize,
        order: Order,
        command: &str,
    ) -> Result<Plan, LabError> {
        check_counts(1, reps, warmup)?;
        check_matrix(groups)?;
        let mut parsed: Vec<(Workload, Params)> = Vec::new();
        // Equal workloads print equal parameters: a cell whose printed parameters are new is
        // new, and only a collision needs the comparison with every cell (n log n, not n^2).
        let mut seen = std::collections::BTreeSet::new();
        for g in groups {
            for p in g.expand() {
                let w = Workload::from_params(&g.kind, &p)?;
                let canon = w.params();
                if seen.insert((w.kind(), canon.clone())) || !parsed.iter().any(|(pw, _)| *pw == w)
                {
                    parsed.push((w, with_link_words(canon, &p)));
                }
                if parsed.len() > MAX_CELLS {
                    return Err(LabError::Plan(format!(
                        "the matrix has more than {MAX_CELLS} cells: vary fewer parameters"
                    )));
                }
            }
        }
        if parsed.is_empty() {
            return Err(LabError::Plan("the plan has no cells".into()));
        }
        check_counts(parsed.len(), reps, warmup)?;
        let labels = labels(&parsed);
        let cells = parsed
            .into_iter()
            .zip(labels)
            .enumerate()
            .map(|(index, ((workload, _), label))| Cell {
                index,
                workload,
                label,
            })
            .collect();
        Ok(Plan {
            name: name.to_string(),
            description: description.to_string(),
            cells,
            reps,
            warmup,
            order,
            command: command.to_string(),
            retry_invalid: true,
        })
    }

    /// Replaces the repetition counts (a command line's `--reps`/`--warmup` over a file's),
    /// checked as [`Plan::build`] checks them.
    pub fn set_counts(
        &mut self,
        reps: Option<usize>,
        warmup: Option<usize>,
    ) -> Result<(), LabError> {
        let reps = reps.unwrap_or(self.reps);
        let warmup = warmup.unwrap_or(self.warmup);
        check_counts(self.cells.len(), reps, warmup)?;
        self.reps = reps;
        self.warmup = warmup;
        Ok(())
    }

    /// The sequence of runs: `(cell index, repetition, is_warmup)`. Warm-ups come first.
    pub fn schedule(&self) -> Vec<(usize, usize, bool)> {
        let n = self.cells.len();
        let mut out = Vec::with_capacity(n * (self.reps + self.warmup));
        let mut rng = match self.order {
            Order::Random(seed) => seed ^ 0x5DEE_CE66_D1CE_4E5B,
            _ => 0,
        };
        for (rounds, warm) in [(self.warmup, true), (self.reps, false)] {
            match self.order {
                Order::Sequential => {
                    for c in 0..n {
                        for r in 0..rounds {
                            out.push((c, r, warm));
                        }
                    }
                }
                Order::Interleaved | Order::Random(_) => {
                    for r in 0..rounds {
                        let mut idx: Vec<usize> = (0..n).collect();
                        if matches!(self.order, Order::Random(_)) {
                            for i in (1..n).rev() {
                                rng = splitmix(rng);
                                idx.swap(i, (rng % (i as u64 + 1)) as usize);
                            }
                        }
                        out.extend(idx.into_iter().map(|c| (c, r, warm)));
                    }
                }
            }
        }
        out
    }
}

impl Plan {
    /// A fingerprint of what the plan measures (name, order, every cell's workload and
    /// parameters; not the repetition counts), so `--resume` finds the experiment to continue
    /// and refuses one whose cells changed.
    pub fn fingerprint(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a 64
        let mut eat = |s: &str| {
            for b in s.bytes().chain([0u8]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01B3);
            }
        };
        eat(&self.name);
        eat(&format!("{:?}", self.order));
        for c in &self.cells {
            eat(c.workload.kind());
            eat(&c.workload.params().to_text());
        }
        format!("{h:016x}")
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `canon` with its link specs as given in `given` (white space collapsed): the canonical text
/// leaves out what equals the default (`limit 1000`), and a label keeps every impairment word
/// the experiment was given (issue 28 part 2).
fn with_link_words(mut canon: Params, given: &Params) -> Params {
    for k in ["link", "link_back"] {
        if let (Some(_), Some(v)) = (canon.get(k), given.get(k)) {
            canon.set(k, v.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    canon
}

/// Labels cells by the keys whose values differ between cells of the same workload (prefixed
/// with the workload name when the plan mixes workloads).
fn labels(cells: &[(Workload, Params)]) -> Vec<String> {
    let mixed = cells.iter().any(|(w, _)| w.kind() != cells[0].0.kind());
    // A stable, readable key order: the bulk matrix keys first.
    let rank = |k: &str| {
        ["strategy", "nbufs", "bufsize", "size", "proto", "tcp_cc"]
            .iter()
            .position(|x| *x == k)
            .unwrap_or(99)
    };
    cells
        .iter()
        .map(|(w, p)| {
            let same: Vec<&Params> = cells
                .iter()
                .filter(|(o, _)| o.kind() == w.kind())
                .map(|(_, q)| q)
                .collect();
            let mut varied: Vec<&str> =
                p.0.iter()
                    .filter(|(k, v)| same.iter().any(|q| q.0.get(*k) != Some(*v)))
                    .map(|(k, _)| k.as_str())
                    .collect();
            varied.sort_by_key(|k| (rank(k), k.to_string()));
            let mut parts: Vec<String> = Vec::new();
            if mixed {
                parts.push(w.kind().to_string());
            }
            for k in varied {
                parts.push(format!("{k}={}", p.0[k]));
            }
            if parts.is_empty() {
                w.kind().to_string()
            } else {
                parts.join(" ")
            }
        })
        .collect()
}

impl Order {
    /// The order as the store keeps it: `interleaved`, `random:SEED` or `sequential`.
    pub fn as_text(self) -> String {
        match self {
            Order::Interleaved => "interleaved".into(),
            Order::Random(s) => format!("random:{s}"),
            Order::Sequential => "sequential".into(),
        }
    }
}

impl From<&Plan> for PlanRecord {
    /// What the store keeps of `plan`.
    fn from(plan: &Plan) -> PlanRecord {
        PlanRecord {
            name: plan.name.clone(),
            description: plan.description.clone(),
            command: plan.command.clone(),
            reps: plan.reps,
            warmup: plan.warmup,
            run_order: plan.order.as_text(),
            cells: plan
                .cells
                .iter()
                .map(|c| CellRecord {
                    index: c.index,
                    workload: c.workload.kind().to_string(),
                    label: c.label.clone(),
                    config: c.workload.params(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed003() -> Plan {
        let g = Group::new("bulk", Params::new().with("iterations", "100"))
            .axis(Axis::single("strategy", ["write", "writev", "single"]))
            .axis(
                Axis::zipped(
                    &["nbufs", "bufsize"],
                    &[
                        vec!["15".into(), "30".into(), "60".into()],
                        vec!["100".into(), "50".into(), "25".into()],
                    ],
                )
                .unwrap(),
            );
        Plan::build("writev", "", &[g], 2, 1, Order::Interleaved, "test").unwrap()
    }

    #[test]
    fn matrix_crosses_axes_and_zips_paired_keys() {
        let p = seed003();
        assert_eq!(p.cells.len(), 9);
        assert_eq!(p.cells[0].label, "strategy=write nbufs=15 bufsize=100");
        assert_eq!(p.cells[8].label, "strategy=single nbufs=60 bufsize=25");
        let e = Axis::zipped(
            &["nbufs", "bufsize"],
            &[vec!["1".into()], vec!["1".into(), "2".into()]],
        )
        .unwrap_err();
        assert!(e.to_string().contains("nbufs has 1, bufsize has 2"));
    }

    #[test]
    fn the_plan_record_keeps_what_the_store_stores() {
        let p = seed003();
        let r = PlanRecord::from(&p);
        assert_eq!((r.name.as_str(), r.command.as_str()), ("writev", "test"));
        assert_eq!((r.reps, r.warmup), (2, 1));
        assert_eq!(r.run_order, "interleaved");
        assert_eq!(r.cells.len(), 9);
        assert_eq!(r.cells[8].index, 8);
        assert_eq!(r.cells[8].workload, "bulk");
        assert_eq!(r.cells[8].label, "strategy=single nbufs=60 bufsize=25");
        assert_eq!(r.cells[8].config, p.cells[8].workload.params());
        assert_eq!(
            r.cells[8].config.0.get("bufsize").map(String::as_str),
            Some("25")
        );
        assert_eq!(Order::Random(7).as_text(), "random:7");
        assert_eq!(Order::Sequential.as_text(), "sequential");
    }

    #[test]
    fn schedule_interleaves_after_warmup() {
        let p = seed003();
        let s = p.schedule();
        assert_eq!(s.len(), 9 * 3);
        // Warm-up round first, then A B C … A B C.
        assert!(s[..9].iter().all(|&(_, _, w)| w));
        let order: Vec<usize> = s[9..].iter().map(|&(c, _, _)| c).collect();
        assert_eq!(
            order,
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(s[9 + 9], (0, 1, false));
    }

    #[test]
    fn random_order_is_a_seeded_permutation_of_each_round() {
        let mut p = seed003();
        p.order = Order::Random(7);
        let a = p.schedule();
        assert_eq!(a, p.schedule(), "same seed, same order");
        for round in a[9..].chunks(9) {
            let mut cells: Vec<usize> = round.iter().map(|&(c, _, _)| c).collect();
            cells.sort();
            assert_eq!(cells, (0..9).collect::<Vec<_>>());
        }
        assert_ne!(
            a[9..18].iter().map(|x| x.0).collect::<Vec<_>>(),
            (0..9).collect::<Vec<_>>()
        );
        p.order = Order::Sequential;
        let s = p.schedule();
        assert_eq!(&s[9..12], &[(0, 0, false), (0, 1, false), (1, 0, false)]);
    }

    #[test]
    fn duplicates_collapse_and_reps_must_be_positive() {
        let g =
            Group::new("bulk", Params::new()).axis(Axis::single("bufsize", ["1K", "1024", "2K"]));
        let p = Plan::build(
            "x",
            "",
            std::slice::from_ref(&g),
            1,
            0,
            Order::Interleaved,
            "",
        )
        .unwrap();
        assert_eq!(p.cells.len(), 2, "1K and 1024 are the same cell");
        assert_eq!(p.cells[1].label, "bufsize=2K");
        assert!(Plan::build("x", "", &[g], 0, 0, Order::Interleaved, "")
            .unwrap_err()
            .to_string()
            .contains("`reps` 0"));
    }

    #[test]
    fn counts_and_the_matrix_are_bounded_before_anything_is_built() {
        let build = |g: &Group, reps, warmup| {
            Plan::build(
                "x",
                "",
                std::slice::from_ref(g),
                reps,
                warmup,
                Order::Interleaved,
                "",
            )
            .map(|p| p.cells.len())
            .map_err(|e| e.to_string())
        };
        let one = Group::new("memcpy", Params::new());
        assert_eq!(build(&one, MAX_REPS, MAX_WARMUP), Ok(1));
        let e = build(&one, 99_999_999_999, 0).unwrap_err();
        assert_eq!(
            e,
            "`reps` 99999999999: at most 100000 repetitions per cell (e.g. `reps` 30)"
        );
        let e = build(&one, 1, 4_294_967_295).unwrap_err();
        assert!(e.starts_with("`warmup` 4294967295: at most 10000"), "{e}");
        // The product of the axes, named, before the cells are expanded.
        let vals = |n: usize| (1..=n).map(|i| format!("{i}K")).collect::<Vec<_>>();
        let cube = Group::new("memcpy", Params::new())
            .axis(Axis::single("size", vals(30)))
            .axis(Axis::single("bytes", vals(30)))
            .axis(Axis::zipped(&["size", "bytes"], &[vals(30), vals(30)]).unwrap());
        let e = build(&cube, 1, 0).unwrap_err();
        assert_eq!(
            e,
            "the matrix has 27000 cells (30 x 30 x 30): at most 10000; vary fewer parameters"
        );
        // Cells x (reps + warm-up) is bounded too.
        let square = Group::new("memcpy", Params::new())
            .axis(Axis::single("size", vals(10)))
            .axis(Axis::single("bytes", vals(100)));
        assert_eq!(build(&square, 999, 1), Ok(1000));
        let e = build(&square, 1000, 1).unwrap_err();
        assert!(
            e.starts_with(
                "1000 cells x (1000 repetitions + 1 warm-up) = 1001000 runs: at most 1000000"
            ),
            "{e}"
        );
        let mut p = Plan::build("x", "", &[square], 999, 1, Order::Interleaved, "").unwrap();
        assert!(p.set_counts(Some(1000), None).is_err());
        assert_eq!((p.reps, p.warmup), (999, 1), "unchanged when refused");
        p.set_counts(Some(50), Some(0)).unwrap();
        assert_eq!((p.reps, p.warmup), (50, 0));
    }
}
