//! `linear`: Mnesia's default linear hashing (`mnesia_frag_hash`).
//!
//! With `N` fragments and `L = floor(log2 N)` doublings, a key goes to
//! `a = h mod 2^(L+1)`, or to `a - 2^L` when `a >= N`. Adding a fragment
//! splits fragment `N - 2^L` (the next to split) into itself and the new
//! fragment `N`; removing merges the last fragment back into its buddy.
//! These are exactly `mnesia_frag_hash`'s numbers and split order, shifted to
//! 0-based ids, when `h`'s low 32 bits are `erlang:phash2(Key, 1 bsl 32)`.
//!
//! Lookup is O(1). An add scans one fragment (a filter plan). Balance is poor
//! by design: between doublings, the `N - 2^L` split fragments and the new
//! ones hold half as much as the unsplit ones (with 50 fragments, 14
//! fragments hold twice as much as the other 36).

use serde::{Deserialize, Serialize};

use super::{add_plan, check_fragment_count, remove_last, FragmentScheme};
use crate::error::{SchemeError, StateError};
use crate::plan::{MigrationPlan, Move};
use crate::state::{self, tag};

/// Mnesia's linear hashing. The state is the fragment count alone: Mnesia's
/// `n_doubles` and `next_n_to_split` follow from it.
///
/// ```
/// use fraghash::scheme::linear::Linear;
/// use fraghash::{key_hash, FragmentScheme, Move, SchemeError};
///
/// let mut linear = Linear::new(5)?;
/// assert_eq!((linear.n_doubles(), linear.next_to_split()), (2, 1));
/// // A key goes by the low bits of its hash: h mod 8, or minus 4 if >= 5.
/// assert_eq!(linear.locate(6), 2);
///
/// // An add splits fragment 1 into 1 and 5: a filter plan over fragment 1.
/// let h = key_hash(b"user:42");
/// let before = linear.locate(h);
/// let plan = linear.add_fragment()?;
/// assert_eq!(plan.moves, vec![Move::Filter { from: 1 }]);
/// let after = linear.locate(h);
/// assert!(after == before || (before, after) == (1, 5));
/// match plan.destination(h, before) {
///     Some(stays) => assert_eq!(stays, after), // not in fragment 1
///     None => assert_eq!(before, 1),           // scanned: locate decides
/// }
///
/// // Only the last fragment can go.
/// assert!(matches!(linear.remove_fragment(0), Err(SchemeError::OnlyLastRemovable { last: 5, .. })));
/// linear.remove_fragment(5)?;
/// # Ok::<(), SchemeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linear {
    fragments: u32,
    /// `L = floor(log2 N)`, cached for the hot path.
    doubles: u32,
}

#[derive(Serialize, Deserialize)]
struct LinearState {
    fragments: u32,
}

impl Linear {
    /// The largest fragment count (ids must fit `u32`, doublings `2^31`).
    pub const MAX_FRAGMENTS: u32 = 1 << 31;

    /// A linear-hashing scheme with `fragments` fragments, as Mnesia has it
    /// after creating one and adding `fragments - 1`.
    pub fn new(fragments: u32) -> Result<Linear, SchemeError> {
        check_fragment_count("linear", fragments, Self::MAX_FRAGMENTS)?;
        Ok(Linear {
            fragments,
            doubles: 31 - fragments.leading_zeros(),
        })
    }

    /// Mnesia's `n_doubles` (`L`).
    pub fn n_doubles(&self) -> u32 {
        self.doubles
    }

    /// Mnesia's `next_n_to_split`, 0-based: the fragment the next add splits.
    pub fn next_to_split(&self) -> u32 {
        self.fragments - (1 << self.doubles)
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Linear, StateError> {
        let s: LinearState = state::decode_body(body)?;
        Linear::new(s.fragments).map_err(|e| StateError::Invalid(e.to_string()))
    }
}

impl FragmentScheme for Linear {
    fn spec(&self) -> String {
        "linear".into()
    }

