//! Migration plans: what an add, remove, split or rebalance moves.
//!
//! # The contract
//!
//! Fragment ids in [`MigrationPlan::moves`] are the ids *before* the
//! operation (the old numbering). What a plan promises depends on its kind:
//!
//! - **Range plans** (`ring`, `slots`: every move is a [`Move::Ranges`]) are
//!   exact: [`MigrationPlan::covers`]`(h, old)` is true **if and only if**
//!   the key changes fragment, and the move names where it goes. A store
//!   keyed by hash reads only the records that move.
//! - **Filter plans** (`linear`, `jump`: moves are [`Move::Filter`]) name
//!   the fragments that can lose keys. `covers(h, old)` is true for
//!   **every** key of a filtered fragment, whether it moves or not: a
//!   superset of the keys that move. No key outside a filtered fragment
//!   moves. A store scans each filtered fragment and moves the keys whose
//!   fragment changed. For example a `jump` add from 50 to 51 fragments
//!   covers every key, while about 1 in 51 moves.
//!
//! # Renumbering and where a key goes
//!
//! A removal keeps ids dense (`0..N`): when the removed fragment is not the
//! last, the last fragment takes its id ([`MigrationPlan::renumber`]). Its
//! keys stay where they are; only the name changes. So after removing
//! fragment 3 of 10, a key that never moved may have a new id (9 became 3),
//! and comparing ids across the operation (`after != before`) is wrong for
//! exactly those keys.
//!
//! [`MigrationPlan::destination`] answers "where is this key after the
//! operation, in the new numbering" from the plan alone, for every key of a
//! range plan and for every key outside the filtered fragments of a filter
//! plan. For a key of a filtered fragment only the new scheme can tell
//! (`None`: ask its [`locate`](crate::FragmentScheme::locate)). For every
//! key, `new_scheme.locate(h)` equals
//! `plan.destination(h, old_scheme.locate(h))` whenever that is `Some`.

use serde::{Deserialize, Serialize};

/// An inclusive range of key hashes `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HashRange {
    /// First hash in the range.
    pub start: u64,
    /// Last hash in the range (inclusive, so `u64::MAX` is expressible).
    pub end: u64,
}

impl HashRange {
    /// The range `start..=end`. Panics in debug builds if `start > end`.
    pub fn new(start: u64, end: u64) -> HashRange {
        debug_assert!(start <= end);
        HashRange { start, end }
    }

    /// Whether `h` lies in the range.
    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        self.start <= h && h <= self.end
    }

    /// The fraction of the whole hash space the range covers.
    pub fn fraction(&self) -> f64 {
        ((self.end - self.start) as f64 + 1.0) / 18_446_744_073_709_551_616.0
    }
}

/// One step of a plan, in the old numbering.
///
/// ```
/// use fraghash::scheme::slots::Slots;
/// use fraghash::{key_hash, FragmentScheme, Move};
///
/// let mut scheme = Slots::new(4)?;
/// let h = key_hash(b"a key");
/// let old = scheme.locate(h);
/// let plan = scheme.add_fragment()?;
/// for m in &plan.moves {
///     // Slots gives range moves: the keys of `from` in `ranges` go to `to`.
///     let Move::Ranges { from, to, ranges } = m else { unreachable!() };
///     assert_eq!((m.from(), *to), (*from, 4));
///     assert_eq!(scheme.locate(ranges[0].start), 4);
/// }
/// // A key moves if and only if a range move from its fragment covers it.
/// let moved = plan.moves.iter().any(|m| m.from() == old && m.covers(h));
/// assert_eq!(moved, scheme.locate(h) != old);
/// # Ok::<(), fraghash::SchemeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Move {
    /// Every key of `from` whose hash lies in one of `ranges` moves to `to`.
    /// Ranges are sorted, disjoint and not adjacent (adjacent ones are merged).
    Ranges {
        /// Source fragment.
        from: u32,
        /// Destination fragment.
        to: u32,
        /// The hash ranges that move.
        ranges: Vec<HashRange>,
    },
    /// Scan every key of `from`; each key whose fragment under the new state
    /// differs moves there.
    Filter {
        /// The fragment to scan.
        from: u32,
    },
}

impl Move {
    /// The source fragment.
    pub fn from(&self) -> u32 {
        match self {
            Move::Ranges { from, .. } | Move::Filter { from } => *from,
        }
    }

