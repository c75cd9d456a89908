//! The resume sidecar (`.NAME.sl-part.json`, read by `socklab_transfer::FileReceiver`
//! when a transfer of the same file starts again): any sidecar text, beside a correct partial
//! file, never panics; the ranges the receiver then claims (`Resume`) are sorted, disjoint and
//! inside both the file and the partial file; and sending the whole file still ends with the
//! verified file, whatever the sidecar said.
use socklab_transfer::{Control, FileReceiver, Manifest};

/// The file the target resumes: its name and content.
pub const NAME: &str = "f";

/// Its content: 3000 bytes.
pub fn content() -> Vec<u8> {
    (0..3000u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// One input of the target.
pub fn run(data: &[u8]) {
    let src = tempfile::tempdir().unwrap();
    let body = content();
    std::fs::write(src.path().join(NAME), &body).unwrap();
    let m = Manifest::from_paths(&[src.path().join(NAME)]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A correct partial file (as long as the input's first byte says, in 16-byte steps).
    let part = data
        .first()
        .map_or(0, |&b| usize::from(b) * 16)
        .min(body.len());
    std::fs::write(dir.path().join(format!(".{NAME}.sl-part")), &body[..part]).unwrap();
    std::fs::write(dir.path().join(format!(".{NAME}.sl-part.json")), data).unwrap();
    let mut rx =
        FileReceiver::with_limits(dir.path(), &super::transfer_receiver::limits()).unwrap();
    rx.on_chunk(0, 0, &m.encode()).unwrap();
    let mut answers = Vec::new();
    while let Some(c) = rx.poll_control() {
        answers.extend(c);
    }
    for msg in Control::decode_all(&answers).unwrap() {
        if let Control::Resume { have, .. } = msg {
            let mut last = 0;
            for (a, b) in have {
                assert!(
                    a >= last && a < b && b as usize <= part,
                    "{a}..{b} of {part}"
                );
                last = b;
            }
        }
    }
    for (i, c) in body.chunks(1000).enumerate() {
        rx.on_chunk(1, i as u64 * 1000, c).unwrap();
    }
    assert!(rx.is_done());
    let r = rx.report();
    assert!(r[0].ok, "{r:?}");
    drop(rx);
    assert_eq!(std::fs::read(dir.path().join(NAME)).unwrap(), body);
}
