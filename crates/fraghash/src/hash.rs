//! The key hash: the one function every scheme places keys by.

/// Hashes a key to the 64-bit value `h` that every scheme places by.
///
/// This is xxh3-64 with seed 0 (the `xxhash-rust` crate). It is part of the
/// store's on-disk format (records are keyed by `h`), so it never changes
/// without a format version bump; golden vectors in the tests pin it.
///
/// Cost: about 1 ns per 8 bytes of key plus a small constant; keys of any
/// length are accepted, the empty key included.
///
/// ```
/// let h = fraghash::key_hash(b"hello");
/// assert_eq!(h, fraghash::key_hash(b"hello"));
/// assert_ne!(h, fraghash::key_hash(b"hellp"));
/// ```
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// The 64-bit hash the Mnesia adapter derives from Erlang's 32-bit
/// `erlang:phash2(Key, 1 bsl 32)`.
///
/// `h = H * (2^32 + 1)` puts `H` in both halves: `linear` reads the low bits
/// (and so answers exactly as `mnesia_frag_hash`), while `slots` and `ring`
/// read the high bits.
///
/// ```
/// let h = fraghash::widen_phash2(0xdead_beef);
/// assert_eq!(h, 0xdead_beef_dead_beef);
/// ```
#[inline]
pub fn widen_phash2(h32: u32) -> u64 {
    u64::from(h32).wrapping_mul((1u64 << 32) + 1)
}
