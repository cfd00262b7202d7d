//! `ring`: a consistent-hash ring, `P` points per fragment, as in Igor
//! Ribeiro Sucupira's posts "Consistent hashing for Mnesia fragments"
//! (2009), where `P` is 100.
//!
//! Each fragment has a *token* (its id when it was added) and `P` points at
//! positions `xxh3_64(token ‖ point)`. A key belongs to the first point at or
//! after its hash, wrapping past `u64::MAX` to the first point. Equal
//! positions are broken by (token, point index): the smallest wins, the
//! others own nothing. Tokens, not ids, fix the positions, so the fragment
//! renumbered by a removal keeps its points.
//!
//! Lookup is O(1) expected: a bucket index over the top bits of the hash
//! (about one point per bucket) gives the first candidate point, then a short
//! forward scan. Memory is `N·P·12` bytes for points and owners plus about
//! `N·P·4` bytes of index. The serialised state is only the tokens
//! (`8·N` bytes); the sorted ring is rebuilt on decode, O(N·P·log(N·P)).
//!
//! An add or remove moves exactly the arcs that change owner (a range plan),
//! but those arcs come from up to `P` fragments. Balance: stddev about
//! `1/sqrt(P)` of the mean (about 10% at `P = 100`).

use serde::{Deserialize, Serialize};

use super::{add_plan, check_removable, removal_plan, removal_renumber, FragmentScheme};
use crate::error::{SchemeError, StateError};
use crate::plan::{diff_ownership, MigrationPlan, Ownership};
use crate::state::{self, tag};

/// A consistent-hash ring.
///
/// ```
/// use fraghash::scheme::ring::Ring;
/// use fraghash::{key_hash, FragmentScheme, Renumber};
///
/// let mut ring = Ring::new(6, 100)?;
/// let hashes: Vec<u64> = (0..5000u32).map(|i| key_hash(&i.to_le_bytes())).collect();
/// let before: Vec<u32> = hashes.iter().map(|&h| ring.locate(h)).collect();
///
/// // Remove fragment 0: its arcs go to the next points on the ring, and
/// // fragment 5 takes id 0 (its points stay where they were).
/// let plan = ring.remove_fragment(0)?;
/// assert!(plan.is_range_plan());
/// assert_eq!(plan.renumber, Some(Renumber { from: 5, to: 0 }));
/// for (&h, &old) in hashes.iter().zip(&before) {
///     assert_eq!(plan.covers(h, old), old == 0); // exactly the keys of 0
///     assert_eq!(plan.destination(h, old), Some(ring.locate(h)));
/// }
/// assert_eq!(ring.spec(), "ring");
/// assert_eq!(Ring::new(3, 7)?.spec(), "ring:7");
/// # Ok::<(), fraghash::SchemeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Ring {
    points_per_fragment: u32,
    /// Token of each fragment, indexed by fragment id.
    tokens: Vec<u64>,
    /// Next token to hand out (never reused).
    next_token: u64,
    /// Sorted, distinct point positions.
    positions: Vec<u64>,
    /// Owner fragment of each position.
    owners: Vec<u32>,
    /// `index[b]`: the first position `>= b << shift`; `len + 1` entries.
    index: Vec<u32>,
    shift: u32,
}

impl PartialEq for Ring {
    fn eq(&self, other: &Self) -> bool {
        self.points_per_fragment == other.points_per_fragment
            && self.tokens == other.tokens
            && self.next_token == other.next_token
    }
}

#[derive(Serialize, Deserialize)]
struct RingState {
    points_per_fragment: u32,
    tokens: Vec<u64>,
    next_token: u64,
}

impl Ring {
    /// Points per fragment when the spec does not say (100, as in the posts
    /// the module docs name).
    pub const DEFAULT_POINTS: u32 = 100;
    /// Most points per fragment.
    pub const MAX_POINTS: u32 = 10_000;
    /// Most points on the ring (`N·P`), which bounds memory to about 320 MiB.
    pub const MAX_TOTAL_POINTS: u64 = 1 << 24;
    const MAX_INDEX_BITS: u32 = 24;

