//! What a server reports when it stops: CPU time (its own plus reaped children's, as the classic
//! servers print it), per-worker connection counts, Jain's fairness index, context switches.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Design, Handler};

/// One worker's share of the work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerCount {
    /// Connections this worker accepted (or was handed).
    pub connections: u64,
    /// Requests it answered with a success reply.
    pub requests: u64,
}

/// A finished server's accounting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeReport {
    /// The design that ran.
    pub design: String,
    /// The handler it spoke.
    pub handler: String,
    /// User CPU seconds, the process and its reaped children.
    pub user_s: f64,
    /// System CPU seconds, the process and its reaped children.
    pub sys_s: f64,
    /// Voluntary context switches (process and reaped children).
    pub voluntary_switches: u64,
    /// Involuntary context switches.
    pub involuntary_switches: u64,
    /// Per worker (one entry for designs without a pool).
    pub workers: Vec<WorkerCount>,
    /// Connections the listener failed to accept for lack of descriptors or memory (the server
    /// backed off and went on).
    pub accept_errors: u64,
    /// Wall-clock seconds the server ran.
    pub wall_s: f64,
    /// With TLS: connections refused (not TLS, a failed or stalled handshake, over the cap of
    /// handshakes in progress); None without TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_refused: Option<u64>,
}

/// The prefix of the machine-readable line a server prints on stdout at exit with `--announce`.
pub const STATS_PREFIX: &str = "STATS ";

impl ServeReport {
    /// A report for `design` and `handler`, CPU from `usage` (self + children).
    pub fn new(
        design: Design,
        handler: Handler,
        usage: &socklab_sys::usage::Usage,
        workers: Vec<WorkerCount>,
        accept_errors: u64,
        wall: Duration,
    ) -> ServeReport {
        ServeReport {
            design: design.to_string(),
            handler: handler.to_string(),
            user_s: usage.user.as_secs_f64(),
            sys_s: usage.sys.as_secs_f64(),
            voluntary_switches: usage.nvcsw,
            involuntary_switches: usage.nivcsw,
            workers,
            accept_errors,
            wall_s: wall.as_secs_f64(),
            tls_refused: None,
        }
    }

    /// Total connections over all workers.
    pub fn connections(&self) -> u64 {
        self.workers.iter().map(|w| w.connections).sum()
    }

    /// Total requests over all workers.
    pub fn requests(&self) -> u64 {
        self.workers.iter().map(|w| w.requests).sum()
    }

    /// Jain's fairness index of the per-worker connection counts: 1 when every worker served
    /// as many, 1/n when one served all. `None` with fewer than two workers or no connections.
    pub fn fairness(&self) -> Option<f64> {
        jain(self.workers.iter().map(|w| w.connections as f64))
    }

    /// The classic servers' line, then the per-worker counts, as printed on SIGINT/SIGTERM.
    pub fn human(&self) -> String {
        let mut s = format!(
            "user time = {:.6}, sys time = {:.6}\n",
            self.user_s, self.sys_s
        );
        if self.workers.len() > 1 {
            s.push_str("connections per worker:");
            for w in &self.workers {
                s.push_str(&format!(" {}", w.connections));
            }
            if let Some(j) = self.fairness() {
                s.push_str(&format!(" (Jain's fairness {j:.3})"));
            }
            s.push('\n');
        }
        s.push_str(&format!(
            "connections = {}, requests = {}, context switches = {} voluntary, {} involuntary\n",
            self.connections(),
            self.requests(),
            self.voluntary_switches,
            self.involuntary_switches
        ));
        if let Some(n) = self.tls_refused {
            s.push_str(&format!("TLS connections refused = {n}\n"));
        }
        s
    }

    /// The one-line JSON form, after [`STATS_PREFIX`].
    pub fn stats_line(&self) -> String {
        format!(
            "{STATS_PREFIX}{}",
            serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
        )
    }
}

/// Jain's fairness index (Σx)² / (n·Σx²) of a set of allocations.
pub fn jain(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut n, mut sum, mut sq) = (0usize, 0.0, 0.0);
    for x in xs {
        n += 1;
        sum += x;
        sq += x * x;
    }
    (n >= 2 && sq > 0.0).then(|| sum * sum / (n as f64 * sq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index() {
        assert_eq!(jain([5.0, 5.0, 5.0].into_iter()), Some(1.0));
        let one = jain([10.0, 0.0, 0.0, 0.0].into_iter()).unwrap();
        assert!((one - 0.25).abs() < 1e-12);
        assert_eq!(jain([3.0].into_iter()), None);
        assert_eq!(jain([0.0, 0.0].into_iter()), None);
    }

    #[test]
    fn human_form_starts_with_the_classic_line_and_json_round_trips() {
        let r = ServeReport {
            design: "prefork-flock".into(),
            handler: "stevens".into(),
            user_s: 0.5,
            sys_s: 1.25,
            voluntary_switches: 3,
            involuntary_switches: 4,
            workers: vec![
                WorkerCount {
                    connections: 2,
                    requests: 2,
                },
                WorkerCount {
                    connections: 2,
                    requests: 2,
                },
            ],
            accept_errors: 0,
            wall_s: 1.0,
            tls_refused: None,
        };
        let h = r.human();
        assert!(
            h.starts_with("user time = 0.500000, sys time = 1.250000\n"),
            "{h}"
        );
        assert!(
            h.contains("connections per worker: 2 2 (Jain's fairness 1.000)"),
            "{h}"
        );
        let line = r.stats_line();
        let back: ServeReport =
            serde_json::from_str(line.strip_prefix(STATS_PREFIX).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
