//! The mapper: values → fixed keys and axes, pairs, sweeps, modes.

use super::*;
use crate::model::params::Preset;
use crate::workload::{bulk, udp};

fn key(name: &str) -> Key {
    *bulk::KEYS.iter().find(|k| k.name == name).unwrap()
}

#[test]
fn one_value_is_fixed_several_an_axis_in_the_order_given() {
    let given = [
        Given::new(key("strategy"), ["write", "writev"]),
        Given::new(key("cc"), ["cubic"]),
        Given::new(key("streams"), ["1", "2", "4"]),
    ];
    let g = group("bulk", &given, &Rules::default()).unwrap();
    assert_eq!(g.kind, "bulk");
    assert_eq!(g.fixed, Params::new().with("cc", "cubic"));
    let keys: Vec<_> = g.axes.iter().map(|a| a.keys.join("+")).collect();
    assert_eq!(keys, ["strategy", "streams"]);
    assert_eq!(g.expand().len(), 6);
    assert_eq!(g.expand()[1].get("streams"), Some("2"));
}

#[test]
fn a_pair_is_zipped_unless_crossed_and_unequal_lists_name_both_flags() {
    let given = [
        Given::new(key("nbufs"), ["15", "30"]),
        Given::new(key("bufsize"), ["100", "50"]),
        Given::new(key("cc"), ["cubic", "bbr"]),
    ];
    let pair = Some(("nbufs", "bufsize"));
    let zipped = group(
        "bulk",
        &given,
        &Rules {
            pair,
            ..Rules::default()
        },
    )
    .unwrap();
    assert_eq!(zipped.axes.len(), 2);
    assert_eq!(zipped.axes[0].keys, ["cc"]);
    assert_eq!(zipped.axes[1].keys, ["nbufs", "bufsize"]);
    assert_eq!(zipped.expand().len(), 4);
    let crossed = Rules {
        pair,
        cross: true,
        ..Rules::default()
    };
    assert_eq!(group("bulk", &given, &crossed).unwrap().expand().len(), 8);
    let unequal = [
        Given::new(key("nbufs"), ["15", "30"]),
        Given::new(key("bufsize"), ["100", "50", "25"]),
    ];
    let e = group(
        "bulk",
        &unequal,
        &Rules {
            pair,
            ..Rules::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("--nbufs/--bufsize: "), "{e}");
    assert!(
        e.contains("nbufs has 2, bufsize has 3") && e.contains("`cross`"),
        "{e}"
    );
}

#[test]
fn a_sweep_replaces_its_key_and_prints_sizes_with_suffixes() {
    let sweeps = ["bufsize=1K..8K".to_string()];
    let given = [
        Given::new(key("bufsize"), ["64K"]),
        Given::new(key("nbufs"), ["1", "2"]),
    ];
    let rules = Rules {
        sweeps: &sweeps,
        pair: Some(("nbufs", "bufsize")),
        cross: false,
    };
    let g = group("bulk", &given, &rules).unwrap();
    assert_eq!(g.fixed.get("bufsize"), None);
    assert_eq!(g.axes.len(), 2);
    assert_eq!(g.axes[0].keys, ["nbufs"]);
    assert_eq!(g.axes[1].keys, ["bufsize"]);
    let vals: Vec<_> = g.axes[1].points.iter().map(|p| p[0].clone()).collect();
    assert_eq!(vals, ["1K", "2K", "4K", "8K"]);
}

#[test]
fn sweeps_step_by_factor_or_sum_and_refuse_bad_ranges() {
    let keys = bulk::KEYS;
    let (k, v) = sweep_values("nbufs=10..40:+10", keys).unwrap();
    assert_eq!(
        (k.as_str(), v),
        (
            "nbufs",
            vec!["10", "20", "30", "40"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    let (_, v) = sweep_values("nbufs=1..100:x10", keys).unwrap();
    assert_eq!(v, ["1", "10", "100"]);
    let (k, v) = sweep_values("Read-Size=1K..2K", keys).unwrap();
    assert_eq!((k.as_str(), v.len()), ("read_size", 2));
    assert_eq!(v[1], "2K");
    let (_, v) = sweep_values("size=1024..2048", udp::KEYS).unwrap();
    assert_eq!(v, ["1K", "2K"]);
    for (spec, why) in [
        ("bufsize=9K..1K", "not run backwards"),
        ("bufsize", "missing '='"),
        ("bufsize=1K", "missing '..'"),
        ("nbufs=1..9:x1", "the factor must be 2 or more"),
        ("nbufs=1..9:+0", "the step must be 1 or more"),
        ("nbufs=1..9:*2", "the step is :xFACTOR or :+STEP"),
        ("nbufs=1..5000:+1", "more than 1000 values"),
    ] {
        let e = sweep_values(spec, keys).unwrap_err().to_string();
        assert!(e.starts_with(&format!("`sweep` '{spec}': ")), "{e}");
        assert!(e.contains(why) && e.contains("write KEY=FROM..TO"), "{e}");
    }
}

#[test]
fn a_key_outside_the_mode_is_found_by_its_descriptor() {
    const TCP_ONLY: Key = Key::new("nodelay", "false", "TCP_NODELAY").modes(Modes::TCP);
    const BOTH: Key = Key::new("duration", "2s", "time");
    let given = [Given::new(BOTH, ["1s"]), Given::new(TCP_ONLY, ["true"])];
    assert_eq!(outside_mode(&given, Modes::TCP), None);
    let out = outside_mode(&given, Modes::UDP).unwrap();
    assert_eq!(flag_of(&out.key), "--nodelay");
    const REV: &[Preset] = &[Preset::new("reverse", "down", "the sink sends")];
    const DIR: Key = Key::new("direction", "up", "which way")
        .presets(REV)
        .modes(Modes::TCP);
    let rev = [Given::preset(DIR, &REV[0])];
    assert_eq!(outside_mode(&rev, Modes::UDP).unwrap().flag, "--reverse");
    assert_eq!(rev[0].values, ["down"]);
    // A preset of a list key may set an axis: `--tls` is the cells tls=off and tls=on.
    let tls = Given::preset(
        crate::workload::bulk::tls::TLS,
        &crate::workload::bulk::tls::TLS.presets[0],
    );
    assert_eq!(
        (tls.flag.as_str(), &tls.values[..]),
        ("--tls", &["off".to_string(), "on".to_string()][..])
    );
}

#[test]
fn orders_parse_and_a_bad_one_names_the_choices() {
    assert_eq!(parse_order("random", 7).unwrap(), Order::Random(7));
    assert_eq!(parse_order("sequential", 1).unwrap(), Order::Sequential);
    let e = parse_order("shuffled", 1).unwrap_err().to_string();
    assert_eq!(
        e,
        "`order` 'shuffled': choose interleaved, random or sequential"
    );
}

#[test]
fn transfer_has_a_group_per_protocol_and_tcp_cc_varies_for_tcp_only() {
    use crate::workload::transfer::{PROTO, TCP_CC};
    let given = vec![
        Given::new(PROTO, ["tcp", "rudp", "tcp"]),
        Given::new(TCP_CC, ["cubic", "bbr"]),
    ];
    let groups = transfer_groups(&given).unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].fixed.get("proto"), Some("tcp"));
    assert_eq!(groups[0].axes.len(), 1);
    assert_eq!(groups[1].fixed.get("proto"), Some("rudp"));
    assert!(groups[1].axes.is_empty());
    assert_eq!(groups[1].fixed.get("tcp_cc"), None);
    let defaults = transfer_groups(&[]).unwrap();
    assert_eq!(defaults.len(), 1);
    assert_eq!(defaults[0].fixed.get("tcp_cc"), Some("cubic"));
}
