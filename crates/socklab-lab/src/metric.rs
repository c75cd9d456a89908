//! The metrics socklab records, with their units. A sample is a set of `(metric, value)` pairs;
//! the names here are the column names of every export.

/// Which direction is better for a metric (for verdicts and "best" marks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Larger values are better (throughput).
    Higher,
    /// Smaller values are better (time, CPU).
    Lower,
    /// A count or fact with no preferred direction.
    Neither,
}

/// A metric's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// Column name.
    pub name: &'static str,
    /// Unit as printed.
    pub unit: &'static str,
    /// Short header for tables.
    pub short: &'static str,
    /// One line of description.
    pub description: &'static str,
    /// Preferred direction.
    pub better: Better,
}

const fn m(
    name: &'static str,
    unit: &'static str,
    short: &'static str,
    description: &'static str,
    better: Better,
) -> Metric {
    Metric {
        name,
        unit,
        short,
        description,
        better,
    }
}

/// Every metric socklab knows.
pub const METRICS: &[Metric] = &[
    m(
        "gbps",
        "Gbit/s",
        "Gbit/s",
        "throughput, bytes x 8 / seconds",
        Better::Higher,
    ),
    m(
        "seconds",
        "s",
        "time s",
        "end-to-end time (sink READY to RESULT)",
        Better::Lower,
    ),
    m(
        "send_seconds",
        "s",
        "send s",
        "time until the last send call returned",
        Better::Lower,
    ),
    m("bytes", "B", "bytes", "bytes sent", Better::Neither),
    m(
        "writes",
        "calls",
        "writes",
        "send system calls issued by the sender",
        Better::Neither,
    ),
    m(
        "reads",
        "calls",
        "reads",
        "read() calls at the receiver that returned data",
        Better::Neither,
    ),
    m(
        "bytes_per_read",
        "B",
        "B/read",
        "bytes per receiver read()",
        Better::Neither,
    ),
    m(
        "snd_user_s",
        "s",
        "snd usr",
        "sender user CPU",
        Better::Lower,
    ),
    m(
        "snd_sys_s",
        "s",
        "snd sys",
        "sender system CPU",
        Better::Lower,
    ),
    m(
        "snd_cpu_pct",
        "%",
        "snd cpu%",
        "sender CPU / elapsed",
        Better::Lower,
    ),
    m(
        "rcv_user_s",
        "s",
        "rcv usr",
        "receiver user CPU",
        Better::Lower,
    ),
    m(
        "rcv_sys_s",
        "s",
        "rcv sys",
        "receiver system CPU",
        Better::Lower,
    ),
    m(
        "rcv_cpu_pct",
        "%",
        "rcv cpu%",
        "receiver CPU / elapsed",
        Better::Lower,
    ),
    m(
        "retrans",
        "segments",
        "retrans",
        "TCP segments retransmitted (TCP_INFO)",
        Better::Lower,
    ),
    m(
        "cwnd",
        "segments",
        "cwnd",
        "final congestion window (TCP_INFO)",
        Better::Neither,
    ),
    m(
        "rtt_us",
        "us",
        "rtt us",
        "final smoothed RTT (TCP_INFO)",
        Better::Lower,
    ),
    m(
        "zc_completions",
        "sends",
        "zc done",
        "MSG_ZEROCOPY sends completed",
        Better::Neither,
    ),
    m(
        "zc_copied",
        "sends",
        "zc copied",
        "MSG_ZEROCOPY sends the kernel copied anyway",
        Better::Neither,
    ),
    m(
        "cpu_s",
        "s",
        "cpu s",
        "process CPU (user + system)",
        Better::Lower,
    ),
    m(
        "rebind_ok",
        "fraction",
        "rebind ok",
        "re-binding the server port right after the close succeeded",
        Better::Higher,
    ),
    m(
        "est_server",
        "sockets",
        "EST during",
        "server sockets ESTABLISHED while every connection is open",
        Better::Neither,
    ),
    m(
        "tw_server",
        "sockets",
        "TW server",
        "sockets in TIME_WAIT on the server's port",
        Better::Neither,
    ),
    m(
        "tw_client",
        "sockets",
        "TW client",
        "sockets in TIME_WAIT on the clients' side",
        Better::Neither,
    ),
    m(
        "total_us",
        "us",
        "total us",
        "time for all round trips of a repetition (seed 001's figure)",
        Better::Lower,
    ),
    m(
        "rtt_per_s",
        "1/s",
        "rtt/s",
        "round trips per second",
        Better::Higher,
    ),
    m(
        "rtt_mean_us",
        "us",
        "mean us",
        "mean round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p50_us",
        "us",
        "p50 us",
        "median round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p90_us",
        "us",
        "p90 us",
        "90th percentile round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p99_us",
        "us",
        "p99 us",
        "99th percentile round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_p999_us",
        "us",
        "p99.9 us",
        "99.9th percentile round-trip time",
        Better::Lower,
    ),
    m(
        "rtt_max_us",
        "us",
        "max us",
        "longest round trip",
        Better::Lower,
    ),
    m(
        "lost",
        "messages",
        "lost",
        "UDP messages given up after all retries",
        Better::Lower,
    ),
    m(
        "late",
        "replies",
        "late",
        "UDP replies that came after their try timed out",
        Better::Lower,
    ),
    m(
        "retries",
        "sends",
        "retries",
        "UDP messages sent again after a timeout",
        Better::Lower,
    ),
    m(
        "connects",
        "connections",
        "connects",
        "TCP connections made",
        Better::Neither,
    ),
    m(
        "connect_mean_us",
        "us",
        "connect us",
        "mean TCP connect time",
        Better::Lower,
    ),
    m(
        "tfo_active",
        "connections",
        "tfo act",
        "TCPFastOpenActive increase (TFO used by clients)",
        Better::Neither,
    ),
    m(
        "tfo_passive",
        "connections",
        "tfo pas",
        "TCPFastOpenPassive increase (TFO accepted by servers)",
        Better::Neither,
    ),
    m(
        "total_s",
        "s",
        "total s",
        "time to transfer every file, from connect until the server's last verdict (seed 004's figure)",
        Better::Lower,
    ),
    m(
        "goodput_mbps",
        "Mbit/s",
        "Mbit/s",
        "file bytes x 8 / total time",
        Better::Higher,
    ),
    m(
        "retx",
        "packets",
        "retx",
        "retransmissions: TCP segments (tcpi_total_retrans) or rudp packets carrying resent data",
        Better::Lower,
    ),
    m(
        "spurious",
        "packets",
        "spurious",
        "rudp: packets declared lost that were acknowledged later (needless retransmissions)",
        Better::Lower,
    ),
    m(
        "srtt_us",
        "us",
        "srtt us",
        "smoothed RTT at the end (TCP_INFO, or the rudp estimator)",
        Better::Lower,
    ),
    m(
        "min_rtt_us",
        "us",
        "min rtt us",
        "minimum RTT seen (TCP_INFO, or the rudp estimator)",
        Better::Lower,
    ),
    m(
        "pkts_sent",
        "packets",
        "pkts out",
        "packets (rudp) or segments (TCP segs_out) the client sent",
        Better::Neither,
    ),
    m(
        "pkts_received",
        "packets",
        "pkts in",
        "rudp: packets the client received",
        Better::Neither,
    ),
    m(
        "failed",
        "fraction",
        "failed",
        "repetitions that failed (timeout, verdict, or a received file that differs)",
        Better::Lower,
    ),
    m(
        "srv_cpu_s",
        "s",
        "srv cpu s",
        "server CPU (user + system) of the serve process and its reaped children, from wait4",
        Better::Lower,
    ),
    m(
        "srv_user_s",
        "s",
        "srv usr",
        "server user CPU (process and reaped children)",
        Better::Lower,
    ),
    m(
        "srv_sys_s",
        "s",
        "srv sys",
        "server system CPU (process and reaped children)",
        Better::Lower,
    ),
    m(
        "cpu_us_per_conn",
        "us",
        "cpu us/conn",
        "server CPU per connection served (Stevens' figure)",
        Better::Lower,
    ),
    m(
        "cpu_us_per_req",
        "us",
        "cpu us/req",
        "server CPU per request answered (the Stevens workload: one request per connection)",
        Better::Lower,
    ),
    m(
        "req_per_s",
        "req/s",
        "req/s",
        "requests completed per second of load",
        Better::Higher,
    ),
    m(
        "conn_per_s",
        "conn/s",
        "conn/s",
        "connections opened per second of load",
        Better::Higher,
    ),
    m(
        "xfer_mbps",
        "Mbit/s",
        "Mbit/s",
        "bytes read by the load generator x 8 / seconds",
        Better::Higher,
    ),
    m(
        "lat_mean_us",
        "us",
        "lat mean",
        "response time, mean (open loop: from the intended send time)",
        Better::Lower,
    ),
    m(
        "lat_p50_us",
        "us",
        "p50 us",
        "response time, median (open loop: from the intended send time)",
        Better::Lower,
    ),
    m(
        "lat_p90_us",
        "us",
        "p90 us",
        "response time, 90th percentile",
        Better::Lower,
    ),
    m(
        "lat_p99_us",
        "us",
        "p99 us",
        "response time, 99th percentile",
        Better::Lower,
    ),
    m(
        "lat_p999_us",
        "us",
        "p99.9 us",
        "response time, 99.9th percentile",
        Better::Lower,
    ),
    m(
        "lat_max_us",
        "us",
        "max us",
        "response time, maximum",
        Better::Lower,
    ),
    m(
        "lat_raw_p99_us",
        "us",
        "raw p99",
        "open loop: response time from the actual send, 99th percentile (not corrected for coordinated omission)",
        Better::Lower,
    ),
    m(
        "connect_mean_us",
        "us",
        "connect us",
        "connect() to established, mean",
        Better::Lower,
    ),
    m(
        "first_byte_mean_us",
        "us",
        "1st byte us",
        "request sent to the reply's first byte, mean",
        Better::Lower,
    ),
    m(
        "errors",
        "requests",
        "errors",
        "requests that failed (connect, read, write, timeout, bad reply)",
        Better::Lower,
    ),
    m(
        "fairness",
        "index",
        "Jain",
        "Jain's fairness index of the connections per server worker (1: even; 1/n: one did all)",
        Better::Higher,
    ),
    m(
        "srv_nvcsw",
        "switches",
        "vol csw",
        "server voluntary context switches (process and reaped children)",
        Better::Lower,
    ),
    m(
        "srv_nivcsw",
        "switches",
        "invol csw",
        "server involuntary context switches",
        Better::Lower,
    ),
    m(
        "gen_cpu_s",
        "s",
        "gen cpu s",
        "the load generator's own CPU (user + system)",
        Better::Lower,
    ),
    m(
        "gen_lag_p99_us",
        "us",
        "gen lag p99",
        "scheduling lag of the load generator (open loop: actual - intended send time; closed loop: event-loop turn time), 99th percentile: large means the client is the bottleneck",
        Better::Lower,
    ),
];

