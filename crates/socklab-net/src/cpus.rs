//! CPU lists (`--affinity 0`, `0,2`, `0-3`, `0-3,8`): the CPUs a test's stream threads are
//! pinned to, one CPU per stream taken round-robin (stream `i` gets the list's `i mod len`-th).
//! Parses from and prints to the same text (ranges re-formed), in the order given.

use std::fmt;
use std::str::FromStr;

use socklab_sys::sched::MAX_CPUS;

/// Most entries a list may expand to.
pub const MAX_ENTRIES: usize = 1024;

/// A list of CPU numbers, in the order given (duplicates allowed: `0,0,1` gives CPU 0 to two of
/// every three streams).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<usize>);

impl CpuList {
    /// The CPU of stream `i` (round-robin; `None` only for an empty list, which no text
    /// parses to).
    pub fn pick(&self, i: usize) -> Option<usize> {
        self.0.get(i % self.0.len().max(1)).copied()
    }

    /// The CPUs, in order.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// A list of these CPUs (e.g. what `sched_getaffinity` allows, for messages).
    pub fn from_vec(cpus: Vec<usize>) -> CpuList {
        CpuList(cpus)
    }
}

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<CpuList, String> {
        let bad = |why: String| {
            Err(format!(
                "CPU list '{}': {why}; write CPU numbers and ranges, e.g. 0, 0,2 or 0-3",
                s.chars().take(40).collect::<String>()
            ))
        };
        let num = |t: &str| -> Result<usize, String> {
            match t.trim().parse::<usize>() {
                Ok(n) if n < MAX_CPUS => Ok(n),
                Ok(n) => Err(format!("CPU {n} is beyond the {MAX_CPUS} a mask can name")),
                Err(_) => Err(format!("'{}' is not a CPU number", t.trim())),
            }
        };
        let mut out = Vec::new();
        if s.trim().is_empty() {
            return bad("empty".into());
        }
        for part in s.split(',') {
            let r = match part.split_once('-') {
                Some((a, b)) => num(a).and_then(|a| {
                    let b = num(b)?;
                    if b < a {
                        return Err(format!("range {a}-{b} runs backwards"));
                    }
                    Ok(a..=b)
                }),
                None => num(part).map(|a| a..=a),
            };
            match r {
                Ok(r) => {
                    if out.len() + r.clone().count() > MAX_ENTRIES {
                        return bad(format!("more than {MAX_ENTRIES} entries"));
                    }
                    out.extend(r);
                }
                Err(why) => return bad(why),
            }
        }
        Ok(CpuList(out))
    }
}

impl fmt::Display for CpuList {
    /// Runs of consecutive ascending numbers as ranges (`0-3,8`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut j = i;
            while j + 1 < self.0.len() && self.0[j + 1] == self.0[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j > i {
                write!(f, "{start}-{}", self.0[j])?;
            } else {
                write!(f, "{start}")?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lists_parse_print_and_pick_round_robin() {
        let l: CpuList = "0-3,8".parse().unwrap();
        assert_eq!(l.cpus(), &[0, 1, 2, 3, 8]);
        assert_eq!(l.to_string(), "0-3,8");
        assert_eq!(
            (l.pick(0), l.pick(4), l.pick(5)),
            (Some(0), Some(8), Some(0))
        );
        assert_eq!(CpuList::from_vec(vec![]).pick(3), None);
        let l: CpuList = "1,0,0".parse().unwrap();
        assert_eq!(l.to_string(), "1,0,0");
        assert_eq!(" 2 ".parse::<CpuList>().unwrap().cpus(), &[2]);
    }

    #[test]
    fn bad_lists_say_what_and_how() {
        for (text, why) in [
            ("", "empty"),
            ("a", "'a' is not a CPU number"),
            ("3-1", "runs backwards"),
            ("0,", "'' is not"),
            ("5000", "beyond the 1024"),
            ("0-1023,0-1023", "more than 1024 entries"),
            ("-1", "not a CPU number"),
        ] {
            let e = text.parse::<CpuList>().unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
            assert!(e.contains("e.g. 0, 0,2 or 0-3") && !e.contains('\n'), "{e}");
        }
    }

    proptest! {
        #[test]
        fn what_parses_prints_to_text_that_parses_to_it(s in "[0-9,\\- ]{0,30}") {
            if let Ok(l) = s.parse::<CpuList>() {
                prop_assert_eq!(l.to_string().parse::<CpuList>().unwrap(), l);
            }
        }
    }
}
