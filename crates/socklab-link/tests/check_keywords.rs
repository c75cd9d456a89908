//! `socklab netem check` knows what every keyword should measure (issue 24 item 5). No root,
//! no clock: the "live" link here is the model itself (another seed) fed the schedule the probe
//! sends, so each test is deterministic; `crates/socklab/tests/netem_check.rs` runs the same
//! specs over the TUN link as root.

use socklab_link::check::{
    burst_len, closed_form_delay_ns, compare, pacing_gap, CheckRow, ProbeResult, FROM_MODEL,
    FROM_SPEC,
};
use socklab_link::check_model::{expect, last_release_ns, replay, Schedule};
use socklab_link::LinkSpec;

const SIZE: usize = 200;

/// What the probe would measure checking `checked` over a link that behaves as the model of
/// `live` with `seed`: the probe's own schedule (capacity phase's time 0, paced datagrams at
/// the pacing gap, the burst once the paced ones have left), replayed.
fn simulate(checked: &str, live: &str, packets: u64, seed: u64) -> ProbeResult {
    let checked: LinkSpec = checked.parse().unwrap();
    let live: LinkSpec = live.parse().unwrap();
    let origin = 1_000_000u64;
    let start = match socklab_link::capacity::plan(&checked) {
        Some(p) => origin + p.seconds * 1_000_000_000 + p.drain.as_nanos() as u64,
        None => origin,
    };
    let gap = pacing_gap(&checked, SIZE).as_nanos() as u64;
    let paced: Vec<u64> = (0..packets).map(|i| start + i * gap).collect();
    let origin_ns = socklab_link::capacity::plan(&checked).map(|_| origin);
    let mut s = Schedule {
        origin_ns,
        paced_ns: &paced,
        burst_ns: &[],
        size: SIZE,
        ip: true,
    };
    let drained = last_release_ns(&checked, &s).unwrap() + 50_000_000;
    let burst: Vec<u64> = (0..burst_len(&checked, SIZE + 28))
        .map(|i| drained + i * 1_000)
        .collect();
    s.burst_ns = &burst;
    let got = replay(&live, &s, seed);
    ProbeResult {
        sent: packets,
        unique: got.paced_intact,
        duplicates: got.duplicates,
        delays_ns: got.delays_ns,
        burst_sent: burst.len() as u64,
        burst_unique: got.burst_intact,
        burst_bps: got.burst_bps,
        send_ns: paced,
        burst_send_ns: burst,
        origin_ns,
        size: SIZE,
        ip: true,
        ..Default::default()
    }
}

fn differing(rows: &[CheckRow]) -> Vec<&CheckRow> {
    rows.iter().filter(|r| r.ok == Some(false)).collect()
}

/// A trace file, removed on drop.
struct TraceFile(std::path::PathBuf);

impl Drop for TraceFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn trace_file() -> TraceFile {
    // A second of 1 opportunity a ms, then one every 4 ms: 12 and 3 Mbit/s.
    let text: String = (1..=1000u32)
        .filter(|ms| *ms <= 500 || ms % 4 == 0)
        .map(|ms| format!("{ms}\n"))
        .collect();
    let path = std::env::temp_dir().join(format!("sl-check-{}.trace", std::process::id()));
    std::fs::write(&path, text).unwrap();
    TraceFile(path)
}

#[test]
fn every_keyword_agrees_with_a_link_that_behaves_as_its_model() {
    let trace = trace_file();
    let trace = format!("trace {}", trace.0.display());
    for spec in [
        "slot 10ms 10ms packets 8",
        "slot 5ms 15ms bytes 3000",
        "slot distribution normal 10ms 2ms packets 4",
        "delay 20ms slot 10ms packets 8 loss 5%",
        trace.as_str(),
        "rate 20mbit@0s 5mbit@1s 20mbit@2s",
        "rate 5mbit aqm codel",
        "rate 5mbit aqm fq_codel",
        "rate 5mbit aqm pie",
        "rate 1mbit limit 200 aqm codel",
        "delay 10ms 3ms distribution pareto",
        "delay 10ms 2ms fifo",
        "delay 5ms reorder 10%",
        "delay 20ms 2ms loss 5% duplicate 2% rate 10mbit",
    ] {
        let r = simulate(spec, spec, 2000, 99);
        let rows = compare(&spec.parse().unwrap(), &r);
        assert!(differing(&rows).is_empty(), "{spec}: {rows:#?}");
        // Every expectation is stated, and says where it comes from.
        let lost = rows.iter().find(|r| r.what == "lost").unwrap();
        assert!(
            lost.ok.is_some() && !lost.from.is_empty(),
            "{spec}: {lost:?}"
        );
        let p50 = rows.iter().find(|r| r.what == "one-way delay p50").unwrap();
        assert!(p50.ok.is_some(), "{spec}: no delay verdict: {p50:?}");
    }
}

