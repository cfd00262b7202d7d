//! Lookup tables that Erlang reads itself, so that a Mnesia read or write
//! needs no NIF call.
//!
//! A hash module's `key_to_frag_number` sees `H = erlang:phash2(Key, 1 bsl
//! 32)`, and the core places the widened hash `h = H * (2^32 + 1)`
//! ([`fraghash::widen_phash2`]), which grows with `H`. For `slots` and
//! `ring` the owner is constant on long intervals of `h` (a slot run, an arc
//! of the ring), so it is constant on intervals of `H` too: the whole
//! placement, as Erlang sees it, is a sorted list of *segments* of the
//! 32-bit `H` space, each with one owner. This module computes those
//! segments from the built scheme and lays them out as a [`RangeIndex`]
//! that Erlang reads with a shift and one `element/2`: a bucket is an
//! integer (its owner, or two owners and where the second begins, packed),
//! or, where three or more segments meet, a small tuple to scan. Buckets are
//! [`BUCKETS_PER_SEGMENT`] times the segments (up to [`MAX_BUCKET_BITS`]),
//! so most lookups read one integer: a fresh `slots` table of 4,000
//! fragments is a tuple of 8,192 buckets (64 KiB), a `ring` of 400,000
//! points one of 2^20 (8 MiB). More buckets per segment were measured
//! slower: the tuple's size costs more cache misses than the packed pairs
//! cost arithmetic.
//!
//! The core stays the one place that decides placement: the segments' start
//! points come from the scheme's structure (where a slot run or a ring point
//! begins), but every segment's owner is what the core's
//! [`FragmentScheme::locate`] answers for the segment's first `H`. The start
//! points are a superset of the places where the owner can change, so the
//! segments reproduce `locate` for every `H` (tested against it directly).
//!
//! Past [`WORDS_ABOVE_SEGMENTS`] segments (a ring of more than about 330
//! fragments of 100 points), the buckets are 32-bit words in one binary
//! instead ([`WordIndex`], a quarter of the tuple's size): a fresh ring of
//! 4,000 fragments is 2^19 words, 2 MiB, plus the buckets where three or
//! more segments meet.
//!
//! `linear` is not piecewise constant in `H` (it reads the low bits):
//! Erlang gets its two parameters instead ([`ErlangLookup::LowBits`]), the
//! computation `mnesia_frag_hash` does. `jump` has neither form (its answer
//! comes from 64-bit mixing of the whole hash), and keeps the NIF call.

use fraghash::scheme::slots::Slots;
use fraghash::{widen_phash2, AnyScheme, FragmentScheme, SchemeSpec};

pub use crate::lookup_slot_words::SlotWordIndex;
pub use crate::lookup_words::WordIndex;

/// Past this many segments a lookup is a [`WordIndex`] (a binary of 32-bit
/// words, one bucket per segment) instead of a tuple of buckets: a tuple of
/// `2^17` or more buckets (1 MiB and up) misses the cache on most lookups,
/// and the binary is a quarter of its size. Measured with a million keys
/// streaming through (2 shared cores): a random read from an 8 MiB tuple
/// cost 140 ns over the hash alone, from a 4 MiB binary 107 ns, from a 2
/// MiB one 74 ns, from a 64 KiB tuple 18 ns.
pub const WORDS_ABOVE_SEGMENTS: usize = 1 << 15;

/// Buckets per segment of a lookup carried in the hash state
/// ([`ErlangLookup::inline`]): two. For a ring's 32-bit words, about 6% of
/// the buckets then need an overflow record and the words take about 5
/// bytes per segment; `slots` words take 16 bytes per segment, and a
/// table created with `n - 1` fragments and grown by one had no overflow
/// record at 50, 400 or 4,000 fragments.
pub const INLINE_BUCKETS_PER_SEGMENT: usize = 2;

/// Most bucket bits of a [`RangeIndex`]: 2^20 buckets, an 8 MiB tuple. Past
/// that, buckets just hold more segments each.
pub const MAX_BUCKET_BITS: u32 = 20;

/// Buckets per segment (rounded up to a power of two): with `b` buckets per
/// segment about `1/b` of the buckets hold a segment start, and a lookup
/// that lands there decodes a packed pair or scans a tuple instead of
/// reading its answer.
pub const BUCKETS_PER_SEGMENT: usize = 2;

