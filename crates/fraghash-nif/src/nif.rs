//! The NIF entry points of module `fraghash_nif` (see the crate docs).

use std::sync::Arc;

use fraghash::{widen_phash2, AnyScheme, FragmentScheme};
use rustler::{Binary, Encoder, Env, Error, NewBinary, NifResult, Term};

use crate::cache::{self, Entry, LookupError};
use crate::mnesia::{self, FragChange};

mod atoms {
    rustler::atoms! {
        fraghash,
        miss,
        corrupt_state,
        digest_mismatch,
        bad_spec,
        refused,
        spec,
        fragments,
        memory_bytes,
        slot_bits,
        slots_per_fragment,
        weights,
    }
}

fn raise(reason: rustler::Atom, msg: String) -> Error {
    Error::RaiseTerm(Box::new((atoms::fraghash(), reason, msg)))
}

fn lookup_error(e: LookupError) -> Error {
    let reason = match e {
        LookupError::DigestMismatch => atoms::digest_mismatch(),
        LookupError::BadDigest | LookupError::Corrupt(_) => atoms::corrupt_state(),
    };
    raise(reason, e.to_string())
}

fn refused(e: impl std::fmt::Display) -> Error {
    raise(atoms::refused(), e.to_string())
}

/// The cached entry for a state, decoding `bytes` on a miss.
fn entry(digest: Binary, bytes: Term) -> NifResult<Arc<Entry>> {
    let bin = bytes.decode::<Binary>().ok();
    cache::resolve(digest.as_slice(), || bin.as_ref().map(|b| b.as_slice())).map_err(lookup_error)
}

fn binary<'a>(env: Env<'a>, data: &[u8]) -> Term<'a> {
    NewBinary::from_slice(env, data).into()
}

/// Encodes `scheme`'s state, caches it, and returns `{Digest, Bytes}` terms.
fn publish<'a>(env: Env<'a>, scheme: AnyScheme) -> (Term<'a>, Term<'a>) {
    let (d, bytes, _) = cache::store(scheme);
    (binary(env, &d), binary(env, &bytes))
}

fn change<'a>(env: Env<'a>, scheme: AnyScheme, c: FragChange) -> Term<'a> {
    let (d, b) = publish(env, scheme);
    (d, b, c.iter, c.lock).encode(env)
}

/// A new state: `Spec` is a core spec string (`slots`, `ring:100`, `jump`,
/// `linear`), `N` the fragment count.
#[rustler::nif(schedule = "DirtyCpu")]
fn new_state<'a>(env: Env<'a>, spec: Binary<'a>, n: u32) -> NifResult<Term<'a>> {
    let spec = std::str::from_utf8(spec.as_slice())
        .map_err(|_| raise(atoms::bad_spec(), "spec is not UTF-8".into()))?;
    let scheme = AnyScheme::new(spec, n).map_err(|e| match e {
        fraghash::Error::Spec(e) => raise(atoms::bad_spec(), e.to_string()),
        other => refused(other),
    })?;
    Ok(publish(env, scheme).encode(env))
}

/// A fresh-state description of a new table (see [`crate::fresh`]):
/// `Weights` is `[]` or one weight per fragment (slots only). O(N), and
/// nothing is built until first use.
#[rustler::nif]
fn fresh_state<'a>(
    env: Env<'a>,
    spec: Binary<'a>,
    n: u32,
    weights: Vec<u32>,
) -> NifResult<Term<'a>> {
    let spec = std::str::from_utf8(spec.as_slice())
        .map_err(|_| raise(atoms::bad_spec(), "spec is not UTF-8".into()))?;
    let bytes = crate::fresh::encode(spec, n, &weights).map_err(refused)?;
    let d = cache::digest(&bytes);
    Ok((binary(env, &d), binary(env, &bytes)).encode(env))
}

/// The fragment (1-based) of `erlang:phash2(Key, 1 bsl 32)`, or `miss` when
/// the state is not cached on this thread or globally (then call
/// `load_locate/3`, which runs on a dirty scheduler).
#[rustler::nif]
fn locate<'a>(env: Env<'a>, digest: Binary<'a>, h32: u32) -> NifResult<Term<'a>> {
    match cache::locate(digest.as_slice(), widen_phash2(h32)).map_err(lookup_error)? {
        Some(f) => Ok((f + 1).encode(env)),
        None => Ok(atoms::miss().encode(env)),
    }
}

