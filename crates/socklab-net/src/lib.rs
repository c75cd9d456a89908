//! `socklab-net`: everything in socklab that touches a live socket.
//!
//! - [`aligned`] — page-aligned I/O buffers (they copy twice as fast here);
//! - [`strategy`] — the write strategies of the bulk lab, as data ([`Strategy`]);
//! - [`partial`] — loops that finish partial writes, tested with mock system calls;
//! - [`payload`] — the deterministic bytes a bulk test sends;
//! - [`protocol`] — the sink's control lines (documented in `docs/sink-protocol.md`);
//! - [`sink`] — the receiving server (`socklab sink`);
//! - [`iperf3`] — iperf3's protocol, sans I/O, so the sink answers iperf3 clients;
//! - [`childline`] — the lines a server started by the lab prints (LISTENING, EFFECTIVE, STATS);
//! - [`bulk`] — the client of `socklab bulk`: streams up, down or both, each on its own thread;
//! - [`cpus`] — CPU lists (`--affinity 0-3`), round-robin per stream;
//! - [`send`] — the sending side of a stream (the write strategies), shared by `bulk` and the sink;
//! - [`reference`] — pipe and memcpy bandwidth, the seed-000 reference rows;
//! - [`udpbulk`] — UDP bulk (`socklab bulk --udp`): paced sender, receiver, their statistics;
//! - [`load`] — the load generator of `socklab load` (stevens, echo, http; closed and open loop);
//! - `memtrim` — giving a drained flood's heap back to the system (`malloc_trim`).

pub mod aligned;
pub mod bulk;
pub mod childline;
pub mod cpus;
pub mod echo;
pub mod error;
pub mod iperf3;
pub mod load;
mod memtrim;
pub mod partial;
pub mod payload;
pub mod pingpong;
pub mod protocol;
pub mod reference;
pub mod rrul;
pub mod send;
pub mod series;
pub mod server;
pub mod sink;
pub mod sockopt;
pub mod sockperf;
pub mod states;
pub mod strategy;
pub mod tlsio;
pub mod udpbulk;

pub use error::{NetError, ParseNameError, SockOptError, UdpWireError};
pub use strategy::Strategy;