    /// Whether a key with hash `h`, if it is in [`Move::from`], is one this
    /// move reads: for a range move, whether `h` lies in its ranges (and
    /// then the key moves); for a filter move, always (the key may or may
    /// not move).
    pub fn covers(&self, h: u64) -> bool {
        match self {
            Move::Ranges { ranges, .. } => ranges_contain(ranges, h),
            Move::Filter { .. } => true,
        }
    }
}

/// What kind of change produced a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanKind {
    /// A fragment was added with this id.
    Add {
        /// The new fragment.
        fragment: u32,
    },
    /// This fragment was removed.
    Remove {
        /// The removed fragment (old numbering).
        fragment: u32,
    },
    /// `source` was split; `fragment` is the new fragment that took half of it.
    Split {
        /// The fragment that was split.
        source: u32,
        /// The new fragment.
        fragment: u32,
    },
    /// Slots moved between existing fragments (rebalance or new weights).
    Rebalance,
}

impl std::fmt::Display for PlanKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            PlanKind::Add { fragment } => write!(f, "added fragment {fragment}"),
            PlanKind::Remove { fragment } => write!(f, "removed fragment {fragment}"),
            PlanKind::Split { source, fragment } => {
                write!(f, "split fragment {source} into {source} and {fragment}")
            }
            PlanKind::Rebalance => f.write_str("rebalanced"),
        }
    }
}

/// After a removal, fragment `from` (the old last one) takes id `to` (the
/// removed one's). Its keys stay where they are; only the name changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renumber {
    /// Old id (always the old last fragment).
    pub from: u32,
    /// New id (the removed fragment's old id).
    pub to: u32,
}

/// The exact description of which keys an operation moves (see the
/// [module docs](self) for what it promises for range and filter plans).
///
/// ```
/// use fraghash::{AnyScheme, FragmentScheme, PlanKind, Renumber};
///
/// // A range plan: removing fragment 3 of 10 from `slots`.
/// let mut slots = AnyScheme::new("slots", 10)?;
/// let plan = slots.remove_fragment(3)?;
/// assert_eq!(plan.kind, PlanKind::Remove { fragment: 3 });
/// assert_eq!((plan.fragments_before, plan.fragments_after), (10, 9));
/// assert!(plan.is_range_plan());
/// assert_eq!(plan.sources(), vec![3]); // only fragment 3 loses keys
/// // The last fragment takes the removed one's id.
/// assert_eq!(plan.renumber, Some(Renumber { from: 9, to: 3 }));
/// assert_eq!(plan.old_to_new(9), Some(3));
/// assert_eq!(plan.old_to_new(3), None);
/// assert_eq!(plan.new_to_old(3), 9);
///
/// // A filter plan: a `jump` add scans every fragment.
/// let mut jump = AnyScheme::new("jump", 10)?;
/// let plan = jump.add_fragment()?;
/// assert!(!plan.is_range_plan());
/// assert_eq!(plan.sources(), (0..10).collect::<Vec<u32>>());
/// // Reading it costs every key of every fragment (100 keys each here).
/// assert_eq!(plan.keys_scanned(|_| 100, |_| 0), 1000);
/// # Ok::<(), fraghash::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationPlan {
    /// What happened.
    pub kind: PlanKind,
    /// Fragment count before.
    pub fragments_before: u32,
    /// Fragment count after.
    pub fragments_after: u32,
    /// The moves, in old numbering. Empty when nothing moves.
    pub moves: Vec<Move>,
    /// Renumbering applied after the moves, if any.
    pub renumber: Option<Renumber>,
}

impl MigrationPlan {
    /// Whether this is a range plan (every move lists hash ranges).
    pub fn is_range_plan(&self) -> bool {
        self.moves.iter().all(|m| matches!(m, Move::Ranges { .. }))
    }

