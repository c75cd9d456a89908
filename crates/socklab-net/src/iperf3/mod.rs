//! iperf3's protocol, so that `socklab sink` answers unmodified iperf3 clients on its own
//! port (issue 27): [`proto`] is the wire format, [`server`] one test's state machine, [`udp`]
//! the UDP streams' datagrams and accounting; all sans I/O. Notes and sources: docs/interop.md, section "iperf3".

pub mod proto;
pub mod server;
pub mod udp;

#[cfg(test)]
mod tests;
