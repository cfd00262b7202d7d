//! Lookup tables that Erlang reads itself, so that a Mnesia read or write
//! needs no NIF call: one form per scheme ([`ErlangLookup`]).
//!
//! A hash module's `key_to_frag_number` sees `H = erlang:phash2(Key, 1 bsl
//! 32)`, and the core places the widened hash `h = H * (2^32 + 1)`
//! ([`fraghash::widen_phash2`]), which grows with `H`. For `slots` and
//! `ring` the owner is constant on long intervals of `h` (a slot run, an arc
//! of the ring), so it is constant on intervals of `H` too: the whole
//! placement, as Erlang sees it, is a sorted list of *segments* of the
//! 32-bit `H` space, each with one owner ([`crate::ranges`]).
//!
//! | scheme | form | where Erlang finds it |
//! |---|---|---|
//! | `slots` | [`SlotWordIndex`]: one 64-bit word per bucket | in the hash state |
//! | `ring` | [`WordIndex`]: one 32-bit word per bucket | published (`fraghash_lookup`) |
//! | `linear` | [`ErlangLookup::LowBits`]: two parameters | in the hash state |
//! | `jump` | none: the NIF's `locate` answers | published (the digest) |
//!
//! A `slots` table's words take 16 bytes per segment (about one segment
//! per fragment), so the state carries them; they are read with literal
//! shifts (see [`crate::lookup_slot_words`]), and their fixed owner field
//! holds fragments up to [`MAX_SLOT_WORD_OWNER`]. A ring has `points`
//! segments per fragment (a fresh ring of 4,000 fragments of 100 points is
//! 2^19 words, 2 MiB plus overflow records), too many to copy with every
//! state, so its words are published once per node.
//!
//! The core stays the one place that decides placement: the segments' start
//! points come from the scheme's structure (where a slot run or a ring point
//! begins), but every segment's owner is what the core's
//! [`FragmentScheme::locate`] answers for the segment's first `H`. The start
//! points are a superset of the places where the owner can change, so the
//! segments reproduce `locate` for every `H` (tested against it directly).
//!
//! `linear` is not piecewise constant in `H` (it reads the low bits):
//! Erlang gets its two parameters instead, the computation
//! `mnesia_frag_hash` does. `jump` has neither form (its answer comes from
//! 64-bit mixing of the whole hash, which Erlang would do in bignums), and
//! keeps the NIF call.

use fraghash::scheme::slots::Slots;
use fraghash::{AnyScheme, FragmentScheme};

pub use crate::lookup_slot_words::{SlotWordIndex, MAX_OWNER as MAX_SLOT_WORD_OWNER};
pub use crate::lookup_words::WordIndex;
use crate::ranges::scheme_segments;

/// Buckets per segment of `slots` words: two. A table created with `n - 1`
/// fragments and grown by one then had no overflow record at 50, 400 or
/// 4,000 fragments.
pub const SLOT_WORD_BUCKETS_PER_SEGMENT: usize = 2;

/// The bytes `slots` words aim at: fewer buckets past this (a new table of
/// more than 4,096 fragments), down to the fewest the word's fields allow.
/// A state's binary is reference-counted, so Mnesia's copy of it is a
/// pointer, but its size counts towards the copying process's binary heap.
pub const SLOT_WORD_TARGET_BYTES: usize = 65536;

/// The lookup Erlang reads for one state: the one form of its scheme (see
/// the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErlangLookup {
    /// `ring`: owners of segments as 32-bit words in a binary, published.
    Words(WordIndex),
    /// `slots`: owners of segments as 64-bit words naming up to two starts
    /// in slot units, carried in the state.
    SlotWords(SlotWordIndex),
    /// `linear`, Mnesia's linear hashing: `A = H band Mask`, less `Half`
    /// when `A >= Fragments`; carried in the state.
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
    /// The lookup of a built scheme: `None` for `jump`, and for a `slots`
    /// table with an owner past [`MAX_SLOT_WORD_OWNER`]. `tokens_below`
    /// bounds the ring's fragment tokens (tokens are handed out in order
    /// and never reused, so every token is below the base fragment count
    /// plus the adds replayed: [`crate::recipe::Recipe::fragments_added`]).
    pub fn build(scheme: &AnyScheme, tokens_below: u64) -> Option<ErlangLookup> {
        match scheme {
            AnyScheme::Linear(l) => {
                let half = 1u32 << l.n_doubles();
                Some(ErlangLookup::LowBits {
                    mask: half.wrapping_mul(2).wrapping_sub(1),
                    half,
                    fragments: l.fragments(),
                })
            }
            AnyScheme::Jump(_) => None,
            AnyScheme::Slots(s) => {
                slot_words(&scheme_segments(scheme, tokens_below)?, s.slot_bits())
            }
            AnyScheme::Ring(_) => {
                WordIndex::new(&scheme_segments(scheme, tokens_below)?).map(ErlangLookup::Words)
            }
        }
    }

    /// [`ErlangLookup::build`] for a new `slots` table of these weights,
    /// from the core's runs of the new table ([`Slots::new_runs`]) instead
    /// of the built table: O(fragments). Creating a table of `n` fragments
    /// has Mnesia call `add_frag` `n - 1` times, each state a new table;
    /// building each one took creating 4,000 fragments from about 6 s to 21.
    pub fn new_slots(weights: &[u32]) -> Option<ErlangLookup> {
        let (bits, runs) = Slots::new_runs(weights).ok()?;
        let shift = 32u32.checked_sub(bits)?;
        let segments: Vec<(u32, u32)> = runs
            .iter()
            .map(|&(slot, fragment)| ((slot << shift) as u32, fragment + 1))
            .collect();
        slot_words(&segments, bits)
    }

    /// Whether the state carries this lookup (`slots`, `linear`) rather
    /// than publishing it (`ring`).
    pub fn carried(&self) -> bool {
        !matches!(self, ErlangLookup::Words(_))
    }

    /// The fragment (1-based) of `H` as Erlang computes it from this lookup.
    pub fn locate(&self, h32: u32) -> u32 {
        match self {
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

/// The slot words of `slots` segments.
fn slot_words(segments: &[(u32, u32)], slot_bits: u32) -> Option<ErlangLookup> {
    SlotWordIndex::new(
        segments,
        slot_bits,
        SLOT_WORD_BUCKETS_PER_SEGMENT,
        SLOT_WORD_TARGET_BYTES,
    )
    .map(ErlangLookup::SlotWords)
}

#[cfg(test)]
#[path = "lookup_tests.rs"]
mod tests;
