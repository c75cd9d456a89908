//! rrul's latency probes (`socklab_net::rrul`): any answer the prober reads (a UDP datagram of
//! any size, or 64-byte pieces of the TCP stream) is one of its probes or refused without
//! panicking; a probe it built reads back as its sequence number; and the log it keeps (any
//! answers, strays and duplicates included) gives phase statistics without panicking.
use std::time::Duration;

use socklab_net::rrul::log::{added, ProbeLog};
use socklab_net::rrul::probe::{probe, seq_of, PROBE_SIZE};

/// One input of the target.
pub fn run(data: &[u8]) {
    let mut log = ProbeLog::default();
    let sent = data.first().map_or(0, |&b| usize::from(b % 32));
    for k in 0..sent {
        let seq = log.sent(Duration::from_millis(10 * k as u64));
        assert_eq!(seq_of(&probe(seq)), Some(seq));
    }
    // The whole input as one datagram, then the rest after the first byte as the TCP stream's
    // 64-byte pieces.
    let mut answers = vec![data];
    answers.extend(data.get(1..).unwrap_or_default().chunks_exact(PROBE_SIZE));
    let mut matched = 0;
    for (i, a) in answers.iter().enumerate() {
        if a.len() != PROBE_SIZE {
            assert_eq!(seq_of(a), None);
        }
        if let Some(seq) = seq_of(a) {
            matched += usize::from(log.answered(seq, Duration::from_millis(5 * i as u64)));
        }
    }
    assert!(matched <= sent);
    assert_eq!(log.outstanding(), sent - matched);
    let p = log.phase(
        Duration::ZERO,
        Duration::from_secs(1),
        Duration::from_millis(50),
        data.len().is_multiple_of(2),
    );
    assert_eq!(p.sent as usize, sent);
    assert!(p.missing + p.late <= p.sent);
    for q in [0.0, 0.5, 0.99, 1.0] {
        if let Some(ms) = p.quantile_ms(q) {
            assert!(ms.is_finite() && ms >= 0.0);
        }
    }
    let _ = p.lost_pct(true);
    let _ = added(p.quantile_ms(0.5), p.quantile_ms(0.99));
}
