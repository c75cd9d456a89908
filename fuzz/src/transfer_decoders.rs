//! The decoders of the transfer protocol never panic on any bytes, fed at once or in two
//! pieces, and what they decode encodes back to the same bytes: the manifest
//! (`encode(decode(b)) == b`, as its module documents), control records within the encoder's
//! limits (detail text, Resume ranges) and TCP frames.
use socklab_transfer::control::{MAX_DETAIL, MAX_RESUME_RANGES};
use socklab_transfer::framing::{self, HEADER_LEN as FRAME_HEADER};
use socklab_transfer::manifest::HEADER_LEN as MANIFEST_HEADER;
use socklab_transfer::{Control, ControlDecoder, FrameDecoder, Manifest};

fn manifest(data: &[u8]) {
    match Manifest::encoded_len(data) {
        Ok(Some(len)) => assert!(data.len() >= MANIFEST_HEADER && len >= MANIFEST_HEADER),
        Ok(None) => assert!(data.len() < MANIFEST_HEADER),
        Err(_) => {}
    }
    if let Ok(m) = Manifest::decode(data) {
        assert_eq!(m.encode(), data);
        assert_eq!(Manifest::encoded_len(data).unwrap(), Some(data.len()));
    }
}

/// Decodes the control records of `pieces` (pushed one after the other); returns the messages
/// with the bytes of their records, and whether it stopped on an error.
fn control(pieces: &[&[u8]]) -> (Vec<(Control, Vec<u8>)>, bool) {
    let mut d = ControlDecoder::new();
    let all: Vec<u8> = pieces.concat();
    let mut pos = 0;
    let mut out = Vec::new();
    for p in pieces {
        d.push(p);
        loop {
            let before = d.buffered();
            match d.next_message() {
                Ok(Some(m)) => {
                    let used = before - d.buffered();
                    out.push((m, all[pos..pos + used].to_vec()));
                    pos += used;
                }
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    assert_eq!(d.buffered(), all.len() - pos);
    (out, false)
}

fn within_limits(m: &Control) -> bool {
    match m {
        Control::Resume { have, .. } => have.len() <= MAX_RESUME_RANGES,
        Control::Verdict { detail, .. } | Control::Abort { detail } => detail.len() <= MAX_DETAIL,
        Control::Done => true,
    }
}

fn frames(pieces: &[&[u8]]) -> (Vec<(u32, u64, Vec<u8>)>, bool) {
    let mut d = FrameDecoder::new();
    let mut out = Vec::new();
    for p in pieces {
        d.push(p);
        loop {
            match d.next_frame() {
                Ok(Some(f)) => {
                    assert!(f.offset.checked_add(f.data.len() as u64).is_some());
                    out.push((f.stream, f.offset, f.data.to_vec()));
                }
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    let _ = d.finish();
    (out, false)
}

/// One input of the target.
pub fn run(data: &[u8]) {
    manifest(data);
    let split = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let (a, b) = data.split_at(split);

    let (msgs, failed) = control(&[data]);
    let (msgs2, failed2) = control(&[a, b]);
    assert_eq!(msgs, msgs2, "control: a split changed the messages");
    assert_eq!(failed, failed2);
    for (m, record) in &msgs {
        if within_limits(m) {
            let mut again = Vec::new();
            m.encode(&mut again);
            assert_eq!(&again, record, "{m:?}");
        }
    }

    let (fs, failed) = frames(&[data]);
    let (fs2, failed2) = frames(&[a, b]);
    assert_eq!(fs, fs2, "frames: a split changed the frames");
    assert_eq!(failed, failed2);
    let mut pos = 0;
    for (stream, offset, payload) in &fs {
        let mut buf = vec![0u8; FRAME_HEADER + payload.len()];
        let n = framing::encode(*stream, *offset, payload, &mut buf).unwrap();
        assert_eq!(&buf[..n], &data[pos..pos + n]);
        pos += n;
    }
}
