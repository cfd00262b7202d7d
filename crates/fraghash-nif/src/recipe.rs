//! Recipes: a scheme's state as "a new table of `n` fragments of this spec,
//! then these `add_frag`s and `del_frag`s", in a few dozen bytes.
//!
//! Mnesia copies a table's `hash_state` out of an ets table on every read
//! and write. A binary over 64 bytes is reference-counted: copying it is
//! cheap, but each copy adds its whole size to the process's virtual binary
//! heap, and the garbage collections that triggers made reads through
//! `mnesia_frag` about 20 % slower in the benchmark with a 285-byte state
//! (a 50-fragment `slots` table), whatever the lookup cost. The real state
//! of a `slots` table is kilobytes (about 20 KB at 4,000 fragments), so the
//! adapter never stores it: the `hash_state` holds this recipe instead,
//! which stays under 64 bytes for any table grown and shrunk in a handful of
//! runs, and the NIF builds the scheme from it (on a dirty scheduler) the
//! first time a node needs it.
//!
//! Building replays the history with the same functions the adapter's
//! `add_frag` and `del_frag` call ([`crate::mnesia::add`],
//! [`crate::mnesia::del_last`]), so a rebuilt scheme is the one the
//! incremental path cached. Cost: one base build, O(table), plus O(table)
//! per replayed operation; runs of equal operations are stored once.
//!
//! Layout (integers are unsigned LEB128 unless marked):
//! `b"FHRECIP1"`, base fragment count (u32 LE), spec length (u8), spec
//! (UTF-8, canonical), weight count (0 or the base count), the weights, then
//! history entries to the end. An entry is `count << 2 | kind`: kind 0 is
//! `count` removals of the last fragment, kind 2 is `count` additions with
//! the weight and donor bound that follow it (0: no bound), kind 1 is
//! `count` additions with the parameters of the latest kind-2 entry, kind 3
//! is `count` splits of the fragment (0-based) that follows it (`slots`
//! only: a new fragment takes half of that fragment's slots).
//! Decoding accepts only the canonical encoding (adjacent equal runs
//! merged, kind 2 only when the parameters change), so equal recipes have
//! equal bytes and digests.
//!
//! The golden tests pin what recipes build to: stored recipes must keep
//! placing keys where they did, so if the core ever builds or changes
//! tables differently, the magic's version must change.

use fraghash::scheme::slots::Slots;
use fraghash::{AnyScheme, SchemeSpec};

use crate::mnesia;

/// A 128-bit digest of a recipe's bytes (xxh3-128, little-endian): what the
/// NIF keys built schemes by, and what a hash state carries beside its
/// recipe.
pub type Digest = [u8; 16];

/// The digest of a recipe's bytes.
pub fn digest(bytes: &[u8]) -> Digest {
    xxhash_rust::xxh3::xxh3_128(bytes).to_le_bytes()
}

/// Magic of a recipe.
pub const MAGIC: &[u8; 8] = b"FHRECIP1";

/// Most operations one recipe may replay (a bound on corrupt input: a valid
/// table never gets near it).
pub const MAX_OPS: u64 = 1 << 24;

/// One schema change Mnesia can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `add_frag`: the new fragment's weight and the donor bound (0: none).
    Add {
        /// Weight of the new fragment (1 unless the table has weights).
        weight: u32,
        /// Most fragments it takes slots from; 0 means no bound.
        donors: u32,
    },
    /// `del_frag`: removes the last fragment.
    DelLast,
    /// `add_frag` that relieves one fragment (`slots` only): the new
    /// fragment takes half of this fragment's slots (0-based) and nothing
    /// else moves (see `Slots::split`).
    Split {
        /// The fragment split, 0-based.
        fragment: u32,
    },
}

/// A decoded recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    spec: SchemeSpec,
    base: u32,
    weights: Vec<u32>,
    history: Vec<(Op, u32)>,
}

impl Recipe {
    /// A new table of `n` fragments; `weights` is empty or one weight per
    /// fragment (`slots` only). Checks the spec and the limits.
    pub fn new(spec: &str, n: u32, weights: &[u32]) -> Result<Recipe, String> {
        let spec: SchemeSpec = spec
            .parse()
            .map_err(|e: fraghash::SpecError| e.to_string())?;
        if n == 0 || n > spec.max_fragments() {
            return Err(format!(
                "{n} fragments is outside 1..={} for {spec}",
                spec.max_fragments()
            ));
        }
        if !weights.is_empty() {
            if spec != SchemeSpec::Slots {
                return Err(format!("scheme {spec} does not support weights"));
            }
            if weights.len() != n as usize || weights.contains(&0) {
                return Err("weights must be n integers of at least 1".into());
            }
        }
        Ok(Recipe {
            spec,
            base: n,
            weights: weights.to_vec(),
            history: Vec::new(),
        })
    }

    /// Appends one operation (merged into the last run when equal).
    pub fn push(&mut self, op: Op) {
        match self.history.last_mut() {
            Some((last, count)) if *last == op => *count += 1,
            _ => self.history.push((op, 1)),
        }
    }

    /// The scheme and its parameters.
    pub fn spec(&self) -> SchemeSpec {
        self.spec
    }

    /// The weights of the new table the recipe starts as: one per fragment
    /// (all 1 when it was given none).
    pub fn base_weights(&self) -> Vec<u32> {
        if self.weights.is_empty() {
            vec![1; self.base as usize]
        } else {
            self.weights.clone()
        }
    }

    /// Whether building replays any operation (else it is one base build).
    pub fn has_history(&self) -> bool {
        !self.history.is_empty()
    }

