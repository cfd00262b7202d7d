//! The decoded-scheme cache: state digest -> decoded [`AnyScheme`].
//!
//! Mnesia copies `hash_state` out of an ets table on every operation, so the
//! state handed to the NIF must be plain data: a short recipe
//! ([`crate::recipe`]) plus a 16-byte digest of it, computed once when the
//! state changes. Every lookup finds the built scheme here by digest in O(1)
//! (the recipe is neither read nor rehashed on this path); only a miss
//! (first use after a restart, on another node, or after eviction) checks
//! the digest and builds the scheme from the recipe.
//!
//! Two levels:
//! - a per-thread front cache of the last few entries (no lock, no shared
//!   cache line: scheduler threads never contend on the hot path);
//! - a global map behind an `RwLock`, bounded by entry count and by decoded
//!   bytes, evicting the least recently used entry.
//!
//! Entries are immutable (a digest names one state forever), so nothing is
//! ever invalidated; eviction only costs a later decode.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use fraghash::{AnyScheme, FragmentScheme};

use crate::recipe::{digest, Digest, Recipe};

/// Most entries kept in the global cache.
pub const MAX_ENTRIES: usize = 256;
/// Most decoded bytes kept in the global cache (the newest entry is always
/// kept, whatever its size).
pub const MAX_BYTES: usize = 256 << 20;
/// Entries in each thread's front cache.
const FRONT: usize = 4;

/// One decoded state.
#[derive(Debug)]
pub struct Entry {
    /// The digest of the state bytes.
    pub digest: Digest,
    /// The decoded scheme.
    pub scheme: AnyScheme,
    /// A compact lookup index, for `slots` tables that allow one.
    pub runs: Option<crate::runs::RunIndex>,
    /// Approximate memory the entry takes.
    pub bytes: usize,
    last_used: AtomicU64,
}

impl Entry {
    /// The fragment (0-based) of a key hash: the run index when there is
    /// one, else the core's lookup.
    #[inline]
    pub fn locate(&self, h: u64) -> u32 {
        match &self.runs {
            Some(r) => r.locate(h),
            None => self.scheme.locate(h),
        }
    }

    fn new(digest: Digest, scheme: AnyScheme) -> Entry {
        let runs = scheme.as_slots().and_then(crate::runs::RunIndex::build);
        let bytes = scheme.memory_bytes()
            + runs.as_ref().map_or(0, |r| r.memory_bytes())
            + std::mem::size_of::<Entry>();
        Entry {
            digest,
            scheme,
            runs,
            bytes,
            last_used: AtomicU64::new(tick()),
        }
    }
}

/// Why a state could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The bytes do not hash to the digest stored beside them.
    DigestMismatch,
    /// The digest is not 16 bytes.
    BadDigest,
    /// The bytes do not decode.
    Corrupt(String),
}

impl std::fmt::Display for LookupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LookupError::DigestMismatch => {
                f.write_str("hash_state digest does not match its state bytes")
            }
            LookupError::BadDigest => f.write_str("hash_state digest is not a 16-byte binary"),
            LookupError::Corrupt(m) => write!(f, "hash_state bytes do not decode: {m}"),
        }
    }
}

struct Global {
    map: RwLock<HashMap<Digest, Arc<Entry>>>,
}

static GLOBAL: OnceLock<Global> = OnceLock::new();
static CLOCK: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static FRONT_CACHE: RefCell<Vec<Arc<Entry>>> = const { RefCell::new(Vec::new()) };
}

fn tick() -> u64 {
    CLOCK.fetch_add(1, Ordering::Relaxed)
}

fn global() -> &'static Global {
    GLOBAL.get_or_init(|| Global {
        map: RwLock::new(HashMap::new()),
    })
}

fn front_get(d: &Digest) -> Option<Arc<Entry>> {
    FRONT_CACHE.with(|c| c.borrow().iter().rev().find(|e| &e.digest == d).cloned())
}

fn front_put(e: &Arc<Entry>) {
    FRONT_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= FRONT {
            c.remove(0);
        }
        c.push(Arc::clone(e));
    });
}

/// The fragment (0-based) of `h` under the cached state `digest`, or `None`
/// when that state is not cached. The hot path: a hit in this thread's front
/// cache touches no lock and no shared counter.
pub fn locate(digest_bytes: &[u8], h: u64) -> Result<Option<u32>, LookupError> {
    let d: Digest = digest_bytes
        .try_into()
        .map_err(|_| LookupError::BadDigest)?;
    let hit = FRONT_CACHE.with(|c| {
        c.borrow()
            .iter()
            .rev()
            .find(|e| e.digest == d)
            .map(|e| e.locate(h))
    });
    if hit.is_some() {
        return Ok(hit);
    }
    match resolve(&d, || None) {
        Ok(e) => Ok(Some(e.locate(h))),
        Err(LookupError::BadDigest) => Err(LookupError::BadDigest),
        Err(_) => Ok(None),
    }
}

