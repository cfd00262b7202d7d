//! Order keys: bytes whose `memcmp` order is Erlang's term order.
//!
//! For any two terms `A` and `B` that are keys, `order_key(A)` compared with
//! `order_key(B)` bytewise (shorter first when one is a prefix of the other,
//! as `[u8]` and redb compare) gives the same answer as Erlang's `A < B`,
//! `A == B`, `A > B`. Terms that compare equal get identical keys: `1` and
//! `1.0` are one key, as in an ets `ordered_set`. Every key is also
//! prefix-free (no key is the start of another), which is what lets keys of
//! elements be concatenated into the key of a tuple or list.
//!
//! # The rules
//!
//! From the Erlang Reference Manual, chapter "Expressions", section "Term
//! Comparisons" (OTP 25), and where the manual is silent, from ERTS's
//! `erts_cmp` which implements it:
//!
//! 1. *"number < atom < reference < fun < port < pid < tuple < map < nil <
//!    list < bit string"*. The first byte of a key is its type ([`tag`]),
//!    numbered in that order.
//! 2. Numbers: *"When comparing an integer to a float, the term with the
//!    lesser precision is converted into the type of the other term ...
//!    The conversion strategy is changed depending on the size of the
//!    float because otherwise comparison of large floats and integers would
//!    lose their transitivity."* ERTS converts exactly (a float past 2^53 is
//!    compared as the integer it is), so numbers are ordered by their exact
//!    value, and `1 == 1.0`, `0 == 0.0 == -0.0` (OTP 25: `-0.0 == 0.0`).
//!    Every integer and float is a dyadic rational `±2^e × 1.f`, encoded as
//!    a sign byte (negative < zero < positive), then for a non-zero number
//!    the exponent `e` (a length byte, then its bytes) and the fraction bits
//!    `f` without trailing zeros, 7 to a byte with a continue flag in the
//!    low bit. A negative number's exponent and fraction bytes are inverted,
//!    which reverses their order. An integer and a float of the same value
//!    thus give the same bytes, and big integers compare with floats
//!    exactly (`2^53 + 1 > 9007199254740992.0`).
//! 3. Atoms: *"Atoms are compared using their string value, codepoint by
//!    codepoint."* The UTF-8 bytes of the text have the order of its code
//!    points (ERTS compares those bytes), written as a bitstring (rule 7).
//! 4. Tuples: *"Tuples are ordered by size, two tuples with the same size
//!    are compared element by element."* Tag, size, then the elements' keys.
//! 5. Maps: *"Maps are ordered by size, two maps with the same size are
//!    compared by keys in ascending term order and then by values in key
//!    order. In maps key order integers types are considered less than
//!    floats types."* Tag, size, the keys in map-key order, then the values
//!    in that order. Keys (and everything inside them) are encoded in
//!    map-key order, the *exact* order of ERTS (`=:=`): an integer is less
//!    than any float, so `#{1 => a}` and `#{1.0 => a}` are different keys,
//!    as they are different maps. Values are compared as anywhere else.
//!    ERTS compares large maps (over 32 keys) by hash, with a tie-breaking
//!    that gives this same order.
//! 6. Lists: *"Lists are compared element by element."* A list `[H | T]`
//!    is the list tag, then `H`, then `T` as a term, so an improper tail
//!    compares as a term too (`[a | b] < [a]`, since atom < nil), and `[]`
//!    (nil, below list) ends a proper list before any longer one.
//! 7. Bit strings: *"Bit strings are compared bit by bit. If one bit string
//!    is a prefix of the other, the shorter bit string is considered
//!    smaller."* Tag, then the bits 7 to a byte, each such byte's low bit
//!    set; then a byte with the last 0 to 6 bits (padded with zeros, low bit
//!    clear), and a byte with how many there were.
//!
//! # Prefixes of match patterns
//!
//! Since every key is prefix-free, the key of a tuple or list starts with
//! the keys of its leading elements, whole. So the terms matching an ets
//! match pattern whose leading part is bound (`{user, 42, '_'}`, `[$a |
//! '_']`) all have order keys starting with the same bytes: the pattern's
//! key up to its first wildcard or variable, which adds nothing there. A
//! map in a pattern matches maps of any size holding its keys, so it adds
//! only its type byte. [`pattern_prefix`] writes these bytes with the very
//! encoder of the keys, told to stop there; a select reads only the range
//! of keys starting with them.
//!
//! # Refused as keys
//!
//! References, funs, ports and pids ([`TermError::UnsupportedKey`]): ERTS
//! orders them by node name, then by the node's *creation* (which changes
//! each time a node restarts) and by numbers whose meaning depends on
//! whether the term is local to the node comparing; funs by code indexes
//! that change with the code. Their stored order would not survive a
//! restart, so they are not keys (they can be in values).
//!
//! # Limits
//!
//! An order key is at most [`MAX_KEY_LEN`] bytes; nesting is at most
//! [`super::MAX_DEPTH`] levels. An integer takes about one byte per 7 bits
//! of its value, a binary about 8 bytes per 7.

