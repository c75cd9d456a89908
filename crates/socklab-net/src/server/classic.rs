//! The process and thread designs of UNP chapter 30.

use std::net::SocketAddr;

use super::{Ctx, ServeReport};
use crate::NetError;

/// Runs the design of `ctx` until `ctx.stop`.
pub(crate) fn serve(
    ctx: &Ctx<'_>,
    on_listening: &mut dyn FnMut(SocketAddr),
) -> Result<ServeReport, NetError> {
    let _ = on_listening;
    Err(NetError::Invalid(format!(
        "the '{}' design is not built yet",
        ctx.cfg.design
    )))
}
