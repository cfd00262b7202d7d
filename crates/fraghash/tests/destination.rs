//! Where keys go after an operation, in the new numbering, and exactly what
//! `covers` promises for range and for filter plans.

use fraghash::keys::SplitMix64;
use fraghash::{AnyScheme, FragmentScheme, MigrationPlan, Move};
use proptest::prelude::*;

fn hashes(seed: u64, n: usize) -> Vec<u64> {
    let mut r = SplitMix64::new(seed);
    let mut v: Vec<u64> = (0..n).map(|_| r.next()).collect();
    v.extend([0, u64::MAX]);
    v
}

/// Every key: its fragment under the new scheme is the plan's destination
/// of its old fragment. `filtered` keys (filter plans) get `None`.
fn check_destinations(before: &AnyScheme, after: &AnyScheme, plan: &MigrationPlan, keys: &[u64]) {
    for &h in keys {
        let old = before.locate(h);
        let new = after.locate(h);
        let scanned = plan
            .moves
            .iter()
            .any(|m| matches!(m, Move::Filter { from } if *from == old));
        if scanned {
            assert_eq!(plan.destination(h, old), None);
        } else {
            assert_eq!(
                plan.destination(h, old),
                Some(new),
                "{}: h={h:#x} old={old}",
                before.spec()
            );
        }
    }
}

/// `slots` and `ring` remove any fragment: for every fragment of 10 and
/// every key, `new.locate(h) == destination(h, old.locate(h))`, renumbering
/// included.
#[test]
fn removing_any_fragment_range_schemes() {
    let keys = hashes(11, 20_000);
    for spec in ["slots", "ring", "ring:7"] {
        for which in 0..10 {
            let before = AnyScheme::new(spec, 10).unwrap();
            let mut after = before.clone();
            let plan = after.remove_fragment(which).unwrap();
            assert!(plan.is_range_plan());
            for &h in &keys {
                let old = before.locate(h);
                assert_eq!(
                    plan.destination(h, old),
                    Some(after.locate(h)),
                    "{spec} minus {which}: h={h:#x} old={old}"
                );
            }
        }
    }
}

/// `jump` and `linear` remove the last fragment only: every key outside it
/// keeps its id (`Some`); the removed fragment is the one filtered (`None`,
/// only the new scheme knows where each of its keys goes).
#[test]
fn removing_the_last_fragment_filter_schemes() {
    let keys = hashes(12, 20_000);
    for spec in ["jump", "linear"] {
        for n in [2u32, 7, 50] {
            let before = AnyScheme::new(spec, n).unwrap();
            let mut after = before.clone();
            let plan = after.remove_fragment(n - 1).unwrap();
            assert_eq!(plan.sources(), vec![n - 1]);
            check_destinations(&before, &after, &plan, &keys);
            for &h in &keys {
                if before.locate(h) != n - 1 {
                    assert_eq!(plan.destination(h, before.locate(h)), Some(after.locate(h)));
                }
            }
        }
    }
}

/// The old README pattern `covers(h, before) == (after != before)` breaks
/// after a removal that renumbers: the keys of the last fragment did not
/// move but have a new id. `destination` is right for them.
#[test]
fn renumbered_keys_did_not_move() {
    let before = AnyScheme::new("slots", 10).unwrap();
    let mut after = before.clone();
    let plan = after.remove_fragment(3).unwrap();
    let mut renamed = 0;
    for h in hashes(13, 10_000) {
        let old = before.locate(h);
        if old == 9 {
            renamed += 1;
            assert!(!plan.covers(h, old));
            assert_eq!(after.locate(h), 3);
            assert_eq!(plan.destination(h, old), Some(3));
        }
    }
    // About a tenth of 10,000 keys; far from zero at any seed.
    assert!(renamed > 500, "{renamed}");
    assert_eq!(plan.destination(1, 10), None, "no fragment 10 before");
}

/// A `jump` add from 50 to 51 covers every key (each fragment is scanned)
/// while only the keys that land in fragment 50 move.
#[test]
fn filter_plans_cover_a_superset_of_the_movers() {
    let before = AnyScheme::new("jump", 50).unwrap();
    let mut after = before.clone();
    let plan = after.add_fragment().unwrap();
    let keys = hashes(14, 51_000);
    let mut moved = 0;
    for &h in &keys {
        let old = before.locate(h);
        assert!(plan.covers(h, old));
        assert_eq!(plan.destination(h, old), None);
        if after.locate(h) != old {
            moved += 1;
        }
    }
    // Moved keys ~ Binomial(51,002, 1/51): mean 1,000, sd
    // sqrt(51,002 · 1/51 · 50/51) = 31.3; 6 sd either side.
    assert!((812..=1188).contains(&moved), "{moved}");
}

fn spec() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("linear"),
        Just("ring:5"),
        Just("ring:60"),
        Just("jump"),
        Just("slots")
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The contract of `covers`, exactly: range plans cover a key iff it
    /// changes fragment; filter plans cover exactly the keys of the
    /// filtered fragments, and no other key moves. Any removal the scheme
    /// allows, or an add.
    #[test]
    fn covers_contract(spec in spec(), n in 2u32..40, pick in any::<u32>(), add in any::<bool>(), seed in any::<u64>()) {
        let before = AnyScheme::new(spec, n).unwrap();
        let mut after = before.clone();
        let plan = if add {
            after.add_fragment().unwrap()
        } else if before.scheme_spec().removes_any() {
            after.remove_fragment(pick % n).unwrap()
        } else {
            after.remove_fragment(n - 1).unwrap()
        };
        prop_assert_eq!(plan.is_range_plan(), before.scheme_spec().range_plans());
        for h in hashes(seed, 2000) {
            let old = before.locate(h);
            let new = after.locate(h);
            let moved = plan.new_to_old(new) != old;
            if plan.is_range_plan() {
                prop_assert_eq!(plan.covers(h, old), moved);
                prop_assert_eq!(plan.destination(h, old), Some(new));
            } else {
                let filtered = plan.sources().contains(&old);
                prop_assert_eq!(plan.covers(h, old), filtered);
                prop_assert!(filtered || !moved);
                prop_assert_eq!(plan.destination(h, old), if filtered { None } else { Some(new) });
            }
        }
    }
}