    /// A ring of `fragments` fragments with `points` points each.
    pub fn new(fragments: u32, points: u32) -> Result<Ring, SchemeError> {
        if fragments == 0 {
            return Err(SchemeError::ZeroFragments);
        }
        Self::check_points(points).map_err(SchemeError::InvalidArgument)?;
        Self::check_total(fragments, points)?;
        Ok(Ring::from_parts(
            points,
            (0..u64::from(fragments)).collect(),
            u64::from(fragments),
        ))
    }

    fn check_points(points: u32) -> Result<(), String> {
        if points == 0 || points > Self::MAX_POINTS {
            return Err(format!(
                "ring points per fragment must be 1..={}, not {points}",
                Self::MAX_POINTS
            ));
        }
        Ok(())
    }

    /// The most fragments a ring with `points` points each can hold.
    pub fn max_fragments(points: u32) -> u32 {
        (Self::MAX_TOTAL_POINTS / u64::from(points.max(1))).min(u64::from(u32::MAX)) as u32
    }

    fn check_total(fragments: u32, points: u32) -> Result<(), SchemeError> {
        if fragments > Self::max_fragments(points) {
            return Err(SchemeError::TooManyFragments {
                scheme: "ring",
                max: Self::max_fragments(points),
            });
        }
        Ok(())
    }

    /// Points per fragment.
    pub fn points_per_fragment(&self) -> u32 {
        self.points_per_fragment
    }

    /// Bytes of memory the lookup structures take.
    pub fn memory_bytes(&self) -> usize {
        self.positions.len() * 8
            + self.owners.len() * 4
            + self.index.len() * 4
            + self.tokens.len() * 8
    }

    /// Position of point `point` of the fragment with token `token`.
    pub fn point_position(token: u64, point: u32) -> u64 {
        let mut buf = [0u8; 12];
        buf[..8].copy_from_slice(&token.to_le_bytes());
        buf[8..].copy_from_slice(&point.to_le_bytes());
        crate::key_hash(&buf)
    }

    fn from_parts(points_per_fragment: u32, tokens: Vec<u64>, next_token: u64) -> Ring {
        // (position, token, point, owner): sorting gives the tie rule.
        let mut all: Vec<(u64, u64, u32, u32)> =
            Vec::with_capacity(tokens.len() * points_per_fragment as usize);
        for (id, &t) in tokens.iter().enumerate() {
            for p in 0..points_per_fragment {
                all.push((Self::point_position(t, p), t, p, id as u32));
            }
        }
        all.sort_unstable();
        all.dedup_by_key(|e| e.0);
        let positions: Vec<u64> = all.iter().map(|e| e.0).collect();
        let owners: Vec<u32> = all.iter().map(|e| e.3).collect();
        drop(all);
        Ring::indexed(points_per_fragment, tokens, next_token, positions, owners)
    }

    /// This ring plus a fragment of token `token`, larger than every token
    /// present. Then an existing point wins every tie with a new one (the
    /// smaller token wins), so the new fragment's points merge into the
    /// sorted ring as they are: O(N·P) instead of a rebuild's
    /// O(N·P·log(N·P)), and the same ring (tested against a rebuild).
    fn with_added(&self, token: u64) -> Ring {
        debug_assert!(self.tokens.iter().all(|&t| t < token));
        let id = self.tokens.len() as u32;
        let mut new: Vec<(u64, u32)> = (0..self.points_per_fragment)
            .map(|p| (Self::point_position(token, p), p))
            .collect();
        new.sort_unstable();
        new.dedup_by_key(|e| e.0);
        let total = self.positions.len() + new.len();
        let mut positions = Vec::with_capacity(total);
        let mut owners = Vec::with_capacity(total);
        let mut j = 0;
        for (i, &pos) in self.positions.iter().enumerate() {
            while j < new.len() && new[j].0 < pos {
                positions.push(new[j].0);
                owners.push(id);
                j += 1;
            }
            if j < new.len() && new[j].0 == pos {
                j += 1;
            }
            positions.push(pos);
            owners.push(self.owners[i]);
        }
        for &(pos, _) in &new[j..] {
            positions.push(pos);
            owners.push(id);
        }
        let mut tokens = self.tokens.clone();
        tokens.push(token);
        Ring::indexed(
            self.points_per_fragment,
            tokens,
            token + 1,
            positions,
            owners,
        )
    }

