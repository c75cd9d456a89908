//! A pcapng encoder (and the small reader its tests and socklab's use), pure: blocks are
//! appended to a `Vec<u8>`; the caller writes them. Little-endian sections; IP packets without
//! a link-layer header (`LINKTYPE_RAW`); nanosecond timestamps (`if_tsresol = 9`); one comment
//! per packet (`opt_comment`), which Wireshark shows and `tshark -e frame.comment` prints.
//!
//! The format: <https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-03.html>.

/// `LINKTYPE_RAW`: each packet is an IPv4 or IPv6 packet, as a TUN device carries them.
pub const LINKTYPE_RAW: u16 = 101;

/// Block types.
pub const SHB: u32 = 0x0A0D_0D0A;
/// Interface Description Block.
pub const IDB: u32 = 1;
/// Interface Statistics Block.
pub const ISB: u32 = 5;
/// Enhanced Packet Block.
pub const EPB: u32 = 6;

const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
const ISB_STARTTIME: u16 = 2;
const ISB_ENDTIME: u16 = 3;
const ISB_IFRECV: u16 = 4;
const ISB_IFDROP: u16 = 5;

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    // An option's length is 16 bits: a longer value (a huge comment) is cut.
    let value = &value[..value.len().min(0xfff0)];
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    body.resize(body.len() + pad4(value.len()), 0);
}

fn end_options(body: &mut Vec<u8>) {
    body.extend_from_slice(&OPT_END.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
}

/// Appends a block of `kind` whose body is written by `f`; returns its length.
fn block(out: &mut Vec<u8>, kind: u32, f: impl FnOnce(&mut Vec<u8>)) -> usize {
    let start = out.len();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    f(out);
    let len = (out.len() - start + 4) as u32;
    out.extend_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
    len as usize
}

/// A Section Header Block (version 1.0, section length unknown) naming the application.
pub fn section_header(out: &mut Vec<u8>, application: &str, comment: &str) -> usize {
    block(out, SHB, |b| {
        b.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        if !comment.is_empty() {
            option(b, OPT_COMMENT, comment.as_bytes());
        }
        option(b, SHB_USERAPPL, application.as_bytes());
        end_options(b);
    })
}

/// An Interface Description Block: raw IP, `snaplen`, nanosecond timestamps.
pub fn interface(out: &mut Vec<u8>, name: &str, description: &str, snaplen: u32) -> usize {
    block(out, IDB, |b| {
        b.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&snaplen.to_le_bytes());
        option(b, IF_NAME, name.as_bytes());
        if !description.is_empty() {
            option(b, IF_DESCRIPTION, description.as_bytes());
        }
        option(b, IF_TSRESOL, &[9]);
        end_options(b);
    })
}

fn timestamp(b: &mut Vec<u8>, ns: u64) {
    b.extend_from_slice(&((ns >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(ns as u32).to_le_bytes());
}

/// An Enhanced Packet Block on interface `iface`: `data` (already cut to the snap length) of a
/// packet `original_len` bytes long, at `ts_ns` (ns since the Unix epoch), with `comment`.
pub fn packet(
    out: &mut Vec<u8>,
    iface: u32,
    ts_ns: u64,
    data: &[u8],
    original_len: u32,
    comment: &str,
) -> usize {
    block(out, EPB, |b| {
        b.extend_from_slice(&iface.to_le_bytes());
        timestamp(b, ts_ns);
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&original_len.to_le_bytes());
        b.extend_from_slice(data);
        b.resize(b.len() + pad4(data.len()), 0);
        if !comment.is_empty() {
            option(b, OPT_COMMENT, comment.as_bytes());
        }
        end_options(b);
    })
}

/// The counts of an Interface Statistics Block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IfStats {
    /// First packet, ns since the Unix epoch.
    pub start_ns: u64,
    /// Last packet, ns since the Unix epoch.
    pub end_ns: u64,
    /// Packets seen (`isb_ifrecv`).
    pub received: u64,
    /// Packets seen but not in the file (`isb_ifdrop`).
    pub dropped: u64,
    /// Why (`opt_comment`).
    pub comment: String,
}

/// An Interface Statistics Block for interface `iface`, stamped `ts_ns`.
pub fn interface_stats(out: &mut Vec<u8>, iface: u32, ts_ns: u64, s: &IfStats) -> usize {
    block(out, ISB, |b| {
        b.extend_from_slice(&iface.to_le_bytes());
        timestamp(b, ts_ns);
        if !s.comment.is_empty() {
            option(b, OPT_COMMENT, s.comment.as_bytes());
        }
        let mut t = Vec::with_capacity(8);
        timestamp(&mut t, s.start_ns);
        option(b, ISB_STARTTIME, &t);
        t.clear();
        timestamp(&mut t, s.end_ns);
        option(b, ISB_ENDTIME, &t);
        option(b, ISB_IFRECV, &s.received.to_le_bytes());
        option(b, ISB_IFDROP, &s.dropped.to_le_bytes());
        end_options(b);
    })
}

