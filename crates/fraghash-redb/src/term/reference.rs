//! Erlang's term order, computed directly on [`Term`]s from the rules of the
//! Reference Manual's "Term Comparisons" (see [`super::order`] for the
//! quotes). It shares no code with the order keys: it is what they are
//! tested against.

use std::cell::Cell;
use std::cmp::Ordering;

use super::{Int, Term, TermError, MAX_DEPTH};

/// Erlang's order of `a` and `b` (`a < b`, `a == b`, `a > b`; so `1` and
/// `1.0` are `Equal`).
///
/// Refuses, with [`TermError::UnsupportedKey`], to compare two pids, ports,
/// references or funs with each other (their order depends on the node;
/// see [`super::order`]); compared with terms of other types they take
/// their place in the order of types. Non-finite floats and nesting deeper
/// than [`MAX_DEPTH`] are refused too.
pub fn reference_cmp(a: &Term, b: &Term) -> Result<Ordering, TermError> {
    cmp(a, b, false, 0)
}

/// Map-key order (ERTS's exact order, as `=:=`): as [`reference_cmp`], but
/// any integer is less than any float, so `1` and `1.0` differ.
pub fn reference_cmp_exact(a: &Term, b: &Term) -> Result<Ordering, TermError> {
    cmp(a, b, true, 0)
}

/// A list with no elements stands for its tail.
fn resolve(mut t: &Term) -> &Term {
    while let Term::List(e, tail) = t {
        if !e.is_empty() {
            break;
        }
        t = tail;
    }
    t
}

/// "number < atom < reference < fun < port < pid < tuple < map < nil < list
/// < bit string".
fn rank(t: &Term) -> u8 {
    use super::OpaqueKind::*;
    match resolve(t) {
        Term::Int(_) | Term::Float(_) => 0,
        Term::Atom(_) => 1,
        Term::Opaque(o) => match o.kind {
            Reference => 2,
            Fun => 3,
            Port => 4,
            Pid => 5,
        },
        Term::Tuple(_) => 6,
        Term::Map(_) => 7,
        Term::Nil => 8,
        Term::List(..) => 9,
        Term::Bits(_) => 10,
    }
}

fn cmp(a: &Term, b: &Term, exact: bool, depth: usize) -> Result<Ordering, TermError> {
    if depth >= MAX_DEPTH {
        return Err(TermError::TooDeep { limit: MAX_DEPTH });
    }
    let (a, b) = (resolve(a), resolve(b));
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return Ok(ra.cmp(&rb));
    }
    Ok(match (a, b) {
        (Term::Int(x), Term::Int(y)) => cmp_int(x, y),
        (Term::Float(x), Term::Float(y)) => finite(*x)?
            .partial_cmp(&finite(*y)?)
            .unwrap_or(Ordering::Equal),
        // "In maps key order integers types are considered less than
        // floats types."
        (Term::Int(_), Term::Float(y)) if exact => finite(*y).map(|_| Ordering::Less)?,
        (Term::Float(x), Term::Int(_)) if exact => finite(*x).map(|_| Ordering::Greater)?,
        (Term::Int(x), Term::Float(y)) => cmp_int_float(x, finite(*y)?),
        (Term::Float(x), Term::Int(y)) => cmp_int_float(y, finite(*x)?).reverse(),
        // "Atoms are compared using their string value, codepoint by
        // codepoint."
        (Term::Atom(x), Term::Atom(y)) => {
            let (cx, cy) = (x.chars().map(u32::from), y.chars().map(u32::from));
            cx.cmp(cy)
        }
        // "Bit strings are compared bit by bit. If one bit string is a
        // prefix of the other, the shorter bit string is considered smaller."
        (Term::Bits(x), Term::Bits(y)) => {
            let n = x.bit_len().min(y.bit_len());
            (0..n)
                .map(|i| x.bit(i).cmp(&y.bit(i)))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| x.bit_len().cmp(&y.bit_len()))
        }
        // "Tuples are ordered by size, two tuples with the same size are
        // compared element by element."
        (Term::Tuple(x), Term::Tuple(y)) => match x.len().cmp(&y.len()) {
            Ordering::Equal => cmp_seq(x.iter().zip(y), exact, depth)?,
            o => o,
        },
        (Term::Map(x), Term::Map(y)) => cmp_map(x, y, exact, depth)?,
        (Term::Nil, Term::Nil) => Ordering::Equal,
        (Term::List(ea, ta), Term::List(eb, tb)) => cmp_list(ea, ta, eb, tb, exact, depth)?,
        (Term::Opaque(o), _) => return Err(TermError::UnsupportedKey { kind: o.kind }),
        _ => unreachable!("ranks are equal, so the types are"),
    })
}

fn finite(f: f64) -> Result<f64, TermError> {
    if f.is_finite() {
        Ok(f)
    } else {
        Err(TermError::Invalid {
            offset: 0,
            reason: "float is not finite",
        })
    }
}

