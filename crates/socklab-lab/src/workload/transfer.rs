//! The `transfer` workload (seed 004): files over one TCP connection or over socklab's
//! reliable UDP transport (rudp), every received file checked byte for byte. Each repetition
//! starts a fresh `transfer serve --once` child into a new receiving directory (a kept server
//! would let the next repetition resume).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use socklab_sys::usage::Usage;
use socklab_transfer::workfiles::{self, WorkFile};
use socklab_transfer::TransferReport;
use socklab_units::{format_duration, format_size, parse_duration, parse_size};

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{parse_count, Key, Params};
use crate::model::sample::Sample;
use crate::model::stats::ExperimentStats;
use crate::resources::{on_thread, LinkRun, Resources};
use crate::roles::argv::Role;
use crate::table::{num, Table};
use crate::workload::bulk::{BYTES, RCV_SYS_S, RCV_USER_S};
use crate::workload::link::{self, LinkParams};
use crate::workload::{ReportTable, Spec};
use crate::LabError;

pub use socklab_transfer::Proto;

/// Seed 004's file sizes: its packets carried 1500 bytes, a large file was 658 packets and a
/// small one 7, so 658 × 1500 = 987000 and 7 × 1500 = 10500 bytes.
pub const SEED004_LARGE: u64 = 658 * 1500;
/// See [`SEED004_LARGE`].
pub const SEED004_SMALL: u64 = 7 * 1500;
/// Most files one transfer may carry.
pub const MAX_FILES: usize = 1000;
/// Most bytes one transfer may carry (its files are generated on disk).
pub const MAX_TRANSFER_BYTES: u64 = 16 << 30;
/// The value of `tcp_cc` for rudp.
pub const NOT_APPLICABLE: &str = "n/a";

/// The files of a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSet {
    /// Seed 004: 10 large and 10 small files, interleaved (large-0, small-0, large-1, …).
    Seed004 {
        /// Bytes of each large file.
        large: u64,
        /// Bytes of each small file.
        small: u64,
    },
    /// Files of these sizes, named file-0, file-1, ….
    Custom(Vec<u64>),
}

impl FileSet {
    /// The files' names and sizes, in the order they are sent.
    pub fn entries(&self) -> Vec<(String, u64)> {
        match self {
            FileSet::Seed004 { large, small } => (0..10)
                .flat_map(|i| {
                    [
                        (format!("large-{i}"), *large),
                        (format!("small-{i}"), *small),
                    ]
                })
                .collect(),
            FileSet::Custom(sizes) => sizes
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("file-{i}"), *s))
                .collect(),
        }
    }
}

/// Parses `1M,10K,…` (file sizes).
pub fn parse_sizes(s: &str) -> Result<Vec<u64>, String> {
    let v: Vec<u64> = s
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(parse_size)
        .collect::<Result<_, _>>()?;
    if v.is_empty() || v.len() > MAX_FILES {
        return Err(format!("give 1 to {MAX_FILES} file sizes, e.g. 1M,10K"));
    }
    Ok(v)
}

/// The parameters of a file transfer (seed 004).
#[derive(Debug, Clone, PartialEq)]
pub struct TransferSpec {
    /// TCP or rudp.
    pub proto: Proto,
    /// Congestion control of the TCP sockets (both sides); `None` for rudp.
    pub tcp_cc: Option<String>,
    /// The files.
    pub files: FileSet,
    /// A repetition that has not finished after this long fails.
    pub timeout: Duration,
    /// Seed of the files' content.
    pub seed: u64,
    /// The emulated link between client and server, if any.
    pub link: Option<LinkParams>,
}

/// Checks a TCP congestion control name: cubic, bbr, reno, or one this kernel lists.
pub fn check_tcp_cc(s: &str) -> Result<String, String> {
    let t = s.trim();
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if ["cubic", "bbr", "reno"].contains(&t) || available.split_whitespace().any(|a| a == t) {
        Ok(t.to_string())
    } else {
        Err(format!(
            "choose cubic, bbr or reno (available here: {})",
            available.trim()
        ))
    }
}

