//! Fresh states: "a new table of `n` fragments of this spec", described in a
//! few bytes and built only when first used.
//!
//! Mnesia creates a table of `n_fragments` by calling `add_frag` `n - 1`
//! times on empty fragments. Building and encoding the real state at every
//! step costs O(table) each time: minutes for 4,000 `slots` or `ring`
//! fragments. While a table is being created nothing needs to move, so the
//! adapter stores this description instead, and the NIF builds the scheme
//! with [`AnyScheme::from_spec`] (or [`Slots::with_weights`]) on first use.
//! The first `add_frag` or `del_frag` after creation replaces it with real
//! state bytes.
//!
//! Layout: `b"FHFRESH1"`, fragment count (u32 LE), spec length (u8), spec
//! (UTF-8), then zero or `n` weights (u32 LE each). The golden test below
//! pins what these build to: if the core ever builds new tables
//! differently, the magic's version must change, since stored descriptions
//! must keep placing keys where they did.

use fraghash::scheme::slots::Slots;
use fraghash::{AnyScheme, SchemeSpec};

/// Magic of a fresh-state description.
pub const MAGIC: &[u8; 8] = b"FHFRESH1";

/// Encodes a description; checks it by building nothing but the spec and
/// the limits.
pub fn encode(spec: &str, n: u32, weights: &[u32]) -> Result<Vec<u8>, String> {
    let parsed: SchemeSpec = spec
        .parse()
        .map_err(|e: fraghash::SpecError| e.to_string())?;
    if n == 0 || n > parsed.max_fragments() {
        return Err(format!(
            "{n} fragments is outside 1..={} for {spec}",
            parsed.max_fragments()
        ));
    }
    if !weights.is_empty() {
        if parsed != SchemeSpec::Slots {
            return Err(format!("scheme {spec} does not support weights"));
        }
        if weights.len() != n as usize || weights.contains(&0) {
            return Err("weights must be n integers of at least 1".into());
        }
    }
    let spec = parsed.to_string();
    let mut out = Vec::with_capacity(13 + spec.len() + 4 * weights.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&n.to_le_bytes());
    out.push(spec.len() as u8);
    out.extend_from_slice(spec.as_bytes());
    for w in weights {
        out.extend_from_slice(&w.to_le_bytes());
    }
    Ok(out)
}

/// Whether `bytes` is a fresh-state description.
pub fn is_fresh(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Builds the scheme a description names.
pub fn build(bytes: &[u8]) -> Result<AnyScheme, String> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a fresh-state description")?;
    let (n, rest) = body.split_at_checked(4).ok_or("truncated fresh state")?;
    let n = u32::from_le_bytes(n.try_into().map_err(|_| "truncated fresh state")?);
    let (&len, rest) = rest.split_first().ok_or("truncated fresh state")?;
    let (spec, rest) = rest
        .split_at_checked(len as usize)
        .ok_or("truncated fresh state")?;
    let spec = std::str::from_utf8(spec).map_err(|_| "fresh state spec is not UTF-8")?;
    if rest.len() % 4 != 0 {
        return Err("fresh state weights are not whole u32s".into());
    }
    let weights: Vec<u32> = rest
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    // Re-encoding validates spec, count and weights exactly as `encode`.
    if encode(spec, n, &weights)? != bytes {
        return Err("fresh state is not in canonical form".into());
    }
    let parsed: SchemeSpec = spec
        .parse()
        .map_err(|e: fraghash::SpecError| e.to_string())?;
    if weights.is_empty() {
        AnyScheme::from_spec(parsed, n).map_err(|e| e.to_string())
    } else {
        Slots::with_weights(&weights)
            .map(AnyScheme::Slots)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::digest;
    use fraghash::FragmentScheme;

    fn hex(d: [u8; 16]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn round_trip_and_errors() {
        let b = encode("ring:1000", 7, &[]).unwrap();
        assert!(is_fresh(&b));
        let s = build(&b).unwrap();
        assert_eq!(s.fragments(), 7);
        assert_eq!(s.spec(), "ring:1000");
        let w = build(&encode("slots", 3, &[2, 1, 1]).unwrap()).unwrap();
        assert_eq!(w.as_slots().unwrap().weights(), &[2, 1, 1]);
        assert!(encode("nope", 3, &[]).is_err());
        assert!(encode("slots", 0, &[]).is_err());
        assert!(encode("jump", 2, &[1, 1]).is_err());
        assert!(encode("slots", 2, &[1]).is_err());
        for cut in 0..b.len() {
            assert!(build(&b[..cut]).is_err());
        }
        let mut bad = b.clone();
        bad.push(0);
        assert!(build(&bad).is_err());
    }

    /// What fresh descriptions build to is part of the stored format.
    #[test]
    fn golden() {
        let cases: [(&str, u32, &[u32]); 5] = [
            ("slots", 1, &[]),
            ("slots", 50, &[]),
            ("slots", 4000, &[]),
            ("ring", 50, &[]),
            ("slots", 3, &[2, 1, 3]),
        ];
        let got: Vec<String> = cases
            .iter()
            .map(|(spec, n, w)| {
                let s = build(&encode(spec, *n, w).unwrap()).unwrap();
                hex(digest(&s.to_state_bytes()))
            })
            .collect();
        assert_eq!(
            got, GOLDEN,
            "fresh states now build differently: bump MAGIC"
        );
    }

    const GOLDEN: [&str; 5] = [
        "a29c8691cd19f9c046d97cb8dbe78141",
        "c43c40207d54ccda13808b91357593b0",
        "3ad00dfa85209d1fac6ac4f46ff8bb17",
        "a673081da2409bf17cd930052b66cfc4",
        "add023f18595bdb7c6fab86526108480",
    ];
}