fn cmp_seq<'a>(
    pairs: impl Iterator<Item = (&'a Term, &'a Term)>,
    exact: bool,
    depth: usize,
) -> Result<Ordering, TermError> {
    for (x, y) in pairs {
        let o = cmp(x, y, exact, depth + 1)?;
        if o.is_ne() {
            return Ok(o);
        }
    }
    Ok(Ordering::Equal)
}

/// "Lists are compared element by element"; when one runs out of elements,
/// its tail is compared, as a term, with the rest of the other.
fn cmp_list<'a>(
    mut ea: &'a [Term],
    mut ta: &'a Term,
    mut eb: &'a [Term],
    mut tb: &'a Term,
    exact: bool,
    depth: usize,
) -> Result<Ordering, TermError> {
    loop {
        if ea.is_empty() {
            if let Term::List(e, t) = ta {
                (ea, ta) = (e, t);
                continue;
            }
        }
        if eb.is_empty() {
            if let Term::List(e, t) = tb {
                (eb, tb) = (e, t);
                continue;
            }
        }
        match (ea.split_first(), eb.split_first()) {
            (Some((ha, ra)), Some((hb, rb))) => {
                let o = cmp(ha, hb, exact, depth + 1)?;
                if o.is_ne() {
                    return Ok(o);
                }
                (ea, eb) = (ra, rb);
            }
            (None, None) => return cmp(ta, tb, exact, depth),
            // A non-list tail against the rest of a list: types differ.
            (None, Some(_)) => return Ok(rank(ta).cmp(&9)),
            (Some(_), None) => return Ok(9.cmp(&rank(tb))),
        }
    }
}

/// "Maps are ordered by size, two maps with the same size are compared by
/// keys in ascending term order and then by values in key order."
fn cmp_map(
    x: &[(Term, Term)],
    y: &[(Term, Term)],
    exact: bool,
    depth: usize,
) -> Result<Ordering, TermError> {
    if x.len() != y.len() {
        return Ok(x.len().cmp(&y.len()));
    }
    let (sx, sy) = (sorted_keys(x, depth)?, sorted_keys(y, depth)?);
    for (p, q) in sx.iter().zip(&sy) {
        let o = cmp(&p.0, &q.0, true, depth + 1)?;
        if o.is_ne() {
            return Ok(o);
        }
    }
    cmp_seq(sx.iter().zip(&sy).map(|(p, q)| (&p.1, &q.1)), exact, depth)
}

/// A map's pairs in map-key order.
fn sorted_keys(m: &[(Term, Term)], depth: usize) -> Result<Vec<&(Term, Term)>, TermError> {
    let failed = Cell::new(None);
    let mut v: Vec<&(Term, Term)> = m.iter().collect();
    v.sort_by(|p, q| {
        cmp(&p.0, &q.0, true, depth + 1).unwrap_or_else(|e| {
            failed.set(Some(e));
            Ordering::Equal
        })
    });
    match failed.take() {
        Some(e) => Err(e),
        None => Ok(v),
    }
}

fn cmp_int(x: &Int, y: &Int) -> Ordering {
    let sign = |i: &Int| match (i.is_negative(), i.is_zero()) {
        (true, _) => -1,
        (false, true) => 0,
        (false, false) => 1,
    };
    match sign(x).cmp(&sign(y)) {
        Ordering::Equal if x.is_negative() => cmp_magnitude(y.magnitude(), x.magnitude()),
        Ordering::Equal => cmp_magnitude(x.magnitude(), y.magnitude()),
        o => o,
    }
}

fn cmp_magnitude(x: &[u8], y: &[u8]) -> Ordering {
    x.len()
        .cmp(&y.len())
        .then_with(|| x.iter().rev().cmp(y.iter().rev()))
}

/// An integer against a float, exactly: against the float's floor, which
/// is an integer, and then the fraction decides a tie.
fn cmp_int_float(i: &Int, f: f64) -> Ordering {
    let floor = f.floor();
    match cmp_int(i, &integral_to_int(floor)) {
        Ordering::Equal if floor != f => Ordering::Less,
        o => o,
    }
}

/// The integer a finite float with no fraction is.
fn integral_to_int(f: f64) -> Int {
    let raw = f.to_bits();
    let exp_field = ((raw >> 52) & 0x7FF) as i64;
    let frac = raw & ((1 << 52) - 1);
    if exp_field == 0 {
        // Zero, or a subnormal, which has a fraction: never called so.
        return Int::from(0);
    }
    let m = frac | (1 << 52);
    let k = exp_field - 1075; // |f| = m × 2^k
    let mut le: Vec<u8>;
    if k < 0 {
        le = (m >> (-k)).to_le_bytes().to_vec();
    } else {
        // m × 2^k: k/8 zero bytes below m shifted by k%8 bits.
        let wide = u128::from(m) << (k % 8);
        le = vec![0; (k / 8) as usize];
        le.extend_from_slice(&wide.to_le_bytes());
    }
    Int::from_le_bytes(f < 0.0, le)
}
