//! Built-in suites: named sets of experiment files (embedded from `experiments/`) that
//! reproduce the seeds' tables on this machine. `quick` applies each file's `[quick]` table.

use crate::file;
use crate::plan::Plan;
use crate::roles::argv::shown;
use crate::LabError;

/// A built-in suite.
#[derive(Debug, Clone, Copy)]
pub struct Suite {
    /// Name used on the command line.
    pub name: &'static str,
    /// What it reproduces.
    pub reproduces: &'static str,
    /// Its experiment files: `(file name, TOML text)`. Empty: not available yet.
    pub files: &'static [(&'static str, &'static str)],
    /// Why it is unavailable, when it is.
    pub unavailable: Option<&'static str>,
    /// It needs root (an emulated link in network namespaces).
    pub needs_root: bool,
}

impl Suite {
    /// Why the suite cannot run here, if it cannot.
    pub fn unavailable_reason(&self) -> Option<String> {
        match (self.unavailable, self.needs_root) {
            (Some(why), _) => Some(why.to_string()),
            (None, true) if !socklab_sys::netns::is_root() => Some(
                "needs root: its emulated link lives in network namespaces (run as root, e.g. sudo)"
                    .into(),
            ),
            _ => None,
        }
    }

    /// True when the suite can run.
    pub fn available(&self) -> bool {
        self.unavailable_reason().is_none()
    }

    /// Its plans (`quick` = the short variant).
    pub fn plans(&self, quick: bool) -> Result<Vec<Plan>, LabError> {
        if let Some(why) = self.unavailable_reason() {
            let when = if self.unavailable.is_some() {
                "yet"
            } else {
                "here"
            };
            return Err(LabError::Plan(format!(
                "suite '{}' is not available {when}: {why}",
                self.name
            )));
        }
        let cmd = shown::lab_suite(self.name, quick);
        self.files
            .iter()
            .map(|(name, text)| {
                file::parse(text, &format!("experiments/{name}"))?.plan(quick, &cmd)
            })
            .collect()
    }
}

/// Every suite, available or not.
pub const SUITES: &[Suite] = &[
    Suite {
        name: "writev",
        reproduces: "seed 003: write vs writev vs single write, 3 nbufs/bufsize pairs, with #reads",
        files: &[("writev.toml", include_str!("../../../experiments/writev.toml"))],
        unavailable: None,
        needs_root: false,
    },
    Suite {
        name: "bufsize",
        reproduces: "seed 000: throughput over buffer size 1K..512K, with pipe and memcpy references",
        files: &[
            ("bufsize.toml", include_str!("../../../experiments/bufsize.toml")),
            ("memcpy.toml", include_str!("../../../experiments/memcpy.toml")),
        ],
        unavailable: None,
        needs_root: false,
    },
    Suite {
        name: "sockopts",
        reproduces: "seed 001: time for 500 round trips per socket option (mean, sd, percentiles), and TCP Fast Open per new connection",
        files: &[
            ("sockopts.toml", include_str!("../../../experiments/sockopts.toml")),
            ("fastopen.toml", include_str!("../../../experiments/fastopen.toml")),
        ],
        unavailable: None,
        needs_root: false,
    },
    Suite {
        name: "states",
        reproduces: "seed 000's socket states: TIME_WAIT lands on the side that closes first; re-binding a port in TIME_WAIT needs SO_REUSEADDR",
        files: &[("states.toml", include_str!("../../../experiments/states.toml"))],
        unavailable: None,
        needs_root: false,
    },
    Suite {
        name: "designs",
        reproduces: "seed 002 / Stevens fig. 27.1: server CPU per connection of every server design (minus the iterative baseline), and every design under HTTP keep-alive",
        files: &[
            ("designs.toml", include_str!("../../../experiments/designs.toml")),
            (
                "designs-http.toml",
                include_str!("../../../experiments/designs-http.toml"),
            ),
        ],
        unavailable: None,
        needs_root: false,
    },
    Suite {
        name: "lossy",
        reproduces: "seed 004: file transfer over TCP vs the reliable UDP transport under loss, duplication, corruption, delay",
        files: &[("lossy.toml", include_str!("../../../experiments/lossy.toml"))],
        unavailable: None,
        needs_root: true,
    },
    Suite {
        name: "rrul",
        reproduces: "RRUL (flent's realtime response under load): latency under load at 20 Mbit/s, FIFO queue limits 30, 300, 3000 packets turning into added delay, then 3000 with fq_codel curing it",
        files: &[("rrul.toml", include_str!("../../../experiments/rrul.toml"))],
        unavailable: None,
        needs_root: true,
    },
];