    /// Fragments after the whole history (saturating; [`Recipe::build`]
    /// checks every step).
    pub fn fragments(&self) -> u32 {
        self.history
            .iter()
            .fold(self.base, |n, (op, count)| match op {
                Op::Add { .. } | Op::Split { .. } => n.saturating_add(*count),
                Op::DelLast => n.saturating_sub(*count),
            })
    }

    /// Fragments the table ever had: the base count plus every add in the
    /// history (removals not subtracted). A ring hands each fragment it
    /// gets a new token in order, so its tokens are all below this.
    pub fn fragments_added(&self) -> u64 {
        self.history
            .iter()
            .filter(|(op, _)| matches!(op, Op::Add { .. }))
            .fold(u64::from(self.base), |n, (_, count)| n + u64::from(*count))
    }

    /// The canonical bytes.
    pub fn encode(&self) -> Vec<u8> {
        let spec = self.spec.to_string();
        let mut out = Vec::with_capacity(24 + spec.len() + 5 * self.weights.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.base.to_le_bytes());
        out.push(spec.len() as u8);
        out.extend_from_slice(spec.as_bytes());
        put_varint(&mut out, self.weights.len() as u64);
        for &w in &self.weights {
            put_varint(&mut out, u64::from(w));
        }
        let mut params = None;
        for &(op, count) in &self.history {
            let count = u64::from(count) << 2;
            match op {
                Op::DelLast => put_varint(&mut out, count),
                Op::Split { fragment } => {
                    put_varint(&mut out, count | 3);
                    put_varint(&mut out, u64::from(fragment));
                }
                Op::Add { weight, donors } if params == Some((weight, donors)) => {
                    put_varint(&mut out, count | 1)
                }
                Op::Add { weight, donors } => {
                    put_varint(&mut out, count | 2);
                    put_varint(&mut out, u64::from(weight));
                    put_varint(&mut out, u64::from(donors));
                    params = Some((weight, donors));
                }
            }
        }
        out
    }

    /// Decodes canonical recipe bytes.
    pub fn decode(bytes: &[u8]) -> Result<Recipe, String> {
        let mut r = Reader(bytes.strip_prefix(MAGIC).ok_or("not a fraghash recipe")?);
        let base = u32::from_le_bytes(r.take(4)?.try_into().map_err(|_| TRUNCATED)?);
        let len = r.take(1)?[0];
        let spec = std::str::from_utf8(r.take(len as usize)?)
            .map_err(|_| "recipe spec is not UTF-8")?
            .to_owned();
        let nw = r.varint()?;
        if nw > u64::from(base) {
            return Err("recipe has more weights than fragments".into());
        }
        let weights = (0..nw)
            .map(|_| r.u32())
            .collect::<Result<Vec<u32>, String>>()?;
        let mut recipe = Recipe::new(&spec, base, &weights)?;
        let mut params = None;
        let mut ops = 0u64;
        while !r.0.is_empty() {
            let head = r.varint()?;
            let count = u32::try_from(head >> 2).map_err(|_| "recipe run too long")?;
            let op = match head & 3 {
                0 => Op::DelLast,
                1 => {
                    let (weight, donors) = params.ok_or("recipe repeats an add before any")?;
                    Op::Add { weight, donors }
                }
                2 => {
                    let p = (r.u32()?, r.u32()?);
                    params = Some(p);
                    Op::Add {
                        weight: p.0,
                        donors: p.1,
                    }
                }
                _ => Op::Split { fragment: r.u32()? },
            };
            ops += u64::from(count);
            if count == 0 || ops > MAX_OPS {
                return Err("recipe run count out of range".into());
            }
            if recipe.history.last().is_some_and(|(last, _)| *last == op) {
                return Err("recipe is not in canonical form (runs not merged)".into());
            }
            recipe.history.push((op, count));
        }
        if recipe.encode() != bytes {
            return Err("recipe is not in canonical form".into());
        }
        Ok(recipe)
    }

    /// Builds the scheme: the base table, then every operation replayed.
    pub fn build(&self) -> Result<AnyScheme, String> {
        let mut s = if self.weights.is_empty() {
            AnyScheme::from_spec(self.spec, self.base).map_err(|e| e.to_string())?
        } else {
            AnyScheme::Slots(Slots::with_weights(&self.weights).map_err(|e| e.to_string())?)
        };
        for &(op, count) in &self.history {
            for _ in 0..count {
                apply(&mut s, op).map_err(|e| format!("recipe does not replay: {e}"))?;
            }
        }
        Ok(s)
    }
}

/// Applies one operation as the adapter's `add_frag`/`del_frag` do.
pub fn apply(s: &mut AnyScheme, op: Op) -> Result<mnesia::FragChange, fraghash::SchemeError> {
    match op {
        Op::Add { weight, donors } => {
            let bound = if donors == 0 { u32::MAX } else { donors };
            mnesia::add(s, weight, bound)
        }
        Op::DelLast => mnesia::del_last(s),
        Op::Split { fragment } => mnesia::split(s, fragment),
    }
}

/// Whether `bytes` claims to be a recipe.
pub fn is_recipe(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

const TRUNCATED: &str = "truncated recipe";

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let (head, rest) = self.0.split_at_checked(n).ok_or(TRUNCATED)?;
        self.0 = rest;
        Ok(head)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("recipe integer too long".into())
    }

    fn u32(&mut self) -> Result<u32, String> {
        u32::try_from(self.varint()?).map_err(|_| "recipe integer out of range".into())
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
#[path = "recipe_tests.rs"]
mod tests;
