use proptest::prelude::*;
use socklab_impair::aqm::{CodelConfig, FqCodelConfig, PieConfig};
use socklab_impair::{Aqm, Distribution, LinkSpec, Loss, RateSchedule, Slot, SlotDelay, Trace};

fn parse(s: &str) -> LinkSpec {
    s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn error(s: &str) -> String {
    match s.parse::<LinkSpec>() {
        Ok(spec) => panic!("{s:?} parsed as {spec:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn examples_parse() {
    let s =
        parse("delay 50ms 10ms distribution normal loss 5% duplicate 1% corrupt 1% rate 100mbit");
    assert_eq!(s.delay_ns, 50_000_000);
    assert_eq!(s.jitter_ns, 10_000_000);
    assert_eq!(s.distribution, Distribution::Normal);
    assert_eq!(
        s.loss,
        Loss::Random {
            p: 0.05,
            correlation: 0.0
        }
    );
    assert_eq!(s.duplicate, 0.01);
    assert_eq!(s.corrupt, 0.01);
    assert_eq!(s.rate_bps, Some(100_000_000));

    let s = parse("delay 100ms 10ms 25%");
    assert_eq!(
        (s.delay_ns, s.jitter_ns, s.delay_correlation),
        (100_000_000, 10_000_000, 0.25)
    );
    assert_eq!(
        parse("loss 10%").loss,
        Loss::Random {
            p: 0.1,
            correlation: 0.0
        }
    );
    assert_eq!(
        parse("loss 0.3% 25%").loss,
        Loss::Random {
            p: 0.003,
            correlation: 0.25
        }
    );
    assert_eq!(
        parse("loss gemodel 1% 10% 70% 0.1%").loss,
        Loss::GilbertElliott {
            p: 0.01,
            r: 0.1,
            one_minus_h: 0.7,
            one_minus_k: 0.001
        }
    );
    assert_eq!(
        parse("loss state 1% 10% 5% 20% 0.1%").loss,
        Loss::FourState {
            p13: 0.01,
            p31: 0.1,
            p32: 0.05,
            p23: 0.2,
            p14: 0.001
        }
    );
    let s = parse("reorder 25% 50%");
    assert_eq!((s.reorder, s.reorder_correlation), (Some((0.25, 1)), 0.5));
    assert_eq!(parse("reorder 25% gap 5").reorder, Some((0.25, 5)));
    assert_eq!(parse("limit 100").limit, 100);
    let s = parse("delay 20ms fifo");
    assert!(s.keep_order);
    assert_eq!(s.delay_ns, 20_000_000);
    assert_eq!(parse(""), LinkSpec::default());
    assert_eq!(parse("   ").to_string(), "");
}

#[test]
fn units() {
    assert_eq!(parse("delay 1s").delay_ns, 1_000_000_000);
    assert_eq!(parse("delay 250us").delay_ns, 250_000);
    assert_eq!(
        parse("delay 7").delay_ns,
        7_000,
        "bare time is microseconds as in tc"
    );
    assert_eq!(parse("delay 1.5ms").delay_ns, 1_500_000);
    assert_eq!(parse("rate 1gbit").rate_bps, Some(1_000_000_000));
    assert_eq!(parse("rate 64kbit").rate_bps, Some(64_000));
    assert_eq!(parse("rate 1kibit").rate_bps, Some(1024));
    assert_eq!(parse("rate 1000bit").rate_bps, Some(1000));
    assert_eq!(
        parse("rate 125kbps").rate_bps,
        Some(1_000_000),
        "bps is bytes/s as in tc"
    );
    let s = parse("rate 100mbit -4");
    assert_eq!(s.overhead_bytes, -4);
    assert_eq!(
        parse("loss 5").loss,
        Loss::Random {
            p: 0.05,
            correlation: 0.0
        }
    );
    assert_eq!(
        parse("loss gemodel 1%").loss,
        Loss::GilbertElliott {
            p: 0.01,
            r: 0.99,
            one_minus_h: 1.0,
            one_minus_k: 0.0
        }
    );
}

#[test]
fn errors_name_the_word_and_the_fix() {
    assert_eq!(
        error("loss 150%"),
        "loss 150%: a probability must be 0% to 100%"
    );
    let e = error("delay -5ms");
    assert!(e.starts_with("delay -5ms: "), "{e}");
    assert!(e.contains("negative"), "{e}");
    assert_eq!(
        error("jitter 5ms"),
        "unknown keyword 'jitter': expected delay, distribution, loss, duplicate, corrupt, reorder, gap, rate, limit, fifo, fixcsum, slot, ecn, aqm, trace"
    );
    for (input, word) in [
        ("delay", "delay"),
        ("delay 5parsecs", "5parsecs"),
        ("delay 5ms 1ms 120%", "120%"),
        ("distribution gauss", "gauss"),
        ("loss", "loss"),
        ("loss gemodel", "gemodel"),
        ("loss abc", "abc"),
        ("duplicate 101%", "101%"),
        ("corrupt -1%", "-1%"),
        ("reorder 25% gap 0", "gap 0"),
        ("gap 5", "gap 5"),
        ("rate 0bit", "0bit"),
        ("rate 10furlongs", "10furlongs"),
        ("limit lots", "lots"),
        ("duplicate 1% 25%", "25%"),
    ] {
        let e = error(input);
        assert!(e.contains(word), "{input:?} -> {e:?} should name {word:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
}

#[test]
fn display_is_canonical() {
    assert_eq!(LinkSpec::default().to_string(), "");
    assert_eq!(
        parse("rate 100mbit loss 5% delay 50ms 10ms distribution normal").to_string(),
        "delay 50ms 10ms distribution normal loss 5% rate 100mbit"
    );
    assert_eq!(
        parse("reorder 25% gap 5 delay 10ms").to_string(),
        "delay 10ms reorder 25% gap 5"
    );
    assert_eq!(
        parse("delay 20ms fifo limit 100").to_string(),
        "delay 20ms limit 100 fifo"
    );
}

fn prob() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(1.0),
        (0u32..=10_000).prop_map(|k| f64::from(k) / 10_000.0),
        (0.0f64..=1.0),
    ]
}

fn loss() -> impl Strategy<Value = Loss> {
    prop_oneof![
        Just(Loss::None),
        (prob(), prob()).prop_map(|(p, correlation)| Loss::Random { p, correlation }),
        (prob(), prob(), prob(), prob()).prop_map(|(p, r, one_minus_h, one_minus_k)| {
            Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            }
        }),
        (prob(), prob(), prob(), prob(), prob()).prop_map(|(a, b, p32, p23, c)| {
            // Keep p13 + p14 <= 1 and p31 + p32 <= 1.
            Loss::FourState {
                p13: a / 2.0,
                p31: b / 2.0,
                p32: p32 / 2.0,
                p23,
                p14: c / 2.0,
            }
        }),
    ]
}

/// Trace files for the generator, written once (the spec reads them when it parses).
fn traces() -> &'static [Trace] {
    static T: std::sync::OnceLock<Vec<Trace>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("sl-spec-traces-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        ["0\n1\n1\n3\n", "5\n10\n20\n", "1\n"]
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let f = dir.join(format!("t{i}.trace"));
                std::fs::write(&f, text).unwrap();
                Trace::load(f.to_str().unwrap()).unwrap()
            })
            .collect()
    })
}

