//! The metrics an emulated link adds to every cell that runs over one (`socklab_link`'s
//! `LinkReport::metrics`): the emulator's counts and queueing delay each way, and its own
//! health. Listed here so that their units reach the tables (issue 28 part 2: a cell over a
//! link shows its queueing delay beside its throughput) and `--columns` can name them.

use crate::model::metric::{m, Better, Metric};

const fn count(name: &'static str, short: &'static str, description: &'static str) -> Metric {
    m(name, "packets", short, description, Better::Neither)
}

const fn lost(name: &'static str, short: &'static str, description: &'static str) -> Metric {
    m(name, "packets", short, description, Better::Lower)
}

const fn wait(name: &'static str, short: &'static str, description: &'static str) -> Metric {
    m(name, "us", short, description, Better::Lower)
}

/// The forward direction's mean queueing delay: the latency column of a cell over a link.
pub const QDELAY: &str = "link_fwd_qdelay_mean_us";

/// The link's metrics (both directions: `link_fwd_*` client to server, `link_back_*` back).
pub const METRICS: &[Metric] = &[
    count(
        "link_fwd_in",
        "fwd in",
        "packets into the link, client to server",
    ),
    lost(
        "link_fwd_dropped",
        "fwd lost",
        "packets the link's loss model dropped, client to server",
    ),
    count(
        "link_fwd_duplicated",
        "fwd dup",
        "packets the link duplicated, client to server",
    ),
    count(
        "link_fwd_corrupted",
        "fwd corrupt",
        "packets the link corrupted, client to server",
    ),
    count(
        "link_fwd_reordered",
        "fwd reord",
        "packets the link reordered, client to server",
    ),
    lost(
        "link_fwd_queue_dropped",
        "fwd qdrop",
        "packets dropped at the full queue (limit), client to server",
    ),
    lost(
        "link_fwd_kernel_drops",
        "fwd kdrop",
        "packets the kernel dropped before the emulator read them, client to server",
    ),
    lost(
        "link_fwd_aqm_dropped",
        "fwd aqm drop",
        "packets the AQM dropped, client to server",
    ),
    count(
        "link_fwd_aqm_marked",
        "fwd aqm mark",
        "packets the AQM marked ECN CE, client to server",
    ),
    count(
        "link_fwd_ecn_marked",
        "fwd ecn mark",
        "packets the loss model marked ECN CE instead of dropping, client to server",
    ),
    wait(
        QDELAY,
        "qdelay us",
        "mean wait in the link's queue, client to server (the bottleneck's queueing delay)",
    ),
    wait(
        "link_fwd_qdelay_max_us",
        "qdelay max us",
        "longest wait in the link's queue, client to server",
    ),
    count(
        "link_back_in",
        "back in",
        "packets into the link, server to client",
    ),
    lost(
        "link_back_dropped",
        "back lost",
        "packets the link's loss model dropped, server to client",
    ),
    count(
        "link_back_duplicated",
        "back dup",
        "packets the link duplicated, server to client",
    ),
    count(
        "link_back_corrupted",
        "back corrupt",
        "packets the link corrupted, server to client",
    ),
    count(
        "link_back_reordered",
        "back reord",
        "packets the link reordered, server to client",
    ),
    lost(
        "link_back_queue_dropped",
        "back qdrop",
        "packets dropped at the full queue (limit), server to client",
    ),
    lost(
        "link_back_kernel_drops",
        "back kdrop",
        "packets the kernel dropped before the emulator read them, server to client",
    ),
    lost(
        "link_back_aqm_dropped",
        "back aqm drop",
        "packets the AQM dropped, server to client",
    ),
    count(
        "link_back_aqm_marked",
        "back aqm mark",
        "packets the AQM marked ECN CE, server to client",
    ),
    count(
        "link_back_ecn_marked",
        "back ecn mark",
        "packets the loss model marked ECN CE instead of dropping, server to client",
    ),
    wait(
        "link_back_qdelay_mean_us",
        "back qdelay us",
        "mean wait in the link's queue, server to client",
    ),
    wait(
        "link_back_qdelay_max_us",
        "back qdelay max us",
        "longest wait in the link's queue, server to client",
    ),
    m(
        "emu_cpu_s",
        "s",
        "emu cpu",
        "CPU time of the emulator's threads (both directions)",
        Better::Lower,
    ),
    m(
        "emu_cpu_ns_per_packet",
        "ns",
        "emu ns/pkt",
        "the emulator's CPU per packet",
        Better::Lower,
    ),
    wait(
        "emu_max_lag_us",
        "emu max lag us",
        "the emulator's worst lateness releasing a packet",
    ),
    wait(
        "emu_lag_p50_us",
        "emu lag p50 us",
        "median lateness of the emulator's releases",
    ),
    wait(
        "emu_lag_p99_us",
        "emu lag p99 us",
        "99th percentile lateness of the emulator's releases",
    ),
    wait(
        "emu_lag_p999_us",
        "emu lag p99.9 us",
        "99.9th percentile lateness of the emulator's releases",
    ),
    lost(
        "emu_late",
        "emu late",
        "packets the emulator released later than its validity rule allows",
    ),
    m(
        "emu_sched_fifo",
        "",
        "emu fifo",
        "1: the emulator ran SCHED_FIFO, 0: the normal class, -1: not known",
        Better::Neither,
    ),
    wait(
        "emu_spin_us",
        "emu spin us",
        "how long the emulator spins before a release instead of sleeping",
    ),
    m(
        "emu_mlocked",
        "",
        "emu mlocked",
        "1: the emulator's memory was locked",
        Better::Neither,
    ),
    m(
        "emu_runq_wait_ms",
        "ms",
        "emu runq ms",
        "how long the emulator's threads waited for a CPU while runnable (both directions; -1: not known, another driver)",
        Better::Lower,
    ),
    m(
        "emu_valid",
        "",
        "emu valid",
        "1: the emulated link kept up (its validity rule held), 0: the repetition is invalid",
        Better::Higher,
    ),
];

#[cfg(test)]
mod tests {
    /// Every metric a link report stores is in the table: a metric missing here reaches the
    /// tables without its unit and Prometheus' export under its raw name (`emu_runq_wait_ms`
    /// was, and `promtool` refused the abbreviated unit).
    #[test]
    fn every_metric_a_link_stores_is_in_the_table() {
        let report = socklab_link::LinkReport::default();
        let missing: Vec<&str> = report
            .metrics()
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !super::METRICS.iter().any(|m| m.name == *name))
            .collect();
        assert!(
            missing.is_empty(),
            "add to link_metrics::METRICS: {missing:?}"
        );
    }
}
