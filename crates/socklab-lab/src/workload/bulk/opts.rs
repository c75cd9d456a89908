//! Bulk's `opts` key: socket options as data on every stream's two ends, in pingpong's
//! vocabulary ([`socklab_net::sockopt`]: `nodelay+quickack`, `client:sndbuf=1M`,
//! `server:cc=bbr`, `baseline` for none). The net layer sets and reads them back; here the key
//! is parsed and printed, checked against the older keys that set the same option (`nodelay`,
//! `sndbuf`, `cc`), and the read-back goes into the sample: `client_opts`, `server_opts` and
//! `opts_off` (each option the kernel did not put in effect) as facts, the count of those as
//! the metric `opts_off`. A cell with an option not in effect is marked so and is never best.

use std::collections::BTreeMap;

use serde_json::json;
use socklab_net::bulk::{BulkConfig, BulkResult};
use socklab_net::sockopt::OptSet;
use socklab_stats::Summary;

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{Key, Params};
use crate::model::sample::Sample;
use crate::LabError;

/// `opts`.
pub const OPTS: Key = Key::new(
    "opts",
    "",
    "socket options of every stream's two ends: nodelay+quickack, client:sndbuf=1M, server:cc=bbr, … as pingpong's (baseline: none; a list is an axis); each read back and stored, one the kernel did not apply marked not in effect (default: none, BULK/1)",
)
.list();

/// `opts_off`.
pub const OPTS_OFF: Metric = m(
    "opts_off",
    "options",
    "opts off",
    "with opts: options whose read-back differs from what was asked (not in effect), on any stream",
    Better::Lower,
);

/// The older keys that set an option of the vocabulary (each the option's name): giving one
/// (not at its default) and the same option in `opts` is an error.
const OVERLAP: &[&str] = &["nodelay", "sndbuf", "cc"];

/// Parses `opts` (`None` when not given) and checks it against the keys that overlap it in
/// `cfg` (already parsed from `p`).
pub fn parse(p: &Params, cfg: &BulkConfig) -> Result<Option<OptSet>, LabError> {
    let Some(opts) = p.parse_opt("opts", |s| s.parse::<OptSet>())? else {
        return Ok(None);
    };
    let given = |key: &str| match key {
        "nodelay" => cfg.nodelay.then(|| "true".to_string()),
        "sndbuf" => p.get("sndbuf").map(str::to_string),
        _ => Some(cfg.cc.clone()).filter(|c| c != "cubic"),
    };
    for key in OVERLAP {
        let twice = opts.0.iter().any(|o| o.opt.name() == *key);
        if let (true, Some(v)) = (twice, given(key)) {
            return Err(LabError::Plan(format!(
                "{key} = '{v}' and opts = '{opts}' both set {key}: give it once, in {key} or in opts"
            )));
        }
    }
    Ok(Some(opts))
}

/// Prints `opts` when given (a plan stored before the key keeps its text).
pub fn print(p: &mut Params, cfg: &BulkConfig) {
    if let Some(o) = &cfg.opts {
        p.set("opts", o.to_string());
    }
}

/// The read-back of a run with `opts`: facts and the `opts_off` metric.
pub fn add(s: &mut Sample, r: &BulkResult) {
    let obj = |kv: &[(String, String)]| -> serde_json::Map<String, serde_json::Value> {
        kv.iter().map(|(k, v)| (k.clone(), json!(v))).collect()
    };
    if let Some(extra) = s.extra.as_object_mut() {
        extra.insert("client_opts".into(), json!(obj(&r.client_opts)));
        extra.insert(
            "server_opts".into(),
            r.server_opts
                .as_deref()
                .map_or(json!(null), |kv| json!(obj(kv))),
        );
        extra.insert("opts_off".into(), json!(r.opts_off));
    }
    s.extend([("opts_off", r.opts_off.len() as f64)]);
}

/// Whether a cell with `config` is bulk's baseline: `opts = baseline`.
pub fn is_baseline(config: &Params) -> bool {
    config.get("opts") == Some("baseline")
}

