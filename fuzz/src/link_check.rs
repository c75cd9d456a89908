//! `netem check`'s probe datagrams (`socklab_link::check`): any bytes the receiver reads
//! are an intact datagram or refused without panicking; a datagram the sender fills parses to
//! its sequence number and send time; and the capacity phase's per-second counts take any
//! arrival and origin times (both come from datagrams) without panicking.
use socklab_link::capacity;
use socklab_link::check::{fill, parse};

/// One input of the target.
pub fn run(data: &[u8]) {
    let got = parse(data);
    if data.len() < 24 {
        assert_eq!(got, None);
    }
    let word = |i: usize| {
        data.get(i..i + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let (seq, t) = got.unwrap_or((word(0), word(8)));
    let mut buf = data.to_vec();
    buf.resize(data.len().max(24), 0);
    fill(&mut buf, seq, t);
    assert_eq!(parse(&buf), Some((seq, t)));
    // Arrivals from the input's words, against an origin from a datagram.
    let arrivals: Vec<u64> = (0..data.len() / 8).map(|i| word(i * 8)).collect();
    let seconds = u64::from(data.first().copied().unwrap_or(0) % 64);
    let bins = capacity::per_second(&arrivals, t, seconds);
    assert_eq!(bins.len() as u64, seconds);
    assert!(bins.iter().sum::<u64>() <= arrivals.len() as u64);
}
