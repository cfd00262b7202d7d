//! `pattern_prefix` against ets matching, on random terms: a random term
//! is opened into a match pattern (some of its parts made `'_'` or a
//! variable), the pattern's matches are built by filling the open parts,
//! and every match's order key starts with the pattern's prefix.

mod common;

use std::cmp::Ordering;
use std::collections::HashMap;

use fraghash_redb::term::{
    encode_key, order::tag, pattern_prefix, pattern_prefix_etf, reference_cmp_exact, Term,
};
use proptest::prelude::*;

fn key(t: &Term) -> Vec<u8> {
    encode_key(t).expect("generated terms are keys")
}

fn var(text: &str) -> bool {
    text == "_"
        || text
            .strip_prefix('$')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
}

/// `a =:= b`.
fn same(a: &Term, b: &Term) -> bool {
    reference_cmp_exact(a, b).unwrap() == Ordering::Equal
}

/// The first element of a non-empty list and the rest of it.
fn uncons(t: &Term) -> Option<(&Term, Term)> {
    match t {
        Term::List(e, tail) if !e.is_empty() => Some((
            &e[0],
            Term::improper_list(e[1..].to_vec(), (**tail).clone()),
        )),
        _ => None,
    }
}

/// Whether `t` matches pattern `p` as in an ets match spec head: `'_'`
/// matches anything, a variable the same term wherever it is, a map every
/// map holding its keys with matching values, anything else itself
/// exactly (`=:=`).
fn matches(p: &Term, t: &Term, binds: &mut HashMap<String, Term>) -> bool {
    match (p, t) {
        (Term::Atom(a), _) if a == "_" => true,
        (Term::Atom(a), _) if var(a) => match binds.get(a) {
            Some(bound) => same(bound, t),
            None => {
                binds.insert(a.clone(), t.clone());
                true
            }
        },
        (Term::Tuple(ps), Term::Tuple(ts)) => {
            ps.len() == ts.len() && ps.iter().zip(ts).all(|(p, t)| matches(p, t, binds))
        }
        (Term::List(..), _) => match (uncons(p), uncons(t)) {
            (Some((ph, pr)), Some((th, tr))) => matches(ph, th, binds) && matches(&pr, &tr, binds),
            _ => false,
        },
        (Term::Map(ps), Term::Map(ts)) => ps.iter().all(|(pk, pv)| {
            ts.iter()
                .find(|(tk, _)| same(pk, tk))
                .is_some_and(|(_, tv)| matches(pv, tv, binds))
        }),
        _ => same(p, t),
    }
}

/// `t` with some parts opened, in depth-first order, by `choices` taken
/// in turn (0: `'_'`, 1: a new variable, else kept and looked into). Map
/// keys stay as they are: match patterns take only ground ones.
struct Opener<'a> {
    choices: &'a [u8],
    next: usize,
    vars: u32,
}

impl Opener<'_> {
    fn open(&mut self, t: &Term) -> Term {
        let choice = self.choices.get(self.next).copied().unwrap_or(2);
        self.next += 1;
        match choice {
            0 => return Term::atom("_"),
            1 => {
                self.vars += 1;
                return Term::atom(&format!("${}", self.vars));
            }
            _ => {}
        }
        match t {
            Term::Tuple(v) => Term::Tuple(v.iter().map(|e| self.open(e)).collect()),
            Term::List(e, tail) => {
                let elems = e.iter().map(|x| self.open(x)).collect();
                Term::improper_list(elems, self.open(tail))
            }
            Term::Map(pairs) => Term::Map(
                pairs
                    .iter()
                    .map(|(k, v)| (k.clone(), self.open(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// A term matching `p`: its open parts filled from `fill`, a variable
/// with the same term each time, and with `extra`, each map given one
/// more key.
fn fill_in(
    p: &Term,
    fill: &mut dyn FnMut() -> Term,
    binds: &mut HashMap<String, Term>,
    extra: bool,
) -> Term {
    match p {
        Term::Atom(a) if a == "_" => fill(),
        Term::Atom(a) if var(a) => {
            if let Some(t) = binds.get(a) {
                return t.clone();
            }
            let t = fill();
            binds.insert(a.clone(), t.clone());
            t
        }
        Term::Tuple(v) => Term::Tuple(v.iter().map(|e| fill_in(e, fill, binds, extra)).collect()),
        Term::List(e, tail) => {
            let elems = e.iter().map(|x| fill_in(x, fill, binds, extra)).collect();
            Term::improper_list(elems, fill_in(tail, fill, binds, extra))
        }
        Term::Map(pairs) => {
            let mut out: Vec<(Term, Term)> = pairs
                .iter()
                .map(|(k, v)| (k.clone(), fill_in(v, fill, binds, extra)))
                .collect();
            if extra {
                // No generated atom has these letters.
                out.push((Term::atom("extra"), fill()));
            }
            Term::Map(out)
        }
        other => other.clone(),
    }
}

/// Whether `p` holds a wildcard, a variable or a map (outside map keys).
fn has_open_part(p: &Term) -> bool {
    match p {
        Term::Atom(a) => var(a),
        Term::Map(_) => true,
        Term::Tuple(v) => v.iter().any(has_open_part),
        Term::List(e, tail) => e.iter().any(has_open_part) || has_open_part(tail),
        _ => false,
    }
}

/// Terms of tuples and lists (proper and improper), no maps: the prefix of
/// a pattern of them is as long as can be.
fn without_maps() -> impl Strategy<Value = Term> {
    common::leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Term::Tuple),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Term::list),
            (prop::collection::vec(inner.clone(), 1..3), inner)
                .prop_map(|(e, t)| Term::improper_list(e, t)),
        ]
    })
}

fn common_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_match_has_a_key_starting_with_the_prefix(
        t in common::term(),
        choices in prop::collection::vec(0u8..8, 0..24),
        fills in prop::collection::vec(common::term(), 1..8),
        extra in any::<bool>(),
    ) {
        let pattern = Opener { choices: &choices, next: 0, vars: 0 }.open(&t);
        let prefix = pattern_prefix(&pattern).unwrap();
        prop_assert_eq!(&pattern_prefix_etf(&pattern.to_etf()).unwrap(), &prefix);
        // The term the pattern was opened from matches it.
        prop_assert!(matches(&pattern, &t, &mut HashMap::new()));
        prop_assert!(key(&t).starts_with(&prefix), "{:?} of {:?}: {:02x?}", pattern, t, prefix);
        let mut turn = 0;
        let mut fill = || {
            turn += 1;
            fills[turn % fills.len()].clone()
        };
        let m = fill_in(&pattern, &mut fill, &mut HashMap::new(), extra);
        prop_assert!(matches(&pattern, &m, &mut HashMap::new()), "{:?} ~ {:?}", pattern, m);
        prop_assert!(
            key(&m).starts_with(&prefix),
            "{:?} matches {:?}, key {:02x?}, prefix {:02x?}", m, pattern, key(&m), prefix
        );
        if !has_open_part(&pattern) {
            prop_assert_eq!(&prefix, &key(&pattern));
        }
    }

    /// No longer prefix holds: two matches that differ only in what fills
    /// the open parts (an atom against `[]`, whose type bytes differ)
    /// differ right after it.
    #[test]
    fn the_prefix_is_as_long_as_can_be(
        t in without_maps(),
        choices in prop::collection::vec(0u8..6, 0..24),
    ) {
        let pattern = Opener { choices: &choices, next: 0, vars: 0 }.open(&t);
        if !has_open_part(&pattern) {
            // A ground pattern: the first test holds its prefix whole.
            return Ok(());
        }
        let prefix = pattern_prefix(&pattern).unwrap();
        let a = fill_in(&pattern, &mut || Term::atom("a"), &mut HashMap::new(), false);
        let b = fill_in(&pattern, &mut || Term::Nil, &mut HashMap::new(), false);
        prop_assert_eq!(common_len(&key(&a), &key(&b)), prefix.len(), "{:?}", pattern);
    }
}