use super::{decode, BitString, Int, Term, TermError, MAX_DEPTH};

/// The longest order key, in bytes (64 KiB). A key larger than this is
/// refused with [`TermError::KeyTooLarge`]: keys live in the B-tree's
/// branch pages, and keys this large only make them slow.
pub const MAX_KEY_LEN: usize = 64 * 1024;

/// The first byte of an order key: its type, in Erlang's order of types.
pub mod tag {
    /// A number below zero.
    pub const NEGATIVE: u8 = 0x10;
    /// Zero (`0`, `0.0`, `-0.0`).
    pub const ZERO: u8 = 0x11;
    /// A number above zero.
    pub const POSITIVE: u8 = 0x12;
    /// In map-key order only: a float below zero (any float is above any
    /// integer there).
    pub const FLOAT_NEGATIVE: u8 = 0x13;
    /// In map-key order only: a float zero.
    pub const FLOAT_ZERO: u8 = 0x14;
    /// In map-key order only: a float above zero.
    pub const FLOAT_POSITIVE: u8 = 0x15;
    /// An atom.
    pub const ATOM: u8 = 0x20;
    /// A tuple.
    pub const TUPLE: u8 = 0x70;
    /// A map.
    pub const MAP: u8 = 0x80;
    /// `[]`.
    pub const NIL: u8 = 0x90;
    /// A list cell `[H | T]`.
    pub const LIST: u8 = 0xA0;
    /// A binary or bitstring.
    pub const BITS: u8 = 0xB0;
}

/// The order key of the term whose external format is `etf` (the bytes of
/// `term_to_binary/1`): [`decode`] then [`encode_key`].
pub fn order_key(etf: &[u8]) -> Result<Vec<u8>, TermError> {
    encode_key(&decode(etf)?)
}

/// The order key of a term (see the [module documentation](self)).
pub fn encode_key(t: &Term) -> Result<Vec<u8>, TermError> {
    let mut out = Vec::new();
    term(&mut out, t, Mode::Order, 0)?;
    Ok(out)
}

/// The bytes that the order key of every term matching the match pattern
/// whose external format is `etf` starts with: [`decode`] then
/// [`pattern_prefix`].
pub fn pattern_prefix_etf(etf: &[u8]) -> Result<Vec<u8>, TermError> {
    pattern_prefix(&decode(etf)?)
}

/// The bytes that the order key of every term matching `pattern` starts
/// with, `pattern` being the key part of an ets match spec head (see the
/// [module documentation](self#prefixes-of-match-patterns)).
///
/// It is the pattern's order key written up to the first place the pattern
/// leaves open: a wildcard `'_'` or a variable (`'$1'`, `'$2'`, ...) adds
/// nothing and ends the prefix; a map adds its type byte and ends it. So:
///
/// - a pattern with no wildcard, variable or map gives its whole order key
///   ([`encode_key`]);
/// - `'_'` or a variable alone gives no bytes (every key matches);
/// - no longer prefix holds for every match when the pattern holds no map:
///   two matches differing only at the first open place (an atom there in
///   one, `[]` in the other) have keys that differ at the byte after the
///   prefix.
///
/// A term holding a reference, pid, port or fun, or nesting too deep, in
/// the part that is written is refused as [`encode_key`] refuses it: no
/// term matching such a pattern is a key.
pub fn pattern_prefix(pattern: &Term) -> Result<Vec<u8>, TermError> {
    let mut out = Vec::new();
    term(&mut out, pattern, Mode::Pattern, 0)?;
    Ok(out)
}

/// What [`term`] writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// An order key, in Erlang's term order.
    Order,
    /// An order key in map-key order (rule 5): a map's keys.
    MapKey,
    /// A match pattern's prefix: an order key up to the first wildcard,
    /// variable or map (see [`pattern_prefix`]).
    Pattern,
}

/// How much of a term [`term`] wrote.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Written {
    /// All of its key.
    Whole,
    /// Its key up to where a pattern leaves it open; nothing may follow.
    Open,
}

/// Whether atom `text` stands for any term in a match pattern: the
/// wildcard `'_'`, or a variable, `'$'` and decimal digits.
fn is_pattern_var(text: &str) -> bool {
    match text.strip_prefix('$') {
        Some(digits) => !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()),
        None => text == "_",
    }
}

