use proptest::prelude::*;
use socklab_impair::{Distribution, LinkSpec, Loss};

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
        "unknown keyword 'jitter': expected delay, distribution, loss, duplicate, corrupt, reorder, gap, rate, limit, fifo, fixcsum"
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
    )
        .prop_map(
            |(
                (delay, jitter, dcor, dist),
                loss,
                (dup, cor, reorder, rcor),
                (rate, ovh, limit, fifo),
            )| {
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
                    rate_bps: rate,
                    overhead_bytes: if rate.is_some() { ovh } else { 0 },
                    limit,
                    keep_order: fifo,
                    fix_checksum: limit % 2 == 1,
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
