//! The load generator's HTTP reply parser: any bytes, split anywhere, never panic; the split
//! does not change the outcome; a completed reply never claims more bytes than it was given.
use socklab_net::load::http::ReplyParser;

/// One input of the target.
pub fn run(data: &[u8]) {
    // First byte: where to split the rest.
    let Some((&cut, data)) = data.split_first() else {
        return;
    };
    let whole = ReplyParser::new().feed(data);
    if let Ok(Some(n)) = whole {
        assert!(n <= data.len());
    }
    let cut = usize::from(cut).min(data.len());
    let mut p = ReplyParser::new();
    let split = match p.feed(&data[..cut]) {
        Ok(None) => p.feed(&data[cut..]).map(|r| r.map(|n| n + cut)),
        other => other,
    };
    assert_eq!(whole, split);
}