fn check_len(out: &[u8]) -> Result<(), TermError> {
    if out.len() > MAX_KEY_LEN {
        Err(TermError::KeyTooLarge { limit: MAX_KEY_LEN })
    } else {
        Ok(())
    }
}

/// Refuses, before writing them, values whose `bits` need more than
/// [`MAX_KEY_LEN`] bytes at 7 bits a byte.
fn too_large(bits: u64) -> Result<(), TermError> {
    if bits / 7 > MAX_KEY_LEN as u64 {
        Err(TermError::KeyTooLarge { limit: MAX_KEY_LEN })
    } else {
        Ok(())
    }
}

/// Appends the key of `t` in `mode`; says whether a pattern stopped it.
fn term(out: &mut Vec<u8>, t: &Term, mode: Mode, depth: usize) -> Result<Written, TermError> {
    if depth >= MAX_DEPTH {
        return Err(TermError::TooDeep { limit: MAX_DEPTH });
    }
    match t {
        Term::Atom(a) if mode == Mode::Pattern && is_pattern_var(a) => return Ok(Written::Open),
        // A map pattern matches maps holding at least its keys, whatever
        // their size: only the type is known.
        Term::Map(_) if mode == Mode::Pattern => {
            out.push(tag::MAP);
            return Ok(Written::Open);
        }
        Term::Int(i) => {
            too_large(i.magnitude().len() as u64 * 8)?;
            int(out, i)
        }
        Term::Float(f) => float(out, *f, mode == Mode::MapKey)?,
        Term::Atom(a) => {
            too_large(a.len() as u64 * 8)?;
            out.push(tag::ATOM);
            bits(out, a.len() as u64 * 8, |i| {
                a.as_bytes()[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
            });
        }
        Term::Bits(b) => {
            too_large(b.bit_len())?;
            out.push(tag::BITS);
            bitstring(out, b);
        }
        Term::Tuple(v) => {
            out.push(tag::TUPLE);
            push_uint(out, v.len() as u64);
            for e in v {
                let written = term(out, e, mode, depth + 1)?;
                check_len(out)?;
                if written == Written::Open {
                    return Ok(Written::Open);
                }
            }
        }
        Term::Map(pairs) => map(out, pairs, mode, depth)?,
        Term::Nil => out.push(tag::NIL),
        Term::List(elems, tail) => {
            // Tails are walked, not recursed into: a long list is not deep.
            let (mut elems, mut tail) = (elems, tail);
            loop {
                for e in elems.iter() {
                    out.push(tag::LIST);
                    let written = term(out, e, mode, depth + 1)?;
                    check_len(out)?;
                    if written == Written::Open {
                        return Ok(Written::Open);
                    }
                }
                match &**tail {
                    Term::List(e2, t2) => (elems, tail) = (e2, t2),
                    t => return term(out, t, mode, depth),
                }
            }
        }
        Term::Opaque(o) => return Err(TermError::UnsupportedKey { kind: o.kind }),
    }
    check_len(out)?;
    Ok(Written::Whole)
}

/// Rule 5: size, keys in map-key order, then values in that order (in
/// `mode`, an order key's: patterns stop before a map).
fn map(
    out: &mut Vec<u8>,
    pairs: &[(Term, Term)],
    mode: Mode,
    depth: usize,
) -> Result<(), TermError> {
    let mut keyed = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        let mut kb = Vec::new();
        term(&mut kb, k, Mode::MapKey, depth + 1)?;
        keyed.push((kb, v));
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    if keyed.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(TermError::Invalid {
            offset: 0,
            reason: "a map has the same key twice",
        });
    }
    out.push(tag::MAP);
    push_uint(out, pairs.len() as u64);
    for (kb, _) in &keyed {
        out.extend_from_slice(kb);
        check_len(out)?;
    }
    for (_, v) in keyed {
        term(out, v, mode, depth + 1)?;
        check_len(out)?;
    }
    Ok(())
}

/// Rule 2, integers: `±2^e × 1.f` with `e` one less than the bit length.
fn int(out: &mut Vec<u8>, i: &Int) {
    let m = i.magnitude();
    let Some(&top) = m.last() else {
        out.push(tag::ZERO);
        return;
    };
    let bit_len = m.len() as u64 * 8 - u64::from(top.leading_zeros());
    // Bit `j` below the leading one (j = 1 is the next): bit number
    // `bit_len - 1 - j` of the little-endian magnitude.
    let bit = |j: u64| {
        let n = bit_len - 1 - j;
        m[(n / 8) as usize] & (1 << (n % 8)) != 0
    };
    let low_zeros = trailing_zero_bits(m);
    number(
        out,
        i.is_negative(),
        tag::NEGATIVE,
        tag::POSITIVE,
        bit_len as i64 - 1,
        bit_len - 1 - low_zeros,
        bit,
    );
}

