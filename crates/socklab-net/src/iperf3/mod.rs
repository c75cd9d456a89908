//! iperf3's protocol, so that `socklab sink` answers unmodified iperf3 clients on its own
//! port (issue 27): [`proto`] is the wire format, [`server`] one test's state machine; both
//! sans I/O. Notes and sources: docs/interop.md, section "iperf3".

pub mod proto;
pub mod record;
pub mod refusal;
pub mod server;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;
