//! Decoding of the external term format (version 131), as described in the
//! ERTS User's Guide, "External Term Format".
//!
//! Bytes from anywhere are accepted: every length is checked against the
//! bytes that are there before anything is allocated for it, and nesting is
//! bounded by [`MAX_DEPTH`], so bad input gives a [`TermError`], never a
//! panic or an allocation the input does not pay for.

use super::{BitString, Int, Opaque, OpaqueKind, Term, TermError, MAX_DEPTH};

pub(super) const VERSION: u8 = 131;

pub(super) const NEW_FLOAT_EXT: u8 = 70;
pub(super) const BIT_BINARY_EXT: u8 = 77;
const COMPRESSED: u8 = 80;
const NEW_PID_EXT: u8 = 88;
const NEW_PORT_EXT: u8 = 89;
const NEWER_REFERENCE_EXT: u8 = 90;
pub(super) const SMALL_INTEGER_EXT: u8 = 97;
pub(super) const INTEGER_EXT: u8 = 98;
const FLOAT_EXT: u8 = 99;
const ATOM_EXT: u8 = 100;
const REFERENCE_EXT: u8 = 101;
const PORT_EXT: u8 = 102;
const PID_EXT: u8 = 103;
pub(super) const SMALL_TUPLE_EXT: u8 = 104;
pub(super) const LARGE_TUPLE_EXT: u8 = 105;
pub(super) const NIL_EXT: u8 = 106;
const STRING_EXT: u8 = 107;
pub(super) const LIST_EXT: u8 = 108;
pub(super) const BINARY_EXT: u8 = 109;
pub(super) const SMALL_BIG_EXT: u8 = 110;
pub(super) const LARGE_BIG_EXT: u8 = 111;
const NEW_FUN_EXT: u8 = 112;
const EXPORT_EXT: u8 = 113;
const NEW_REFERENCE_EXT: u8 = 114;
const SMALL_ATOM_EXT: u8 = 115;
pub(super) const MAP_EXT: u8 = 116;
pub(super) const ATOM_UTF8_EXT: u8 = 118;
pub(super) const SMALL_ATOM_UTF8_EXT: u8 = 119;
const V4_PORT_EXT: u8 = 120;

