use socklab_impair::{Emulator, LinkSpec, Loss};

const MS: u64 = 1_000_000;

fn emu(spec: &str, seed: u64) -> Emulator {
    Emulator::new(spec.parse().unwrap(), seed)
}

/// Packets numbered by their first 4 bytes; one every `gap_ns`, polled as we go.
/// Returns (release time, packet) in delivery order.
fn run(e: &mut Emulator, n: u32, gap_ns: u64, len: usize) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let drain = |e: &mut Emulator, until: u64, out: &mut Vec<(u64, Vec<u8>)>| {
        while let Some(t) = e.poll_timeout().filter(|&t| t <= until) {
            out.push((t, e.poll_transmit(t).unwrap()));
        }
    };
    for i in 0..n {
        let now = u64::from(i) * gap_ns;
        drain(e, now, &mut out);
        let mut p = vec![0u8; len.max(4)];
        p[..4].copy_from_slice(&i.to_be_bytes());
        e.enqueue(now, p);
    }
    drain(e, u64::MAX, &mut out);
    out
}

fn id(p: &[u8]) -> u32 {
    u32::from_be_bytes(p[..4].try_into().unwrap())
}

fn within_binomial(x: u64, n: u64, p: f64, what: &str) {
    let np = n as f64 * p;
    let bound = 3.29 * (np * (1.0 - p)).sqrt();
    assert!(
        (x as f64 - np).abs() <= bound,
        "{what}: {x} of {n}, expected {np} ± {bound}"
    );
}

#[test]
fn empty_spec_passes_everything_unchanged_and_immediately() {
    let mut e = emu("", 1);
    let out = run(&mut e, 100, 10, 64);
    assert_eq!(out.len(), 100);
    for (i, (t, p)) in out.iter().enumerate() {
        assert_eq!(*t, i as u64 * 10);
        assert_eq!(id(p), i as u32);
    }
    assert_eq!(e.stats().bytes_out, e.stats().bytes_in);
}

