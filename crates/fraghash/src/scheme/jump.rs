//! `jump`: jump consistent hashing (Lamping and Veach, 2014).
//!
//! Stateless but for the fragment count: a key's fragment is computed from
//! its hash by a short pseudo-random walk. Balance is at the sampling floor
//! and an add moves the ideal `1/(N+1)` of the keys, all into the new
//! fragment. The price: the moving keys come from every old fragment, so an
//! add scans everything (a filter plan over all fragments), and only the
//! last fragment can be removed.
//!
//! Lookup is O(log N) expected: about `ln N + 1` steps of a 64-bit LCG and a
//! floating-point division each (the published 8 to 146 ns range).

use serde::{Deserialize, Serialize};

use super::{check_removable, FragmentScheme};
use crate::error::{SchemeError, StateError};
use crate::plan::{MigrationPlan, Move, PlanKind};
use crate::state::{self, tag};

/// Jump consistent hashing over `fragments` fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jump {
    fragments: u32,
}

#[derive(Serialize, Deserialize)]
struct JumpState {
    fragments: u32,
}

impl Jump {
    /// The largest fragment count (the algorithm's bucket numbers are `i32`).
    pub const MAX_FRAGMENTS: u32 = i32::MAX as u32;

    /// Jump hashing over `fragments` fragments.
    pub fn new(fragments: u32) -> Result<Jump, SchemeError> {
        if fragments == 0 {
            return Err(SchemeError::ZeroFragments);
        }
        if fragments > Self::MAX_FRAGMENTS {
            return Err(SchemeError::TooManyFragments {
                scheme: "jump",
                max: Self::MAX_FRAGMENTS,
            });
        }
        Ok(Jump { fragments })
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Jump, StateError> {
        let s: JumpState = state::decode_body(body)?;
        Jump::new(s.fragments).map_err(|e| StateError::Invalid(e.to_string()))
    }
}

/// Lamping and Veach's jump consistent hash of `key` into `buckets` buckets.
#[inline]
pub fn jump_consistent_hash(mut key: u64, buckets: u32) -> u32 {
    let mut b: i64 = -1;
    let mut j: i64 = 0;
    while j < i64::from(buckets) {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u32
}

impl FragmentScheme for Jump {
    fn spec(&self) -> String {
        "jump".into()
    }

    fn fragments(&self) -> u32 {
        self.fragments
    }

    #[inline]
    fn locate(&self, h: u64) -> u32 {
        jump_consistent_hash(h, self.fragments)
    }

    fn add_fragment(&mut self) -> Result<MigrationPlan, SchemeError> {
        let before = self.fragments;
        *self = Jump::new(before.saturating_add(1))?;
        Ok(MigrationPlan {
            kind: PlanKind::Add { fragment: before },
            fragments_before: before,
            fragments_after: before + 1,
            moves: (0..before).map(|from| Move::Filter { from }).collect(),
            renumber: None,
        })
    }

    fn remove_fragment(&mut self, which: u32) -> Result<MigrationPlan, SchemeError> {
        check_removable(which, self.fragments)?;
        let last = self.fragments - 1;
        if which != last {
            return Err(SchemeError::OnlyLastRemovable {
                scheme: "jump",
                last,
                requested: which,
            });
        }
        self.fragments = last;
        Ok(MigrationPlan {
            kind: PlanKind::Remove { fragment: last },
            fragments_before: last + 1,
            fragments_after: last,
            moves: vec![Move::Filter { from: last }],
            renumber: None,
        })
    }

    fn to_state_bytes(&self) -> Vec<u8> {
        state::encode(
            tag::JUMP,
            &JumpState {
                fragments: self.fragments,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the reference C++ in the paper's Figure 1, computed by hand
    /// for small inputs: key 0 always lands in bucket 0; one bucket takes all.
    #[test]
    fn trivial_cases() {
        for k in [0u64, 1, 12345, u64::MAX] {
            assert_eq!(jump_consistent_hash(k, 1), 0);
        }
        assert_eq!(jump_consistent_hash(0, 1000), 0);
    }

    #[test]
    fn growth_moves_only_to_new_bucket() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for n in 1..40 {
                let a = jump_consistent_hash(x, n);
                let b = jump_consistent_hash(x, n + 1);
                assert!(a < n);
                assert!(b == a || b == n);
            }
        }
    }
}