/// What Erlang reads instead of calling the NIF, for one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErlangLookup {
    /// Owners of segments of the `H` space (`slots`, `ring`).
    Ranges(RangeIndex),
    /// Owners of segments, as 32-bit words in a binary: the layout for many
    /// segments (a ring of many fragments), see [`WordIndex`].
    Words(WordIndex),
    /// Owners of `slots` segments, as 64-bit words that name two starts in
    /// slot units: the layout a `slots` state carries, see
    /// [`SlotWordIndex`].
    SlotWords(SlotWordIndex),
    /// Mnesia's linear hashing: `A = H band Mask`, less `Half` when
    /// `A >= Fragments`.
    LowBits {
        /// `2^(L+1) - 1`, `L` being Mnesia's `n_doubles`.
        mask: u32,
        /// `2^L`.
        half: u32,
        /// The fragment count.
        fragments: u32,
    },
}

/// One bucket of a [`RangeIndex`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bucket {
    /// One segment covers the whole bucket: its owner (1-based).
    Owner(u32),
    /// Segments meet inside the bucket: the owner at the bucket's first `H`,
    /// then `(start, owner)` of each segment that starts inside it, sorted.
    Split(u32, Vec<(u32, u32)>),
}

/// Segments of the 32-bit `H` space behind a bucket array over its top bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeIndex {
    /// `H >> shift` is the bucket.
    pub shift: u32,
    /// Bits of an owner in a packed bucket: enough for the largest owner.
    pub owner_bits: u32,
    /// `2^(32 - shift)` buckets.
    pub buckets: Vec<Bucket>,
}

impl RangeIndex {
    /// Lays out segments (sorted `(start, owner)`, the first starting at 0,
    /// neighbours of different owners) with [`BUCKETS_PER_SEGMENT`] buckets
    /// per segment or more, up to [`MAX_BUCKET_BITS`].
    pub fn new(segments: &[(u32, u32)]) -> RangeIndex {
        RangeIndex::with_bits(segments, bucket_bits(BUCKETS_PER_SEGMENT * segments.len()))
    }

    /// Lays out segments over `2^bits` buckets (`bits` in 1..=32).
    pub fn with_bits(segments: &[(u32, u32)], bits: u32) -> RangeIndex {
        debug_assert_eq!(segments.first().map(|s| s.0), Some(0));
        debug_assert!((1..=32).contains(&bits));
        let shift = 32 - bits;
        let mut buckets = Vec::with_capacity(1 << bits);
        let mut seg = 0usize;
        for b in 0..(1u64 << bits) {
            let first = (b << shift) as u32;
            let last = (((b + 1) << shift) - 1) as u32;
            // The segment holding `first`.
            while seg + 1 < segments.len() && segments[seg + 1].0 <= first {
                seg += 1;
            }
            let owner = segments[seg].1;
            let inside: Vec<(u32, u32)> = segments[seg + 1..]
                .iter()
                .take_while(|s| s.0 <= last)
                .copied()
                .collect();
            buckets.push(if inside.is_empty() {
                Bucket::Owner(owner)
            } else {
                Bucket::Split(owner, inside)
            });
        }
        let max = segments.iter().map(|s| s.1).max().unwrap_or(1);
        RangeIndex {
            shift,
            owner_bits: 32 - max.leading_zeros(),
            buckets,
        }
    }

    /// Bucket `b` as one Erlang small integer, when it is a [`Bucket::Split`]
    /// of two segments and fits in 59 bits: `-(Owner0 + (Owner1 << W) +
    /// (Offset << 2W))`, `W` = `owner_bits` and `Offset` where
    /// `Owner1` begins, from the bucket's first `H` (below `2^shift`).
    pub fn packed(&self, b: usize) -> Option<i64> {
        let w = self.owner_bits;
        match &self.buckets[b] {
            Bucket::Split(first, rest) if rest.len() == 1 && 2 * w + self.shift <= 58 => {
                let offset = u64::from(rest[0].0 - ((b as u64) << self.shift) as u32);
                let v = u64::from(*first) | u64::from(rest[0].1) << w | offset << (2 * w);
                Some(-(v as i64))
            }
            _ => None,
        }
    }

