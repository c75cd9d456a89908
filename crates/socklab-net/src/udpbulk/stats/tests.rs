use super::*;
use proptest::prelude::*;

/// Feeds `seqs` in arrival order, 1 µs apart, each sent 10 µs before it arrives.
fn feed(seqs: &[u64]) -> RecvStats {
    let mut s = RecvStats::new();
    for (i, &q) in seqs.iter().enumerate() {
        let t = 1_000_000 + i as u64 * 1000;
        s.on_arrival(q, 100, t - 10_000, t);
    }
    s
}

#[test]
fn in_order_arrivals_are_neither_reordered_nor_early() {
    let s = feed(&(0..100).collect::<Vec<_>>());
    let c = s.counts();
    assert_eq!((c.arrivals, c.unique, c.bytes), (100, 100, 10_000));
    assert_eq!(
        (c.duplicates, c.reordered, c.early, c.extent_max),
        (0, 0, 0, 0)
    );
    assert_eq!(s.jitter_ns(), 0.0, "constant transit: no jitter");
    let owd = s.owd().unwrap();
    assert_eq!((owd.min_ns, owd.max_ns, owd.negative), (10_000, 10_000, 0));
}

#[test]
fn rfc_4737_example_one_late_packet_with_extent_six() {
    // Sent 1..=10, received 1,2,3,5,6,7,8,9,10,4 (numbers from 0 here): the late one is
    // reordered, the first arrival with a higher number (5) came 6 positions before it.
    let s = feed(&[1, 2, 3, 5, 6, 7, 8, 9, 10, 4]);
    let c = s.counts();
    assert_eq!(c.reordered, 1);
    assert_eq!(c.extent_max, 6);
    assert_eq!(c.extent_sum, 6);
    // Six datagrams (5..=10) overtook 4.
    assert_eq!(c.early, 6);
}

#[test]
fn a_netem_style_reorder_is_one_early_datagram_and_many_reordered() {
    // Datagram 30 left at once (netem's reorder) while 10..=29 waited out the delay.
    let mut seqs: Vec<u64> = (0..10).collect();
    seqs.push(30);
    seqs.extend(10..30);
    seqs.extend(31..40);
    let c = *feed(&seqs).counts();
    assert_eq!(c.early, 1, "only 30 overtook");
    assert_eq!(c.reordered, 20, "10..=29 arrived below NextExp = 31");
    // 10 arrived 1 position after 30, 29 arrived 20 after it.
    assert_eq!(c.extent_max, 20);
    assert_eq!(c.extent_sum, (1..=20).sum::<u64>());
    assert_eq!(c.unique, 40);
}

#[test]
fn copies_are_duplicates_and_count_once() {
    let c = *feed(&[0, 1, 1, 2, 0, 2, 2]).counts();
    assert_eq!(
        (c.arrivals, c.unique, c.duplicates, c.bytes),
        (7, 3, 4, 300)
    );
    assert_eq!((c.reordered, c.early), (0, 0), "copies do not reorder");
}

/// RFC 3550 A.8 by hand: sends 20 ms apart, transits 100, 105, 98, 105, 100 ms; |D| = 5, 7,
/// 7, 5; J = 5/16, 187/256, 4597/4096, 89435/65536 ms.
#[test]
fn jitter_follows_rfc_3550_on_a_made_up_arrival_list() {
    let ms = 1_000_000u64;
    let sends = [0, 20, 40, 60, 80];
    let arrivals = [100, 125, 138, 165, 180];
    let expected = [
        0.0,
        5.0 / 16.0,
        187.0 / 256.0,
        4597.0 / 4096.0,
        89435.0 / 65536.0,
    ];
    for offset in [0, 7 * 3600 * 1000 * ms] {
        // A clock offset between the ends cancels out.
        let mut s = RecvStats::new();
        for i in 0..5 {
            s.on_arrival(i as u64, 64, sends[i] * ms, arrivals[i] * ms + offset);
            let j_ms = s.jitter_ns() / ms as f64;
            assert!((j_ms - expected[i]).abs() < 1e-9, "after {i}: {j_ms} ms");
        }
    }
}

