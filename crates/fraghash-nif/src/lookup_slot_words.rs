//! The lookup a `slots` hash state carries: one 64-bit word per bucket
//! that answers a lookup by itself, with no second read and no call, for
//! buckets where up to two segments start.
//!
//! A `slots` segment always starts on a slot boundary (`H >> slot_shift`
//! changes there), so where a segment starts inside a bucket is a slot
//! offset of `d = slot_bits - bucket_bits` bits, not a 32-bit hash. That
//! leaves room in a word for three owners and two starts, which covers the
//! buckets a grown table has: an `add_frag` cuts the tail off each donor's
//! run, so its starts come in pairs (the new fragment's piece, then the
//! next run), a few slots apart. The word layout, high bits first, `o`
//! bits per owner:
//!
//! ```text
//! bit 58 = 0: [start2: d][owner2: o][start1: d][owner1: o][owner0: o]
//! bit 58 = 1: the byte offset of an overflow record, from the words' start
//! ```
//!
//! With `x` the slot offset of `H` inside its bucket, the owner is `owner2`
//! if `x >= start2`, else `owner1` if `x >= start1`, else `owner0`. A
//! bucket inside one segment has both starts 0 and its owner in `owner2`;
//! a bucket with one start has `start2 = start1`. Every word is below
//! 2^59. A bucket where three or more segments start is an overflow
//! record, as in [`crate::lookup_words`]: the owner at the bucket's first
//! `H`, a count `k`, then `k` pairs `(start H, owner)`, 32-bit words.
//!
//! The fields have fixed widths, `o = 13` and `d = 9` (the starts are slot
//! offsets below `2^d'`, `d' <= 9` the real offset bits), so that Erlang
//! unpacks a word with literal shifts; and Erlang finds the bucket and the
//! slot offset by multiplication, from the bucket count `B` and the slots
//! per bucket `P` (`(H * B) bsr 32`, then `(((H * B) band (2^32 - 1)) * P)
//! bsr 32`), with no shift by a count read from the state. The OTP 25 JIT
//! does not inline a shift by a variable count: measured on one
//! 50-fragment state, the same decode with literal counts took 40 to 57 ns
//! per lookup against 75 to 88 ns. Erlang reads a word as two aligned
//! 32-bit halves, which the JIT extracts inline (a 64-bit field could be a
//! bignum, which the JIT reads through a generic helper). A table whose
//! owners pass [`MAX_OWNER`] has no slot words, and the Mnesia adapter
//! refuses to grow a `slots` table past it. The bucket count always fits:
//! `slots` has at most 2^24 slots, so 2^15 buckets of 2^9 slots cover it.
//!
//! Tables created with `n - 1` fragments and grown by one `add_frag` need
//! no overflow record at 50, 400 or 4,000 fragments (1 KiB, 8 KiB and
//! 64 KiB of words): every lookup is one word read and some arithmetic.

use crate::lookup_words::{overflow_owner, push_overflow};
use crate::ranges::{bucket_bits, Bucket, RangeIndex};

/// Bit 58: the word is an overflow record's offset.
const OVERFLOW: u64 = 1 << 58;

/// Owner bits.
pub const OWNER_BITS: u32 = 13;
/// The largest owner (1-based fragment number) a word holds: 8,191.
pub const MAX_OWNER: u32 = (1 << OWNER_BITS) - 1;
/// Start bits: up to 512 slots per bucket.
pub const OFFSET_BITS: u32 = 9;
/// Most bucket bits (the count is 16 bits of the state's head).
pub const MAX_BUCKET_BITS: u32 = 15;

/// A `slots` placement as 64-bit bucket words (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotWordIndex {
    /// `H >> bucket_shift` is the bucket.
    pub bucket_shift: u32,
    /// `H >> slot_shift` is the slot.
    pub slot_shift: u32,
    /// The bucket words.
    pub words: Vec<u64>,
    /// The overflow records, 32-bit words, after the bucket words.
    pub overflow: Vec<u32>,
}

impl SlotWordIndex {
    /// Lays out segments (sorted `(start, owner)`, the first at 0, every
    /// start a multiple of `2^(32 - slot_bits)`) over `per_segment` buckets
    /// per segment (rounded up to a power of two, at most one per slot),
    /// fewer while the bytes exceed `target_bytes`, down to the fewest the
    /// start field allows (`2^(slot_bits - 9)`). `None` when the segments
    /// are not on slot boundaries, `slot_bits` is not in 1..=24, or an
    /// owner passes [`MAX_OWNER`].
    pub fn new(
        segments: &[(u32, u32)],
        slot_bits: u32,
        per_segment: usize,
        target_bytes: usize,
    ) -> Option<SlotWordIndex> {
        if slot_bits == 0 || slot_bits > 32 {
            return None;
        }
        let slot_shift = 32 - slot_bits;
        let aligned = segments.first().map(|s| s.0) == Some(0)
            && segments
                .iter()
                .all(|s| u64::from(s.0) & ((1u64 << slot_shift) - 1) == 0);
        if !aligned {
            return None;
        }
        let max_owner = segments.iter().map(|s| s.1).max()?;
        if max_owner > MAX_OWNER {
            return None;
        }
        // The bucket count must fit the head's 16 bits.
        let min_bits = slot_bits.saturating_sub(OFFSET_BITS).max(1);
        if min_bits > MAX_BUCKET_BITS {
            return None;
        }
        let mut bits = bucket_bits(per_segment.max(1) * segments.len())
            .min(slot_bits)
            .min(MAX_BUCKET_BITS)
            .max(min_bits);
        loop {
            let index = SlotWordIndex::with_bits(segments, slot_shift, bits)?;
            if index.byte_len() <= target_bytes || bits <= min_bits {
                return Some(index);
            }
            bits -= 1;
        }
    }

