//! Writing a [`Term`] in the external term format, as `term_to_binary/1`
//! would (atoms as UTF-8; integers in the smallest encoding).

use super::etf::*;
use super::Term;

pub(super) fn to_etf(t: &Term) -> Vec<u8> {
    let mut out = vec![VERSION];
    write(&mut out, t);
    out
}

fn len32(out: &mut Vec<u8>, n: usize) {
    // Lengths past u32 have no encoding; terms that large are not built
    // here (the decoder never makes one).
    out.extend_from_slice(&(n as u32).to_be_bytes());
}

fn write(out: &mut Vec<u8>, t: &Term) {
    match t {
        Term::Int(i) => match i.to_i64() {
            Some(v @ 0..=255) => out.extend([SMALL_INTEGER_EXT, v as u8]),
            Some(v) if i32::try_from(v).is_ok() => {
                out.push(INTEGER_EXT);
                out.extend_from_slice(&(v as i32).to_be_bytes());
            }
            _ => {
                let m = i.magnitude();
                if m.len() < 256 {
                    out.extend([SMALL_BIG_EXT, m.len() as u8]);
                } else {
                    out.push(LARGE_BIG_EXT);
                    len32(out, m.len());
                }
                out.push(u8::from(i.is_negative()));
                out.extend_from_slice(m);
            }
        },
        Term::Float(f) => {
            out.push(NEW_FLOAT_EXT);
            out.extend_from_slice(&f.to_be_bytes());
        }
        Term::Atom(a) => {
            if a.len() < 256 {
                out.extend([SMALL_ATOM_UTF8_EXT, a.len() as u8]);
            } else {
                out.push(ATOM_UTF8_EXT);
                out.extend_from_slice(&(a.len() as u16).to_be_bytes());
            }
            out.extend_from_slice(a.as_bytes());
        }
        Term::Bits(b) => {
            let bytes = b.as_bytes();
            match b.bit_len() % 8 {
                0 => {
                    out.push(BINARY_EXT);
                    len32(out, bytes.len());
                }
                bits => {
                    out.push(BIT_BINARY_EXT);
                    len32(out, bytes.len());
                    out.push(bits as u8);
                }
            }
            out.extend_from_slice(bytes);
        }
        Term::Tuple(v) => {
            if v.len() < 256 {
                out.extend([SMALL_TUPLE_EXT, v.len() as u8]);
            } else {
                out.push(LARGE_TUPLE_EXT);
                len32(out, v.len());
            }
            for e in v {
                write(out, e);
            }
        }
        Term::Map(pairs) => {
            out.push(MAP_EXT);
            len32(out, pairs.len());
            for (k, v) in pairs {
                write(out, k);
                write(out, v);
            }
        }
        Term::Nil => out.push(NIL_EXT),
        Term::List(elems, tail) if elems.is_empty() => write(out, tail),
        Term::List(elems, tail) => {
            out.push(LIST_EXT);
            len32(out, elems.len());
            for e in elems {
                write(out, e);
            }
            write(out, tail);
        }
        Term::Opaque(o) => out.extend_from_slice(&o.etf),
    }
}
