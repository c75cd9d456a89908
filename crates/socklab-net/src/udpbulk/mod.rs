//! UDP bulk (`socklab bulk --udp`): a paced sender and a receiver that counts what arrived,
//! lost, duplicated and reordered (RFC 4737), the interarrival jitter (RFC 3550) and the
//! one-way delay.
//!
//! One test: the sender sends numbered, timestamped datagrams ([`wire::Header`]) at the rate
//! asked ([`pacer::Pacer`]), then a few FIN datagrams that continue the numbering and carry the
//! test's total and the receiver's drain time. The receiver ([`receiver::UdpSink`], a
//! long-lived server) counts each test apart by its id and its source, the address of its first
//! datagram (no other source's datagrams count in it; [`collector::Collector`], with the
//! per-test core [`stats::RecvStats`]) and reports it when the drain after its first FIN has
//! passed, or when it fell idle (every FIN lost), or at its stop: a lossy link never hangs a
//! test. Nothing travels back over the path measured; the report goes to whoever started the
//! receiver (the lab reads it from the child's stdout), so an emulated link's counts in the
//! forward direction are the test's datagrams and nothing else.
//!
//! - [`wire`] — the datagram header (parse/emit);
//! - [`stats`] — per-test counts, jitter, one-way delay, intervals (sans-IO);
//! - [`collector`] — tests at the receiver and their ends (sans-IO), [`collector::TestReport`];
//! - [`pacer`] — the send schedule (sans-IO);
//! - [`search`] — `--rate max`: the highest rate without loss (sans-IO);
//! - rates as text (`--rate`) live in `socklab_units::rate`;
//! - [`sender`] — the live sender (GSO or `sendmmsg`);
//! - [`receiver`] — the live receiver (`recvmmsg` with kernel arrival times);
//! - [`iperf3`] — UDP bulk against an unmodified `iperf3 -s` (`to = iperf3://`).

pub mod collector;
pub mod iperf3;
pub mod pacer;
pub mod receiver;
pub mod search;
pub mod sender;
pub mod stats;
pub mod wire;

pub use collector::{End, TestReport};
pub use receiver::{SinkConfig, SinkTotals, UdpSink};
pub use search::{RateSearch, SearchConfig, Trial};
pub use sender::{send, Gso, SendConfig, SendResult};