fn pat(elems: Vec<Term>) -> Term {
    Term::Tuple(elems)
}

#[test]
fn a_bound_leading_part_is_the_prefix() {
    let (user, any) = (Term::atom("user"), Term::atom("_"));
    let p = pattern_prefix(&pat(vec![user.clone(), Term::from(42), any.clone()])).unwrap();
    // The key of {user, 42, 0} without the key of 0, its last byte.
    let k = key(&pat(vec![user.clone(), Term::from(42), Term::from(0)]));
    assert_eq!(p, &k[..k.len() - key(&Term::from(0)).len()]);
    // A variable ends it as a wildcard does; alone, neither fixes a byte.
    let v = pattern_prefix(&pat(vec![user, Term::from(42), Term::atom("$1")])).unwrap();
    assert_eq!(v, p);
    assert!(pattern_prefix(&any).unwrap().is_empty());
    assert!(pattern_prefix(&Term::atom("$12")).unwrap().is_empty());
    // Atoms that only look like variables are themselves.
    for text in ["$", "$a", "$1a", "__"] {
        assert_eq!(
            pattern_prefix(&Term::atom(text)).unwrap(),
            key(&Term::atom(text))
        );
    }
}

#[test]
fn a_list_pattern_fixes_its_leading_elements() {
    let p = Term::improper_list(vec![Term::from(97), Term::from(98)], Term::atom("_"));
    let prefix = pattern_prefix(&p).unwrap();
    let abc = key(&Term::list(vec![
        Term::from(97),
        Term::from(98),
        Term::from(99),
    ]));
    let ab = key(&Term::list(vec![Term::from(97), Term::from(98)]));
    assert!(abc.starts_with(&prefix) && ab.starts_with(&prefix));
    assert_eq!(prefix.len(), common_len(&abc, &ab));
    assert!(!key(&Term::list(vec![Term::from(97)])).starts_with(&prefix));
}

#[test]
fn a_map_fixes_only_its_type() {
    let m = Term::Map(vec![(Term::atom("a"), Term::from(1))]);
    let p = pattern_prefix(&pat(vec![m.clone(), Term::atom("_")])).unwrap();
    let whole = key(&pat(vec![m, Term::from(0)]));
    // The tuple's type and size, then the map's type.
    assert_eq!(p, &whole[..4]);
    assert_eq!(p.last(), Some(&tag::MAP));
}

#[test]
fn what_no_key_holds_is_refused() {
    let etf_pid = [
        131u8, 88, 100, 0, 1, b'n', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let pid = fraghash_redb::term::decode(&etf_pid).unwrap();
    let before = pat(vec![pid.clone(), Term::atom("_")]);
    assert!(pattern_prefix(&before).is_err());
    // After the open part nothing is read.
    let after = pat(vec![Term::atom("_"), pid]);
    let zeros = key(&pat(vec![Term::from(0), Term::from(0)]));
    assert_eq!(pattern_prefix(&after).unwrap(), &zeros[..zeros.len() - 2]);
}
