//! The versioned envelope around every scheme's serialised state.
//!
//! Layout: `b"FHST"`, format version (u16 little-endian), scheme tag (u8),
//! then the scheme's state encoded with `postcard`. Decoding checks each
//! layer and then the scheme's own invariants, so corrupt, truncated or
//! foreign bytes give a [`StateError`], never a panic.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::StateError;

/// Magic bytes at the start of every state.
pub const MAGIC: &[u8; 4] = b"FHST";
/// The state format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;
const HEADER: usize = 7;

/// Scheme tags in the envelope.
pub(crate) mod tag {
    pub const LINEAR: u8 = 1;
    pub const RING: u8 = 2;
    pub const JUMP: u8 = 3;
    pub const SLOTS: u8 = 4;
}

pub(crate) fn encode<T: Serialize>(tag: u8, body: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(tag);
    // Serialising plain structs of integers and vectors into a Vec cannot fail.
    postcard::to_extend(body, out).expect("postcard encoding into a Vec is infallible")
}

/// Splits the envelope, returning the scheme tag and the body.
pub(crate) fn open(bytes: &[u8]) -> Result<(u8, &[u8]), StateError> {
    if bytes.len() < HEADER || &bytes[..4] != MAGIC {
        if bytes.len() < HEADER && MAGIC.starts_with(bytes) && !bytes.is_empty() {
            return Err(StateError::Corrupt("truncated header".into()));
        }
        return Err(StateError::Foreign);
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != FORMAT_VERSION {
        return Err(StateError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    Ok((bytes[6], &bytes[HEADER..]))
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
