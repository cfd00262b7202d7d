//! The four invariants of DESIGN.md, for every scheme, over random sequences
//! of adds, removes, splits, weights and rebalances, and random keys:
//!
//! 1. Deterministic: a state decoded from bytes places every hash the same.
//! 2. Monotone: on add, keys move only into the new fragment; on remove,
//!    exactly the keys of the removed fragment move; on split, only keys of
//!    the split fragment move, into the new one.
//! 3. Exact plans: for a range plan, `covers` is true iff the key changes
//!    fragment; for a filter plan, `covers` is true exactly for the keys of
//!    the filtered fragments (a superset of the movers), and no other key
//!    moves. `destination` gives the key's fragment in the new numbering
//!    (`new.locate(h)`) for every key of a range plan and every key outside
//!    the filtered fragments, and `None` inside them.
//! 4. Balance (slots): after adds and removes, every fragment within one
//!    slot of its target; after a rebalance, within the largest slot size.

use fraghash::{AnyScheme, FragmentScheme, MigrationPlan, Move, PlanKind, SchemeError};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add,
    Remove(u32),
    RemoveLast,
    Split(u32),
    Weight(u32, u32),
    AddLimited(u32, u32),
    Rebalance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Add),
        2 => any::<u32>().prop_map(Op::Remove),
        2 => Just(Op::RemoveLast),
        1 => any::<u32>().prop_map(Op::Split),
        1 => (any::<u32>(), prop_oneof![1u32..4, Just(u32::MAX)]).prop_map(|(f, w)| Op::Weight(f, w)),
        1 => (1u32..4, prop_oneof![Just(1u32), 1u32..300]).prop_map(|(d, w)| Op::AddLimited(d, w)),
        1 => any::<u64>().prop_map(Op::Rebalance),
    ]
}

fn spec() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("linear"),
        Just("ring:7"),
        Just("ring:40"),
        Just("jump"),
        Just("slots")
    ]
}

/// Random hashes plus every range boundary of the plan (and one past it).
fn probes(plan: &MigrationPlan, seed: u64) -> Vec<u64> {
    let mut r = fraghash::keys::SplitMix64::new(seed);
    let mut v: Vec<u64> = (0..3000).map(|_| r.next()).collect();
    v.extend([0, u64::MAX]);
    for m in &plan.moves {
        if let Move::Ranges { ranges, .. } = m {
            for rg in ranges.iter().take(64) {
                v.extend([
                    rg.start,
                    rg.end,
                    rg.start.wrapping_sub(1),
                    rg.end.wrapping_add(1),
                ]);
            }
        }
    }
    v
}

fn sizes(s: &AnyScheme, seed: u64) -> Vec<u64> {
    let n = s.as_slots().map_or(0, |x| x.slot_count());
    let mut r = fraghash::keys::SplitMix64::new(seed);
    (0..n).map(|_| r.next() % 1000).collect()
}

fn apply(s: &mut AnyScheme, op: &Op) -> Result<MigrationPlan, SchemeError> {
    let n = s.fragments();
    match *op {
        Op::Add => s.add_fragment(),
        Op::Remove(x) => s.remove_fragment(x % (n + 1)),
        Op::RemoveLast => s.remove_fragment(n - 1),
        Op::Split(x) => s.split(x % n),
        Op::Weight(f, w) => s.set_weight(f % n, w),
        Op::AddLimited(d, w) => s.add_limited(w, d),
        Op::Rebalance(seed) => {
            let z = sizes(s, seed);
            s.rebalance(&z)
        }
    }
}

fn check_plan(
    old: &AnyScheme,
    new: &AnyScheme,
    plan: &MigrationPlan,
    seed: u64,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(plan.fragments_before, old.fragments());
    prop_assert_eq!(plan.fragments_after, new.fragments());
    let is_range = plan.is_range_plan();
    for h in probes(plan, seed) {
        let o = old.locate(h);
        let n_new = new.locate(h);
        let n = plan.new_to_old(n_new);
        let moved = n != o;
        prop_assert!(n_new < new.fragments());
        // 3. Exact plans.
        let filtered = plan
            .moves
            .iter()
            .any(|m| matches!(m, Move::Filter { from } if *from == o));
        if is_range {
            prop_assert_eq!(plan.covers(h, o), moved, "h={:#x} old={} new={}", h, o, n);
            prop_assert_eq!(plan.destination(h, o), Some(n_new), "h={:#x} old={}", h, o);
        } else {
            prop_assert_eq!(plan.covers(h, o), filtered, "h={:#x} old={}", h, o);
            prop_assert!(!moved || filtered, "filter plan misses fragment {}", o);
            let want = if filtered { None } else { Some(n_new) };
            prop_assert_eq!(plan.destination(h, o), want, "h={:#x} old={}", h, o);
        }
        // 2. Monotone.
        match plan.kind {
            PlanKind::Add { fragment } => prop_assert!(!moved || n == fragment),
            PlanKind::Remove { fragment } => prop_assert_eq!(moved, o == fragment),
            PlanKind::Split { source, fragment } => {
                prop_assert!(!moved || (o == source && n == fragment))
            }
            PlanKind::Rebalance => {}
        }
        if let Some(r) = plan.renumber {
            if o == r.from {
                prop_assert_eq!(n_new, r.to);
            }
        }
    }
    Ok(())
}