fn trailing_zero_bits(le: &[u8]) -> u64 {
    let mut n = 0;
    for &b in le {
        if b != 0 {
            return n + u64::from(b.trailing_zeros());
        }
        n += 8;
    }
    n
}

/// Rule 2, floats: decomposed exactly as `m × 2^k`, then as an integer.
fn float(out: &mut Vec<u8>, f: f64, exact: bool) -> Result<(), TermError> {
    if !f.is_finite() {
        return Err(TermError::Invalid {
            offset: 0,
            reason: "float is not finite",
        });
    }
    let (neg_tag, zero_tag, pos_tag) = if exact {
        (tag::FLOAT_NEGATIVE, tag::FLOAT_ZERO, tag::FLOAT_POSITIVE)
    } else {
        (tag::NEGATIVE, tag::ZERO, tag::POSITIVE)
    };
    if f == 0.0 {
        out.push(zero_tag);
        return Ok(());
    }
    let raw = f.to_bits();
    let exp_field = ((raw >> 52) & 0x7FF) as i64;
    let frac = raw & ((1 << 52) - 1);
    // value = m × 2^k
    let (m, k) = if exp_field == 0 {
        (frac, -1074)
    } else {
        (frac | (1 << 52), exp_field - 1075)
    };
    let top = 63 - u64::from(m.leading_zeros()); // the leading one's bit
    let bit = |j: u64| m & (1 << (top - j)) != 0;
    let frac_len = top - u64::from(m.trailing_zeros());
    number(
        out,
        f < 0.0,
        neg_tag,
        pos_tag,
        k + top as i64,
        frac_len,
        bit,
    );
    Ok(())
}

/// A non-zero number `±2^e × 1.f`, `f` being `frac_len` bits (`bit(1)` the
/// first, the last a one).
fn number(
    out: &mut Vec<u8>,
    negative: bool,
    neg_tag: u8,
    pos_tag: u8,
    e: i64,
    frac_len: u64,
    bit: impl Fn(u64) -> bool,
) {
    out.push(if negative { neg_tag } else { pos_tag });
    let start = out.len();
    push_int(out, e);
    if frac_len == 0 {
        out.push(0);
    } else {
        let chunks = frac_len.div_ceil(7);
        for c in 0..chunks {
            let mut byte = 0u8;
            for b in 0..7 {
                let j = c * 7 + b + 1;
                if j <= frac_len && bit(j) {
                    byte |= 0x80 >> b;
                }
            }
            // Low bit: more bits follow. With trailing zeros dropped, a
            // fraction that goes on is larger than one that stops here.
            out.push(byte | u8::from(c + 1 < chunks));
        }
    }
    if negative {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

/// A non-negative integer, order-preserving and prefix-free: a byte `0x80
/// + n`, then its `n` significant bytes, big-endian (`n` = 0 for zero).
fn push_uint(out: &mut Vec<u8>, u: u64) {
    let n = (u64::BITS - u.leading_zeros()).div_ceil(8) as usize;
    out.push(0x80 + n as u8);
    out.extend_from_slice(&u.to_be_bytes()[8 - n..]);
}

/// A signed integer, order-preserving and prefix-free: as [`push_uint`]
/// when not negative; `-u` as a byte `0x80 - n` and the `n` significant
/// bytes of `u` inverted, so larger `u` (more negative) sorts first.
fn push_int(out: &mut Vec<u8>, e: i64) {
    if e >= 0 {
        push_uint(out, e as u64);
        return;
    }
    let u = e.unsigned_abs();
    let n = (u64::BITS - u.leading_zeros()).div_ceil(8) as usize;
    out.push(0x80 - n as u8);
    out.extend_from_slice(&(!u).to_be_bytes()[8 - n..]);
}

fn bitstring(out: &mut Vec<u8>, b: &BitString) {
    bits(out, b.bit_len(), |i| b.bit(i));
}

/// Rule 7: `len` bits 7 to a byte with the low bit set, then the last 0 to
/// 6 bits (low bit clear) and their count.
fn bits(out: &mut Vec<u8>, len: u64, bit: impl Fn(u64) -> bool) {
    let chunk = |from: u64, n: u64| {
        (0..n).fold(0u8, |acc, b| {
            if bit(from + b) {
                acc | (0x80 >> b)
            } else {
                acc
            }
        })
    };
    let full = len / 7;
    for c in 0..full {
        out.push(chunk(c * 7, 7) | 1);
    }
    let rest = len % 7;
    out.push(chunk(full * 7, rest));
    out.push(rest as u8);
}
