use super::*;
use crate::plan::Renumber;
use crate::Move;

#[test]
fn even_blocks_and_growth_rule() {
    let s = Slots::new(50).unwrap();
    assert_eq!(s.slot_bits(), 15);
    let c = s.slots_per_fragment();
    assert!(c.iter().all(|&x| x == 655 || x == 656));
    assert_eq!(Slots::wanted_bits(1), 9);
    assert_eq!(Slots::wanted_bits(10), 13);
    assert_eq!(Slots::wanted_bits(1_000), 19);
    assert_eq!(Slots::wanted_bits(10_000), 20);
    assert_eq!(Slots::wanted_bits(100_000), 23);
    assert_eq!(Slots::wanted_bits(Slots::MAX_FRAGMENTS), 24);
}

#[test]
fn add_takes_one_range_per_donor_into_new_only() {
    let mut s = Slots::new(50).unwrap();
    let plan = s.add_fragment().unwrap();
    assert!(plan
        .moves
        .iter()
        .all(|m| matches!(m, Move::Ranges { to: 50, ranges, .. } if ranges.len() == 1)));
    let c = s.slots_per_fragment();
    let t = s.target_slots();
    assert_eq!(c, t);
}

#[test]
fn remove_middle_renumbers_last() {
    let mut s = Slots::new(5).unwrap();
    let before = s.clone();
    let plan = s.remove_fragment(1).unwrap();
    assert_eq!(plan.renumber, Some(Renumber { from: 4, to: 1 }));
    assert_eq!(s.fragments(), 4);
    for slot in 0..s.slot_count() {
        let old = before.table[slot];
        let new = s.table[slot];
        if old == 4 {
            assert_eq!(new, 1, "the last fragment keeps its slots under its new id");
        } else if old != 1 {
            assert_eq!(new, old);
        }
    }
}

#[test]
fn weights_give_proportional_slots() {
    let mut s = Slots::new(3).unwrap();
    s.set_weight(0, 2).unwrap();
    let c = s.slots_per_fragment();
    let total = s.slot_count() as f64;
    assert!((c[0] as f64 - total / 2.0).abs() <= 1.0);
    assert!((c[1] as f64 - total / 4.0).abs() <= 1.0);
}

#[test]
fn split_takes_half_of_one_fragment() {
    let mut s = Slots::new(4).unwrap();
    let slots_before = s.slot_count() as u64;
    let plan = s.split(2).unwrap();
    assert_eq!(plan.sources(), vec![2]);
    assert_eq!(plan.moves.len(), 1);
    // The table may have doubled for the fifth fragment; scale the old counts.
    let before: Vec<u64> = Slots::new(4)
        .unwrap()
        .slots_per_fragment()
        .iter()
        .map(|c| c * s.slot_count() as u64 / slots_before)
        .collect();
    let after = s.slots_per_fragment();
    assert_eq!(after[4], before[2] / 2);
    assert_eq!(after[2], before[2] - before[2] / 2);
    assert_eq!(&after[..2], &before[..2]);
    assert_eq!(after[3], before[3]);
}

#[test]
fn rebalance_moves_hot_slots_off() {
    let mut s = Slots::new(4).unwrap();
    let mut sizes = vec![10u64; s.slot_count()];
    // Fragment 0's slots are ten times heavier.
    for (slot, &o) in s.table.iter().enumerate() {
        if o == 0 {
            sizes[slot] = 100;
        }
    }
    s.rebalance(&sizes).unwrap();
    let total: u64 = sizes.iter().sum();
    let mut load = [0u64; 4];
    for (slot, &o) in s.table.iter().enumerate() {
        load[o as usize] += sizes[slot];
    }
    for l in load {
        assert!((l as f64 - total as f64 / 4.0).abs() <= 100.0, "{load:?}");
    }
}

#[test]
fn rebalance_rejects_wrong_length() {
    let mut s = Slots::new(4).unwrap();
    assert!(matches!(
        s.rebalance(&[1, 2]),
        Err(SchemeError::InvalidArgument(_))
    ));
}

#[test]
fn limited_add_scans_at_most_the_donors_allowed() {
    for d in [1u32, 2, 5] {
        let mut s = Slots::new(20).unwrap();
        let plan = s.add_limited(1, d).unwrap();
        assert!(plan.sources().len() <= d as usize);
        let c = s.slots_per_fragment();
        assert_eq!(c[20], s.target_slots()[20]);
    }
    assert!(Slots::new(3).unwrap().add_limited(1, 0).is_err());
}