fn check_balance(s: &AnyScheme, after_rebalance: bool) -> Result<(), TestCaseError> {
    let Some(slots) = s.as_slots() else {
        return Ok(());
    };
    if after_rebalance {
        return Ok(());
    }
    let c = slots.slots_per_fragment();
    let t = slots.target_slots();
    for (i, (&c, &t)) in c.iter().zip(&t).enumerate() {
        prop_assert!(
            c.abs_diff(t) <= 1,
            "fragment {} owns {} slots, target {}",
            i,
            c,
            t
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold(spec in spec(), n in 1u32..24, ops in prop::collection::vec(op(), 1..10), seed in any::<u64>()) {
        let mut s = AnyScheme::new(spec, n).unwrap();
        let mut balanced_ops_only = true;
        for (i, op) in ops.iter().enumerate() {
            let old = s.clone();
            match apply(&mut s, op) {
                Ok(plan) => {
                    check_plan(&old, &s, &plan, seed ^ i as u64)?;
                    if let Op::AddLimited(d, _) = op {
                        prop_assert!(plan.sources().len() <= *d as usize, "{} donors, max {}", plan.sources().len(), d);
                    }
                    if let Some(slots) = s.as_slots() {
                        prop_assert!(slots.slots_per_fragment().iter().all(|&c| c >= 1), "a fragment owns no slot after {:?}", op);
                    }
                    if !matches!(op, Op::Add | Op::Remove(_) | Op::RemoveLast) {
                        balanced_ops_only = false;
                    }
                    check_balance(&s, !balanced_ops_only)?;
                }
                Err(e) => {
                    // A refused operation leaves the state as it was, and is
                    // refused for a reason the scheme documents.
                    prop_assert!(s == old, "state changed by a refused {:?}: {}", op, e);
                    let expected = matches!(e, SchemeError::OnlyLastRemovable { .. }
                        | SchemeError::NoSuchFragment { .. }
                        | SchemeError::LastFragment
                        | SchemeError::Unsupported { .. }
                        | SchemeError::InvalidArgument(_));
                    prop_assert!(expected, "unexpected error {:?} for {:?}", e, op);
                }
            }
            // 1. Deterministic across processes: a decoded copy agrees.
            let copy = AnyScheme::from_state_bytes(&s.to_state_bytes()).unwrap();
            prop_assert!(copy == s, "decoded state differs");
            let mut r = fraghash::keys::SplitMix64::new(seed);
            for _ in 0..500 {
                let h = r.next();
                prop_assert_eq!(copy.locate(h), s.locate(h));
            }
        }
    }

    #[test]
    fn rebalance_ends_within_one_slot(n in 2u32..12, seed in any::<u64>()) {
        let mut s = AnyScheme::new("slots", n).unwrap();
        let z = sizes(&s, seed);
        s.rebalance(&z).unwrap();
        let slots = s.as_slots().unwrap();
        let total: u64 = z.iter().sum();
        let biggest = *z.iter().max().unwrap();
        let mut load = vec![0u64; n as usize];
        for (slot, &o) in slots.table().iter().enumerate() {
            load[o as usize] += z[slot];
        }
        let target = total as f64 / f64::from(n);
        for l in load {
            prop_assert!((l as f64 - target).abs() <= biggest as f64, "load {} target {} slot max {}", l, target, biggest);
        }
    }
}

#[test]
fn removing_the_only_fragment_is_refused() {
    for spec in ["linear", "ring", "jump", "slots"] {
        let mut s = AnyScheme::new(spec, 1).unwrap();
        assert_eq!(s.remove_fragment(0), Err(SchemeError::LastFragment));
        assert!(matches!(
            s.remove_fragment(1),
            Err(SchemeError::NoSuchFragment { .. })
        ));
    }
}

#[test]
fn slot_only_operations_are_typed_errors_elsewhere() {
    for spec in ["linear", "ring", "jump"] {
        let mut s = AnyScheme::new(spec, 3).unwrap();
        assert!(matches!(s.split(0), Err(SchemeError::Unsupported { .. })));
        assert!(matches!(
            s.rebalance(&[]),
            Err(SchemeError::Unsupported { .. })
        ));
    }
}
