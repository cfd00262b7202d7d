//! Erlang terms: the external term format, and order keys.
//!
//! - [`decode`] reads the bytes of `term_to_binary/1` (version 131) into a
//!   [`Term`]; [`Term::to_etf`] writes them back.
//! - [`encode_key`] turns a [`Term`] into its order key, and [`order_key`]
//!   does both steps. The rules, each with its source in the Erlang
//!   reference manual, are in the [`order`] module's documentation.
//! - [`pattern_prefix`] gives the bytes the order key of every term
//!   matching an ets match pattern starts with, and [`pattern_prefix_etf`]
//!   does the same from the pattern's external format.
//! - [`reference_cmp`] compares two terms by Erlang's rules directly, without
//!   the encoding.
//!
//! Limits: nesting deeper than [`MAX_DEPTH`] levels is refused when decoding
//! and encoding (list tails do not count: a long list is not deep); an order
//! key longer than [`MAX_KEY_LEN`] bytes is refused. Pids, ports, references
//! and funs decode, but are refused as keys ([`TermError::UnsupportedKey`]):
//! see [`order`].

mod etf;
mod etf_write;
pub mod order;
mod reference;

pub use etf::decode;
pub use order::{encode_key, order_key, pattern_prefix, pattern_prefix_etf, MAX_KEY_LEN};
pub use reference::{reference_cmp, reference_cmp_exact};

/// How deeply terms may nest (tuple in tuple, list head in list, map value
/// in map, ...). A list's tail is not a level: `[1, 2, 3]` is one level
/// however long it is. The bound keeps the recursive decoder and encoder
/// well inside the stack of any scheduler thread.
pub const MAX_DEPTH: usize = 128;

/// An Erlang term, as decoded from the external term format.
///
/// Lists are kept flat: `List(elements, tail)` is `[E1, E2, ... | Tail]`
/// with at least one element and a tail that is not itself a list (`Nil`
/// for a proper list). The decoder always builds them so; the encoder and
/// the comparator also accept a `List` with no elements (it stands for its
/// tail) or with a `List` tail (its elements continue the list).
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// An integer of any size.
    Int(Int),
    /// A float. Erlang floats are finite; the decoder refuses others.
    Float(f64),
    /// An atom, by its text.
    Atom(String),
    /// A binary, or a bitstring whose length is not a whole number of bytes.
    Bits(BitString),
    /// A tuple.
    Tuple(Vec<Term>),
    /// A map, as its pairs in the order the bytes gave them.
    Map(Vec<(Term, Term)>),
    /// The empty list `[]`.
    Nil,
    /// A non-empty list: its elements and its tail.
    List(Vec<Term>, Box<Term>),
    /// A pid, port, reference or fun, kept as its external format bytes.
    Opaque(Opaque),
}

/// A term whose order depends on the node that reads it (pids, ports,
/// references) or on code (funs): kept as bytes, refused as a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opaque {
    /// Which kind of term it is.
    pub kind: OpaqueKind,
    /// Its bytes in the external term format, from its tag on (no version
    /// byte).
    pub etf: Vec<u8>,
}

/// The kinds of [`Opaque`] terms, in Erlang's order of types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpaqueKind {
    /// A reference (`make_ref/0`).
    Reference,
    /// A fun, local or external (`fun m:f/a`).
    Fun,
    /// A port.
    Port,
    /// A pid.
    Pid,
}

impl OpaqueKind {
    /// The kind's name, as an Erlang programmer calls it.
    pub fn name(self) -> &'static str {
        match self {
            OpaqueKind::Reference => "reference",
            OpaqueKind::Fun => "fun",
            OpaqueKind::Port => "port",
            OpaqueKind::Pid => "pid",
        }
    }
}

/// An integer of any size: a sign and a magnitude.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Int {
    negative: bool,
    /// Little-endian bytes, without high zero bytes; empty for zero.
    magnitude: Vec<u8>,
}

impl Int {
    /// The integer `-magnitude` or `magnitude`, from little-endian bytes
    /// (high zero bytes are allowed; zero is never negative).
    pub fn from_le_bytes(negative: bool, mut magnitude: Vec<u8>) -> Int {
        while magnitude.last() == Some(&0) {
            magnitude.pop();
        }
        let negative = negative && !magnitude.is_empty();
        Int {
            negative,
            magnitude,
        }
    }

    /// Whether the integer is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Whether the integer is zero.
    pub fn is_zero(&self) -> bool {
        self.magnitude.is_empty()
    }

    /// The absolute value, as little-endian bytes without high zero bytes.
    pub fn magnitude(&self) -> &[u8] {
        &self.magnitude
    }

    /// The value, when it fits in an `i64`.
    pub fn to_i64(&self) -> Option<i64> {
        if self.magnitude.len() > 8 {
            return None;
        }
        let mut le = [0u8; 8];
        le[..self.magnitude.len()].copy_from_slice(&self.magnitude);
        let m = u64::from_le_bytes(le);
        if self.negative {
            0i64.checked_sub_unsigned(m)
        } else {
            i64::try_from(m).ok()
        }
    }
}

