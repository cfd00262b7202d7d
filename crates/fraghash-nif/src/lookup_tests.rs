use super::*;
use crate::ranges::{Bucket, RangeIndex};
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

/// Asserts that the scheme's Erlang lookup answers as the core at every
/// probe, and that a `slots` table's segments laid out as a ring's 32-bit
/// words (a second layout of the same segments) do too.
fn check(r: &Recipe, random: usize) {
    let s = r.build().unwrap();
    let l = ErlangLookup::build(&s, r.fragments_added()).expect("a lookup");
    let segments = scheme_segments(&s, r.fragments_added()).unwrap_or_default();
    let mut lookups = vec![l];
    if s.as_slots().is_some() {
        lookups.push(ErlangLookup::Words(
            WordIndex::new(&segments).expect("words"),
        ));
    }
    for l in &lookups {
        let shift = match l {
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
fn index_layout() {
    // One fragment: two buckets of one owner.
    let one = RangeIndex::with_bits(&[(0, 1)], 1);
    assert_eq!(one.shift, 31);
    assert_eq!(one.buckets, vec![Bucket::Owner(1); 2]);
    // Three segments: eight buckets, two of them split.
    let segments = [(0, 1), (1 << 30 | 5, 2), (1 << 31 | 7, 3)];
    let r = RangeIndex::with_bits(&segments, 3);
    assert_eq!(r.shift, 29);
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
    assert_eq!(r.locate((1 << 30) + 4), 1);
    assert_eq!(r.locate((1 << 30) + 5), 2);
    assert_eq!(r.segments(), 10);
    // Three segments in one bucket.
    let t = RangeIndex::with_bits(&[(0, 1), (5, 2), (9, 3)], 1);
    assert_eq!(t.buckets[0], Bucket::Split(1, vec![(5, 2), (9, 3)]));
    assert_eq!(
        (t.locate(4), t.locate(5), t.locate(8), t.locate(9)),
        (1, 2, 2, 3)
    );
}

#[test]
fn one_form_per_scheme() {
    // slots and linear carry their lookup; a ring publishes its words.
    let slots = |n| AnyScheme::new("slots", n).unwrap();
    for n in [1, 50, 400, 4000] {
        let l = ErlangLookup::build(&slots(n), n.into()).expect("slot words");
        assert!(
            matches!(l, ErlangLookup::SlotWords(_)) && l.carried(),
            "{n}"
        );
    }
    let r = AnyScheme::new("ring:10", 4).unwrap();
    let l = ErlangLookup::build(&r, 4).expect("words");
    assert!(matches!(l, ErlangLookup::Words(_)) && !l.carried());
    let l = ErlangLookup::build(&AnyScheme::new("linear", 5).unwrap(), 5).expect("low bits");
    assert!(matches!(l, ErlangLookup::LowBits { fragments: 5, .. }) && l.carried());
    // Jump has no table: the NIF answers.
    assert_eq!(
        ErlangLookup::build(&AnyScheme::new("jump", 8).unwrap(), 8),
        None
    );
    // The largest slots table the words hold, and one past it.
    let max = crate::lookup::MAX_SLOT_WORD_OWNER;
    assert!(ErlangLookup::new_slots(&vec![1; max as usize]).is_some());
    assert_eq!(ErlangLookup::new_slots(&vec![1; max as usize + 1]), None);
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
fn slot_words_sizes() {
    let s = Recipe::new("slots", 50, &[]).unwrap().build().unwrap();
    // 50 segments, two buckets each: 128 slot words (1 KiB), no overflow.
    let Some(ErlangLookup::SlotWords(w)) = ErlangLookup::build(&s, 50) else {
        panic!("slots give slot words");
    };
    assert_eq!(w.bucket_shift, 32 - 7);
    assert_eq!((w.words.len(), w.overflow.len()), (128, 0));
    // Past the byte target, fewer buckets (more overflow records), but
    // never fewer than 2^(slot_bits - 9): the largest table the words hold
    // is still one word read for most lookups.
    let big = AnyScheme::new("slots", 8191).unwrap();
    let Some(ErlangLookup::SlotWords(w)) = ErlangLookup::build(&big, 8191) else {
        panic!("8,191 fragments give slot words");
    };
    assert!(w.slot_offset_bits() <= 9);
    assert!(
        w.byte_len() <= crate::lookup::SLOT_WORD_TARGET_BYTES,
        "{} bytes",
        w.byte_len()
    );
    let s = big.as_slots().unwrap();
    let segments = scheme_segments(&big, 8191).unwrap();
    for h in probes(&big, &segments, w.bucket_shift, 50_000)
        .into_iter()
        .step_by(7)
    {
        assert_eq!(w.locate(h), s.locate(widen_phash2(h)) + 1, "H = {h}");
    }
    // A byte target below what the fields allow still gives words.
    let tiny = SlotWordIndex::new(&segments, s.slot_bits(), 2, 0).expect("words");
    assert_eq!(tiny.slot_offset_bits(), 9);
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
        let Some(ErlangLookup::SlotWords(w)) = ErlangLookup::build(&s, n.into()) else {
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
            ErlangLookup::new_slots(&w),
            ErlangLookup::build(&s, r.fragments_added()),
            "{} fragments",
            w.len()
        );
    }
}
