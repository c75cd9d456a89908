//! Issue 19: the bottleneck's queue disciplines (CoDel, FQ-CoDel, PIE) against their RFCs'
//! reference behaviour, ECN marking, netem's slot, Mahimahi traces and rate schedules, on
//! made-up arrival sequences in simulated time; and the observer's events against the counts.

use socklab_impair::ip::{self, CE, ECT0, NOT_ECT};
use socklab_impair::{Emulator, Event, EventKind, LinkSpec, Stats};

const MS: u64 = 1_000_000;

/// An IPv4 UDP packet of `len` bytes from port `sport`, with ECN field `ecn` and a valid
/// header checksum; its number `n` in the payload.
fn udp(sport: u16, ecn: u8, len: usize, n: u32) -> Vec<u8> {
    let mut p = vec![0u8; len.max(32)];
    p[0] = 0x45;
    p[1] = ecn;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 77, 0, 1]);
    p[16..20].copy_from_slice(&[10, 77, 0, 2]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&9u16.to_be_bytes());
    p[28..32].copy_from_slice(&n.to_be_bytes());
    let mut sum = 0u32;
    for c in p[..20].chunks_exact(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    p
}

fn emu(spec: &str, seed: u64) -> Emulator {
    let mut e = Emulator::new(spec.parse().unwrap_or_else(|x| panic!("{spec}: {x}")), seed);
    e.observe(true);
    e
}

/// Releases everything the emulator will release, at its own times; returns (time, packet).
fn drain(e: &mut Emulator, until: u64, out: &mut Vec<(u64, Vec<u8>)>) {
    while let Some(t) = e.poll_timeout().filter(|&t| t <= until) {
        let mut any = false;
        while let Some(r) = e.poll_release(t) {
            out.push(r);
            any = true;
        }
        if !any && e.poll_timeout() == Some(t) {
            panic!("no progress at {t}");
        }
    }
}

/// Feeds `(time, packet)` arrivals in order, releasing as time goes; returns what left.
fn run(
    e: &mut Emulator,
    arrivals: impl IntoIterator<Item = (u64, Vec<u8>)>,
) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for (t, p) in arrivals {
        if t > 0 {
            drain(e, t - 1, &mut out);
        }
        e.enqueue(t, p);
    }
    drain(e, u64::MAX, &mut out);
    out
}

fn events(e: &mut Emulator) -> Vec<Event> {
    e.drain_events().collect()
}

fn times(ev: &[Event], pick: impl Fn(&EventKind) -> bool) -> Vec<u64> {
    ev.iter()
        .filter(|e| pick(&e.kind))
        .map(|e| e.at_ns)
        .collect()
}

/// RFC 8289's schedule for a queue that stays long, served one packet per ms: the first drop
/// `interval` after the sojourn time first reached target (`first_ms`), then each next drop at
/// the first dequeue (a whole ms) at or after `drop_next`, which advances by
/// `interval / sqrt(count)` (truncated to ns), `count` starting at `count0`.
fn codel_schedule(first_ms: u64, count0: u32, until_ms: u64) -> Vec<u64> {
    let interval = 100 * MS;
    let mut out = vec![first_ms * MS];
    let mut count = count0;
    let mut next = first_ms * MS + (interval as f64 / f64::from(count).sqrt()) as u64;
    loop {
        let at = next.div_ceil(MS) * MS;
        if at >= until_ms * MS {
            return out;
        }
        out.push(at);
        count += 1;
        next += (interval as f64 / f64::from(count).sqrt()) as u64;
    }
}

/// 1500-byte packets at 12 Mbit/s take exactly 1 ms each.
const ONE_MS_LINK: &str = "rate 12mbit limit 100000";

