//! The `states` workload: TIME_WAIT and `SO_REUSEADDR` (seed 001): who holds TIME_WAIT after
//! the closes, and whether the server's port can be re-bound right away.

use serde_json::json;
use socklab_net::states::{Closer, StatesConfig, StatesResult};

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{parse_bool, parse_usize, Key, Params};
use crate::model::sample::Sample;
use crate::resources::Resources;
use crate::workload::Spec;
use crate::LabError;

/// The parameters of the states workload.
pub type StatesSpec = StatesConfig;

/// The keys of the states workload.
pub const KEYS: &[Key] = &[
    Key::new(
        "connections",
        "100",
        "connections opened and closed per repetition",
    ),
    Key::new(
        "closer",
        "server",
        "the side that closes first: server or client",
    ),
    Key::new(
        "reuseaddr",
        "false",
        "SO_REUSEADDR on the listener and on the re-bound listener",
    ),
];

/// The metrics of the states workload.
pub const METRICS: &[Metric] = &[
    m(
        "rebind_ok",
        "fraction",
        "rebind ok",
        "re-binding the server port right after the close succeeded",
        Better::Higher,
    ),
    m(
        "est_server",
        "sockets",
        "EST during",
        "server sockets ESTABLISHED while every connection is open",
        Better::Neither,
    ),
    m(
        "tw_server",
        "sockets",
        "TW server",
        "sockets in TIME_WAIT on the server's port",
        Better::Neither,
    ),
    m(
        "tw_client",
        "sockets",
        "TW client",
        "sockets in TIME_WAIT on the clients' side",
        Better::Neither,
    ),
];

impl Spec for StatesConfig {
    const KIND: &'static str = "states";
    const KEYS: &'static [Key] = KEYS;
    const METRICS: &'static [Metric] = METRICS;
    const PRIMARY: &'static str = "rebind_ok";
    const COLUMNS: &'static [&'static str] = &["est_server", "tw_server", "tw_client"];

    fn parse(p: &Params) -> Result<Self, LabError> {
        Ok(StatesConfig {
            connections: p.value_in(KEYS, "connections", |s| match parse_usize(s)? {
                n @ 1..=10_000 => Ok(n),
                _ => Err("use 1 to 10000".to_string()),
            })?,
            closer: p.value_in(KEYS, "closer", |s| s.parse::<Closer>())?,
            reuseaddr: p.value_in(KEYS, "reuseaddr", parse_bool)?,
        })
    }

    fn params(&self) -> Params {
        Params::new()
            .with("connections", self.connections.to_string())
            .with("closer", self.closer.to_string())
            .with("reuseaddr", self.reuseaddr.to_string())
    }

    fn run(
        &self,
        _res: &mut Resources,
        label: &str,
        _stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        let r = socklab_net::states::run(self).map_err(|e| LabError::run(label, e))?;
        Ok(sample(&r))
    }
}

/// The sample of one states run.
pub fn sample(r: &StatesResult) -> Sample {
    let n = |m: &std::collections::BTreeMap<String, u64>, k: &str| {
        m.get(k).copied().unwrap_or(0) as f64
    };
    Sample::new(
        [
            ("rebind_ok", f64::from(u8::from(r.rebind_ok))),
            ("tw_server", n(&r.server_states, "TIME_WAIT")),
            ("tw_client", n(&r.client_states, "TIME_WAIT")),
            ("est_server", n(&r.during_server, "ESTABLISHED")),
        ],
        json!({
            "during_server": r.during_server,
            "during_client": r.during_client,
            "server_states": r.server_states,
            "client_states": r.client_states,
            "rebind_errno": r.rebind_errno,
            "rebind_error": r.rebind_errno.map(|e| std::io::Error::from_raw_os_error(e).to_string()),
        }),
    )
}