#[test]
fn same_seed_same_output_different_seed_different() {
    let spec = "delay 10ms 5ms distribution normal loss 5% duplicate 2% corrupt 2% reorder 10% rate 10mbit";
    let a = run(&mut emu(spec, 99), 2000, 100_000, 200);
    let b = run(&mut emu(spec, 99), 2000, 100_000, 200);
    let c = run(&mut emu(spec, 100), 2000, 100_000, 200);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn rates_within_binomial_interval() {
    let n = 100_000u64;
    let mut e = emu("loss 3% duplicate 2% corrupt 1.5%", 7);
    let out = run(&mut e, n as u32, 1000, 16);
    let s = e.stats().clone();
    within_binomial(s.dropped, n, 0.03, "loss");
    within_binomial(s.duplicated, n, 0.02, "duplicate");

    assert_eq!(s.delivered, n + s.duplicated - s.dropped);
    assert_eq!(out.len() as u64, s.delivered);

    let mut e = emu("corrupt 1.5%", 9);
    run(&mut e, n as u32, 1000, 16);
    within_binomial(e.stats().corrupted, n, 0.015, "corrupt");

    let mut e = emu("delay 1ms reorder 20%", 8);
    run(&mut e, n as u32, 2 * MS, 16);
    assert_eq!(e.stats().queue_dropped, 0);
    within_binomial(e.stats().reordered, n, 0.2, "reorder");
}

#[test]
fn corrupt_flips_exactly_one_bit() {
    let mut e = emu("corrupt 100%", 3);
    let mut flipped_positions = std::collections::HashSet::new();
    for i in 0..1000u32 {
        let original: Vec<u8> = (0..100u32).map(|b| (b * 7 + i) as u8).collect();
        e.enqueue(0, original.clone());
        let got = e.poll_transmit(0).unwrap();
        let bits: u32 = original
            .iter()
            .zip(&got)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(bits, 1);
        let pos = original.iter().zip(&got).position(|(a, b)| a != b).unwrap();
        flipped_positions.insert(pos);
    }
    assert!(
        flipped_positions.len() > 90,
        "random byte: {}",
        flipped_positions.len()
    );
    assert_eq!(e.stats().corrupted, 1000);
}

#[test]
fn rate_spacing_and_limit() {
    // 1000 + 24 bytes at 8.192 Mbit/s = 1 ms per packet.
    let mut e = emu("rate 8192kbit 24 limit 10", 5);
    for i in 0..15u32 {
        let mut p = vec![0u8; 1000];
        p[..4].copy_from_slice(&i.to_be_bytes());
        e.enqueue(0, p);
    }
    assert_eq!(e.stats().queue_dropped, 5);
    let mut k = 0u64;
    while let Some(t) = e.poll_timeout() {
        k += 1;
        assert_eq!(t, k * MS);
        assert_eq!(e.poll_transmit(t - 1), None);
        assert_eq!(id(&e.poll_transmit(t).unwrap()), (k - 1) as u32);
    }
    assert_eq!(k, 10);
    // Once drained, the queue accepts again and restarts from now.
    e.enqueue(100 * MS, vec![0; 1000]);
    assert_eq!(e.poll_timeout(), Some(101 * MS));
}

#[test]
fn rate_adds_queueing_delay_to_base_delay() {
    let mut e = emu("delay 10ms rate 8mbit", 5);
    e.enqueue(0, vec![0; 1000]);
    e.enqueue(0, vec![0; 1000]);
    assert_eq!(e.poll_transmit(11 * MS).map(|p| p.len()), Some(1000));
    assert_eq!(e.poll_timeout(), Some(12 * MS));
}

#[test]
fn constant_delay_is_exact_and_fifo() {
    let mut e = emu("delay 20ms", 1);
    let mut sent = Vec::new();
    for i in 0..500u32 {
        let now = u64::from(i) * 37_000;
        sent.push(now);
        let mut p = vec![0u8; 8];
        p[..4].copy_from_slice(&i.to_be_bytes());
        e.enqueue(now, p);
    }
    let mut i = 0;
    while let Some(t) = e.poll_timeout() {
        let p = e.poll_transmit(t).unwrap();
        assert_eq!(id(&p), i);
        assert_eq!(t, sent[i as usize] + 20 * MS);
        i += 1;
    }
    assert_eq!(i, 500);
}

fn inversions(out: &[(u64, Vec<u8>)]) -> usize {
    out.windows(2).filter(|w| id(&w[1].1) < id(&w[0].1)).count()
}

#[test]
fn jitter_reorders_unless_fifo() {
    let out = run(&mut emu("delay 10ms 5ms", 2), 5000, 100_000, 8);
    assert!(inversions(&out) > 100, "{}", inversions(&out));
    for spec in [
        "delay 10ms 5ms fifo",
        "delay 10ms 5ms distribution normal fifo",
    ] {
        let out = run(&mut emu(spec, 2), 5000, 100_000, 8);
        assert_eq!(out.len(), 5000);
        assert_eq!(inversions(&out), 0, "{spec}");
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}

#[test]
fn reorder_sends_immediately() {
    let mut e = emu("delay 10ms reorder 100%", 1);
    e.enqueue(0, vec![1]);
    assert_eq!(e.poll_transmit(0), Some(vec![1]));
    let mut e = emu("delay 10ms reorder 100% gap 3", 1);
    let out = run(&mut e, 9, 1000, 8);
    // Every 3rd packet (2, 5, 8) jumps ahead.
    let immediate: Vec<u32> = out
        .iter()
        .filter(|(t, p)| *t == u64::from(id(p)) * 1000)
        .map(|(_, p)| id(p))
        .collect();
    assert_eq!(immediate, vec![2, 5, 8]);
}

/// Kolmogorov–Smirnov statistic of `xs` against `cdf`.
fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

fn delays(spec: &str, n: u32) -> Vec<f64> {
    // Packets far apart so nothing interacts; the delay is release - send.
    let out = run(&mut emu(spec, 11), n, 1_000_000_000, 8);
    out.iter()
        .map(|(t, p)| (*t - u64::from(id(p)) * 1_000_000_000) as f64)
        .collect()
}

#[test]
fn delay_distributions_pass_ks() {
    let n = 5000;
    let crit = 1.63 / (n as f64).sqrt();
    let d = delays("delay 100ms 10ms distribution normal", n);
    let stat = ks(d, |x| socklab_stats::normal_cdf((x - 100e6) / 10e6));
    assert!(stat < crit, "normal KS {stat} >= {crit}");
    let d = delays("delay 100ms 10ms", n);
    let stat = ks(d.clone(), |x| ((x - 90e6) / 20e6).clamp(0.0, 1.0));
    assert!(stat < crit, "uniform KS {stat} >= {crit}");
    // The test can fail: the uniform samples are not normal.
    let stat = ks(d, |x| socklab_stats::normal_cdf((x - 100e6) / 10e6));
    assert!(stat > crit, "KS should reject a wrong distribution: {stat}");
}

#[test]
fn gilbert_elliott_and_four_state_long_run_rate() {
    let n = 100_000u32;
    for spec in [
        "loss gemodel 1% 10% 70% 0.1%",
        "loss state 1% 10% 5% 20% 0.1%",
    ] {
        let s: LinkSpec = spec.parse().unwrap();
        let expected = s.loss.stationary_loss_rate();
        let mut e = Emulator::new(s, 21);
        run(&mut e, n, 1000, 8);
        let rate = e.stats().dropped as f64 / f64::from(n);
        // Bursty, so allow a wider band than binomial.
        assert!(
            (rate - expected).abs() < 0.15 * expected,
            "{spec}: {rate} vs {expected}"
        );
    }
    // Bernoulli special case of the 4-state model.
    let l: LinkSpec = "loss state 5%".parse().unwrap();
    assert!((l.loss.stationary_loss_rate() - 0.05).abs() < 1e-9);
}

#[test]
fn loss_correlation_makes_losses_bursty() {
    fn runs(spec: &str) -> (u64, usize) {
        let mut e = emu(spec, 4);
        let out = run(&mut e, 50_000, 1000, 8);
        let gaps = out
            .windows(2)
            .filter(|w| id(&w[1].1) != id(&w[0].1) + 1)
            .count();
        (e.stats().dropped, gaps)
    }
    let (lost_i, gaps_i) = runs("loss 50%");
    let (lost_c, gaps_c) = runs("loss 50% 90%");
    // Independent: loss runs average 2 packets; correlated: far fewer, longer runs.
    let per_run_i = lost_i as f64 / gaps_i as f64;
    let per_run_c = lost_c as f64 / gaps_c.max(1) as f64;
    assert!(per_run_c > 2.0 * per_run_i, "{per_run_i} vs {per_run_c}");
    assert!(matches!(
        "loss 50% 90%".parse::<LinkSpec>().unwrap().loss,
        Loss::Random { .. }
    ));
}

/// The plain path (everything netem has, without slot) gives, seed for seed, the output it
/// gave before the bottleneck model came (issue 19): these digests of every (release time,
/// packet) over 200 000 packets were taken from the emulator as it was before, and equal the
/// current one's.
#[test]
fn the_plain_path_repeats_the_earlier_versions_output_seed_for_seed() {
    fn fnv(h: &mut u64, bytes: &[u8]) {
        for &b in bytes {
            *h ^= u64::from(b);
            *h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    let mut got = Vec::new();
    for (spec, digest) in [
        ("", 0x6947_63a6_babb_25a9u64),
        (
            "delay 10ms 5ms distribution normal loss 5% duplicate 2% corrupt 2% reorder 10% rate 10mbit limit 50",
            0x9785_ac6d_e19b_c26d,
        ),
        (
            "delay 5ms 3ms 25% loss gemodel 1% 10% 70% 0.1% reorder 20% 50% gap 3 rate 50mbit 20 fifo",
            0x0f6a_207a_61ec_84ff,
        ),
        ("corrupt 10% fixcsum delay 1ms", 0x3993_ccae_5c91_178c),
        (
            "loss state 1% 10% 5% 20% 0.1% duplicate 5% limit 10 delay 100ms 50ms distribution paretonormal",
            0x074b_aafd_7c6c_106b,
        ),
    ] {
        let mut e = emu(spec, 42);
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let (mut x, mut now) = (1u64, 0u64);
        let out = |t: u64, p: Vec<u8>, h: &mut u64| {
            fnv(h, &t.to_le_bytes());
            fnv(h, &p);
        };
        for i in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            now += x % 300_000;
            while let Some(t) = e.poll_timeout().filter(|&t| t <= now) {
                out(t, e.poll_transmit(t).unwrap(), &mut h);
            }
            let mut p = vec![0x45u8; 40 + (x % 1400) as usize];
            p[4..8].copy_from_slice(&i.to_be_bytes());
            e.enqueue(now, p);
        }
        while let Some(t) = e.poll_timeout() {
            out(t, e.poll_transmit(t).unwrap(), &mut h);
        }
        got.push((spec, h, digest));
    }
    let wrong: Vec<String> = got
        .iter()
        .filter(|(_, h, d)| h != d)
        .map(|(spec, h, _)| format!("{spec:?}: {h:#018x}"))
        .collect();
    assert!(wrong.is_empty(), "outputs changed:\n{}", wrong.join("\n"));
}

/// The wait at the bottleneck is the model's, in its own clock: a driver whose thread stalls
/// (it polls nothing for 120 ms, then releases everything overdue at once) gets the same release
/// times and the same waits as one that polls at every instant the model names. The stall makes
/// packets leave late, which the driver counts as release lag (`emu_late`, `emu_valid`); it
/// never lengthens `queue_delay_*`. A burst of 100 packets at one instant into a 30-packet
/// queue waits at most 30 transmissions.
#[test]
fn a_stalled_driver_adds_no_queue_wait() {
    const TX: u64 = 600_000; // 1500 bytes at 20 Mbit/s
    for spec in [
        "rate 20mbit limit 30",
        "rate 20mbit limit 30 delay 5ms",
        "rate 20mbit limit 30 aqm codel",
    ] {
        // 100 packets at one instant, then one every 500 µs (faster than the rate) for 200 ms.
        let arrivals: Vec<u64> = std::iter::repeat_n(10 * MS, 100)
            .chain((0..400).map(|i| 50 * MS + i * 500_000))
            .collect();
        let drive = |stall: Option<(u64, u64)>| {
            let mut e = emu(spec, 3);
            let mut out = Vec::new();
            let poll = |e: &mut Emulator, until: u64, out: &mut Vec<(u64, Vec<u8>)>| {
                // A stalled thread does not run: nothing is polled inside the stall, and what
                // fell due in it is released when the stall ends.
                let until = match stall {
                    Some((from, to)) if until >= from && until < to => return,
                    _ => until,
                };
                while let Some(t) = e.poll_timeout().filter(|&t| t <= until) {
                    // The prompt driver polls at the instant named; the stalled one, late.
                    let at = if stall.is_some() { until } else { t };
                    while let Some(r) = e.poll_release(at) {
                        out.push(r);
                    }
                }
            };
            for &t in &arrivals {
                poll(&mut e, t, &mut out);
                e.enqueue(t, vec![0u8; 1500]);
            }
            poll(&mut e, u64::MAX / 2, &mut out);
            (out, e.stats().clone())
        };
        let (prompt, ps) = drive(None);
        let (stalled, ss) = drive(Some((60 * MS, 180 * MS)));
        assert_eq!(ps, ss, "{spec}: the stall changed the model's counts");
        assert_eq!(
            prompt, stalled,
            "{spec}: the stall changed the release times"
        );
        assert!(ps.queue_passed > 0, "{spec}: {ps:?}");
        assert!(
            ps.queue_delay_max_ns <= 30 * TX,
            "{spec}: a 30-packet queue held a packet {} ns",
            ps.queue_delay_max_ns
        );
    }
}
