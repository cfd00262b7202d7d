//! The lookup of a `ring` (see [`crate::lookup`]): the buckets of a
//! [`RangeIndex`] as 32-bit words in one Erlang binary, published once per
//! node.
//!
//! One bucket per segment (a power of two, `2^(32 - shift)` buckets), then
//! an overflow area. Bucket `b = H >> shift` is one word `w`:
//!
//! - `w < 2^31`: one segment covers the bucket; `w` is its owner.
//! - `w >> 30 == 0b10`: one segment starts inside the bucket, and its owner
//!   is the owner at the first `H` of bucket `b + 1`. The low `30 - shift`
//!   bits are the owner at the bucket's first `H`; the `shift` bits above
//!   them are where the new segment starts, from the bucket's first `H`.
//!   So a lookup there reads the next word (adjacent: the same cache line
//!   but one time in sixteen).
//! - `w >> 30 == 0b11`: the low 30 bits are the index of a record in the
//!   overflow area: the owner at the bucket's first `H`, a count `k`, then
//!   `k` pairs `(start, owner)` of the segments that start inside it.
//!
//! A fresh ring of 4,000 fragments (400,000 segments over 2^19 buckets, a
//! mean of 0.76 starts per bucket): 47% of the buckets are one owner (one
//! word read), 36% hold one start (a lookup past it reads the next word
//! too) and 17% an overflow record; 2 MiB of buckets and about 1.3 MiB of
//! records. A random read from such a binary, a million keys streaming
//! through on 2 shared cores, cost 74 ns over the hash alone; the same
//! buckets as an Erlang tuple (8 MiB) 140 ns.

use crate::ranges::{bucket_bits, Bucket, RangeIndex};

const ONE_INSIDE: u32 = 0b10 << 30;
const OVERFLOW: u32 = 0b11 << 30;
const INDEX_MASK: u32 = (1 << 30) - 1;

/// Segments of the 32-bit `H` space as 32-bit words (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordIndex {
    /// `H >> shift` is the bucket.
    pub shift: u32,
    /// The bucket words, then the overflow records.
    pub words: Vec<u32>,
}

impl WordIndex {
    /// Lays out segments (sorted `(start, owner)`, the first starting at 0,
    /// neighbours of different owners) one bucket per segment. `None` when
    /// an owner does not fit in 31 bits or the records in 30 bits of index
    /// (more than 2^30 words: not a fragment count Mnesia can hold).
    pub fn new(segments: &[(u32, u32)]) -> Option<WordIndex> {
        let bits = bucket_bits(segments.len()).max(3);
        let r = RangeIndex::with_bits(segments, bits);
        let shift = r.shift;
        let owner_bits = 30 - shift;
        let first_owner = |b: usize| match &r.buckets[b] {
            Bucket::Owner(o) | Bucket::Split(o, _) => *o,
        };
        let n = r.buckets.len();
        let mut words: Vec<u32> = Vec::with_capacity(n + n / 2);
        words.resize(n, 0);
        for (b, bucket) in r.buckets.iter().enumerate() {
            words[b] = match bucket {
                Bucket::Owner(o) if *o < 1 << 31 => *o,
                Bucket::Split(first, rest)
                    if rest.len() == 1
                        && *first < 1 << owner_bits
                        && b + 1 < n
                        && first_owner(b + 1) == rest[0].1 =>
                {
                    let offset = rest[0].0 - ((b as u64) << shift) as u32;
                    ONE_INSIDE | offset << owner_bits | first
                }
                Bucket::Split(first, rest) if *first < 1 << 31 => {
                    let index = u32::try_from(words.len())
                        .ok()
                        .filter(|i| *i <= INDEX_MASK)?;
                    push_overflow(&mut words, *first, rest)?;
                    OVERFLOW | index
                }
                _ => return None,
            };
        }
        Some(WordIndex { shift, words })
    }

    /// The owner (1-based) of `H`, computed as Erlang does from the words
    /// (`include/fraghash_lookup.hrl`).
    pub fn locate(&self, h32: u32) -> u32 {
        let b = (u64::from(h32) >> self.shift) as usize;
        let w = self.words[b];
        if w < ONE_INSIDE {
            w
        } else if w < OVERFLOW {
            let owner_bits = 30 - self.shift;
            let off_mask = (1u32 << self.shift).wrapping_sub(1);
            if h32 & off_mask >= (w >> owner_bits) & off_mask {
                self.first_owner(self.words[b + 1])
            } else {
                w & ((1 << owner_bits) - 1)
            }
        } else {
            overflow_owner(&self.words[(w & INDEX_MASK) as usize..], h32)
        }
    }

    /// The owner at the first `H` of the bucket whose word is `w`.
    fn first_owner(&self, w: u32) -> u32 {
        if w < ONE_INSIDE {
            w
        } else if w < OVERFLOW {
            w & ((1 << (30 - self.shift)) - 1)
        } else {
            self.words[(w & INDEX_MASK) as usize]
        }
    }

    /// Bytes of the words.
    pub fn byte_len(&self) -> usize {
        4 * self.words.len()
    }

    /// The words as an Erlang binary: each big-endian, as Erlang's bit
    /// syntax reads them by default.
    pub fn to_be_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }
}

/// Appends an overflow record: the owner at the bucket's first `H`, the
/// count `k` of segments that start inside the bucket, then their `k`
/// `(start, owner)` pairs. `None` when the count does not fit 32 bits.
pub(crate) fn push_overflow(out: &mut Vec<u32>, first: u32, starts: &[(u32, u32)]) -> Option<()> {
    out.push(first);
    out.push(u32::try_from(starts.len()).ok()?);
    for &(start, owner) in starts {
        out.push(start);
        out.push(owner);
    }
    Some(())
}

/// The owner of `H` from the overflow record `record` begins with (as
/// [`push_overflow`] writes it): the owner of the last pair whose start is
/// at or below `H`, else the bucket's first owner.
pub(crate) fn overflow_owner(record: &[u32], h32: u32) -> u32 {
    let k = record[1] as usize;
    record[2..2 + 2 * k]
        .chunks(2)
        .take_while(|pair| pair[0] <= h32)
        .last()
        .map_or(record[0], |pair| pair[1])
}
