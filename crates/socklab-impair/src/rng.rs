//! The crate's own portable PRNG: xoshiro256** seeded through splitmix64.
//!
//! Implemented here (not taken from a crate) so that a seed reproduces the same
//! impairment sequence across crate versions, platforms and toolchains.

/// xoshiro256** (Blackman & Vigna), state seeded from a `u64` with splitmix64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

/// One step of splitmix64: advances `state` and returns the next output.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose whole output stream is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// The next 32 random bits (the high half of [`Rng::next_u64`]).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A uniform `f64` in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A value in `0..n` (multiply-shift; `n == 0` returns 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// netem's correlated random source (`get_crandom`): each output mixes a fresh
/// 32-bit random value with the previous output, weighted by `rho`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CorrelatedRandom {
    rho: u32,
    last: u32,
}

impl CorrelatedRandom {
    /// `correlation` in `[0, 1]`; 0 gives independent values.
    pub fn new(correlation: f64) -> CorrelatedRandom {
        CorrelatedRandom {
            rho: prob_to_u32(correlation),
            last: 0,
        }
    }

    /// The next (possibly correlated) 32-bit value, exactly as netem computes it.
    pub fn next(&mut self, rng: &mut Rng) -> u32 {
        if self.rho == 0 {
            return rng.next_u32();
        }
        let value = u64::from(rng.next_u32());
        let rho = u64::from(self.rho) + 1;
        let answer = ((value * ((1u64 << 32) - rho) + u64::from(self.last) * rho) >> 32) as u32;
        self.last = answer;
        answer
    }
}

/// A probability in `[0, 1]` scaled to netem's `u32` fixed point.
pub fn prob_to_u32(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * f64::from(u32::MAX)).round() as u32
}

/// netem's Bernoulli test: true with probability `p` (never when `p == 0`).
pub fn chance(p_u32: u32, rnd: u32) -> bool {
    p_u32 != 0 && p_u32 >= rnd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // Reference outputs of splitmix64 seeded with 0 (Vigna's splitmix64.c).
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn seeds_reproduce_and_differ() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let va: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn f64_and_below_in_range() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            assert!(r.below(10) < 10);
        }
    }
}