#[test]
fn one_way_delay_is_left_out_when_the_clocks_disagree() {
    let mut s = RecvStats::new();
    s.on_arrival(0, 64, 5_000, 1_000);
    assert!(s.owd().is_none());
    s.on_arrival(1, 64, 1_000, 4_000);
    let o = s.owd().unwrap();
    assert_eq!((o.negative, o.min_ns), (1, 3_000));
    assert!((o.p50_ns as f64 - 3000.0).abs() <= 3.0);
}

#[test]
fn intervals_split_the_arrivals_by_time_since_the_first() {
    let ms = 1_000_000u64;
    let mut s = RecvStats::new().with_intervals(100 * ms);
    // 3 in the first 100 ms, none in the second, 2 (one a copy) in the third.
    for (seq, t) in [(0, 0), (1, 50), (2, 99), (3, 200), (3, 250)] {
        s.on_arrival(seq, 10, 0, 1_000 * ms + t * ms);
    }
    let iv = s.intervals();
    assert_eq!(iv.len(), 3);
    assert_eq!(
        iv.iter().map(|i| i.start_ms).collect::<Vec<_>>(),
        [0, 100, 200]
    );
    assert_eq!(
        iv.iter().map(|i| i.counts.unique).collect::<Vec<_>>(),
        [3, 0, 1]
    );
    assert_eq!(iv[2].counts.duplicates, 1);
    assert_eq!(iv[2].counts.bytes, 10);
    assert_eq!(iv.iter().map(|i| i.counts.arrivals).sum::<u64>(), 5);
    assert!(RecvStats::new().intervals().is_empty());
}

#[test]
fn an_interval_expects_what_nextexp_advanced_and_a_late_arrival_gives_one_back() {
    let ms = 1_000_000u64;
    let mut s = RecvStats::new().with_intervals(100 * ms);
    // First interval: 0, 1, 3, 5 (2 and 4 missing so far: NextExp 6, 4 arrived).
    // Second: 2 arrives late (it was counted lost), then 6, 9 (7, 8 lost).
    for (seq, t) in [
        (0, 0),
        (1, 10),
        (3, 20),
        (5, 30),
        (2, 120),
        (6, 130),
        (9, 140),
    ] {
        s.on_arrival(seq, 10, 0, 1_000 * ms + t * ms);
    }
    let iv = s.intervals();
    let lost = |i: &crate::udpbulk::stats::Interval| i.expected as i64 - i.counts.unique as i64;
    assert_eq!((iv[0].expected, lost(&iv[0])), (6, 2));
    assert_eq!(
        (iv[1].expected, lost(&iv[1])),
        (4, 1),
        "7 and 8 lost, 2 given back"
    );
    // Over the test: 10 numbers below NextExp, 7 arrived.
    assert_eq!(iv.iter().map(lost).sum::<i64>(), 3);
}

#[test]
fn the_window_slides_forgets_old_numbers_and_survives_jumps() {
    let mut w = SeqWindow::new(128);
    for q in 0..1000 {
        assert_eq!(w.insert(q), Seen::New);
    }
    assert_eq!(w.insert(999), Seen::Again);
    assert_eq!(w.insert(900), Seen::Again);
    assert_eq!(w.insert(0), Seen::TooOld);
    assert_eq!(w.insert(1 << 50), Seen::New);
    assert_eq!(w.insert(1 << 50), Seen::Again);
    assert_eq!(w.insert((1 << 50) - 10), Seen::New);
    assert_eq!(w.insert(999), Seen::TooOld);
    assert_eq!(w.insert(u64::MAX), Seen::New);
    assert_eq!(w.insert(u64::MAX), Seen::Again);
}