fn aqm() -> impl Strategy<Value = Aqm> {
    let time = prop_oneof![Just(5_000_000u64), 1u64..1_000_000_000];
    prop_oneof![
        Just(Aqm::Fifo),
        (time.clone(), time.clone()).prop_map(|(target_ns, interval_ns)| Aqm::Codel(CodelConfig {
            target_ns,
            interval_ns
        })),
        (1u32..=65536, 256u32..=1 << 20, time.clone(), time.clone()).prop_map(
            |(flows, quantum, target_ns, interval_ns)| Aqm::FqCodel(FqCodelConfig {
                flows,
                quantum,
                codel: CodelConfig {
                    target_ns,
                    interval_ns
                }
            })
        ),
        (time.clone(), time, 0.0001f64..100.0, 0.0f64..100.0).prop_map(
            |(target_ns, tupdate_ns, alpha, beta)| Aqm::Pie(PieConfig {
                target_ns,
                tupdate_ns,
                alpha,
                beta
            })
        ),
    ]
}

fn slot() -> impl Strategy<Value = Option<Slot>> {
    let delay = prop_oneof![
        (0u64..1_000_000_000, 0u64..1_000_000_000).prop_map(|(a, b)| SlotDelay::Range {
            min_ns: a.min(b),
            max_ns: a.max(b)
        }),
        (0usize..4, 0u64..1_000_000_000, 1u64..1_000_000_000).prop_map(
            |(d, delay_ns, jitter_ns)| {
                SlotDelay::Distribution {
                    distribution: Distribution::ALL[d],
                    delay_ns,
                    jitter_ns,
                }
            }
        ),
    ];
    proptest::option::of(
        (
            delay,
            proptest::option::of(1u32..=i32::MAX as u32),
            proptest::option::of(1u32..=i32::MAX as u32),
        )
            .prop_map(|(delay, packets, bytes)| Slot {
                delay,
                packets,
                bytes,
            }),
    )
}

