//! Tests of the registry: every workload's keys, defaults and metric table.

use super::*;

#[test]
fn every_kind_is_registered_once() {
    let k = kinds();
    assert_eq!(
        k,
        ["bulk", "udp", "pingpong", "states", "pipe", "memcpy", "transfer", "load", "rrul"]
    );
    let mut sorted = k.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), k.len());
    assert!(kind("bulkk").is_none());
}

/// A default is defined once, in the key's descriptor: writing it explicitly gives the same
/// workload as leaving the key out.
#[test]
fn every_default_is_the_value_the_parser_uses_when_the_key_is_absent() {
    for k in REGISTRY {
        for key in k.all_keys() {
            if !key.default_is_value() {
                continue;
            }
            let context = k.context(key.name, key.default);
            let implicit = Workload::from_params(k.name, &context)
                .unwrap_or_else(|e| panic!("{} with {context:?}: {e}", k.name));
            let explicit =
                Workload::from_params(k.name, &context.clone().with(key.name, key.default))
                    .unwrap_or_else(|e| {
                        panic!("{}: {} = '{}': {e}", k.name, key.name, key.default)
                    });
            assert_eq!(
                explicit, implicit,
                "{}: {} = '{}' differs from leaving it out",
                k.name, key.name, key.default
            );
        }
    }
}

#[test]
fn keys_are_unique_and_documented() {
    for k in REGISTRY {
        let keys = k.all_keys();
        for (i, a) in keys.iter().enumerate() {
            assert!(!a.doc.is_empty(), "{}: {} has no doc", k.name, a.name);
            assert!(
                keys[i + 1..].iter().all(|b| b.name != a.name),
                "{}: {} twice",
                k.name,
                a.name
            );
        }
    }
}

#[test]
fn each_primary_metric_is_in_its_workloads_table() {
    for k in REGISTRY {
        for has_all in [true, false] {
            let p = k.primary(&|_| has_all);
            assert!(
                k.metrics.iter().any(|m| m.name == p),
                "{}: primary {p} not in its table",
                k.name
            );
        }
    }
    assert_eq!(kind("load").unwrap().primary(&|_| false), "req_per_s");
    assert_eq!(kind("load").unwrap().primary(&|_| true), "cpu_us_per_req");
}

#[test]
fn metrics_are_found_in_every_table_and_per_file_names_by_pattern() {
    assert_eq!(metric("gbps").unit, "Gbit/s");
    assert_eq!(metric("rebind_ok").better, Better::Higher);
    assert_eq!(metric("retx.large-0").name, "retx.<file>");
    assert_eq!(metric("retx.").name, "unknown");
    assert_eq!(metric("nope").name, "unknown");
    // The first definition wins: ping-pong's connect time comes before the load generator's.
    assert_eq!(
        metric("connect_mean_us").description,
        "mean TCP connect time"
    );
}

#[test]
fn baselines_and_contexts_come_from_the_workload() {
    let load = kind("load").unwrap();
    assert!(load.is_baseline(&Params::new().with("design", "iterative")));
    assert!(!load.is_baseline(&Params::new().with("design", "epoll")));
    assert_eq!(load.context("rate", "100").get("handler"), Some("http"));
    let ping = kind("pingpong").unwrap();
    assert!(ping.is_baseline(&Params::new().with("opts", "baseline")));
    assert_eq!(ping.context("link_mtu", "9000").get("link"), Some("none"));
    let t = kind("transfer").unwrap();
    assert_eq!(t.context("tcp_cc", "n/a").get("proto"), Some("rudp"));
}

#[test]
fn summary_columns_follow_the_registry_and_are_known_metrics() {
    let cols = table_columns();
    assert_eq!(&cols[..3], ["writes", "reads", "bytes_per_read"]);
    assert_eq!(
        cols.last(),
        Some(&"udp_loss_loaded_pct"),
        "rrul's, registered last"
    );
    assert_eq!(
        cols.iter().filter(|c| **c == "reads").count(),
        1,
        "{cols:?}"
    );
    for k in REGISTRY {
        for c in k.columns {
            assert!(
                k.metrics.iter().any(|m| m.name == *c),
                "{}: column {c} is not one of its metrics",
                k.name
            );
        }
    }
}

/// Each workload bounds its own repetition's time from its parameters (the dry run adds them).
#[test]
fn each_workload_knows_its_time_bounds() {
    use std::time::Duration;
    let w = |kind: &str, p: Params| Workload::from_params(kind, &p).unwrap().time_bounds();
    let s = Duration::from_secs;
    assert_eq!(
        w("bulk", Params::new().with("duration", "3s")),
        TimeBounds::exactly(Some(s(3)))
    );
    assert_eq!(
        w("bulk", Params::new().with("iterations", "100")),
        TimeBounds::default()
    );
    let rrul = w(
        "rrul",
        Params::new().with("idle", "1s").with("duration", "4s"),
    );
    assert_eq!(rrul, TimeBounds::exactly(Some(s(5))));
    let transfer = w("transfer", Params::new().with("timeout", "30s"));
    assert_eq!(transfer.at_most, Some(s(30)));
    assert!(transfer.by_timeout && transfer.at_least.is_none());
    let load = w(
        "load",
        Params::new()
            .with("to", "127.0.0.1:8080")
            .with("duration", "5s")
            .with("handler", "http")
            .with("conn_requests", "10"),
    );
    assert_eq!((load.at_least, load.at_most), (None, Some(s(5))));
    let udp = w("udp", Params::new().with("duration", "1s"));
    assert!(udp.at_least == Some(s(1)) && udp.at_most > udp.at_least);
    assert_eq!(w("pingpong", Params::new()), TimeBounds::default());
}
