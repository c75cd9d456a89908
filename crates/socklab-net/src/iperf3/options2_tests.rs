//! Every option of an iperf3 client is in effect on the sink's side or refused (issue 27
//! part 1): the refusals the client reads as `IEUNIMP`, the pacing rate, the payload
//! pattern and the lines of the sink's output.

use super::options::{notes, payload_byte, tcp_pacing};
use super::proto::{unserved, Params};
use super::refusal::{code_for, Stage, IE_UNIMP};

/// iperf3 3.12's parameters (`send_parameters`) with `extra` spliced in.
fn params(extra: &str) -> Result<Params, String> {
    let base = r#""omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12""#;
    Params::parse(format!("{{{extra},{base}}}").as_bytes())
}

#[test]
fn options_the_sink_cannot_put_in_effect_are_refused_as_not_implemented() {
    for (extra, key) in [
        (r#""tcp":true,"MSS":1000"#, "`MSS`"),
        (r#""tcp":true,"flowlabel":5"#, "`flowlabel`"),
        (r#""tcp":true,"server_affinity":0"#, "`server_affinity`"),
        (
            r#""tcp":true,"reverse":true,"bandwidth":1000000,"burst":4"#,
            "`burst`",
        ),
        (
            r#""udp":true,"len":1400,"bandwidth":1000000,"omit":1"#,
            "`omit`",
        ),
        (
            r#""udp":true,"bandwidth":1000000,"window":200000"#,
            "`window`",
        ),
        (
            r#""udp":true,"reverse":true,"bandwidth":1000000,"dont_fragment":1"#,
            "`dont_fragment`",
        ),
        (
            r#""udp":true,"reverse":true,"bandwidth":1000000,"TOS":16"#,
            "`TOS`",
        ),
        (
            r#""udp":true,"reverse":true,"bandwidth":1000000,"fqrate":1000000"#,
            "`fqrate`",
        ),
    ] {
        // A duplicate key (`len`, `omit`) is an error for serde: build them apart.
        let json = if extra.contains("\"omit\"") || extra.contains("\"len\"") {
            format!(
                r#"{{{extra},"time":1,"num":0,"blockcount":0,"parallel":1,"pacing_timer":1000}}"#
            )
        } else {
            format!(
                r#"{{{extra},"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":1400,"pacing_timer":1000}}"#
            )
        };
        let why = Params::parse(json.as_bytes()).unwrap_err();
        assert!(
            why.contains(key) && why.contains("not served"),
            "{extra}: {why}"
        );
        assert_eq!(
            code_for(Stage::Handshake, &why),
            Some((IE_UNIMP, 0)),
            "{why}"
        );
    }
}

#[test]
fn options_in_effect_or_the_clients_own_are_accepted() {
    // 3.12 sends `pacing_timer` 1000 in every test: never a refusal by itself.
    for extra in [
        r#""tcp":true,"nodelay":true,"TOS":16,"dont_fragment":1"#,
        r#""tcp":true,"reverse":true,"bandwidth":8000000,"fqrate":16000000"#,
        r#""tcp":true,"bandwidth":1000000,"burst":4"#,
        r#""tcp":true,"repeating_payload":1,"reverse":true"#,
    ] {
        params(extra).unwrap_or_else(|e| panic!("{extra}: {e}"));
    }
    let why = params(r#""tcp":true,"TOS":256"#).unwrap_err();
    assert!(why.contains("TOS 256"), "{why}");
    assert_eq!(unserved(&params(r#""tcp":true"#).unwrap()), None);
}

#[test]
fn the_pacing_rate_is_the_lower_of_bandwidth_and_fqrate_in_bytes() {
    let p = params(r#""tcp":true,"reverse":true,"bandwidth":8000000,"fqrate":16000000"#).unwrap();
    assert_eq!(tcp_pacing(&p), Some(1_000_000));
    let p = params(r#""tcp":true,"reverse":true,"fqrate":800"#).unwrap();
    assert_eq!(tcp_pacing(&p), Some(100));
    assert_eq!(tcp_pacing(&params(r#""tcp":true"#).unwrap()), None);
    let text = notes(&params(r#""tcp":true,"reverse":true,"fqrate":800"#).unwrap()).join("\n");
    assert!(
        text.contains("pacing_timer 1000 µs") && text.contains("SO_MAX_PACING_RATE"),
        "{text}"
    );
}

#[test]
fn repeating_payload_is_iperf3s_digits() {
    let b: Vec<u8> = (0..23).map(|i| payload_byte(i, true)).collect();
    assert_eq!(&b, b"01234567890123456789012");
    assert_eq!(payload_byte(252, false), 1);
}