/// One block read back by [`read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// A section header: its comment and application.
    Section {
        /// `opt_comment`.
        comment: Option<String>,
        /// `shb_userappl`.
        application: Option<String>,
    },
    /// An interface: its link type, snap length, name, description and timestamp resolution.
    Interface {
        /// Link type.
        linktype: u16,
        /// Snap length.
        snaplen: u32,
        /// `if_name`.
        name: Option<String>,
        /// `if_description`.
        description: Option<String>,
        /// `if_tsresol` (6, microseconds, when absent).
        tsresol: u8,
    },
    /// A packet.
    Packet {
        /// Interface number (in the order of the section's interface blocks).
        iface: u32,
        /// Timestamp in the interface's units.
        ts: u64,
        /// Captured bytes.
        data: Vec<u8>,
        /// Original length.
        original_len: u32,
        /// `opt_comment`.
        comment: Option<String>,
    },
    /// Interface statistics: interface, `isb_ifrecv`, `isb_ifdrop`, comment.
    Stats {
        /// Interface number.
        iface: u32,
        /// `isb_ifrecv`.
        received: Option<u64>,
        /// `isb_ifdrop`.
        dropped: Option<u64>,
        /// `opt_comment`.
        comment: Option<String>,
    },
    /// Any other block: its type.
    Other(u32),
}

/// Why a file is not readable pcapng (as [`read`] understands it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a little-endian pcapng file: {0}")]
pub struct ReadError(pub String);

fn options(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut v = Vec::new();
    while b.len() >= 4 {
        let code = u16::from_le_bytes([b[0], b[1]]);
        let len = usize::from(u16::from_le_bytes([b[2], b[3]]));
        if code == OPT_END || 4 + len > b.len() {
            break;
        }
        v.push((code, &b[4..4 + len]));
        b = &b[(4 + len + pad4(len)).min(b.len())..];
    }
    v
}

fn text(opts: &[(u16, &[u8])], code: u16) -> Option<String> {
    opts.iter()
        .find(|(c, _)| *c == code)
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
}

fn u64_opt(opts: &[(u16, &[u8])], code: u16) -> Option<u64> {
    opts.iter()
        .find(|(c, v)| *c == code && v.len() == 8)
        .map(|(_, v)| u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8])))
}

