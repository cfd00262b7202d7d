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
//! [`BUCKETS_PER_SEGMENT`](crate::ranges::BUCKETS_PER_SEGMENT) times the
//! segments (up to [`MAX_BUCKET_BITS`](crate::ranges::MAX_BUCKET_BITS)),
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
use fraghash::{AnyScheme, FragmentScheme, SchemeSpec};

pub use crate::lookup_slot_words::SlotWordIndex;
pub use crate::lookup_words::WordIndex;
use crate::ranges::{scheme_segments, RangeIndex};

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
    SlotWordIndex::new(segments, slot_bits, INLINE_BUCKETS_PER_SEGMENT, max_bytes)
        .map(ErlangLookup::SlotWords)
}

#[cfg(test)]
#[path = "lookup_tests.rs"]
mod tests;