#[test]
fn codel_drops_on_the_rfc_8289_schedule() {
    // 1000 packets at once: the k-th is dequeued at k ms (drops take no time), its sojourn
    // k ms. Sojourn reaches target (5 ms) at 5 ms; the first drop is an interval later.
    let mut e = emu(&format!("{ONE_MS_LINK} aqm codel"), 1);
    let out = run(&mut e, (0..1000).map(|i| (0, udp(1, NOT_ECT, 1500, i))));
    let ev = events(&mut e);
    let drops = times(&ev, |k| matches!(k, EventKind::AqmDropped { .. }));
    let expected = codel_schedule(105, 1, 900);
    assert_eq!(&drops[..expected.len()], &expected[..], "drop times");
    assert_eq!(&expected[..4], &[105 * MS, 205 * MS, 276 * MS, 334 * MS]);
    // Every dropped packet had waited since 0: its sojourn is the drop time.
    for ev in ev.iter() {
        if let EventKind::AqmDropped { sojourn_ns } = ev.kind {
            assert_eq!(sojourn_ns, ev.at_ns);
        }
    }
    let s = e.stats();
    assert_eq!(s.aqm_dropped, drops.len() as u64);
    assert_eq!(s.delivered + s.aqm_dropped, 1000);
    assert_eq!(out.len() as u64, s.delivered);
    assert_eq!(s.aqm_marked, 0);
}

#[test]
fn codel_resumes_its_drop_rate_when_congestion_returns_soon() {
    // Burst 1 (300 packets at 0): drops at 105, 205, 276 ms (count 3), then the queue empties
    // and CoDel leaves its dropping state. Burst 2 at 400 ms: the delay is above target from
    // 405 ms, the first drop at 505 ms; it came within 16 intervals of the last drop_next, so
    // count restarts at count - lastcount = 2 (RFC 8289, the Linux variant), not 1: the next
    // drop is 100/sqrt(2) ms later, not 100 ms.
    let mut e = emu(&format!("{ONE_MS_LINK} aqm codel"), 1);
    let arrivals = (0..300)
        .map(|i| (0, udp(1, NOT_ECT, 1500, i)))
        .chain((300..600).map(|i| (400 * MS, udp(1, NOT_ECT, 1500, i))));
    run(&mut e, arrivals);
    let drops = times(&events(&mut e), |k| {
        matches!(k, EventKind::AqmDropped { .. })
    });
    let (first, second): (Vec<u64>, Vec<u64>) = drops.iter().partition(|&&t| t < 400 * MS);
    assert_eq!(first, [105 * MS, 205 * MS, 276 * MS]);
    assert_eq!(&second[..3], &[505 * MS, 576 * MS, 634 * MS]);
    assert_eq!(&second[..], &codel_schedule(505, 2, 690)[..]);
}

#[test]
fn codel_with_ecn_marks_on_the_same_schedule_and_drops_nothing() {
    let mut e = emu(&format!("{ONE_MS_LINK} aqm codel ecn"), 1);
    let out = run(&mut e, (0..1000).map(|i| (0, udp(1, ECT0, 1500, i))));
    let ev = events(&mut e);
    let marks = times(&ev, |k| matches!(k, EventKind::AqmMarked { .. }));
    let expected = codel_schedule(105, 1, 900);
    assert_eq!(&marks[..expected.len()], &expected[..]);
    let s = e.stats();
    assert_eq!((s.aqm_dropped, s.delivered), (0, 1000));
    assert_eq!(s.aqm_marked, marks.len() as u64);
    let ce: Vec<&Vec<u8>> = out
        .iter()
        .map(|(_, p)| p)
        .filter(|p| ip::ecn(p) == Some(CE))
        .collect();
    assert_eq!(ce.len() as u64, s.aqm_marked);
    for p in ce {
        assert_eq!(ip::ipv4_header_checksum_ok(p), Some(true));
    }
    // Packets that are not ECN-capable are dropped on the same schedule instead.
    let mut e = emu(&format!("{ONE_MS_LINK} aqm codel ecn"), 1);
    run(&mut e, (0..1000).map(|i| (0, udp(1, NOT_ECT, 1500, i))));
    let drops = times(&events(&mut e), |k| {
        matches!(k, EventKind::AqmDropped { .. })
    });
    assert_eq!(&drops[..expected.len()], &expected[..]);
    assert_eq!(e.stats().aqm_marked, 0);
}

