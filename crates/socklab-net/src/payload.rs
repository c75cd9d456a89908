//! The bytes a bulk test sends: `nbufs` buffers of `bufsize` bytes, stored contiguously, filled
//! with a seeded pseudo-random pattern so that a strategy sending the wrong buffer, twice or out
//! of order is caught by the stream hash. The round starts on a page boundary.

use crate::aligned::AlignedBuf;

/// One round of send buffers.
#[derive(Debug, Clone)]
pub struct Payload {
    bytes: AlignedBuf,
    nbufs: usize,
    bufsize: usize,
}

impl Payload {
    /// Builds `nbufs × bufsize` bytes of pattern derived from `seed`.
    pub fn new(nbufs: usize, bufsize: usize, seed: u64) -> Payload {
        let len = nbufs * bufsize;
        let mut bytes = AlignedBuf::zeroed(len);
        let mut filled = 0;
        // xorshift64*: portable and deterministic.
        let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
        if x == 0 {
            x = 1;
        }
        let out = bytes.as_mut_slice();
        while filled < len {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            let take = (len - filled).min(8);
            out[filled..filled + take].copy_from_slice(&v[..take]);
            filled += take;
        }
        Payload {
            bytes,
            nbufs,
            bufsize,
        }
    }

    /// The whole round, contiguous.
    pub fn round(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// Buffer `i` of the round.
    pub fn buf(&self, i: usize) -> &[u8] {
        &self.bytes.as_slice()[i * self.bufsize..(i + 1) * self.bufsize]
    }

    /// Number of buffers per round.
    pub fn nbufs(&self) -> usize {
        self.nbufs
    }

    /// Bytes per buffer.
    pub fn bufsize(&self) -> usize {
        self.bufsize
    }

    /// Bytes per round.
    pub fn round_len(&self) -> usize {
        self.bytes.len()
    }

    /// The BLAKE3 hash of the stream made of `rounds` copies of the round.
    pub fn stream_hash(&self, rounds: u64) -> blake3::Hash {
        let mut h = blake3::Hasher::new();
        for _ in 0..rounds {
            h.update(self.bytes.as_slice());
        }
        h.finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_deterministic_and_not_constant() {
        let a = Payload::new(4, 10, 7);
        let b = Payload::new(4, 10, 7);
        assert_eq!(a.round(), b.round());
        assert_eq!(a.round_len(), 40);
        assert_ne!(a.buf(0), a.buf(1));
        assert_ne!(Payload::new(4, 10, 8).round(), a.round());
        assert_eq!(a.stream_hash(2), {
            let mut h = blake3::Hasher::new();
            h.update(a.round());
            h.update(a.round());
            h.finalize()
        });
    }
}
