//! socklab's pcapng reader never panics on any bytes, and a packet the encoder wrote reads back
//! as it was.
use socklab_link::pcapng::{self, Block};

/// One input of the target.
pub fn run(data: &[u8]) {
    let _ = pcapng::read(data);
    let comment = String::from_utf8_lossy(&data[..data.len().min(40)]).into_owned();
    let mut v = Vec::new();
    pcapng::section_header(&mut v, "fuzz", &comment);
    pcapng::interface(&mut v, "c2s", &comment, 65535);
    pcapng::packet(
        &mut v,
        0,
        data.len() as u64,
        data,
        data.len() as u32,
        &comment,
    );
    let blocks = pcapng::read(&v).expect("what the encoder wrote reads back");
    assert_eq!(
        blocks[2],
        Block::Packet {
            iface: 0,
            ts: data.len() as u64,
            data: data.to_vec(),
            original_len: data.len() as u32,
            comment: (!comment.is_empty()).then_some(comment),
        }
    );
}