impl From<i64> for Int {
    fn from(v: i64) -> Int {
        Int::from_le_bytes(v < 0, v.unsigned_abs().to_le_bytes().to_vec())
    }
}

/// A sequence of bits: a binary, or a bitstring of any bit length.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BitString {
    /// The bits, the first in the high bit of the first byte; the unused low
    /// bits of the last byte are zero.
    bytes: Vec<u8>,
    bit_len: u64,
}

impl BitString {
    /// A binary: whole bytes.
    pub fn from_bytes(bytes: Vec<u8>) -> BitString {
        let bit_len = bytes.len() as u64 * 8;
        BitString { bytes, bit_len }
    }

    /// A bitstring of `bit_len` bits, the first in the high bit of
    /// `bytes[0]`. `None` unless `bytes` has exactly the bytes the bits need;
    /// the bits past `bit_len` are ignored.
    pub fn new(mut bytes: Vec<u8>, bit_len: u64) -> Option<BitString> {
        if bytes.len() as u64 != bit_len.div_ceil(8) {
            return None;
        }
        let used = (bit_len % 8) as u32;
        if used != 0 {
            if let Some(last) = bytes.last_mut() {
                *last &= !(0xFFu8 >> used);
            }
        }
        Some(BitString { bytes, bit_len })
    }

    /// How many bits there are.
    pub fn bit_len(&self) -> u64 {
        self.bit_len
    }

    /// The bytes holding the bits (see [`BitString::new`]).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bit `i` (0 is the first), `false` past the end.
    pub fn bit(&self, i: u64) -> bool {
        i < self.bit_len && self.bytes[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
    }
}

impl Term {
    /// The atom with this text.
    pub fn atom(text: &str) -> Term {
        Term::Atom(text.to_owned())
    }

    /// The binary with these bytes.
    pub fn binary(bytes: &[u8]) -> Term {
        Term::Bits(BitString::from_bytes(bytes.to_vec()))
    }

    /// The proper list of these elements (`[]` when there are none).
    pub fn list(elements: Vec<Term>) -> Term {
        Term::improper_list(elements, Term::Nil)
    }

    /// `[E1, ... | Tail]`, kept flat (see [`Term`]); `Tail` itself when
    /// there are no elements.
    pub fn improper_list(mut elements: Vec<Term>, tail: Term) -> Term {
        let tail = match tail {
            Term::List(more, t) => {
                elements.extend(more);
                *t
            }
            t => t,
        };
        if elements.is_empty() {
            tail
        } else {
            Term::List(elements, Box::new(tail))
        }
    }

    /// The term in the external term format, with the version byte (131),
    /// as `binary_to_term/1` reads it.
    pub fn to_etf(&self) -> Vec<u8> {
        etf_write::to_etf(self)
    }
}

impl From<i64> for Term {
    fn from(v: i64) -> Term {
        Term::Int(Int::from(v))
    }
}

/// Why bytes are not a term, or a term is not a key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TermError {
    /// The bytes do not start with the format's version byte, 131.
    #[error("not the external term format: the first byte is {found:?}, not 131")]
    BadVersion {
        /// The first byte, if any.
        found: Option<u8>,
    },
    /// A compressed term (`term_to_binary(T, [compressed])`).
    #[error("compressed terms are not supported (at byte {offset})")]
    Compressed {
        /// Where the tag is.
        offset: usize,
    },
    /// A tag this decoder does not read (atom cache references and other
    /// distribution-only tags, the old `FUN_EXT`, `LOCAL_EXT`, or bytes that
    /// are no term at all).
    #[error("unknown or unsupported tag {tag} at byte {offset}")]
    UnknownTag {
        /// The tag byte.
        tag: u8,
        /// Where it is.
        offset: usize,
    },
    /// The bytes end inside a term.
    #[error("the term is cut short at byte {offset}")]
    Truncated {
        /// Where more bytes were needed.
        offset: usize,
    },
    /// Bytes are left after the term.
    #[error("{extra} bytes follow the term")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// Well-formed bytes with a meaning no Erlang term has (an atom that is
    /// not UTF-8, a float that is not finite, a map with a key twice, ...).
    #[error("invalid term at byte {offset}: {reason}")]
    Invalid {
        /// Where.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// The term nests deeper than [`MAX_DEPTH`].
    #[error("the term nests deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The term holds a pid, port, reference or fun, whose order is not
    /// stable (see [`order`]), so it cannot be a key.
    #[error("a {} cannot be part of a key: its order is not stable", kind.name())]
    UnsupportedKey {
        /// The kind found.
        kind: OpaqueKind,
    },
    /// The order key would be longer than [`MAX_KEY_LEN`] bytes.
    #[error("the key is too large: its order key exceeds {limit} bytes")]
    KeyTooLarge {
        /// The limit.
        limit: usize,
    },
}
