//! Mnesia's view of a scheme change: which fragments an `add_frag` or a
//! `del_frag` must scan (`IterFrags`) and which it must also lock
//! (`AdditionalLockFrags`), in Mnesia's 1-based fragment numbers.
//!
//! Mnesia cannot read a hash range: it reads every record of each fragment
//! in `IterFrags` and asks `key_to_frag_number` where it goes now. So
//! `IterFrags` is exactly the set of fragments that can lose records (the
//! plan's sources), and the lock list is exactly where records can go.

use std::collections::BTreeSet;

use fraghash::{AnyScheme, FragmentScheme, MigrationPlan, Move, SchemeError, SchemeSpec};

/// The fragment lists of one Mnesia schema change, 1-based, sorted, unique.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragChange {
    /// Fragments to scan (those that can lose records).
    pub iter: Vec<u32>,
    /// Fragments to lock besides `iter` (those that can gain records).
    pub lock: Vec<u32>,
}

/// Adds a fragment. For `slots`, `weight` is the new fragment's weight and
/// `max_donors` bounds the fragments it takes slots from (`u32::MAX`: no
/// bound); the other schemes need `weight == 1` and ignore `max_donors`.
pub fn add(
    scheme: &mut AnyScheme,
    weight: u32,
    max_donors: u32,
) -> Result<FragChange, SchemeError> {
    let plan = match scheme {
        AnyScheme::Slots(_) => scheme.add_limited(weight, max_donors)?,
        _ if weight != 1 => {
            return Err(SchemeError::Unsupported {
                scheme: scheme.scheme_spec().name(),
                operation: "weights",
            })
        }
        _ => scheme.add_fragment()?,
    };
    Ok(FragChange {
        iter: one_based(plan.sources()),
        lock: vec![plan.fragments_after],
    })
}

/// Adds a fragment that takes half of `fragment`'s slots (0-based) and
/// nothing else (`slots` only): the one fragment to scan is `fragment`.
pub fn split(scheme: &mut AnyScheme, fragment: u32) -> Result<FragChange, SchemeError> {
    let plan = scheme.split(fragment)?;
    Ok(FragChange {
        iter: one_based(plan.sources()),
        lock: vec![plan.fragments_after],
    })
}

/// Removes the last fragment, as Mnesia's `del_frag` always does.
pub fn del_last(scheme: &mut AnyScheme) -> Result<FragChange, SchemeError> {
    let spec = scheme.scheme_spec();
    let before = scheme.fragments();
    let last = before.checked_sub(1).ok_or(SchemeError::ZeroFragments)?;
    let plan = scheme.remove_fragment(last)?;
    Ok(FragChange {
        iter: vec![before],
        lock: one_based(destinations(spec, &plan, last)),
    })
}

/// Where the removed last fragment's keys can go (0-based).
fn destinations(spec: SchemeSpec, plan: &MigrationPlan, last: u32) -> Vec<u32> {
    let mut out = BTreeSet::new();
    for m in &plan.moves {
        match m {
            Move::Ranges { to, .. } => {
                out.insert(*to);
            }
            Move::Filter { .. } => match spec {
                // Linear hashing merges the last fragment into the one it
                // was split from: last - 2^floor(log2(last)).
                SchemeSpec::Linear => {
                    out.insert(last - (1 << (31 - last.leading_zeros())));
                }
                // Jump spreads the last fragment's keys over all the others.
                _ => out.extend(0..last),
            },
        }
    }
    out.into_iter().collect()
}

fn one_based(ids: impl IntoIterator<Item = u32>) -> Vec<u32> {
    let set: BTreeSet<u32> = ids.into_iter().map(|i| i + 1).collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fraghash::widen_phash2;

    /// Every key that changes fragment leaves a fragment in `iter` and lands
    /// in one in `iter ∪ lock`; no fragment outside `iter` loses keys.
    fn check(spec: &str, n: u32) {
        let hashes: Vec<u64> = (0..20_000u32)
            .map(|i| widen_phash2(i.wrapping_mul(2_654_435_761)))
            .collect();
        let mut s = AnyScheme::new(spec, n).unwrap();
        let before: Vec<u32> = hashes.iter().map(|&h| s.locate(h) + 1).collect();
        let c = add(&mut s, 1, u32::MAX).unwrap();
        for (h, b) in hashes.iter().zip(&before) {
            let a = s.locate(*h) + 1;
            if a != *b {
                assert!(c.iter.contains(b), "{spec} add: {b} not in {:?}", c.iter);
                assert_eq!(a, n + 1);
            }
        }
        assert_eq!(c.lock, vec![n + 1]);
        let mid: Vec<u32> = hashes.iter().map(|&h| s.locate(h) + 1).collect();
        let c = del_last(&mut s).unwrap();
        assert_eq!(c.iter, vec![n + 1]);
        for (h, m) in hashes.iter().zip(&mid) {
            let a = s.locate(*h) + 1;
            if a != *m {
                assert_eq!(*m, n + 1);
                assert!(c.lock.contains(&a), "{spec} del: {a} not in {:?}", c.lock);
            }
        }
    }

    #[test]
    fn lists_are_exact_enough() {
        for spec in ["linear", "jump", "slots", "ring", "ring:10"] {
            for n in [1, 2, 3, 7, 8, 50] {
                check(spec, n);
            }
        }
    }

    #[test]
    fn donors_bound_iter_frags() {
        let mut s = AnyScheme::new("slots", 50).unwrap();
        let c = add(&mut s, 1, 4).unwrap();
        assert!(c.iter.len() <= 4 && !c.iter.is_empty());
        let mut j = AnyScheme::new("jump", 5).unwrap();
        assert_eq!(add(&mut j, 1, 1).unwrap().iter, vec![1, 2, 3, 4, 5]);
        assert!(add(&mut j, 2, 1).is_err());
    }

    /// A split moves keys out of the named fragment only, into the new one,
    /// about half of them; other schemes refuse it.
    #[test]
    fn split_relieves_one_fragment() {
        let hashes: Vec<u64> = (0..20_000u32)
            .map(|i| widen_phash2(i.wrapping_mul(2_654_435_761)))
            .collect();
        let mut s = AnyScheme::new("slots", 8).unwrap();
        let before: Vec<u32> = hashes.iter().map(|&h| s.locate(h)).collect();
        let c = split(&mut s, 5).unwrap();
        assert_eq!((c.iter, c.lock), (vec![6], vec![9]));
        let mut moved = 0;
        for (h, b) in hashes.iter().zip(&before) {
            let a = s.locate(*h);
            if a != *b {
                assert_eq!((*b, a), (5, 8));
                moved += 1;
            }
        }
        // Fragment 5 held about 20,000 / 8 = 2,500 keys and gives half of
        // its slots: about 1,250 move. Binomial, sd about 33; the slot
        // halves differ by at most one slot's share, so 1,000..1,500 is a
        // wide bound that still fails if the split took a quarter or all.
        let held = before.iter().filter(|&&b| b == 5).count();
        assert!((1_000..=1_500).contains(&moved), "moved {moved} of {held}");
        let mut r = AnyScheme::new("ring", 8).unwrap();
        assert!(split(&mut r, 1).is_err());
        assert!(split(&mut s, 99).is_err());
    }

    #[test]
    fn linear_merge_partner() {
        let mut s = AnyScheme::new("linear", 6).unwrap();
        // Fragment 6 (id 5) was split from id 1 (Mnesia 2).
        assert_eq!(del_last(&mut s).unwrap().lock, vec![2]);
        let mut one = AnyScheme::new("linear", 1).unwrap();
        assert!(del_last(&mut one).is_err());
    }
}
