//! The TCP framing of chunks: `[stream u32 LE][offset u64 LE][len u32 LE][data]`.

use std::io::{self, Read};

use super::TransferError;

/// Bytes of a frame header.
pub const HEADER_LEN: usize = 16;
/// Largest `len` a decoder accepts.
pub const MAX_FRAME_DATA: usize = 16 << 20;

/// Writes a frame header into `out`.
pub fn put_header(out: &mut [u8; HEADER_LEN], stream: u32, offset: u64, len: u32) {
    out[0..4].copy_from_slice(&stream.to_le_bytes());
    out[4..12].copy_from_slice(&offset.to_le_bytes());
    out[12..16].copy_from_slice(&len.to_le_bytes());
}

/// Encodes one frame into `out`; returns its length. Fails when `data` exceeds
/// [`MAX_FRAME_DATA`] or `out` is too small.
pub fn encode(
    stream: u32,
    offset: u64,
    data: &[u8],
    out: &mut [u8],
) -> Result<usize, TransferError> {
    if data.len() > MAX_FRAME_DATA {
        return Err(TransferError::Invalid(format!(
            "a frame carries at most {MAX_FRAME_DATA} bytes, not {}",
            data.len()
        )));
    }
    let n = HEADER_LEN + data.len();
    if out.len() < n {
        return Err(TransferError::Invalid(format!(
            "frame of {n} bytes does not fit a {}-byte buffer",
            out.len()
        )));
    }
    let (h, rest) = out.split_at_mut(HEADER_LEN);
    put_header(
        h.try_into().expect("HEADER_LEN bytes"),
        stream,
        offset,
        data.len() as u32,
    );
    rest[..data.len()].copy_from_slice(data);
    Ok(n)
}

/// One decoded frame, borrowed from the decoder's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Stream number.
    pub stream: u32,
    /// Offset of `data` in the stream.
    pub offset: u64,
    /// The chunk.
    pub data: &'a [u8],
}