/// Bulk flow (port 1): 1500-byte packets, two a ms, for `secs`; sparse flow (port 2): a
/// 100-byte packet every 20 ms. Returns the sparse packets' and the bulk packets' queueing
/// delays (ns) of those delivered after the first second.
fn bulk_and_sparse(spec: &str, secs: u64) -> (Vec<u64>, Vec<u64>, Stats) {
    let mut e = emu(spec, 3);
    let mut arrivals = Vec::new();
    for k in 0..secs * 2000 {
        arrivals.push((k * MS / 2, udp(1, NOT_ECT, 1500, 0)));
        if k % 40 == 0 {
            arrivals.push((k * MS / 2 + 100_000, udp(2, NOT_ECT, 100, 0)));
        }
    }
    // Which packet numbers are sparse: the emulator numbers them in arrival order.
    let sparse_ids: std::collections::HashSet<u64> = arrivals
        .iter()
        .enumerate()
        .filter(|(_, (_, p))| p.len() == 100)
        .map(|(i, _)| i as u64)
        .collect();
    run(&mut e, arrivals);
    let (mut sparse, mut bulk) = (Vec::new(), Vec::new());
    for ev in events(&mut e) {
        if let EventKind::Released { queued_ns, .. } = ev.kind {
            if ev.at_ns < 1_000 * MS {
                continue;
            }
            if sparse_ids.contains(&ev.packet) {
                sparse.push(queued_ns);
            } else {
                bulk.push(queued_ns);
            }
        }
    }
    (sparse, bulk, e.stats().clone())
}

#[test]
fn fq_codel_keeps_a_sparse_flow_fast_beside_a_bulk_flow() {
    let (sparse, bulk, s) = bulk_and_sparse("rate 12mbit limit 1000 aqm fq_codel", 4);
    assert!(sparse.len() > 100 && bulk.len() > 2000);
    // A sparse packet is a new flow each time: it waits at most for the bulk packet being
    // sent (1 ms), whatever the bulk flow's queue.
    let worst = *sparse.iter().max().unwrap();
    assert!(worst <= MS, "sparse flow waited {worst} ns");
    let bulk_mean = bulk.iter().sum::<u64>() as f64 / bulk.len() as f64;
    assert!(bulk_mean > 100.0 * MS as f64, "bulk mean {bulk_mean}");
    // The overload is beyond the limit: fq_codel drops from the fat flow's head.
    assert!(s.queue_dropped > 1000, "{s:?}");
    // The same traffic through drop-tail: the sparse flow queues behind the bulk flow.
    // (the queue grows by a packet a ms until it holds the limit, 1000 packets, 1000 ms).
    let (fifo_sparse, _, _) = bulk_and_sparse("rate 12mbit limit 1000", 4);
    let fifo_mean = fifo_sparse.iter().sum::<u64>() as f64 / fifo_sparse.len() as f64;
    assert!(
        fifo_mean > 500.0 * MS as f64,
        "fifo sparse mean {fifo_mean}"
    );
}

#[test]
fn fq_codel_serves_flows_by_deficit_round_robin() {
    // Two backlogged flows of 1500 and 500 bytes, quantum 1514: each round gives flow A one
    // packet and flow B three (1514 bytes of credit each), so they share the link's bytes.
    let mut e = emu(
        "rate 12mbit limit 10000 aqm fq_codel target 10s interval 10s",
        1,
    );
    let mut arrivals = Vec::new();
    for i in 0..300 {
        arrivals.push((0, udp(1, NOT_ECT, 1500, i)));
        for j in 0..3 {
            arrivals.push((0, udp(2, NOT_ECT, 500, i * 3 + j)));
        }
    }
    let out = run(&mut e, arrivals);
    let (mut a, mut b) = (0u64, 0u64);
    for (_, p) in &out[..400] {
        if p.len() == 1500 {
            a += 1500;
        } else {
            b += 500;
        }
    }
    assert!((a as i64 - b as i64).abs() <= 3000, "bytes {a} vs {b}");
}