/// A repetition that failed is stored with `failed = 1` and its reason; the command still
/// exits 1 so scripts notice: the message saying so, `None` when none failed.
pub fn failed_repetitions(
    store: &crate::store::Store,
    id: i64,
) -> Result<Option<String>, LabError> {
    let samples = store.samples(id)?;
    let failed = samples
        .iter()
        .filter(|s| s.metrics.get("failed").copied() == Some(1.0))
        .count();
    if failed == 0 {
        return Ok(None);
    }
    Ok(Some(format!(
        "{failed} of {} repetitions failed (stored with failed = 1; the reasons: socklab results export {id} `json` `db` {})",
        samples.len(),
        store.path().display()
    )))
}

/// `proto`.
pub const PROTO: Key = Key::new(
    "proto",
    "tcp",
    "tcp, rudp (socklab's reliable transport over UDP) or quic (quinn, one QUIC stream per file)",
)
.list();
/// `tcp_cc`.
pub const TCP_CC: Key = Key::new(
    "tcp_cc",
    "cubic",
    "congestion control of both TCP sockets: cubic, bbr, reno (always set; n/a for rudp); for quic quinn's sender: cubic, newreno, bbr",
)
.list();
/// `timeout`.
pub const TIMEOUT: Key = Key::new(
    "timeout",
    "60s",
    "a repetition not finished by then fails (recorded as failed)",
);

/// The keys of the transfer workload.
pub const KEYS: &[Key] = &[
    PROTO,
    TCP_CC,
    Key::new(
        "workload",
        "seed-004",
        "seed-004 (10 large + 10 small files, interleaved) or custom (sizes in files; the default when files is given)",
    ),
    Key::new(
        "large",
        "987000",
        "seed-004: bytes per large file (the seed: 658 packets of 1500 bytes)",
    ),
    Key::new(
        "small",
        "10500",
        "seed-004: bytes per small file (the seed: 7 packets of 1500 bytes)",
    ),
    Key::new("files", "", "custom: file sizes, e.g. \"1M,10K,10K\"")
        .flag("file-sizes")
        .value_name("SIZES"),
    TIMEOUT,
    Key::new("seed", "1", "seed of the files' pseudo-random content"),
];

/// Prefix of the per-file retransmission metrics of a transfer (`retx.large-0`, …).
pub const PER_FILE_RETX: &str = "retx.";

/// The metrics of the transfer workload.
pub const METRICS: &[Metric] = &[
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
    BYTES,
    RCV_USER_S,
    RCV_SYS_S,
    m(
        "retx.<file>",
        "packets",
        "retx",
        "retransmissions while this file was being sent",
        Better::Lower,
    ),
];

