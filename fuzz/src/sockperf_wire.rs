//! `socklab_net::sockperf::wire` (issue 27 part 3): any bytes parse as a header or are refused
//! without panicking; a header that parses is rebuilt byte for byte; a datagram is answered only
//! when it asks, with the client bit cleared and nothing else changed; and the TCP responder,
//! fed the input in two pieces cut anywhere, answers exactly as when fed it whole and never
//! holds more than one message.
use socklab_net::sockperf::wire::{
    answer_datagram, Header, Responder, FLAG_CLIENT, HEADER_LEN, MAX_TCP_MESSAGE, MAX_UDP_MESSAGE,
};

pub fn run(data: &[u8]) {
    if let Ok(h) = Header::parse(data, MAX_TCP_MESSAGE) {
        assert!((HEADER_LEN..=MAX_TCP_MESSAGE).contains(&(h.len as usize)));
        let mut back = [0u8; HEADER_LEN];
        h.write(&mut back);
        assert_eq!(back, data[..HEADER_LEN]);
    }
    let mut d = data.to_vec();
    if let Ok(answer) = answer_datagram(&mut d) {
        assert!(data.len() <= MAX_UDP_MESSAGE);
        if answer {
            assert_eq!(d[9], data[9] & !(FLAG_CLIENT as u8));
            assert_eq!(d[..9], data[..9]);
            assert_eq!(d[10..], data[10..]);
        } else {
            assert_eq!(d, data);
        }
    }
    // A small limit, so that short inputs hold several messages and oversized ones.
    let max = 64;
    let mut whole = Responder::new(max);
    let mut out_whole = Vec::new();
    let r_whole = whole.feed(data, &mut out_whole);
    let cut = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let mut split = Responder::new(max);
    let mut out_split = Vec::new();
    let r_split = split
        .feed(&data[..cut], &mut out_split)
        .and_then(|()| split.feed(&data[cut..], &mut out_split));
    assert_eq!(r_whole, r_split);
    assert_eq!(out_whole, out_split);
    assert!(out_whole.len() <= data.len());
    assert_eq!(
        (whole.messages, whole.replies),
        (split.messages, split.replies)
    );
}
