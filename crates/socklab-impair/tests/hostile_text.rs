//! Errors that quote what a user or a file wrote: escaped (no control byte reaches a
//! terminal) and cut to a readable length; a file that is not text is said to be so, not
//! quoted; a unit written apart from its number is named as such.

use socklab_impair::LinkSpec;

fn error(s: &str) -> String {
    match s.parse::<LinkSpec>() {
        Ok(spec) => panic!("{s:?} parsed as {spec:?}"),
        Err(e) => e.to_string(),
    }
}

/// No control character (C0, DEL, C1) in `msg`, and at most `max` bytes of it.
fn assert_printable(msg: &str, max: usize) {
    assert!(!msg.chars().any(char::is_control), "{msg:?}");
    assert!(msg.len() <= max, "{} bytes: {}", msg.len(), &msg[..300]);
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sl-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_16_mb_trace_line_is_quoted_short() {
    let dir = temp_dir("trace-long-line");
    let f = dir.join("long.trace");
    // Just under the 16 MiB a trace may have: read whole, then refused at its line 1.
    let mut text = "\x1b]0;owned\x07".to_string();
    text.push_str(&"9".repeat(16_000_000));
    text.push('\n');
    std::fs::write(&f, text).unwrap();
    let path = f.to_str().unwrap().to_string();
    let e = error(&format!("trace {path}"));
    std::fs::remove_dir_all(&dir).unwrap();
    // A control byte makes the file "not text"; without one, the line is quoted cut.
    assert!(e.contains("not a text file"), "{}", &e[..e.len().min(300)]);
    assert_printable(&e, 400);

    let dir = temp_dir("trace-long-digits");
    let f = dir.join("long.trace");
    std::fs::write(&f, format!("1\n{}x\n", "9".repeat(16_000_000))).unwrap();
    let e = error(&format!("trace {}", f.to_str().unwrap()));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.contains("line 2: '99999"), "{}", &e[..e.len().min(300)]);
    assert!(e.contains("(16000001 bytes)"), "{}", &e[..e.len().min(300)]);
    assert_printable(&e, 400);
}

#[test]
fn proc_self_environ_is_not_text_and_is_not_quoted() {
    let e = error("trace /proc/self/environ");
    assert!(e.contains("not a text file"), "{}", &e[..e.len().min(300)]);
    assert!(!e.contains('='), "quotes the environment: {e}");
    assert_printable(&e, 200);
}

#[test]
fn a_trace_line_with_control_bytes_is_not_text() {
    let dir = temp_dir("trace-esc");
    let f = dir.join("esc.trace");
    std::fs::write(&f, "1\n2\x1b[2J\x07\r\n").unwrap();
    let e = error(&format!("trace {}", f.to_str().unwrap()));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.contains("not a text file"), "{e}");
    assert_printable(&e, 300);
}

#[test]
fn words_of_a_spec_are_quoted_escaped_and_cut() {
    let hostile = format!("\x1b[31m{}\x07", "w".repeat(1 << 20));
    for spec in [
        hostile.clone(),
        format!("delay {hostile}"),
        format!("loss 1% distribution {hostile}"),
        format!("trace ./{hostile}"),
        format!("loss {hostile}"),
    ] {
        let e = error(&spec);
        assert_printable(&e, 600);
        assert!(e.contains("\\x1b[31m"), "{e}");
    }
}

#[test]
fn a_unit_written_apart_from_its_value_says_to_write_them_together() {
    assert_eq!(
        error("delay 50 ms"),
        "`delay 50 ms`: write the value and its unit together: `50ms`"
    );
    assert_eq!(
        error("delay 50ms 10 ms"),
        "`delay 50ms 10 ms`: write the value and its unit together: `10ms`"
    );
    assert_eq!(
        error("loss 5 %"),
        "`loss 5 %`: write the value and its unit together: `5%`"
    );
    assert_eq!(
        error("rate 100 mbit"),
        "`rate 100 mbit`: write the value and its unit together: `100mbit`"
    );
    // A word that is no unit stays an unknown keyword.
    assert!(error("delay 50 jitter").starts_with("unknown keyword 'jitter'"));
    assert!(error("ms").starts_with("unknown keyword 'ms'"));
}