#[test]
fn pie_lets_a_burst_through_then_holds_the_delay_near_target() {
    // A burst shorter than the burst allowance (150 ms) is never dropped.
    let mut e = emu(&format!("{ONE_MS_LINK} aqm pie"), 5);
    run(&mut e, (0..120).map(|i| (0, udp(1, NOT_ECT, 1500, i))));
    assert_eq!(e.stats().aqm_dropped, 0);
    assert_eq!(e.stats().delivered, 120);

    // A steady overload of twice the rate for 20 s: no drop in the first 150 ms, then the
    // probability climbs until the queue delay sits near the 15 ms target (drop-tail would
    // hold 1000 ms at this limit).
    let mut e = emu("rate 12mbit limit 1000 aqm pie", 5);
    let out = run(
        &mut e,
        (0..40_000u64).map(|k| (k * MS / 2, udp(1, NOT_ECT, 1500, 0))),
    );
    let ev = events(&mut e);
    let drops = times(&ev, |k| matches!(k, EventKind::AqmDropped { .. }));
    assert!(drops[0] >= 150 * MS, "first drop at {}", drops[0]);
    let late: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Released { queued_ns, .. } if e.at_ns > 10_000 * MS => Some(queued_ns),
            _ => None,
        })
        .collect();
    let mean = late.iter().sum::<u64>() as f64 / late.len() as f64 / MS as f64;
    assert!((8.0..30.0).contains(&mean), "mean queue delay {mean} ms");
    let s = e.stats();
    assert_eq!(s.queue_dropped, 0, "PIE, not the limit, sheds the load");
    // Half the offered load must go: the link carries 1 packet a ms of the 2 offered.
    let carried = out.len() as f64 / 40_000.0;
    assert!((carried - 0.5).abs() < 0.02, "{carried}");
}

#[test]
fn slot_releases_packets_in_bursts_at_slot_times() {
    // netem: the first slot opens when the link starts, 8 packets a slot, 10 ms apart.
    let mut e = emu("slot 10ms packets 8", 1);
    let mut out = run(&mut e, (0..100).map(|i| (0, udp(1, NOT_ECT, 200, i))));
    let got: Vec<u64> = out.iter().map(|(t, _)| *t).collect();
    let want: Vec<u64> = (0..100).map(|i| (i / 8) * 10 * MS).collect();
    assert_eq!(got, want);
    // The last slot (at 120 ms) carried 4: a packet long after finds the slot expired (it
    // opened before the packet was due) and waits for a new one, a gap after its arrival.
    e.enqueue(200 * MS, udp(1, NOT_ECT, 200, 100));
    drain(&mut e, u64::MAX, &mut out);
    assert_eq!(out.last().unwrap().0, 210 * MS);

    // bytes: 1000-byte packets, 3000 bytes a slot: 3 a slot.
    let mut e = emu("slot 5ms bytes 3000", 1);
    let out = run(&mut e, (0..30).map(|i| (0, udp(1, NOT_ECT, 1000, i))));
    let got: Vec<u64> = out.iter().map(|(t, _)| *t).collect();
    assert_eq!(got, (0..30).map(|i| (i / 3) * 5 * MS).collect::<Vec<_>>());

    // With a delay, the packet falls due after the slot opened: a new slot opens when netem
    // next looks (on the arrival, then when the packet is due), so the packet leaves at
    // 10 ms + 5 ms.
    let mut e = emu("delay 10ms slot 5ms", 1);
    let out = run(&mut e, [(0, udp(1, NOT_ECT, 200, 0))]);
    assert_eq!(out[0].0, 15 * MS);

    // Gaps drawn in [MIN, MAX): every slot-to-slot gap is in range, the mean near the middle.
    let mut e = emu("slot 5ms 15ms packets 1", 9);
    let out = run(&mut e, (0..2000).map(|i| (0, udp(1, NOT_ECT, 200, i))));
    let gaps: Vec<u64> = out.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.iter().all(|g| (5 * MS..15 * MS).contains(g)));
    let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64 / MS as f64;
    assert!((mean - 10.0).abs() < 0.3, "{mean}");
}

fn trace_spec(name: &str, text: &str, rest: &str) -> (String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sl-bn-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.trace");
    std::fs::write(&f, text).unwrap();
    (format!("trace {} {rest}", f.to_str().unwrap()), dir)
}

