//! sockperf's wire protocol, both ways (issue 27 part 3): `socklab echo` answers sockperf's
//! `pp` and `ul` clients ([`serve`]), and `pingpong --to sockperf://HOST:PORT` measures an
//! unmodified `sockperf sr` ([`client`]). [`wire`] is the sans-IO core: the 14-byte message
//! header and the stream framing, with no socket in sight. Protocol notes and their sources:
//! docs/interop.md, section "sockperf".

pub mod client;
pub mod serve;
pub mod wire;
