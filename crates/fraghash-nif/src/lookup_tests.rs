use super::*;
use crate::recipe::{Op, Recipe};
use fraghash::keys::SplitMix64;

const ADD: Op = Op::Add {
    weight: 1,
    donors: 8,
};

/// Erlang's computation for linear, as `fraghash_lookup.hrl` does it.
fn low_bits(mask: u32, half: u32, n: u32, h: u32) -> u32 {
    let a = h & mask;
    if a >= n {
        a - half + 1
    } else {
        a + 1
    }
}

fn erlang_locate(l: &ErlangLookup, h: u32) -> u32 {
    match l {
        ErlangLookup::Ranges(r) => r.locate(h),
        ErlangLookup::LowBits {
            mask,
            half,
            fragments,
        } => low_bits(*mask, *half, *fragments, h),
    }
}

/// The hashes to compare at: both ends of every slot, both sides of every
/// segment start and of every bucket edge, and `random` pseudo-random ones
/// (fixed seed).
fn probes(s: &AnyScheme, l: &ErlangLookup, random: usize) -> Vec<u32> {
    let mut v = Vec::new();
    if let Some(sl) = s.as_slots() {
        let shift = 32 - sl.slot_bits();
        for slot in 0..sl.slot_count() as u64 {
            v.push((slot << shift) as u32);
            v.push((((slot + 1) << shift) - 1) as u32);
        }
    }
    if let ErlangLookup::Ranges(r) = l {
        for (b, bucket) in r.buckets.iter().enumerate() {
            let first = ((b as u64) << r.shift) as u32;
            v.extend([first, first.wrapping_sub(1)]);
            if let Bucket::Split(_, rest) = bucket {
                for &(start, _) in rest {
                    v.extend([start, start - 1, start.wrapping_add(1)]);
                }
            }
        }
    }
    let mut rng = SplitMix64::new(0x5eed);
    v.extend((0..random).map(|_| rng.next() as u32));
    v.extend([0, 1, u32::MAX - 1, u32::MAX]);
    v
}

/// Asserts that the Erlang lookup answers as the core at every probe.
fn check(r: &Recipe, random: usize) {
    let s = r.build().unwrap();
    let l = ErlangLookup::build(&s, r.fragments_added()).expect("a lookup");
    for h in probes(&s, &l, random) {
        assert_eq!(
            erlang_locate(&l, h),
            s.locate(widen_phash2(h)) + 1,
            "{} at {} fragments, H = {h}",
            s.spec(),
            s.fragments()
        );
    }
}

/// 8 -> 64 -> 8 fragments, checking after every step.
fn grow_shrink(spec: &str, random: usize) {
    let mut r = Recipe::new(spec, 8, &[]).unwrap();
    check(&r, random);
    for _ in 8..64 {
        r.push(ADD);
        check(&r, random);
    }
    for _ in 8..64 {
        r.push(Op::DelLast);
        check(&r, random);
    }
}

#[test]
fn slots_answer_as_the_core() {
    grow_shrink("slots", 2_000);
    // A fresh large table, and one with weights and unbounded donors.
    check(&Recipe::new("slots", 4000, &[]).unwrap(), 200_000);
    let mut w = Recipe::new("slots", 3, &[2, 1, 5]).unwrap();
    w.push(Op::Add {
        weight: 3,
        donors: 0,
    });
    check(&w, 100_000);
}

#[test]
fn ring_answers_as_the_core() {
    grow_shrink("ring:10", 20_000);
    // The default 100 points, and a dense sample: a missed ring point would
    // give its arc (about 1/(N·P) of the space) to the wrong owner, and a
    // million samples hit each of 1,500 arcs about 650 times.
    let mut r = Recipe::new("ring", 12, &[]).unwrap();
    r.push(ADD);
    r.push(ADD);
    r.push(Op::DelLast);
    r.push(ADD);
    check(&r, 1_000_000);
}

#[test]
fn linear_answers_as_the_core() {
    for n in 1..=70 {
        check(&Recipe::new("linear", n, &[]).unwrap(), 5_000);
    }
}

#[test]
fn jump_has_no_erlang_lookup() {
    let s = AnyScheme::new("jump", 8).unwrap();
    assert_eq!(ErlangLookup::build(&s, 8), None);
}

#[test]
fn index_layout() {
    // One fragment: two buckets of one owner.
    let one = RangeIndex::new(&[(0, 1)]);
    assert_eq!(one.shift, 31);
    assert_eq!(one.owner_bits, 1);
    assert_eq!(one.buckets, vec![Bucket::Owner(1); 2]);
    // Three segments: eight buckets, two of them split.
    let r = RangeIndex::new(&[(0, 1), (1 << 30 | 5, 2), (1 << 31 | 7, 3)]);
    assert_eq!(r.shift, 29);
    assert_eq!(r.owner_bits, 2);
    assert_eq!(
        r.buckets,
        vec![
            Bucket::Owner(1),
            Bucket::Owner(1),
            Bucket::Split(1, vec![(1 << 30 | 5, 2)]),
            Bucket::Owner(2),
            Bucket::Split(2, vec![(1 << 31 | 7, 3)]),
            Bucket::Owner(3),
            Bucket::Owner(3),
            Bucket::Owner(3),
        ]
    );
    // Packed: owners 1 and 2, offset 5 (bits 0-1, 2-3, 4-).
    assert_eq!(r.packed(2), Some(-(1 | 2 << 2 | 5 << 4)));
    assert_eq!(r.packed(0), None);
    assert_eq!(r.locate((1 << 30) + 4), 1);
    assert_eq!(r.locate((1 << 30) + 5), 2);
    assert_eq!(r.segments(), 10);
    // Three segments in one bucket stay a tuple.
    let t = RangeIndex::new(&[(0, 1), (5, 2), (9, 3)]);
    assert_eq!(t.buckets[0], Bucket::Split(1, vec![(5, 2), (9, 3)]));
    assert_eq!(t.packed(0), None);
    assert_eq!(
        (t.locate(4), t.locate(5), t.locate(8), t.locate(9)),
        (1, 2, 2, 3)
    );
    // A fresh 4,000-fragment slots table: one segment per fragment, 8,192
    // buckets.
    let s = AnyScheme::new("slots", 4000).unwrap();
    let Some(ErlangLookup::Ranges(r)) = ErlangLookup::build(&s, 4000) else {
        panic!("slots gives ranges");
    };
    assert_eq!(r.buckets.len(), 8192);
}