#[test]
fn a_saturated_trace_link_delivers_one_mtu_per_opportunity_and_loops() {
    // Opportunities at 0, 1, 1, 4 ms; the trace repeats every 4 ms (the next period's 0 is at
    // 4 ms too): 4 opportunities every 4 ms. Time 0 is the first packet's arrival; as in
    // Mahimahi, where the link starts before any packet, the opportunity at 0 is gone before
    // that packet is queued.
    let (spec, dir) = trace_spec("sat", "0\n1\n1\n4\n", "limit 10000");
    let opp = |j: u64| (j / 4) * 4 * MS + [0, 1, 1, 4][(j % 4) as usize] * MS;
    let times = |out: &[(u64, Vec<u8>)]| out.iter().map(|(t, _)| *t).collect::<Vec<u64>>();
    // 1500-byte packets: one an opportunity, at its time.
    let mut e = emu(&spec, 1);
    let out = run(&mut e, (0..400).map(|i| (0, udp(1, NOT_ECT, 1500, i))));
    assert_eq!(times(&out), (1..=400).map(opp).collect::<Vec<_>>());
    // 500-byte packets: three an opportunity.
    let mut e = emu(&spec, 1);
    let out = run(&mut e, (0..300).map(|i| (0, udp(1, NOT_ECT, 500, i))));
    assert_eq!(
        times(&out),
        (0..300).map(|i| opp(1 + i / 3)).collect::<Vec<_>>()
    );
    // 1000-byte packets span opportunities: a packet leaves with its last byte, so the
    // opportunities carry 1, 2, 1, 2, … packets.
    let mut e = emu(&spec, 1);
    let out = run(&mut e, (0..30).map(|i| (0, udp(1, NOT_ECT, 1000, i))));
    let want: Vec<u64> = (1..30u64)
        .flat_map(|j| std::iter::repeat_n(opp(j), if j % 2 == 1 { 1 } else { 2 }))
        .take(30)
        .collect();
    assert_eq!(times(&out), want);
    // A steady overload for a second: every opportunity after the first carries a packet.
    let mut e = emu(&spec, 1);
    let out = run(
        &mut e,
        (0..4000u64).map(|k| (k * MS / 4, udp(1, NOT_ECT, 1500, 0))),
    );
    let first_second = out.iter().filter(|(t, _)| *t < 1000 * MS).count() as u64;
    let opportunities = (0..).take_while(|&j| opp(j) < 1000 * MS).count() as u64;
    assert_eq!(opportunities, 999);
    assert_eq!(first_second, opportunities - 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_idle_trace_link_wastes_its_opportunities() {
    // Opportunities every 10 ms (the time origin is the first packet's arrival at 3 ms).
    let (spec, dir) = trace_spec("idle", "10\n", "delay 1ms");
    let mut e = emu(&spec, 1);
    let out = run(
        &mut e,
        [
            (3 * MS, udp(1, NOT_ECT, 100, 0)),
            (3 * MS + 45 * MS, udp(1, NOT_ECT, 100, 1)),
            (3 * MS + 50 * MS, udp(1, NOT_ECT, 100, 2)),
        ],
    );
    let got: Vec<u64> = out.iter().map(|(t, _)| *t - 3 * MS).collect();
    // The first waits for the opportunity at 10 ms; the second (at 45) for the one at 50; the
    // third arrives at 50, the same instant: as in Mahimahi, the link has used that
    // opportunity before it queues the arrival, so it waits for the one at 60. Each then has
    // the 1 ms delay.
    assert_eq!(got, [11 * MS, 51 * MS, 61 * MS]);
    let ev = events(&mut e);
    let queued: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Released { queued_ns, .. } => Some(queued_ns),
            _ => None,
        })
        .collect();
    assert_eq!(queued, [10 * MS, 5 * MS, 10 * MS]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_rate_schedule_delivers_what_each_step_allows() {
    // 12 Mbit/s, then 1.2 Mbit/s for a second, then 12 Mbit/s: a saturated link delivers
    // 1000, 100 and 1000 packets of 1500 B in those seconds, shifted by the first packet's
    // transmission: it leaves at 1 ms, the thousandth at 1000 ms, in the second second.
    let mut e = emu("rate 12mbit@0s 1200kbit@1s 12mbit@2s limit 100000", 1);
    let out = run(
        &mut e,
        (0..6000u64).map(|k| (k * MS / 2, udp(1, NOT_ECT, 1500, 0))),
    );
    let per_second: Vec<usize> = (0..3)
        .map(|s| {
            out.iter()
                .filter(|(t, _)| (s * 1000 * MS..(s + 1) * 1000 * MS).contains(t))
                .count()
        })
        .collect();
    assert_eq!(per_second, [999, 100, 1000]);
}

#[test]
fn the_bottleneck_model_gives_the_fast_paths_release_times_for_a_fifo() {
    // A schedule of two equal steps is a constant rate through the bottleneck model; with a
    // constant delay it must release every packet exactly when the precomputed drop-tail path
    // does.
    let mut rng = socklab_impair::Rng::new(4);
    let mut t = 0u64;
    let arrivals: Vec<(u64, Vec<u8>)> = (0..5000)
        .map(|i| {
            t += rng.below(2 * MS);
            (t, udp(1, NOT_ECT, 64 + rng.below(1400) as usize, i))
        })
        .collect();
    let fast = run(
        &mut emu("delay 5ms rate 8mbit limit 100000", 1),
        arrivals.clone(),
    );
    let mut model = emu("delay 5ms rate 8mbit@0s 8mbit@1000s limit 100000", 1);
    let slow = run(&mut model, arrivals);
    assert_eq!(fast.len(), 5000);
    let differ = fast.iter().zip(&slow).position(|(a, b)| a != b);
    assert_eq!(differ, None, "first difference");
    assert_eq!(fast.len(), slow.len());
}

#[test]
fn the_output_does_not_depend_on_when_the_caller_polls() {
    let spec = "delay 3ms 1ms loss 5% duplicate 2% reorder 5% rate 12mbit limit 200 aqm fq_codel slot 1ms 2ms packets 4";
    let arrivals: Vec<(u64, Vec<u8>)> = (0..3000u64)
        .map(|k| (k * 300_000, udp((k % 5) as u16, NOT_ECT, 1500, k as u32)))
        .collect();
    let prompt = run(&mut emu(spec, 7), arrivals.clone());
    // A sluggish caller: polls only every 7 ms, enqueues in its own batches.
    let mut e = emu(spec, 7);
    let mut late = Vec::new();
    let mut next_poll = 0;
    for (t, p) in arrivals {
        if t >= next_poll {
            while let Some(r) = e.poll_release(t) {
                late.push(r);
            }
            next_poll = t + 7 * MS;
        }
        e.enqueue(t, p);
    }
    drain(&mut e, u64::MAX, &mut late);
    assert_eq!(prompt.len(), late.len());
    assert!(prompt == late, "the outputs differ");
    // And a different seed gives a different run.
    let arrivals2: Vec<(u64, Vec<u8>)> = (0..3000u64)
        .map(|k| (k * 300_000, udp((k % 5) as u16, NOT_ECT, 1500, k as u32)))
        .collect();
    assert!(prompt != run(&mut emu(spec, 8), arrivals2));
}

#[test]
fn netem_ecn_marks_instead_of_losing_ect_packets() {
    let n = 20_000u32;
    let mut e = emu("loss 30% ecn", 2);
    let out = run(
        &mut e,
        (0..n).map(|i| (u64::from(i) * 1000, udp(1, ECT0, 100, i))),
    );
    let s = e.stats().clone();
    assert_eq!((s.dropped, s.delivered), (0, u64::from(n)));
    let np = f64::from(n) * 0.3;
    assert!(
        (s.loss_marked as f64 - np).abs() < 3.29 * (np * 0.7).sqrt(),
        "{s:?}"
    );
    let ce = out.iter().filter(|(_, p)| ip::ecn(p) == Some(CE)).count() as u64;
    assert_eq!(ce, s.loss_marked);
    assert!(out
        .iter()
        .all(|(_, p)| ip::ipv4_header_checksum_ok(p) == Some(true)));
    // Not ECN-capable: lost as without ecn.
    let mut a = emu("loss 30% ecn", 2);
    run(
        &mut a,
        (0..n).map(|i| (u64::from(i) * 1000, udp(1, NOT_ECT, 100, i))),
    );
    assert_eq!(a.stats().loss_marked, 0);
    assert!((a.stats().dropped as f64 - np).abs() < 3.29 * (np * 0.7).sqrt());
    // UDP payloads (the udp-proxy driver) are never marked, even when they look like IP: the
    // same draws as the IP packets that were not ECN-capable.
    let mut p = Emulator::new("loss 30% ecn".parse().unwrap(), 2).udp_payloads();
    run(
        &mut p,
        (0..n).map(|i| (u64::from(i) * 1000, udp(1, ECT0, 100, i))),
    );
    assert_eq!(
        (p.stats().loss_marked, p.stats().dropped),
        (0, a.stats().dropped)
    );
}

/// Each counter has its event: a capture that writes the events agrees with the counts.
#[test]
fn events_add_up_to_the_counts() {
    let (trace, dir) = trace_spec("ev", "1\n1\n2\n", "aqm pie");
    for spec in [
        "delay 2ms 1ms loss 3% duplicate 2% corrupt 1% reorder 5% rate 12mbit limit 50",
        "delay 2ms loss 3% duplicate 2% corrupt 1% reorder 5% rate 12mbit limit 100 aqm codel ecn",
        "loss 3% duplicate 2% rate 12mbit@0s 6mbit@1s limit 300 aqm fq_codel flows 16",
        "delay 1ms slot 1ms 3ms packets 5 limit 20 loss 2% ecn",
        &trace,
    ] {
        let mut e = emu(spec, 11);
        let out = run(
            &mut e,
            (0..20_000u64).map(|k| {
                let ecn = if k % 3 == 0 { NOT_ECT } else { ECT0 };
                (
                    k * 150_000,
                    udp((k % 7) as u16, ecn, 200 + (k % 1300) as usize, k as u32),
                )
            }),
        );
        let ev = events(&mut e);
        let count = |f: fn(&EventKind) -> bool| ev.iter().filter(|e| f(&e.kind)).count() as u64;
        let s = e.stats().clone();
        assert_eq!(
            count(|k| matches!(k, EventKind::Arrived { .. })),
            s.packets_in,
            "{spec}"
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::Duplicated { .. })),
            s.duplicated,
            "{spec}"
        );
        assert_eq!(count(|k| matches!(k, EventKind::Lost)), s.dropped, "{spec}");
        assert_eq!(
            count(|k| matches!(k, EventKind::LossMarked)),
            s.loss_marked,
            "{spec}"
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::Corrupted)),
            s.corrupted,
            "{spec}"
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::QueueDropped)),
            s.queue_dropped,
            "{spec}"
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::Reordered)),
            s.reordered,
            "{spec}"
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::AqmDropped { .. })),
            s.aqm_dropped,
            "{spec}"
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::AqmMarked { .. })),
            s.aqm_marked,
            "{spec}"
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::Released { .. })),
            s.delivered,
            "{spec}"
        );
        assert_eq!(out.len() as u64, s.delivered, "{spec}");
        // Every copy is accounted for once: delivered or removed.
        assert_eq!(
            s.packets_in + s.duplicated,
            s.delivered + s.dropped + s.queue_dropped + s.aqm_dropped,
            "{spec}: {s:?}"
        );
        let qsum: u64 = ev
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Released { queued_ns, .. } => Some(queued_ns),
                _ => None,
            })
            .sum();
        assert_eq!(qsum, s.queue_delay_sum_ns, "{spec}");
        assert_eq!(e.queued(), 0);
    }
    // Off, nothing is recorded.
    let mut e = Emulator::new("loss 50%".parse::<LinkSpec>().unwrap(), 1);
    e.enqueue(0, vec![0; 10]);
    assert_eq!(e.drain_events().count(), 0);
    std::fs::remove_dir_all(dir).unwrap();
}
