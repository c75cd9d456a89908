//! Units that scale in the human tables (issue 28 part 2): a column of rates, sizes or
//! latencies is printed in the one unit that suits its values (Mbit/s when every value is
//! below 1 Gbit/s, ms once a µs latency reaches a millisecond, KiB/MiB/GiB for sizes from 10 of
//! them), the same unit all down the column so its values stay comparable, and the header says
//! which.
//! Only the tables people read scale: JSON and CSV keep each metric's own unit and name.

use socklab_stats::Summary;

use crate::table::num;

/// How a column is shown: its values times `factor`, in `unit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// The unit printed (in the header).
    pub unit: &'static str,
    /// What a stored value is multiplied by.
    pub factor: f64,
}

/// Rates, in bit/s.
const RATES: &[(&str, f64)] = &[
    ("bit/s", 1.0),
    ("kbit/s", 1e3),
    ("Mbit/s", 1e6),
    ("Gbit/s", 1e9),
    ("Tbit/s", 1e12),
];
/// Sizes, in bytes (binary, as socklab's size keys).
const SIZES: &[(&str, f64)] = &[
    ("B", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1_048_576.0),
    ("GiB", 1_073_741_824.0),
    ("TiB", 1_099_511_627_776.0),
];
/// Latencies, in µs: shown in ms from 1 ms up (as ping and flent print them), never in a unit
/// smaller than the metric's own (a metric stored in ms stays in ms, rrul's).
const LATENCIES: &[(&str, f64)] = &[("us", 1.0), ("ms", 1e3)];

/// The ladder a metric's unit belongs to and the unit's size on it; `None` for a unit that does
/// not scale (%, counts, seconds of CPU or transfer).
fn ladder(unit: &str) -> Option<(&'static [(&'static str, f64)], f64)> {
    [RATES, SIZES, LATENCIES].into_iter().find_map(|l| {
        l.iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, size)| (l, *size))
    })
}

impl Scale {
    /// The metric's own unit, unscaled.
    pub fn native(unit: &'static str) -> Scale {
        Scale { unit, factor: 1.0 }
    }

    /// The scale of a column of values in `unit`: the largest unit of its ladder that the
    /// largest magnitude in the column reaches (at least 1 of it; of a size, 10), else the
    /// smallest unit; a latency never below its own unit. A unit that does not scale, or a column without a
    /// finite value, stays as it is.
    pub fn column(unit: &'static str, values: impl IntoIterator<Item = f64>) -> Scale {
        let Some((ladder, size)) = ladder(unit) else {
            return Scale::native(unit);
        };
        let top = values
            .into_iter()
            .filter(|v| v.is_finite())
            .map(f64::abs)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        let Some(top) = top else {
            return Scale::native(unit);
        };
        let base = top * size;
        let floor = if ladder == LATENCIES { size } else { 0.0 };
        // A size moves up only from 10 of the larger unit: 1448 bytes stay bytes (an MSS reads
        // as one), 64 KiB do not stay 65536.
        let reach = if ladder == SIZES { 10.0 } else { 1.0 };
        let (u, s) = ladder
            .iter()
            .rev()
            .find(|(_, s)| *s >= floor && base >= *s * reach)
            .or_else(|| ladder.iter().find(|(_, s)| *s >= floor))
            .copied()
            .unwrap_or((unit, size));
        Scale {
            unit: u,
            factor: size / s,
        }
    }

    /// `x` in this unit, as the tables print numbers.
    pub fn num(&self, x: f64) -> String {
        num(x * self.factor)
    }

    /// A summary in this unit (every figure times `factor`; the coefficient of variation is a
    /// ratio and stays).
    pub fn summary(&self, s: &Summary) -> Summary {
        let f = self.factor;
        let o = |x: Option<f64>| x.map(|x| x * f);
        Summary {
            mean: s.mean * f,
            sd: o(s.sd),
            ci95_t_half: o(s.ci95_t_half),
            ci95_t_lo: o(s.ci95_t_lo),
            ci95_t_hi: o(s.ci95_t_hi),
            ci95_log_lo: o(s.ci95_log_lo),
            ci95_log_hi: o(s.ci95_log_hi),
            min: s.min * f,
            median: s.median * f,
            max: s.max * f,
            ..s.clone()
        }
    }

    /// The header of a column of a metric whose short header is `short` and unit `native`:
    /// the native unit named in it (a word of its own, or before `/`: `B/read`) replaced by this
    /// one, else this unit added (`added p50` → `added p50 ms`) when it is one that scales.
    pub fn header(&self, short: &str, native: &str) -> String {
        let shown = self.unit;
        if !native.is_empty() {
            if let Some(at) = word(short, native) {
                return format!("{}{shown}{}", &short[..at], &short[at + native.len()..]);
            }
        }
        if ladder(native).is_some() {
            format!("{short} {shown}")
        } else {
            short.to_string()
        }
    }
}