#[test]
fn the_check_catches_a_link_that_differs_from_its_spec() {
    for (checked, live, row) in [
        // Slots twice as far apart: twice the wait, half the rate.
        (
            "slot 10ms 10ms packets 8",
            "slot 20ms packets 8",
            "rate (burst)",
        ),
        (
            "slot 10ms 10ms packets 8",
            "slot 30ms packets 8",
            "one-way delay p50",
        ),
        (
            "rate 5mbit aqm codel",
            "rate 4mbit aqm codel",
            "rate (burst)",
        ),
        ("rate 5mbit aqm pie", "rate 5mbit aqm pie loss 5%", "lost"),
        ("loss 5%", "loss 10%", "lost"),
    ] {
        let r = simulate(checked, live, 2000, 99);
        let rows = compare(&checked.parse().unwrap(), &r);
        let bad: Vec<&str> = differing(&rows).iter().map(|r| r.what.as_str()).collect();
        assert!(
            bad.contains(&row),
            "{checked} over {live}: {bad:?}\n{rows:#?}"
        );
    }
}

#[test]
fn the_probe_paces_below_a_slots_capacity_and_waits_for_its_queue() {
    let spec: LinkSpec = "slot 10ms 10ms packets 8".parse().unwrap();
    // 8 packets every 10 ms carry 800 a second; 80 % of that: one every 1.5625 ms.
    assert_eq!(pacing_gap(&spec, SIZE).as_nanos(), 1_562_500);
    let by_bytes: LinkSpec = "slot 10ms bytes 2280".parse().unwrap();
    assert_eq!(pacing_gap(&by_bytes, SIZE).as_nanos(), 1_250_000);
    // Paced so, the slots drop nothing and the last packet leaves within a slot of its send.
    let paced: Vec<u64> = (0..2000u64).map(|i| i * 1_562_500).collect();
    let s = Schedule {
        origin_ns: None,
        paced_ns: &paced,
        burst_ns: &[],
        size: SIZE,
        ip: true,
    };
    let got = replay(&spec, &s, 1);
    assert_eq!(got.paced_intact, 2000);
    assert!(last_release_ns(&spec, &s).unwrap() <= paced[1999] + 10_000_000);
    // At the old 100 µs gap the queue (1000 packets) overflowed: most of the probe was lost,
    // and what the old check counted before the slots drained was less still.
    let fast: Vec<u64> = (0..10_000u64).map(|i| i * 100_000).collect();
    let e = expect(
        &spec,
        &Schedule {
            paced_ns: &fast,
            ..s
        },
    );
    assert!(e.paced_missing > 0.8, "{e:?}");
}

#[test]
fn closed_forms_are_what_the_model_does() {
    let paced: Vec<u64> = (0..20_000u64).map(|i| i * 1_000_000).collect();
    let s = Schedule {
        origin_ns: None,
        paced_ns: &paced,
        burst_ns: &[],
        size: SIZE,
        ip: true,
    };
    for spec in [
        "delay 10ms",
        "delay 10ms 2ms",
        "delay 10ms 2ms distribution normal",
        "delay 10ms rate 10mbit",
        "delay 3ms rate 4mbit 20",
    ] {
        let l: LinkSpec = spec.parse().unwrap();
        let closed = closed_form_delay_ns(&l, SIZE + 28).unwrap();
        let e = expect(&l, &s);
        let (mean, p50) = (e.delay_mean_ns.unwrap(), e.delay_p50_ns.unwrap());
        // Four standard errors of 80 000 draws of a jitter ≤ 2 ms: well under 0.05 ms.
        assert!(
            (mean - closed).abs() < 50_000.0,
            "{spec}: {closed} vs {e:?}"
        );
        assert!((p50 - closed).abs() < 50_000.0, "{spec}: {closed} vs {e:?}");
    }
    // Skewed or reordering delays, slots and bottleneck models have no closed form.
    for spec in [
        "delay 10ms 2ms distribution pareto",
        "delay 10ms 2ms fifo",
        "delay 10ms 2ms rate 4mbit",
        "delay 10ms reorder 5%",
        "slot 10ms",
        "rate 10mbit aqm codel",
    ] {
        assert_eq!(
            closed_form_delay_ns(&spec.parse().unwrap(), SIZE + 28),
            None,
            "{spec}"
        );
    }
    // Which source each row states.
    let r = simulate("loss 5%", "loss 5%", 1000, 3);
    let rows = compare(&"loss 5%".parse().unwrap(), &r);
    assert_eq!(rows[0].from, FROM_SPEC);
    let r = simulate("slot 10ms packets 8", "slot 10ms packets 8", 1000, 3);
    let rows = compare(&"slot 10ms packets 8".parse().unwrap(), &r);
    assert_eq!(rows[0].from, FROM_MODEL);
}
