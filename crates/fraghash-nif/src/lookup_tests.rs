use super::*;
use crate::ranges::Bucket;
use crate::recipe::{Op, Recipe};
use fraghash::keys::SplitMix64;
use fraghash::widen_phash2;

const ADD: Op = Op::Add {
    weight: 1,
    donors: 8,
};

/// The hashes to compare at: both ends of every slot, both sides of every
/// segment start and of every bucket edge (buckets of `shift`), and
/// `random` pseudo-random ones (fixed seed).
fn probes(s: &AnyScheme, segments: &[(u32, u32)], shift: u32, random: usize) -> Vec<u32> {
    let mut v = Vec::new();
    if let Some(sl) = s.as_slots() {
        let slot_shift = 32 - sl.slot_bits();
        for slot in 0..sl.slot_count() as u64 {
            v.push((slot << slot_shift) as u32);
            v.push((((slot + 1) << slot_shift) - 1) as u32);
        }
    }
    for &(start, _) in segments {
        v.extend([start, start.wrapping_sub(1), start.wrapping_add(1)]);
    }
    if !segments.is_empty() {
        for b in 0..(1u64 << (32 - shift)) {
            let first = (b << shift) as u32;
            v.extend([first, first.wrapping_sub(1)]);
        }
    }
    let mut rng = SplitMix64::new(0x5eed);
    v.extend((0..random).map(|_| rng.next() as u32));
    v.extend([0, 1, u32::MAX - 1, u32::MAX]);
    v
}