    /// The words over `2^bits` buckets, from the buckets of a
    /// [`RangeIndex`] of the same segments.
    fn with_bits(segments: &[(u32, u32)], slot_shift: u32, bits: u32) -> Option<SlotWordIndex> {
        let r = RangeIndex::with_bits(segments, bits);
        let bucket_shift = r.shift;
        let (o, d) = (u64::from(OWNER_BITS), u64::from(OFFSET_BITS));
        // A start's slot offset inside bucket `b`.
        let offset = |b: usize, start: u32| {
            u64::from(start - ((b as u64) << bucket_shift) as u32) >> slot_shift
        };
        let mut overflow: Vec<u32> = Vec::new();
        let mut words = Vec::with_capacity(r.buckets.len());
        for (b, bucket) in r.buckets.iter().enumerate() {
            let word = match bucket {
                Bucket::Owner(owner) => {
                    let owner = u64::from(*owner);
                    owner << (2 * o + d) | owner << o | owner
                }
                Bucket::Split(first, rest) => match rest[..] {
                    // One start fills both pairs (`start2 = start1`).
                    [(s1, o1)] | [(s1, o1), _] => {
                        let (s2, o2) = rest[rest.len() - 1];
                        let (s1, o1, s2, o2) =
                            (offset(b, s1), u64::from(o1), offset(b, s2), u64::from(o2));
                        s2 << (3 * o + d)
                            | o2 << (2 * o + d)
                            | s1 << (2 * o)
                            | o1 << o
                            | u64::from(*first)
                    }
                    _ => {
                        let at = u64::try_from(4 * overflow.len()).ok()?;
                        push_overflow(&mut overflow, *first, rest)?;
                        OVERFLOW | at
                    }
                },
            };
            words.push(word);
        }
        // Overflow offsets count from the words' start: shift them past the
        // bucket words.
        let base = 8 * words.len() as u64;
        for w in &mut words {
            if *w & OVERFLOW != 0 {
                *w += base;
            }
        }
        Some(SlotWordIndex {
            bucket_shift,
            slot_shift,
            words,
            overflow,
        })
    }

    /// Slot bits inside a bucket.
    pub fn slot_offset_bits(&self) -> u32 {
        self.bucket_shift - self.slot_shift
    }

    /// The two numbers the state's head holds: the bucket count in the
    /// high 16 bits, the slots per bucket in the low 16.
    pub fn params(&self) -> u32 {
        (1u32 << (32 - self.bucket_shift)) << 16 | 1u32 << self.slot_offset_bits()
    }

    /// The owner (1-based) of `H`, computed as Erlang does from the words
    /// (`include/fraghash_lookup.hrl`): the bucket and the slot offset in
    /// it by multiplication, then the word's fields.
    pub fn locate(&self, h32: u32) -> u32 {
        let params = self.params();
        let (buckets, per_bucket) = (u64::from(params >> 16), u64::from(params & 0xFFFF));
        let scaled = u64::from(h32) * buckets;
        let (bucket, x) = (scaled >> 32, ((scaled & 0xFFFF_FFFF) * per_bucket) >> 32);
        let e = self.words[bucket as usize];
        let (o, d) = (OWNER_BITS, OFFSET_BITS);
        let o_mask = (1u64 << o) - 1;
        let d_mask = (1u64 << d) - 1;
        if e & OVERFLOW == 0 {
            let u = e >> o;
            let v = u >> o;
            let owner = if x >= v & d_mask {
                let w = v >> d;
                if x >= w >> o {
                    w & o_mask
                } else {
                    u & o_mask
                }
            } else {
                e & o_mask
            };
            owner as u32
        } else {
            let j = ((e & !OVERFLOW) as usize - 8 * self.words.len()) / 4;
            overflow_owner(&self.overflow[j..], h32)
        }
    }

    /// Bytes of the words and records.
    pub fn byte_len(&self) -> usize {
        8 * self.words.len() + 4 * self.overflow.len()
    }

    /// Big-endian bytes, as Erlang's bit syntax reads them by default: the
    /// bucket words, then the overflow records.
    pub fn to_be_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_len());
        out.extend(self.words.iter().flat_map(|w| w.to_be_bytes()));
        out.extend(self.overflow.iter().flat_map(|w| w.to_be_bytes()));
        out
    }
}
