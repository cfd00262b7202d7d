//! The versioned envelope around every scheme's serialised state.
//!
//! Layout of version 2, the one this build writes: `b"FHST"`, format
//! version (u16 little-endian), scheme tag (u8), the scheme's state encoded
//! with `postcard`, then a CRC-64 ([`checksum`]) of every byte before it
//! (u64 little-endian). Version 1 is the same without the checksum; this
//! build still reads it.
//!
//! Decoding checks each layer and then the scheme's own invariants, so
//! corrupt, truncated or foreign bytes give a [`StateError`], never a panic.
//! Bytes that start like a state (a non-empty prefix of the magic, or the
//! whole magic) but end too early are [`StateError::Corrupt`]; only bytes
//! that are empty or start with something else are [`StateError::Foreign`].
//!
//! # Why a checksum
//!
//! Without one, a damaged body often decodes into another valid state (a
//! slot run naming a different fragment, a ring token off by one) that
//! places keys elsewhere without any error. A CRC detects every single-bit
//! error and every burst of up to 64 flipped bits, and lets other damage
//! through with probability about 2^-64, so a damaged version-2 state is an
//! error, not a silent new placement. Version-1 states have no such
//! protection; writing them back (any change of the table) upgrades them.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::StateError;

/// Magic bytes at the start of every state.
pub const MAGIC: &[u8; 4] = b"FHST";
/// The state format version this build writes.
pub const FORMAT_VERSION: u16 = 2;
/// The oldest format version this build reads (every version from it up to
/// [`FORMAT_VERSION`] is read).
pub const OLDEST_READABLE_VERSION: u16 = 1;
/// Magic, version and tag.
const HEADER: usize = 7;
/// Bytes of the trailing checksum (version 2 on).
const CHECKSUM: usize = 8;

/// Scheme tags in the envelope.
pub(crate) mod tag {
    pub const LINEAR: u8 = 1;
    pub const RING: u8 = 2;
    pub const JUMP: u8 = 3;
    pub const SLOTS: u8 = 4;
}

/// CRC-64/XZ (the ECMA-182 polynomial, reflected, initial value and final
/// XOR all ones) of `bytes`: the checksum that ends a version-2 state.
///
/// ```
/// // The catalogued check value of CRC-64/XZ.
/// assert_eq!(fraghash::state::checksum(b"123456789"), 0x995d_c9bb_df19_39fa);
/// ```
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut crc = u64::MAX;
    for &b in bytes {
        crc = CRC_TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// The reflected ECMA-182 polynomial.
const CRC_POLY: u64 = 0xc96c_5795_d787_0f42;

/// Byte-at-a-time lookup table, built at compile time.
const CRC_TABLE: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ CRC_POLY
            } else {
                c >> 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

pub(crate) fn encode<T: Serialize>(tag: u8, body: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(tag);
    // Serialising plain structs of integers and vectors into a Vec cannot fail.
    let mut out =
        postcard::to_extend(body, out).expect("postcard encoding into a Vec is infallible");
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Splits the envelope, returning the scheme tag and the body (without the
/// checksum, once checked).
pub(crate) fn open(bytes: &[u8]) -> Result<(u8, &[u8]), StateError> {
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes.is_empty() || bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(StateError::Foreign);
    }
    if bytes.len() < HEADER {
        return Err(StateError::Corrupt(format!(
            "truncated: {} bytes, shorter than the {HEADER}-byte header",
            bytes.len()
        )));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    match version {
        1 => Ok((bytes[6], &bytes[HEADER..])),
        2 => {
            if bytes.len() < HEADER + CHECKSUM {
                return Err(StateError::Corrupt(format!(
                    "truncated: {} bytes, too short for a header and a checksum",
                    bytes.len()
                )));
            }
            let (covered, stored) = bytes.split_at(bytes.len() - CHECKSUM);
            let stored = u64::from_le_bytes(stored.try_into().expect("8 bytes"));
            if checksum(covered) != stored {
                return Err(StateError::Corrupt(
                    "checksum mismatch: the state is damaged or truncated".into(),
                ));
            }
            Ok((covered[6], &covered[HEADER..]))
        }
        found => Err(StateError::UnsupportedVersion {
            found,
            supported: FORMAT_VERSION,
        }),
    }
}

pub(crate) fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, StateError> {
    let (value, rest) =
        postcard::take_from_bytes(body).map_err(|e| StateError::Corrupt(e.to_string()))?;
    if !rest.is_empty() {
        return Err(StateError::Corrupt(format!(
            "{} trailing bytes after the state",
            rest.len()
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table-driven CRC equals the bit-by-bit definition.
    #[test]
    fn table_matches_bitwise_definition() {
        fn bitwise(bytes: &[u8]) -> u64 {
            let mut crc = u64::MAX;
            for &b in bytes {
                crc ^= u64::from(b);
                for _ in 0..8 {
                    crc = if crc & 1 == 1 {
                        (crc >> 1) ^ CRC_POLY
                    } else {
                        crc >> 1
                    };
                }
            }
            !crc
        }
        let data: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        for len in [0, 1, 2, 7, 8, 9, 100, 300] {
            assert_eq!(checksum(&data[..len]), bitwise(&data[..len]), "len {len}");
        }
        assert_eq!(checksum(b""), 0);
    }
}