fn schedule() -> impl Strategy<Value = RateSchedule> {
    proptest::collection::vec((1u64..10_000_000_000, 1u64..1u64 << 45), 1..5).prop_map(|v| {
        let mut at = 0;
        let mut steps = vec![(0, v[0].1)];
        for (gap, r) in v {
            at += gap;
            steps.push((at, r));
        }
        RateSchedule::new(steps).unwrap()
    })
}

fn spec() -> impl Strategy<Value = LinkSpec> {
    (
        (0u64..10_000_000_000, 0u64..1_000_000_000, prob(), 0usize..4),
        loss(),
        (
            prob(),
            prob(),
            proptest::option::of((prob(), 1u32..100)),
            prob(),
        ),
        (
            proptest::option::of(1u64..1u64 << 45),
            -100i32..100,
            0usize..100_000,
            any::<bool>(),
        ),
        (
            0usize..3,
            schedule(),
            slot(),
            any::<bool>(),
            aqm(),
            0usize..3,
        ),
    )
        .prop_map(
            |(
                (delay, jitter, dcor, dist),
                loss,
                (dup, cor, reorder, rcor),
                (rate, ovh, limit, fifo),
                (capacity, sched, slot, ecn, aqm, trace),
            )| {
                // capacity: 0 the rate drawn (maybe none), 1 a schedule, 2 a trace.
                let mut rate = rate;
                if aqm != Aqm::Fifo && capacity == 0 && rate.is_none() {
                    rate = Some(1_000_000);
                }
                let (rate_bps, rate_schedule, trace) = match capacity {
                    0 => (rate, None, None),
                    1 => (None, Some(sched), None),
                    _ => (None, None, Some(traces()[trace].clone())),
                };
                let ecn = ecn && (loss != Loss::None || aqm != Aqm::Fifo);
                LinkSpec {
                    delay_ns: delay,
                    jitter_ns: jitter,
                    delay_correlation: dcor,
                    distribution: Distribution::ALL[dist],
                    loss,
                    duplicate: dup,
                    corrupt: cor,
                    reorder,
                    reorder_correlation: if reorder.is_some() { rcor } else { 0.0 },
                    overhead_bytes: if rate_bps.is_some() || rate_schedule.is_some() {
                        ovh
                    } else {
                        0
                    },
                    rate_bps,
                    rate_schedule,
                    limit,
                    keep_order: fifo,
                    fix_checksum: limit % 2 == 1,
                    slot,
                    ecn,
                    aqm,
                    trace,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn display_parses_back(s in spec()) {
        let text = s.to_string();
        let back: LinkSpec = text.parse().map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(&back, &s, "text {:?}", text);
        prop_assert_eq!(back.to_string(), text);
    }

    #[test]
    fn garbage_never_panics(s in "[a-z0-9%. -]{0,40}") {
        let _ = s.parse::<LinkSpec>();
    }
}

/// Every kind of error keeps its exact message (other crates' tests and users read them).
#[test]
fn error_messages_are_exact() {
    for (input, message) in [
        ("delay", "delay: expected a time after it, e.g. delay 50ms"),
        (
            "delay 5parsecs",
            "delay 5parsecs: unknown time unit; use ns, us, ms or s, e.g. 50ms",
        ),
        ("gap 5", "gap 5: gap needs reorder, e.g. reorder 25% gap 5"),
        (
            "distribution",
            "distribution: expected uniform, normal, pareto or paretonormal after it",
        ),
        (
            "loss",
            "loss: expected a percentage, gemodel or state after it, e.g. loss 5%",
        ),
        (
            "loss delay 5ms",
            "loss: expected a percentage, gemodel or state before 'delay', e.g. loss 5%",
        ),
        (
            "loss gemodel",
            "loss gemodel: expected p [r [1-h [1-k]]], e.g. loss gemodel 1% 10% 70% 0.1%",
        ),
        (
            "loss state",
            "loss state: expected p13 [p31 [p32 [p23 [p14]]]], e.g. loss state 1% 10% 5% 20% 0.1%",
        ),
        (
            "loss state 50% 50% 25% 20% 75%",
            "loss state: p13 + p14 and p31 + p32 must each be at most 100% (got 125% and 75%)",
        ),
    ] {
        assert_eq!(error(input), message, "{input:?}");
    }
}

/// Issue 16 item 14: a rate that overflows is too large (the largest accepted named), not
/// "not positive"; the largest accepted rate parses.
#[test]
fn a_huge_rate_is_too_large_and_the_limit_is_named() {
    for tok in [
        "99999999999999999999tbit",
        "1001tbit",
        "18446744073709551616bit",
    ] {
        let e = error(&format!("rate {tok}"));
        assert_eq!(
            e,
            format!("rate {tok}: too large: the largest rate accepted is 1000tbit (10^15 bit/s); omit rate for an unlimited link"),
        );
    }
    assert_eq!(
        parse("rate 1000tbit").rate_bps,
        Some(socklab_impair::spec::MAX_RATE_BPS)
    );
    assert!(error("rate 0bit").contains("must be positive"));
    assert!(
        error("rate -5mbit").contains("must be positive"),
        "{}",
        error("rate -5mbit")
    );
    assert!(error("rate nanbit").contains("not a rate"));
}

/// A trace file in a fresh directory: (its path, the directory to remove).
fn trace_file(name: &str, text: &str) -> (String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sl-spec-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(format!("{name}.trace"));
    std::fs::write(&f, text).unwrap();
    (f.to_str().unwrap().to_string(), dir)
}

/// Issue 19: netem's slot and ecn, socklab's aqm, trace and rate schedules parse and print in
/// the spec's syntax.
#[test]
fn new_keywords_parse_and_print() {
    let s = parse("slot 10ms 10ms packets 8");
    assert_eq!(
        s.slot,
        Some(Slot {
            delay: SlotDelay::Range {
                min_ns: 10_000_000,
                max_ns: 10_000_000
            },
            packets: Some(8),
            bytes: None
        })
    );
    assert_eq!(s.to_string(), "slot 10ms packets 8");
    assert_eq!(
        parse("slot 1ms 5ms bytes 3000 packets 0").to_string(),
        "slot 1ms 5ms bytes 3000"
    );
    let s = parse("slot distribution pareto 8ms 2ms packets 4");
    assert_eq!(
        s.slot.unwrap().delay,
        SlotDelay::Distribution {
            distribution: Distribution::Pareto,
            delay_ns: 8_000_000,
            jitter_ns: 2_000_000
        }
    );
    assert_eq!(s.to_string(), "slot distribution pareto 8ms 2ms packets 4");
    // The delay's distribution keyword still works beside slot's own.
    let s = parse("delay 10ms 2ms distribution normal slot distribution uniform 1ms 1ms");
    assert_eq!(s.distribution, Distribution::Normal);
    assert!(parse("loss 5% ecn").ecn);
    assert_eq!(parse("ecn loss 5%").to_string(), "loss 5% ecn");

    let s = parse("rate 20mbit limit 1000 aqm fq_codel");
    assert_eq!(s.aqm, Aqm::FqCodel(FqCodelConfig::default()));
    assert_eq!(s.to_string(), "rate 20mbit aqm fq_codel");
    assert_eq!(
        parse("rate 1mbit aqm codel target 10ms interval 200ms").aqm,
        Aqm::Codel(CodelConfig {
            target_ns: 10_000_000,
            interval_ns: 200_000_000
        })
    );
    assert_eq!(
        parse("aqm fq_codel flows 64 quantum 300 target 5ms rate 1mbit").to_string(),
        "rate 1mbit aqm fq_codel flows 64 quantum 300"
    );
    assert_eq!(
        parse("rate 1mbit aqm pie target 20ms alpha 0.25 beta 2 loss 1% ecn").to_string(),
        "loss 1% rate 1mbit ecn aqm pie target 20ms alpha 0.25 beta 2"
    );
    assert_eq!(parse("rate 1mbit aqm fifo"), parse("rate 1mbit"));
    // fifo after aqm NAME is the keyword again (jitter keeps order).
    assert!(parse("rate 1mbit aqm codel fifo").keep_order);

    let s = parse("rate 100mbit@0s 10mbit@5s 100mbit@10s delay 20ms");
    let steps = s.rate_schedule.as_ref().unwrap().steps().to_vec();
    assert_eq!(
        steps,
        [
            (0, 100_000_000),
            (5_000_000_000, 10_000_000),
            (10_000_000_000, 100_000_000)
        ]
    );
    assert_eq!(s.rate_bps, None);
    assert_eq!(
        s.to_string(),
        "delay 20ms rate 100mbit@0s 10mbit@5s 100mbit@10s"
    );
    assert_eq!(
        parse("rate 1mbit@0s 2mbit@500ms 20").to_string(),
        "rate 1mbit@0s 2mbit@500ms 20"
    );
    // One step at 0 is a constant rate; a later rate replaces a schedule.
    assert_eq!(parse("rate 5mbit@0s"), parse("rate 5mbit"));
    assert_eq!(
        parse("rate 1mbit@0s 2mbit@1s rate 3mbit"),
        parse("rate 3mbit")
    );

    let (path, dir) = trace_file("down", "1\n1\n2\n3\n");
    let s = parse(&format!("trace {path} delay 10ms aqm codel"));
    let t = s.trace.clone().unwrap();
    assert_eq!((t.path(), t.len(), t.period_ms()), (path.as_str(), 4, 3));
    let printed = s.to_string();
    assert_eq!(
        printed,
        format!(
            "delay 10ms aqm codel trace {path} blake3 {}",
            t.digest_hex()
        )
    );
    assert_eq!(parse(&printed), s);
    // A trace whose content changed since the spec was printed is refused.
    std::fs::write(&path, "1\n2\n").unwrap();
    let e = error(&printed);
    assert!(
        e.starts_with(&format!("trace {path}: its content changed: blake3 ")),
        "{e}"
    );
    assert!(e.contains("use the file that ran"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn new_keywords_refuse_bad_input_with_the_fix() {
    for (input, message) in [
        ("aqm", "aqm: expected a queue discipline (fifo, codel, fq_codel or pie) after it, e.g. aqm fq_codel"),
        ("rate 1mbit aqm red", "aqm red: unknown queue discipline; use fifo, codel, fq_codel or pie"),
        ("aqm codel", "aqm codel: a queue discipline needs a bottleneck to queue at: add rate RATE (or a rate schedule, or trace FILE), e.g. rate 20mbit aqm codel"),
        ("rate 1mbit aqm codel target", "aqm codel target: expected a time after it, e.g. aqm codel target 5ms"),
        ("rate 1mbit aqm codel target 0ms", "aqm codel target 0ms: must be longer than 0, e.g. 5ms"),
        ("rate 1mbit aqm codel flows 8", "aqm codel flows: codel has no parameter flows; it takes target and interval"),
        ("rate 1mbit aqm fq_codel flows 0", "aqm fq_codel flows 0: use 1 to 65536 flow queues, e.g. flows 1024"),
        ("rate 1mbit aqm fq_codel quantum 100", "aqm fq_codel quantum 100: use 256 to 1048576 bytes (as Linux), e.g. quantum 1514"),
        ("rate 1mbit aqm pie alpha 0", "aqm pie alpha 0: use more than 0 and at most 100 (1/s), e.g. 0.125"),
        ("rate 1mbit aqm pie beta x", "aqm pie beta x: not a number; write a weight in 1/s, e.g. 0.125"),
        ("target 5ms", "target: it belongs after an aqm, e.g. aqm codel target 5ms interval 100ms"),
        ("packets 8", "packets: it belongs after slot, e.g. slot 10ms packets 8"),
        ("ecn", "ecn: marks packets instead of dropping them, so it needs loss or an aqm, e.g. loss 5% ecn or rate 20mbit aqm codel ecn"),
        ("slot", "slot: expected a time after it, e.g. slot 10ms 20ms packets 8"),
        ("slot 10ms 5ms", "slot max 5ms: the longest gap must be at least the shortest (10ms)"),
        ("slot 10ms packets x", "slot packets x: use a whole number from 0 (no limit) to 2147483647, e.g. slot 10ms packets 8"),
        ("slot distribution normal 10ms 0ms", "slot jitter 0ms: must be positive (netem refuses 0), e.g. slot distribution normal 10ms 2ms; for fixed gaps write slot 10ms"),
        ("slot distribution gauss 1ms 1ms", "slot distribution gauss: unknown distribution; use uniform, normal, pareto or paretonormal"),
        ("rate 10mbit@5s", "rate 10mbit@5s: a rate schedule starts at 0s, e.g. rate 100mbit@0s 10mbit@5s"),
        ("rate 1mbit@0s 2mbit@5s 3mbit@5s", "rate 3mbit@5s: each step must come after the one before (5s)"),
        ("rate 1mbit@0s 2mbit@soon", "rate 2mbit@soon: the time of a step is written like 5s or 500ms, e.g. 10mbit@5s"),
        ("rate 1mbit@0s 0bit@1s", "rate 0bit: a rate must be positive; omit rate for an unlimited link"),
        ("trace", "trace: expected a file after it, e.g. trace ./verizon-lte-down.trace"),
    ] {
        assert_eq!(error(input), message, "{input:?}");
    }
    let e = error("trace /nonexistent/sl.trace");
    assert!(
        e.starts_with("trace /nonexistent/sl.trace: cannot read it: "),
        "{e}"
    );
    let (path, dir) = trace_file("bad", "3\n2\n");
    assert_eq!(
        error(&format!("trace {path}")),
        format!("trace {path}: line 2: 2 comes after 3: the timestamps must not decrease")
    );
    std::fs::write(&path, "1\n").unwrap();
    assert_eq!(
        error(&format!("trace {path} rate 1mbit")),
        "trace and rate: both set the bottleneck's capacity: use one"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