/// Asserts that the Erlang lookup, and the word layout of the same
/// segments whatever their number, answer as the core at every probe.
fn check(r: &Recipe, random: usize) {
    let s = r.build().unwrap();
    let l = ErlangLookup::build(&s, r.fragments_added()).expect("a lookup");
    let segments = scheme_segments(&s, r.fragments_added()).unwrap_or_default();
    let mut lookups = vec![l];
    if !segments.is_empty() {
        lookups.push(ErlangLookup::Ranges(RangeIndex::new(&segments)));
        lookups.push(ErlangLookup::Words(
            WordIndex::new(&segments).expect("words"),
        ));
        // The layout a state carries, whatever its size.
        lookups.push(ErlangLookup::inline(&s, r.fragments_added(), usize::MAX).expect("inline"));
    }
    for l in &lookups {
        let shift = match l {
            ErlangLookup::Ranges(r) => r.shift,
            ErlangLookup::Words(w) => w.shift,
            ErlangLookup::SlotWords(w) => w.bucket_shift,
            ErlangLookup::LowBits { .. } => 32,
        };
        for h in probes(&s, &segments, shift, random) {
            assert_eq!(
                l.locate(h),
                s.locate(widen_phash2(h)) + 1,
                "{} at {} fragments, H = {h}",
                s.spec(),
                s.fragments()
            );
        }
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

#[test]
fn many_ring_points_use_words() {
    // 400 fragments of 100 points: past WORDS_ABOVE_SEGMENTS, so the words.
    let mut r = Recipe::new("ring", 400, &[]).unwrap();
    let s = r.build().unwrap();
    let Some(ErlangLookup::Words(w)) = ErlangLookup::build(&s, r.fragments_added()) else {
        panic!("a ring of 40,000 points gives words");
    };
    // One bucket per segment, rounded up to a power of two.
    assert_eq!(w.shift, 32 - 16);
    check(&r, 300_000);
    r.push(ADD);
    check(&r, 300_000);
    r.push(Op::DelLast);
    r.push(Op::DelLast);
    check(&r, 300_000);
}

#[test]
fn words_layout() {
    // Eight buckets of 2^29 (shift 29, owners in 1 bit: too few for the
    // owner 2, so type B needs owner 1).
    let b = 1u32 << 29;
    let segments = [
        (0, 1),          // bucket 0: owner 1 throughout
        (b + 5, 2),      // bucket 1: one start, bucket 2 begins with owner 2
        (3 * b + 7, 3),  // bucket 3: one start, then bucket 4 begins a new segment
        (4 * b, 1),      // bucket 4 starts with owner 1
        (4 * b + 9, 2),  // bucket 4: two starts
        (4 * b + 11, 3), //
    ];
    let w = WordIndex::new(&segments).unwrap();
    assert_eq!(w.shift, 29);
    // Type A, type B (offset 5 above one owner bit), type A.
    assert_eq!(w.words[0], 1);
    assert_eq!(w.words[1], 0b10 << 30 | 5 << 1 | 1);
    assert_eq!(w.words[2], 2);
    // Bucket 3's start is followed by a segment starting bucket 4: an
    // overflow record at word 8 (after the eight buckets).
    assert_eq!(w.words[3], 0b11 << 30 | 8);
    assert_eq!(w.words[8..12], [2, 1, 3 * b + 7, 3]);
    assert_eq!(w.words[4], 0b11 << 30 | 12);
    assert_eq!(w.words[12..18], [1, 2, 4 * b + 9, 2, 4 * b + 11, 3]);
    let at = |h: u32| w.locate(h);
    assert_eq!((at(0), at(b + 4), at(b + 5), at(2 * b)), (1, 1, 2, 2));
    assert_eq!((at(3 * b + 6), at(3 * b + 7), at(4 * b)), (2, 3, 1));
    assert_eq!((at(4 * b + 10), at(4 * b + 11), at(u32::MAX)), (2, 3, 3));
    // Big-endian bytes, as Erlang reads them.
    assert_eq!(w.to_be_bytes()[..8], [0, 0, 0, 1, 0x80, 0, 0, 0x0b]);
}

#[test]
fn inline_lookups() {
    let s = Recipe::new("slots", 50, &[]).unwrap().build().unwrap();
    // 50 segments, two buckets each: 128 slot words (1 KiB), no overflow.
    let Some(ErlangLookup::SlotWords(w)) = ErlangLookup::inline(&s, 50, 2048) else {
        panic!("a 50-fragment slots table fits in 2 KiB");
    };
    assert_eq!(w.bucket_shift, 32 - 7);
    assert_eq!((w.words.len(), w.overflow.len()), (128, 0));
    // Too large for the bound: published instead.
    assert_eq!(ErlangLookup::inline(&s, 50, 256), None);
    let big = AnyScheme::new("slots", 400).unwrap();
    assert_eq!(ErlangLookup::inline(&big, 400, 2048), None);
    // A ring carries 32-bit words.
    let r = AnyScheme::new("ring:10", 4).unwrap();
    assert!(matches!(
        ErlangLookup::inline(&r, 4, 2048),
        Some(ErlangLookup::Words(_))
    ));
    // Linear always carries its two parameters; jump never has a table.
    let l = AnyScheme::new("linear", 5).unwrap();
    assert!(matches!(
        ErlangLookup::inline(&l, 5, 0),
        Some(ErlangLookup::LowBits { fragments: 5, .. })
    ));
    let j = AnyScheme::new("jump", 5).unwrap();
    assert_eq!(ErlangLookup::inline(&j, 5, 1 << 20), None);
}

#[test]
fn slot_words_layout() {
    // 256 slots (shift 24) over 8 buckets of 32 slots (shift 29), in
    // fields of 13 and 9 bits whatever the table.
    let slot = |i: u32| i << 24;
    let segments = [
        (0, 1),         // buckets 0-1: owner 1 throughout
        (slot(70), 2),  // bucket 2: one start, at offset 6
        (slot(100), 3), // bucket 3: two starts, offsets 4 and 9
        (slot(105), 1), //
        (slot(128), 2), // bucket 4 starts with owner 2 (no start inside)
        (slot(161), 3), // bucket 5: three starts: an overflow record
        (slot(170), 2), //
        (slot(180), 3), //
    ];
    let w = SlotWordIndex::new(&segments, 8, 1, usize::MAX).unwrap();
    assert_eq!(
        (w.bucket_shift, w.slot_shift, w.slot_offset_bits()),
        (29, 24, 5)
    );
    // 8 buckets, 32 slots each.
    assert_eq!(w.params(), 8 << 16 | 32);
    // [start2: 9][owner2: 13][start1: 9][owner1: 13][owner0: 13]
    let word = |s2: u64, o2: u64, s1: u64, o1: u64, o0: u64| {
        s2 << 48 | o2 << 35 | s1 << 26 | o1 << 13 | o0
    };
    assert_eq!(w.words[0], word(0, 1, 0, 1, 1));
    assert_eq!(w.words[2], word(6, 2, 6, 2, 1));
    assert_eq!(w.words[3], word(9, 1, 4, 3, 2));
    assert_eq!(w.words[4], word(0, 2, 0, 2, 2));
    // Bucket 5's record: the first after the 8 words (byte 64).
    assert_eq!(w.words[5], 1 << 58 | 64);
    assert_eq!(
        w.overflow,
        vec![2, 3, slot(161), 3, slot(170), 2, slot(180), 3]
    );
    let at = |i: u32| w.locate(slot(i));
    assert_eq!((at(0), at(69), at(70), at(99), at(100)), (1, 1, 2, 2, 3));
    assert_eq!(
        (at(104), at(105), at(127), at(128), at(160)),
        (3, 1, 1, 2, 2)
    );
    assert_eq!(
        (at(161), at(169), at(170), at(180), at(255)),
        (3, 3, 2, 3, 3)
    );
    assert_eq!((w.locate(slot(70) - 1), w.locate(u32::MAX)), (1, 3));
    // Big-endian bytes, as Erlang reads them: words, then records.
    let bytes = w.to_be_bytes();
    assert_eq!(bytes.len(), 8 * 8 + 4 * 8);
    assert_eq!(bytes[5 * 8], 0x04);
    assert_eq!(bytes[64..68], [0, 0, 0, 2]);
    // Starts off the slot grid are not slot segments.
    assert_eq!(
        SlotWordIndex::new(&[(0, 1), (slot(3) + 1, 2)], 8, 1, usize::MAX),
        None
    );
    // Owners past 8,191 do not fit; more than 512 slots per bucket neither,
    // which the layout avoids by taking more buckets.
    assert_eq!(
        SlotWordIndex::new(&[(0, 1), (slot(1), 8192)], 8, 1, usize::MAX),
        None
    );
    let many = SlotWordIndex::new(&[(0, 1), (1 << 12, 2)], 20, 1, usize::MAX).unwrap();
    assert!(many.slot_offset_bits() <= 9);
}

#[test]
fn grown_slots_words_rarely_overflow() {
    // A table created with n - 1 fragments, then grown by one: the donors'
    // tails make pairs of starts a few slots apart, which one word holds.
    for n in [50u32, 400, 4000] {
        let mut r = Recipe::new("slots", n - 1, &[]).unwrap();
        r.push(ADD);
        let s = r.build().unwrap();
        let Some(ErlangLookup::SlotWords(w)) = ErlangLookup::inline(&s, n.into(), 65536) else {
            panic!("{n} fragments carry slot words");
        };
        let overflowing = w.words.iter().filter(|&&e| e >> 58 != 0).count();
        assert!(
            overflowing * 50 <= w.words.len(),
            "{n} fragments: {overflowing} of {} buckets overflow",
            w.words.len()
        );
        check(&r, 20_000);
    }
}

#[test]
fn may_carry_judges_without_building() {
    use fraghash::SchemeSpec;
    assert!(ErlangLookup::may_carry(SchemeSpec::Slots, 4096, 65536));
    assert!(!ErlangLookup::may_carry(SchemeSpec::Slots, 8193, 65536));
    assert!(ErlangLookup::may_carry(
        SchemeSpec::Ring { points: 100 },
        40,
        65536
    ));
    assert!(!ErlangLookup::may_carry(
        SchemeSpec::Ring { points: 100 },
        4000,
        65536
    ));
    assert!(ErlangLookup::may_carry(SchemeSpec::Linear, 1 << 20, 0));
    assert!(!ErlangLookup::may_carry(SchemeSpec::Jump, 1, 1 << 20));
    // Never refuses what inline() would carry: a ring of 40 fragments.
    let r = AnyScheme::new("ring", 40).unwrap();
    assert!(ErlangLookup::inline(&r, 40, 65536).is_some());
}

#[test]
fn new_slots_words_without_building() {
    // The same words as from the built table, for new tables of any size
    // and with weights.
    let mut cases: Vec<Vec<u32>> = (1..=200).map(|n| vec![1; n]).collect();
    cases.push(vec![1; 4000]);
    cases.push(vec![2, 1, 5]);
    cases.push((1..=60).collect());
    for w in cases {
        let r = Recipe::new(
            "slots",
            w.len() as u32,
            if w.iter().all(|&x| x == 1) { &[] } else { &w },
        )
        .unwrap();
        let s = r.build().unwrap();
        assert_eq!(
            ErlangLookup::inline_new_slots(&w, 1 << 20),
            ErlangLookup::inline(&s, r.fragments_added(), 1 << 20),
            "{} fragments",
            w.len()
        );
    }
    assert_eq!(ErlangLookup::inline_new_slots(&[1; 50], 64), None);
}
