//! Trace files (Mahimahi's format, `socklab_impair::Trace`): any text parses or is refused with
//! a one-line error naming the file; a trace that parses repeats after its period, and the
//! first opportunity at or after any instant is at or after it, the one before it earlier.
use socklab_impair::Trace;

const MS: u64 = 1_000_000;

/// One input of the target.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let t = match Trace::from_text("f.trace", &text) {
        Ok(t) => t,
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("f.trace") && !m.contains('\n'), "{m}");
            return;
        }
    };
    let n = t.len() as u64;
    assert!(n > 0 && t.period_ms() > 0);
    assert!(t.mean_bps().is_finite() && t.mean_bps() > 0.0);
    for j in 0..n.min(64) {
        assert!(t.opportunity_ns(j) <= t.opportunity_ns(j + 1));
        assert_eq!(
            t.opportunity_ns(j + n),
            t.opportunity_ns(j) + t.period_ms() * MS,
            "the trace repeats after its period"
        );
    }
    // Instants around the period, and a few from the input (within a day).
    let period = t.period_ms() * MS;
    let mut at = vec![0, 1, period - 1, period, period + 1, 3 * period + MS / 2];
    at.extend(
        data.chunks(8)
            .take(8)
            .map(|c| c.iter().fold(0u64, |a, &b| a << 8 | u64::from(b)) % (86_400_000 * MS)),
    );
    for t_ns in at {
        let j = t.first_at_or_after(t_ns);
        assert!(t.opportunity_ns(j) >= t_ns, "{t_ns}");
        assert!(j == 0 || t.opportunity_ns(j - 1) < t_ns, "{t_ns} -> {j}");
        assert_eq!(t.opportunities_between(t_ns, t_ns), 0);
    }
}
