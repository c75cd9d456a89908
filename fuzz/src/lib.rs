//! socklab's fuzz targets as plain functions: each module's `run` is the body of the
//! cargo-fuzz target of the same name (`fuzz_targets/NAME.rs`, run on nightly by
//! `scripts/fuzz`), and the corpus replay test (`tests/corpus.rs`) runs every one over its
//! committed seed corpus (`corpus/NAME/`) on the stable toolchain, so a corpus input that
//! panics is a failure of the ordinary test command.

pub mod experiment_file;
pub mod http_reply;
pub mod ip_header;
pub mod ip_packet;
pub mod link_spec;
pub mod opt_set;
pub mod pcapng;
pub mod protocol_lines;
pub mod rudp_connection;
pub mod rudp_packet;
pub mod server_session;
pub mod transfer_decoders;
pub mod tun_offload;
pub mod udp_datagram;
pub mod units;
pub mod workload_params;

/// A target's body: one input.
pub type Body = fn(&[u8]);

/// Every target: its name (the cargo-fuzz binary and the corpus folder) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("experiment_file", experiment_file::run),
    ("http_reply", http_reply::run),
    ("ip_header", ip_header::run),
    ("ip_packet", ip_packet::run),
    ("link_spec", link_spec::run),
    ("opt_set", opt_set::run),
    ("pcapng", pcapng::run),
    ("protocol_lines", protocol_lines::run),
    ("rudp_connection", rudp_connection::run),
    ("rudp_packet", rudp_packet::run),
    ("server_session", server_session::run),
    ("transfer_decoders", transfer_decoders::run),
    ("tun_offload", tun_offload::run),
    ("udp_datagram", udp_datagram::run),
    ("units", units::run),
    ("workload_params", workload_params::run),
];