/// Prefix of the per-file retransmission metrics of a transfer (`retx.large-0`, …).
pub const PER_FILE_RETX: &str = "retx.";

/// The metric name of the retransmissions while sending file `file` (`retx.<file>`). Names are
/// interned: one allocation per distinct file name for the life of the process (a plan has at
/// most [`crate::workload::MAX_FILES`] file names per workload).
pub fn per_file_retx(file: &str) -> &'static str {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let name = format!("{PER_FILE_RETX}{file}");
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = names.get(name.as_str()) {
        return n;
    }
    let n: &'static str = Box::leak(name.into_boxed_str());
    names.insert(n);
    n
}

/// The metric a workload is judged by (tables, bars, "best").
pub fn primary(workload: &str) -> &'static str {
    match workload {
        "pingpong" => "total_us",
        "transfer" => "total_s",
        "load" => "cpu_us_per_req",
        "states" => "rebind_ok",
        _ => "gbps",
    }
}

/// Looks a metric up by name; unknown names get a neutral definition.
pub fn metric(name: &str) -> Metric {
    METRICS
        .iter()
        .copied()
        .find(|m| m.name == name)
        .or_else(|| {
            name.starts_with(PER_FILE_RETX).then_some(Metric {
                name: "retx.<file>",
                unit: "packets",
                short: "retx",
                description: "retransmissions while this file was being sent",
                better: Better::Lower,
            })
        })
        .unwrap_or(Metric {
            name: "unknown",
            unit: "",
            short: "?",
            description: "",
            better: Better::Neither,
        })
}