    /// A ring from its sorted, distinct point positions and their owners,
    /// with the bucket index built.
    fn indexed(
        points_per_fragment: u32,
        tokens: Vec<u64>,
        next_token: u64,
        positions: Vec<u64>,
        owners: Vec<u32>,
    ) -> Ring {
        // About one point per bucket keeps the scan after the index short.
        let bits = (usize::BITS - positions.len().leading_zeros()).clamp(1, Self::MAX_INDEX_BITS);
        let shift = 64 - bits;
        let buckets = 1usize << bits;
        let mut index = Vec::with_capacity(buckets + 1);
        let mut i = 0usize;
        for b in 0..buckets {
            let start = (b as u64) << shift;
            while i < positions.len() && positions[i] < start {
                i += 1;
            }
            index.push(i as u32);
        }
        index.push(positions.len() as u32);
        Ring {
            points_per_fragment,
            tokens,
            next_token,
            positions,
            owners,
            index,
            shift,
        }
    }

    /// The ring as a piecewise-constant owner map of the hash space.
    fn ownership(&self) -> Ownership {
        let n = self.positions.len();
        let mut out = Vec::with_capacity(n + 1);
        out.push((0u64, self.owners[0]));
        for i in 0..n {
            if let Some(start) = self.positions[i].checked_add(1) {
                out.push((start, self.owners[(i + 1) % n]));
            }
        }
        // Merge neighbouring intervals with one owner.
        out.dedup_by(|b, a| a.1 == b.1);
        out
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Ring, StateError> {
        let s: RingState = state::decode_body(body)?;
        Self::check_points(s.points_per_fragment).map_err(StateError::Invalid)?;
        let n = u32::try_from(s.tokens.len())
            .map_err(|_| StateError::Invalid("too many tokens".into()))?;
        if n == 0 {
            return Err(StateError::Invalid(
                "a ring needs at least one fragment".into(),
            ));
        }
        Self::check_total(n, s.points_per_fragment)
            .map_err(|e| StateError::Invalid(e.to_string()))?;
        let mut sorted = s.tokens.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(StateError::Invalid("duplicate fragment tokens".into()));
        }
        if sorted.last().is_some_and(|&t| t >= s.next_token) {
            return Err(StateError::Invalid(
                "a token is not below next_token".into(),
            ));
        }
        Ok(Ring::from_parts(
            s.points_per_fragment,
            s.tokens,
            s.next_token,
        ))
    }
}

impl FragmentScheme for Ring {
    fn spec(&self) -> String {
        if self.points_per_fragment == Self::DEFAULT_POINTS {
            "ring".into()
        } else {
            format!("ring:{}", self.points_per_fragment)
        }
    }

    fn fragments(&self) -> u32 {
        self.tokens.len() as u32
    }

    #[inline]
    fn locate(&self, h: u64) -> u32 {
        let b = (h >> self.shift) as usize;
        let mut i = self.index[b] as usize;
        let end = self.index[b + 1] as usize;
        while i < end && self.positions[i] < h {
            i += 1;
        }
        // Past every point of this bucket: the next point is the first of a
        // later bucket, which is `end` (or the wrap to point 0).
        if i == self.positions.len() {
            i = 0;
        }
        self.owners[i]
    }