    /// The fragments that can lose keys (sorted, deduplicated): the ones a
    /// store must read or lock as sources.
    pub fn sources(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.moves.iter().map(Move::from).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Whether the plan reads a key with hash `h` that was in fragment `old`
    /// (old numbering) before the operation.
    ///
    /// - By a range move: true if and only if the key changes fragment.
    /// - By a filter move: true for every key of the filtered fragment, a
    ///   superset of the keys that move.
    ///
    /// So for a range plan `covers` is exactly "the key moves"; for a filter
    /// plan it is "the key's fragment is scanned" (see the [module
    /// docs](self)). To know where a key goes, use
    /// [`MigrationPlan::destination`].
    pub fn covers(&self, h: u64, old: u32) -> bool {
        self.moves.iter().any(|m| m.from() == old && m.covers(h))
    }

    /// Where a key with hash `h` that was in fragment `old` (old numbering)
    /// is after the operation, **in the new numbering** (ids
    /// `0..fragments_after`, renumbering applied).
    ///
    /// - `Some(id)` for every key of a range plan: the destination of the
    ///   range move that covers it, or its own fragment's new id if none
    ///   does. Then `new_scheme.locate(h) == id`.
    /// - `Some(id)` for a key of a filter plan whose fragment no move
    ///   scans: it stays, under its fragment's new id.
    /// - `None` for a key of a fragment a filter move scans: only the new
    ///   scheme can tell (its `locate(h)` is the answer), and for an `old`
    ///   that is not a fragment before the operation.
    ///
    /// ```
    /// use fraghash::{key_hash, AnyScheme, FragmentScheme};
    ///
    /// let mut scheme = AnyScheme::new("slots", 10)?;
    /// let hashes: Vec<u64> = (0..1000u32).map(|i| key_hash(&i.to_le_bytes())).collect();
    /// let before: Vec<u32> = hashes.iter().map(|&h| scheme.locate(h)).collect();
    ///
    /// // Removing fragment 3 of 10: its keys move, and fragment 9 becomes 3.
    /// let plan = scheme.remove_fragment(3)?;
    /// for (&h, &old) in hashes.iter().zip(&before) {
    ///     assert_eq!(plan.destination(h, old), Some(scheme.locate(h)));
    /// }
    /// # Ok::<(), fraghash::Error>(())
    /// ```
    pub fn destination(&self, h: u64, old: u32) -> Option<u32> {
        if old >= self.fragments_before {
            return None;
        }
        if self
            .moves
            .iter()
            .any(|m| matches!(m, Move::Filter { from } if *from == old))
        {
            return None;
        }
        let to = self.moves.iter().find_map(|m| match m {
            Move::Ranges { from, to, ranges } if *from == old && ranges_contain(ranges, h) => {
                Some(*to)
            }
            _ => None,
        });
        self.old_to_new(to.unwrap_or(old))
    }

    /// Number of range entries over all moves.
    pub fn range_count(&self) -> usize {
        self.moves
            .iter()
            .map(|m| match m {
                Move::Ranges { ranges, .. } => ranges.len(),
                Move::Filter { .. } => 0,
            })
            .sum()
    }

    /// How many keys the plan reads, given the key count of each fragment
    /// (for filter moves) and of each hash range (for range moves).
    ///
    /// For a range plan this equals the number of keys that move.
    pub fn keys_scanned(
        &self,
        fragment_keys: impl Fn(u32) -> u64,
        range_keys: impl Fn(&HashRange) -> u64,
    ) -> u64 {
        // Each filtered fragment is read once, however many moves name it.
        let mut filtered: Vec<u32> = self
            .moves
            .iter()
            .filter_map(|m| match m {
                Move::Filter { from } => Some(*from),
                Move::Ranges { .. } => None,
            })
            .collect();
        filtered.sort_unstable();
        filtered.dedup();
        filtered.into_iter().map(fragment_keys).sum::<u64>() + self.keys_in_ranges(range_keys)
    }

    /// How many keys the range moves of the plan carry, given per-range
    /// counts. Filter moves are not counted (only a scan can tell).
    pub fn keys_in_ranges(&self, range_keys: impl Fn(&HashRange) -> u64) -> u64 {
        self.moves
            .iter()
            .map(|m| match m {
                Move::Ranges { ranges, .. } => ranges.iter().map(&range_keys).sum(),
                Move::Filter { .. } => 0,
            })
            .sum()
    }

    /// Maps a fragment id from the new numbering back to the old one.
    pub fn new_to_old(&self, new_id: u32) -> u32 {
        match self.renumber {
            Some(r) if new_id == r.to => r.from,
            _ => new_id,
        }
    }

    /// Maps a fragment id from the old numbering to the new one
    /// (`None` for a removed fragment).
    pub fn old_to_new(&self, old_id: u32) -> Option<u32> {
        match (self.kind, self.renumber) {
            (PlanKind::Remove { fragment }, _) if old_id == fragment => None,
            (_, Some(r)) if old_id == r.from => Some(r.to),
            _ => Some(old_id),
        }
    }
}

/// Binary search over sorted, disjoint ranges.
pub(crate) fn ranges_contain(ranges: &[HashRange], h: u64) -> bool {
    let i = ranges.partition_point(|r| r.end < h);
    i < ranges.len() && ranges[i].start <= h
}

/// A piecewise-constant owner map of the hash space: sorted interval starts,
/// the first at 0, each interval running to the next start minus one (the
/// last to `u64::MAX`).
pub(crate) type Ownership = Vec<(u64, u32)>;

/// Builds the exact range moves between two ownerships of the hash space.
///
/// `new_owner_to_old` maps owner ids of `new` into the old numbering. The
/// result lists, per `(from, to)` pair in order of first appearance, merged
/// ranges. O(|old| + |new|).
pub(crate) fn diff_ownership(
    old: &Ownership,
    new: &Ownership,
    new_owner_to_old: impl Fn(u32) -> u32,
) -> Vec<Move> {
    debug_assert!(old.first().map(|p| p.0) == Some(0));
    debug_assert!(new.first().map(|p| p.0) == Some(0));
    let mut moves: Vec<Move> = Vec::new();
    let mut index: std::collections::HashMap<(u32, u32), usize> = Default::default();
    let (mut i, mut j) = (0usize, 0usize);
    let mut pos: u64 = 0;
    loop {
        let a = old[i].1;
        let b = new_owner_to_old(new[j].1);
        let next_old = old.get(i + 1).map(|p| p.0);
        let next_new = new.get(j + 1).map(|p| p.0);
        let next = match (next_old, next_new) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (Some(x), None) | (None, Some(x)) => Some(x),
            (None, None) => None,
        };
        let end = next.map_or(u64::MAX, |n| n - 1);
        if a != b {
            let k = *index.entry((a, b)).or_insert_with(|| {
                moves.push(Move::Ranges {
                    from: a,
                    to: b,
                    ranges: Vec::new(),
                });
                moves.len() - 1
            });
            if let Move::Ranges { ranges, .. } = &mut moves[k] {
                match ranges.last_mut() {
                    Some(last) if last.end.checked_add(1) == Some(pos) => last.end = end,
                    _ => ranges.push(HashRange::new(pos, end)),
                }
            }
        }
        let Some(n) = next else { break };
        pos = n;
        if next_old == Some(n) {
            i += 1;
        }
        if next_new == Some(n) {
            j += 1;
        }
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_merges_adjacent_ranges() {
        let old: Ownership = vec![(0, 0), (100, 1), (200, 0)];
        let new: Ownership = vec![(0, 0), (50, 2), (150, 2), (300, 0)];
        let moves = diff_ownership(&old, &new, |x| x);
        assert_eq!(
            moves,
            vec![
                Move::Ranges {
                    from: 0,
                    to: 2,
                    ranges: vec![HashRange::new(50, 99), HashRange::new(200, 299)]
                },
                Move::Ranges {
                    from: 1,
                    to: 2,
                    ranges: vec![HashRange::new(100, 199)]
                },
            ]
        );
    }

    #[test]
    fn diff_of_equal_is_empty_and_reaches_max() {
        let o: Ownership = vec![(0, 3), (u64::MAX, 4)];
        assert!(diff_ownership(&o, &o, |x| x).is_empty());
        let n: Ownership = vec![(0, 3)];
        let m = diff_ownership(&o, &n, |x| x);
        assert_eq!(
            m,
            vec![Move::Ranges {
                from: 4,
                to: 3,
                ranges: vec![HashRange::new(u64::MAX, u64::MAX)]
            }]
        );
    }

    #[test]
    fn keys_scanned_reads_each_filtered_fragment_once() {
        let plan = MigrationPlan {
            kind: PlanKind::Rebalance,
            fragments_before: 3,
            fragments_after: 3,
            moves: vec![
                Move::Filter { from: 2 },
                Move::Ranges {
                    from: 0,
                    to: 1,
                    ranges: vec![HashRange::new(0, 9), HashRange::new(20, 29)],
                },
                Move::Filter { from: 2 },
                Move::Filter { from: 1 },
            ],
            renumber: None,
        };
        let scanned = plan.keys_scanned(|f| u64::from(f) * 100, |r| r.end - r.start + 1);
        assert_eq!(scanned, 200 + 100 + 20);
    }

    #[test]
    fn range_search() {
        let r = [HashRange::new(5, 9), HashRange::new(20, 20)];
        assert!(!ranges_contain(&r, 4));
        assert!(ranges_contain(&r, 5));
        assert!(ranges_contain(&r, 9));
        assert!(!ranges_contain(&r, 10));
        assert!(ranges_contain(&r, 20));
        assert!(!ranges_contain(&r, 21));
    }
}