/// A new fragment of weight 100 next to four of weight 1 wants 100/104 of
/// the slots; one donor cannot give them. It gives all but one of its
/// slots, and no other fragment gives any: the plan has one source.
#[test]
fn limited_add_never_exceeds_its_donors_when_they_run_dry() {
    for d in [1u32, 2, 3] {
        let mut s = Slots::new(4).unwrap();
        let before = s.slots_per_fragment();
        let plan = s.add_limited(100, d).unwrap();
        assert_eq!(plan.sources().len(), d as usize, "max {d} donors");
        let after = s.slots_per_fragment();
        // The table may have doubled: compare in units of the new table.
        let scale = s.slot_count() as u64 / before.iter().sum::<u64>();
        let donors: Vec<u32> = plan.sources();
        for f in 0..4u32 {
            if donors.contains(&f) {
                assert_eq!(after[f as usize], 1, "a donor keeps one slot");
            } else {
                assert_eq!(after[f as usize], before[f as usize] * scale);
            }
        }
        assert!(after[4] < s.target_slots()[4]);
        assert_eq!(
            after[4],
            donors
                .iter()
                .map(|&f| before[f as usize] * scale - 1)
                .sum::<u64>()
        );
    }
}

/// Weights far apart: the light fragment still owns a slot (its share,
/// 512/1,000,001, rounds to zero), taken from the heavy one, and the
/// targets still sum to the table.
#[test]
fn extreme_weights_leave_no_fragment_without_slots() {
    let s = Slots::with_weights(&[1, 1_000_000]).unwrap();
    assert_eq!(s.slots_per_fragment(), vec![1, s.slot_count() as u64 - 1]);
    assert_eq!(s.target_slots(), s.slots_per_fragment());
    let s = Slots::with_weights(&[u32::MAX, 1, u32::MAX, 1, 1]).unwrap();
    let c = s.slots_per_fragment();
    assert!(c.iter().all(|&x| x >= 1), "{c:?}");
    assert_eq!(c.iter().sum::<u64>(), s.slot_count() as u64);
    // Raising a weight later keeps the light fragments at one slot too.
    let mut s = Slots::new(3).unwrap();
    s.set_weight(0, u32::MAX).unwrap();
    assert_eq!(&s.slots_per_fragment()[1..], &[1, 1]);
    s.add_weighted(1).unwrap();
    assert!(s.slots_per_fragment().iter().all(|&x| x >= 1));
}

#[test]
fn targets_give_every_positive_weight_a_slot() {
    assert_eq!(targets(&[1, 1_000_000], 512), vec![1, 511]);
    assert_eq!(targets(&[1, 0, 1_000_000], 512), vec![1, 0, 511]);
    assert_eq!(targets(&[1, 1, 2], 512), vec![128, 128, 256]);
    assert_eq!(targets(&[1, 1, 1], 512), vec![171, 171, 170]);
}

#[test]
fn run_len_at_every_block_boundary() {
    for len in 0..70usize {
        for tail in 0..3usize {
            let mut t = vec![7u32; len];
            t.extend(std::iter::repeat_n(8u32, tail));
            assert_eq!(super::run_len(&t, 7), len, "len {len} tail {tail}");
        }
    }
}

#[test]
fn new_runs_are_the_built_tables_runs() {
    let runs_of = |t: &Slots| -> Vec<(u64, u32)> {
        let table = t.table();
        (0..table.len())
            .filter(|&i| i == 0 || table[i] != table[i - 1])
            .map(|i| (i as u64, table[i]))
            .collect()
    };
    let mut cases: Vec<Vec<u32>> = (1..=300).map(|n| vec![1; n]).collect();
    cases.push(vec![1; 4000]);
    cases.push(vec![2, 1, 5]);
    cases.push(vec![1, 1_000_000]);
    cases.push((1..=97).collect());
    for w in cases {
        let t = Slots::with_weights(&w).unwrap();
        let (bits, runs) = Slots::new_runs(&w).unwrap();
        assert_eq!(bits, t.slot_bits(), "{} fragments", w.len());
        assert_eq!(runs, runs_of(&t), "{} fragments", w.len());
    }
    assert!(Slots::new_runs(&[]).is_err());
    assert!(Slots::new_runs(&[1, 0]).is_err());
}
