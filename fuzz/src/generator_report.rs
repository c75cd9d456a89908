//! What a load generator on another host sends back (`LOAD {json}`, read by
//! `socklab_lab::hosts::generators`): any line is read or refused without panicking, a bad
//! histogram is a one-line error, and what is read merges with itself (two generators that
//! sent the same) without panicking.
use socklab_lab::hosts::generators::{part, read_output};

/// One input of the target.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let Some(out) = read_output(line) else {
            continue;
        };
        let p = match part("h1", out) {
            Ok(p) => p,
            Err(e) => {
                assert!(!e.contains('\n'), "{e}");
                continue;
            }
        };
        let cfg = p.report.config.clone();
        let (merged, _) = socklab_net::load::merge(&cfg, &[p.clone(), p]);
        let _ = serde_json::to_string(&merged);
    }
}
