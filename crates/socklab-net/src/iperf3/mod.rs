//! iperf3's protocol, so that `socklab sink` answers unmodified iperf3 clients on its own
//! port (issue 27): [`proto`] is the wire format, [`server`] one test's state machine; both
//! sans I/O; [`client`] is socklab's client of an `iperf3 -s` (`bulk --to iperf3://`), sans
//! I/O too. Notes and sources: docs/interop.md, section "iperf3".

pub mod client;
pub mod proto;
pub mod server;

#[cfg(test)]
mod tests;