/// Reads every block of a little-endian pcapng file.
pub fn read(mut b: &[u8]) -> Result<Vec<Block>, ReadError> {
    let bad = |m: &str| ReadError(m.to_string());
    let mut out = Vec::new();
    let le32 = |s: &[u8], at: usize| u32::from_le_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]]);
    while !b.is_empty() {
        if b.len() < 12 {
            return Err(bad("a block is cut short"));
        }
        let kind = le32(b, 0);
        let len = le32(b, 4) as usize;
        if len < 12 || !len.is_multiple_of(4) || len > b.len() || le32(b, len - 4) as usize != len {
            return Err(bad("a block's length is wrong"));
        }
        let body = &b[8..len - 4];
        let blk = match kind {
            SHB => {
                if body.len() < 16 || le32(body, 0) != BYTE_ORDER_MAGIC {
                    return Err(bad("the section header's byte-order magic"));
                }
                let o = options(&body[16..]);
                Block::Section {
                    comment: text(&o, OPT_COMMENT),
                    application: text(&o, SHB_USERAPPL),
                }
            }
            IDB if body.len() >= 8 => {
                let o = options(&body[8..]);
                Block::Interface {
                    linktype: u16::from_le_bytes([body[0], body[1]]),
                    snaplen: le32(body, 4),
                    name: text(&o, IF_NAME),
                    description: text(&o, IF_DESCRIPTION),
                    tsresol: o
                        .iter()
                        .find(|(c, v)| *c == IF_TSRESOL && !v.is_empty())
                        .map_or(6, |(_, v)| v[0]),
                }
            }
            EPB if body.len() >= 20 => {
                let cap = le32(body, 12) as usize;
                if 20 + cap > body.len() {
                    return Err(bad("a packet's captured length is wrong"));
                }
                let o = options(&body[20 + cap + pad4(cap)..]);
                Block::Packet {
                    iface: le32(body, 0),
                    ts: (u64::from(le32(body, 4)) << 32) | u64::from(le32(body, 8)),
                    data: body[20..20 + cap].to_vec(),
                    original_len: le32(body, 16),
                    comment: text(&o, OPT_COMMENT),
                }
            }
            ISB if body.len() >= 12 => {
                let o = options(&body[12..]);
                Block::Stats {
                    iface: le32(body, 0),
                    received: u64_opt(&o, ISB_IFRECV),
                    dropped: u64_opt(&o, ISB_IFDROP),
                    comment: text(&o, OPT_COMMENT),
                }
            }
            IDB | EPB | ISB => return Err(bad("a block is too short for its type")),
            other => Block::Other(other),
        };
        out.push(blk);
        b = &b[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block byte by byte, built by hand from the specification.
    #[test]
    fn blocks_are_encoded_byte_exactly() {
        let mut v = Vec::new();
        let n = section_header(&mut v, "sl", "");
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            0x0A, 0x0D, 0x0D, 0x0A, 40, 0, 0, 0,          // type, length 40
            0x4D, 0x3C, 0x2B, 0x1A, 1, 0, 0, 0,           // magic, version 1.0
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // section length -1
            4, 0, 2, 0, b's', b'l', 0, 0,                 // shb_userappl "sl" + padding
            0, 0, 0, 0,                                   // opt_endofopt
            40, 0, 0, 0,
        ];
        assert_eq!(v, want);
        assert_eq!(n, 40);

        let mut v = Vec::new();
        interface(&mut v, "c2s", "", 128);
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            1, 0, 0, 0, 40, 0, 0, 0,
            101, 0, 0, 0, 128, 0, 0, 0,                   // LINKTYPE_RAW, reserved, snaplen
            2, 0, 3, 0, b'c', b'2', b's', 0,              // if_name
            9, 0, 1, 0, 9, 0, 0, 0,                       // if_tsresol = 9 (ns)
            0, 0, 0, 0,
            40, 0, 0, 0,
        ];
        assert_eq!(v, want);

        let mut v = Vec::new();
        packet(&mut v, 1, 0x1_0000_0002, &[0x45, 0, 0], 40, "drop");
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            6, 0, 0, 0, 48, 0, 0, 0,
            1, 0, 0, 0,                                   // interface 1
            1, 0, 0, 0, 2, 0, 0, 0,                       // timestamp high, low
            3, 0, 0, 0, 40, 0, 0, 0,                      // captured 3, original 40
            0x45, 0, 0, 0,                                // data + padding
            1, 0, 4, 0, b'd', b'r', b'o', b'p',           // opt_comment
            0, 0, 0, 0,
            48, 0, 0, 0,
        ];
        assert_eq!(v, want);
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut v = Vec::new();
        section_header(&mut v, "socklab 1", "a capture");
        interface(&mut v, "c2s", "client -> server", 65535);
        interface(&mut v, "s2c", "", 64);
        packet(
            &mut v,
            0,
            123_456_789,
            &[1, 2, 3, 4, 5],
            5,
            "c2s #1 dropped",
        );
        packet(&mut v, 1, 7, &[9; 64], 1500, "");
        interface_stats(
            &mut v,
            1,
            8,
            &IfStats {
                start_ns: 7,
                end_ns: 8,
                received: 10,
                dropped: 9,
                comment: "9 packets not captured".into(),
            },
        );
        let blocks = read(&v).unwrap();
        assert_eq!(
            blocks,
            vec![
                Block::Section {
                    comment: Some("a capture".into()),
                    application: Some("socklab 1".into())
                },
                Block::Interface {
                    linktype: 101,
                    snaplen: 65535,
                    name: Some("c2s".into()),
                    description: Some("client -> server".into()),
                    tsresol: 9
                },
                Block::Interface {
                    linktype: 101,
                    snaplen: 64,
                    name: Some("s2c".into()),
                    description: None,
                    tsresol: 9
                },
                Block::Packet {
                    iface: 0,
                    ts: 123_456_789,
                    data: vec![1, 2, 3, 4, 5],
                    original_len: 5,
                    comment: Some("c2s #1 dropped".into())
                },
                Block::Packet {
                    iface: 1,
                    ts: 7,
                    data: vec![9; 64],
                    original_len: 1500,
                    comment: None
                },
                Block::Stats {
                    iface: 1,
                    received: Some(10),
                    dropped: Some(9),
                    comment: Some("9 packets not captured".into())
                },
            ]
        );
        assert!(read(&v[..v.len() - 1]).is_err());
        assert!(read(b"garbage, not pcapng").is_err());
    }
}