/// Why a cell with `opts` did not get its options: some repetition read one back other than
/// asked (`opts_off` above 0).
pub fn not_in_effect(config: &Params, metrics: &BTreeMap<String, Summary>) -> Option<String> {
    let opts = config.get("opts")?;
    let off = metrics.get("opts_off")?;
    (off.mean > 0.0).then(|| {
        format!(
            "opts '{opts}': the kernel reported another value than asked for an option (mean {:.1} per repetition; which one and what it reported is stored as opts_off with each repetition): a sndbuf or rcvbuf above net.core.wmem_max or rmem_max is capped (raise it with sysctl), a sink older than opts reports none",
            off.mean
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Axis, Group, Order, Plan};
    use crate::workload::bulk::BulkSpec;
    use crate::workload::{Spec, Workload};
    use socklab_net::bulk::StreamStats;

    fn spec(kv: &[(&str, &str)]) -> Result<BulkSpec, LabError> {
        let mut p = Params::new();
        for (k, v) in kv {
            p.set(k, *v);
        }
        BulkSpec::parse(&p)
    }

    #[test]
    fn opts_parses_prints_back_and_is_printed_only_when_given() {
        let none = spec(&[]).unwrap();
        assert_eq!(none.cfg.opts, None);
        assert_eq!(none.params().get("opts"), None, "old plans keep their text");
        assert!(none.cfg.is_classic());
        let s = spec(&[("opts", "nodelay+client:sndbuf=1M+server:cc=reno")]).unwrap();
        assert_eq!(s.cfg.opts.as_ref().unwrap().0.len(), 3);
        let printed = s.params();
        assert_eq!(
            printed.get("opts"),
            Some("nodelay+client:sndbuf=1M+server:cc=reno")
        );
        assert_eq!(
            printed.get("cc"),
            Some("cubic"),
            "the older keys print as before"
        );
        assert_eq!(BulkSpec::parse(&printed).unwrap(), s);
        let base = spec(&[("opts", "baseline")]).unwrap();
        assert!(
            !base.cfg.is_classic(),
            "baseline speaks BULK/2 as its siblings"
        );
        assert!(BulkSpec::is_baseline(&base.params()));
        assert!(!BulkSpec::is_baseline(&s.params()) && !BulkSpec::is_baseline(&none.params()));
        let e = spec(&[("opts", "nodelayy")]).unwrap_err().to_string();
        assert!(e.starts_with("opts = 'nodelayy': unknown option"), "{e}");
        let e = spec(&[("opts", "fastopen")]).unwrap_err().to_string();
        assert!(
            e.contains("fastopen") && e.contains("prefix it client:"),
            "{e}"
        );
        assert!(spec(&[("opts", "client:fastopen")]).is_ok());
    }

    #[test]
    fn an_option_given_by_its_own_key_and_in_opts_is_refused_naming_both() {
        for (key, value, opts) in [
            ("cc", "bbr", "cc=cubic"),
            ("nodelay", "true", "server:nodelay"),
            ("sndbuf", "64K", "client:sndbuf=1M"),
        ] {
            let e = spec(&[(key, value), ("opts", opts)])
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!("{key} = '{value}' and opts = '{opts}' both set {key}: give it once, in {key} or in opts")
            );
        }
        // At their defaults the older keys give nothing: the printed text parses back.
        let ok = spec(&[
            ("cc", "cubic"),
            ("nodelay", "false"),
            ("opts", "cc=reno+nodelay"),
        ]);
        assert!(ok.is_ok());
        // Options they do not name combine freely with them.
        assert!(spec(&[("cc", "bbr"), ("nodelay", "true"), ("opts", "rcvbuf=1M")]).is_ok());
    }

    #[test]
    fn a_list_of_option_sets_is_an_axis_of_cells_labelled_by_their_options() {
        let g = Group::new("bulk", Params::new().with("iterations", "10")).axis(Axis::single(
            "opts",
            ["baseline", "nodelay", "server:cc=reno"],
        ));
        let plan = Plan::build("o", "", &[g], 1, 0, Order::Sequential, "t").unwrap();
        let labels: Vec<&str> = plan.cells.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            ["opts=baseline", "opts=nodelay", "opts=server:cc=reno"]
        );
        assert!(
            matches!(&plan.cells[0].workload, Workload::Bulk(b) if b.cfg.opts == Some(OptSet::default()))
        );
    }

    #[test]
    fn the_read_back_is_stored_and_an_option_not_in_effect_is_counted() {
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        let r = BulkResult {
            client_opts: vec![kv("sndbuf", "8388608")],
            server_opts: Some(vec![kv("nodelay", "1")]),
            opts_off: vec!["client:sndbuf=64M: kernel reports 8388608".into()],
            streams: vec![StreamStats::default()],
            ..BulkResult::default()
        };
        let mut s =
            crate::workload::bulk::sample(&r, "127.0.0.1:1".parse().unwrap(), Default::default());
        add(&mut s, &r);
        assert_eq!(s.get("opts_off"), Some(1.0));
        assert_eq!(s.extra["client_opts"]["sndbuf"], "8388608");
        assert_eq!(s.extra["server_opts"]["nodelay"], "1");
        assert_eq!(
            s.extra["opts_off"][0],
            "client:sndbuf=64M: kernel reports 8388608"
        );
        let old_sink = BulkResult {
            server_opts: None,
            ..r
        };
        let mut s = crate::workload::bulk::sample(
            &old_sink,
            "127.0.0.1:1".parse().unwrap(),
            Default::default(),
        );
        add(&mut s, &old_sink);
        assert!(s.extra["server_opts"].is_null());
    }

    #[test]
    fn a_cell_whose_option_was_not_in_effect_is_never_best() {
        let rep = |g: f64, off: f64| vec![("gbps", g), ("opts_off", off)];
        let five = |g: f64, off: f64| {
            (0..5)
                .map(|i| rep(g + i as f64 * 0.01, off))
                .collect::<Vec<_>>()
        };
        let l = crate::testkit::lab(
            "bulk",
            Params::new().with("iterations", "10"),
            "opts",
            &["baseline", "sndbuf=64M", "nodelay"],
            // The fastest cell asked for a buffer the kernel capped.
            &[five(10.0, 0.0), five(30.0, 1.0), five(20.0, 0.0)],
        );
        let st = crate::summary::experiment_stats(&l.store, l.id).unwrap();
        let why = st.not_in_effect(1).expect("sndbuf=64M was capped");
        assert!(
            why.starts_with("opts 'sndbuf=64M': the kernel reported another value"),
            "{why}"
        );
        assert!(why.contains("wmem_max"), "{why}");
        assert_eq!(st.not_in_effect(0), None);
        assert_eq!(st.not_in_effect(2), None);
        assert_eq!(
            st.top("gbps", "bulk"),
            Some(2),
            "the capped cell is never best"
        );
    }
}
