//! Deterministic key generators for experiments, tests and benchmarks.
//!
//! Pure functions of a seed, so the same seed gives the same keys on every
//! machine (the generator is splitmix64, fixed here, not a library's RNG
//! whose stream could change between versions).

/// splitmix64: a small, fast, well-mixed 64-bit generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64-bit value.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// Random short strings, standing in for the "random short strings" of Igor
/// Ribeiro Sucupira's posts "Consistent hashing for Mnesia fragments"
/// (2009), which do not say their length or alphabet: here length 5 to 15,
/// over `a`–`z` and `0`–`9`.
///
/// ```
/// let mut g = fraghash::keys::ShortKeys::new(7);
/// let mut buf = Vec::new();
/// g.next_into(&mut buf);
/// assert!((5..=15).contains(&buf.len()));
/// assert!(buf.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
/// ```
#[derive(Debug, Clone)]
pub struct ShortKeys {
    rng: SplitMix64,
}

impl ShortKeys {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        ShortKeys {
            rng: SplitMix64::new(seed),
        }
    }

    /// Writes the next key into `buf` (cleared first), without allocating
    /// once `buf` has grown to 15 bytes.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) {
        buf.clear();
        let len = 5 + (self.rng.next() % 11) as usize;
        // 36^12 < 2^64: twelve base-36 digits per draw, bias below 2^-10.
        let mut digits = self.rng.next();
        for i in 0..len {
            if i == 12 {
                digits = self.rng.next();
            }
            buf.push(ALPHABET[(digits % 36) as usize]);
            digits /= 36;
        }
    }
}

impl Iterator for ShortKeys {
    type Item = Vec<u8>;
    fn next(&mut self) -> Option<Vec<u8>> {
        let mut v = Vec::with_capacity(15);
        self.next_into(&mut v);
        Some(v)
    }
}

/// Counting keys `key-0`, `key-1`, ...
pub fn seq_key(i: u64, buf: &mut Vec<u8>) {
    use std::io::Write;
    buf.clear();
    let _ = write!(buf, "key-{i}");
}
