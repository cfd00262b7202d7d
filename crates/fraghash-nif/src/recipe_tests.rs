use super::*;
use crate::recipe::digest;
use fraghash::FragmentScheme;

fn hex(d: [u8; 16]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

const ADD: Op = Op::Add {
    weight: 1,
    donors: 8,
};

#[test]
fn round_trip_and_errors() {
    let b = Recipe::new("ring:1000", 7, &[]).unwrap().encode();
    assert!(is_recipe(&b));
    let s = Recipe::decode(&b).unwrap().build().unwrap();
    assert_eq!(s.fragments(), 7);
    assert_eq!(s.spec(), "ring:1000");
    let w = Recipe::new("slots", 3, &[2, 1, 1]).unwrap();
    let w = Recipe::decode(&w.encode()).unwrap().build().unwrap();
    assert_eq!(w.as_slots().unwrap().weights(), &[2, 1, 1]);
    assert!(Recipe::new("nope", 3, &[]).is_err());
    assert!(Recipe::new("slots", 0, &[]).is_err());
    assert!(Recipe::new("jump", 2, &[1, 1]).is_err());
    assert!(Recipe::new("slots", 2, &[1]).is_err());
    assert!(Recipe::new("slots", 2, &[1, 0]).is_err());

    let mut r = Recipe::new("slots", 8, &[]).unwrap();
    r.push(ADD);
    r.push(ADD);
    r.push(Op::DelLast);
    r.push(Op::Add {
        weight: 3,
        donors: 0,
    });
    let b = r.encode();
    assert_eq!(Recipe::decode(&b).unwrap(), r);
    for cut in 0..b.len() {
        // Some prefixes end on an entry boundary and are valid recipes
        // themselves; none may decode to this recipe, and none may panic.
        assert_ne!(Recipe::decode(&b[..cut]).ok(), Some(r.clone()));
    }
    let mut bad = b.clone();
    bad.push(0);
    assert!(Recipe::decode(&bad).is_err(), "a run of zero operations");
    assert!(Recipe::decode(b"FHST\x01\x00").is_err());
}

/// Only the canonical form decodes, so equal recipes have equal digests.
#[test]
fn non_canonical_forms_are_refused() {
    let base = Recipe::new("slots", 4, &[]).unwrap().encode();
    let with = |entries: &[u8]| [&base[..], entries].concat();
    // Two adjacent removal runs (1 and 1) instead of one run of 2.
    assert!(Recipe::decode(&with(&[1 << 2, 1 << 2])).is_err());
    assert!(Recipe::decode(&with(&[2 << 2])).is_ok());
    // An explicit add repeating the previous parameters (kind 2 twice).
    assert!(Recipe::decode(&with(&[1 << 2 | 2, 1, 8, 1 << 2, 1 << 2 | 2, 1, 8])).is_err());
    assert!(Recipe::decode(&with(&[1 << 2 | 2, 1, 8, 1 << 2, 1 << 2 | 1])).is_ok());
    // A repeat before any explicit add, and an unknown kind.
    assert!(Recipe::decode(&with(&[1 << 2 | 1])).is_err());
    assert!(Recipe::decode(&with(&[1 << 2 | 3])).is_err());
    // A padded varint (0x81 0x00 is 1 in two bytes).
    assert!(Recipe::decode(&with(&[0x84, 0x00])).is_err());
}

/// A rebuilt recipe is the scheme the incremental path produced, step by
/// step, for every scheme; the fragment count follows the history.
#[test]
fn replay_equals_incremental() {
    let ops = [
        ADD,
        ADD,
        ADD,
        Op::DelLast,
        ADD,
        Op::Add {
            weight: 1,
            donors: 0,
        },
        Op::DelLast,
        Op::DelLast,
        ADD,
    ];
    for spec in ["slots", "ring", "ring:7", "jump", "linear"] {
        let mut recipe = Recipe::new(spec, 5, &[]).unwrap();
        let mut live = recipe.build().unwrap();
        for op in ops {
            apply(&mut live, op).unwrap();
            recipe.push(op);
            let rebuilt = Recipe::decode(&recipe.encode()).unwrap().build().unwrap();
            assert_eq!(rebuilt.to_state_bytes(), live.to_state_bytes(), "{spec}");
            assert_eq!(recipe.fragments(), live.fragments());
        }
    }
    let mut weighted = Recipe::new("slots", 3, &[2, 1, 1]).unwrap();
    let mut live = weighted.build().unwrap();
    for w in [1, 4, 2, 2] {
        let op = Op::Add {
            weight: w,
            donors: 2,
        };
        apply(&mut live, op).unwrap();
        weighted.push(op);
    }
    assert_eq!(
        weighted.build().unwrap().to_state_bytes(),
        live.to_state_bytes()
    );
}

/// A history that cannot happen (removing the only fragment) is refused
/// when built, with a reason.
#[test]
fn impossible_history_is_refused() {
    let mut r = Recipe::new("slots", 1, &[]).unwrap();
    r.push(Op::DelLast);
    let e = Recipe::decode(&r.encode()).unwrap().build().unwrap_err();
    assert!(e.contains("does not replay"), "{e}");
}

/// The point of recipes: tables grown and shrunk in a few runs stay under
/// 64 bytes, so Mnesia copies them as heap binaries, not reference-counted.
#[test]
fn typical_recipes_fit_a_heap_binary() {
    let mut r = Recipe::new("slots", 4000, &[]).unwrap();
    for (n, op) in [(56, ADD), (20, Op::DelLast), (300, ADD), (7, Op::DelLast)] {
        for _ in 0..n {
            r.push(op);
        }
    }
    r.push(Op::Add {
        weight: 2,
        donors: 16,
    });
    for _ in 0..1000 {
        r.push(ADD);
    }
    let b = r.encode();
    assert!(b.len() <= 64, "{} bytes", b.len());
    assert_eq!(r.fragments(), 4000 + 56 - 20 + 300 - 7 + 1 + 1000);
}

/// A state in the version-1 layout of the core's state format: the same
/// header and body as version 2, without the trailing checksum. The golden
/// digests were taken over version-1 states; digesting this form keeps
/// them comparing what the tables are (the body), whatever the envelope.
fn as_version_1(state: &[u8]) -> Vec<u8> {
    assert_eq!(&state[4..6], &[2, 0], "the core writes version 2");
    let mut v1 = state[..state.len() - 8].to_vec();
    v1[4] = 1;
    let decoded = fraghash::AnyScheme::from_state_bytes(&v1).expect("the body reads as version 1");
    assert_eq!(decoded.to_state_bytes(), state);
    v1
}

/// What recipes build to is part of the stored format.
#[test]
fn golden() {
    let bases: [(&str, u32, &[u32]); 5] = [
        ("slots", 1, &[]),
        ("slots", 50, &[]),
        ("slots", 4000, &[]),
        ("ring", 50, &[]),
        ("slots", 3, &[2, 1, 3]),
    ];
    let mut got: Vec<String> = bases
        .iter()
        .map(|(spec, n, w)| {
            let s = Recipe::new(spec, *n, w).unwrap().build().unwrap();
            hex(digest(&as_version_1(&s.to_state_bytes())))
        })
        .collect();
    for spec in ["slots", "ring"] {
        let mut r = Recipe::new(spec, 8, &[]).unwrap();
        for op in [ADD; 56].into_iter().chain([Op::DelLast; 50]) {
            r.push(op);
        }
        got.push(hex(digest(&as_version_1(
            &r.build().unwrap().to_state_bytes(),
        ))));
    }
    assert_eq!(got, GOLDEN, "recipes now build differently: bump MAGIC");
}

const GOLDEN: [&str; 7] = [
    "a29c8691cd19f9c046d97cb8dbe78141",
    "c43c40207d54ccda13808b91357593b0",
    "3ad00dfa85209d1fac6ac4f46ff8bb17",
    "a673081da2409bf17cd930052b66cfc4",
    "add023f18595bdb7c6fab86526108480",
    "8d471d3f58cc4c9c7c6dad18e720f837",
    "43eccfa3cc45d78688c7020c7ecc3e26",
];

/// A split is recorded (kind 3, merged into runs like the others), decodes
/// back, and replays to the scheme the incremental path built.
#[test]
fn split_round_trips_and_replays() {
    let mut r = Recipe::new("slots", 8, &[]).unwrap();
    let mut s = r.build().unwrap();
    let ops = [
        ADD,
        Op::Split { fragment: 3 },
        Op::Split { fragment: 3 },
        Op::DelLast,
        Op::Split { fragment: 0 },
    ];
    for op in ops {
        apply(&mut s, op).unwrap();
        r.push(op);
    }
    let b = r.encode();
    let d = Recipe::decode(&b).unwrap();
    assert_eq!(d, r);
    assert_eq!(d.fragments(), 11);
    let rebuilt = d.build().unwrap();
    assert_eq!(rebuilt.fragments(), s.fragments());
    for h in (0..50_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) {
        assert_eq!(rebuilt.locate(h), s.locate(h));
    }
    // Other schemes cannot split: such a recipe does not replay.
    let mut j = Recipe::new("jump", 4, &[]).unwrap();
    j.push(Op::Split { fragment: 1 });
    assert!(j.build().is_err());
}
