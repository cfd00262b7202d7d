//! Any bytes given to the recipe decoder give a recipe or an error, never a
//! panic, an abort or an out-of-memory. Whatever decodes is canonical (it
//! re-encodes to the same bytes), and building it either fails with an
//! error or gives a scheme of the spec and fragment count the recipe says.
//!
//! Builds replay every operation over the whole table, so big ones are
//! skipped (see `MAX_WORK`): a recipe of a few bytes can ask for millions of
//! operations, which the decoder rightly accepts (up to
//! `fraghash_nif::recipe::MAX_OPS`) but which would stall the fuzzer.
#![no_main]

use fraghash::{FragmentScheme, SchemeSpec};
use fraghash_nif::recipe::{Recipe, MAGIC};
use libfuzzer_sys::fuzz_target;

/// Most fragments a built table may reach, at any step of its history.
const MAX_FRAGMENTS: u64 = 4096;
/// Most operations a build may replay.
const MAX_OPS: u64 = 10_000;
/// Most work a build may do: (operations + 1) × the largest table, in
/// points (`ring`), slots (`slots`, up to 512 a fragment) or fragments.
const MAX_WORK: u64 = 1 << 22;

fuzz_target!(|data: &[u8]| {
    // Half the inputs get the magic so the fuzzer reaches the bodies.
    let mut owned;
    let bytes = if data.first().is_some_and(|b| b & 1 == 1) {
        owned = MAGIC.to_vec();
        owned.extend_from_slice(&data[1..]);
        &owned[..]
    } else {
        data
    };
    let Ok(recipe) = Recipe::decode(bytes) else {
        return;
    };
    assert_eq!(
        recipe.encode(),
        bytes,
        "decoding accepted a non-canonical recipe"
    );
    let (ops, peak) = replay_size(bytes).expect("a decoded recipe parses");
    let per_fragment = match recipe.spec() {
        SchemeSpec::Ring { points } => u64::from(points),
        SchemeSpec::Slots => 512,
        SchemeSpec::Linear | SchemeSpec::Jump => 1,
    };
    if u64::from(recipe.fragments()) > MAX_FRAGMENTS
        || peak > MAX_FRAGMENTS
        || ops > MAX_OPS
        || (ops + 1) * peak * per_fragment > MAX_WORK
    {
        return;
    }
    if let Ok(scheme) = recipe.build() {
        assert_eq!(scheme.fragments(), recipe.fragments());
        assert_eq!(scheme.scheme_spec(), recipe.spec());
        let n = scheme.fragments();
        for h in [0u64, 1, u64::MAX, 0x8000_0000_0000_0000] {
            assert!(scheme.locate(h) < n);
        }
    }
});

/// The operations a decoded recipe's history replays, and the most
/// fragments its table has at any step (base count included), read from its
/// bytes by the layout the `recipe` module documents: `Recipe` keeps its
/// history to itself. `None` only if the bytes do not follow that layout.
fn replay_size(bytes: &[u8]) -> Option<(u64, u64)> {
    let mut r = bytes.strip_prefix(MAGIC)?;
    let base = u32::from_le_bytes(take(&mut r, 4)?.try_into().ok()?);
    let spec_len = take(&mut r, 1)?[0];
    take(&mut r, spec_len.into())?;
    for _ in 0..varint(&mut r)? {
        varint(&mut r)?; // a weight
    }
    let (mut ops, mut n) = (0u64, u64::from(base));
    let mut peak = n;
    while !r.is_empty() {
        let head = varint(&mut r)?;
        let count = head >> 2;
        match head & 3 {
            // Removals of the last fragment.
            0 => n = n.saturating_sub(count),
            // Adds with the parameters of the latest kind-2 entry.
            1 => n += count,
            // Adds with a weight and a donor bound.
            2 => {
                varint(&mut r)?;
                varint(&mut r)?;
                n += count;
            }
            // Splits of the fragment that follows.
            _ => {
                varint(&mut r)?;
                n += count;
            }
        }
        ops += count;
        peak = peak.max(n);
    }
    Some((ops, peak))
}

fn take<'a>(r: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, rest) = r.split_at_checked(n)?;
    *r = rest;
    Some(head)
}

/// An unsigned LEB128 integer.
fn varint(r: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = take(r, 1)?[0];
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}
