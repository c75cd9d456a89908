//! iperf3's protocol, so that `socklab sink` answers unmodified iperf3 clients on its own
//! port (issue 27): [`proto`] is the wire format, [`server`] one test's state machine,
//! [`options`] what the client's options ask of the streams, [`results`] the sink's figures
//! and output, [`udp`] the UDP streams' datagrams and accounting; [`client`] is socklab's
//! client of an `iperf3 -s` (`bulk --to iperf3://`), [`udp_client`] its UDP streams' header
//! and accounting. All sans I/O. Notes and sources: docs/interop.md, section "iperf3".

pub mod client;
pub mod options;
pub mod proto;
pub mod record;
pub mod refusal;
pub mod results;
pub mod server;
pub mod udp;
pub mod udp_client;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod options2_tests;
#[cfg(test)]
mod options_tests;
#[cfg(test)]
mod tests;