impl Spec for TransferSpec {
    const KIND: &'static str = "transfer";
    const KEYS: &'static [Key] = KEYS;
    const LINKED: bool = true;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "total_s";
    const COLUMNS: &'static [&'static str] =
        &["goodput_mbps", "retx", "spurious", "srtt_us", "failed"];

    fn parse(p: &Params) -> Result<Self, LabError> {
        parse_spec(p)
    }

    /// A repetition that has not finished by its `timeout` fails.
    fn time_bounds(&self) -> crate::workload::TimeBounds {
        crate::workload::TimeBounds {
            at_least: None,
            at_most: crate::workload::duration_of(&self.params(), "timeout"),
            by_timeout: true,
        }
    }

    fn params(&self) -> Params {
        let mut p = Params::new();
        link::print(&mut p, &self.link);
        p.set("proto", self.proto.as_str());
        p.set("tcp_cc", self.tcp_cc.as_deref().unwrap_or(NOT_APPLICABLE));
        match &self.files {
            FileSet::Seed004 { large, small } => {
                p.set("workload", "seed-004");
                p.set("large", format_size(*large));
                p.set("small", format_size(*small));
            }
            FileSet::Custom(sizes) => {
                p.set("workload", "custom");
                let v: Vec<String> = sizes.iter().map(|s| format_size(*s)).collect();
                p.set("files", v.join(","));
            }
        }
        p.set("timeout", format_duration(self.timeout));
        p.set("seed", self.seed.to_string());
        p
    }

    fn context(key: &str, value: &str) -> Params {
        match key {
            "tcp_cc" if value.trim() == NOT_APPLICABLE => Params::new().with("proto", "rudp"),
            _ => Params::new(),
        }
    }

    /// One repetition: a fresh receiving directory, a `transfer serve --once` child (in the
    /// link's server namespace with a link), the client here (in the client namespace), then
    /// every received file compared with its source. A transfer that fails or times out, or a
    /// received file that differs, gives a sample with `failed = 1` and the reason (and a
    /// warning on stderr), so the experiment goes on and the failure counts.
    fn run(
        &self,
        res: &mut Resources,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        if stop() {
            return Err(LabError::run(label, socklab_net::NetError::Interrupted));
        }
        if res.client_host().is_some() {
            return Err(LabError::Plan(
                "transfer runs its client here: `client_host` is not supported for transfer yet (`server_host` is)".into(),
            ));
        }
        let (set, seed) = (self.files.clone(), self.seed);
        let files = res.files(&format!("{set:?} seed {seed}"), |dir| {
            workfiles::write_files(dir, &set.entries(), seed)
                .map_err(|e| LabError::Child(format!("generating the transfer's files: {e}")))
        })?;
        let in_link = self.link.is_some();
        if let Some(l) = &self.link {
            res.link(l)?;
        }
        // The receiving directory: here (the copies are compared with the originals), or one
        // the role makes up and removes on the server host (the server's own BLAKE3 check of
        // every file, which the client's report confirms, is the verification there).
        let remote = res.remote_server()?;
        let rx = if remote {
            None
        } else {
            Some(
                tempfile::Builder::new()
                    .prefix("rx-")
                    .tempdir_in(res.temp_dir()?)
                    .map_err(|e| {
                        LabError::Child(format!("cannot create a receiving directory: {e}"))
                    })?,
            )
        };
        let rx_text = match &rx {
            Some(d) => d.path().to_string_lossy().to_string(),
            None => remote_rx_dir(),
        };
        let role = Role::TransferServe {
            proto: self.proto,
            dir: rx_text,
            once: true,
            remove_dir_at_exit: remote,
            tcp_cc: self.tcp_cc.clone(),
        };
        let server = res.spawn(&role, in_link)?;
        let to = server.addr();
        let pin = match self.proto {
            Proto::Quic => Some(quic_pin(&server, stop)?),
            _ => None,
        };
        let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
        let (r, link_run) = res.in_client(in_link, || client(self, to, paths, pin, stop))?;
        let Some(r) = r else {
            return Err(LabError::run(label, socklab_net::NetError::Interrupted));
        };
        // With --once the server ends after the session; one that does not is stopped.
        let exit = server.finish(Duration::from_secs(2))?;
        let outcome = match &rx {
            Some(d) => r.and_then(|r| workfiles::verify_copies(d.path(), &files).map(|()| r)),
            None => r,
        };
        drop(rx);
        if let Err(why) = &outcome {
            eprintln!(
                "socklab: warning: a repetition of '{label}' failed (recorded with failed = 1): {why}"
            );
        }
        Ok(sample(
            &outcome,
            self.proto,
            to,
            &files,
            &exit.usage,
            link_run,
        ))
    }

    fn tables(st: &ExperimentStats) -> Vec<ReportTable> {
        per_file_table(st)
            .map(|table| ReportTable {
                title: "Retransmissions per file",
                text_heading: "retransmissions per file (mean):",
                class: "per-file",
                note: PER_FILE_NOTE,
                table,
            })
            .into_iter()
            .collect()
    }
}

/// A receiving directory on the server host no other run uses: `/tmp/socklab-rx-<pid>-<time>-<n>`
/// (the role creates it and removes it at its exit).
fn remote_rx_dir() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "/tmp/socklab-rx-{}-{ns:x}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// The certificate fingerprint a QUIC `transfer serve` child prints after its port (a
/// `REPORT {"quic_fingerprint": …}` line): the client pins it.
fn quic_pin(
    server: &crate::child::ServerChild,
    stop: &dyn Fn() -> bool,
) -> Result<socklab_tls::Fingerprint, LabError> {
    use crate::child::{named_certificate, CERTIFICATE_WAIT};
    use socklab_transfer::quic::FINGERPRINT_KEY as KEY;
    let line = server.wait_report(CERTIFICATE_WAIT, &|v| v.get(KEY).is_some(), stop);
    named_certificate(line, KEY, "the QUIC transfer server")
}