/// Splits a byte stream into frames as bytes arrive. Never panics on any input; a frame longer
/// than [`MAX_FRAME_DATA`] or whose end passes 2^64 is an error.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// Moves the undecoded bytes to the front and makes room for `more` bytes after them.
    fn make_room(&mut self, more: usize) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < self.end + more {
            self.buf.resize(self.end + more, 0);
        }
    }

    /// Appends bytes of the stream.
    pub fn push(&mut self, data: &[u8]) {
        self.make_room(data.len());
        self.buf[self.end..self.end + data.len()].copy_from_slice(data);
        self.end += data.len();
    }

    /// Reads once from `r` straight into the buffer (at most `read_size` bytes, fewer when the
    /// frame at the front needs fewer). Returns what `read` returned (0 at end of stream).
    ///
    /// The buffer grows only with bytes that arrived: a header announcing a 16 MiB frame
    /// costs 16 MiB of memory only once the peer has sent them.
    pub fn read_from<R: Read + ?Sized>(
        &mut self,
        r: &mut R,
        read_size: usize,
    ) -> io::Result<usize> {
        let want = read_size
            .max(self.missing().min(read_size + HEADER_LEN))
            .max(1);
        self.make_room(want);
        let n = r.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Bytes still needed to complete the frame at the front (0 if unknown or complete).
    fn missing(&self) -> usize {
        let avail = self.end - self.start;
        if avail < HEADER_LEN {
            return HEADER_LEN - avail;
        }
        let h = &self.buf[self.start..self.start + HEADER_LEN];
        let len = u32::from_le_bytes([h[12], h[13], h[14], h[15]]) as usize;
        if len > MAX_FRAME_DATA {
            return 0;
        }
        (HEADER_LEN + len).saturating_sub(avail)
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Memory the decoder holds (its buffer's capacity).
    pub fn held(&self) -> usize {
        self.buf.capacity()
    }

    /// The next complete frame, if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, TransferError> {
        let avail = self.end - self.start;
        if avail < HEADER_LEN {
            return Ok(None);
        }
        let h = &self.buf[self.start..self.start + HEADER_LEN];
        let stream = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let offset = u64::from_le_bytes([h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11]]);
        let len = u32::from_le_bytes([h[12], h[13], h[14], h[15]]) as usize;
        if len > MAX_FRAME_DATA {
            return Err(TransferError::Protocol(format!(
                "frame of {len} bytes on stream {stream} exceeds the {} MiB limit",
                MAX_FRAME_DATA >> 20
            )));
        }
        if offset.checked_add(len as u64).is_none() {
            return Err(TransferError::Protocol(format!(
                "frame at offset {offset} of {len} bytes on stream {stream} passes 2^64"
            )));
        }
        if avail < HEADER_LEN + len {
            return Ok(None);
        }
        let data_at = self.start + HEADER_LEN;
        self.start = data_at + len;
        if self.start == self.end {
            // Everything consumed: the next bytes go to the front without a copy.
            let (s, e) = (data_at, data_at + len);
            self.start = 0;
            self.end = 0;
            return Ok(Some(Frame {
                stream,
                offset,
                data: &self.buf[s..e],
            }));
        }
        Ok(Some(Frame {
            stream,
            offset,
            data: &self.buf[data_at..data_at + len],
        }))
    }

    /// At end of stream: an error if a partial frame is left.
    pub fn finish(&self) -> Result<(), TransferError> {
        match self.buffered() {
            0 => Ok(()),
            n => Err(TransferError::Protocol(format!(
                "the stream ended inside a frame ({n} bytes of it arrived)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;
    use proptest::prelude::*;

    #[test]
    fn transfer_frames_round_trip_over_any_split() {
        let mut rng = Rng(3);
        let frames: Vec<(u32, u64, Vec<u8>)> = (0..40)
            .map(|i| {
                let n = rng.below(3000) as usize;
                (i % 5, rng.next_u64() >> 8, rng.bytes(n))
            })
            .collect();
        let mut wire = Vec::new();
        for (s, o, d) in &frames {
            let mut buf = vec![0u8; HEADER_LEN + d.len()];
            let n = encode(*s, *o, d, &mut buf).unwrap();
            wire.extend_from_slice(&buf[..n]);
        }
        for _ in 0..20 {
            let mut dec = FrameDecoder::new();
            let mut got = Vec::new();
            let mut pos = 0;
            while pos < wire.len() {
                let n = (1 + rng.below(5000) as usize).min(wire.len() - pos);
                if rng.below(2) == 0 {
                    dec.push(&wire[pos..pos + n]);
                } else {
                    let mut r = &wire[pos..pos + n];
                    let k = dec.read_from(&mut r, n).unwrap();
                    assert_eq!(k, n);
                }
                pos += n;
                while let Some(f) = dec.next_frame().unwrap() {
                    got.push((f.stream, f.offset, f.data.to_vec()));
                }
            }
            dec.finish().unwrap();
            assert_eq!(got, frames);
        }
    }

    #[test]
    fn transfer_frames_reject_oversize_and_truncation() {
        let mut dec = FrameDecoder::new();
        let mut h = [0u8; HEADER_LEN];
        put_header(&mut h, 1, 0, (MAX_FRAME_DATA + 1) as u32);
        dec.push(&h);
        let e = dec.next_frame().unwrap_err().to_string();
        assert!(e.contains("exceeds the 16 MiB limit"), "{e}");
        let mut dec = FrameDecoder::new();
        put_header(&mut h, 1, u64::MAX, 2);
        dec.push(&h);
        assert!(dec.next_frame().unwrap_err().to_string().contains("2^64"));
        let mut dec = FrameDecoder::new();
        put_header(&mut h, 1, 0, 10);
        dec.push(&h);
        dec.push(&[1, 2, 3]);
        assert!(dec.next_frame().unwrap().is_none());
        assert!(dec
            .finish()
            .unwrap_err()
            .to_string()
            .contains("inside a frame"));
        assert!(encode(0, 0, &[1, 2], &mut [0u8; 17]).is_err());
    }

    /// Issue 16 item 2: a header that announces a 16 MiB frame followed by one byte must not
    /// make the decoder allocate (and touch) 16 MiB; it grows with bytes that arrive.
    #[test]
    fn transfer_a_frame_announced_large_costs_memory_only_as_it_arrives() {
        let mut wire = vec![0u8; HEADER_LEN];
        put_header(
            (&mut wire[..]).try_into().unwrap(),
            1,
            0,
            MAX_FRAME_DATA as u32,
        );
        wire.push(9);
        let mut dec = FrameDecoder::new();
        let mut r = &wire[..];
        while dec.read_from(&mut r, 256 * 1024).unwrap() > 0 {}
        assert_eq!(dec.buffered(), HEADER_LEN + 1);
        assert!(dec.next_frame().unwrap().is_none());
        assert!(dec.held() <= 512 * 1024, "holds {} bytes", dec.held());
        // The whole frame still decodes when it arrives.
        let rest = vec![5u8; MAX_FRAME_DATA - 1];
        let mut r = &rest[..];
        while dec.read_from(&mut r, 256 * 1024).unwrap() > 0 {}
        let f = dec.next_frame().unwrap().unwrap();
        assert_eq!((f.stream, f.data.len(), f.data[0]), (1, MAX_FRAME_DATA, 9));
    }

    proptest! {
        #[test]
        fn transfer_frame_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512), cut in 0usize..512) {
            let mut dec = FrameDecoder::new();
            let cut = cut.min(bytes.len());
            for part in [&bytes[..cut], &bytes[cut..]] {
                dec.push(part);
                while let Ok(Some(f)) = dec.next_frame() {
                    prop_assert!(f.data.len() <= MAX_FRAME_DATA);
                }
            }
            let _ = dec.finish();
        }
    }
}
