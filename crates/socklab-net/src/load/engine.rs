//! The per-thread event loops of the load generator.

use std::sync::atomic::AtomicBool;

use super::{LoadConfig, LoadReport};
use crate::NetError;

/// Largest echo request.
pub const ECHO_MAX: usize = 1 << 20;

pub(super) fn run(_cfg: &LoadConfig, _stop: &AtomicBool) -> Result<LoadReport, NetError> {
    Err(NetError::Invalid(
        "socklab load: not implemented yet".into(),
    ))
}