/// Runs the client of `spec` against `to` on its own thread ([`on_thread`]): `None` when
/// stopped. The client always ends by its timeout; one that has not returned 30 s after it
/// counts as failed.
fn client(
    spec: &TransferSpec,
    to: SocketAddr,
    paths: Vec<PathBuf>,
    pin: Option<socklab_tls::Fingerprint>,
    stop: &dyn Fn() -> bool,
) -> Option<Result<TransferReport, String>> {
    let (proto, cc, timeout) = (spec.proto, spec.tcp_cc.clone(), spec.timeout);
    let trust = pin.map(socklab_tls::Trust::Pinned);
    on_thread(
        "transfer-client",
        move |_| socklab_transfer::send(proto, to, &paths, cc.as_deref(), timeout, trust),
        stop,
        timeout + Duration::from_secs(30),
        Duration::ZERO,
    )
    .map(|r| r.and_then(|r| r.map_err(|e| format!("the transfer failed: {e}"))))
}

/// The sample of one transfer: its outcome (the report, or why it failed), the files sent,
/// the receiving server's CPU accounting and the link's share.
pub fn sample(
    outcome: &Result<TransferReport, String>,
    proto: Proto,
    to: SocketAddr,
    files: &[WorkFile],
    usage: &Usage,
    link: LinkRun,
) -> Sample {
    let mut s = Sample::new(
        [],
        json!({
            "link": link.desc,
            "to": to.to_string(),
            "proto": proto.as_str(),
            "files": files.len(),
        }),
    );
    match outcome {
        Err(why) => {
            s.extend([("failed", 1.0)]);
            s.extra["error"] = json!(why);
        }
        Ok(r) => {
            let (total_ns, bytes, per_file) = (r.total_ns(), r.bytes(), r.per_file_retransmits());
            let total_s = total_ns as f64 / 1e9;
            s.extend([
                ("failed", 0.0),
                ("total_s", total_s),
                ("goodput_mbps", bytes as f64 * 8.0 / total_s.max(1e-9) / 1e6),
                ("bytes", bytes as f64),
                ("rcv_user_s", usage.user.as_secs_f64()),
                ("rcv_sys_s", usage.sys.as_secs_f64()),
            ]);
            match r {
                TransferReport::Tcp(t) => {
                    s.extend([
                        ("retx", t.total_retrans as f64),
                        ("srtt_us", f64::from(t.rtt_us)),
                        ("min_rtt_us", f64::from(t.tcp.min_rtt_us)),
                        ("pkts_sent", f64::from(t.segs_out)),
                    ]);
                    s.extra["cc"] = json!(t.cc);
                    s.extra["mss"] = json!(t.tcp.snd_mss);
                    s.extra["cwnd"] = json!(t.tcp.snd_cwnd);
                }
                TransferReport::Rudp(u) => {
                    let st = &u.stats;
                    s.extend([
                        ("retx", st.retransmitted_packets as f64),
                        ("spurious", st.spurious_losses as f64),
                        ("srtt_us", st.srtt_ns as f64 / 1000.0),
                        ("min_rtt_us", st.min_rtt_ns as f64 / 1000.0),
                        ("pkts_sent", st.packets_sent as f64),
                        ("pkts_received", st.packets_received as f64),
                    ]);
                    s.extra["lost_packets"] = json!(st.lost_packets);
                    s.extra["probe_timeouts"] = json!(st.probe_timeouts);
                    s.extra["duplicate_packets"] = json!(st.duplicate_packets);
                }
                TransferReport::Quic(q) => {
                    // QUIC never sends a packet twice: the frames of a lost packet go out
                    // again in new ones, so lost packets are its retransmissions.
                    s.extend([
                        ("retx", q.lost_packets as f64),
                        ("srtt_us", q.rtt_us as f64),
                        ("min_rtt_us", q.min_rtt_us as f64),
                        ("pkts_sent", q.sent_packets as f64),
                        ("handshake_us", q.handshake_ns as f64 / 1000.0),
                    ]);
                    s.extra["cc"] = json!(q.cc);
                    s.extra["mtu"] = json!(q.mtu);
                    s.extra["congestion_events"] = json!(q.congestion_events);
                }
            }
            for (f, n) in files.iter().zip(per_file) {
                s.push(format!("{PER_FILE_RETX}{}", f.name), *n as f64);
            }
        }
    }
    s.extend(link.metrics);
    s
}