/// Where `w` stands in `s` as a word of its own (bounded by the ends, a space, or a `/` after
/// it).
fn word(s: &str, w: &str) -> Option<usize> {
    s.match_indices(w).map(|(i, _)| i).find(|&i| {
        let before = s[..i].chars().next_back();
        let after = s[i + w.len()..].chars().next();
        matches!(before, None | Some(' ')) && matches!(after, None | Some(' ' | '/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_below_one_gbit_is_printed_in_mbit_and_one_above_stays_in_gbit() {
        // The bufferbloat example: 0.0193 Gbit/s in both cells.
        let s = Scale::column("Gbit/s", [0.0193, 0.01929]);
        assert_eq!(s.unit, "Mbit/s");
        assert_eq!(s.num(0.0193), "19.30");
        // One value at or above 1 Gbit/s keeps the whole column in Gbit/s (comparable down
        // the column), however small the others.
        let s = Scale::column("Gbit/s", [0.0193, 1.5]);
        assert_eq!((s.unit, s.num(0.0193)), ("Gbit/s", "0.01930".to_string()));
        // Up the ladder too: rrul's 17736 Mbit/s is 17.74 Gbit/s.
        let s = Scale::column("Mbit/s", [17736.0, 13834.0]);
        assert_eq!((s.unit, s.num(17736.0)), ("Gbit/s", "17.74".to_string()));
        assert_eq!(Scale::column("Mbit/s", [0.5]).unit, "kbit/s");
        assert_eq!(Scale::column("Gbit/s", [0.0]).unit, "bit/s");
    }

    #[test]
    fn latencies_reach_ms_and_never_go_below_their_own_unit() {
        // Bulk's final RTT in µs: 119 ms and 7.6 ms cells share ms.
        let s = Scale::column("us", [119_361.7, 7_577.7]);
        assert_eq!((s.unit, s.num(7_577.7)), ("ms", "7.578".to_string()));
        // A loopback column below 1 ms stays in µs.
        assert_eq!(Scale::column("us", [30.0, 45.0]), Scale::native("us"));
        // rrul's ms stay ms, even at 0.12 ms.
        assert_eq!(Scale::column("ms", [0.122, -0.03]), Scale::native("ms"));
        // Sizes are binary; other units do not scale.
        let s = Scale::column("B", [131_072.0, 65_536.0]);
        assert_eq!((s.unit, s.num(131_072.0)), ("KiB", "128".to_string()));
        assert_eq!(Scale::column("B", [1448.0, 9000.0]), Scale::native("B"));
        assert_eq!(Scale::column("B", [3.0 * 1_048_576.0]).unit, "KiB");
        assert_eq!(Scale::column("B", [30.0 * 1_048_576.0]).unit, "MiB");
        assert_eq!(Scale::column("%", [1e6]), Scale::native("%"));
        assert_eq!(Scale::column("s", [0.001]), Scale::native("s"));
        assert_eq!(Scale::column("Gbit/s", [f64::NAN]), Scale::native("Gbit/s"));
    }

    #[test]
    fn headers_name_the_unit_shown() {
        let mbit = Scale::column("Gbit/s", [0.02]);
        assert_eq!(mbit.header("Gbit/s", "Gbit/s"), "Mbit/s");
        assert_eq!(mbit.header("Gbit/s up", "Gbit/s"), "Mbit/s up");
        let ms = Scale::column("us", [2000.0]);
        assert_eq!(ms.header("rtt us", "us"), "rtt ms");
        assert_eq!(Scale::native("us").header("rtt us", "us"), "rtt us");
        assert_eq!(
            Scale::native("ms").header("added p50", "ms"),
            "added p50 ms"
        );
        let kib = Scale::column("B", [40960.0]);
        assert_eq!(kib.header("B/read", "B"), "KiB/read");
        assert_eq!(kib.header("bytes", "B"), "bytes KiB");
        assert_eq!(Scale::native("%").header("snd cpu%", "%"), "snd cpu%");
        assert_eq!(Scale::native("").header("fairness", ""), "fairness");
    }

    #[test]
    fn a_summary_scales_every_figure_but_its_cv() {
        let s = socklab_stats::summarize(&[0.019, 0.0193, 0.0195]).unwrap();
        let m = Scale::column("Gbit/s", [s.mean]).summary(&s);
        assert!((m.mean - s.mean * 1000.0).abs() < 1e-9);
        assert!((m.max - 19.5).abs() < 1e-9);
        assert_eq!(m.cv, s.cv);
        assert_eq!(m.ci95_method(), s.ci95_method());
    }
}
