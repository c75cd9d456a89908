//! socklab's fuzz targets as plain functions: each module's `run` is the body of the
//! cargo-fuzz target of the same name (`fuzz_targets/NAME.rs`, run on nightly by
//! `scripts/fuzz`), and the corpus replay test (`tests/corpus.rs`) runs every one over its
//! committed seed corpus (`corpus/NAME/`) on the stable toolchain, so a corpus input that
//! panics is a failure of the ordinary test command.

pub mod child_line;
pub mod experiment_file;
pub mod generator_report;
pub mod host_lines;
pub mod http_reply;
pub mod ip_header;
pub mod ip_packet;
pub mod iperf3_messages;
pub mod iperf3_udp;
pub mod link_check;
pub mod link_spec;
pub mod opt_set;
pub mod pcapng;
pub mod protocol_lines;
pub mod resume_sidecar;
pub mod rrul_probe;
pub mod rudp_connection;
pub mod rudp_packet;
pub mod server_session;
pub mod sockperf_wire;
pub mod trace;
pub mod transfer_decoders;
pub mod transfer_receiver;
pub mod tun_offload;
pub mod udp_datagram;
pub mod units;
pub mod workload_params;

/// A target's body: one input.
pub type Body = fn(&[u8]);

/// Every target: its name (the cargo-fuzz binary and the corpus folder) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("child_line", child_line::run),
    ("experiment_file", experiment_file::run),
    ("generator_report", generator_report::run),
    ("host_lines", host_lines::run),
    ("http_reply", http_reply::run),
    ("iperf3_messages", iperf3_messages::run),
    ("iperf3_udp", iperf3_udp::run),
    ("ip_header", ip_header::run),
    ("ip_packet", ip_packet::run),
    ("link_check", link_check::run),
    ("link_spec", link_spec::run),
    ("opt_set", opt_set::run),
    ("pcapng", pcapng::run),
    ("protocol_lines", protocol_lines::run),
    ("resume_sidecar", resume_sidecar::run),
    ("rrul_probe", rrul_probe::run),
    ("rudp_connection", rudp_connection::run),
    ("rudp_packet", rudp_packet::run),
    ("server_session", server_session::run),
    ("sockperf_wire", sockperf_wire::run),
    ("trace", trace::run),
    ("transfer_decoders", transfer_decoders::run),
    ("transfer_receiver", transfer_receiver::run),
    ("tun_offload", tun_offload::run),
    ("udp_datagram", udp_datagram::run),
    ("units", units::run),
    ("workload_params", workload_params::run),
];
