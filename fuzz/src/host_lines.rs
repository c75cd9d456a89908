//! What a host's probe prints to the controller (`socklab_lab::hosts::probe`): its facts line
//! and its answers to the clock questions. Any lines are read or refused without panicking;
//! the clock offset of any exchanges (the host's times are whatever it printed) never
//! overflows, and its error bound is half the shortest round trip.
use socklab_lab::hosts::probe::{clock_offset, clock_reply, Facts, FACTS};

/// One input of the target.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut samples = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(j) = line.strip_prefix(FACTS) {
            let _ = serde_json::from_str::<Facts>(j);
            continue;
        }
        // The question this line answers: the time it echoes (any number), read back 1 µs
        // per line later.
        let t1 = line
            .split_whitespace()
            .nth(1)
            .and_then(|x| x.parse::<i128>().ok())
            .unwrap_or(0);
        let t4 = t1.saturating_add(1_000 * i as i128);
        if let Some(s) = clock_reply(line, t1, t4) {
            assert_eq!((s.0, s.3), (t1, t4));
            samples.push(s);
        }
    }
    if let Some(c) = clock_offset(&samples) {
        assert!(!samples.is_empty());
        let _ = c.error_ns;
    }
}