/// Decodes one term from `bytes`: the version byte 131, then the term, and
/// nothing after it.
///
/// Reads integers (`SMALL_INTEGER_EXT`, `INTEGER_EXT`, `SMALL_BIG_EXT`,
/// `LARGE_BIG_EXT`), floats (`NEW_FLOAT_EXT`, `FLOAT_EXT`), atoms (all four
/// encodings), binaries and bitstrings, tuples, lists (`NIL_EXT`,
/// `STRING_EXT`, `LIST_EXT`), maps, and pids, ports, references and funs
/// (`NEW_PID_EXT`, `PID_EXT`, `NEW_PORT_EXT`, `V4_PORT_EXT`, `PORT_EXT`,
/// `NEWER_REFERENCE_EXT`, `NEW_REFERENCE_EXT`, `REFERENCE_EXT`,
/// `NEW_FUN_EXT`, `EXPORT_EXT`) as [`Opaque`] bytes. Compressed terms and
/// other tags are refused.
pub fn decode(bytes: &[u8]) -> Result<Term, TermError> {
    match bytes.first() {
        Some(&VERSION) => {}
        found => {
            return Err(TermError::BadVersion {
                found: found.copied(),
            })
        }
    }
    let mut r = Reader { buf: bytes, pos: 1 };
    let t = r.term(0)?;
    match bytes.len() - r.pos {
        0 => Ok(t),
        extra => Err(TermError::TrailingBytes { extra }),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TermError> {
        let truncated = TermError::Truncated { offset: self.pos };
        let end = self.pos.checked_add(n).ok_or(truncated.clone())?;
        let s = self.buf.get(self.pos..end).ok_or(truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, TermError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<usize, TermError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]) as usize)
    }

    fn u32(&mut self) -> Result<usize, TermError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn invalid(&self, offset: usize, reason: &'static str) -> TermError {
        TermError::Invalid { offset, reason }
    }

    fn term(&mut self, depth: usize) -> Result<Term, TermError> {
        if depth >= MAX_DEPTH {
            return Err(TermError::TooDeep { limit: MAX_DEPTH });
        }
        let start = self.pos;
        let tag = self.u8()?;
        Ok(match tag {
            SMALL_INTEGER_EXT => Term::from(i64::from(self.u8()?)),
            INTEGER_EXT => {
                let b = self.take(4)?;
                Term::from(i64::from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            }
            SMALL_BIG_EXT | LARGE_BIG_EXT => {
                let n = if tag == SMALL_BIG_EXT {
                    self.u8()? as usize
                } else {
                    self.u32()?
                };
                let sign = self.u8()?;
                if sign > 1 {
                    return Err(self.invalid(start, "big integer sign is not 0 or 1"));
                }
                Term::Int(Int::from_le_bytes(sign == 1, self.take(n)?.to_vec()))
            }
            NEW_FLOAT_EXT => {
                let b = self.take(8)?;
                let f = f64::from_be_bytes(b.try_into().expect("8 bytes"));
                self.finite(start, f)?
            }
            FLOAT_EXT => {
                let b = self.take(31)?;
                let text = b.split(|&c| c == 0).next().unwrap_or_default();
                let f = std::str::from_utf8(text)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .ok_or_else(|| self.invalid(start, "FLOAT_EXT text is not a float"))?;
                self.finite(start, f)?
            }
            ATOM_EXT | SMALL_ATOM_EXT | ATOM_UTF8_EXT | SMALL_ATOM_UTF8_EXT => {
                Term::Atom(self.atom_body(tag, start)?)
            }
            BINARY_EXT => {
                let n = self.u32()?;
                Term::Bits(BitString::from_bytes(self.take(n)?.to_vec()))
            }
            BIT_BINARY_EXT => {
                let n = self.u32()?;
                let bits = self.u8()?;
                if n == 0 || !(1..=8).contains(&bits) {
                    return Err(self.invalid(start, "BIT_BINARY_EXT bit count out of range"));
                }
                let bit_len = (n as u64 - 1) * 8 + u64::from(bits);
                let data = self.take(n)?.to_vec();
                Term::Bits(BitString::new(data, bit_len).expect("length matches"))
            }
            SMALL_TUPLE_EXT | LARGE_TUPLE_EXT => {
                let n = if tag == SMALL_TUPLE_EXT {
                    self.u8()? as usize
                } else {
                    self.u32()?
                };
                // Every element takes at least one byte.
                let mut v = Vec::with_capacity(n.min(self.remaining()));
                for _ in 0..n {
                    v.push(self.term(depth + 1)?);
                }
                Term::Tuple(v)
            }
            NIL_EXT => Term::Nil,
            STRING_EXT => {
                let n = self.u16()?;
                let elems = self.take(n)?.iter().map(|&c| Term::from(i64::from(c)));
                Term::list(elems.collect())
            }
            LIST_EXT => self.list(depth)?,
            MAP_EXT => {
                let n = self.u32()?;
                let mut v = Vec::with_capacity(n.min(self.remaining() / 2));
                for _ in 0..n {
                    let k = self.term(depth + 1)?;
                    let val = self.term(depth + 1)?;
                    v.push((k, val));
                }
                Term::Map(v)
            }
            NEW_PID_EXT | PID_EXT => {
                self.node()?;
                self.take(if tag == NEW_PID_EXT { 12 } else { 9 })?;
                self.opaque(OpaqueKind::Pid, start)
            }
            NEW_PORT_EXT | V4_PORT_EXT | PORT_EXT => {
                self.node()?;
                self.take(match tag {
                    NEW_PORT_EXT => 8,
                    V4_PORT_EXT => 12,
                    _ => 5,
                })?;
                self.opaque(OpaqueKind::Port, start)
            }
            NEWER_REFERENCE_EXT | NEW_REFERENCE_EXT => {
                let words = self.u16()?;
                if words == 0 || words > 5 {
                    return Err(self.invalid(start, "reference ID length out of range"));
                }
                self.node()?;
                let creation = if tag == NEWER_REFERENCE_EXT { 4 } else { 1 };
                self.take(creation + 4 * words)?;
                self.opaque(OpaqueKind::Reference, start)
            }
            REFERENCE_EXT => {
                self.node()?;
                self.take(5)?;
                self.opaque(OpaqueKind::Reference, start)
            }
            NEW_FUN_EXT => {
                // Size counts itself and everything after it.
                let size = self.u32()?;
                let rest = size
                    .checked_sub(4)
                    .ok_or_else(|| self.invalid(start, "NEW_FUN_EXT size too small"))?;
                self.take(rest)?;
                self.opaque(OpaqueKind::Fun, start)
            }
            EXPORT_EXT => {
                for _ in 0..2 {
                    if !matches!(self.term(depth + 1)?, Term::Atom(_)) {
                        return Err(self.invalid(start, "EXPORT_EXT module or name not an atom"));
                    }
                }
                if !matches!(self.term(depth + 1)?, Term::Int(_)) {
                    return Err(self.invalid(start, "EXPORT_EXT arity not an integer"));
                }
                self.opaque(OpaqueKind::Fun, start)
            }
            COMPRESSED => return Err(TermError::Compressed { offset: start }),
            _ => return Err(TermError::UnknownTag { tag, offset: start }),
        })
    }

    fn finite(&self, start: usize, f: f64) -> Result<Term, TermError> {
        if f.is_finite() {
            Ok(Term::Float(f))
        } else {
            Err(self.invalid(start, "float is not finite"))
        }
    }

    /// A list, flattened: a tail that is itself a list (only crafted bytes
    /// have one) continues the elements.
    fn list(&mut self, depth: usize) -> Result<Term, TermError> {
        let mut elems = Vec::new();
        loop {
            let n = self.u32()?;
            elems.reserve(n.min(self.remaining()));
            for _ in 0..n {
                elems.push(self.term(depth + 1)?);
            }
            // The tail is at this level: loop on LIST_EXT instead of
            // recursing, so that a chain of tails costs no depth.
            match self.buf.get(self.pos) {
                Some(&LIST_EXT) => self.pos += 1,
                _ => {
                    let tail = self.term(depth)?;
                    return Ok(Term::improper_list(elems, tail));
                }
            }
        }
    }

    fn atom_body(&mut self, tag: u8, start: usize) -> Result<String, TermError> {
        let n = match tag {
            SMALL_ATOM_EXT | SMALL_ATOM_UTF8_EXT => self.u8()? as usize,
            _ => self.u16()?,
        };
        let b = self.take(n)?;
        let text = match tag {
            // Latin-1: each byte is the code point.
            ATOM_EXT | SMALL_ATOM_EXT => b.iter().map(|&c| char::from(c)).collect(),
            _ => std::str::from_utf8(b)
                .map_err(|_| self.invalid(start, "atom text is not UTF-8"))?
                .to_owned(),
        };
        if text.chars().count() > 255 {
            return Err(self.invalid(start, "atom longer than 255 characters"));
        }
        Ok(text)
    }

    /// The node atom of a pid, port or reference.
    fn node(&mut self) -> Result<(), TermError> {
        let start = self.pos;
        let tag = self.u8()?;
        match tag {
            ATOM_EXT | SMALL_ATOM_EXT | ATOM_UTF8_EXT | SMALL_ATOM_UTF8_EXT => {
                self.atom_body(tag, start).map(drop)
            }
            _ => Err(self.invalid(start, "node name is not an atom")),
        }
    }

    fn opaque(&self, kind: OpaqueKind, start: usize) -> Term {
        Term::Opaque(Opaque {
            kind,
            etf: self.buf[start..self.pos].to_vec(),
        })
    }
}