    /// The owner (1-based) of `H`, computed as Erlang does from the buckets
    /// as `lookup_table/2` encodes them.
    pub fn locate(&self, h32: u32) -> u32 {
        let b = (u64::from(h32) >> self.shift) as usize;
        if let Some(p) = self.packed(b) {
            let (q, w) = ((-p) as u64, self.owner_bits);
            let off_mask = (1u64 << self.shift) - 1;
            let o_mask = (1u64 << w) - 1;
            return if u64::from(h32) & off_mask >= q >> (2 * w) {
                ((q >> w) & o_mask) as u32
            } else {
                (q & o_mask) as u32
            };
        }
        match &self.buckets[b] {
            Bucket::Owner(o) => *o,
            Bucket::Split(first, rest) => rest
                .iter()
                .take_while(|(start, _)| *start <= h32)
                .last()
                .map_or(*first, |s| s.1),
        }
    }

    /// Segments stored (one per bucket, plus every split point).
    pub fn segments(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| match b {
                Bucket::Owner(_) => 1,
                Bucket::Split(_, rest) => 1 + rest.len(),
            })
            .sum()
    }
}

impl ErlangLookup {
    /// The lookup of a built scheme, or `None` for `jump`. `tokens_below`
    /// bounds the ring's fragment tokens (tokens are handed out in order and
    /// never reused, so every token is below the base fragment count plus
    /// the adds replayed: [`crate::recipe::Recipe::fragments_added`]).
    pub fn build(scheme: &AnyScheme, tokens_below: u64) -> Option<ErlangLookup> {
        if let AnyScheme::Linear(l) = scheme {
            let half = 1u32 << l.n_doubles();
            return Some(ErlangLookup::LowBits {
                mask: half.wrapping_mul(2).wrapping_sub(1),
                half,
                fragments: l.fragments(),
            });
        }
        let segments = scheme_segments(scheme, tokens_below)?;
        Some(if segments.len() > WORDS_ABOVE_SEGMENTS {
            match WordIndex::new(&segments) {
                Some(w) => ErlangLookup::Words(w),
                None => ErlangLookup::Ranges(RangeIndex::new(&segments)),
            }
        } else {
            ErlangLookup::Ranges(RangeIndex::new(&segments))
        })
    }

    /// The lookup a state carries inside itself, when it is at most
    /// `max_bytes`: linear's parameters, the slot words of `slots`
    /// ([`SlotWordIndex`]) or the words of `ring` segments, with
    /// [`INLINE_BUCKETS_PER_SEGMENT`] buckets per segment. `None` for `jump`
    /// and for larger tables (then the lookup is published, see
    /// [`ErlangLookup::build`]).
    pub fn inline(scheme: &AnyScheme, tokens_below: u64, max_bytes: usize) -> Option<ErlangLookup> {
        if let AnyScheme::Linear(_) = scheme {
            return ErlangLookup::build(scheme, tokens_below);
        }
        let segments = scheme_segments(scheme, tokens_below)?;
        if segments.len() * INLINE_BUCKETS_PER_SEGMENT * 4 > max_bytes {
            return None;
        }
        match scheme {
            AnyScheme::Slots(s) => inline_slot_words(&segments, s.slot_bits(), max_bytes),
            _ => WordIndex::with_buckets_per_segment(&segments, INLINE_BUCKETS_PER_SEGMENT)
                .filter(|w| w.byte_len() <= max_bytes)
                .map(ErlangLookup::Words),
        }
    }

    /// [`ErlangLookup::inline`] for a new `slots` table of these weights,
    /// from the core's runs of the new table ([`Slots::new_runs`]) instead
    /// of the built table: O(fragments). Creating a table of `n` fragments
    /// has Mnesia call `add_frag` `n - 1` times, each state a new table;
    /// building each one took creating 4,000 fragments from about 6 s to 21.
    pub fn inline_new_slots(weights: &[u32], max_bytes: usize) -> Option<ErlangLookup> {
        let (bits, runs) = Slots::new_runs(weights).ok()?;
        let shift = 32u32.checked_sub(bits)?;
        let segments: Vec<(u32, u32)> = runs
            .iter()
            .map(|&(slot, fragment)| ((slot << shift) as u32, fragment + 1))
            .collect();
        if segments.len() * INLINE_BUCKETS_PER_SEGMENT * 4 > max_bytes {
            return None;
        }
        inline_slot_words(&segments, bits, max_bytes)
    }

