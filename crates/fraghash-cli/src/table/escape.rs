//! The line format `table scan` prints and `table load` reads: one record a
//! line, `key<TAB>value<LF>`, with every byte that would break the line
//! written as a backslash escape, so that whatever `scan` prints `load`
//! reads back as the same records.
//!
//! | byte | written as |
//! |---|---|
//! | `\` | `\\` |
//! | TAB | `\t` |
//! | LF | `\n` |
//! | CR | `\r` |
//!
//! Every other byte is written as it is (keys and values are bytes, not
//! necessarily UTF-8). A backslash followed by anything else, or ending a
//! field, is refused rather than guessed at.

use thiserror::Error;

/// A field of a `load` line that is not in the escaped format.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EscapeError {
    /// A backslash followed by a byte that names no escape.
    #[error("unknown escape \\{} at byte {at} (escapes: \\\\ \\t \\n \\r)", char::from(*byte).escape_default())]
    Unknown {
        /// The byte after the backslash.
        byte: u8,
        /// Its offset in the field.
        at: usize,
    },
    /// A field that ends in a lone backslash.
    #[error("a lone backslash ends the field (write \\\\ for a backslash)")]
    Trailing,
}

/// Appends `field` to `out` with `\`, TAB, LF and CR escaped.
pub fn escape_into(field: &[u8], out: &mut Vec<u8>) {
    for &b in field {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// The bytes an escaped `field` stands for.
pub fn unescape(field: &[u8]) -> Result<Vec<u8>, EscapeError> {
    let mut out = Vec::with_capacity(field.len());
    let mut bytes = field.iter().copied().enumerate();
    while let Some((at, b)) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some((_, b'\\')) => out.push(b'\\'),
            Some((_, b't')) => out.push(b'\t'),
            Some((_, b'n')) => out.push(b'\n'),
            Some((_, b'r')) => out.push(b'\r'),
            Some((_, byte)) => return Err(EscapeError::Unknown { byte, at }),
            None => return Err(EscapeError::Trailing),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(field: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        escape_into(field, &mut v);
        v
    }

    #[test]
    fn every_byte_round_trips_and_no_separator_survives() {
        let all: Vec<u8> = (0..=255u8).chain([b'\\', b'\\', b't']).collect();
        let e = escaped(&all);
        assert!(!e.contains(&b'\t') && !e.contains(&b'\n') && !e.contains(&b'\r'));
        assert_eq!(unescape(&e).unwrap(), all);
        assert_eq!(escaped(b"a\tb\nc\\d\re"), b"a\\tb\\nc\\\\d\\re");
    }

    #[test]
    fn unknown_and_trailing_escapes_are_refused() {
        assert_eq!(
            unescape(b"ab\\x"),
            Err(EscapeError::Unknown { byte: b'x', at: 2 })
        );
        assert_eq!(unescape(b"ab\\"), Err(EscapeError::Trailing));
        assert_eq!(unescape(b"plain"), Ok(b"plain".to_vec()));
    }
}