    fn add_fragment(&mut self) -> Result<MigrationPlan, SchemeError> {
        let before = self.fragments();
        Self::check_total(before + 1, self.points_per_fragment)?;
        let old = self.ownership();
        let token = self.next_token;
        *self = if self.tokens.iter().all(|&t| t < token) {
            self.with_added(token)
        } else {
            // A decoded state may carry tokens at or above its next token.
            let mut tokens = self.tokens.clone();
            tokens.push(token);
            Ring::from_parts(self.points_per_fragment, tokens, token + 1)
        };
        Ok(add_plan(
            before,
            diff_ownership(&old, &self.ownership(), |x| x),
        ))
    }

    fn remove_fragment(&mut self, which: u32) -> Result<MigrationPlan, SchemeError> {
        let before = self.fragments();
        check_removable(which, before)?;
        let old = self.ownership();
        let mut tokens = self.tokens.clone();
        tokens.swap_remove(which as usize);
        *self = Ring::from_parts(self.points_per_fragment, tokens, self.next_token);
        // The rebuilt ring already uses the new ids; moves are in the old.
        let renumber = removal_renumber(which, before);
        let moves = diff_ownership(&old, &self.ownership(), |new_id| match renumber {
            Some(r) if new_id == r.to => r.from,
            _ => new_id,
        });
        Ok(removal_plan(which, before, moves))
    }

    fn to_state_bytes(&self) -> Vec<u8> {
        state::encode(
            tag::RING,
            &RingState {
                points_per_fragment: self.points_per_fragment,
                tokens: self.tokens.clone(),
                next_token: self.next_token,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lookup by plain binary search over the sorted points, as the
    /// definition says: the first point at or after `h`, wrapping.
    fn reference_locate(r: &Ring, h: u64) -> u32 {
        let i = r.positions.partition_point(|&p| p < h);
        r.owners[if i == r.positions.len() { 0 } else { i }]
    }

    /// An add merges the new points into the ring; the result is exactly
    /// the ring rebuilt from its tokens, across adds and removals. (Equal
    /// 64-bit positions do not happen by chance; the forged case at the end
    /// checks the tie rule.)
    #[test]
    fn merged_add_equals_rebuild() {
        for p in [1, 3, 100] {
            let mut r = Ring::new(2, p).unwrap();
            for step in 0..60u32 {
                if step % 7 == 6 {
                    r.remove_fragment(step % r.fragments()).unwrap();
                } else {
                    r.add_fragment().unwrap();
                }
                let rebuilt = Ring::from_parts(p, r.tokens.clone(), r.next_token);
                assert_eq!(r.positions, rebuilt.positions, "p={p} step {step}");
                assert_eq!(r.owners, rebuilt.owners, "p={p} step {step}");
                assert_eq!((r.index.clone(), r.shift), (rebuilt.index, rebuilt.shift));
            }
        }
        // Equal positions, forced: a point of the new token at the position
        // of an existing point must lose the tie to it.
        let r = Ring::new(1, 1).unwrap();
        let mut forged = r.clone();
        forged.positions = vec![Ring::point_position(1, 0)];
        let merged = forged.with_added(1);
        assert_eq!((merged.positions.len(), merged.owners[0]), (1, 0));
    }

    #[test]
    fn indexed_lookup_equals_binary_search() {
        for (n, p) in [(1, 1), (3, 7), (50, 100), (7, 1000)] {
            let r = Ring::new(n, p).unwrap();
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..50_000 {
                x ^= x << 7;
                x ^= x >> 9;
                assert_eq!(r.locate(x), reference_locate(&r, x));
            }
            for &q in r.positions.iter().take(200) {
                for h in [q.wrapping_sub(1), q, q.wrapping_add(1)] {
                    assert_eq!(r.locate(h), reference_locate(&r, h));
                }
            }
            assert_eq!(r.locate(u64::MAX), reference_locate(&r, u64::MAX));
            assert_eq!(r.locate(0), reference_locate(&r, 0));
        }
    }
}
