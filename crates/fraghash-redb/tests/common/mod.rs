//! Random Erlang terms for the property tests.

#![allow(dead_code)]

use fraghash_redb::term::{reference_cmp_exact, BitString, Int, Term};
use proptest::prelude::*;

/// `sign × (2^p + d)`.
fn near_power(p: u32, d: i64, negative: bool) -> Term {
    let v = (1i128 << p) + i128::from(d);
    Term::Int(Int::from_le_bytes(
        negative,
        v.unsigned_abs().to_le_bytes().to_vec(),
    ))
}

const POWERS: [u32; 10] = [31, 52, 53, 54, 59, 60, 63, 64, 65, 100];

pub fn int() -> impl Strategy<Value = Term> {
    prop_oneof![
        (-300i64..300).prop_map(Term::from),
        any::<i64>().prop_map(Term::from),
        (prop::sample::select(&POWERS[..]), -3i64..=3, any::<bool>())
            .prop_map(|(p, d, n)| near_power(p, d, n)),
        (any::<bool>(), prop::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(n, m)| Term::Int(Int::from_le_bytes(n, m))),
    ]
}

pub fn float() -> impl Strategy<Value = Term> {
    prop_oneof![
        (-300i64..300).prop_map(|i| Term::Float(i as f64)),
        (-300i64..300, 0u32..5).prop_map(|(i, s)| Term::Float(i as f64 / f64::from(1u32 << s))),
        Just(Term::Float(-0.0)),
        Just(Term::Float(0.0)),
        any::<f64>()
            .prop_filter("Erlang floats are finite", |f| f.is_finite())
            .prop_map(Term::Float),
        // The floats next to 2^p, on either side, either sign.
        (prop::sample::select(&POWERS[..]), -2i64..=2, any::<bool>()).prop_map(|(p, d, n)| {
            let f = f64::from_bits(((1u128 << p) as f64).to_bits().wrapping_add_signed(d));
            Term::Float(if n { -f } else { f })
        }),
        prop::sample::select(vec![
            5e-324,
            2.2250738585072014e-308,
            f64::MAX,
            -f64::MAX,
            1e300
        ])
        .prop_map(Term::Float),
    ]
}

const ATOM_CHARS: [char; 10] = ['a', 'b', 'z', 'A', '\u{0}', 'é', 'ÿ', 'Ā', '日', '😀'];

pub fn atom() -> impl Strategy<Value = Term> {
    prop::collection::vec(prop::sample::select(&ATOM_CHARS[..]), 0..5)
        .prop_map(|cs| Term::Atom(cs.into_iter().collect()))
}

const BYTES: [u8; 7] = [0, 1, 0x7F, 0x80, 0xFE, 0xFF, b'a'];

pub fn bits() -> impl Strategy<Value = Term> {
    let bytes = prop::collection::vec(prop::sample::select(&BYTES[..]), 0..6);
    prop_oneof![
        bytes
            .clone()
            .prop_map(|b| Term::Bits(BitString::from_bytes(b))),
        (bytes, 1u64..8).prop_map(|(mut b, extra)| {
            b.push(0xA5);
            let len = (b.len() as u64 - 1) * 8 + extra;
            Term::Bits(BitString::new(b, len).unwrap())
        }),
    ]
}

pub fn leaf() -> impl Strategy<Value = Term> {
    prop_oneof![
        3 => int(),
        3 => float(),
        2 => atom(),
        2 => bits(),
        1 => Just(Term::Nil),
    ]
}

/// Keeps the first of keys that are the same map key.
pub fn dedup_map(pairs: Vec<(Term, Term)>) -> Term {
    let mut out: Vec<(Term, Term)> = Vec::new();
    for (k, v) in pairs {
        if !out
            .iter()
            .any(|(k2, _)| reference_cmp_exact(k2, &k).unwrap().is_eq())
        {
            out.push((k, v));
        }
    }
    Term::Map(out)
}

/// Nests `leaf` terms in tuples, lists (proper and improper) and maps.
pub fn nested(leaf: BoxedStrategy<Term>) -> impl Strategy<Value = Term> {
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Term::Tuple),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Term::list),
            (prop::collection::vec(inner.clone(), 1..3), inner.clone())
                .prop_map(|(e, t)| Term::improper_list(e, t)),
            prop::collection::vec((inner.clone(), inner), 0..4).prop_map(dedup_map),
        ]
    })
}

pub fn term() -> impl Strategy<Value = Term> {
    nested(leaf().boxed())
}

/// Terms from a handful of values, so that equal elements, common prefixes
/// and equal numbers of both types are frequent.
pub fn small_world() -> impl Strategy<Value = Term> {
    let leaf = prop::sample::select(vec![
        Term::from(0),
        Term::from(1),
        Term::Float(1.0),
        Term::Float(-0.0),
        Term::Float(0.5),
        Term::from(-1),
        Term::atom("a"),
        Term::atom("é"),
        Term::binary(b""),
        Term::binary(b"\0"),
        Term::binary(b"\0\x01"),
        Term::Bits(BitString::new(vec![0x80], 1).unwrap()),
        Term::Nil,
    ]);
    nested(leaf.boxed())
}