    fn fragments(&self) -> u32 {
        self.fragments
    }

    #[inline]
    fn locate(&self, h: u64) -> u32 {
        // Low L+1 bits, as phash2(Key, 2^(L+1)) gives them.
        let a = (h & ((2u64 << self.doubles) - 1)) as u32;
        if a >= self.fragments {
            a - (1 << self.doubles)
        } else {
            a
        }
    }

    fn add_fragment(&mut self) -> Result<MigrationPlan, SchemeError> {
        let split = self.next_to_split();
        let before = self.fragments;
        // At the limit, `new` refuses and the state is unchanged.
        *self = Linear::new(before + 1)?;
        Ok(add_plan(before, vec![Move::Filter { from: split }]))
    }

    fn remove_fragment(&mut self, which: u32) -> Result<MigrationPlan, SchemeError> {
        let plan = remove_last("linear", which, self.fragments)?;
        *self = Linear::new(self.fragments - 1)?;
        Ok(plan)
    }

    fn to_state_bytes(&self) -> Vec<u8> {
        state::encode(
            tag::LINEAR,
            &LinearState {
                fragments: self.fragments,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mnesia_frag_hash` transcribed: the record fields, 1-based ids, and
    /// `add_frag/1` and `key_to_frag_number/2` as the Erlang source has them.
    #[derive(Clone, Copy)]
    struct MnesiaState {
        n_fragments: u64,
        next_n_to_split: u64,
        n_doubles: u32,
    }

    impl MnesiaState {
        fn init() -> Self {
            MnesiaState {
                n_fragments: 1,
                next_n_to_split: 1,
                n_doubles: 0,
            }
        }
        /// Returns the new state and the (1-based) fragment to split.
        fn add_frag(self) -> (Self, u64) {
            let split = self.next_n_to_split;
            let p = split + 1;
            let l = self.n_doubles;
            let next = if (1u64 << l) + 1 == p {
                MnesiaState {
                    n_fragments: self.n_fragments + 1,
                    n_doubles: l + 1,
                    next_n_to_split: 1,
                }
            } else {
                MnesiaState {
                    n_fragments: self.n_fragments + 1,
                    next_n_to_split: p,
                    ..self
                }
            };
            (next, split)
        }
        fn key_to_frag_number(&self, h32: u32) -> u64 {
            let a = (u64::from(h32) % (1u64 << (self.n_doubles + 1))) + 1;
            if a > self.n_fragments {
                a - (1u64 << self.n_doubles)
            } else {
                a
            }
        }
    }

    #[test]
    fn matches_mnesia_frag_hash_for_1_to_70_fragments() {
        let mut m = MnesiaState::init();
        let mut ours = Linear::new(1).unwrap();
        let mut x: u32 = 0x9e37_79b9;
        for n in 1..=70u32 {
            assert_eq!(ours.fragments(), n);
            assert_eq!(u64::from(ours.n_doubles()), u64::from(m.n_doubles));
            assert_eq!(u64::from(ours.next_to_split()) + 1, m.next_n_to_split);
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let h = crate::widen_phash2(x);
                assert_eq!(u64::from(ours.locate(h)) + 1, m.key_to_frag_number(x));
            }
            let (m2, split) = m.add_frag();
            let plan = ours.add_fragment().unwrap();
            assert_eq!(
                plan.moves,
                vec![Move::Filter {
                    from: (split - 1) as u32
                }]
            );
            m = m2;
        }
    }

    #[test]
    fn only_last_removable() {
        let mut s = Linear::new(5).unwrap();
        assert!(matches!(
            s.remove_fragment(2),
            Err(SchemeError::OnlyLastRemovable { last: 4, .. })
        ));
        assert_eq!(s.fragments(), 5);
        s.remove_fragment(4).unwrap();
        assert_eq!(s.fragments(), 4);
    }
}