/// Finds the decoded scheme for `digest`; on a miss, `bytes()` gives the state
/// bytes, which are checked against the digest, decoded and cached.
pub fn resolve<'b>(
    digest_bytes: &[u8],
    bytes: impl FnOnce() -> Option<&'b [u8]>,
) -> Result<Arc<Entry>, LookupError> {
    let d: Digest = digest_bytes
        .try_into()
        .map_err(|_| LookupError::BadDigest)?;
    if let Some(e) = front_get(&d) {
        return Ok(e);
    }
    let hit = global()
        .map
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(&d)
        .cloned();
    if let Some(e) = hit {
        e.last_used.store(tick(), Ordering::Relaxed);
        front_put(&e);
        return Ok(e);
    }
    let bytes = bytes().ok_or_else(|| LookupError::Corrupt("state is not a binary".into()))?;
    if digest(bytes) != d {
        return Err(LookupError::DigestMismatch);
    }
    let recipe = Recipe::decode(bytes).map_err(LookupError::Corrupt)?;
    let scheme = build(&d, &recipe).map_err(LookupError::Corrupt)?;
    let e = insert(d, scheme);
    front_put(&e);
    Ok(e)
}

/// Builds a recipe whose digest is `d`: from this node's built-state file
/// when it has a sound one ([`crate::built`]), else by replaying it, then
/// writing the file (only when there is a history to replay).
fn build(d: &Digest, recipe: &Recipe) -> Result<AnyScheme, String> {
    let dir = if recipe.has_history() {
        crate::built::dir()
    } else {
        None
    };
    if let Some(dir) = &dir {
        if let Some(s) = crate::built::load(dir, d) {
            if s.fragments() == recipe.fragments() && s.scheme_spec() == recipe.spec() {
                return Ok(s);
            }
        }
    }
    let s = recipe.build()?;
    if let Some(dir) = &dir {
        crate::built::save(dir, d, &s);
    }
    Ok(s)
}

/// Caches a scheme whose recipe has digest `d` and returns the entry.
pub fn insert(d: Digest, scheme: AnyScheme) -> Arc<Entry> {
    let entry = Arc::new(Entry::new(d, scheme));
    let mut map = global().map.write().unwrap_or_else(|p| p.into_inner());
    if let Some(existing) = map.get(&d) {
        return Arc::clone(existing);
    }
    map.insert(d, Arc::clone(&entry));
    evict(&mut map, &d);
    entry
}

/// Evicts least recently used entries (never `keep`) until within bounds.
fn evict(map: &mut HashMap<Digest, Arc<Entry>>, keep: &Digest) {
    loop {
        let total: usize = map.values().map(|e| e.bytes).sum();
        if map.len() <= MAX_ENTRIES && total <= MAX_BYTES {
            return;
        }
        let victim = map
            .values()
            .filter(|e| &e.digest != keep)
            .min_by_key(|e| e.last_used.load(Ordering::Relaxed))
            .map(|e| e.digest);
        match victim {
            Some(v) => {
                map.remove(&v);
            }
            None => return,
        }
    }
}

/// Entries and decoded bytes in the global cache.
pub fn stats() -> (usize, usize) {
    let map = global().map.read().unwrap_or_else(|p| p.into_inner());
    (map.len(), map.values().map(|e| e.bytes).sum())
}

/// Encodes a recipe and caches `scheme`, the scheme it builds, under its
/// digest. The caller guarantees that `scheme` is what `recipe` builds (the
/// NIF applies to a cached scheme the operation it appends to the recipe).
pub fn store(recipe: &Recipe, scheme: AnyScheme) -> (Digest, Vec<u8>, Arc<Entry>) {
    let bytes = recipe.encode();
    let d = digest(&bytes);
    let e = insert(d, scheme);
    front_put(&e);
    (d, bytes, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_hits_and_checks_digest() {
        let r = Recipe::new("slots", 7, &[]).unwrap();
        let (d, bytes, _) = store(&r, r.build().unwrap());
        let e = resolve(&d, || None).unwrap();
        assert_eq!(e.scheme.fragments(), 7);
        // A digest not cached: the bytes are checked. (A state no other test
        // stores: the cache is global and tests run in parallel.)
        let other = Recipe::new("ring:7", 9, &[]).unwrap().encode();
        let od = digest(&other);
        assert_eq!(
            resolve(&od, || Some(&bytes[..])).unwrap_err(),
            LookupError::DigestMismatch
        );
        assert_eq!(
            resolve(&od, || Some(&other[..]))
                .unwrap()
                .scheme
                .fragments(),
            9
        );
        assert_eq!(
            resolve(&d[..3], || None).unwrap_err(),
            LookupError::BadDigest
        );
        let junk = b"not a state".to_vec();
        assert!(matches!(
            resolve(&digest(&junk), || Some(&junk[..])),
            Err(LookupError::Corrupt(_))
        ));
    }

    #[test]
    fn eviction_keeps_bounds() {
        for n in 1..(MAX_ENTRIES as u32 + 50) {
            let r = Recipe::new("jump", n, &[]).unwrap();
            store(&r, r.build().unwrap());
        }
        assert!(stats().0 <= MAX_ENTRIES);
    }
}