/// As `locate/2`, decoding and caching the state bytes on a miss.
#[rustler::nif(schedule = "DirtyCpu")]
fn load_locate<'a>(digest: Binary<'a>, bytes: Term<'a>, h32: u32) -> NifResult<u32> {
    Ok(entry(digest, bytes)?.locate(widen_phash2(h32)) + 1)
}

/// Adds a fragment (see [`mnesia::add`]); `max_donors` 0 means no bound.
#[rustler::nif(schedule = "DirtyCpu")]
fn add_frag<'a>(
    env: Env<'a>,
    digest: Binary<'a>,
    bytes: Term<'a>,
    weight: u32,
    max_donors: u32,
) -> NifResult<Term<'a>> {
    let mut scheme = entry(digest, bytes)?.scheme.clone();
    let donors = if max_donors == 0 {
        u32::MAX
    } else {
        max_donors
    };
    let c = mnesia::add(&mut scheme, weight, donors).map_err(refused)?;
    Ok(change(env, scheme, c))
}

/// Removes the last fragment (see [`mnesia::del_last`]).
#[rustler::nif(schedule = "DirtyCpu")]
fn del_frag<'a>(env: Env<'a>, digest: Binary<'a>, bytes: Term<'a>) -> NifResult<Term<'a>> {
    let mut scheme = entry(digest, bytes)?.scheme.clone();
    let c = mnesia::del_last(&mut scheme).map_err(refused)?;
    Ok(change(env, scheme, c))
}

/// `slots` only: sets fragment `frag`'s (1-based) weight. Returns the
/// fragments that lose slots as `IterFrags` and those that gain as the lock
/// list (Mnesia has no hook to move records between existing fragments, so
/// the adapter uses this only while a table has one fragment).
#[rustler::nif(schedule = "DirtyCpu")]
fn set_weight<'a>(
    env: Env<'a>,
    digest: Binary<'a>,
    bytes: Term<'a>,
    frag: u32,
    weight: u32,
) -> NifResult<Term<'a>> {
    let mut scheme = entry(digest, bytes)?.scheme.clone();
    let id = frag
        .checked_sub(1)
        .ok_or_else(|| refused("fragment numbers start at 1"))?;
    let plan = scheme.set_weight(id, weight).map_err(refused)?;
    let iter: Vec<u32> = plan.sources().iter().map(|s| s + 1).collect();
    let mut lock: Vec<u32> = plan.moves.iter().filter_map(to_of).map(|t| t + 1).collect();
    lock.sort_unstable();
    lock.dedup();
    Ok(change(env, scheme, FragChange { iter, lock }))
}

fn to_of(m: &fraghash::Move) -> Option<u32> {
    match m {
        fraghash::Move::Ranges { to, .. } => Some(*to),
        fraghash::Move::Filter { .. } => None,
    }
}

/// A description of a state: `#{spec, fragments, memory_bytes}` and, for
/// `slots`, `slot_bits`, `slots_per_fragment` and `weights`.
#[rustler::nif(schedule = "DirtyCpu")]
fn info<'a>(env: Env<'a>, digest: Binary<'a>, bytes: Term<'a>) -> NifResult<Term<'a>> {
    let e = entry(digest, bytes)?;
    let s = &e.scheme;
    let mut map = Term::map_new(env);
    let put = |m: Term<'a>, k: rustler::Atom, v: Term<'a>| m.map_put(k, v);
    map = put(map, atoms::spec(), binary(env, s.spec().as_bytes()))?;
    map = put(map, atoms::fragments(), s.fragments().encode(env))?;
    map = put(map, atoms::memory_bytes(), s.memory_bytes().encode(env))?;
    if let Some(sl) = s.as_slots() {
        map = put(map, atoms::slot_bits(), sl.slot_bits().encode(env))?;
        map = put(
            map,
            atoms::slots_per_fragment(),
            sl.slots_per_fragment().encode(env),
        )?;
        map = put(map, atoms::weights(), sl.weights().encode(env))?;
    }
    Ok(map)
}

/// `{Entries, DecodedBytes}` of the global state cache.
#[rustler::nif]
fn cache_stats() -> (usize, usize) {
    cache::stats()
}

/// The digest (xxh3-128, 16 bytes) that states are cached by.
#[rustler::nif(schedule = "DirtyCpu")]
fn digest<'a>(env: Env<'a>, bytes: Binary<'a>) -> Term<'a> {
    binary(env, &cache::digest(bytes.as_slice()))
}

rustler::init!("fraghash_nif");