    /// Whether a state of `spec` with `fragments` fragments can carry its
    /// lookup in `max_bytes`, judged without building the scheme: `false`
    /// when even the segments it can be expected to have (one per slot run,
    /// at least one per fragment; one per ring point, less the neighbours of
    /// one owner) take more. Creating a table of `n` fragments calls
    /// `add_frag` `n - 1` times, and building each intermediate ring only to
    /// find it too large made creating a 4,000-fragment ring take 132 s
    /// instead of about 25.
    pub fn may_carry(spec: SchemeSpec, fragments: u32, max_bytes: usize) -> bool {
        let n = fragments as usize;
        let segments = match spec {
            SchemeSpec::Jump => return false,
            SchemeSpec::Linear => return true,
            SchemeSpec::Slots => n,
            SchemeSpec::Ring { points } => n.saturating_sub(1) * points as usize,
        };
        segments.saturating_mul(INLINE_BUCKETS_PER_SEGMENT * 4) <= max_bytes
    }

    /// The fragment (1-based) of `H` as Erlang computes it from this lookup.
    pub fn locate(&self, h32: u32) -> u32 {
        match self {
            ErlangLookup::Ranges(r) => r.locate(h32),
            ErlangLookup::Words(w) => w.locate(h32),
            ErlangLookup::SlotWords(w) => w.locate(h32),
            ErlangLookup::LowBits {
                mask,
                half,
                fragments,
            } => {
                let a = h32 & mask;
                if a >= *fragments {
                    a - half + 1
                } else {
                    a + 1
                }
            }
        }
    }
}

/// The slot words of `slots` segments, at most `max_bytes`.
fn inline_slot_words(
    segments: &[(u32, u32)],
    slot_bits: u32,
    max_bytes: usize,
) -> Option<ErlangLookup> {
    SlotWordIndex::fixed(segments, slot_bits, INLINE_BUCKETS_PER_SEGMENT, max_bytes)
        .or_else(|| SlotWordIndex::new(segments, slot_bits, INLINE_BUCKETS_PER_SEGMENT, max_bytes))
        .map(ErlangLookup::SlotWords)
}

/// The segments of `slots` and `ring` schemes (`None` for the others):
/// `tokens_below` bounds the ring's fragment tokens, as for
/// [`ErlangLookup::build`].
pub fn scheme_segments(scheme: &AnyScheme, tokens_below: u64) -> Option<Vec<(u32, u32)>> {
    let starts: Vec<u32> = match scheme {
        AnyScheme::Jump(_) | AnyScheme::Linear(_) => return None,
        AnyScheme::Slots(s) => {
            // A slot run's first slot, as its first H.
            let shift = 32 - s.slot_bits();
            let t = s.table();
            (0..t.len())
                .filter(|&i| i == 0 || t[i] != t[i - 1])
                .map(|i| (i as u32) << shift)
                .collect()
        }
        AnyScheme::Ring(r) => {
            // A ring point at position c owns the hashes up to c; the next
            // arc begins at the first H whose widened hash is past c.
            let mut v = vec![0u32];
            for token in 0..tokens_below {
                for p in 0..r.points_per_fragment() {
                    let c = fraghash::scheme::ring::Ring::point_position(token, p);
                    if let Ok(h) = u32::try_from(c / ((1u64 << 32) + 1) + 1) {
                        v.push(h);
                    }
                }
            }
            v.sort_unstable();
            v.dedup();
            v
        }
    };
    Some(segments(scheme, &starts))
}

/// The bucket bits for at least `wanted` buckets (a power of two), at most
/// [`MAX_BUCKET_BITS`].
pub(crate) fn bucket_bits(wanted: usize) -> u32 {
    (usize::BITS - wanted.saturating_sub(1).leading_zeros()).clamp(1, MAX_BUCKET_BITS)
}

/// The segments that `starts` (sorted, distinct, beginning at 0, a superset
/// of where the owner changes) cut the `H` space into, each owned by what the
/// core locates for its first `H`; neighbours of one owner merged.
pub fn segments(scheme: &AnyScheme, starts: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(starts.len());
    for &h in starts {
        let owner = scheme.locate(widen_phash2(h)) + 1;
        if out.last().map(|s| s.1) != Some(owner) {
            out.push((h, owner));
        }
    }
    out
}

#[cfg(test)]
#[path = "lookup_tests.rs"]
mod tests;