/// Looks up a suite, or says which exist.
pub fn suite(name: &str) -> Result<&'static Suite, LabError> {
    SUITES.iter().find(|s| s.name == name).ok_or_else(|| {
        LabError::Plan(format!(
            "unknown suite '{}': choose one of {} (see `{}`)",
            socklab_units::text::quote(name),
            SUITES.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
            shown::lab_list()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_build_the_seed_tables() {
        let w = suite("writev").unwrap().plans(true).unwrap();
        assert_eq!((w[0].cells.len(), w[0].reps), (9, 5));
        assert_eq!(suite("writev").unwrap().plans(false).unwrap()[0].reps, 20);
        let b = suite("bufsize").unwrap().plans(true).unwrap();
        assert_eq!(b[0].cells.len(), 20, "10 TCP sizes + 10 pipe sizes");
        assert_eq!(b[0].cells[0].label, "bulk bufsize=1K");
        assert_eq!(
            b[0].cells[0].workload.params().get("duration"),
            Some("400ms")
        );
        assert_eq!(b[1].cells.len(), 10);
        assert!(suite("nope")
            .unwrap_err()
            .to_string()
            .contains("choose one of writev, bufsize, sockopts"));
        let s = suite("sockopts").unwrap().plans(true).unwrap();
        assert_eq!((s[0].cells.len(), s[0].reps), (7, 40));
        assert_eq!(s[0].cells[0].label, "opts=baseline");
        assert_eq!(s[1].cells.len(), 2);
        let d = suite("designs").unwrap().plans(true).unwrap();
        assert_eq!((d[0].cells.len(), d[0].reps), (16, 2), "every design once");
        assert!(d[0]
            .cells
            .iter()
            .all(|c| c.workload.params().get("loops") == Some("50")));
        assert_eq!(d[1].cells.len(), 15, "every design but iterative");
        assert_eq!(suite("designs").unwrap().plans(false).unwrap()[0].reps, 5);
        let lossy = suite("lossy").unwrap();
        if socklab_sys::netns::is_root() {
            let full = lossy.plans(false).unwrap();
            assert_eq!(
                (full[0].cells.len(), full[0].reps),
                (34, 10),
                "(cubic, bbr, rudp) x 10 rules + QUIC x (none, loss 5/10/15%)"
            );
            let q = lossy.plans(true).unwrap();
            assert_eq!(
                (q[0].cells.len(), q[0].reps),
                (6, 2),
                "(cubic, rudp, quic) x (none, loss 10%)"
            );
            assert!(q[0]
                .cells
                .iter()
                .all(|c| c.workload.params().get("files") == Some("200K,10K")));
        } else {
            let e = lossy.plans(true).unwrap_err().to_string();
            assert!(e.contains("needs root"), "{e}");
        }
    }

    #[test]
    fn the_rrul_suite_grows_the_queue_then_cures_it() {
        let rrul = suite("rrul").unwrap();
        assert!(rrul.needs_root);
        if !socklab_sys::netns::is_root() {
            let e = rrul.plans(true).unwrap_err().to_string();
            assert!(e.contains("needs root"), "{e}");
            return;
        }
        let links = |p: &Plan| -> Vec<String> {
            p.cells
                .iter()
                .map(|c| {
                    c.workload
                        .params()
                        .get("link")
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        };
        let full = &rrul.plans(false).unwrap()[0];
        assert_eq!((full.cells.len(), full.reps, full.warmup), (4, 5, 1));
        assert_eq!(
            links(full),
            [
                "delay 2ms rate 20mbit limit 30",
                "delay 2ms rate 20mbit limit 300",
                "delay 2ms rate 20mbit limit 3000",
                "delay 2ms rate 20mbit limit 3000 aqm fq_codel"
            ]
        );
        let p = full.cells[0].workload.params();
        assert_eq!(
            (
                p.get("idle"),
                p.get("duration"),
                p.get("streams"),
                p.get("cc")
            ),
            (Some("2s"), Some("10s"), Some("4"), Some("cubic"))
        );
        let quick = &rrul.plans(true).unwrap()[0];
        assert_eq!((quick.cells.len(), quick.reps, quick.warmup), (4, 2, 0));
        assert_eq!(links(quick), links(full), "the same four cells");
        let q = quick.cells[3].workload.params();
        assert_eq!((q.get("idle"), q.get("duration")), (Some("1s"), Some("3s")));
    }
}
