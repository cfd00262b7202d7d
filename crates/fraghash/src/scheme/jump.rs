//! `jump`: jump consistent hashing, as JumpBackHash (Ertl, 2024).
//!
//! Stateless but for the fragment count: a key's fragment is computed from
//! its hash by a short pseudo-random walk. Balance is at the sampling floor
//! and an add moves the ideal `1/(N+1)` of the keys, all into the new
//! fragment. The price: the moving keys come from every old fragment, so an
//! add scans everything (a filter plan over all fragments), and only the
//! last fragment can be removed.
//!
//! Lookup is O(1) expected: one or two splitmix64 draws and a few bit
//! operations (the published 5.8 to 15.2 ns), against Lamping and Veach's
//! O(log N) loop of floating-point divisions.

use serde::{Deserialize, Serialize};

use super::{add_plan, check_fragment_count, remove_last, FragmentScheme};
use crate::error::{SchemeError, StateError};
use crate::keys::SplitMix64;
use crate::plan::{MigrationPlan, Move};
use crate::state::{self, tag};

/// Jump consistent hashing over `fragments` fragments.
///
/// ```
/// use fraghash::scheme::jump::Jump;
/// use fraghash::{key_hash, FragmentScheme};
///
/// let mut jump = Jump::new(50)?;
/// let h = key_hash(b"user:42");
/// let before = jump.locate(h);
///
/// // An add moves about 1/51 of the keys, all into fragment 50, but they
/// // come from every fragment: the plan scans all 50 (a filter plan).
/// let plan = jump.add_fragment()?;
/// let after = jump.locate(h);
/// assert!(after == before || after == 50);
/// assert_eq!(plan.sources().len(), 50);
/// assert!(plan.covers(h, before)); // covered, whether or not it moved
/// assert_eq!(plan.destination(h, before), None); // the new scheme decides
///
/// // Removing the last fragment sends its keys back where they were.
/// jump.remove_fragment(50)?;
/// assert_eq!(jump.locate(h), before);
/// # Ok::<(), fraghash::SchemeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jump {
    fragments: u32,
}

#[derive(Serialize, Deserialize)]
struct JumpState {
    fragments: u32,
}

impl Jump {
    /// The largest fragment count, 1,048,576: an add's filter plan names
    /// every fragment (32 bytes each), so the plan stays under 32 MiB. (The
    /// fuzzer found the unbounded version: a decoded state of a billion
    /// fragments asked for 8 GB on its next add.)
    pub const MAX_FRAGMENTS: u32 = 1 << 20;

    /// Jump hashing over `fragments` fragments.
    pub fn new(fragments: u32) -> Result<Jump, SchemeError> {
        check_fragment_count("jump", fragments, Self::MAX_FRAGMENTS)?;
        Ok(Jump { fragments })
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Jump, StateError> {
        let s: JumpState = state::decode_body(body)?;
        Jump::new(s.fragments).map_err(|e| StateError::Invalid(e.to_string()))
    }
}

/// JumpBackHash (Ertl, 2024): the bucket of hash `h` among `buckets`.
///
/// Buckets are grouped by bit length: level `k` holds `2^k..2^(k+1)`. One
/// pseudo-random draw (splitmix64 seeded with `h`) decides, for every level
/// at once, whether the key's last "jump" landed there, and where inside it.
/// The key goes to the highest such level whose bucket exists; only in the
/// top, partly filled level can the chosen bucket be missing, and then the
/// key "jumps back" by further draws until it hits an existing bucket of
/// that level or falls below it. Adding a bucket therefore moves keys only
/// into the new bucket. Expected O(1) draws, integer arithmetic only.
#[inline]
pub fn jump_back_hash(h: u64, buckets: u32) -> u32 {
    if buckets <= 1 {
        return 0;
    }
    let mut rng = SplitMix64::new(h);
    let r0 = rng.next();
    let mut levels = ((r0 ^ (r0 >> 32)) as u32) & (u32::MAX >> (buckets - 1).leading_zeros());
    loop {
        if levels == 0 {
            return 0;
        }
        let min = 1u32 << (31 - levels.leading_zeros());
        // Offset bits from one half of r0 or the other, by parity of the
        // number of levels still in play.
        let offset = (r0 >> ((levels.count_ones() << 5) & 63)) as u32 & (min - 1);
        let candidate = min + offset;
        if candidate < buckets {
            return candidate;
        }
        let range_mask = min.wrapping_shl(1).wrapping_sub(1);
        'draws: loop {
            let r1 = rng.next();
            for c in [r1 as u32 & range_mask, (r1 >> 32) as u32 & range_mask] {
                if c < min {
                    // Fell below the level: the key's jump was from lower down.
                    break 'draws;
                }
                if c < buckets {
                    return c;
                }
            }
        }
        levels ^= min;
    }
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
        jump_back_hash(h, self.fragments)
    }

    fn add_fragment(&mut self) -> Result<MigrationPlan, SchemeError> {
        let before = self.fragments;
        *self = Jump::new(before.saturating_add(1))?;
        Ok(add_plan(
            before,
            (0..before).map(|from| Move::Filter { from }).collect(),
        ))
    }

    fn remove_fragment(&mut self, which: u32) -> Result<MigrationPlan, SchemeError> {
        let plan = remove_last("jump", which, self.fragments)?;
        self.fragments -= 1;
        Ok(plan)
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

    #[test]
    fn one_bucket_takes_everything() {
        for k in [0u64, 1, 12345, u64::MAX] {
            assert_eq!(jump_back_hash(k, 1), 0);
            assert_eq!(jump_back_hash(k, 0), 0);
        }
    }

    #[test]
    fn growth_moves_only_to_new_bucket() {
        let mut r = SplitMix64::new(5);
        for _ in 0..20_000 {
            let x = r.next();
            let mut prev = 0;
            for n in 1..300 {
                let b = jump_back_hash(x, n);
                assert!(b < n);
                assert!(
                    b == prev || b == n - 1,
                    "key {x:#x}: {prev} then {b} at n={n}"
                );
                prev = b;
            }
        }
    }

    #[test]
    fn large_counts_stay_in_range() {
        let mut r = SplitMix64::new(9);
        for n in [1u32 << 20, (1 << 30) + 7, u32::MAX >> 1] {
            for _ in 0..10_000 {
                assert!(jump_back_hash(r.next(), n) < n);
            }
        }
    }

    /// For a uniform placement, Pearson's statistic over `n` buckets has
    /// mean `n - 1` and sd `sqrt(2(n - 1))`; six sd above the mean is a
    /// false alarm once in about a billion, while a bias of 1% on one
    /// bucket out of 3 adds about 33 at 300,000 keys.
    #[test]
    fn uniform_at_awkward_counts() {
        let mut r = SplitMix64::new(77);
        for n in [3u32, 5, 6, 7, 100, 1000, 1025] {
            let m = 300_000u64;
            let mut c = vec![0u64; n as usize];
            for _ in 0..m {
                c[jump_back_hash(r.next(), n) as usize] += 1;
            }
            let e = m as f64 / f64::from(n);
            let chi2: f64 = c.iter().map(|&x| (x as f64 - e).powi(2) / e).sum();
            let df = f64::from(n - 1);
            assert!(chi2 < df + 6.0 * (2.0 * df).sqrt(), "n={n}: chi2 {chi2:.1}");
        }
    }
}
