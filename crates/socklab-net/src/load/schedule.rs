//! Which requests each connection sends, and (open loop) when.
//!
//! Requests are numbered globally: connection `c` of `n` sends requests `c`, `c + n`,
//! `c + 2n`, …, so a total bound of `requests` is met exactly and an open-loop rate `r` puts
//! request `g` at `g / r` seconds after the start — evenly spread over time *and* over the
//! connections (connection `c` starts `c / r` seconds in, then every `n / r` seconds), as wrk2
//! spreads its rate over its connections.

/// The requests of one connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// This connection's index, 0..connections.
    pub conn: u64,
    /// Connections in the run.
    pub connections: u64,
    /// Requests this connection may send (`u64::MAX`: no bound).
    pub quota: u64,
    /// Open loop: total requests per second; `None`: closed loop.
    pub rate: Option<f64>,
}

impl Schedule {
    /// The schedule of connection `conn` of `connections`, bounded by `loops` per connection
    /// and `requests` in total.
    pub fn new(
        conn: u64,
        connections: u64,
        loops: Option<u64>,
        requests: Option<u64>,
        rate: Option<f64>,
    ) -> Schedule {
        let share = requests.map_or(u64::MAX, |r| {
            // Requests conn, conn + n, … below r.
            if conn >= r {
                0
            } else {
                (r - conn).div_ceil(connections)
            }
        });
        Schedule {
            conn,
            connections,
            quota: share.min(loops.unwrap_or(u64::MAX)),
            rate,
        }
    }

    /// The global number of this connection's `k`-th request.
    pub fn global(&self, k: u64) -> u64 {
        self.conn.saturating_add(k.saturating_mul(self.connections))
    }

    /// Open loop: when this connection's `k`-th request is meant to leave, in nanoseconds after
    /// the start; `None` in closed loop (it leaves when the previous reply is in).
    pub fn intended_ns(&self, k: u64) -> Option<u64> {
        self.rate.map(|r| intended_ns(self.global(k), r))
    }
}

/// Open loop: nanoseconds after the start at which global request `g` is meant to leave.
pub fn intended_ns(g: u64, rate: f64) -> u64 {
    let ns = g as f64 * 1e9 / rate;
    if ns >= u64::MAX as f64 {
        u64::MAX
    } else {
        ns as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_add_up_to_the_total() {
        for n in 1..20u64 {
            for total in [1u64, 7, 19, 20, 21, 100, 1001] {
                let sum: u64 = (0..n)
                    .map(|c| Schedule::new(c, n, None, Some(total), None).quota)
                    .sum();
                assert_eq!(sum, total, "n {n} total {total}");
            }
        }
    }

    #[test]
    fn loops_bound_each_connection() {
        let s = Schedule::new(3, 10, Some(5), None, None);
        assert_eq!(s.quota, 5);
        let s = Schedule::new(3, 10, Some(5), Some(12), None);
        assert_eq!(s.quota, 1, "requests 3 only (13 >= 12)");
        let s = Schedule::new(0, 10, None, None, None);
        assert_eq!(s.quota, u64::MAX);
    }

    #[test]
    fn open_loop_times_are_evenly_spread() {
        // 1000 req/s over 4 connections: connection 1 sends at 1 ms, 5 ms, 9 ms, …
        let s = Schedule::new(1, 4, None, None, Some(1000.0));
        assert_eq!(s.intended_ns(0), Some(1_000_000));
        assert_eq!(s.intended_ns(1), Some(5_000_000));
        assert_eq!(s.intended_ns(2), Some(9_000_000));
        let closed = Schedule::new(1, 4, None, None, None);
        assert_eq!(closed.intended_ns(5), None);
        // All connections together: one request every 1 ms, none twice.
        let mut all: Vec<u64> = (0..4)
            .flat_map(|c| {
                let s = Schedule::new(c, 4, None, None, Some(1000.0));
                (0..25).map(move |k| s.intended_ns(k).unwrap())
            })
            .collect();
        all.sort_unstable();
        assert!(all
            .iter()
            .enumerate()
            .all(|(i, &t)| t == i as u64 * 1_000_000));
    }

    #[test]
    fn huge_indices_saturate() {
        assert_eq!(intended_ns(u64::MAX, 1e-9), u64::MAX);
        let s = Schedule::new(5, 10, None, None, Some(1.0));
        assert_eq!(s.global(u64::MAX), u64::MAX);
    }
}