/// The seed-004 table: mean retransmissions per file (columns, in the order the files were
/// sent) for every transfer cell that has them (rows), with the total. `None` when the
/// experiment has no per-file retransmission metrics.
pub fn per_file_table(st: &ExperimentStats) -> Option<Table> {
    let cells: Vec<_> = st
        .cells
        .iter()
        .filter(|c| c.metrics.keys().any(|k| k.starts_with(PER_FILE_RETX)))
        .collect();
    // File names in the order they were sent (from the cell's workload), then any other
    // names the store holds.
    let mut names: Vec<String> = Vec::new();
    for c in &cells {
        if let Ok(t) = parse_spec(&c.cell.config) {
            for (n, _) in t.files.entries() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        for k in c.metrics.keys() {
            if let Some(n) = k.strip_prefix(PER_FILE_RETX) {
                if !names.iter().any(|x| x == n) {
                    names.push(n.to_string());
                }
            }
        }
    }
    if cells.is_empty() {
        return None;
    }
    let mut headers = vec!["config", "n"];
    headers.extend(names.iter().map(String::as_str));
    headers.push("retx");
    let mut t = Table::new(&headers);
    for c in cells {
        let mut row = vec![c.cell.label.clone(), c.n_text(st.keep_invalid)];
        for n in &names {
            row.push(
                c.metrics
                    .get(&format!("{PER_FILE_RETX}{n}"))
                    .map(|s| num(s.mean))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        row.push(
            c.metrics
                .get("retx")
                .map(|s| num(s.mean))
                .unwrap_or_else(|| "-".into()),
        );
        t.row(row);
    }
    Some(t)
}

/// The caption of [`per_file_table`].
pub const PER_FILE_NOTE: &str = "Retransmissions per file (seed 004's table), mean over the measured repetitions that succeeded: TCP segments retransmitted while the file was being written (tcpi_total_retrans growth), or rudp packets that carried the file's data again; *retx* is the whole transfer's total.";

fn parse_spec(p: &Params) -> Result<TransferSpec, LabError> {
    let proto = p.value_in(KEYS, "proto", |s| s.parse::<Proto>())?;
    let tcp_cc = match proto {
        Proto::Tcp => Some(p.value(&TCP_CC, check_tcp_cc)?),
        Proto::Quic => Some(p.value(&TCP_CC, |c: &str| {
            c.parse::<socklab_transfer::quic::QuicCc>()
                .map(|cc| cc.as_str().to_string())
        })?),
        Proto::Rudp => {
            p.parse_opt("tcp_cc", |s| match s.trim() {
                NOT_APPLICABLE => Ok(()),
                _ => Err(
                    "applies to proto = tcp only; leave it out for rudp (recorded as n/a)"
                        .to_string(),
                ),
            })?;
            None
        }
    };
    // files alone means custom.
    let default_kind = if p.get("files").is_some() {
        "custom"
    } else {
        "seed-004"
    };
    let kind = p.parse_or("workload", default_kind.to_string(), |s| match s.trim() {
        w @ ("seed-004" | "custom") => Ok(w.to_string()),
        _ => Err("choose seed-004 or custom (with files = \"1M,10K\")".to_string()),
    })?;
    let files = if kind == "custom" {
        for k in ["large", "small"] {
            if p.get(k).is_some() {
                return Err(LabError::Plan(format!(
                    "{k} applies to workload = seed-004; for custom give the sizes in files"
                )));
            }
        }
        FileSet::Custom(p.parse_opt("files", parse_sizes)?.ok_or_else(|| {
            LabError::Plan("workload = custom needs files = \"1M,10K,…\" (the file sizes)".into())
        })?)
    } else {
        if p.get("files").is_some() {
            return Err(LabError::Plan(
                "files applies to workload = custom; seed-004 takes large and small".into(),
            ));
        }
        FileSet::Seed004 {
            large: p.value_in(KEYS, "large", parse_size)?,
            small: p.value_in(KEYS, "small", parse_size)?,
        }
    };
    let timeout = p.value_in(KEYS, "timeout", |s| match parse_duration(s)? {
        d if d.is_zero() || d > Duration::from_secs(24 * 3600) => {
            Err("give 1ms to 24h, e.g. 60s".to_string())
        }
        d => Ok(d),
    })?;
    let link = link::parse(p)?;
    if let Some(l) = &link {
        if !l.driver.carries_tcp() {
            return Err(LabError::Plan(
                "link_driver udp-proxy cannot carry a transfer (TCP needs tun or netem, and both protocols are compared over the same link): use auto, tun or netem (root)".into(),
            ));
        }
    }
    let total: u64 = files.entries().iter().map(|(_, n)| *n).sum();
    if total > MAX_TRANSFER_BYTES {
        return Err(LabError::Plan(format!(
            "the files add up to {}: at most {} (they are written to a temporary directory); give smaller sizes",
            format_size(total),
            format_size(MAX_TRANSFER_BYTES)
        )));
    }
    Ok(TransferSpec {
        proto,
        tcp_cc,
        files,
        timeout,
        seed: p.value_in(KEYS, "seed", parse_count)?,
        link,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn parse(p: Params) -> Result<Workload, LabError> {
        crate::workload::Workload::from_params("transfer", &p)
    }

    #[test]
    fn transfer_defaults_are_seed_004_over_tcp_cubic_and_round_trip() {
        let w = parse(Params::new()).unwrap();
        let p = w.params();
        assert_eq!(p.get("proto"), Some("tcp"));
        assert_eq!(p.get("tcp_cc"), Some("cubic"));
        assert_eq!(p.get("workload"), Some("seed-004"));
        assert_eq!(p.get("timeout"), Some("60s"));
        assert_eq!(parse(p.clone()).unwrap(), w);
        let Workload::Transfer(t) = &w else {
            panic!("not a transfer")
        };
        let e = t.files.entries();
        assert_eq!(e.len(), 20);
        assert_eq!(e[0], ("large-0".to_string(), 987_000));
        assert_eq!(e[1], ("small-0".to_string(), 10_500));
        assert_eq!(e[19].0, "small-9");
    }

    #[test]
    fn transfer_rudp_custom_and_link_round_trip() {
        let w = parse(
            Params::new()
                .with("proto", "rudp")
                .with("workload", "custom")
                .with("files", "1M, 10K,7")
                .with("timeout", "5s")
                .with("seed", "9")
                .with("link", "delay 5ms loss 5%"),
        )
        .unwrap();
        let p = w.params();
        assert_eq!(p.get("tcp_cc"), Some("n/a"));
        assert_eq!(p.get("files"), Some("1M,10K,7"));
        assert_eq!(p.get("link"), Some("delay 5ms loss 5%"));
        assert_eq!(parse(p).unwrap(), w);
        let Workload::Transfer(t) = w else {
            panic!("not a transfer")
        };
        assert_eq!(
            t.files.entries(),
            vec![
                ("file-0".to_string(), 1 << 20),
                ("file-1".to_string(), 10 << 10),
                ("file-2".to_string(), 7)
            ]
        );
        let s = parse(
            Params::new()
                .with("tcp_cc", "bbr")
                .with("large", "100K")
                .with("small", "1500"),
        )
        .unwrap();
        assert_eq!(parse(s.params()).unwrap(), s);
    }

    #[test]
    fn bad_transfer_params_name_the_value_and_the_fix() {
        let e = |p: Params| parse(p).unwrap_err().to_string();
        assert!(e(Params::new().with("proto", "sctp")).contains("choose tcp, rudp or quic"));
        assert!(e(Params::new().with("tcp_cc", "cubc")).contains("choose cubic, bbr or reno"));
        assert!(e(Params::new().with("proto", "rudp").with("tcp_cc", "bbr"))
            .contains("proto = tcp only"));
        assert!(e(Params::new().with("workload", "custom")).contains("needs files"));
        assert!(e(Params::new().with("workload", "seed-5")).contains("choose seed-004 or custom"));
        assert!(e(Params::new()
            .with("workload", "seed-004")
            .with("files", "1M"))
        .contains("workload = custom"));
        assert!(matches!(
            parse(Params::new().with("files", "1M"))
                .unwrap()
                .params()
                .get("workload"),
            Some("custom")
        ));
        assert!(e(Params::new().with("timeout", "0s")).contains("1ms to 24h"));
        assert!(e(Params::new().with("large", "2G")).contains("at most 16G"));
        assert!(
            e(Params::new().with("workload", "custom").with("files", "1Q"))
                .starts_with("files = '1Q'")
        );
        assert!(e(Params::new()
            .with("link", "loss 1%")
            .with("link_driver", "udp-proxy"))
        .contains("udp-proxy cannot carry"));
    }
}
