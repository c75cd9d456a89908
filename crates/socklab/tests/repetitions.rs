//! Repetitions are independent measurements: over an emulated link each repetition draws its
//! own emulator seed (from the link's seed, the cell and the repetition), stored with it, and
//! the same command run again repeats the same seeds. Loopback only (the udp-proxy driver
//! needs no root); every run is bounded by its message count.

mod common;

use common::run;

/// `(link_run_seed, link_fwd_dropped)` of the planned repetitions (0, 1, 2), in run order. A
/// repetition marked invalid (a busy machine) is re-run as repetition 3, 4, …: each retry is
/// named and has a seed of its own.
fn pingpong_through_a_lossy_relay(db: &str) -> Vec<(u64, f64)> {
    let (code, out, err) = run(&[
        "pingpong",
        "--udp",
        "--count",
        "300",
        "--size",
        "32",
        "--timeout",
        "20ms",
        "--retries",
        "0",
        "--link",
        "loss 20%",
        "--link-back",
        "",
        "--driver",
        "udp-proxy",
        "--reps",
        "3",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, json, err) = run(&["results", "export", "--json", "--db", db]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = v.as_array().expect("array of repetitions");
    let last = rows.iter().map(|r| r["experiment"].as_i64().unwrap()).max();
    let rows: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["experiment"].as_i64() == last)
        .collect();
    let seeds: std::collections::HashSet<u64> = rows
        .iter()
        .filter_map(|r| r["extra"]["link_run_seed"].as_u64())
        .collect();
    assert_eq!(seeds.len(), rows.len(), "a retry draws its own seed");
    for r in rows.iter().filter(|r| r["rep"].as_u64() >= Some(3)) {
        assert_eq!(r["extra"]["retry"], true, "{r}");
    }
    rows.iter()
        .filter(|r| r["rep"].as_u64() < Some(3))
        .map(|r| {
            (
                r["extra"]["link_run_seed"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("no seed: {r}")),
                r["metrics"]["link_fwd_dropped"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn each_repetition_over_a_lossy_link_draws_its_own_seed_and_a_rerun_repeats_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let first = pingpong_through_a_lossy_relay(db);
    assert_eq!(first.len(), 3, "{first:?}");
    let mut seeds: Vec<u64> = first.iter().map(|r| r.0).collect();
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), 3, "one seed per repetition: {first:?}");
    // 300 messages at 20 % loss: the same drops three times over would be a replay.
    let drops: Vec<f64> = first.iter().map(|r| r.1).collect();
    assert!(
        drops.iter().any(|d| *d != drops[0]),
        "every repetition dropped the same number of messages: {drops:?}"
    );
    assert!(drops.iter().all(|d| *d > 20.0), "{drops:?}");
    let again = pingpong_through_a_lossy_relay(db);
    let seeds_again: Vec<u64> = again.iter().map(|r| r.0).collect();
    assert_eq!(
        first.iter().map(|r| r.0).collect::<Vec<_>>(),
        seeds_again,
        "the same command repeats the same seeds"
    );
}
