//! The `tun` driver's timekeeping as recorded: each run states the scheduling class its release
//! threads ran in, the distribution of its release lags and the rule it is judged by. Root only
//! (without root the test prints why it skips and passes). No timing is asserted: only that
//! what is recorded is what happened (the class the kernel granted, one lag per packet).

use socklab_link::check::{probe, CheckConfig, Endpoints};
use socklab_link::timing::{SchedClass, FIFO_PRIORITY};
use socklab_link::{Driver, EmulatedLink, LinkConfig, LinkPair, Side, SERVER_ADDR};

/// The class a thread of this process gets when it asks for what the release threads ask for.
fn grantable_class() -> SchedClass {
    std::thread::spawn(|| {
        if socklab_sys::sched::set_fifo(FIFO_PRIORITY).is_ok() && socklab_sys::sched::is_fifo() {
            SchedClass::Fifo
        } else {
            SchedClass::Other
        }
    })
    .join()
    .unwrap()
}

#[test]
fn a_tun_run_records_its_sched_class_lag_percentiles_and_rule() {
    let name = "a_tun_run_records_its_sched_class_lag_percentiles_and_rule";
    if !socklab_sys::skip::root_or_skip(name) {
        return;
    }
    if std::env::var_os(socklab_link::timing::LEVERS_ENV).is_some() {
        socklab_sys::skip::skip(
            name,
            "levers set",
            "SOCKLAB_EMU_LEVERS is set: unset it to test the default levers",
        );
        return;
    }
    let mut link = EmulatedLink::start(&LinkConfig {
        driver: Driver::Tun,
        pair: LinkPair::parse("delay 2ms", None).unwrap(),
        valid: "5% 3ms".parse().unwrap(),
        ..LinkConfig::default()
    })
    .unwrap();
    let before = link.report();
    let ends = Endpoints {
        sender_ns: Some(link.namespaces().unwrap().path(Side::Client)),
        receiver_ns: Some(link.namespaces().unwrap().path(Side::Server)),
        receiver_bind: SERVER_ADDR,
        receiver_port: 0,
        via: None,
    };
    let cfg = CheckConfig {
        packets: 300,
        size: 100,
    };
    let got = probe(&ends, &link.pair().forward, &cfg, &|| false).unwrap();
    assert!(got.unique > 0, "{got:?}");
    let r = link.report().since(&before);
    let f = &r.forward;

    // The class the kernel granted, both directions.
    let want = grantable_class();
    assert_eq!(f.sched, want);
    assert_eq!(r.backward.sched, want);
    // One lag per delivered packet, in order of size.
    assert_eq!(f.lag_hist.count(), f.stats.delivered);
    assert!(f.stats.delivered >= got.unique);
    let (p50, p99, p999) = (
        f.lag_hist.quantile_us(0.5),
        f.lag_hist.quantile_us(0.99),
        f.lag_hist.quantile_us(0.999),
    );
    assert!(p50 <= p99 && p99 <= p999, "{p50} {p99} {p999}");
    // The worst lag lies in the bucket of the largest one (its upper bound is at most 25 % up).
    let max_us = f.max_lag_ns / 1000;
    let top = f.lag_hist.quantile_us(1.0);
    assert!(
        top >= max_us && top as f64 <= max_us as f64 * 1.25 + 1.0,
        "{top} {max_us}"
    );

    // The rule came from the config and is stated; late counts follow its lag.
    assert_eq!(r.rule.to_string(), "5% 3ms");
    let j = r.to_json();
    assert_eq!(j["rule"], "5% 3ms");
    assert_eq!(j["forward"]["sched"], want.as_str());
    assert_eq!(j["forward"]["lag_p99_us"], p99);
    let m: std::collections::HashMap<_, _> = r.metrics().into_iter().collect();
    assert_eq!(m["emu_sched_fifo"], want.metric());
    for k in [
        "emu_lag_p50_us",
        "emu_lag_p99_us",
        "emu_lag_p999_us",
        "emu_spin_us",
    ] {
        assert!(m[k] >= 0.0, "{k}");
    }
    assert!(f.late <= f.stats.delivered);
    // The threads' run-queue wait is read with their CPU time (the evidence for "not
    // scheduled in time"), and stored.
    assert!(
        f.runq_wait_ns.is_some() && r.backward.runq_wait_ns.is_some(),
        "{f:?}"
    );
    assert!(m["emu_runq_wait_ms"] >= 0.0);

    // A new rule applies from then on.
    link.set_rule("1% 1ms".parse().unwrap());
    assert_eq!(link.report().rule.to_string(), "1% 1ms");
    link.stop().unwrap();
}
