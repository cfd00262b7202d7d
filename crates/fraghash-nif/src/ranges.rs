//! Segments of the 32-bit `H` space and the bucket array over them
//! ([`RangeIndex`]): the intermediate form that the two word layouts
//! ([`crate::lookup_words`], [`crate::lookup_slot_words`]) pack, see
//! [`crate::lookup`].
//!
//! The segments' start points come from the scheme's structure (where a
//! slot run or a ring point begins), but every segment's owner is what the
//! core's [`FragmentScheme::locate`] answers for the segment's first `H`:
//! the start points are a superset of the places where the owner can change,
//! so the segments reproduce `locate` for every `H`.

use fraghash::{widen_phash2, AnyScheme, FragmentScheme};

/// Most bucket bits of a [`RangeIndex`]: 2^20 buckets. Past that, buckets
/// just hold more segments each.
pub const MAX_BUCKET_BITS: u32 = 20;

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
    /// `2^(32 - shift)` buckets.
    pub buckets: Vec<Bucket>,
}

impl RangeIndex {
    /// Lays out segments (sorted `(start, owner)`, the first starting at 0,
    /// neighbours of different owners) over `2^bits` buckets (`bits` in
    /// 1..=32).
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
        RangeIndex { shift, buckets }
    }

    /// The owner (1-based) of `H`.
    pub fn locate(&self, h32: u32) -> u32 {
        match &self.buckets[(u64::from(h32) >> self.shift) as usize] {
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

/// The segments of `slots` and `ring` schemes (`None` for the others):
/// `tokens_below` bounds the ring's fragment tokens, as for
/// [`crate::lookup::ErlangLookup::build`].
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