/// RFC 4737 and the early count, computed the slow, obvious way over first arrivals.
fn reference(seqs: &[u64]) -> (u64, u64, u64, u64, u64) {
    let mut firsts: Vec<u64> = Vec::new();
    let mut dups = 0;
    for &q in seqs {
        if firsts.contains(&q) {
            dups += 1;
        } else {
            firsts.push(q);
        }
    }
    let (mut reordered, mut extent_max, mut extent_sum) = (0, 0, 0);
    for (i, &q) in firsts.iter().enumerate() {
        if firsts[..i].iter().any(|&p| p > q) {
            reordered += 1;
            let j = firsts[..i].iter().position(|&p| p > q).unwrap();
            extent_max = extent_max.max((i - j) as u64);
            extent_sum += (i - j) as u64;
        }
    }
    let early = (0..firsts.len())
        .filter(|&i| firsts[i + 1..].iter().any(|&q| q < firsts[i]))
        .count() as u64;
    (dups, reordered, extent_max, extent_sum, early)
}

proptest! {
    #[test]
    fn counts_match_the_definitions_on_any_arrival_order(
        seqs in proptest::collection::vec(0u64..60, 0..120)
    ) {
        let c = *feed(&seqs).counts();
        let (dups, reordered, extent_max, extent_sum, early) = reference(&seqs);
        let mut distinct = seqs.clone();
        distinct.sort_unstable();
        distinct.dedup();
        prop_assert_eq!(c.arrivals, seqs.len() as u64);
        prop_assert_eq!(c.unique, distinct.len() as u64);
        prop_assert_eq!(c.duplicates, dups);
        prop_assert_eq!(c.reordered, reordered);
        prop_assert_eq!(c.extent_max, extent_max);
        prop_assert_eq!(c.extent_sum, extent_sum);
        prop_assert_eq!(c.early, early);
        prop_assert_eq!(c.extent_capped, 0);
    }

    #[test]
    fn a_permutation_of_a_test_loses_nothing(n in 1u64..300, swaps in proptest::collection::vec((0usize..300, 0usize..300), 0..50)) {
        let mut seqs: Vec<u64> = (0..n).collect();
        for (a, b) in swaps {
            let (a, b) = (a % n as usize, b % n as usize);
            seqs.swap(a, b);
        }
        let c = *feed(&seqs).counts();
        prop_assert_eq!((c.unique, c.duplicates, c.too_old), (n, 0, 0));
        // Every datagram that overtook has at least one overtaken, and conversely.
        prop_assert_eq!(c.early == 0, c.reordered == 0);
    }

    #[test]
    fn intervals_add_up_to_the_test(times in proptest::collection::vec(0u64..5_000, 1..200)) {
        let mut s = RecvStats::new().with_intervals(250_000_000);
        let mut t = 0;
        for (i, dt) in times.iter().enumerate() {
            t += dt * 1000;
            s.on_arrival(i as u64 / 2, 10, 0, 1_000_000_000 + t);
        }
        let span = t - times[0] * 1000;
        let iv = s.intervals();
        let sum = |f: fn(&Counts) -> u64| iv.iter().map(|i| f(&i.counts)).sum::<u64>();
        prop_assert_eq!(sum(|c| c.arrivals), s.counts().arrivals);
        prop_assert_eq!(sum(|c| c.unique), s.counts().unique);
        prop_assert_eq!(sum(|c| c.duplicates), s.counts().duplicates);
        prop_assert_eq!(iv.len() as u64, span / 250_000_000 + 1);
    }

    #[test]
    fn interval_losses_add_up_to_the_tests_below_its_highest_number(
        seqs in proptest::collection::vec(0u64..400, 1..300),
        gaps in proptest::collection::vec(0u64..60, 1..300),
    ) {
        let mut s = RecvStats::new().with_intervals(100_000_000);
        let mut t = 1_000_000_000u64;
        for (i, q) in seqs.iter().enumerate() {
            t += gaps[i % gaps.len()] * 1_000_000;
            s.on_arrival(*q, 10, 0, t);
        }
        let iv = s.intervals();
        let highest = seqs.iter().max().unwrap();
        let expected: u64 = iv.iter().map(|i| i.expected).sum();
        prop_assert_eq!(expected, highest + 1);
        let lost: i64 = iv.iter().map(|i| i.expected as i64 - i.counts.unique as i64).sum();
        prop_assert_eq!(lost, (highest + 1) as i64 - s.counts().unique as i64);
    }
}
