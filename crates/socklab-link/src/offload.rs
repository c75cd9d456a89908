//! The `tun` driver's offload modes: how packets move between the TUN devices and the model.

use socklab_sys::netns::TunOptions;

use crate::LinkError;

/// The environment variable that chooses the offload mode (for bench/netem-throughput).
pub const OFFLOAD_ENV: &str = "SOCKLAB_TUN_OFFLOAD";

/// How the driver moves packets between the devices and the model: the levers measured by
/// `bench/netem-throughput` (chosen with `SOCKLAB_TUN_OFFLOAD=off|csum|tso-split|tso`). Every
/// mode gives the model the same MTU-sized packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Offload {
    /// No virtio header: one packet per `read` and `write`; the kernel computes and checks
    /// every checksum.
    Off,
    /// Virtio header with checksum offload: no checksum is computed on the way through (the
    /// receiver trusts `NEEDS_CSUM`), still one packet per `read`/`write`.
    Csum,
    /// And TSO: 64 KiB super-packets read at once and split into segments; segments written
    /// one by one.
    TsoSplit,
    /// And segments released together written as one super-packet (the default).
    #[default]
    Tso,
}

impl Offload {
    /// The name in `SOCKLAB_TUN_OFFLOAD`.
    pub fn as_str(self) -> &'static str {
        match self {
            Offload::Off => "off",
            Offload::Csum => "csum",
            Offload::TsoSplit => "tso-split",
            Offload::Tso => "tso",
        }
    }

    /// The mode `SOCKLAB_TUN_OFFLOAD` asks for (the default when unset); an unknown value is
    /// an error naming the choices.
    pub fn from_env() -> Result<Offload, LinkError> {
        match std::env::var(OFFLOAD_ENV) {
            Err(_) => Ok(Offload::default()),
            Ok(v) => [Offload::Off, Offload::Csum, Offload::TsoSplit, Offload::Tso]
                .into_iter()
                .find(|o| o.as_str() == v.trim())
                .ok_or_else(|| {
                    LinkError::Invalid(format!(
                        "{OFFLOAD_ENV}={v}: use off, csum, tso-split or tso (the default)"
                    ))
                }),
        }
    }

    pub(super) fn options(self) -> TunOptions {
        use socklab_sys::netns::offload::{CSUM, TSO4, TSO6};
        match self {
            Offload::Off => TunOptions::default(),
            Offload::Csum => TunOptions {
                vnet_hdr: true,
                offload: CSUM,
            },
            Offload::TsoSplit | Offload::Tso => TunOptions {
                vnet_hdr: true,
                offload: CSUM | TSO4 | TSO6,
            },
        }
    }
}
