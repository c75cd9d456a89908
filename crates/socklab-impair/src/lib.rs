//! socklab-impair: a pure, sans-IO model of one direction of an impaired
//! network link with Linux netem's features (delay + jitter with uniform,
//! normal, pareto and paretonormal distributions and correlation; random,
//! Gilbert-Elliott and 4-state loss; duplication; corruption; reordering;
//! rate limiting with packet overhead; a bounded queue), plus socklab's
//! `fifo` (jitter never reorders) and `fixcsum` (corruption that reaches the
//! application: [`packet`] fixes the TCP/UDP checksum) extensions.
//!
//! No I/O and no clock: the caller passes times in nanoseconds. Randomness
//! comes from the crate's own xoshiro256** ([`rng::Rng`]) seeded through
//! splitmix64, so a seed reproduces across versions and platforms.
//!
//! ```
//! use socklab_impair::{Emulator, LinkSpec};
//! let spec: LinkSpec = "delay 50ms 10ms distribution normal loss 5% rate 100mbit".parse().unwrap();
//! assert_eq!(spec.to_string().parse::<LinkSpec>().unwrap(), spec);
//! let mut link = Emulator::new(spec, 42);
//! link.enqueue(0, vec![0u8; 1200]);
//! while let Some(t) = link.poll_timeout() {
//!     let _packet = link.poll_transmit(t).unwrap();
//! }
//! ```
//!
//! Differences from netem, on purpose: the delay distributions are the
//! continuous ones rather than iproute2's tables (see [`distribution`]);
//! a duplicated copy is not passed through loss/duplication a second time;
//! `reorder` is accepted without `delay`; `duplicate` and `corrupt`
//! correlation are not modelled (rejected when parsing).

pub mod aqm;
pub mod bottleneck;
pub mod distribution;
pub mod emulator;
pub mod error;
pub mod event;
pub mod ip;
mod keywords;
pub mod loss;
pub mod packet;
mod qdisc;
pub mod rng;
pub mod schedule;
pub mod slot;
pub mod spec;
mod stats;
mod syntax;
pub mod trace;

pub use aqm::Aqm;
pub use distribution::Distribution;
pub use emulator::Emulator;
pub use error::ParseSpecError;
pub use event::{Event, EventKind, PacketMap};
pub use loss::{Loss, LossModel};
pub use rng::Rng;
pub use schedule::RateSchedule;
pub use slot::{Slot, SlotDelay};
pub use spec::{LinkSpec, DEFAULT_LIMIT};
pub use stats::Stats;
pub use trace::Trace;
